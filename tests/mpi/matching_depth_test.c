/* A deep queue of one sender's messages, or of receives from one sender,
 * must not slow the messages of another. Matching against one queue in
 * order walks past the whole depth for every message of the other sender
 * (about ten seconds here for each part below); matching by sender takes the
 * head of that sender's own queue. Needs 3 ranks; more only take part in the
 * final check.
 *
 * Unexpected messages: rank 1 sends rank 0 kMessages messages, each received
 * by source. Then rank 2 sends rank 0 kBacklog messages that no receive is
 * posted for, and rank 0 waits until they have all arrived (it probes the
 * last); then rank 1 sends its kMessages again. Then the backlog is
 * received, by source and with MPI_ANY_SOURCE: order per sender holds, and a
 * wildcard receive takes the message that arrived first.
 *
 * Posted receives: rank 0 makes kRoundTrips round trips with rank 1, its
 * receive posted before it asks; then it posts kPosted receives from rank 2
 * and makes them again; then rank 2 sends, and each posted receive gets its
 * message in order.
 *
 * Wildcard and named receives together: a message goes to the receive posted
 * first of those it matches, whichever queue holds it. */
#include <stdlib.h>

#include "check.h"

enum {
  kBacklog = 50000,
  kMessages = 50000,
  kPosted = 50000,
  kRoundTrips = 10000,
  kBacklogTag = 7,
  kLastTag = 8,
  kExchangeTag = 9
};

/* Each part's messages from rank 1 are timed without the depth first (the
 * baseline) and then with it: matching by sender, the two take about as
 * long (milliseconds, more under a sanitizer); walking the depth, seconds
 * more. The second may take kSlack seconds more than kTimes the first. */
static const double kTimes = 10.0, kSlack = 1.0;

/* rank 0: kMessages messages from rank 1, each received by source; returns the seconds they took. */
static double receive_from_rank_1(void) {
  const double start = MPI_Wtime();
  for (int i = 0; i < kMessages; ++i) {
    int value = -1;
    MPI_Recv(&value, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(value == i);
    if (value != i) break;
  }
  return MPI_Wtime() - start;
}

/* rank 1: on rank 0's word, kMessages messages to it. */
static void send_to_rank_0(void) {
  int go;
  MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < kMessages; ++i) MPI_Send(&i, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD);
}

static void unexpected_messages(int rank, int size) {
  if (rank == 2) {
    int go;
    MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < kBacklog; ++i) MPI_Send(&i, 1, MPI_INT, 0, kBacklogTag, MPI_COMM_WORLD);
    MPI_Send(&size, 1, MPI_INT, 0, kLastTag, MPI_COMM_WORLD);
  } else if (rank == 1) {
    send_to_rank_0(); /* the baseline */
    send_to_rank_0();
    int go;
    MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&rank, 1, MPI_INT, 0, kLastTag, MPI_COMM_WORLD);
  } else if (rank == 0) {
    MPI_Status status;
    MPI_Send(&rank, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD); /* go */
    const double baseline = receive_from_rank_1();
    MPI_Send(&rank, 1, MPI_INT, 2, kExchangeTag, MPI_COMM_WORLD); /* go */
    /* Every message of rank 2 is in the unexpected queue once its last one is seen. */
    MPI_Probe(2, kLastTag, MPI_COMM_WORLD, &status);
    MPI_Send(&rank, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD); /* go */
    const double seconds = receive_from_rank_1();
    printf("%d receives from rank 1: %.3f s, past %d unexpected messages from rank 2: %.3f s\n", kMessages, baseline,
           kBacklog, seconds);
    CHECK(seconds < kSlack + kTimes * baseline);
    /* A message from rank 1 that arrives after the backlog: a wildcard receive still takes rank 2's first. */
    MPI_Send(&rank, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD);
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
    MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    CHECK(status.MPI_SOURCE == 1 && status.MPI_TAG == kLastTag && value == 1);
  }
}

/* rank 0: kRoundTrips round trips with rank 1, the receive of each answer
 * posted before the question is sent; returns the seconds they took. */
static double round_trips_with_rank_1(void) {
  const double start = MPI_Wtime();
  for (int i = 0; i < kRoundTrips; ++i) {
    int answer = -1;
    MPI_Request reply;
    MPI_Irecv(&answer, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD, &reply);
    MPI_Send(&i, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD);
    MPI_Wait(&reply, MPI_STATUS_IGNORE);
    CHECK(answer == i);
    if (answer != i) break;
  }
  return MPI_Wtime() - start;
}

static void posted_receives(int rank) {
  if (rank == 2) {
    int go;
    MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < kPosted; ++i) MPI_Send(&i, 1, MPI_INT, 0, kBacklogTag, MPI_COMM_WORLD);
  } else if (rank == 1) {
    for (int i = 0; i < 2 * kRoundTrips; ++i) { /* the baseline's, then the timed ones */
      int asked = -1;
      MPI_Recv(&asked, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&asked, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD);
    }
  } else if (rank == 0) {
    const double baseline = round_trips_with_rank_1();
    int* values = malloc(kPosted * sizeof *values);
    MPI_Request* posted = malloc(kPosted * sizeof *posted);
    CHECK(values && posted);
    if (!values || !posted) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < kPosted; ++i) {
      values[i] = -1;
      MPI_Irecv(&values[i], 1, MPI_INT, 2, kBacklogTag, MPI_COMM_WORLD, &posted[i]);
    }
    const double seconds = round_trips_with_rank_1();
    printf("%d round trips with rank 1: %.3f s, past %d receives posted for rank 2: %.3f s\n", kRoundTrips, baseline,
           kPosted, seconds);
    CHECK(seconds < kSlack + kTimes * baseline);
    MPI_Send(&rank, 1, MPI_INT, 2, kExchangeTag, MPI_COMM_WORLD); /* go */
    MPI_Waitall(kPosted, posted, MPI_STATUSES_IGNORE);
    int wrong = 0;
    for (int i = 0; i < kPosted; ++i) wrong += values[i] != i;
    CHECK(wrong == 0);
    free(values);
    free(posted);
  }
}

static void wildcard_order(int rank) {
  enum { kReceives = 6 };
  if (rank == 1) {
    int go;
    MPI_Recv(&go, 1, MPI_INT, 0, kExchangeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < kReceives; ++i) MPI_Send(&i, 1, MPI_INT, 0, kBacklogTag, MPI_COMM_WORLD);
  } else if (rank == 0) {
    /* Posted in this order: wildcard, named, wildcard (any tag), named, named, wildcard. */
    const int sources[kReceives] = {MPI_ANY_SOURCE, 1, MPI_ANY_SOURCE, 1, 1, MPI_ANY_SOURCE};
    int values[kReceives];
    MPI_Request posted[kReceives];
    for (int i = 0; i < kReceives; ++i) {
      values[i] = -1;
      MPI_Irecv(&values[i], 1, MPI_INT, sources[i], i == 2 ? MPI_ANY_TAG : kBacklogTag, MPI_COMM_WORLD, &posted[i]);
    }
    MPI_Send(&rank, 1, MPI_INT, 1, kExchangeTag, MPI_COMM_WORLD); /* go */
    MPI_Waitall(kReceives, posted, MPI_STATUSES_IGNORE);
    for (int i = 0; i < kReceives; ++i) CHECK(values[i] == i);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 3) {
    if (rank == 0) fprintf(stderr, "matching_depth_test needs 3 ranks\n");
    MPI_Finalize();
    return 2;
  }
  unexpected_messages(rank, size);
  MPI_Barrier(MPI_COMM_WORLD);
  posted_receives(rank);
  MPI_Barrier(MPI_COMM_WORLD);
  wildcard_order(rank);
  return finish("matching_depth_test");
}
