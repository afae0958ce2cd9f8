/* One-sided synchronization and atomics:
 * - passive target while the target sleeps outside MPI: every other rank
 *   locks rank 0's window, puts, accumulates, fetch-and-ops, compares and
 *   swaps, unlocks, and reads its updates back, all before rank 0 wakes up;
 * - exclusive locks exclude each other: every rank increments one counter
 *   by get + put under an exclusive lock, the total is exact;
 * - Fetch_and_op, Accumulate and Compare_and_swap increments from every rank
 *   into one location at once add up, and the fetched values are all distinct;
 * - lock_all with flush, flush_local(_all), Get_accumulate, request-based
 *   Rput/Rget/Raccumulate/Rget_accumulate;
 * - post/start/complete/wait and Win_test around a ring;
 * - the error class of each misuse under MPI_ERRORS_RETURN. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static int rank, size;

static int error_class(int code) {
  int cls = code;
  MPI_Error_class(code, &cls);
  return cls;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rank 0's window: slot r for rank r's put, then a counter for accumulates,
 * one for fetch-and-op and one for compare-and-swap. */
static void sleeping_target(void) {
  const int sleep_seconds = 3;
  long* base;
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)(size + 3) * (MPI_Aint)sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                   &win);
  for (int i = 0; i < size + 3; ++i) base[i] = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    sleep(sleep_seconds); /* outside MPI: the target's CPU is not in the library */
  } else {
    const double start = now();
    const long mine = 1000 + rank, one = 1;
    long fetched = -1, swapped = -1;
    MPI_Win_lock(rank % 2 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, win);
    CHECK(MPI_Put(&mine, 1, MPI_LONG, 0, rank, 1, MPI_LONG, win) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(&one, 1, MPI_LONG, 0, size, 1, MPI_LONG, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Fetch_and_op(&one, &fetched, MPI_LONG, 0, size + 1, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    CHECK(fetched >= 0 && fetched < size - 1);
    /* Compare and swap until this rank's increment lands. */
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    long expected = 0;
    for (;;) {
      const long desired = expected + 1;
      CHECK(MPI_Compare_and_swap(&desired, &expected, &swapped, MPI_LONG, 0, size + 2, win) == MPI_SUCCESS);
      MPI_Win_flush(0, win);
      if (swapped == expected) break;
      expected = swapped;
    }
    MPI_Win_unlock(0, win);
    /* After unlock the update is at the target: read it back while it still sleeps. */
    long back = -1;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Get(&back, 1, MPI_LONG, 0, rank, 1, MPI_LONG, win);
    MPI_Win_unlock(0, win);
    CHECK(back == mine);
    const double took = now() - start;
    if (took >= sleep_seconds * 0.8)
      fprintf(stderr, "rank %d: the epochs took %.2f s: they waited for the sleeping target\n", rank, took);
    CHECK(took < sleep_seconds * 0.8);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    for (int r = 1; r < size; ++r) CHECK(base[r] == 1000 + r);
    CHECK(base[size] == size - 1);
    CHECK(base[size + 1] == size - 1);
    CHECK(base[size + 2] == size - 1);
    MPI_Win_unlock(0, win);
  }
  MPI_Win_free(&win);
}

/* Get, add one, put, under an exclusive lock: lost updates would show in the total. */
static void exclusive_counter(void) {
  const int rounds = 40;
  int* base;
  MPI_Win win;
  MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  *base = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const int target = size - 1;
  for (int i = 0; i < rounds; ++i) {
    int value = -1;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
    MPI_Get(&value, 1, MPI_INT, target, 0, 1, MPI_INT, win);
    MPI_Win_flush(target, win);
    ++value;
    if (i % 3 == 0) usleep(200); /* hold the lock a while: others must wait */
    MPI_Put(&value, 1, MPI_INT, target, 0, 1, MPI_INT, win);
    MPI_Win_unlock(target, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int total = -1;
  MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
  MPI_Get(&total, 1, MPI_INT, target, 0, 1, MPI_INT, win);
  MPI_Win_unlock(target, win);
  CHECK(total == rounds * size);
  MPI_Win_free(&win);
}

static int compare_longs(const void* a, const void* b) {
  const long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}

/* Every rank increments one location by Fetch_and_op, Accumulate and
 * Compare_and_swap at once, in a lock_all epoch. */
static void concurrent_atomics(void) {
  enum { rounds = 30 };
  long* base;
  MPI_Win win;
  MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  *base = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  long fetched[rounds];
  const long one = 1;
  MPI_Win_lock_all(0, win);
  for (int i = 0; i < rounds; ++i) {
    CHECK(MPI_Fetch_and_op(&one, &fetched[i], MPI_LONG, 0, 0, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win) == MPI_SUCCESS);
    long seen = 0, old = -1;
    MPI_Fetch_and_op(NULL, &seen, MPI_LONG, 0, 0, MPI_NO_OP, win);
    MPI_Win_flush(0, win);
    for (;;) {
      const long desired = seen + 1;
      MPI_Compare_and_swap(&desired, &seen, &old, MPI_LONG, 0, 0, win);
      MPI_Win_flush(0, win);
      if (old == seen) break;
      seen = old;
    }
  }
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  long total = -1;
  MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
  MPI_Get(&total, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
  MPI_Win_unlock(0, win);
  CHECK(total == 3L * rounds * size);
  /* Each fetch-and-op saw a different value. */
  long* all = malloc(sizeof(long) * rounds * (size_t)size);
  MPI_Gather(fetched, rounds, MPI_LONG, all, rounds, MPI_LONG, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    qsort(all, (size_t)rounds * (size_t)size, sizeof(long), compare_longs);
    for (int i = 1; i < rounds * size; ++i) CHECK(all[i] != all[i - 1]);
  }
  free(all);
  MPI_Win_free(&win);
}

/* lock_all, flushes, Get_accumulate and the request-based operations. */
static void lock_all_and_requests(void) {
  enum { n = 512 };
  int* base;
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)n * size * (MPI_Aint)sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                   &win);
  memset(base, 0, (size_t)n * (size_t)size * sizeof(int));
  MPI_Barrier(MPI_COMM_WORLD);
  int* out = malloc(sizeof(int) * n);
  int* back = malloc(sizeof(int) * n);
  MPI_Win_lock_all(0, win);
  for (int t = 0; t < size; ++t) {
    for (int i = 0; i < n; ++i) out[i] = rank * 1000000 + t * 1000 + i;
    CHECK(MPI_Put(out, n, MPI_INT, t, (MPI_Aint)rank * n, n, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_flush_local(t, win) == MPI_SUCCESS);  /* out may change now */
    CHECK(MPI_Win_flush(t, win) == MPI_SUCCESS);        /* and the put is at t */
    CHECK(MPI_Get(back, n, MPI_INT, t, (MPI_Aint)rank * n, n, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_flush_local_all(win) == MPI_SUCCESS);
    CHECK(memcmp(out, back, sizeof(int) * n) == 0);
  }
  /* Get_accumulate: swap in new values (MPI_REPLACE), then read them (MPI_NO_OP). */
  const int right = (rank + 1) % size;
  for (int i = 0; i < n; ++i) out[i] = -i - rank;
  CHECK(MPI_Get_accumulate(out, n, MPI_INT, back, n, MPI_INT, right, (MPI_Aint)rank * n, n, MPI_INT, MPI_REPLACE,
                           win) == MPI_SUCCESS);
  CHECK(MPI_Win_flush_all(win) == MPI_SUCCESS);
  for (int i = 0; i < n; ++i) CHECK(back[i] == rank * 1000000 + right * 1000 + i);
  CHECK(MPI_Get_accumulate(NULL, 0, MPI_INT, back, n, MPI_INT, right, (MPI_Aint)rank * n, n, MPI_INT, MPI_NO_OP,
                           win) == MPI_SUCCESS);
  MPI_Win_flush(right, win);
  for (int i = 0; i < n; ++i) CHECK(back[i] == -i - rank);

  /* Request-based: each completes on its own, by Wait or Test. */
  MPI_Request requests[4];
  int one[n], got[n], before[n];
  for (int i = 0; i < n; ++i) one[i] = 1;
  for (int i = 0; i < n; ++i) out[i] = i;
  CHECK(MPI_Rput(out, n, MPI_INT, right, (MPI_Aint)rank * n, n, MPI_INT, win, &requests[0]) == MPI_SUCCESS);
  CHECK(MPI_Wait(&requests[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(requests[0] == MPI_REQUEST_NULL);
  MPI_Win_flush(right, win);
  CHECK(MPI_Raccumulate(one, n, MPI_INT, right, (MPI_Aint)rank * n, n, MPI_INT, MPI_SUM, win, &requests[1]) ==
        MPI_SUCCESS);
  CHECK(MPI_Rget_accumulate(one, n, MPI_INT, before, n, MPI_INT, right, (MPI_Aint)rank * n, n, MPI_INT, MPI_SUM, win,
                            &requests[2]) == MPI_SUCCESS);
  CHECK(MPI_Waitall(2, &requests[1], MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  for (int i = 0; i < n; ++i) CHECK(before[i] == i + 1); /* accumulates from one origin are ordered */
  MPI_Win_flush(right, win);
  CHECK(MPI_Rget(got, n, MPI_INT, right, (MPI_Aint)rank * n, n, MPI_INT, win, &requests[3]) == MPI_SUCCESS);
  int done = 0;
  while (!done) CHECK(MPI_Test(&requests[3], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  for (int i = 0; i < n; ++i) CHECK(got[i] == i + 2);
  /* A request-based operation on MPI_PROC_NULL is complete at once. */
  MPI_Request nothing;
  CHECK(MPI_Rput(out, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win, &nothing) == MPI_SUCCESS);
  CHECK(MPI_Wait(&nothing, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_Win_unlock_all(win);
  free(out);
  free(back);
  MPI_Win_free(&win);
}

/* Generalized active target around a ring: each rank exposes its window to
 * its left neighbour and accesses its right one. */
static void post_start_complete_wait(void) {
  int* base;
  MPI_Win win;
  MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  base[0] = base[1] = -1;
  MPI_Group world, left_group, right_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  MPI_Group_incl(world, 1, &left, &left_group);
  MPI_Group_incl(world, 1, &right, &right_group);
  for (int round = 0; round < 20; ++round) {
    CHECK(MPI_Win_post(left_group, 0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_start(right_group, 0, win) == MPI_SUCCESS);
    const int value = rank * 100 + round, one = 1;
    CHECK(MPI_Put(&value, 1, MPI_INT, right, 0, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(&one, 1, MPI_INT, right, 1, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Win_complete(win) == MPI_SUCCESS);
    if (round % 2) {
      CHECK(MPI_Win_wait(win) == MPI_SUCCESS);
    } else {
      int flag = 0;
      while (!flag) CHECK(MPI_Win_test(win, &flag) == MPI_SUCCESS);
    }
    CHECK(base[0] == left * 100 + round);
    CHECK(base[1] == round);
  }
  MPI_Group_free(&left_group);
  MPI_Group_free(&right_group);
  MPI_Group_free(&world);
  MPI_Win_free(&win);
}

static void bad_arguments(void) {
  int* base;
  MPI_Win win;
  MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  int x = 1, y = 0;
  double d = 1.0, e = 0.0;
  MPI_Request request;
  MPI_Group world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  CHECK(error_class(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, MPI_WIN_NULL)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_flush(0, MPI_WIN_NULL)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_lock(12345, 0, 0, win)) == MPI_ERR_LOCKTYPE);
  CHECK(error_class(MPI_Win_lock(MPI_LOCK_SHARED, size, 0, win)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Win_lock(MPI_LOCK_SHARED, -5, 0, win)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0x7fff0000, win)) == MPI_ERR_ASSERT);
  /* Outside any epoch. */
  CHECK(error_class(MPI_Win_unlock(0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_unlock_all(win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_flush(0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_flush_all(win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_flush_local(0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_flush_local_all(win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Put(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Fetch_and_op(&x, &y, MPI_INT, 0, 0, MPI_SUM, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Compare_and_swap(&x, &y, &y, MPI_INT, 0, 0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Rput(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win, &request)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_complete(win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_wait(win)) == MPI_ERR_RMA_SYNC);
  int flag;
  CHECK(error_class(MPI_Win_test(win, &flag)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Win_post(MPI_GROUP_NULL, 0, win)) == MPI_ERR_GROUP);
  /* Fence-opened epochs do not allow request-based operations. */
  MPI_Win_fence(0, win);
  CHECK(error_class(MPI_Rget(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win, &request)) == MPI_ERR_RMA_SYNC);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  /* Inside a lock epoch. */
  CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
  CHECK(error_class(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win)) == MPI_ERR_RMA_SYNC); /* twice */
  CHECK(error_class(MPI_Win_lock_all(0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(error_class(MPI_Put(&x, 1, MPI_INT, 0, 4, 1, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Put(&x, 1, MPI_INT, 0, -1, 1, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Compare_and_swap(&d, &e, &e, MPI_DOUBLE, 0, 0, win)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Fetch_and_op(&x, &y, MPI_INT, 0, 0, MPI_OP_NULL, win)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Accumulate(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_NO_OP, win)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Rput(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Win_free(&win)) == MPI_ERR_RMA_SYNC); /* a lock is still held */
  CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
  CHECK(error_class(MPI_Win_unlock(0, win)) == MPI_ERR_RMA_SYNC); /* once only */
  /* Active target misuse. */
  CHECK(MPI_Win_post(world, 0, win) == MPI_SUCCESS);
  CHECK(error_class(MPI_Win_post(world, 0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(MPI_Win_start(world, 0, win) == MPI_SUCCESS);
  CHECK(error_class(MPI_Win_start(world, 0, win)) == MPI_ERR_RMA_SYNC);
  CHECK(MPI_Win_complete(win) == MPI_SUCCESS);
  CHECK(MPI_Win_wait(win) == MPI_SUCCESS);
  MPI_Group_free(&world);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (size > 1) sleeping_target();
  exclusive_counter();
  concurrent_atomics();
  lock_all_and_requests();
  post_start_complete_wait();
  bad_arguments();
  return finish("rma_sync_test");
}
