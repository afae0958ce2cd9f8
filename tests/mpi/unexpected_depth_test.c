/* A deep unexpected queue from one sender must not slow receives from
 * another. Rank 2 sends rank 0 kBacklog messages that no receive is posted
 * for, and rank 0 waits until they have all arrived (it probes the last);
 * then rank 1 sends rank 0 kExchanges messages, each received by source.
 * Matching against one queue in arrival order walks past the whole backlog
 * for every receive from rank 1 (2.5e9 steps, about ten seconds here);
 * matching by sender takes the head of rank 1's own messages. Then the
 * backlog is received, by source and with MPI_ANY_SOURCE, checking that
 * order per sender holds and that a wildcard receive takes the message that
 * arrived first. Needs 3 ranks; more only take part in the final check. */
#include <stdlib.h>

#include "check.h"

enum { kBacklog = 50000, kExchanges = 50000, kBacklogTag = 7, kLastTag = 8, kExchangeTag = 9 };

/* Seconds rank 1's messages may take: milliseconds when matching is by sender. */
static const double kExchangeLimit = 2.0;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 3) {
    if (rank == 0) fprintf(stderr, "unexpected_depth_test needs 3 ranks\n");
    MPI_Finalize();
    return 2;
  }
  if (rank == 2) {
    for (int i = 0; i < kBacklog; ++i) MPI_Send(&i, 1, MPI_INT, 0, kBacklogTag, MPI_COMM_WORLD);
    MPI_Send(&size, 1, MPI_INT, 0, kLastTag, MPI_COMM_WORLD);
  } else if (rank == 0) {
    MPI_Status status;
    /* Every message of rank 2 is in the unexpected queue once its last one is seen. */
    MPI_Probe(2, kLastTag, MPI_COMM_WORLD, &status);
    MPI_Send(&rank, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD); /* go */
    const double start = MPI_Wtime();
    for (int i = 0; i < kExchanges; ++i) {
      int value = -1;
      MPI_Recv(&value, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD, &status);
      CHECK(value == i);
      if (value != i) break;
    }
    const double seconds = MPI_Wtime() - start;
    printf("%d receives from rank 1 past %d unexpected messages from rank 2: %.3f s\n", kExchanges, kBacklog,
           seconds);
    CHECK(seconds < kExchangeLimit);
    /* A message from rank 1 that arrives after the backlog: a wildcard receive still takes rank 2's first. */
    MPI_Send(&rank, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD);
    int late = -1;
    MPI_Probe(1, kLastTag, MPI_COMM_WORLD, &status); /* rank 1's message is here */
    int value = -1;
    MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    CHECK(status.MPI_SOURCE == 2 && status.MPI_TAG == kBacklogTag && value == 0);
    /* The rest of the backlog in order, alternating the ways of asking. */
    for (int i = 1; i < kBacklog; ++i) {
      MPI_Recv(&value, 1, MPI_INT, i % 2 ? 2 : MPI_ANY_SOURCE, i % 3 ? kBacklogTag : MPI_ANY_TAG, MPI_COMM_WORLD,
               &status);
      CHECK(status.MPI_SOURCE == 2 && value == i);
      if (value != i) break;
    }
    MPI_Recv(&value, 1, MPI_INT, 2, kLastTag, MPI_COMM_WORLD, &status);
    CHECK(value == size);
    MPI_Recv(&late, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    CHECK(status.MPI_SOURCE == 1 && status.MPI_TAG == kLastTag && late == 1);
  } else if (rank == 1) {
    int go;
    MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < kExchanges; ++i) MPI_Send(&i, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&rank, 1, MPI_INT, 0, kLastTag, MPI_COMM_WORLD);
  }
  return finish("unexpected_depth_test");
}
