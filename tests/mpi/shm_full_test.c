/* What a job sees when /dev/shm cannot hold what it asks for (run by
 * small_devshm.sh in a mount namespace whose /dev/shm is small): a shared
 * window larger than /dev/shm is refused with MPI_ERR_NO_MEM on every member,
 * not a SIGBUS at the first store into it, and the job goes on: collectives
 * on new communicators (whose node segments may not fit either) still give
 * the right answers, point to point if they must.
 * Usage: shm_full_test MIB (the shared window's size per rank, in MiB). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const MPI_Aint bytes = (MPI_Aint)(argc > 1 ? atol(argv[1]) : 64) << 20;

  char* base = NULL;
  MPI_Win win = MPI_WIN_NULL;
  const int rc = MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  int error_class = MPI_SUCCESS;
  MPI_Error_class(rc, &error_class);
  CHECK(error_class == MPI_ERR_NO_MEM);
  if (rc == MPI_SUCCESS) {
    memset(base, 1, (size_t)bytes); /* where a SIGBUS would come */
    MPI_Win_free(&win);
  }

  /* New communicators, each with collectives large and small. */
  for (int round = 0; round < 3; ++round) {
    MPI_Comm dup;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
    enum { kCount = 64 * 1024 };
    int* in = malloc(kCount * sizeof(int));
    int* out = malloc(kCount * sizeof(int));
    for (int i = 0; i < kCount; ++i) in[i] = rank + i;
    CHECK(MPI_Allreduce(in, out, kCount, MPI_INT, MPI_SUM, dup) == MPI_SUCCESS);
    for (int i = 0; i < kCount; ++i)
      if (out[i] != size * (size - 1) / 2 + size * i) {
        CHECK(out[i] == size * (size - 1) / 2 + size * i);
        break;
      }
    int value = rank == 0 ? 42 + round : -1;
    CHECK(MPI_Bcast(&value, 1, MPI_INT, 0, dup) == MPI_SUCCESS);
    CHECK(value == 42 + round);
    CHECK(MPI_Barrier(dup) == MPI_SUCCESS);
    free(in);
    free(out);
    MPI_Comm_free(&dup);
  }

  return finish("shm_full_test");
}
