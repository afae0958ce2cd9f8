/* MPI_THREAD_MULTIPLE (issue 18): two threads per rank, each exchanging
 * messages with its partner thread on the neighbouring rank, at once. Thread 0
 * starts with a blocking MPI_Recv that only thread 1's partner can satisfy
 * after thread 1 here has sent: a call that held the library while it waited
 * would deadlock the job. Small and rendezvous-sized messages, blocking and
 * non-blocking, and a collective on a communicator of each thread's own. */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

enum { kRounds = 200, kBig = 40000 };

struct worker {
  int thread, rank, size;
  MPI_Comm comm; /* a duplicate of MPI_COMM_WORLD per thread, for its collectives */
  int failures;
};

static void* run(void* arg) {
  struct worker* w = arg;
  const int partner = w->rank ^ 1, tag = w->thread;
  int* big_out = malloc(sizeof(int) * kBig);
  int* big_in = malloc(sizeof(int) * kBig);
  if (w->thread == 0) {
    /* Waits for the partner rank's thread 0, which sends only after hearing from this rank's thread 1. */
    int got = -1;
    MPI_Recv(&got, 1, MPI_INT, partner, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got != partner * 10 + 1) ++w->failures;
    int mine = w->rank * 10;
    MPI_Send(&mine, 1, MPI_INT, partner, 101, MPI_COMM_WORLD);
  } else {
    int mine = w->rank * 10 + 1, got = -1;
    MPI_Send(&mine, 1, MPI_INT, partner, 100, MPI_COMM_WORLD);
    MPI_Recv(&got, 1, MPI_INT, partner, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got != partner * 10) ++w->failures;
  }
  for (int round = 0; round < kRounds; ++round) {
    const int value = w->rank * 1000000 + w->thread * 1000 + round;
    int got = -1;
    if (round % 2) {
      MPI_Sendrecv(&value, 1, MPI_INT, partner, tag, &got, 1, MPI_INT, partner, tag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    } else {
      MPI_Request reqs[2];
      MPI_Irecv(&got, 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &reqs[0]);
      MPI_Isend(&value, 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &reqs[1]);
      MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    }
    if (got != partner * 1000000 + w->thread * 1000 + round) ++w->failures;
    if (round % 20 == 0) {
      for (int i = 0; i < kBig; ++i) big_out[i] = value + i;
      MPI_Sendrecv(big_out, kBig, MPI_INT, partner, tag + 10, big_in, kBig, MPI_INT, partner, tag + 10,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < kBig; ++i)
        if (big_in[i] != got + i) {
          ++w->failures;
          break;
        }
      int sum = 0, one = 1;
      MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, w->comm);
      if (sum != w->size) ++w->failures;
    }
  }
  free(big_out);
  free(big_in);
  return NULL;
}

int main(int argc, char** argv) {
  int provided = -1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CHECK(provided == MPI_THREAD_MULTIPLE);
  int queried = -1;
  MPI_Query_thread(&queried);
  CHECK(queried == MPI_THREAD_MULTIPLE);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Pairs of ranks; an odd last rank sits out. */
  const int paired = (rank ^ 1) < size;
  struct worker workers[2];
  for (int t = 0; t < 2; ++t) {
    workers[t] = (struct worker){t, rank, size, MPI_COMM_NULL, 0};
    MPI_Comm_dup(MPI_COMM_WORLD, &workers[t].comm);
  }
  if (paired && size % 2 == 0) {
    pthread_t threads[2];
    for (int t = 0; t < 2; ++t) pthread_create(&threads[t], NULL, run, &workers[t]);
    for (int t = 0; t < 2; ++t) pthread_join(threads[t], NULL);
    for (int t = 0; t < 2; ++t) CHECK(workers[t].failures == 0);
  }
  for (int t = 0; t < 2; ++t) MPI_Comm_free(&workers[t].comm);
  return finish("threads_test");
}
