/* Collectives against serial references: every rank computes what the
 * answer must be from the same inputs, for every root, sizes on both sides
 * of the eager limit, predefined and user operations, and communicators
 * made by MPI_Comm_split and MPI_Comm_dup. */
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
  const int counts[] = {1, 1000, 50000};
  for (int k = 0; k < 3; ++k) {
    const int n = counts[k];
    long* in = malloc(n * sizeof(long));
    long* out = malloc(n * sizeof(long));
    for (int i = 0; i < n; ++i) in[i] = value(rank, i);
    for (int root = 0; root < size; ++root) {
      MPI_Reduce(in, out, n, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD);
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

static void user_op(void) {
  MPI_Op op;
  MPI_Op_create(matmul, 0, &op);
  MPI_Datatype mat;
  MPI_Type_contiguous(4, MPI_INT, &mat);
  MPI_Type_commit(&mat);
  int mine[4] = {1, rank + 1, 0, 1}, got[4];  /* upper triangular: products add the off-diagonals */
  int want[4] = {1, 0, 0, 1};
  for (int r = 0; r < size; ++r) want[1] += r + 1;
  MPI_Allreduce(mine, got, 1, mat, op, MPI_COMM_WORLD);
  CHECK(memcmp(got, want, sizeof want) == 0);
  for (int root = 0; root < size; ++root) {
    memset(got, 0, sizeof got);
    MPI_Reduce(mine, got, 1, mat, op, root, MPI_COMM_WORLD);
    if (rank == root) CHECK(memcmp(got, want, sizeof want) == 0);
  }
  MPI_Op_free(&op);
  MPI_Type_free(&mat);
}

static void gather_family(void) {
  const int n = 3000;
  int* mine = malloc(n * sizeof(int));
  int* all = malloc((size_t)n * size * sizeof(int));
  for (int i = 0; i < n; ++i) mine[i] = value(rank, i);
  for (int root = 0; root < size; ++root) {
    memset(all, 0, (size_t)n * size * sizeof(int));
    MPI_Gather(mine, n, MPI_INT, all, n, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root) {
      int bad = 0;
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < n; ++i) bad |= all[r * n + i] != value(r, i);
      CHECK(!bad);
    }
    int* part = calloc(n, sizeof(int));
    MPI_Scatter(all, n, MPI_INT, part, n, MPI_INT, root, MPI_COMM_WORLD);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad |= part[i] != value(rank, i);
    CHECK(!bad);
    free(part);
  }
  memset(all, 0, (size_t)n * size * sizeof(int));
  MPI_Allgather(mine, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD);
  int bad = 0;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < n; ++i) bad |= all[r * n + i] != value(r, i);
  CHECK(!bad);

  /* v-variants: rank r contributes r+1 elements, stored in reverse rank order. */
  int* counts = malloc(size * sizeof(int));
  int* displs = malloc(size * sizeof(int));
  int total = 0;
  for (int r = size - 1; r >= 0; --r) counts[r] = r + 1, displs[r] = total, total += r + 1;
  int* v = calloc(total, sizeof(int));
  MPI_Allgatherv(mine, rank + 1, MPI_INT, v, counts, displs, MPI_INT, MPI_COMM_WORLD);
  bad = 0;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i <= r; ++i) bad |= v[displs[r] + i] != value(r, i);
  CHECK(!bad);
  memset(v, 0, total * sizeof(int));
  MPI_Gatherv(mine, rank + 1, MPI_INT, v, counts, displs, MPI_INT, size - 1, MPI_COMM_WORLD);
  if (rank == size - 1) {
    bad = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i <= r; ++i) bad |= v[displs[r] + i] != value(r, i);
    CHECK(!bad);
  }
  int back[64];
  MPI_Scatterv(v, counts, displs, MPI_INT, back, rank + 1, MPI_INT, size - 1, MPI_COMM_WORLD);
  bad = 0;
  for (int i = 0; i <= rank; ++i) bad |= back[i] != value(rank, i);
  CHECK(!bad);

  /* Alltoall: element j of rank r's block for rank d is r*100+d*10+j. */
  const int m = 2;
  int* sendbuf = malloc((size_t)m * size * sizeof(int));
  int* recvbuf = malloc((size_t)m * size * sizeof(int));
  for (int d = 0; d < size; ++d)
    for (int j = 0; j < m; ++j) sendbuf[d * m + j] = rank * 100 + d * 10 + j;
  MPI_Alltoall(sendbuf, m, MPI_INT, recvbuf, m, MPI_INT, MPI_COMM_WORLD);
  bad = 0;
  for (int s = 0; s < size; ++s)
    for (int j = 0; j < m; ++j) bad |= recvbuf[s * m + j] != s * 100 + rank * 10 + j;
  CHECK(!bad);
  int* sc = malloc(size * sizeof(int));
  int* sd = malloc(size * sizeof(int));
  for (int d = 0; d < size; ++d) sc[d] = 1, sd[d] = d * m;
  MPI_Alltoallv(sendbuf, sc, sd, MPI_INT, recvbuf, sc, sd, MPI_INT, MPI_COMM_WORLD);
  bad = 0;
  for (int s = 0; s < size; ++s) bad |= recvbuf[s * m] != s * 100 + rank * 10;
  CHECK(!bad);

  int* contrib = malloc(size * 2 * sizeof(int));
  for (int i = 0; i < size * 2; ++i) contrib[i] = i + rank;
  int block[2];
  MPI_Reduce_scatter_block(contrib, block, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  for (int j = 0; j < 2; ++j) CHECK(block[j] == size * (rank * 2 + j) + size * (size - 1) / 2);

  free(contrib);
  free(sc);
  free(sd);
  free(sendbuf);
  free(recvbuf);
  free(v);
  free(counts);
  free(displs);
  free(mine);
  free(all);
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
