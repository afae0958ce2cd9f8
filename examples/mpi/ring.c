/* ring: a token goes round the ranks LAPS times, each rank adding one; then
 * a large message (past the eager limit) goes round once. Rank 0 checks both. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int laps = argc > 1 ? atoi(argv[1]) : 100;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int failed = 0;

  for (int lap = 0; lap < laps; ++lap) {
    long token;
    if (rank == 0) {
      token = (long)lap * size;
      MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (token != (long)lap * size + size - 1) failed = 1;
    } else {
      MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += 1;
      MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
    }
  }

  const int n = 1 << 18; /* 1 MiB of ints */
  int* big = malloc(n * sizeof(int));
  if (rank == 0) {
    for (int i = 0; i < n; ++i) big[i] = i;
    MPI_Send(big, n, MPI_INT, next, 1, MPI_COMM_WORLD);
    memset(big, 0, n * sizeof(int));
    MPI_Recv(big, n, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; ++i)
      if (big[i] != i + size - 1) failed = 1;
  } else {
    MPI_Recv(big, n, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; ++i) big[i] += 1;
    MPI_Send(big, n, MPI_INT, next, 1, MPI_COMM_WORLD);
  }
  free(big);

  if (rank == 0) printf("ring: %d ranks, %d laps and a 1 MiB message: %s\n", size, laps, failed ? "WRONG" : "ok");
  MPI_Finalize();
  return failed;
}
