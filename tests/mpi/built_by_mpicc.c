/* Built by Open MPI's own mpicc, run on viastack's libmpi.so.40: proves it
 * ran on our library (MPI_Get_library_version) and that a ring and a
 * reduction work through Open MPI's copy-relocated predefined objects. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, len;
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_library_version(library, &len);
  int token = rank, got = -1;
  MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT, (rank + size - 1) % size, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  double sum = 0, mine = rank + 1;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const int ok = got == (rank + size - 1) % size && sum == size * (size + 1) / 2.0;
  if (rank == 0) printf("library: %s\nresult: %s\n", library, ok ? "ok" : "WRONG");
  MPI_Finalize();
  return ok ? 0 : 1;
}
