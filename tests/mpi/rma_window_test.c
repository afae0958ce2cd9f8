/* Window creation beyond MPI_Win_create: MPI_Win_allocate, MPI_Win_allocate_shared
 * with MPI_Win_shared_query (stores of one rank seen by the others after
 * MPI_Win_sync and a barrier), MPI_Win_create_dynamic with attach/detach
 * (displacements are addresses from MPI_Get_address), MPI_Win_get_group, and
 * the error classes of bad arguments under MPI_ERRORS_RETURN.
 * With the argument "spans_nodes" (ranks on two nodes): MPI_Win_allocate_shared
 * over MPI_COMM_WORLD fails with MPI_ERR_RMA_SHARED on every rank. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int error_class(int code) {
  int cls = code;
  MPI_Error_class(code, &cls);
  return cls;
}

static void allocate(void) {
  enum { n = 64 };
  int* base = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate(n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) == MPI_SUCCESS);
  CHECK(base != NULL);
  for (int i = 0; i < n; ++i) base[i] = -1;
  MPI_Win_fence(0, win);
  /* Each rank writes its slot of every rank's window, then reads its right neighbour's whole window. */
  for (int t = 0; t < size; ++t) {
    int value = rank * 1000 + t;
    CHECK(MPI_Put(&value, 1, MPI_INT, t, rank, 1, MPI_INT, win) == MPI_SUCCESS);
  }
  MPI_Win_fence(0, win);
  for (int o = 0; o < size; ++o) CHECK(base[o] == o * 1000 + rank);
  int back[n];
  const int right = (rank + 1) % size;
  CHECK(MPI_Get(back, n, MPI_INT, right, 0, n, MPI_INT, win) == MPI_SUCCESS);
  MPI_Win_fence(0, win);
  for (int o = 0; o < size; ++o) CHECK(back[o] == o * 1000 + right);
  for (int i = size; i < n; ++i) CHECK(back[i] == -1);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
  CHECK(win == MPI_WIN_NULL);

  /* An empty window still gives a usable handle. */
  void* empty = NULL;
  CHECK(MPI_Win_allocate(0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &empty, &win) == MPI_SUCCESS);
  MPI_Win_fence(0, win);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
}

static void allocate_shared(void) {
  /* Rank r holds r + 1 longs; rank 0's neighbour sees its stores directly. */
  const MPI_Aint mine = (MPI_Aint)(rank + 1) * (MPI_Aint)sizeof(long);
  long* base = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_shared(mine, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) == MPI_SUCCESS);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  for (int i = 0; i <= rank; ++i) base[i] = rank * 100 + i;
  CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
  char* previous_end = NULL;
  for (int r = 0; r < size; ++r) {
    MPI_Aint bytes = -1;
    int disp_unit = 0;
    long* theirs = NULL;
    CHECK(MPI_Win_shared_query(win, r, &bytes, &disp_unit, &theirs) == MPI_SUCCESS);
    CHECK(bytes == (MPI_Aint)(r + 1) * (MPI_Aint)sizeof(long));
    CHECK(disp_unit == (int)sizeof(long));
    if (r == rank) CHECK(theirs == base);
    /* Contiguous by default: each rank's memory follows the previous rank's. */
    if (previous_end) CHECK((char*)theirs == previous_end);
    previous_end = (char*)theirs + bytes;
    for (int i = 0; i <= r; ++i) CHECK(theirs[i] == r * 100 + i);
  }
  /* A store into the neighbour's memory, seen by it after the next sync and barrier. */
  const int right = (rank + 1) % size;
  MPI_Aint bytes;
  int disp_unit;
  long* theirs;
  MPI_Win_shared_query(win, right, &bytes, &disp_unit, &theirs);
  MPI_Barrier(MPI_COMM_WORLD);
  theirs[0] = 7000 + rank;
  MPI_Win_sync(win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_sync(win);
  CHECK(base[0] == 7000 + (rank + size - 1) % size);
  /* MPI_PROC_NULL: the lowest rank with memory (rank 0 here). */
  CHECK(MPI_Win_shared_query(win, MPI_PROC_NULL, &bytes, &disp_unit, &theirs) == MPI_SUCCESS);
  CHECK(bytes == (MPI_Aint)sizeof(long));
  MPI_Win_unlock_all(win);
  /* The memory is a window as any other: RMA into it works too. */
  long value = 5000 + rank;
  MPI_Win_fence(0, win);
  MPI_Put(&value, 1, MPI_LONG, right, 0, 1, MPI_LONG, win);
  MPI_Win_fence(0, win);
  CHECK(base[0] == 5000 + (rank + size - 1) % size);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
}

static void dynamic(void) {
  MPI_Win win;
  CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int round = 0; round < 3; ++round) {
    /* A fresh buffer each round (the old one detached): origins learn of it afresh. */
    const int n = 10 + round * 1000;
    int* buffer = calloc((size_t)n, sizeof(int));
    CHECK(MPI_Win_attach(win, buffer, (MPI_Aint)n * (MPI_Aint)sizeof(int)) == MPI_SUCCESS);
    MPI_Aint mine, theirs;
    CHECK(MPI_Get_address(buffer, &mine) == MPI_SUCCESS);
    MPI_Sendrecv(&mine, 1, MPI_AINT, left, 0, &theirs, 1, MPI_AINT, right, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int* out = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; ++i) out[i] = rank * 100000 + round * 1000 + i;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    CHECK(MPI_Put(out, n, MPI_INT, right, theirs, n, MPI_INT, win) == MPI_SUCCESS);
    /* Past the end of the attached memory: the standard's range error, nothing written. */
    CHECK(error_class(MPI_Put(out, 1, MPI_INT, right, theirs + (MPI_Aint)n * (MPI_Aint)sizeof(int), 1, MPI_INT, win)) ==
          MPI_ERR_RMA_RANGE);
    MPI_Win_unlock(right, win);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) CHECK(buffer[i] == left * 100000 + round * 1000 + i);
    /* Read it back from the origin side, and access this rank's own memory by address too. */
    int first = -1, own = -1;
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Get(&first, 1, MPI_INT, right, theirs + (MPI_Aint)sizeof(int), 1, MPI_INT, win);
    MPI_Win_unlock(right, win);
    CHECK(first == rank * 100000 + round * 1000 + 1);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    MPI_Get(&own, 1, MPI_INT, rank, mine, 1, MPI_INT, win);
    MPI_Win_unlock(rank, win);
    CHECK(own == left * 100000 + round * 1000);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_detach(win, buffer) == MPI_SUCCESS);
    free(buffer);
    free(out);
  }
  /* Nothing attached any more: every access is out of range. */
  int x = 0;
  MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
  CHECK(error_class(MPI_Put(&x, 1, MPI_INT, right, 4096, 1, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
  MPI_Win_unlock(right, win);
  int a[4], b[4];
  CHECK(MPI_Win_attach(win, a, sizeof a) == MPI_SUCCESS);
  CHECK(error_class(MPI_Win_attach(win, a + 2, sizeof a)) == MPI_ERR_RMA_ATTACH); /* overlaps */
  CHECK(error_class(MPI_Win_attach(win, b, -1)) == MPI_ERR_SIZE);
  CHECK(error_class(MPI_Win_detach(win, b)) == MPI_ERR_ARG); /* never attached */
  CHECK(MPI_Win_detach(win, a) == MPI_SUCCESS);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
}

static void group_of_window(void) {
  int* base;
  MPI_Win win;
  MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Group group;
  CHECK(MPI_Win_get_group(win, &group) == MPI_SUCCESS);
  int group_size = -1, group_rank = -1;
  MPI_Group_size(group, &group_size);
  MPI_Group_rank(group, &group_rank);
  CHECK(group_size == size && group_rank == rank);
  MPI_Group_free(&group);
  MPI_Win_free(&win);
}

static void bad_arguments(void) {
  MPI_Win win = MPI_WIN_NULL;
  void* base = NULL;
  CHECK(error_class(MPI_Win_allocate(-1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win)) == MPI_ERR_SIZE);
  CHECK(error_class(MPI_Win_allocate(8, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win)) == MPI_ERR_DISP);
  CHECK(error_class(MPI_Win_allocate(8, 1, MPI_INFO_NULL, MPI_COMM_NULL, &base, &win)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Win_allocate_shared(-8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win)) == MPI_ERR_SIZE);
  CHECK(error_class(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_NULL, &win)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Win_attach(MPI_WIN_NULL, &base, 8)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_shared_query(MPI_WIN_NULL, 0, NULL, NULL, NULL)) == MPI_ERR_WIN);

  CHECK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) == MPI_SUCCESS);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Aint bytes;
  int disp_unit;
  void* where;
  CHECK(error_class(MPI_Win_shared_query(win, 0, &bytes, &disp_unit, &where)) == MPI_ERR_RMA_FLAVOR);
  CHECK(error_class(MPI_Win_attach(win, &bytes, sizeof bytes)) == MPI_ERR_RMA_FLAVOR);
  MPI_Win_free(&win);

  CHECK(MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) == MPI_SUCCESS);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  CHECK(error_class(MPI_Win_shared_query(win, size, &bytes, &disp_unit, &where)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Win_shared_query(win, 0, NULL, &disp_unit, &where)) == MPI_ERR_ARG);
  MPI_Win_free(&win);
}

static void spans_nodes(void) {
  void* base = NULL;
  MPI_Win win = MPI_WIN_NULL;
  const int code = MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  CHECK(error_class(code) == MPI_ERR_RMA_SHARED);
  CHECK(win == MPI_WIN_NULL);
  /* The job goes on: a window over the ranks of one node still works (viarun
   * places ranks on the two nodes round-robin). */
  MPI_Comm node;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, 0, &node);
  int* mine = NULL;
  CHECK(MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &win) == MPI_SUCCESS);
  *mine = rank;
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  int node_size;
  MPI_Comm_size(node, &node_size);
  for (int r = 0; r < node_size; ++r) {
    MPI_Aint bytes;
    int disp_unit;
    int* theirs;
    MPI_Win_shared_query(win, r, &bytes, &disp_unit, &theirs);
    CHECK(*theirs == rank % 2 + 2 * r);
  }
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (argc > 1 && strcmp(argv[1], "spans_nodes") == 0) {
    spans_nodes();
    return finish("rma_window_test spans_nodes");
  }
  allocate();
  allocate_shared();
  dynamic();
  group_of_window();
  bad_arguments();
  return finish("rma_window_test");
}
