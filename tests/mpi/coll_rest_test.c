/* MPI_Reduce_scatter, MPI_Reduce_scatter_block, MPI_Exscan, MPI_Reduce_local
 * and MPI_Alltoallw against serial references: predefined operations and a
 * user operation that is not commutative (over a derived datatype), counts
 * that differ per rank (zero among them) on both sides of the eager limit,
 * MPI_IN_PLACE, per-rank datatypes with displacements in bytes, and bad
 * arguments returning their error class under MPI_ERRORS_RETURN. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* The user operation: an element (a, b) is the map x -> a*x + b modulo a
 * prime; the operation composes maps in rank order, which is associative
 * but not commutative. */
enum { prime = 10007 };
typedef struct {
  int a, b;
} Affine;

static Affine compose(Affine first, Affine then) {
  Affine r = {(first.a * then.a) % prime, (then.a * first.b + then.b) % prime};
  return r;
}

static void compose_op(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const Affine* x = in;
  Affine* y = inout;
  for (int i = 0; i < *len; ++i) y[i] = compose(x[i], y[i]);
}

static Affine affine_value(int r, int i) {
  Affine v = {(3 + r + i) % prime, (7 * r + i) % prime};
  return v;
}
static int int_value(int r, int i) { return (r + 1) * 1000 + i % 991; }
static double double_value(int r, int i) { return (double)((r * 37 + i * 11) % 101) - 50.5; }

static MPI_Datatype affine_type;
static MPI_Op compose_maps;

/* What rank order reduces over ranks [from, to) to, for element i. */
static int int_sum(int from, int to, int i) {
  int s = 0;
  for (int r = from; r < to; ++r) s += int_value(r, i);
  return s;
}
static double double_max(int from, int to, int i) {
  double m = double_value(from, i);
  for (int r = from + 1; r < to; ++r) m = double_value(r, i) > m ? double_value(r, i) : m;
  return m;
}
static Affine affine_fold(int from, int to, int i) {
  Affine acc = affine_value(from, i);
  for (int r = from + 1; r < to; ++r) acc = compose(acc, affine_value(r, i));
  return acc;
}

/* ---- MPI_Reduce_scatter(_block) ---- */

/* recvcounts from `pattern`; every op, with the input in sendbuf or in place. */
static void reduce_scatter_with(const int* counts, int block) {
  int total = 0, offset = 0;
  for (int r = 0; r < size; ++r) {
    if (r == rank) offset = total;
    total += counts[r];
  }
  const int mine = counts[rank];
  int* ints = malloc(sizeof(int) * (size_t)(total + 1));
  int* int_out = malloc(sizeof(int) * (size_t)(total + 1));
  double* doubles = malloc(sizeof(double) * (size_t)(total + 1));
  double* double_out = malloc(sizeof(double) * (size_t)(total + 1));
  Affine* maps = malloc(sizeof(Affine) * (size_t)(total + 1));
  Affine* map_out = malloc(sizeof(Affine) * (size_t)(total + 1));
  for (int in_place = 0; in_place < 2; ++in_place) {
    for (int i = 0; i < total; ++i) {
      ints[i] = int_value(rank, i);
      doubles[i] = double_value(rank, i);
      maps[i] = affine_value(rank, i);
    }
    /* In place, the input is all of recvbuf and the result lands at its start. */
    int* int_result = in_place ? ints : int_out;
    double* double_result = in_place ? doubles : double_out;
    Affine* map_result = in_place ? maps : map_out;
    if (block) {
      CHECK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : ints, int_result, mine, MPI_INT, MPI_SUM,
                                     MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : doubles, double_result, mine, MPI_DOUBLE, MPI_MAX,
                                     MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : maps, map_result, mine, affine_type, compose_maps,
                                     MPI_COMM_WORLD) == MPI_SUCCESS);
    } else {
      CHECK(MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : ints, int_result, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
      CHECK(MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : doubles, double_result, counts, MPI_DOUBLE, MPI_MAX,
                               MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : maps, map_result, counts, affine_type, compose_maps,
                               MPI_COMM_WORLD) == MPI_SUCCESS);
    }
    int bad = 0;
    for (int i = 0; i < mine; ++i) {
      const int at = offset + i;
      const Affine want = affine_fold(0, size, at);
      bad |= int_result[i] != int_sum(0, size, at);
      bad |= double_result[i] != double_max(0, size, at);
      bad |= map_result[i].a != want.a || map_result[i].b != want.b;
    }
    CHECK(!bad);
  }
  free(ints);
  free(int_out);
  free(doubles);
  free(double_out);
  free(maps);
  free(map_out);
}

static void reduce_scatter(void) {
  int* counts = malloc(sizeof(int) * (size_t)size);
  /* Small counts, zero among them; then blocks beyond the eager limit. */
  for (int r = 0; r < size; ++r) counts[r] = (2 * r + 1) % 3;
  reduce_scatter_with(counts, 0);
  for (int r = 0; r < size; ++r) counts[r] = (r % 3) * 3000;
  reduce_scatter_with(counts, 0);
  for (int r = 0; r < size; ++r) counts[r] = 0;
  reduce_scatter_with(counts, 0);
  const int block_counts[] = {0, 1, 5, 4000};
  for (int k = 0; k < 4; ++k) {
    for (int r = 0; r < size; ++r) counts[r] = block_counts[k];
    reduce_scatter_with(counts, 1);
  }
  free(counts);
}

/* ---- MPI_Exscan ---- */

static void exscan(void) {
  const int lengths[] = {0, 1, 7, 5000};
  for (int k = 0; k < 4; ++k) {
    const int n = lengths[k];
    int* ints = malloc(sizeof(int) * (size_t)(n + 1));
    int* int_out = malloc(sizeof(int) * (size_t)(n + 1));
    Affine* maps = malloc(sizeof(Affine) * (size_t)(n + 1));
    Affine* map_out = malloc(sizeof(Affine) * (size_t)(n + 1));
    for (int in_place = 0; in_place < 2; ++in_place) {
      for (int i = 0; i < n; ++i) {
        ints[i] = int_value(rank, i);
        maps[i] = affine_value(rank, i);
      }
      int* int_result = in_place ? ints : int_out;
      Affine* map_result = in_place ? maps : map_out;
      CHECK(MPI_Exscan(in_place ? MPI_IN_PLACE : ints, int_result, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
      CHECK(MPI_Exscan(in_place ? MPI_IN_PLACE : maps, map_result, n, affine_type, compose_maps, MPI_COMM_WORLD) ==
            MPI_SUCCESS);
      /* Rank 0's result is undefined (MPI-3.1 5.11.2). */
      int bad = 0;
      for (int i = 0; rank > 0 && i < n; ++i) {
        const Affine want = affine_fold(0, rank, i);
        bad |= int_result[i] != int_sum(0, rank, i);
        bad |= map_result[i].a != want.a || map_result[i].b != want.b;
      }
      CHECK(!bad);
    }
    free(ints);
    free(int_out);
    free(maps);
    free(map_out);
  }
  /* On a split communicator (odd and even ranks), where exscan follows the new ranks. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half); /* reversed order */
  int me, n, v = rank, got = -1;
  MPI_Comm_rank(half, &me);
  MPI_Comm_size(half, &n);
  MPI_Exscan(&v, &got, 1, MPI_INT, MPI_SUM, half);
  int want = 0;
  for (int r = rank + 2; r < size; r += 2) want += r; /* the ranks before me in the new order are the larger ones */
  if (me > 0) CHECK(got == want);
  MPI_Comm_free(&half);
}

/* ---- MPI_Reduce_local ---- */

static void reduce_local(void) {
  int in[5], inout[5];
  for (int i = 0; i < 5; ++i) {
    in[i] = i + 1;
    inout[i] = 10 * i;
  }
  CHECK(MPI_Reduce_local(in, inout, 5, MPI_INT, MPI_SUM) == MPI_SUCCESS);
  for (int i = 0; i < 5; ++i) CHECK(inout[i] == 11 * i + 1);
  CHECK(MPI_Reduce_local(in, inout, 5, MPI_INT, MPI_MIN) == MPI_SUCCESS);
  for (int i = 0; i < 5; ++i) CHECK(inout[i] == (i == 0 ? 1 : i + 1));
  /* inoutbuf = inbuf op inoutbuf: inbuf comes first. */
  Affine first[3], then[3];
  for (int i = 0; i < 3; ++i) {
    first[i] = affine_value(1, i);
    then[i] = affine_value(2, i);
  }
  CHECK(MPI_Reduce_local(first, then, 3, affine_type, compose_maps) == MPI_SUCCESS);
  for (int i = 0; i < 3; ++i) {
    const Affine want = compose(affine_value(1, i), affine_value(2, i));
    CHECK(then[i].a == want.a && then[i].b == want.b);
  }
  CHECK(MPI_Reduce_local(NULL, NULL, 0, MPI_INT, MPI_SUM) == MPI_SUCCESS);
}

/* ---- MPI_Alltoallw ---- */

/* Rank s sends (s + r) % 3 + extra ints to rank r: s*10000 + r*100 + k. */
static int pair_count(int s, int r, int extra) { return (s + r) % 3 + extra; }
static int pair_value(int s, int r, int k) { return s * 10000 + r * 100 + k % 100; }

static void alltoallw(void) {
  MPI_Datatype strided, every_other;
  MPI_Type_vector(1, 1, 2, MPI_INT, &strided);
  MPI_Type_create_resized(strided, 0, 2 * sizeof(int), &every_other);
  MPI_Type_commit(&every_other);
  MPI_Type_free(&strided);
  int* scounts = malloc(sizeof(int) * (size_t)size);
  int* sdispls = malloc(sizeof(int) * (size_t)size);
  int* rcounts = malloc(sizeof(int) * (size_t)size);
  int* rdispls = malloc(sizeof(int) * (size_t)size);
  MPI_Datatype* stypes = malloc(sizeof(MPI_Datatype) * (size_t)size);
  MPI_Datatype* rtypes = malloc(sizeof(MPI_Datatype) * (size_t)size);
  const int extras[] = {0, 3000};
  for (int e = 0; e < 2; ++e) {
    const int extra = extras[e];
    /* Sends are packed ints, sent as MPI_INT; what comes from an odd rank lands in every other int. */
    int sent = 0, spread = 0;
    for (int r = 0; r < size; ++r) {
      scounts[r] = pair_count(rank, r, extra);
      sdispls[r] = sent * (int)sizeof(int);
      stypes[r] = MPI_INT;
      sent += scounts[r];
      rcounts[r] = pair_count(r, rank, extra);
      rdispls[r] = spread * (int)sizeof(int);
      rtypes[r] = r % 2 ? every_other : MPI_INT;
      spread += rcounts[r] * (r % 2 ? 2 : 1);
    }
    int* out = malloc(sizeof(int) * (size_t)(sent + 1));
    int* in = malloc(sizeof(int) * (size_t)(spread + 1));
    for (int r = 0, at = 0; r < size; ++r)
      for (int k = 0; k < scounts[r]; ++k) out[at++] = pair_value(rank, r, k);
    for (int i = 0; i < spread; ++i) in[i] = -1;
    CHECK(MPI_Alltoallw(out, scounts, sdispls, stypes, in, rcounts, rdispls, rtypes, MPI_COMM_WORLD) == MPI_SUCCESS);
    int bad = 0;
    for (int r = 0; r < size; ++r) {
      const int* block = in + rdispls[r] / (int)sizeof(int);
      const int step = r % 2 ? 2 : 1;
      for (int k = 0; k < rcounts[r]; ++k) {
        bad |= block[k * step] != pair_value(r, rank, k);
        if (step == 2) bad |= block[k * step + 1] != -1;
      }
    }
    CHECK(!bad);

    /* In place: the counts are symmetric, each block is first what goes to r and then what came from r. */
    for (int r = 0; r < size; ++r) {
      int* block = in + rdispls[r] / (int)sizeof(int);
      const int step = r % 2 ? 2 : 1;
      for (int k = 0; k < rcounts[r]; ++k) block[k * step] = pair_value(rank, r, k);
    }
    CHECK(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, in, rcounts, rdispls, rtypes, MPI_COMM_WORLD) == MPI_SUCCESS);
    bad = 0;
    for (int r = 0; r < size; ++r) {
      const int* block = in + rdispls[r] / (int)sizeof(int);
      const int step = r % 2 ? 2 : 1;
      for (int k = 0; k < rcounts[r]; ++k) bad |= block[k * step] != pair_value(r, rank, k);
    }
    CHECK(!bad);
    free(out);
    free(in);
  }
  MPI_Type_free(&every_other);
  free(scounts);
  free(sdispls);
  free(rcounts);
  free(rdispls);
  free(stypes);
  free(rtypes);
}

/* ---- bad arguments (every rank passes the same, so every rank fails before any message) ---- */

static void bad_arguments(void) {
  int v[64] = {0}, out[64];
  int* counts = malloc(sizeof(int) * (size_t)size);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * (size_t)size);
  for (int r = 0; r < size; ++r) {
    counts[r] = 1;
    types[r] = MPI_INT;
  }
  int* zeros = calloc((size_t)size, sizeof(int));
  CHECK(error_class(MPI_Reduce_scatter(v, out, NULL, MPI_INT, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Reduce_scatter(v, MPI_IN_PLACE, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Reduce_scatter(v, out, counts, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD)) == MPI_ERR_OP);
  counts[0] = -1;
  CHECK(error_class(MPI_Reduce_scatter(v, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
  counts[0] = 1;
  CHECK(error_class(MPI_Reduce_scatter(v, out, counts, MPI_INT, MPI_SUM, MPI_COMM_NULL)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Reduce_scatter_block(v, out, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Exscan(v, out, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Exscan(v, out, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Exscan(v, out, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Reduce_local(v, out, 1, MPI_INT, MPI_OP_NULL)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Reduce_local(v, out, -1, MPI_INT, MPI_SUM)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Reduce_local(NULL, out, 1, MPI_INT, MPI_SUM)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Reduce_local(v, out, 1, MPI_BYTE, MPI_MAXLOC)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Alltoallw(v, NULL, zeros, types, out, counts, zeros, types, MPI_COMM_WORLD)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Alltoallw(v, counts, zeros, NULL, out, counts, zeros, types, MPI_COMM_WORLD)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Alltoallw(v, counts, zeros, types, out, counts, NULL, types, MPI_COMM_WORLD)) == MPI_ERR_ARG);
  types[size - 1] = MPI_DATATYPE_NULL;
  CHECK(error_class(MPI_Alltoallw(v, counts, zeros, types, out, counts, zeros, types, MPI_COMM_WORLD)) ==
        MPI_ERR_TYPE);
  free(counts);
  free(types);
  free(zeros);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Type_contiguous(2, MPI_INT, &affine_type);
  MPI_Type_commit(&affine_type);
  MPI_Op_create(compose_op, 0, &compose_maps);
  reduce_scatter();
  exscan();
  reduce_local();
  alltoallw();
  bad_arguments();
  MPI_Op_free(&compose_maps);
  MPI_Type_free(&affine_type);
  return finish("coll_rest_test");
}
