/* A short MPI program whose traffic tests/trace/check_via_trace.sh counts in
 * the VIA trace: rank 0 sends rank 1 EAGER messages of 100 bytes with tag 42
 * (eager), then one of 256 KiB with tag 43 (rendezvous: the receiver reads
 * it by RDMA), then both meet in a barrier.
 *
 *   viarun -n 2 tests/trace/mpi_traced EAGER */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSmall = 100, kLarge = 256 * 1024 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 2 || size != 2) {
    if (rank == 0) fprintf(stderr, "usage: viarun -n 2 mpi_traced EAGER\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int eager = atoi(argv[1]);
  char small[kSmall];
  char* large = malloc(kLarge);
  int status = 0;
  for (int i = 0; i < eager; ++i) {
    memset(small, i, sizeof small);
    if (rank == 0) {
      MPI_Send(small, kSmall, MPI_CHAR, 1, 42, MPI_COMM_WORLD);
    } else {
      char got[kSmall];
      MPI_Recv(got, kSmall, MPI_CHAR, 0, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (memcmp(got, small, kSmall) != 0) status = 1;
    }
  }
  if (rank == 0) {
    for (int i = 0; i < kLarge; ++i) large[i] = (char)(i * 13);
    MPI_Send(large, kLarge, MPI_CHAR, 1, 43, MPI_COMM_WORLD);
  } else {
    MPI_Recv(large, kLarge, MPI_CHAR, 0, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < kLarge; ++i)
      if (large[i] != (char)(i * 13)) status = 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (status) fprintf(stderr, "mpi_traced rank %d: a message arrived wrong\n", rank);
  free(large);
  MPI_Finalize();
  return status;
}
