/* Many ranks with connections made on first use.
 *
 *   scale_test [basic]  hello, barriers, allreduces and a ring exchange, each
 *                       answer checked; rank 0 reports the set-up times (when
 *                       the last rank started, finished MPI_Init and the first
 *                       barrier), the largest VmRSS and the most peers a rank
 *                       connected to.
 *   scale_test all      every rank sends to every other at once, so that every
 *                       pair asks for its connection from both sides at the same
 *                       time: each message arrives exactly once.
 *   scale_test neighbours  each rank talks only to its ring neighbours: over
 *                       shm it maps their segments and no other rank's (a
 *                       connection maps its peer's segment), checked before
 *                       any collective.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static int rank, size;

/* Wall-clock time, comparable across the ranks of one machine. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A field of /proc/self/status in KiB, or -1. */
static long status_kib(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long value = -1;
  const size_t n = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') value = strtol(line + n + 1, NULL, 10);
  fclose(f);
  return value;
}

/* The shm segments of other ranks' NICs this process has mapped
 * (/dev/shm/viastack.<job>/nic.<N>), as a bitmap by N; how many. */
static int mapped_peer_segments(unsigned char* seen) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[1024];
  int count = 0;
  while (fgets(line, sizeof line, f)) {
    const char* path = strstr(line, "/dev/shm/viastack.");
    const char* nic = path ? strstr(path, "/nic.") : NULL;
    if (!nic) continue;
    const long n = strtol(nic + 5, NULL, 10);
    if (n < 0 || n >= size || n == rank || seen[n]) continue;
    seen[n] = 1;
    ++count;
  }
  fclose(f);
  return count;
}

/* The largest VmRSS and number of peer segments mapped (over shm: peers connected) of any rank. */
static void report_memory(void) {
  unsigned char* seen = calloc((size_t)size, 1);
  long stats[2] = {status_kib("VmRSS"), seen ? mapped_peer_segments(seen) : -1}, most[2];
  free(seen);
  MPI_Reduce(stats, most, 2, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("scale_test: largest VmRSS %ld KiB, most peer segments mapped %ld\n", most[0], most[1]);
}

static void basic(double start, double initialized) {
  /* Hello: everyone reports in to rank 0. */
  int one = 1, total = 0;
  CHECK(MPI_Reduce(&one, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  if (rank == 0) CHECK(total == size);
  CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
  /* When the first rank started, the last one started, finished MPI_Init and left the barrier. */
  double times[4] = {-start, start, initialized, now_s()}, latest[4];
  MPI_Reduce(times, latest, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  const double first_start = -latest[0];

  double phase = now_s();
  for (int round = 0; round < 3; ++round) CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
  const double barriers = now_s() - phase;
  phase = now_s();

  long long sum = 0, mine = rank;
  CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(sum == (long long)size * (size - 1) / 2);
  int max = -1;
  CHECK(MPI_Allreduce(&rank, &max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(max == size - 1);
  enum { n = 1000 };
  static double v[n], w[n];
  for (int i = 0; i < n; ++i) v[i] = rank + i;
  CHECK(MPI_Allreduce(v, w, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  for (int i = 0; i < n; ++i) CHECK(w[i] == (double)size * (size - 1) / 2 + (double)i * size);

  const double allreduces = now_s() - phase;
  phase = now_s();
  /* Ring: each rank swaps with its neighbours, then a token goes round twice. */
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int from_left = -1;
  CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 1, &from_left, 1, MPI_INT, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(from_left == left);
  for (int lap = 0; lap < 2; ++lap) {
    int token = 0;
    if (rank == 0) {
      token = lap * size + 1;
      MPI_Send(&token, 1, MPI_INT, right, 2, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(token == lap * size + size);
    } else {
      MPI_Recv(&token, 1, MPI_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(token == lap * size + rank);
      ++token;
      MPI_Send(&token, 1, MPI_INT, right, 2, MPI_COMM_WORLD);
    }
  }

  const double ring = now_s() - phase;
  if (rank == 0)
    printf("scale_test: %d ranks: from the first rank's start, the last started at %.3f s, had finished MPI_Init at "
           "%.3f s and the first barrier at %.3f s\n",
           size, latest[1] - first_start, latest[2] - first_start, latest[3] - first_start);
  if (rank == 0)
    printf("scale_test: rank 0 spent %.3f s in 3 barriers, %.3f s in 3 allreduces, %.3f s in the ring\n", barriers,
           allreduces, ring);
}

static void everyone_at_once(void) {
  int* in = malloc(sizeof(int) * 2 * (size_t)size);
  int* out = malloc(sizeof(int) * 2 * (size_t)size);
  MPI_Request* requests = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
  CHECK(in && out && requests);
  int count = 0;
  for (int p = 0; p < size; ++p) {
    in[2 * p] = in[2 * p + 1] = -1;
    out[2 * p] = rank;
    out[2 * p + 1] = p;
    if (p == rank) continue;
    MPI_Irecv(&in[2 * p], 2, MPI_INT, p, 7, MPI_COMM_WORLD, &requests[count++]);
  }
  for (int p = 0; p < size; ++p)
    if (p != rank) MPI_Isend(&out[2 * p], 2, MPI_INT, p, 7, MPI_COMM_WORLD, &requests[count++]);
  CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  for (int p = 0; p < size; ++p)
    if (p != rank) CHECK(in[2 * p] == p && in[2 * p + 1] == rank);
  /* Nothing arrives twice: once everyone is past its sends, no message is left. */
  MPI_Barrier(MPI_COMM_WORLD);
  int stray = 0;
  CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &stray, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(!stray);
  free(in);
  free(out);
  free(requests);
}

/* Each rank talks only to its ring neighbours. A rank checks its mappings,
 * then a token goes round the ring twice over the same connections: once
 * every rank has checked (first lap), none goes on to the collectives of
 * finish(), which would connect others, before the second lap reaches it. */
static void neighbours(void) {
  if (size < 2) return;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int from_left = -1, from_right = -1;
  CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 3, &from_left, 1, MPI_INT, left, 3, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, left, 4, &from_right, 1, MPI_INT, right, 4, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(from_left == left && from_right == right);
  unsigned char* seen = calloc((size_t)size, 1);
  CHECK(seen != NULL);
  if (seen) {
    const int mapped = mapped_peer_segments(seen);
    CHECK(mapped == (left == right ? 1 : 2));
    CHECK(seen[left] && seen[right]);
    if (mapped != (left == right ? 1 : 2)) fprintf(stderr, "rank %d: %d peer segments mapped\n", rank, mapped);
    free(seen);
  }
  for (int lap = 0; lap < 2; ++lap) {
    int token = lap;
    if (rank == 0) {
      MPI_Send(&token, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&token, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
    }
    CHECK(token == lap);
  }
}

int main(int argc, char** argv) {
  const double start = now_s();
  MPI_Init(&argc, &argv);
  const double initialized = now_s();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "basic";
  if (strcmp(mode, "basic") == 0) {
    basic(start, initialized);
  } else if (strcmp(mode, "all") == 0) {
    everyone_at_once();
  } else if (strcmp(mode, "neighbours") == 0) {
    neighbours();
  } else {
    if (rank == 0) fprintf(stderr, "scale_test: unknown mode '%s' (basic, all or neighbours)\n", mode);
    MPI_Finalize();
    return 2;
  }
  report_memory();
  return finish("scale_test");
}
