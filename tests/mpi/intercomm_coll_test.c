/* The collectives on an intercommunicator (MPI-3.1 5.2.2), over two splits of
 * MPI_COMM_WORLD: even and odd ranks (2+2 on 4 ranks), and rank 0 against the
 * rest (1+3). Each group receives what the other group gave: Allreduce,
 * Reduce (root MPI_ROOT / MPI_PROC_NULL / the remote rank), a non-commutative
 * reduction in the remote group's rank order, Gather(v), Scatter(v),
 * Allgather(v), Alltoall(v/w), Reduce_scatter(_block), Barrier and Bcast,
 * blocking and non-blocking (several outstanding at once); and the error
 * classes (MPI_IN_PLACE, a bad root, Scan and Exscan). Needs 2 ranks or more. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* One intercommunicator and what a member knows of it. */
struct Inter {
  MPI_Comm comm;
  int side;         /* 0 or 1 */
  int rank, size;   /* in the local group */
  int remote_size;
  int world_rank;
  int* remote_world; /* the world rank of each remote rank */
};

/* What rank r (of world rank w) contributes at element i. */
static int value(int w, int i) { return 100 * (w + 1) + i; }

/* Decimal concatenation: associative, not commutative, so the result shows the order. */
static void concatenate(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) {
    int scale = 10;
    while (scale <= b[i]) scale *= 10;
    b[i] = a[i] * scale + b[i];
  }
}

static void reductions(const struct Inter* x) {
  enum { kCount = 3 };
  int send[kCount], recv[kCount];
  for (int i = 0; i < kCount; ++i) send[i] = value(x->world_rank, i);
  CHECK(MPI_Allreduce(send, recv, kCount, MPI_INT, MPI_SUM, x->comm) == MPI_SUCCESS);
  for (int i = 0; i < kCount; ++i) {
    int expected = 0;
    for (int r = 0; r < x->remote_size; ++r) expected += value(x->remote_world[r], i);
    CHECK(recv[i] == expected);
  }

  /* The remote group's ranks in order: 1, 2, 3 concatenate to 123. */
  MPI_Op concat;
  MPI_Op_create(concatenate, 0, &concat);
  int digit = x->rank + 1, joined = -1, expected_join = 0;
  for (int r = 0; r < x->remote_size; ++r) expected_join = expected_join * 10 + r + 1;
  CHECK(MPI_Allreduce(&digit, &joined, 1, MPI_INT, concat, x->comm) == MPI_SUCCESS);
  CHECK(joined == expected_join);

  /* Reduce: side 0's last rank is the root, then side 1's first. */
  for (int root_side = 0; root_side < 2; ++root_side) {
    const int root_local = root_side == 0 ? x->size - 1 : 0;
    int root;
    if (x->side == root_side)
      root = x->rank == root_local ? MPI_ROOT : MPI_PROC_NULL;
    else
      root = root_side == 0 ? x->remote_size - 1 : 0;
    int result[kCount] = {-1, -1, -1};
    /* The send buffer is not significant at the root's group, nor anything at MPI_PROC_NULL. */
    const void* contribution = root == MPI_ROOT || root == MPI_PROC_NULL ? NULL : send;
    CHECK(MPI_Reduce(contribution, root == MPI_PROC_NULL ? NULL : result, kCount, MPI_INT, MPI_MAX, root, x->comm) ==
          MPI_SUCCESS);
    if (root == MPI_ROOT)
      for (int i = 0; i < kCount; ++i) {
        int expected = 0;
        for (int r = 0; r < x->remote_size; ++r)
          if (value(x->remote_world[r], i) > expected) expected = value(x->remote_world[r], i);
        CHECK(result[i] == expected);
      }
    else
      CHECK(result[0] == -1);
    joined = -1;
    CHECK(MPI_Reduce(&digit, &joined, 1, MPI_INT, concat, root, x->comm) == MPI_SUCCESS);
    CHECK(root == MPI_ROOT ? joined == expected_join : joined == -1);
  }
  MPI_Op_free(&concat);

  /* Reduce_scatter_block: local_size * remote_size elements, remote_size for each local rank. */
  const int total = x->size * x->remote_size;
  int* in = malloc(sizeof(int) * (size_t)total);
  int* out = malloc(sizeof(int) * (size_t)x->remote_size);
  for (int k = 0; k < total; ++k) in[k] = value(x->world_rank, k);
  CHECK(MPI_Reduce_scatter_block(in, out, x->remote_size, MPI_INT, MPI_SUM, x->comm) == MPI_SUCCESS);
  for (int i = 0; i < x->remote_size; ++i) {
    int expected = 0;
    for (int r = 0; r < x->remote_size; ++r) expected += value(x->remote_world[r], x->rank * x->remote_size + i);
    CHECK(out[i] == expected);
  }
  free(in);
  free(out);

  /* Reduce_scatter: 10 elements, local rank r gets r+1 of them (the last what is left). */
  enum { kTotal = 10 };
  int counts[8], first = 0, mine_first = 0;
  for (int r = 0; r < x->size; ++r) {
    counts[r] = r + 1 < x->size ? r + 1 : kTotal - first;
    if (r == x->rank) mine_first = first;
    first += counts[r];
  }
  int all[kTotal], part[kTotal];
  for (int k = 0; k < kTotal; ++k) all[k] = value(x->world_rank, k);
  CHECK(MPI_Reduce_scatter(all, part, counts, MPI_INT, MPI_SUM, x->comm) == MPI_SUCCESS);
  for (int i = 0; i < counts[x->rank]; ++i) {
    int expected = 0;
    for (int r = 0; r < x->remote_size; ++r) expected += value(x->remote_world[r], mine_first + i);
    CHECK(part[i] == expected);
  }
}

static void data_movement(const struct Inter* x) {
  const int n = x->remote_size;
  int* got = malloc(sizeof(int) * (size_t)(n * n + 4 * n + 8));
  int counts[8], displs[8];

  /* Allgather: every remote rank's two ints, in rank order. */
  int two[2] = {value(x->world_rank, 0), value(x->world_rank, 1)};
  CHECK(MPI_Allgather(two, 2, MPI_INT, got, 2, MPI_INT, x->comm) == MPI_SUCCESS);
  for (int r = 0; r < n; ++r) CHECK(got[2 * r] == value(x->remote_world[r], 0) && got[2 * r + 1] == value(x->remote_world[r], 1));

  /* Allgatherv: remote rank r gives r+1 ints, stored backwards (the last rank first). */
  int mine[8];
  for (int i = 0; i <= x->rank; ++i) mine[i] = value(x->world_rank, i);
  int at = 0;
  for (int r = n - 1; r >= 0; --r) counts[r] = r + 1, displs[r] = at, at += r + 1;
  CHECK(MPI_Allgatherv(mine, x->rank + 1, MPI_INT, got, counts, displs, MPI_INT, x->comm) == MPI_SUCCESS);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i <= r; ++i) CHECK(got[displs[r] + i] == value(x->remote_world[r], i));

  /* Gather(v) and Scatter(v), rooted at side 0's last rank, then at side 1's first. */
  for (int root_side = 0; root_side < 2; ++root_side) {
    const int root_local = root_side == 0 ? x->size - 1 : 0;
    const int is_root = x->side == root_side && x->rank == root_local;
    const int root = x->side == root_side ? (is_root ? MPI_ROOT : MPI_PROC_NULL)
                                          : (root_side == 0 ? x->remote_size - 1 : 0);
    memset(got, 0xff, sizeof(int) * (size_t)(2 * n));
    CHECK(MPI_Gather(two, 2, MPI_INT, got, 2, MPI_INT, root, x->comm) == MPI_SUCCESS);
    if (is_root)
      for (int r = 0; r < n; ++r) CHECK(got[2 * r] == value(x->remote_world[r], 0) && got[2 * r + 1] == value(x->remote_world[r], 1));
    else
      CHECK(got[0] == -1);
    CHECK(MPI_Gatherv(mine, x->rank + 1, MPI_INT, got, counts, displs, MPI_INT, root, x->comm) == MPI_SUCCESS);
    if (is_root)
      for (int r = 0; r < n; ++r)
        for (int i = 0; i <= r; ++i) CHECK(got[displs[r] + i] == value(x->remote_world[r], i));

    /* The root sends remote rank r the ints 1000*r + i (two of them; r+1 of them in Scatterv). */
    int out[64];
    for (int r = 0; r < n; ++r)
      for (int i = 0; i <= r; ++i) out[displs[r] + i] = 1000 * r + i;
    int block[2] = {-1, -1};
    for (int r = 0; r < n; ++r) got[2 * r] = 1000 * r, got[2 * r + 1] = 1000 * r + 1;
    CHECK(MPI_Scatter(got, 2, MPI_INT, block, 2, MPI_INT, root, x->comm) == MPI_SUCCESS);
    if (root != MPI_ROOT && root != MPI_PROC_NULL) CHECK(block[0] == 1000 * x->rank && block[1] == 1000 * x->rank + 1);
    int received[8] = {-1};
    CHECK(MPI_Scatterv(out, counts, displs, MPI_INT, received, x->rank + 1, MPI_INT, root, x->comm) == MPI_SUCCESS);
    if (root != MPI_ROOT && root != MPI_PROC_NULL)
      for (int i = 0; i <= x->rank; ++i) CHECK(received[i] == 1000 * x->rank + i);
  }

  /* Alltoall: remote rank j gets world_rank*100 + j from me. */
  int to[8], from[8];
  for (int j = 0; j < n; ++j) to[j] = x->world_rank * 100 + j;
  CHECK(MPI_Alltoall(to, 1, MPI_INT, from, 1, MPI_INT, x->comm) == MPI_SUCCESS);
  for (int j = 0; j < n; ++j) CHECK(from[j] == x->remote_world[j] * 100 + x->rank);

  /* Alltoallv: j+1 copies of that value to remote rank j; I receive my_rank+1 from each. */
  int scounts[8], sdispls[8], rcounts[8], rdispls[8], sbuf[64], rbuf[64];
  at = 0;
  for (int j = 0; j < n; ++j) {
    scounts[j] = j + 1, sdispls[j] = at;
    for (int i = 0; i <= j; ++i) sbuf[at++] = x->world_rank * 100 + j;
    rcounts[j] = x->rank + 1, rdispls[j] = j * (x->rank + 1);
  }
  CHECK(MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, x->comm) == MPI_SUCCESS);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= x->rank; ++i) CHECK(rbuf[rdispls[j] + i] == x->remote_world[j] * 100 + x->rank);

  /* Alltoallw: the same, sent as ints and received as one contiguous type of rank+1 ints. */
  MPI_Datatype run, stypes[8], rtypes[8];
  MPI_Type_contiguous(x->rank + 1, MPI_INT, &run);
  MPI_Type_commit(&run);
  int wsdispls[8], wrcounts[8], wrdispls[8];
  for (int j = 0; j < n; ++j) {
    stypes[j] = MPI_INT, wsdispls[j] = sdispls[j] * (int)sizeof(int);
    rtypes[j] = run, wrcounts[j] = 1, wrdispls[j] = rdispls[j] * (int)sizeof(int);
  }
  memset(rbuf, 0, sizeof rbuf);
  CHECK(MPI_Alltoallw(sbuf, scounts, wsdispls, stypes, rbuf, wrcounts, wrdispls, rtypes, x->comm) == MPI_SUCCESS);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= x->rank; ++i) CHECK(rbuf[rdispls[j] + i] == x->remote_world[j] * 100 + x->rank);
  MPI_Type_free(&run);
  free(got);
}

/* Non-blocking collectives outstanding together, completed by one Waitall. */
static void nonblocking(const struct Inter* x) {
  const int n = x->remote_size;
  MPI_Request reqs[5];
  int mine = value(x->world_rank, 0), sum = -1, gathered[8], to[8], from[8], word = -1;
  for (int j = 0; j < n; ++j) to[j] = x->world_rank * 100 + j;
  const int root = x->side == 0 ? (x->rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
  if (root == MPI_ROOT) word = 4242;
  CHECK(MPI_Ibarrier(x->comm, &reqs[0]) == MPI_SUCCESS);
  CHECK(MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, x->comm, &reqs[1]) == MPI_SUCCESS);
  CHECK(MPI_Iallgather(&mine, 1, MPI_INT, gathered, 1, MPI_INT, x->comm, &reqs[2]) == MPI_SUCCESS);
  CHECK(MPI_Ialltoall(to, 1, MPI_INT, from, 1, MPI_INT, x->comm, &reqs[3]) == MPI_SUCCESS);
  CHECK(MPI_Ibcast(root == MPI_PROC_NULL ? NULL : &word, 1, MPI_INT, root, x->comm, &reqs[4]) == MPI_SUCCESS);
  CHECK(MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  int expected = 0;
  for (int r = 0; r < n; ++r) {
    expected += value(x->remote_world[r], 0);
    CHECK(gathered[r] == value(x->remote_world[r], 0));
    CHECK(from[r] == x->remote_world[r] * 100 + x->rank);
  }
  CHECK(sum == expected);
  CHECK(x->side == 1 ? word == 4242 : word == (root == MPI_ROOT ? 4242 : -1));
}

static void errors(const struct Inter* x) {
  int a = 1, b = 0;
  CHECK(error_class(MPI_Allreduce(MPI_IN_PLACE, &b, 1, MPI_INT, MPI_SUM, x->comm)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Reduce_scatter_block(MPI_IN_PLACE, &b, 1, MPI_INT, MPI_SUM, x->comm)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT, &b, 1, MPI_INT, x->comm)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, &b, 1, MPI_INT, x->comm)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Gather(&a, 1, MPI_INT, &b, 1, MPI_INT, x->remote_size, x->comm)) == MPI_ERR_ROOT);
  CHECK(error_class(MPI_Reduce(&a, &b, 1, MPI_INT, MPI_SUM, -5, x->comm)) == MPI_ERR_ROOT);
  /* A null buffer where it is significant. */
  CHECK(error_class(MPI_Bcast(NULL, 1, MPI_INT, MPI_ROOT, x->comm)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Scatter(&a, 1, MPI_INT, &b, 1, MPI_INT, MPI_ANY_SOURCE, x->comm)) == MPI_ERR_ROOT);
  CHECK(error_class(MPI_Scan(&a, &b, 1, MPI_INT, MPI_SUM, x->comm)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Exscan(&a, &b, 1, MPI_INT, MPI_SUM, x->comm)) == MPI_ERR_COMM);
  /* After the refusals the collectives still line up. */
  CHECK(MPI_Barrier(x->comm) == MPI_SUCCESS);
}

/* The intercommunicator between ranks whose `side` is 0 and those whose side is 1. */
static struct Inter make(int side, int world_rank, int world_size) {
  struct Inter x;
  x.side = side;
  x.world_rank = world_rank;
  MPI_Comm local;
  MPI_Comm_split(MPI_COMM_WORLD, side, world_rank, &local);
  /* The leaders: the lowest world rank of each side. */
  int other_leader = -1;
  int sides[64];
  MPI_Allgather(&side, 1, MPI_INT, sides, 1, MPI_INT, MPI_COMM_WORLD);
  for (int w = world_size - 1; w >= 0; --w)
    if (sides[w] != side) other_leader = w;
  CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, other_leader, 7, &x.comm) == MPI_SUCCESS);
  MPI_Comm_free(&local);
  MPI_Comm_set_errhandler(x.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(x.comm, &x.rank);
  MPI_Comm_size(x.comm, &x.size);
  MPI_Comm_remote_size(x.comm, &x.remote_size);
  x.remote_world = malloc(sizeof(int) * (size_t)x.remote_size);
  for (int w = 0, r = 0; w < world_size; ++w)
    if (sides[w] != side) x.remote_world[r++] = w;
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || size > 8) return finish("intercomm_coll_test");
  /* Even against odd, then rank 0 against the rest. */
  const int splits[2] = {rank % 2, rank == 0 ? 0 : 1};
  for (int s = 0; s < 2; ++s) {
    struct Inter x = make(splits[s], rank, size);
    reductions(&x);
    data_movement(&x);
    nonblocking(&x);
    errors(&x);
    /* The duplicate of an intercommunicator has the collectives too. */
    MPI_Comm dup;
    MPI_Comm_dup(x.comm, &dup);
    MPI_Comm original = x.comm;
    x.comm = dup;
    reductions(&x);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&original);
    free(x.remote_world);
  }
  return finish("intercomm_coll_test");
}
