/* Collectives against serial references: every rank computes what the
 * answer must be from the same inputs, for every root, sizes on both sides
 * of the eager limit and of the default algorithm switch points (ctest also
 * runs it with the switch points moved so that every size takes one side),
 * MPI_IN_PLACE, predefined and user operations (commutative or not), and
 * communicators made by MPI_Comm_split and MPI_Comm_dup. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int value(int r, int i) { return (r + 1) * 1000 + i % 997; }

static void barrier_and_bcast(void) {
  for (int k = 0; k < 5; ++k) MPI_Barrier(MPI_COMM_WORLD);
  const int counts[] = {0, 1, 1000, 100000};
  for (int k = 0; k < 4; ++k)
    for (int root = 0; root < size; ++root) {
      const int n = counts[k];
      int* buf = malloc((n + 1) * sizeof(int));
      for (int i = 0; i < n; ++i) buf[i] = rank == root ? value(root, i) : -1;
      MPI_Bcast(buf, n, MPI_INT, root, MPI_COMM_WORLD);
      int bad = 0;
      for (int i = 0; i < n; ++i) bad |= buf[i] != value(root, i);
      CHECK(!bad);
      free(buf);
    }
}

static void reductions(void) {
  /* Counts below and above the default switch points, some not multiples of the rank count. */
  const int counts[] = {1, 7, 1001, 50001};
  for (int k = 0; k < 4; ++k) {
    const int n = counts[k];
    long* in = malloc(n * sizeof(long));
    long* out = malloc(n * sizeof(long));
    for (int i = 0; i < n; ++i) in[i] = value(rank, i);
    for (int root = 0; root < size; ++root) {
      const int in_place = root % 2 == 1;
      if (in_place && rank == root) memcpy(out, in, n * sizeof(long));
      MPI_Reduce(in_place && rank == root ? MPI_IN_PLACE : in, out, n, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD);
      if (rank == root) {
        int bad = 0;
        for (int i = 0; i < n; ++i) {
          long want = 0;
          for (int r = 0; r < size; ++r) want += value(r, i);
          bad |= out[i] != want;
        }
        CHECK(!bad);
      }
    }
    MPI_Allreduce(in, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int sum_bad = 0;
    for (int i = 0; i < n; ++i) {
      long want = 0;
      for (int r = 0; r < size; ++r) want += value(r, i);
      sum_bad |= out[i] != want;
    }
    CHECK(!sum_bad);
    memcpy(out, in, n * sizeof(long));
    MPI_Scan(MPI_IN_PLACE, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    sum_bad = 0;
    for (int i = 0; i < n; ++i) {
      long want = 0;
      for (int r = 0; r <= rank; ++r) want += value(r, i);
      sum_bad |= out[i] != want;
    }
    CHECK(!sum_bad);
    MPI_Allreduce(in, out, n, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad |= out[i] != value(size - 1, i);
    CHECK(!bad);
    memcpy(out, in, n * sizeof(long));
    MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; i < n; ++i) bad |= out[i] != value(0, i);
    CHECK(!bad);
    free(in);
    free(out);
  }
  double d = rank + 1.0, prod = 0;
  MPI_Allreduce(&d, &prod, 1, MPI_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
  double want = 1;
  for (int r = 1; r <= size; ++r) want *= r;
  CHECK(prod == want);

  struct { double v; int i; } mine = {(double)((rank * 7) % size), rank}, best;
  MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  int argmax = 0;
  for (int r = 0; r < size; ++r)
    if ((r * 7) % size > (argmax * 7) % size) argmax = r;
  CHECK(best.i == argmax && best.v == (double)((argmax * 7) % size));
  MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
  CHECK(best.v == 0 && best.i == 0);

  int scanned;
  int one = rank + 1;
  MPI_Scan(&one, &scanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(scanned == (rank + 1) * (rank + 2) / 2);
}

/* A non-commutative operation: 2x2 integer matrix product, in rank order. */
static void matmul(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  int* a = in;
  int* b = inout;
  for (int k = 0; k < *len; ++k, a += 4, b += 4) {
    int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                a[2] * b[1] + a[3] * b[3]};
    memcpy(b, c, sizeof c);
  }
}

/* Rank r's matrix for element i; these do not commute with each other. */
static void matrix(int r, int i, int* m) {
  m[0] = 1, m[1] = r + 1 + i % 3, m[2] = 0, m[3] = 2;
}

/* Element i of the product of the matrices of ranks 0..last, in that order. */
static void product(int last, int i, int* out) {
  matrix(0, i, out);
  for (int r = 1; r <= last; ++r) {
    int m[4], one = 1;
    matrix(r, i, m);
    matmul(out, m, &one, NULL);
    memcpy(out, m, sizeof m);
  }
}

/* Element i of got is the product over ranks 0..last. */
static int products_match(const int* got, int n, int last) {
  for (int i = 0; i < n; ++i) {
    int want[4];
    product(last, i, want);
    if (memcmp(got + 4 * i, want, sizeof want) != 0) return 0;
  }
  return 1;
}

/* A commutative user operation: it may take the ring. */
static void add_ints(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((const int*)in)[i];
}

static void user_op(void) {
  MPI_Op op;
  MPI_Op_create(matmul, 0, &op);
  MPI_Datatype mat;
  MPI_Type_contiguous(4, MPI_INT, &mat);
  MPI_Type_commit(&mat);
  const int counts[] = {1, 20000};
  for (int k = 0; k < 2; ++k) {
    const int n = counts[k];
    int* mine = malloc(4 * sizeof(int) * n);
    int* got = malloc(4 * sizeof(int) * n);
    for (int i = 0; i < n; ++i) matrix(rank, i, mine + 4 * i);
    MPI_Allreduce(mine, got, n, mat, op, MPI_COMM_WORLD);
    CHECK(products_match(got, n, size - 1));
    memcpy(got, mine, 4 * sizeof(int) * n);
    MPI_Allreduce(MPI_IN_PLACE, got, n, mat, op, MPI_COMM_WORLD);
    CHECK(products_match(got, n, size - 1));
    for (int root = 0; root < size; ++root) {
      memset(got, 0, 4 * sizeof(int) * n);
      MPI_Reduce(mine, got, n, mat, op, root, MPI_COMM_WORLD);
      if (rank == root) CHECK(products_match(got, n, size - 1));
    }
    MPI_Scan(mine, got, n, mat, op, MPI_COMM_WORLD);
    CHECK(products_match(got, n, rank));
    free(mine);
    free(got);
  }
  MPI_Op_free(&op);
  MPI_Type_free(&mat);

  MPI_Op add;
  MPI_Op_create(add_ints, 1, &add);
  const int n = 30001;
  int* v = malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i) v[i] = value(rank, i);
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, add, MPI_COMM_WORLD);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    int want = 0;
    for (int r = 0; r < size; ++r) want += value(r, i);
    bad |= v[i] != want;
  }
  CHECK(!bad);
  free(v);
  MPI_Op_free(&add);
}

/* Every block of a gather, scatter or allgather of n ints per rank, in place or not. */
static void gather_scatter(int n) {
  int* mine = malloc(n * sizeof(int) + 1);
  int* all = malloc((size_t)n * size * sizeof(int) + 1);
  int* part = malloc(n * sizeof(int) + 1);
  for (int i = 0; i < n; ++i) mine[i] = value(rank, i);
  for (int root = 0; root < size; ++root) {
    const int in_place = root % 2 == 1 && rank == root;
    memset(all, 0, (size_t)n * size * sizeof(int));
    if (in_place) memcpy(all + (size_t)root * n, mine, n * sizeof(int));
    MPI_Gather(in_place ? MPI_IN_PLACE : mine, n, MPI_INT, all, n, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root) {
      int bad = 0;
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < n; ++i) bad |= all[(size_t)r * n + i] != value(r, i);
      CHECK(!bad);
    }
    memset(part, 0, n * sizeof(int));
    MPI_Scatter(all, n, MPI_INT, in_place ? MPI_IN_PLACE : part, n, MPI_INT, root, MPI_COMM_WORLD);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad |= (in_place ? all[(size_t)root * n + i] : part[i]) != value(rank, i);
    CHECK(!bad);
  }
  for (int in_place = 0; in_place < 2; ++in_place) {
    memset(all, 0, (size_t)n * size * sizeof(int));
    if (in_place) memcpy(all + (size_t)rank * n, mine, n * sizeof(int));
    MPI_Allgather(in_place ? MPI_IN_PLACE : mine, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD);
    int bad = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i) bad |= all[(size_t)r * n + i] != value(r, i);
    CHECK(!bad);
  }
  free(mine);
  free(all);
  free(part);
}

/* Alltoall of m ints per pair: element j of rank r's block for rank d is r*100000+d*1000+j%1000. */
static int a2a(int r, int d, int j) { return r * 100000 + d * 1000 + j % 1000; }

static void alltoall(int m) {
  int* sendbuf = malloc((size_t)m * size * sizeof(int));
  int* recvbuf = malloc((size_t)m * size * sizeof(int));
  for (int in_place = 0; in_place < 2; ++in_place) {
    for (int d = 0; d < size; ++d)
      for (int j = 0; j < m; ++j) (in_place ? recvbuf : sendbuf)[(size_t)d * m + j] = a2a(rank, d, j);
    MPI_Alltoall(in_place ? MPI_IN_PLACE : sendbuf, m, MPI_INT, recvbuf, m, MPI_INT, MPI_COMM_WORLD);
    int bad = 0;
    for (int s = 0; s < size; ++s)
      for (int j = 0; j < m; ++j) bad |= recvbuf[(size_t)s * m + j] != a2a(s, rank, j);
    CHECK(!bad);
  }
  /* v: rank r sends (r + d) % 3 * m / 2 elements to rank d, blocks in reverse order. */
  int* sc = malloc(size * sizeof(int));
  int* sd = malloc(size * sizeof(int));
  int* rc = malloc(size * sizeof(int));
  int* rd = malloc(size * sizeof(int));
  for (int d = size - 1, at = 0; d >= 0; --d) sc[d] = (rank + d) % 3 * m / 2, sd[d] = at, at += m;
  for (int s = size - 1, at = 0; s >= 0; --s) rc[s] = (s + rank) % 3 * m / 2, rd[s] = at, at += m;
  for (int d = 0; d < size; ++d)
    for (int j = 0; j < sc[d]; ++j) sendbuf[sd[d] + j] = a2a(rank, d, j);
  memset(recvbuf, 0, (size_t)m * size * sizeof(int));
  MPI_Alltoallv(sendbuf, sc, sd, MPI_INT, recvbuf, rc, rd, MPI_INT, MPI_COMM_WORLD);
  int bad = 0;
  for (int s = 0; s < size; ++s)
    for (int j = 0; j < rc[s]; ++j) bad |= recvbuf[rd[s] + j] != a2a(s, rank, j);
  CHECK(!bad);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
  free(sendbuf);
  free(recvbuf);
}

static void gather_family(void) {
  /* Small and large: the default switch points lie between them. */
  gather_scatter(1);
  gather_scatter(3000);
  alltoall(2);
  alltoall(20000);

  /* v-variants: rank r contributes scale*r elements (rank 0 none), stored in reverse rank order. */
  for (int scale = 1; scale <= 2000; scale *= 2000) {
    int* mine = malloc((size_t)scale * size * sizeof(int) + 1);
    for (int i = 0; i < scale * rank; ++i) mine[i] = value(rank, i);
    int* counts = malloc(size * sizeof(int));
    int* displs = malloc(size * sizeof(int));
    int total = 0;
    for (int r = size - 1; r >= 0; --r) counts[r] = scale * r, displs[r] = total, total += scale * r;
    int* v = calloc(total + 1, sizeof(int));
    for (int in_place = 0; in_place < 2; ++in_place) {
      memset(v, 0, total * sizeof(int));
      if (in_place) memcpy(v + displs[rank], mine, counts[rank] * sizeof(int));
      MPI_Allgatherv(in_place ? MPI_IN_PLACE : mine, counts[rank], MPI_INT, v, counts, displs, MPI_INT, MPI_COMM_WORLD);
      int bad = 0;
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < counts[r]; ++i) bad |= v[displs[r] + i] != value(r, i);
      CHECK(!bad);
    }
    memset(v, 0, total * sizeof(int));
    MPI_Gatherv(mine, counts[rank], MPI_INT, v, counts, displs, MPI_INT, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1) {
      int bad = 0;
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < counts[r]; ++i) bad |= v[displs[r] + i] != value(r, i);
      CHECK(!bad);
    }
    int* back = malloc((size_t)scale * size * sizeof(int) + 1);
    MPI_Scatterv(v, counts, displs, MPI_INT, back, counts[rank], MPI_INT, size - 1, MPI_COMM_WORLD);
    int bad = 0;
    for (int i = 0; i < counts[rank]; ++i) bad |= back[i] != value(rank, i);
    CHECK(!bad);
    free(back);
    free(v);
    free(counts);
    free(displs);
    free(mine);
  }

  for (int in_place = 0; in_place < 2; ++in_place) {
    int* contrib = malloc(size * 2 * sizeof(int));
    for (int i = 0; i < size * 2; ++i) contrib[i] = i + rank;
    int block[2];
    if (in_place) {
      MPI_Reduce_scatter_block(MPI_IN_PLACE, contrib, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      memcpy(block, contrib, sizeof block);
    } else {
      MPI_Reduce_scatter_block(contrib, block, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int j = 0; j < 2; ++j) CHECK(block[j] == size * (rank * 2 + j) + size * (size - 1) / 2);
    free(contrib);
  }
}

static void communicators(void) {
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hrank, hsize;
  MPI_Comm_rank(half, &hrank);
  MPI_Comm_size(half, &hsize);
  CHECK(hsize == (size + 1 - rank % 2) / 2);
  CHECK(hrank == hsize - 1 - rank / 2); /* keys reverse the order */
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half);
  int want = 0;
  for (int r = rank % 2; r < size; r += 2) want += r;
  CHECK(sum == want);
  MPI_Comm_dup(half, &dup);
  int result;
  MPI_Comm_compare(half, dup, &result);
  CHECK(result == MPI_CONGRUENT);
  /* Traffic on the duplicate does not match receives on the original. */
  int token = rank, got = -1;
  MPI_Sendrecv(&token, 1, MPI_INT, (hrank + 1) % hsize, 0, &got, 1, MPI_INT, (hrank + hsize - 1) % hsize, 0, dup,
               MPI_STATUS_IGNORE);
  CHECK(got != -1);
  MPI_Group world_group, half_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Comm_group(half, &half_group);
  int zero = 0, translated = -1;
  MPI_Group_translate_ranks(half_group, 1, &zero, world_group, &translated);
  CHECK(translated == (hsize - 1) * 2 + rank % 2);
  MPI_Group_free(&world_group);
  MPI_Group_free(&half_group);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&half);
  CHECK(half == MPI_COMM_NULL);
  MPI_Comm none;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none);
  CHECK((rank == 0) == (none == MPI_COMM_NULL));
  if (none != MPI_COMM_NULL) MPI_Comm_free(&none);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  barrier_and_bcast();
  reductions();
  user_op();
  gather_family();
  communicators();
  return finish("coll_test");
}
