/* Collectives allocate no temporary the size of the message where the
 * algorithm needs none (issue 25): on 2 ranks, MPI_Reduce of a 1 MiB vector
 * to either root (the root receives straight into its result, the other rank
 * sends its own buffer) allocates nothing of 1 MiB or more, and still
 * computes the right sums. The largest allocation is seen by a malloc of
 * this program's, which the library's operator new reaches first.
 * Exit 77 (skipped) under AddressSanitizer, which owns malloc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static int counting;
static size_t largest;

#if defined(__SANITIZE_ADDRESS__)
#define OWN_MALLOC 0
#else
#define OWN_MALLOC 1
extern void* __libc_malloc(size_t bytes);
void* malloc(size_t bytes) {
  if (counting && bytes > largest) largest = bytes;
  return __libc_malloc(bytes);
}
#endif

enum { kCount = 1 << 18 }; /* ints: 1 MiB */

static int sums_right(const int* got, int size) {
  for (int i = 0; i < kCount; ++i)
    if (got[i] != size * (size - 1) / 2 + size * i) return 0;
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!OWN_MALLOC || size != 2) {
    if (rank == 0) printf("SKIPPED: %s\n", OWN_MALLOC ? "needs 2 ranks" : "AddressSanitizer owns malloc");
    MPI_Finalize();
    return 77;
  }
  int* mine = malloc(kCount * sizeof(int));
  int* got = malloc(kCount * sizeof(int));
  for (int i = 0; i < kCount; ++i) mine[i] = rank + i;
  const size_t message = kCount * sizeof(int);

  for (int root = 0; root < size; ++root) {
    /* Once for the connection and the library's own first-use state, then measured. */
    MPI_Reduce(mine, got, kCount, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    largest = 0;
    counting = 1;
    MPI_Reduce(mine, got, kCount, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    counting = 0;
    if (largest >= message) fprintf(stderr, "rank %d: MPI_Reduce to %d allocated %zu bytes\n", rank, root, largest);
    CHECK(largest < message);
    if (rank == root) CHECK(sums_right(got, size));
  }

  free(mine);
  free(got);
  return finish("coll_alloc_test");
}
