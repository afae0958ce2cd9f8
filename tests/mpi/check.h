/* Test helpers for the MPI test programs: CHECK records a failure with its
 * line; finish() combines every rank's verdict and returns the exit status. */
#pragma once
#include <mpi.h>
#include <stdio.h>

static int check_failures = 0;

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      int check_rank_;                                                                           \
      MPI_Comm_rank(MPI_COMM_WORLD, &check_rank_);                                               \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", check_rank_, __FILE__, __LINE__, #cond); \
      ++check_failures;                                                                          \
    }                                                                                            \
  } while (0)

static inline int finish(const char* name) {
  int total = 0, rank, size;
  MPI_Allreduce(&check_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) printf("%s on %d ranks: %s (%d failed checks)\n", name, size, total ? "FAILED" : "ok", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
