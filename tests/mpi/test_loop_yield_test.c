/* A rank that waits by a loop of its own tests (MPI_Test, MPI_Iprobe, ...)
 * on an oversubscribed node must give the core to the rank it waits for,
 * as MPI_Wait does. All ranks run on one CPU: viarun is started bound to it
 * (on_one_cpu.sh), so that it tells the library the node is outnumbered and
 * leaves its ranks there; each rank binds itself to the lowest CPU any of
 * them may use in any case. In each round rank 1 computes for kWorkCpuSeconds of its
 * own CPU time and then sends; rank 0 waits for that message by one kind of
 * test loop. A tester that never yields takes half the core from rank 1,
 * whose work then lasts about twice its CPU time; one that yields once it
 * has found nothing for a while leaves rank 1 the core (about 1.0x). The
 * round fails above kMaxStretch (the test runs alone: RUN_SERIAL). More ranks than 2 only take part in the
 * final check. */
#define _GNU_SOURCE
#include <sched.h>
#include <time.h>

#include "check.h"

static const double kWorkCpuSeconds = 0.2, kMaxStretch = 1.5;
enum { kAttempts = 3 };

enum { kTest, kTestall, kTestany, kTestsome, kIprobe, kImprobe, kRequestGetStatus, kKinds };
static const char* const kKindNames[kKinds] = {"MPI_Test",     "MPI_Testall", "MPI_Testany",           "MPI_Testsome",
                                               "MPI_Iprobe",   "MPI_Improbe", "MPI_Request_get_status"};

static double seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Every rank on the lowest CPU any of them may use; false if a rank cannot go there. */
static int bind_all_to_one_cpu(void) {
  cpu_set_t allowed, one;
  int first = CPU_SETSIZE, lowest;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE && first == CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed)) first = cpu;
  MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CPU_ZERO(&one);
  CPU_SET(lowest, &one);
  int bound = lowest < CPU_SETSIZE && sched_setaffinity(0, sizeof one, &one) == 0, all = 0;
  MPI_Allreduce(&bound, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

/* rank 0: waits for rank 1's message of round `kind` by that kind of test loop. */
static void wait_by_tests(int kind) {
  int value = -1, flag = 0;
  MPI_Request request;
  if (kind == kIprobe) {
    while (!flag) MPI_Iprobe(1, kind, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    MPI_Recv(&value, 1, MPI_INT, 1, kind, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (kind == kImprobe) {
    MPI_Message message;
    while (!flag) MPI_Improbe(1, kind, MPI_COMM_WORLD, &flag, &message, MPI_STATUS_IGNORE);
    MPI_Mrecv(&value, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
  } else {
    MPI_Irecv(&value, 1, MPI_INT, 1, kind, MPI_COMM_WORLD, &request);
    int index, count, indices[1];
    while (!flag) {
      switch (kind) {
        case kTest: MPI_Test(&request, &flag, MPI_STATUS_IGNORE); break;
        case kTestall: MPI_Testall(1, &request, &flag, MPI_STATUSES_IGNORE); break;
        case kTestany: MPI_Testany(1, &request, &index, &flag, MPI_STATUS_IGNORE); break;
        case kTestsome:
          MPI_Testsome(1, &request, &count, indices, MPI_STATUSES_IGNORE);
          flag = count > 0;
          break;
        case kRequestGetStatus:
          MPI_Request_get_status(request, &flag, MPI_STATUS_IGNORE);
          if (flag) MPI_Wait(&request, MPI_STATUS_IGNORE);
          break;
      }
    }
  }
  CHECK(value == kind);
}

/* rank 1: computes for kWorkCpuSeconds of CPU time, sends, and returns the wall time over the CPU time. */
static double work_then_send(int kind) {
  const double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_THREAD_CPUTIME_ID);
  volatile unsigned long spin = 0;
  while (seconds(CLOCK_THREAD_CPUTIME_ID) - cpu < kWorkCpuSeconds)
    for (int i = 0; i < 10000; ++i) spin = spin + 1;
  const double stretch = (seconds(CLOCK_MONOTONIC) - wall) / (seconds(CLOCK_THREAD_CPUTIME_ID) - cpu);
  MPI_Send(&kind, 1, MPI_INT, 0, kind, MPI_COMM_WORLD);
  return stretch;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size >= 2);
  const int bound = bind_all_to_one_cpu();
  CHECK(bound);
  for (int kind = 0; kind < kKinds && size >= 2 && bound; ++kind) {
    /* Other processes on the CPU stretch the work too: a round that took too
     * long is tried again, up to kAttempts (a tester that never yields takes
     * its half in every one). */
    double stretch = 0;
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 0) wait_by_tests(kind);
      if (rank == 1) {
        stretch = work_then_send(kind);
        printf("%s loop: the computing rank's work took %.2f times its CPU time\n", kKindNames[kind], stretch);
      }
      MPI_Bcast(&stretch, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
      if (stretch <= kMaxStretch) break;
    }
    if (rank == 1) CHECK(stretch <= kMaxStretch);
  }
  return finish("test_loop_yield");
}
