/* One-sided communication with fences: put/get of every predefined type and
 * of sizes 0 B .. 4 MiB (across the rendezvous threshold) to every rank,
 * accumulate from every rank into one element and into arrays, gets of
 * values their owners wrote, errors under MPI_ERRORS_RETURN, and windows
 * freed and created again. */
#include <complex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "check.h"

static int rank, size;

static unsigned char pattern(size_t i, int seed) { return (unsigned char)(i * 7 + seed * 13 + (i >> 9)); }

static void fill(unsigned char* buf, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i) buf[i] = pattern(i, seed);
}

static int matches(const unsigned char* buf, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i)
    if (buf[i] != pattern(i, seed)) return 0;
  return 1;
}

/* What `origin` puts into `target`'s window for a test case. */
static int seed_of(int origin, int target, int salt) { return origin * 31 + target * 7 + salt; }

/* Every rank puts `count` elements into its own slot of every rank's window
 * (itself included), then gets its slot back from every rank; all checked
 * byte for byte. */
static void put_get(MPI_Datatype type, int count, int salt) {
  MPI_Aint lb, extent;
  MPI_Type_get_extent(type, &lb, &extent);
  const size_t slot = (size_t)count * (size_t)extent;
  unsigned char* window = malloc(slot * (size_t)size + 1);
  unsigned char* out = malloc(slot * (size_t)size + 1);
  unsigned char* back = malloc(slot * (size_t)size + 1);
  memset(window, 0, slot * (size_t)size);
  memset(back, 0, slot * (size_t)size);
  MPI_Win win;
  CHECK(MPI_Win_create(window, (MPI_Aint)(slot * (size_t)size), (int)extent, MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
        MPI_SUCCESS);
  CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
  for (int t = 0; t < size; ++t) {
    unsigned char* mine = out + (size_t)t * slot;
    fill(mine, slot, seed_of(rank, t, salt));
    CHECK(MPI_Put(mine, count, type, t, (MPI_Aint)rank * count, count, type, win) == MPI_SUCCESS);
  }
  CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
  for (int o = 0; o < size; ++o) CHECK(matches(window + (size_t)o * slot, slot, seed_of(o, rank, salt)));
  for (int t = 0; t < size; ++t)
    CHECK(MPI_Get(back + (size_t)t * slot, count, type, t, (MPI_Aint)rank * count, count, type, win) == MPI_SUCCESS);
  CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
  for (int t = 0; t < size; ++t) CHECK(matches(back + (size_t)t * slot, slot, seed_of(rank, t, salt)));
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
  CHECK(win == MPI_WIN_NULL);
  free(window);
  free(out);
  free(back);
}

static void every_type(void) {
  const MPI_Datatype types[] = {
      MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT, MPI_UNSIGNED,
      MPI_LONG, MPI_UNSIGNED_LONG, MPI_LONG_LONG_INT, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE,
      MPI_WCHAR, MPI_C_BOOL, MPI_INT8_T, MPI_UINT8_T, MPI_INT16_T, MPI_UINT16_T, MPI_INT32_T, MPI_UINT32_T,
      MPI_INT64_T, MPI_UINT64_T, MPI_AINT, MPI_OFFSET, MPI_COUNT, MPI_C_COMPLEX, MPI_C_FLOAT_COMPLEX,
      MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX, MPI_PACKED, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT,
      MPI_2INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) put_get(types[i], 37, (int)i);
}

static void every_size(void) {
  const int list[] = {0, 1, 7, 100, 4096, 16383, 16384, 16385, 65536, 1 << 20, (4 << 20) + 3};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; ++i) put_get(MPI_BYTE, list[i], 100 + (int)i);
}

/* Everyone adds into one element of every rank's window, many times in one epoch. */
static void accumulate_one_element(void) {
  long counter = 0;
  MPI_Win win;
  MPI_Win_create(&counter, sizeof counter, sizeof counter, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(0, win);
  enum { rounds = 200 };
  const long mine = rank + 1;
  for (int i = 0; i < rounds; ++i)
    for (int t = 0; t < size; ++t) CHECK(MPI_Accumulate(&mine, 1, MPI_LONG, t, 0, 1, MPI_LONG, MPI_SUM, win) == MPI_SUCCESS);
  MPI_Win_fence(0, win);
  CHECK(counter == (long)rounds * size * (size + 1) / 2);
  MPI_Win_free(&win);
}

/* Arrays of int, double and long, small and larger than the eager limit. */
static void accumulate_arrays(int n) {
  int* ints = calloc((size_t)n, sizeof *ints);
  double* doubles = calloc((size_t)n, sizeof *doubles);
  long* longs = calloc((size_t)n, sizeof *longs);
  int* my_ints = malloc((size_t)n * sizeof *my_ints);
  double* my_doubles = malloc((size_t)n * sizeof *my_doubles);
  long* my_longs = malloc((size_t)n * sizeof *my_longs);
  for (int i = 0; i < n; ++i) {
    my_ints[i] = rank * i + 1;
    my_doubles[i] = 0.5 * rank * i + 0.25;
    my_longs[i] = (long)rank * i * 1000003L + 7;
  }
  MPI_Win wi, wd, wl;
  MPI_Win_create(ints, (MPI_Aint)n * (MPI_Aint)sizeof *ints, sizeof *ints, MPI_INFO_NULL, MPI_COMM_WORLD, &wi);
  MPI_Win_create(doubles, (MPI_Aint)n * (MPI_Aint)sizeof *doubles, sizeof *doubles, MPI_INFO_NULL, MPI_COMM_WORLD, &wd);
  MPI_Win_create(longs, (MPI_Aint)n * (MPI_Aint)sizeof *longs, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wl);
  MPI_Win_fence(0, wi);
  MPI_Win_fence(0, wd);
  MPI_Win_fence(0, wl);
  for (int t = 0; t < size; ++t) {
    CHECK(MPI_Accumulate(my_ints, n, MPI_INT, t, 0, n, MPI_INT, MPI_SUM, wi) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(my_doubles, n, MPI_DOUBLE, t, 0, n, MPI_DOUBLE, MPI_SUM, wd) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(my_longs, n, MPI_LONG, t, 0, n, MPI_LONG, MPI_SUM, wl) == MPI_SUCCESS);
  }
  MPI_Win_fence(0, wi);
  MPI_Win_fence(0, wd);
  MPI_Win_fence(0, wl);
  const long ranks = (long)size * (size - 1) / 2; /* the sum of every rank number */
  int bad_ints = 0, bad_doubles = 0, bad_longs = 0;
  for (int i = 0; i < n; ++i) {
    bad_ints += ints[i] != (int)(ranks * i + size);
    bad_doubles += doubles[i] != 0.5 * (double)ranks * i + 0.25 * size;
    bad_longs += longs[i] != ranks * i * 1000003L + 7L * size;
  }
  CHECK(bad_ints == 0);
  CHECK(bad_doubles == 0);
  CHECK(bad_longs == 0);
  MPI_Win_free(&wi);
  MPI_Win_free(&wd);
  MPI_Win_free(&wl);
  free(ints);
  free(doubles);
  free(longs);
  free(my_ints);
  free(my_doubles);
  free(my_longs);
}

/* MPI_REPLACE, MAXLOC on a pair type, and MPI_PROC_NULL targets. */
static void accumulate_other_ops(void) {
  struct { int value, index; } pair = {-1, -1}, mine = {rank % 2 == 0 ? rank : -rank, rank};
  int replaced[4] = {0, 0, 0, 0};
  MPI_Win wp, wr;
  MPI_Win_create(&pair, sizeof pair, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wp);
  MPI_Win_create(replaced, sizeof replaced, sizeof replaced[0], MPI_INFO_NULL, MPI_COMM_WORLD, &wr);
  MPI_Win_fence(0, wp);
  MPI_Win_fence(0, wr);
  for (int t = 0; t < size; ++t) CHECK(MPI_Accumulate(&mine, 1, MPI_2INT, t, 0, 1, MPI_2INT, MPI_MAXLOC, wp) == MPI_SUCCESS);
  /* Rank r replaces element r % 4 of rank 0's array; the highest such rank is the only writer when size <= 4. */
  const int value = 1000 + rank;
  if (rank < 4) CHECK(MPI_Accumulate(&value, 1, MPI_INT, 0, rank, 1, MPI_INT, MPI_REPLACE, wr) == MPI_SUCCESS);
  CHECK(MPI_Accumulate(&value, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, MPI_SUM, wr) == MPI_SUCCESS);
  CHECK(MPI_Put(&value, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, wr) == MPI_SUCCESS);
  MPI_Win_fence(0, wp);
  MPI_Win_fence(0, wr);
  const int top = (size - 1) / 2 * 2; /* the largest even rank */
  CHECK(pair.value == top && pair.index == top);
  if (rank == 0)
    for (int i = 0; i < 4; ++i) CHECK(replaced[i] == (i < size ? 1000 + i : 0));
  MPI_Win_free(&wp);
  MPI_Win_free(&wr);
}

/* Each owner writes its own window, fences, and everyone reads it. */
static void get_owner_writes(void) {
  int cell[2] = {0, 0};
  MPI_Win win;
  MPI_Win_create(cell, sizeof cell, sizeof cell[0], MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  int* seen = malloc((size_t)size * sizeof *seen);
  for (int round = 0; round < 3; ++round) {
    MPI_Win_fence(0, win);
    cell[1] = rank * 1000 + round;
    MPI_Win_fence(0, win);
    for (int t = 0; t < size; ++t) MPI_Get(&seen[t], 1, MPI_INT, t, 1, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (int t = 0; t < size; ++t) CHECK(seen[t] == t * 1000 + round);
  }
  MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  MPI_Win_free(&win);
  free(seen);
}

static int error_class(int code) {
  int c = -1;
  MPI_Error_class(code, &c);
  return c;
}

static void user_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

static void errors(void) {
  int cells[4] = {0, 0, 0, 0};
  MPI_Win win;
  MPI_Win_create(cells, sizeof cells, sizeof cells[0], MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Errhandler handler;
  CHECK(MPI_Win_get_errhandler(win, &handler) == MPI_SUCCESS && handler == MPI_ERRORS_ARE_FATAL);
  CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN) == MPI_SUCCESS);
  CHECK(MPI_Win_get_errhandler(win, &handler) == MPI_SUCCESS && handler == MPI_ERRORS_RETURN);
  const int v[5] = {1, 2, 3, 4, 5};
  const int peer = (rank + 1) % size;
  /* Before the first fence no epoch is open. */
  CHECK(error_class(MPI_Put(v, 1, MPI_INT, peer, 0, 1, MPI_INT, win)) == MPI_ERR_RMA_SYNC);
  MPI_Win_fence(0, win);
  CHECK(error_class(MPI_Put(v, 1, MPI_INT, peer, 4, 1, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Put(v, 5, MPI_INT, peer, 0, 5, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Put(v, 1, MPI_INT, peer, -1, 1, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Get(cells, 2, MPI_INT, peer, 3, 2, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Accumulate(v, 1, MPI_INT, peer, 100, 1, MPI_INT, MPI_SUM, win)) == MPI_ERR_RMA_RANGE);
  CHECK(error_class(MPI_Put(v, 1, MPI_INT, size, 0, 1, MPI_INT, win)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Put(v, 1, MPI_INT, peer, 0, 2, MPI_INT, win)) == MPI_ERR_ARG);
  MPI_Datatype strided;
  MPI_Type_vector(2, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  CHECK(error_class(MPI_Put(v, 1, strided, peer, 0, 1, strided, win)) == MPI_ERR_TYPE);
  MPI_Type_free(&strided);
  MPI_Op op;
  MPI_Op_create(user_sum, 1, &op);
  CHECK(error_class(MPI_Accumulate(v, 1, MPI_INT, peer, 0, 1, MPI_INT, op, win)) == MPI_ERR_OP);
  MPI_Op_free(&op);
  CHECK(error_class(MPI_Accumulate(v, 1, MPI_INT, peer, 0, 1, MPI_INT, MPI_MAXLOC, win)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Accumulate(v, 1, MPI_INT, peer, 0, 1, MPI_UNSIGNED, MPI_SUM, win)) == MPI_ERR_TYPE);
  /* The last in-range put still lands. */
  CHECK(MPI_Put(&v[4], 1, MPI_INT, peer, 3, 1, MPI_INT, win) == MPI_SUCCESS);
  MPI_Win_fence(0, win);
  CHECK(cells[3] == 5 && cells[0] == 0);
  MPI_Win_free(&win);
  /* A bad window is reported through MPI_COMM_WORLD's handler. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK(error_class(MPI_Win_fence(0, MPI_WIN_NULL)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_free(&win)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_create(cells, -1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win)) == MPI_ERR_SIZE);
  CHECK(error_class(MPI_Win_create(cells, sizeof cells, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &win)) == MPI_ERR_DISP);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Windows freed and made again, on a split communicator, with empty windows among them. */
static void create_again(void) {
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hrank, hsize;
  MPI_Comm_rank(half, &hrank);
  MPI_Comm_size(half, &hsize);
  for (int round = 0; round < 4; ++round) {
    double cell = -1.0;
    MPI_Win win;
    /* Every third rank offers no memory in odd rounds. */
    const int empty = round % 2 == 1 && hrank % 3 == 2;
    CHECK(MPI_Win_create(empty ? NULL : &cell, empty ? 0 : sizeof cell, sizeof cell, MPI_INFO_NULL, half, &win) ==
          MPI_SUCCESS);
    MPI_Win_fence(0, win);
    const int target = (hrank + 1) % hsize;
    const int target_empty = round % 2 == 1 && target % 3 == 2;
    const double value = hrank + round * 0.5;
    if (!target_empty) MPI_Put(&value, 1, MPI_DOUBLE, target, 0, 1, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    if (!empty) CHECK(cell == (hrank + hsize - 1) % hsize + round * 0.5);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
  }
  MPI_Comm_free(&half);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  every_type();
  every_size();
  accumulate_one_element();
  accumulate_arrays(1000);
  accumulate_arrays(100000);
  accumulate_other_ops();
  get_owner_writes();
  errors();
  create_again();
  return finish("rma_test");
}
