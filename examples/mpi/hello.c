/* hello: every rank reports in; rank 0 checks that all of them did. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, len;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  printf("hello from rank %d of %d on %s\n", rank, size, host);

  int one = 1, total = 0;
  MPI_Reduce(&one, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  int status = 0;
  if (rank == 0) {
    printf("%d of %d ranks said hello\n", total, size);
    status = total == size ? 0 : 1;
  }
  MPI_Finalize();
  return status;
}
