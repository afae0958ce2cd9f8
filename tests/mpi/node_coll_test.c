/* The collectives among the ranks of one node (mpi/src/node_collectives.hpp)
 * against naive references computed locally, every answer checked:
 *
 *   - which communicators get a shared segment (counted in /proc/self/maps):
 *     one of 2 to 16 ranks all on one node, over shm or mixed; none over tcp,
 *     none on one spanning two nodes; it goes with MPI_Comm_free;
 *   - MPI_Reduce and MPI_Allreduce for every predefined op on every type it
 *     applies to, MAXLOC/MINLOC on pairs, user ops (one not commutative), a
 *     non-contiguous type; below, at and above the switch point; in place and not;
 *   - MPI_Scan, MPI_Exscan, MPI_Reduce_scatter_block and MPI_Reduce_scatter
 *     likewise for every predefined op on every type, in place and not;
 *   - bcast, gather, scatter, allgather, allgatherv and alltoall of contiguous
 *     and non-contiguous types at sizes below, at and above the switch point;
 *     gatherv, scatterv and alltoallv with blocks small on some ranks (or
 *     pairs) and large (sent as messages) on others;
 *   - MPI_Allreduce, MPI_Allgather(v) and MPI_Bcast above the switch point (their large
 *     areas, bcast's with the root's type and the receivers' differing in layout; allgather's blocks read from the lender's memory unless the
 *     node is oversubscribed or VIASTACK_SHM_CMA=0): vectors cut into n parts of uneven length and into pieces of
 *     kLargeBytes, elements of 4, 8 and 12 bytes, blocks of different sizes
 *     per rank, in place and not, back to back with stragglers so that the
 *     two large areas are reused while others may still read them;
 *   - thousands of calls back to back with rotating roots and stragglers
 *     (a flag or buffer reused too early shows as a wrong answer);
 *   - sub-communicators (split by parity, and a duplicate) used in turn with
 *     MPI_COMM_WORLD.
 *
 *   node_coll_test             all of it on MPI_COMM_WORLD
 *   node_coll_test spans_nodes ranks on two nodes (NODE_TEST_HOST names each
 *                              rank's): the world falls back to point-to-point,
 *                              each node's MPI_COMM_TYPE_SHARED part does not
 *   node_coll_test truncated_bcast  the broadcasts with a receiver's buffer too
 *                              small alone (over tcp: the point-to-point tree)
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

enum { kSlotBytes = 8192, kMaxSmRanks = 16, kLargeBytes = 1 << 20 };

static int world_rank, world_size;

/* ------------------------------------------------------------ segments */

/* Shared segments of collectives (and windows) this process has mapped. */
static int segments_mapped(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[1024];
  int count = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, ".mpiwin.")) ++count;
  fclose(f);
  return count;
}

/* Whether comm's collectives should go through shared memory. */
static int expect_shared_memory(MPI_Comm comm) {
  int size;
  MPI_Comm_size(comm, &size);
  const char* provider = getenv("VIASTACK_PROVIDER");
  if (size < 2 || size > kMaxSmRanks || (provider && strcmp(provider, "tcp") == 0)) return 0;
  MPI_Comm shared;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  int shared_size;
  MPI_Comm_size(shared, &shared_size);
  MPI_Comm_free(&shared);
  return shared_size == size;
}

/* A duplicate of comm maps a segment at its first small collective exactly
 * when it should, and unmaps it when freed. */
static void check_segment(MPI_Comm comm) {
  const int expected = expect_shared_memory(comm);
  const int before = segments_mapped();
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  CHECK(segments_mapped() == before);
  int value = world_rank, rank;
  MPI_Comm_rank(dup, &rank);
  MPI_Bcast(&value, 1, MPI_INT, 0, dup);
  int root_world;
  if (rank == 0) root_world = world_rank;
  MPI_Bcast(&root_world, 1, MPI_INT, 0, dup);
  CHECK(value == root_world);
  CHECK(segments_mapped() == before + expected);
  MPI_Comm_free(&dup);
  CHECK(segments_mapped() == before);
}

/* ------------------------------------------------------------ typed values */

#define INTEGER_TYPES(X)                                                                         \
  X(signed char, MPI_SIGNED_CHAR) X(unsigned char, MPI_UNSIGNED_CHAR) X(short, MPI_SHORT)         \
  X(unsigned short, MPI_UNSIGNED_SHORT) X(int, MPI_INT) X(unsigned, MPI_UNSIGNED) X(long, MPI_LONG) \
  X(unsigned long, MPI_UNSIGNED_LONG) X(long long, MPI_LONG_LONG) X(int8_t, MPI_INT8_T)            \
  X(uint16_t, MPI_UINT16_T) X(int32_t, MPI_INT32_T) X(uint64_t, MPI_UINT64_T)
#define FLOATING_TYPES(X) X(float, MPI_FLOAT) X(double, MPI_DOUBLE) X(long double, MPI_LONG_DOUBLE)

enum Family { INTEGER, FLOATING, LOGICAL, BYTE };
struct TypeCase {
  const char* name;
  MPI_Datatype type;
  size_t size;
  enum Family family;
  int index; /* for put/get */
};

#define TYPE_CASE(ctype, mpi) {#mpi, mpi, sizeof(ctype), INTEGER, __COUNTER__},
#define FLOAT_CASE(ctype, mpi) {#mpi, mpi, sizeof(ctype), FLOATING, __COUNTER__},
static const struct TypeCase type_cases[] = {INTEGER_TYPES(TYPE_CASE) FLOATING_TYPES(FLOAT_CASE)
                                             {"MPI_C_BOOL", MPI_C_BOOL, sizeof(_Bool), LOGICAL, __COUNTER__},
                                             {"MPI_BYTE", MPI_BYTE, 1, BYTE, __COUNTER__}};
enum { kTypeCases = sizeof type_cases / sizeof type_cases[0] };

/* Element i of a buffer of type case t, as or from a (small, exact) integer. */
static void put(const struct TypeCase* t, void* buf, size_t i, long long v) {
  int k = 0;
#define PUT(ctype, mpi) \
  if (t->index == k++) { ((ctype*)buf)[i] = (ctype)v; return; }
  INTEGER_TYPES(PUT) FLOATING_TYPES(PUT) PUT(_Bool, MPI_C_BOOL) PUT(unsigned char, MPI_BYTE)
#undef PUT
}
static long long get(const struct TypeCase* t, const void* buf, size_t i) {
  int k = 0;
#define GET(ctype, mpi) \
  if (t->index == k++) return (long long)((const ctype*)buf)[i];
  INTEGER_TYPES(GET) FLOATING_TYPES(GET) GET(_Bool, MPI_C_BOOL) GET(unsigned char, MPI_BYTE)
#undef GET
  return LLONG_MIN;
}

struct OpCase {
  const char* name;
  MPI_Op op;
  int families; /* bit per Family it applies to */
};
#define F(x) (1 << (x))
static const struct OpCase op_cases[] = {
    {"MPI_SUM", MPI_SUM, F(INTEGER) | F(FLOATING)},  {"MPI_PROD", MPI_PROD, F(INTEGER) | F(FLOATING)},
    {"MPI_MAX", MPI_MAX, F(INTEGER) | F(FLOATING)},  {"MPI_MIN", MPI_MIN, F(INTEGER) | F(FLOATING)},
    {"MPI_LAND", MPI_LAND, F(INTEGER) | F(LOGICAL)}, {"MPI_LOR", MPI_LOR, F(INTEGER) | F(LOGICAL)},
    {"MPI_LXOR", MPI_LXOR, F(INTEGER) | F(LOGICAL)}, {"MPI_BAND", MPI_BAND, F(INTEGER) | F(BYTE)},
    {"MPI_BOR", MPI_BOR, F(INTEGER) | F(BYTE)},      {"MPI_BXOR", MPI_BXOR, F(INTEGER) | F(BYTE)},
};
enum { kOpCases = sizeof op_cases / sizeof op_cases[0] };

/* Rank r's element i for op o: small enough that no type overflows (a product
 * of at most six 2s, sums of at most 8 3s, bit patterns below 128). */
static long long contribution(int o, int r, size_t i) {
  const MPI_Op op = op_cases[o].op;
  const long long k = (long long)(i % 1000);
  if (op == MPI_SUM) return (r + k) % 4;
  if (op == MPI_PROD) return r < 6 && (r + k) % 2 ? 2 : 1;
  if (op == MPI_MAX || op == MPI_MIN) return (r * 5 + k * 3) % 11;
  if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) return (r + k) % 3 ? 1 : 0;
  return (r * 37 + k * 11 + 5) & 0x7f;
}
static long long combine(int o, long long a, long long b) {
  const MPI_Op op = op_cases[o].op;
  if (op == MPI_SUM) return a + b;
  if (op == MPI_PROD) return a * b;
  if (op == MPI_MAX) return a > b ? a : b;
  if (op == MPI_MIN) return a < b ? a : b;
  if (op == MPI_LAND) return a && b;
  if (op == MPI_LOR) return a || b;
  if (op == MPI_LXOR) return !a != !b;
  if (op == MPI_BAND) return a & b;
  if (op == MPI_BOR) return a | b;
  return a ^ b;
}
static long long reference(int o, int n, size_t i) {
  long long acc = contribution(o, 0, i);
  for (int r = 1; r < n; ++r) acc = combine(o, acc, contribution(o, r, i));
  return acc;
}

/* Counts below, at and above the switch point for elements of `size` bytes. */
static void counts_for(size_t size, size_t counts[4]) {
  counts[0] = 1;
  counts[1] = 7;
  counts[2] = kSlotBytes / size;
  counts[3] = kSlotBytes / size + 1;
}

static void reductions_predefined(MPI_Comm comm, int* round) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  void* send = malloc(kSlotBytes + 64);
  void* recv = malloc(kSlotBytes + 64);
  for (int o = 0; o < kOpCases; ++o)
    for (int t = 0; t < kTypeCases; ++t) {
      const struct TypeCase* tc = &type_cases[t];
      if (!(op_cases[o].families & F(tc->family))) continue;
      size_t counts[4];
      counts_for(tc->size, counts);
      for (int c = 0; c < 4; ++c, ++*round) {
        const size_t count = counts[c];
        const int root = *round % n, in_place = *round % 3 == 0;
        for (size_t i = 0; i < count; ++i) put(tc, send, i, contribution(o, rank, i));
        /* Allreduce */
        if (in_place) memcpy(recv, send, count * tc->size);
        MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)count, tc->type, op_cases[o].op, comm);
        int wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += get(tc, recv, i) != reference(o, n, i);
        if (wrong) fprintf(stderr, "rank %d: MPI_Allreduce %s %s count %zu: %d wrong\n", rank, op_cases[o].name, tc->name, count, wrong);
        CHECK(wrong == 0);
        /* Reduce */
        memset(recv, 0x5a, count * tc->size);
        if (in_place && rank == root) memcpy(recv, send, count * tc->size);
        MPI_Reduce(in_place && rank == root ? MPI_IN_PLACE : send, recv, (int)count, tc->type, op_cases[o].op, root,
                   comm);
        if (rank == root) {
          wrong = 0;
          for (size_t i = 0; i < count; ++i) wrong += get(tc, recv, i) != reference(o, n, i);
          if (wrong) fprintf(stderr, "rank %d: MPI_Reduce %s %s count %zu root %d: %d wrong\n", rank, op_cases[o].name, tc->name, count, root, wrong);
          CHECK(wrong == 0);
        }
      }
    }
  free(send);
  free(recv);
}

/* Element i of every rank's vector reduced over ranks 0..upto-1, as the reference does for all n. */
static int prefix_wrong(const struct TypeCase* tc, int o, const void* buf, size_t first, size_t count, int upto) {
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += get(tc, buf, i) != reference(o, upto, first + i);
  return wrong;
}

/* Scan, exscan and reduce-scatter (uniform and with a count of its own per
 * rank) over the whole vector of counts_for's sizes: rank r's block of
 * reduce-scatter is the elements after those of ranks 0..r-1. */
static void reductions_prefix_and_scatter(MPI_Comm comm, int* round) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  void* send = malloc(kSlotBytes + 64);
  void* recv = malloc(kSlotBytes + 64);
  int* counts_v = malloc(sizeof(int) * (size_t)n);
  for (int o = 0; o < kOpCases; ++o)
    for (int t = 0; t < kTypeCases; ++t) {
      const struct TypeCase* tc = &type_cases[t];
      if (!(op_cases[o].families & F(tc->family))) continue;
      size_t counts[4];
      counts_for(tc->size, counts);
      for (int c = 0; c < 4; ++c, ++*round) {
        const size_t count = counts[c];
        const int in_place = *round % 2;
        const char* name = op_cases[o].name;
        for (size_t i = 0; i < count; ++i) put(tc, send, i, contribution(o, rank, i));
        /* Scan */
        memset(recv, 0x5a, count * tc->size);
        if (in_place) memcpy(recv, send, count * tc->size);
        MPI_Scan(in_place ? MPI_IN_PLACE : send, recv, (int)count, tc->type, op_cases[o].op, comm);
        int wrong = prefix_wrong(tc, o, recv, 0, count, rank + 1);
        if (wrong) fprintf(stderr, "rank %d: MPI_Scan %s %s count %zu: %d wrong\n", rank, name, tc->name, count, wrong);
        CHECK(wrong == 0);
        /* Exscan: rank 0's recv is left alone */
        memset(recv, 0x5a, count * tc->size);
        if (in_place) memcpy(recv, send, count * tc->size);
        MPI_Exscan(in_place ? MPI_IN_PLACE : send, recv, (int)count, tc->type, op_cases[o].op, comm);
        if (rank > 0) {
          wrong = prefix_wrong(tc, o, recv, 0, count, rank);
          if (wrong) fprintf(stderr, "rank %d: MPI_Exscan %s %s count %zu: %d wrong\n", rank, name, tc->name, count, wrong);
          CHECK(wrong == 0);
        }
        /* Reduce_scatter_block: count / n elements each (at least one) */
        const size_t block = count / (size_t)n ? count / (size_t)n : 1;
        for (size_t i = 0; i < block * (size_t)n; ++i) put(tc, send, i, contribution(o, rank, i));
        memset(recv, 0x5a, block * (size_t)n * tc->size);
        if (in_place) memcpy(recv, send, block * (size_t)n * tc->size);
        MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, (int)block, tc->type, op_cases[o].op, comm);
        wrong = prefix_wrong(tc, o, recv, (size_t)rank * block, block, n);
        if (wrong) fprintf(stderr, "rank %d: MPI_Reduce_scatter_block %s %s block %zu: %d wrong\n", rank, name, tc->name, block, wrong);
        CHECK(wrong == 0);
        /* Reduce_scatter: count elements in all, rank r's count a little more than r-1's (rank 0's the rest; 0 for some) */
        size_t given = 0;
        for (int r = n - 1; r > 0; --r) {
          counts_v[r] = (int)(given + (size_t)r <= count ? (size_t)r : 0);
          given += (size_t)counts_v[r];
        }
        counts_v[0] = (int)(count - given);
        size_t first = 0;
        for (int r = 0; r < rank; ++r) first += (size_t)counts_v[r];
        for (size_t i = 0; i < count; ++i) put(tc, send, i, contribution(o, rank, i));
        memset(recv, 0x5a, count * tc->size);
        if (in_place) memcpy(recv, send, count * tc->size);
        MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : send, recv, counts_v, tc->type, op_cases[o].op, comm);
        wrong = prefix_wrong(tc, o, recv, first, (size_t)counts_v[rank], n);
        if (wrong) fprintf(stderr, "rank %d: MPI_Reduce_scatter %s %s count %zu: %d wrong\n", rank, name, tc->name, count, wrong);
        CHECK(wrong == 0);
      }
    }
  free(counts_v);
  free(send);
  free(recv);
}

/* MAXLOC and MINLOC on MPI_2INT and MPI_DOUBLE_INT: ties go to the lowest rank. */
struct IntInt { int value, index; };
struct DoubleInt { double value; int index; };
static void reductions_loc(MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const int count = kSlotBytes / (int)sizeof(struct IntInt);
  struct IntInt* a = malloc(sizeof *a * (size_t)count);
  struct IntInt* ra = malloc(sizeof *ra * (size_t)count);
  struct DoubleInt* b = malloc(sizeof *b * (size_t)count);
  struct DoubleInt* rb = malloc(sizeof *rb * (size_t)count);
  for (int maxloc = 0; maxloc < 2; ++maxloc) {
    for (int i = 0; i < count; ++i) {
      a[i].value = (rank * 3 + i) % 4;
      a[i].index = rank;
      b[i].value = (double)a[i].value;
      b[i].index = rank;
    }
    MPI_Allreduce(a, ra, count, MPI_2INT, maxloc ? MPI_MAXLOC : MPI_MINLOC, comm);
    MPI_Allreduce(b, rb, count / 2, MPI_DOUBLE_INT, maxloc ? MPI_MAXLOC : MPI_MINLOC, comm);
    int wrong = 0;
    for (int i = 0; i < count; ++i) {
      int best = (0 * 3 + i) % 4, at = 0;
      for (int r = 1; r < n; ++r) {
        const int v = (r * 3 + i) % 4;
        if (maxloc ? v > best : v < best) best = v, at = r;
      }
      wrong += ra[i].value != best || ra[i].index != at;
      if (i < count / 2) wrong += rb[i].value != best || rb[i].index != at;
    }
    CHECK(wrong == 0);
  }
  free(a);
  free(ra);
  free(b);
  free(rb);
}

/* x -> a*x + b, composed: not commutative, but associative (unsigned arithmetic wraps). */
struct Affine { unsigned a, b; };
static void compose(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  struct Affine* p = in;
  struct Affine* q = inout;
  for (int i = 0; i < *len; ++i) {
    const struct Affine r = {p[i].a * q[i].a, p[i].a * q[i].b + p[i].b};
    q[i] = r;
  }
}
static struct Affine affine_of(int r, int i) {
  struct Affine x = {(unsigned)(r * 2 + i % 5 + 3), (unsigned)(r * 7 + i)};
  return x;
}

/* Sums every other int of one element of `every_other` (below). */
static void add_every_other(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int e = 0; e < *len; ++e)
    for (int i = 0; i < 64; ++i) ((int*)inout)[e * 127 + 2 * i] += ((const int*)in)[e * 127 + 2 * i];
}

/* A user op that is not commutative (rank order must be kept), on a contiguous
 * derived type; and a user op on a vector type (every other int), which the
 * shared-memory path leaves to point-to-point. */
static void reductions_user(MPI_Comm comm, int* round) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  MPI_Op op;
  MPI_Op_create(compose, 0, &op);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_UNSIGNED, &pair);
  MPI_Type_commit(&pair);
  const int counts[] = {1, 13, kSlotBytes / (int)sizeof(struct Affine), kSlotBytes / (int)sizeof(struct Affine) + 1};
  struct Affine* x = malloc(sizeof *x * (size_t)counts[3]);
  struct Affine* y = malloc(sizeof *y * (size_t)counts[3]);
  for (int c = 0; c < 4; ++c, ++*round) {
    const int count = counts[c], root = *round % n;
    for (int i = 0; i < count; ++i) x[i] = affine_of(rank, i);
    MPI_Allreduce(x, y, count, pair, op, comm);
    int wrong = 0;
    for (int i = 0; i < count; ++i) {
      struct Affine acc = affine_of(n - 1, i);
      int one = 1;
      for (int r = n - 2; r >= 0; --r) {
        struct Affine in = affine_of(r, i);
        compose(&in, &acc, &one, NULL);
      }
      wrong += y[i].a != acc.a || y[i].b != acc.b;
    }
    CHECK(wrong == 0);
    memset(y, 0, sizeof *y * (size_t)count);
    MPI_Reduce(x, y, count, pair, op, root, comm);
    if (rank == root) {
      wrong = 0;
      for (int i = 0; i < count; ++i) {
        struct Affine acc = affine_of(n - 1, i);
        int one = 1;
        for (int r = n - 2; r >= 0; --r) {
          struct Affine in = affine_of(r, i);
          compose(&in, &acc, &one, NULL);
        }
        wrong += y[i].a != acc.a || y[i].b != acc.b;
      }
      CHECK(wrong == 0);
    }
  }
  MPI_Op_free(&op);
  MPI_Type_free(&pair);
  free(x);
  free(y);

  MPI_Datatype every_other;
  MPI_Type_vector(64, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int v[128], sum[128];
  for (int i = 0; i < 128; ++i) v[i] = sum[i] = i % 2 ? -1 : rank + i;
  MPI_Op add;
  MPI_Op_create(add_every_other, 1, &add);
  MPI_Allreduce(v, sum, 1, every_other, add, comm);
  for (int i = 0; i < 128; ++i) CHECK(sum[i] == (i % 2 ? -1 : n * (n - 1) / 2 + n * i));
  MPI_Op_free(&add);
  MPI_Type_free(&every_other);
}

/* ------------------------------------------------------------ data movement */

/* Byte b of rank r's block in call `round`. */
static unsigned char pattern(int round, int r, size_t b) { return (unsigned char)(round * 31 + r * 7 + b * 13 + 1); }

/* Element counts of each layout for block sizes below, at and above the switch point. */
struct Layout {
  const char* name;
  MPI_Datatype type;
  size_t data_bytes, extent; /* of one element */
};

/* Fills count elements of layout l with pattern(round, r, ...) in its data bytes, 0xee in its gaps. */
static void fill(const struct Layout* l, void* buf, size_t count, int round, int r) {
  unsigned char* p = buf;
  memset(p, 0xee, count * l->extent);
  size_t b = 0;
  for (size_t e = 0; e < count; ++e)
    for (size_t j = 0; j < l->data_bytes; ++j) p[e * l->extent + j] = pattern(round, r, b++);
}
static int matches(const struct Layout* l, const void* buf, size_t count, int round, int r) {
  const unsigned char* p = buf;
  size_t b = 0;
  for (size_t e = 0; e < count; ++e) {
    for (size_t j = 0; j < l->data_bytes; ++j)
      if (p[e * l->extent + j] != pattern(round, r, b++)) return 0;
    for (size_t j = l->data_bytes; j < l->extent; ++j)
      if (p[e * l->extent + j] != 0xee) return 0;
  }
  return 1;
}

/* 3 ints in 16 bytes, committed: a type the collectives pack and unpack. */
static MPI_Datatype three_ints_in_16_bytes(void) {
  MPI_Datatype ints, resized;
  MPI_Type_contiguous(3, MPI_INT, &ints);
  MPI_Type_create_resized(ints, 0, 16, &resized);
  MPI_Type_free(&ints); /* the resized type keeps what it needs of it */
  MPI_Type_commit(&resized);
  return resized;
}

static void data_movement(MPI_Comm comm, int* round) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  /* 12 bytes of every 16: the pack/unpack path. */
  MPI_Datatype gappy_resized = three_ints_in_16_bytes();
  const struct Layout layouts[] = {{"MPI_BYTE", MPI_BYTE, 1, 1}, {"MPI_INT", MPI_INT, 4, 4},
                                   {"3 ints in 16 bytes", gappy_resized, 12, 16}};
  for (int li = 0; li < 3; ++li) {
    const struct Layout* l = &layouts[li];
    const size_t counts[] = {1, 5, kSlotBytes / l->data_bytes, kSlotBytes / l->data_bytes + 1};
    for (int c = 0; c < 4; ++c, ++*round) {
      const size_t count = counts[c], block = count * l->extent;
      const int root = *round % n;
      unsigned char* mine = malloc(block);
      unsigned char* all = malloc(block * (size_t)n);
      /* Bcast */
      if (rank == root) {
        fill(l, mine, count, *round, root);
      } else {
        memset(mine, 0xee, block);
        for (size_t e = 0; e < count; ++e) memset(mine + e * l->extent, 0, l->data_bytes);
      }
      MPI_Bcast(mine, (int)count, l->type, root, comm);
      CHECK(matches(l, mine, count, *round, root));
      /* Gather: rank r's block lands at r; in place at the root half the time. */
      const int in_place = *round % 2;
      fill(l, mine, count, *round, rank);
      memset(all, 0xee, block * (size_t)n);
      if (rank == root && in_place) fill(l, all + (size_t)root * block, count, *round, root);
      MPI_Gather(rank == root && in_place ? MPI_IN_PLACE : mine, (int)count, l->type, all, (int)count, l->type, root,
                 comm);
      if (rank == root)
        for (int r = 0; r < n; ++r) CHECK(matches(l, all + (size_t)r * block, count, *round, r));
      /* Scatter: the root's block r goes to r. */
      if (rank == root)
        for (int r = 0; r < n; ++r) fill(l, all + (size_t)r * block, count, *round + 1, r);
      memset(mine, 0xee, block);
      MPI_Scatter(all, (int)count, l->type, rank == root && in_place ? MPI_IN_PLACE : mine, (int)count, l->type, root,
                  comm);
      CHECK(matches(l, rank == root && in_place ? all + (size_t)root * block : mine, count, *round + 1, rank));
      /* Allgather */
      fill(l, mine, count, *round + 2, rank);
      memset(all, 0xee, block * (size_t)n);
      if (in_place) fill(l, all + (size_t)rank * block, count, *round + 2, rank);
      MPI_Allgather(in_place ? MPI_IN_PLACE : mine, (int)count, l->type, all, (int)count, l->type, comm);
      for (int r = 0; r < n; ++r) CHECK(matches(l, all + (size_t)r * block, count, *round + 2, r));
      free(mine);
      free(all);
    }
    /* Gatherv and scatterv, the blocks in reverse order: all small, all large,
     * and large on odd ranks only (those go as messages, the others through
     * the slots); in place at the root half the time. */
    const size_t slot_count = kSlotBytes / l->data_bytes;
    for (int c = 0; c < 3; ++c, ++*round) {
      const int root = *round % n, in_place = *round % 2;
      int* counts_v = malloc(sizeof(int) * (size_t)n);
      int* displs = malloc(sizeof(int) * (size_t)n);
      size_t total = 0;
      for (int r = n - 1; r >= 0; --r) {
        const int large = c == 1 || (c == 2 && r % 2);
        counts_v[r] = (int)((large ? slot_count + 1 : 2) + (size_t)r);
        displs[r] = (int)total;
        total += (size_t)counts_v[r];
      }
      const size_t own = (size_t)counts_v[rank] * l->extent;
      unsigned char* mine = malloc(own);
      unsigned char* all = malloc(total * l->extent);
      unsigned char* at_root = all + (size_t)displs[root] * l->extent;
      fill(l, mine, (size_t)counts_v[rank], *round, rank);
      memset(all, 0xee, total * l->extent);
      if (rank == root && in_place) fill(l, at_root, (size_t)counts_v[root], *round, root);
      MPI_Gatherv(rank == root && in_place ? MPI_IN_PLACE : mine, counts_v[rank], l->type, all, counts_v, displs,
                  l->type, root, comm);
      if (rank == root)
        for (int r = 0; r < n; ++r)
          CHECK(matches(l, all + (size_t)displs[r] * l->extent, (size_t)counts_v[r], *round, r));
      if (rank == root)
        for (int r = 0; r < n; ++r) fill(l, all + (size_t)displs[r] * l->extent, (size_t)counts_v[r], *round + 1, r);
      memset(mine, 0xee, own);
      MPI_Scatterv(all, counts_v, displs, l->type, rank == root && in_place ? MPI_IN_PLACE : mine, counts_v[rank],
                   l->type, root, comm);
      CHECK(matches(l, rank == root && in_place ? at_root : mine, (size_t)counts_v[rank], *round + 1, rank));
      free(mine);
      free(all);
      free(counts_v);
      free(displs);
    }
    /* Alltoallv: rank r's block for s has (r + s) % 4 + 1 elements, or past
     * a slot's worth for some pairs (sent as messages; the others through the
     * slots), the blocks in reverse order on both sides. */
    for (int c = 0; c < 2; ++c, ++*round) {
      int *send_counts = malloc(sizeof(int) * (size_t)n), *send_displs = malloc(sizeof(int) * (size_t)n);
      int *recv_counts = malloc(sizeof(int) * (size_t)n), *recv_displs = malloc(sizeof(int) * (size_t)n);
      size_t send_total = 0, recv_total = 0;
      for (int r = n - 1; r >= 0; --r) {
        const int to = (rank + r) % 4 + 1, from = (r + rank) % 4 + 1;
        send_counts[r] = c == 1 && (rank + 2 * r) % 3 == 0 ? (int)slot_count / 2 + to : to;
        recv_counts[r] = c == 1 && (r + 2 * rank) % 3 == 0 ? (int)slot_count / 2 + from : from;
        send_displs[r] = (int)send_total;
        recv_displs[r] = (int)recv_total;
        send_total += (size_t)send_counts[r];
        recv_total += (size_t)recv_counts[r];
      }
      unsigned char* out = malloc(send_total * l->extent);
      unsigned char* in = malloc(recv_total * l->extent);
      for (int s = 0; s < n; ++s)
        fill(l, out + (size_t)send_displs[s] * l->extent, (size_t)send_counts[s], *round, rank * n + s);
      memset(in, 0xee, recv_total * l->extent);
      MPI_Alltoallv(out, send_counts, send_displs, l->type, in, recv_counts, recv_displs, l->type, comm);
      for (int r = 0; r < n; ++r)
        CHECK(matches(l, in + (size_t)recv_displs[r] * l->extent, (size_t)recv_counts[r], *round, r * n + rank));
      free(out);
      free(in);
      free(send_counts);
      free(send_displs);
      free(recv_counts);
      free(recv_displs);
    }
    /* Alltoall: rank r's block for s is pattern(round, r * n + s); n blocks of
     * each size of below, at and above the switch point in all. */
    const size_t per_block = kSlotBytes / l->data_bytes / (size_t)n;
    const size_t alltoall_counts[] = {1, 5, per_block ? per_block : 1, per_block + 1};
    for (int c = 0; c < 4; ++c, ++*round) {
      const size_t count = alltoall_counts[c], block = count * l->extent;
      unsigned char* out = malloc(block * (size_t)n);
      unsigned char* in = malloc(block * (size_t)n);
      for (int s = 0; s < n; ++s) fill(l, out + (size_t)s * block, count, *round, rank * n + s);
      memset(in, 0xee, block * (size_t)n);
      MPI_Alltoall(out, (int)count, l->type, in, (int)count, l->type, comm);
      for (int r = 0; r < n; ++r) CHECK(matches(l, in + (size_t)r * block, count, *round, r * n + rank));
      free(out);
      free(in);
    }
    /* Allgatherv: rank r sends r+1 .. elements, the blocks in reverse order. */
    for (int c = 0; c < 2; ++c, ++*round) {
      const size_t base = c == 0 ? 3 : kSlotBytes / l->data_bytes - (size_t)n;
      int* counts_v = malloc(sizeof(int) * (size_t)n);
      int* displs = malloc(sizeof(int) * (size_t)n);
      size_t total = 0;
      for (int r = n - 1; r >= 0; --r) {
        counts_v[r] = (int)(base + (size_t)r);
        displs[r] = (int)total;
        total += (size_t)counts_v[r];
      }
      unsigned char* mine = malloc((size_t)counts_v[rank] * l->extent);
      unsigned char* all = malloc(total * l->extent);
      fill(l, mine, (size_t)counts_v[rank], *round, rank);
      memset(all, 0xee, total * l->extent);
      MPI_Allgatherv(mine, counts_v[rank], l->type, all, counts_v, displs, l->type, comm);
      for (int r = 0; r < n; ++r)
        CHECK(matches(l, all + (size_t)displs[r] * l->extent, (size_t)counts_v[r], *round, r));
      free(mine);
      free(all);
      free(counts_v);
      free(displs);
    }
  }
  MPI_Type_free(&gappy_resized);
}

/* ------------------------------------------------------------ back to back */

/* Calls with rotating roots and sizes, no barrier between them (alltoall,
 * alltoallv, reduce-scatter, scan and exscan too); every few
 * rounds one rank lags, so that a root runs ahead of its readers and reuses
 * its buffers only once they are done. */
static int alltoallv_count(int from, int to, int round) {
  enum { kInts = kSlotBytes / sizeof(int) };
  return round % 7 == 3 && (from + to) % 2 == 0 ? kInts / 2 + (from + to) % 3 : (from * 3 + to + round) % 5 + 1;
}

static void back_to_back(MPI_Comm comm, int rounds) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  enum { kInts = kSlotBytes / sizeof(int) };
  int* buf = malloc(sizeof(int) * (kInts + (size_t)n));
  int* all = malloc(sizeof(int) * (kInts + (size_t)n) * (size_t)n);
  int* received = malloc(sizeof(int) * (kInts + (size_t)n) * (size_t)n);
  for (int round = 0; round < rounds; ++round) {
    const int root = round % n, count = round % 3 ? 1 + round % 17 : kInts;
    if (round % 97 == 0 && rank == (round / 97) % n) usleep(200);
    for (int i = 0; i < count; ++i) buf[i] = rank == root ? round * 1000 + i : -1;
    MPI_Bcast(buf, count, MPI_INT, root, comm);
    int wrong = 0;
    for (int i = 0; i < count; ++i) wrong += buf[i] != round * 1000 + i;
    /* Reduce to the next rank, in place there. */
    const int reduce_root = (root + 1) % n;
    for (int i = 0; i < count; ++i) (rank == reduce_root ? all : buf)[i] = rank + round + i;
    MPI_Reduce(rank == reduce_root ? MPI_IN_PLACE : buf, all, count, MPI_INT, MPI_SUM, reduce_root, comm);
    if (rank == reduce_root)
      for (int i = 0; i < count; ++i) wrong += all[i] != n * (n - 1) / 2 + n * (round + i);
    for (int i = 0; i < count; ++i) buf[i] = rank * round + i;
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_INT, MPI_MAX, comm);
    for (int i = 0; i < count; ++i) wrong += buf[i] != (n - 1) * round + i;
    if (rank == root)
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < count; ++i) all[(size_t)r * (size_t)count + (size_t)i] = r * 7 + round + i;
    MPI_Scatter(all, count, MPI_INT, buf, count, MPI_INT, root, comm);
    for (int i = 0; i < count; ++i) wrong += buf[i] != rank * 7 + round + i;
    MPI_Allgather(buf, count, MPI_INT, all, count, MPI_INT, comm);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < count; ++i) wrong += all[(size_t)r * (size_t)count + (size_t)i] != r * 7 + round + i;
    /* Alltoall and reduce-scatter of `block` ints per rank: at most kInts in all. */
    const int block = count / n ? count / n : 1;
    for (int s = 0; s < n; ++s)
      for (int i = 0; i < block; ++i) all[s * block + i] = ((rank * 64 + s) * 4096 + i) ^ round;
    MPI_Alltoall(all, block, MPI_INT, buf, block, MPI_INT, comm);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < block; ++i) wrong += buf[r * block + i] != (((r * 64 + rank) * 4096 + i) ^ round);
    /* Alltoallv: a few ints a pair, every seventh round half a slot's worth
     * for some pairs (two of those and the table do not fit one slot: some go
     * as messages), the blocks in reverse order on both sides. */
    {
      int send_counts[kMaxSmRanks], send_displs[kMaxSmRanks], recv_counts[kMaxSmRanks], recv_displs[kMaxSmRanks];
      int send_total = 0, recv_total = 0;
      for (int r = n - 1; r >= 0; --r) {
        send_counts[r] = alltoallv_count(rank, r, round);
        recv_counts[r] = alltoallv_count(r, rank, round);
        send_displs[r] = send_total;
        recv_displs[r] = recv_total;
        send_total += send_counts[r];
        recv_total += recv_counts[r];
      }
      for (int d = 0; d < n; ++d)
        for (int i = 0; i < send_counts[d]; ++i) all[send_displs[d] + i] = ((rank * 64 + d) * 4096 + i) ^ round;
      for (int i = 0; i < recv_total; ++i) received[i] = -1;
      MPI_Alltoallv(all, send_counts, send_displs, MPI_INT, received, recv_counts, recv_displs, MPI_INT, comm);
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < recv_counts[r]; ++i)
          wrong += received[recv_displs[r] + i] != (((r * 64 + rank) * 4096 + i) ^ round);
    }
    for (int i = 0; i < block * n; ++i) all[i] = rank + round + i;
    MPI_Reduce_scatter_block(all, buf, block, MPI_INT, MPI_MAX, comm);
    for (int i = 0; i < block; ++i) wrong += buf[i] != n - 1 + round + rank * block + i;
    for (int i = 0; i < count; ++i) buf[i] = rank + round + i;
    MPI_Scan(MPI_IN_PLACE, buf, count, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < count; ++i) wrong += buf[i] != rank * (rank + 1) / 2 + (rank + 1) * (round + i);
    for (int i = 0; i < count; ++i) buf[i] = rank + round + i;
    MPI_Exscan(MPI_IN_PLACE, buf, count, MPI_INT, MPI_SUM, comm);
    if (rank > 0)
      for (int i = 0; i < count; ++i) wrong += buf[i] != rank * (rank - 1) / 2 + rank * (round + i);
    /* Gatherv and scatterv of count + r ints from rank r, every fourth round:
     * past the slot on all but rank 0 with the largest count. */
    if (round % 4 == 0) {
    int* counts_v = malloc(sizeof(int) * (size_t)n);
    int* displs = malloc(sizeof(int) * (size_t)n);
    for (int r = 0; r < n; ++r) {
      counts_v[r] = count + r;
      displs[r] = r * (kInts + n);
    }
    for (int i = 0; i < count + rank; ++i) buf[i] = ((rank * 64) * 4096 + i) ^ round;
    MPI_Gatherv(buf, count + rank, MPI_INT, all, counts_v, displs, MPI_INT, root, comm);
    if (rank == root)
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < count + r; ++i) wrong += all[displs[r] + i] != (((r * 64) * 4096 + i) ^ round);
    if (rank == root)
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < count + r; ++i) all[displs[r] + i] = r * 3 + round + i;
    MPI_Scatterv(all, counts_v, displs, MPI_INT, buf, count + rank, MPI_INT, root, comm);
    for (int i = 0; i < count + rank; ++i) wrong += buf[i] != rank * 3 + round + i;
    free(counts_v);
    free(displs);
    }
    if (round % 5 == 0) MPI_Barrier(comm);
    if (wrong) fprintf(stderr, "rank %d: round %d: %d wrong\n", rank, round, wrong);
    CHECK(wrong == 0);
    if (wrong) break;
  }
  free(buf);
  free(all);
  free(received);
}

/* ------------------------------------------------------------ large calls */

/* Int j of rank r's vector in round `round`: any wrong part, piece or area offset shows. */
static int large_value(int round, int r, size_t j) { return (int)((j * 2654435761u + (size_t)r * 40503u + (size_t)round * 977u) % 100003u); }

/* Allreduce above kSlotBytes: MPI_SUM of ints, MPI_MAXLOC of (int, int)
 * pairs and MPI_MAX of doubles, at counts that cut into n parts unevenly and
 * into pieces of kLargeBytes (the last one short), every element checked. */
static void large_allreduce(MPI_Comm comm, int round) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const size_t ints_list[] = {kSlotBytes / 4 + 1, 16411, kLargeBytes / 4, kLargeBytes / 4 + 1, 11 * kLargeBytes / 8 + 7};
  for (size_t c = 0; c < sizeof ints_list / sizeof ints_list[0]; ++c, ++round) {
    const size_t ints = ints_list[c];
    const int in_place = (round + (int)c) % 2;
    int* send = malloc(ints * sizeof(int));
    int* recv = malloc(ints * sizeof(int));
    /* MPI_SUM of ints */
    for (size_t j = 0; j < ints; ++j) (in_place ? recv : send)[j] = large_value(round, rank, j);
    MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)ints, MPI_INT, MPI_SUM, comm);
    size_t wrong = 0;
    for (size_t j = 0; j < ints; ++j) {
      long long expected = 0;
      for (int r = 0; r < n; ++r) expected += large_value(round, r, j);
      wrong += recv[j] != expected;
    }
    /* MPI_MAXLOC of pairs (8-byte elements): the value and the rank that has it. */
    const size_t pairs = ints / 2;
    for (size_t j = 0; j < pairs; ++j) {
      send[2 * j] = large_value(round, rank, j) % 1000;
      send[2 * j + 1] = rank;
    }
    MPI_Allreduce(send, recv, (int)pairs, MPI_2INT, MPI_MAXLOC, comm);
    for (size_t j = 0; j < pairs; ++j) {
      int best = -1, at = -1;
      for (int r = 0; r < n; ++r)
        if (large_value(round, r, j) % 1000 > best) best = large_value(round, r, j) % 1000, at = r;
      wrong += recv[2 * j] != best || recv[2 * j + 1] != at;
    }
    /* MPI_MAX of doubles, in place the other way round */
    const size_t doubles = ints / 2;
    double* d = (double*)(in_place ? send : recv);
    double* dsend = (double*)(in_place ? recv : send);
    for (size_t j = 0; j < doubles; ++j) (in_place ? d : dsend)[j] = large_value(round + 1, rank, j) * 0.5;
    MPI_Allreduce(in_place ? MPI_IN_PLACE : dsend, d, (int)doubles, MPI_DOUBLE, MPI_MAX, comm);
    for (size_t j = 0; j < doubles; ++j) {
      double expected = 0;
      for (int r = 0; r < n; ++r)
        if (large_value(round + 1, r, j) * 0.5 > expected) expected = large_value(round + 1, r, j) * 0.5;
      wrong += d[j] != expected;
    }
    if (wrong) fprintf(stderr, "rank %d: large allreduce of %zu ints: %zu wrong\n", rank, ints, wrong);
    CHECK(wrong == 0);
    free(send);
    free(recv);
  }
}

/* Allgatherv with rank r's block of `count_of(r)` elements, the blocks in
 * reverse rank order in the receive buffer (a gap of one element between),
 * the largest above kSlotBytes: blocks of different sizes, some small, one
 * of exactly kLargeBytes, and (past the large areas) one above it. */
static void large_allgatherv(MPI_Comm comm, int round) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  MPI_Datatype gappy_resized = three_ints_in_16_bytes();
  const struct Layout layouts[] = {{"MPI_INT", MPI_INT, 4, 4}, {"3 ints in 16 bytes", gappy_resized, 12, 16}};
  for (int li = 0; li < 2; ++li)
    for (int shape = 0; shape < 4; ++shape, ++round) {
      const struct Layout* l = &layouts[li];
      int counts[kMaxSmRanks], displs[kMaxSmRanks];
      size_t total = 0;
      for (int r = n - 1; r >= 0; --r) {
        size_t bytes;
        if (shape == 0) bytes = kSlotBytes + 1 + (size_t)r * 4099; /* all above the slot, uneven */
        else if (shape == 1) bytes = r % 2 ? 3 * kSlotBytes + (size_t)r * 64 : 16 + (size_t)r; /* some small */
        else if (shape == 2) bytes = r == n - 1 ? kLargeBytes : 40000 + (size_t)r * 12; /* the largest fits exactly */
        else bytes = r == 0 ? kLargeBytes + 12 * 16 : 20000; /* past the large areas: point to point */
        counts[r] = (int)(bytes / l->data_bytes);
        displs[r] = (int)total;
        total += (size_t)counts[r] + 1;
      }
      unsigned char* all = malloc(total * l->extent);
      unsigned char* mine = malloc((size_t)counts[rank] * l->extent);
      const int in_place = (round + shape) % 2;
      memset(all, 0xee, total * l->extent);
      fill(l, in_place ? all + (size_t)displs[rank] * l->extent : mine, (size_t)counts[rank], round, rank);
      MPI_Allgatherv(in_place ? MPI_IN_PLACE : mine, counts[rank], l->type, all, counts, displs, l->type, comm);
      int wrong = 0;
      for (int r = 0; r < n; ++r) {
        wrong += !matches(l, all + (size_t)displs[r] * l->extent, (size_t)counts[r], round, r);
        const unsigned char* gap = all + (size_t)(displs[r] + counts[r]) * l->extent;
        for (size_t b = 0; b < l->extent; ++b) wrong += gap[b] != 0xee;
      }
      if (wrong) fprintf(stderr, "rank %d: large allgatherv %s shape %d: %d blocks wrong\n", rank, l->name, shape, wrong);
      CHECK(wrong == 0);
      free(all);
      free(mine);
    }
  MPI_Type_free(&gappy_resized);
}

/* Large allreduce and allgather back to back, one rank in turn late: an area
 * written again while another rank still reads it shows as a wrong answer. */
static void large_back_to_back(MPI_Comm comm, int rounds) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  const size_t ints = 3 * kLargeBytes / 8 + 5; /* 1.5 pieces of the area, the second half-full */
  int* v = malloc(ints * sizeof(int));
  int* all = malloc(ints * sizeof(int) * (size_t)n);
  for (int round = 0; round < rounds; ++round) {
    if (round % 5 == 0 && rank == (round / 5) % n) usleep(2000);
    const size_t count = round % 3 == 2 ? ints : kSlotBytes / 4 + 1 + (size_t)round;
    for (size_t j = 0; j < count; ++j) v[j] = large_value(round, rank, j);
    MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_INT, MPI_SUM, comm);
    size_t wrong = 0;
    for (size_t j = 0; j < count; ++j) {
      long long expected = 0;
      for (int r = 0; r < n; ++r) expected += large_value(round, r, j);
      wrong += v[j] != expected;
    }
    for (size_t j = 0; j < count; ++j) v[j] = large_value(round, rank, j) ^ 0x5555;
    MPI_Allgather(v, (int)count, MPI_INT, all, (int)count, MPI_INT, comm);
    for (int r = 0; r < n; ++r)
      for (size_t j = 0; j < count; ++j) wrong += all[(size_t)r * count + j] != (large_value(round, r, j) ^ 0x5555);
    const int root = round % n;
    for (size_t j = 0; j < count; ++j) v[j] = rank == root ? large_value(round, root, j) : -1;
    MPI_Bcast(v, (int)count, MPI_INT, root, comm);
    for (size_t j = 0; j < count; ++j) wrong += v[j] != large_value(round, root, j);
    if (wrong) fprintf(stderr, "rank %d: large round %d: %zu wrong\n", rank, round, wrong);
    CHECK(wrong == 0);
    if (wrong) break;
  }
  free(v);
  free(all);
}

/* Bcast above the switch point with the root's type contiguous and the
 * receivers' not (3 ints in 16 bytes), and the other way round: packed and
 * unpacked across the pieces of the large areas (one piece and two). */
static void large_bcast_mixed_types(MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  MPI_Datatype gappy_resized = three_ints_in_16_bytes();
  const size_t triples[] = {5000, 100003};
  int* v = malloc(100003 * 16);
  CHECK(v != NULL);
  for (int c = 0; c < 4; ++c) {
    const size_t k = triples[c % 2];
    const int root = c % n, gappy_root = c / 2, gappy_here = (rank == root) == gappy_root;
    for (size_t t = 0; t < k; ++t)
      for (int i = 0; i < 4; ++i) {
        int* element = gappy_here ? v + t * 4 : v + t * 3;
        if (!gappy_here && i == 3) break;
        element[i] = rank == root && i < 3 ? large_value(c, root, t * 3 + (size_t)i) : -1;
      }
    if (gappy_here)
      MPI_Bcast(v, (int)k, gappy_resized, root, comm);
    else
      MPI_Bcast(v, (int)(3 * k), MPI_INT, root, comm);
    size_t wrong = 0;
    for (size_t t = 0; t < k; ++t)
      for (int i = 0; i < 3; ++i) wrong += (gappy_here ? v[t * 4 + (size_t)i] : v[t * 3 + (size_t)i]) !=
                                           large_value(c, root, t * 3 + (size_t)i);
    if (gappy_here)
      for (size_t t = 0; t < k; ++t) wrong += v[t * 4 + 3] != -1;
    CHECK(wrong == 0);
  }
  free(v);
  MPI_Type_free(&gappy_resized);
}

/* Reduce with the root in place, back to back: the root's data must be read before the result lands. */
static void reduce_in_place_back_to_back(MPI_Comm comm, int rounds) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  int v[4];
  for (int round = 0; round < rounds; ++round) {
    const int root = (round * 5) % n;
    for (int i = 0; i < 4; ++i) v[i] = rank + round + i;
    MPI_Reduce(rank == root ? MPI_IN_PLACE : v, rank == root ? v : NULL, 4, MPI_INT, MPI_SUM, root, comm);
    if (rank == root)
      for (int i = 0; i < 4; ++i) CHECK(v[i] == n * (n - 1) / 2 + n * (round + i));
  }
}

/* A truncating bcast's outcome on this rank: MPI_ERR_TRUNCATE where its buffer was short, success elsewhere. */
static void check_truncation_outcome(int rc, int truncated) {
  int error_class = MPI_SUCCESS;
  MPI_Error_class(rc, &error_class);
  CHECK(error_class == (truncated ? MPI_ERR_TRUNCATE : MPI_SUCCESS));
}

/* The next broadcast, well formed, arrives whole: nobody is a call behind. */
static void check_next_bcast_whole(MPI_Comm comm, int root, int value) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  int v[3] = {rank, rank, rank};
  if (rank == root) v[0] = v[1] = v[2] = value;
  CHECK(MPI_Bcast(v, 3, MPI_INT, root, comm) == MPI_SUCCESS);
  CHECK(v[0] == value && v[2] == value);
}

/* An erroneous MPI_Bcast whose root sends more than a receiver's buffer
 * holds, with the two sizes on either side of the shared-memory switch
 * point (8 KiB) and of none: each receiver gets MPI_ERR_TRUNCATE, the root
 * success, and the members stay in step for the calls after it. Before,
 * each member chose the algorithm by its own size: the receivers waited in
 * shared memory for a root that sent point to point, and the job hung.
 * Only the leaves of the point-to-point tree (odd ranks counted from the
 * root) take the smaller buffer here; truncated_bcast_inner has an inner rank do so. */
static void truncated_bcast(MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int root_ints[] = {4096, 1024, 65536, 300000};
  const int receiver_ints[] = {256, 256, 1024, 16};
  int* buf = malloc(300000 * sizeof(int));
  CHECK(buf != NULL);
  for (int c = 0; c < 4; ++c) {
    const int root = c % n;
    for (int i = 0; i < root_ints[c]; ++i) buf[i] = rank == root ? i * 7 + c : -1;
    const int truncated = (rank - root + n) % n % 2 == 1;
    const int rc = MPI_Bcast(buf, truncated ? receiver_ints[c] : root_ints[c], MPI_INT, root, comm);
    check_truncation_outcome(rc, truncated);
    if (!truncated) CHECK(buf[root_ints[c] - 1] == (root_ints[c] - 1) * 7 + c);
    check_next_bcast_whole(comm, root, 1000 + c);
  }
  free(buf);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
}

/* A rank of the point-to-point tree that passes the data on (relative rank 2
 * of 4 or more, the parent of 3) has the smaller buffer, under
 * MPI_ERRORS_RETURN: it gets MPI_ERR_TRUNCATE with its buffer filled as far
 * as it goes, and the ranks below it still get the whole message (they
 * waited forever when its receive truncated). Blocking and non-blocking, at
 * sizes for the slot, the eager and rendezvous messages and the large areas
 * (in more than one piece); with fewer ranks there is no such rank and a leaf truncates. */
static void truncated_bcast_inner(MPI_Comm comm) {
  int rank, n;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int root_ints[] = {16, 4096, 16384, 300000};
  const int receiver_ints[] = {3, 1000, 1024, 100000};
  const int inner = n >= 4 ? 2 : 1;
  int* buf = malloc(300001 * sizeof(int));
  CHECK(buf != NULL);
  for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
    for (int c = 0; c < 4; ++c) {
      const int root = (c + nonblocking) % n;
      const int truncated = n > 1 && (rank - root + n) % n == inner;
      const int count = truncated ? receiver_ints[c] : root_ints[c];
      for (int i = 0; i <= root_ints[c]; ++i) buf[i] = rank == root ? i * 5 + c : -1;
      int rc;
      if (nonblocking) {
        MPI_Request request;
        /* The error at the start when the task meets it there (the message was in), else at the wait. */
        rc = MPI_Ibcast(buf, count, MPI_INT, root, comm, &request);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
      } else {
        rc = MPI_Bcast(buf, count, MPI_INT, root, comm);
      }
      check_truncation_outcome(rc, truncated);
      CHECK(buf[0] == c && buf[count - 1] == (count - 1) * 5 + c);
      CHECK(buf[count] == (rank == root ? count * 5 + c : -1));
      check_next_bcast_whole(comm, root, 2000 + c);
    }
  }
  free(buf);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
}

static void everything(MPI_Comm comm) {
  int round = 0;
  check_segment(comm);
  reductions_predefined(comm, &round);
  reductions_prefix_and_scatter(comm, &round);
  reductions_loc(comm);
  reductions_user(comm, &round);
  data_movement(comm, &round);
  back_to_back(comm, 2000);
  reduce_in_place_back_to_back(comm, 1000);
  large_allreduce(comm, round);
  large_allgatherv(comm, round);
  large_back_to_back(comm, 60);
  large_bcast_mixed_types(comm);
  truncated_bcast(comm);
  truncated_bcast_inner(comm);
}

/* Two halves by parity, a duplicate of one, and the world, used in turn. */
static void sub_communicators(void) {
  MPI_Comm half, half_dup;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
  MPI_Comm_dup(half, &half_dup);
  check_segment(half);
  for (int i = 0; i < 20; ++i) {
    back_to_back(half, 50);
    back_to_back(MPI_COMM_WORLD, 20);
    back_to_back(half_dup, 30);
  }
  MPI_Comm_free(&half_dup);
  MPI_Comm_free(&half);
}

/* Ranks on two nodes: the world spans them (point-to-point algorithms), each
 * node's part shares memory. */
static void spans_nodes(void) {
  const char* host = getenv("NODE_TEST_HOST");
  CHECK(host != NULL);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size;
  MPI_Comm_size(node, &node_size);
  CHECK(node_size < world_size);
  CHECK(!expect_shared_memory(MPI_COMM_WORLD));
  check_segment(MPI_COMM_WORLD);
  check_segment(node);
  back_to_back(MPI_COMM_WORLD, 300);
  back_to_back(node, 300);
  int round = 0;
  data_movement(MPI_COMM_WORLD, &round);
  reductions_user(MPI_COMM_WORLD, &round);
  truncated_bcast_inner(MPI_COMM_WORLD);
  MPI_Comm_free(&node);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (argc > 1 && strcmp(argv[1], "spans_nodes") == 0) {
    spans_nodes();
    return finish("node_coll_test spans_nodes");
  }
  if (argc > 1 && strcmp(argv[1], "truncated_bcast") == 0) {
    truncated_bcast(MPI_COMM_WORLD);
    truncated_bcast_inner(MPI_COMM_WORLD);
    return finish("node_coll_test truncated_bcast");
  }
  everything(MPI_COMM_WORLD);
  sub_communicators();
  return finish("node_coll_test");
}
