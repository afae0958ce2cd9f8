/* The profiling interface: with the tool of pmpi_counter.c in front of the
 * library (linked before libmpi, or preloaded), every MPI_Send and MPI_Recv
 * of this program is counted by the tool and still moves its message, which
 * only the library's PMPI_Send / PMPI_Recv can do. Calls the tool does not
 * define (MPI_Sendrecv, MPI_Isend) are not counted: the library does not route
 * them through its own MPI_Send. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>

#include "check.h"

typedef void counts_function(long* sent, long* received);

enum { kRounds = 5 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  counts_function* counts = (counts_function*)dlsym(RTLD_DEFAULT, "pmpi_counter_counts");
  CHECK(counts != NULL);
  if (counts == NULL) return finish("pmpi");

  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int round = 0; round < kRounds; ++round) {
    int out = 1000 * rank + round, in = -1;
    if (rank % 2 == 0) {
      CHECK(MPI_Send(&out, 1, MPI_INT, right, round, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(MPI_Recv(&in, 1, MPI_INT, left, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    } else {
      CHECK(MPI_Recv(&in, 1, MPI_INT, left, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      CHECK(MPI_Send(&out, 1, MPI_INT, right, round, MPI_COMM_WORLD) == MPI_SUCCESS);
    }
    CHECK(in == 1000 * left + round);
  }
  /* Not interposed: neither may reach the tool's MPI_Send or MPI_Recv. */
  int out = rank, in = -1;
  MPI_Sendrecv(&out, 1, MPI_INT, right, 99, &in, 1, MPI_INT, left, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(in == left);
  MPI_Request request;
  MPI_Isend(&out, 1, MPI_INT, rank, 98, MPI_COMM_WORLD, &request);
  MPI_Recv(&in, 1, MPI_INT, rank, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&request, MPI_STATUS_IGNORE);

  long sent = -1, received = -1;
  counts(&sent, &received);
  CHECK(sent == kRounds);
  CHECK(received == kRounds + 1);
  /* The PMPI_ names are the library's own entry points, not the tool's. */
  CHECK(dlsym(RTLD_DEFAULT, "PMPI_Send") != dlsym(RTLD_DEFAULT, "MPI_Send"));
  return finish("pmpi");
}
