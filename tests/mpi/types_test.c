/* The datatype constructors beyond contiguous/vector/struct and what goes
 * with them: indexed, hindexed, indexed_block, hindexed_block, subarray (C
 * and Fortran order), darray (block, cyclic, none), dup; envelopes and
 * contents (every constructor, rebuilt from its contents); true extents;
 * Pack/Unpack against sending; Pack_external (external32, big-endian);
 * Type_match_size; bad arguments under MPI_ERRORS_RETURN.
 *
 * Each type moves ints numbered by their index in the buffer, between
 * neighbours on a ring and by broadcast, and arrives element by element
 * where a hand computation of its type map says, with the gaps untouched. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static int rank, size;

enum { span_max = 512, untouched = -1 };

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The ints a type of `count` elements selects from a buffer, in type-map
 * order: `indices` (n per element), each element `extent_ints` further on. */
struct typemap {
  const int* indices;
  int n;
  int extent_ints;
};

static int expected_index(const struct typemap* map, int k) {
  return map->indices[k % map->n] + (k / map->n) * map->extent_ints;
}

/* Fills buf with -1, then the positions of the map with value(index) = base + index. */
static void check_scattered(const char* what, const int* buf, int count, const struct typemap* map, int base) {
  int seen[span_max] = {0};
  int failures = 0;
  for (int k = 0; k < count * map->n; ++k) seen[expected_index(map, k)] = 1;
  for (int i = 0; i < span_max; ++i) {
    const int want = seen[i] ? base + i : untouched;
    if (buf[i] != want && failures++ < 3) fprintf(stderr, "rank %d: %s: int %d is %d, want %d\n", rank, what, i, buf[i], want);
  }
  CHECK(failures == 0);
}

/* Moves `count` elements of type around the ring (type to packed ints, ints
 * to type, type to type) and by broadcast, checking every int. */
static void check_transfers(const char* what, MPI_Datatype type, int count, const struct typemap* map) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int src[span_max], dst[span_max], packed[span_max];
  for (int i = 0; i < span_max; ++i) src[i] = 1000 * rank + i;
  const int n = count * map->n;

  /* The type's ints arrive in type-map order. */
  for (int i = 0; i < span_max; ++i) packed[i] = untouched;
  CHECK(MPI_Sendrecv(src, count, type, next, 1, packed, n, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
        MPI_SUCCESS);
  int failures = 0;
  for (int k = 0; k < n; ++k)
    if (packed[k] != 1000 * prev + expected_index(map, k) && failures++ < 3)
      fprintf(stderr, "rank %d: %s: packed int %d is %d, want %d\n", rank, what, k, packed[k],
              1000 * prev + expected_index(map, k));
  CHECK(failures == 0);
  CHECK(packed[n] == untouched);

  /* Ints land where the type says, and nowhere else. */
  int ints[span_max];
  for (int k = 0; k < n; ++k) ints[k] = 1000 * rank + expected_index(map, k);
  for (int i = 0; i < span_max; ++i) dst[i] = untouched;
  CHECK(MPI_Sendrecv(ints, n, MPI_INT, next, 2, dst, count, type, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
        MPI_SUCCESS);
  check_scattered(what, dst, count, map, 1000 * prev);

  /* Type to type. */
  for (int i = 0; i < span_max; ++i) dst[i] = untouched;
  CHECK(MPI_Sendrecv(src, count, type, next, 3, dst, count, type, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
        MPI_SUCCESS);
  check_scattered(what, dst, count, map, 1000 * prev);

  /* A collective: the root's elements reach everyone. */
  const int root = size - 1;
  for (int i = 0; i < span_max; ++i) dst[i] = rank == root ? src[i] : untouched;
  CHECK(MPI_Bcast(dst, count, type, root, MPI_COMM_WORLD) == MPI_SUCCESS);
  if (rank != root) check_scattered(what, dst, count, map, 1000 * root);

  /* And gathered: each rank's elements at the root, one extent after another. */
  int* all = malloc(sizeof(int) * (size_t)size * span_max);
  for (int i = 0; i < size * span_max; ++i) all[i] = untouched;
  MPI_Datatype one_span;
  MPI_Type_create_resized(type, 0, (MPI_Aint)sizeof(int) * span_max, &one_span);
  MPI_Type_commit(&one_span);
  CHECK(MPI_Gather(src, 1, type, all, 1, one_span, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  if (rank == 0)
    for (int r = 0; r < size; ++r) check_scattered(what, all + r * span_max, 1, map, 1000 * r);
  MPI_Type_free(&one_span);
  free(all);
}

static void check_bounds(MPI_Datatype type, MPI_Aint lb, MPI_Aint extent, MPI_Aint true_lb, MPI_Aint true_extent,
                         int size_bytes) {
  MPI_Aint l = -7, e = -7;
  MPI_Count lx = -7, ex = -7, sx = -7;
  int s = -7;
  CHECK(MPI_Type_get_extent(type, &l, &e) == MPI_SUCCESS && l == lb && e == extent);
  CHECK(MPI_Type_get_true_extent(type, &l, &e) == MPI_SUCCESS && l == true_lb && e == true_extent);
  CHECK(MPI_Type_get_true_extent_x(type, &lx, &ex) == MPI_SUCCESS && lx == true_lb && ex == true_extent);
  CHECK(MPI_Type_get_extent_x(type, &lx, &ex) == MPI_SUCCESS && lx == lb && ex == extent);
  CHECK(MPI_Type_size(type, &s) == MPI_SUCCESS && s == size_bytes);
  CHECK(MPI_Type_size_x(type, &sx) == MPI_SUCCESS && sx == size_bytes);
}

static void indexed_types(void) {
  MPI_Datatype t;
  {
    const int lengths[] = {2, 1, 3}, displs[] = {0, 4, 7};
    const int map[] = {0, 1, 4, 7, 8, 9};
    CHECK(MPI_Type_indexed(3, lengths, displs, MPI_INT, &t) == MPI_SUCCESS);
    MPI_Type_commit(&t);
    check_bounds(t, 0, 40, 0, 40, 24);
    for (int count = 1; count <= 3; ++count) check_transfers("indexed", t, count, &(struct typemap){map, 6, 10});
    MPI_Type_free(&t);
  }
  {
    /* Blocks out of order, a zero-length block that moves no bound. */
    const int lengths[] = {2, 0, 1};
    const MPI_Aint displs[] = {3 * sizeof(int), 100 * sizeof(int), 0};
    const int map[] = {3, 4, 0};
    CHECK(MPI_Type_create_hindexed(3, lengths, displs, MPI_INT, &t) == MPI_SUCCESS);
    MPI_Type_commit(&t);
    check_bounds(t, 0, 20, 0, 20, 12);
    for (int count = 1; count <= 2; ++count) check_transfers("hindexed", t, count, &(struct typemap){map, 3, 5});
    MPI_Type_free(&t);
  }
  {
    const int displs[] = {1, 5, 9};
    const int map[] = {1, 2, 5, 6, 9, 10};
    CHECK(MPI_Type_create_indexed_block(3, 2, displs, MPI_INT, &t) == MPI_SUCCESS);
    MPI_Type_commit(&t);
    check_bounds(t, 4, 40, 4, 40, 24);
    /* The extent starts at the lower bound: the second element begins 10 ints on. */
    check_transfers("indexed_block", t, 2, &(struct typemap){map, 6, 10});
    MPI_Type_free(&t);
  }
  {
    const MPI_Aint displs[] = {8 * sizeof(int), 0};
    const int map[] = {8, 9, 10, 0, 1, 2};
    CHECK(MPI_Type_create_hindexed_block(2, 3, displs, MPI_INT, &t) == MPI_SUCCESS);
    MPI_Type_commit(&t);
    check_bounds(t, 0, 44, 0, 44, 24);
    check_transfers("hindexed_block", t, 2, &(struct typemap){map, 6, 11});
    MPI_Type_free(&t);
  }
  {
    /* An indexed type of a vector: blocks of a derived type. */
    MPI_Datatype pair;
    MPI_Type_vector(2, 1, 3, MPI_INT, &pair); /* ints 0 and 3, extent 4 ints */
    const int lengths[] = {2, 1}, displs[] = {0, 10};
    const int map[] = {0, 3, 4, 7, 40, 43};
    CHECK(MPI_Type_indexed(2, lengths, displs, pair, &t) == MPI_SUCCESS);
    MPI_Type_free(&pair); /* t keeps what it needs */
    MPI_Type_commit(&t);
    check_bounds(t, 0, 176, 0, 176, 24);
    check_transfers("indexed of vectors", t, 1, &(struct typemap){map, 6, 44});
    MPI_Type_free(&t);
  }
}

/* The ints of a subarray, by walking the whole array in its order. */
static int subarray_map(int ndims, const int* sizes, const int* subsizes, const int* starts, int order, int* out) {
  int n = 0, total = 1;
  for (int d = 0; d < ndims; ++d) total *= sizes[d];
  for (int linear = 0; linear < total; ++linear) {
    int rest = linear, inside = 1;
    for (int k = 0; k < ndims; ++k) {
      const int d = order == MPI_ORDER_C ? ndims - 1 - k : k; /* fastest dimension first */
      const int index = rest % sizes[d];
      rest /= sizes[d];
      inside &= index >= starts[d] && index < starts[d] + subsizes[d];
    }
    if (inside) out[n++] = linear;
  }
  return n;
}

static void subarrays(void) {
  struct {
    int ndims, order, sizes[3], subsizes[3], starts[3];
  } cases[] = {
      {2, MPI_ORDER_C, {4, 5}, {2, 3}, {1, 2}},
      {2, MPI_ORDER_FORTRAN, {4, 5}, {2, 3}, {1, 2}},
      {3, MPI_ORDER_C, {3, 4, 5}, {2, 2, 2}, {1, 1, 3}},
      {3, MPI_ORDER_FORTRAN, {3, 4, 5}, {3, 1, 2}, {0, 3, 0}},
      {1, MPI_ORDER_C, {9}, {4}, {5}},
  };
  /* The first two by hand as well: rows 1-2, columns 2-4 of a 4x5 array. */
  const int c_by_hand[] = {7, 8, 9, 12, 13, 14}, fortran_by_hand[] = {9, 10, 13, 14, 17, 18};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    int map[span_max];
    const int n = subarray_map(cases[i].ndims, cases[i].sizes, cases[i].subsizes, cases[i].starts, cases[i].order, map);
    if (i < 2) {
      const int* hand = i == 0 ? c_by_hand : fortran_by_hand;
      CHECK(n == 6 && memcmp(map, hand, sizeof c_by_hand) == 0);
    }
    int total = 1;
    for (int d = 0; d < cases[i].ndims; ++d) total *= cases[i].sizes[d];
    MPI_Datatype t;
    CHECK(MPI_Type_create_subarray(cases[i].ndims, cases[i].sizes, cases[i].subsizes, cases[i].starts, cases[i].order,
                                   MPI_INT, &t) == MPI_SUCCESS);
    MPI_Type_commit(&t);
    check_bounds(t, 0, total * 4, map[0] * 4, (map[n - 1] + 1 - map[0]) * 4, n * 4);
    check_transfers(cases[i].order == MPI_ORDER_C ? "subarray (C)" : "subarray (Fortran)", t, 2,
                    &(struct typemap){map, n, total});
    MPI_Type_free(&t);
  }
}

/* Which process coordinate holds index i of a dimension. */
static int owner(int i, int gsize, int distrib, int darg, int psize) {
  if (distrib == MPI_DISTRIBUTE_NONE) return 0;
  if (distrib == MPI_DISTRIBUTE_BLOCK) {
    const int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
    return i / b;
  }
  const int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
  return (i / b) % psize;
}

static void darrays(void) {
  struct {
    int ndims, order, gsizes[3], distribs[3], dargs[3], psizes[3];
  } cases[] = {
      {2, MPI_ORDER_C, {6, 7}, {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, {MPI_DISTRIBUTE_DFLT_DARG, 2}, {2, 2}},
      {2, MPI_ORDER_FORTRAN, {5, 8}, {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK},
       {MPI_DISTRIBUTE_DFLT_DARG, 3}, {2, 3}},
      {2, MPI_ORDER_C, {4, 6}, {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_BLOCK},
       {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, {1, 3}},
      {3, MPI_ORDER_C, {3, 5, 4}, {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_CYCLIC},
       {2, MPI_DISTRIBUTE_DFLT_DARG, 3}, {2, 1, 2}},
      {1, MPI_ORDER_C, {8}, {MPI_DISTRIBUTE_BLOCK}, {4}, {3}}, /* the last process holds nothing */
  };
  /* The first case by hand for process 3 (coordinates 1, 1): rows 3-5, columns 2-3 and 6. */
  const int by_hand[] = {23, 24, 27, 30, 31, 34, 37, 38, 41};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    int grid = 1, total = 1;
    for (int d = 0; d < cases[c].ndims; ++d) {
      grid *= cases[c].psizes[d];
      total *= cases[c].gsizes[d];
    }
    for (int p = 0; p < grid; ++p) {
      int coords[3], rest = p;
      for (int d = cases[c].ndims - 1; d >= 0; --d) { /* the process grid is row-major */
        coords[d] = rest % cases[c].psizes[d];
        rest /= cases[c].psizes[d];
      }
      int map[span_max], n = 0;
      for (int linear = 0; linear < total; ++linear) {
        int r = linear, mine = 1;
        for (int k = 0; k < cases[c].ndims; ++k) {
          const int d = cases[c].order == MPI_ORDER_C ? cases[c].ndims - 1 - k : k;
          mine &= owner(r % cases[c].gsizes[d], cases[c].gsizes[d], cases[c].distribs[d], cases[c].dargs[d],
                        cases[c].psizes[d]) == coords[d];
          r /= cases[c].gsizes[d];
        }
        if (mine) map[n++] = linear;
      }
      if (c == 0 && p == 3) CHECK(n == 9 && memcmp(map, by_hand, sizeof by_hand) == 0);
      MPI_Datatype t;
      CHECK(MPI_Type_create_darray(grid, p, cases[c].ndims, cases[c].gsizes, cases[c].distribs, cases[c].dargs,
                                   cases[c].psizes, cases[c].order, MPI_INT, &t) == MPI_SUCCESS);
      MPI_Type_commit(&t);
      MPI_Aint lb, extent;
      int bytes;
      MPI_Type_get_extent(t, &lb, &extent);
      MPI_Type_size(t, &bytes);
      CHECK(lb == 0 && extent == total * 4 && bytes == n * 4);
      if (n > 0) check_transfers("darray", t, 1, &(struct typemap){map, n, total});
      MPI_Type_free(&t);
    }
  }
}

/* Rebuilds a type from its envelope and contents. */
static MPI_Datatype rebuilt(MPI_Datatype type) {
  int ni, na, nd, combiner;
  MPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
  int* i = malloc(sizeof(int) * (size_t)(ni + 1));
  MPI_Aint* a = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
  MPI_Datatype* d = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
  CHECK(MPI_Type_get_contents(type, ni, na, nd, i, a, d) == MPI_SUCCESS);
  MPI_Datatype out = MPI_DATATYPE_NULL;
  switch (combiner) {
    case MPI_COMBINER_DUP: MPI_Type_dup(d[0], &out); break;
    case MPI_COMBINER_CONTIGUOUS: MPI_Type_contiguous(i[0], d[0], &out); break;
    case MPI_COMBINER_VECTOR: MPI_Type_vector(i[0], i[1], i[2], d[0], &out); break;
    case MPI_COMBINER_HVECTOR: MPI_Type_create_hvector(i[0], i[1], a[0], d[0], &out); break;
    case MPI_COMBINER_INDEXED: MPI_Type_indexed(i[0], i + 1, i + 1 + i[0], d[0], &out); break;
    case MPI_COMBINER_HINDEXED: MPI_Type_create_hindexed(i[0], i + 1, a, d[0], &out); break;
    case MPI_COMBINER_INDEXED_BLOCK: MPI_Type_create_indexed_block(i[0], i[1], i + 2, d[0], &out); break;
    case MPI_COMBINER_HINDEXED_BLOCK: MPI_Type_create_hindexed_block(i[0], i[1], a, d[0], &out); break;
    case MPI_COMBINER_STRUCT: MPI_Type_create_struct(i[0], i + 1, a, d, &out); break;
    case MPI_COMBINER_SUBARRAY: {
      const int n = i[0];
      MPI_Type_create_subarray(n, i + 1, i + 1 + n, i + 1 + 2 * n, i[1 + 3 * n], d[0], &out);
      break;
    }
    case MPI_COMBINER_DARRAY: {
      const int n = i[2];
      MPI_Type_create_darray(i[0], i[1], n, i + 3, i + 3 + n, i + 3 + 2 * n, i + 3 + 3 * n, i[3 + 4 * n], d[0], &out);
      break;
    }
    case MPI_COMBINER_RESIZED: MPI_Type_create_resized(d[0], a[0], a[1], &out); break;
    default: CHECK(!"unexpected combiner");
  }
  /* Returned derived types are the program's to free. */
  for (int k = 0; k < nd; ++k) {
    int ci, ca, cd, inner;
    MPI_Type_get_envelope(d[k], &ci, &ca, &cd, &inner);
    if (inner != MPI_COMBINER_NAMED) MPI_Type_free(&d[k]);
  }
  free(i);
  free(a);
  free(d);
  MPI_Type_commit(&out);
  return out;
}

static void check_envelope(MPI_Datatype type, int ni, int na, int nd, int combiner) {
  int i = -1, a = -1, d = -1, c = -1;
  CHECK(MPI_Type_get_envelope(type, &i, &a, &d, &c) == MPI_SUCCESS);
  CHECK(i == ni && a == na && d == nd && c == combiner);
}

/* The rebuilt type packs the same bytes as the original, and has its bounds. */
static void check_rebuilt(MPI_Datatype type) {
  MPI_Datatype again = rebuilt(type);
  int src[span_max], a[span_max], b[span_max];
  for (int i = 0; i < span_max; ++i) src[i] = i * 7 + 1;
  int pa = 0, pb = 0, sa = 0, sb = 0;
  MPI_Type_size(type, &sa);
  MPI_Type_size(again, &sb);
  CHECK(sa == sb);
  CHECK(MPI_Pack(src, 1, type, a, sizeof a, &pa, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(MPI_Pack(src, 1, again, b, sizeof b, &pb, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(pa == sa && pb == sb && memcmp(a, b, (size_t)pa) == 0);
  MPI_Aint l1, e1, l2, e2;
  MPI_Type_get_extent(type, &l1, &e1);
  MPI_Type_get_extent(again, &l2, &e2);
  CHECK(l1 == l2 && e1 == e2);
  MPI_Type_free(&again);
}

static void envelopes_and_contents(void) {
  check_envelope(MPI_INT, 0, 0, 0, MPI_COMBINER_NAMED);
  int ints[4];
  MPI_Aint aints[4];
  MPI_Datatype types[4];
  CHECK(error_class(MPI_Type_get_contents(MPI_INT, 4, 4, 4, ints, aints, types)) == MPI_ERR_TYPE);

  MPI_Datatype vec, t[12];
  int n = 0;
  MPI_Type_vector(3, 2, 5, MPI_INT, &vec);
  MPI_Type_contiguous(4, MPI_INT, &t[n]);
  check_envelope(t[n++], 1, 0, 1, MPI_COMBINER_CONTIGUOUS);
  MPI_Type_dup(vec, &t[n]);
  check_envelope(t[n++], 0, 0, 1, MPI_COMBINER_DUP);
  check_envelope(vec, 3, 0, 1, MPI_COMBINER_VECTOR);
  MPI_Type_create_hvector(2, 1, 12, vec, &t[n]);
  check_envelope(t[n++], 2, 1, 1, MPI_COMBINER_HVECTOR);
  const int lengths[] = {1, 2, 1}, displs[] = {5, 0, 9};
  MPI_Type_indexed(3, lengths, displs, MPI_INT, &t[n]);
  check_envelope(t[n++], 7, 0, 1, MPI_COMBINER_INDEXED);
  const MPI_Aint hdispls[] = {40, 0, 12};
  MPI_Type_create_hindexed(3, lengths, hdispls, MPI_INT, &t[n]);
  check_envelope(t[n++], 4, 3, 1, MPI_COMBINER_HINDEXED);
  MPI_Type_create_indexed_block(3, 2, displs, MPI_INT, &t[n]);
  check_envelope(t[n++], 5, 0, 1, MPI_COMBINER_INDEXED_BLOCK);
  MPI_Type_create_hindexed_block(3, 1, hdispls, vec, &t[n]);
  check_envelope(t[n++], 2, 3, 1, MPI_COMBINER_HINDEXED_BLOCK);
  const MPI_Datatype members[] = {MPI_INT, vec, MPI_DOUBLE};
  const MPI_Aint sdispls[] = {0, 8, 80};
  MPI_Type_create_struct(3, lengths, sdispls, members, &t[n]);
  check_envelope(t[n++], 4, 3, 3, MPI_COMBINER_STRUCT);
  const int sizes[] = {6, 7}, subsizes[] = {2, 3}, starts[] = {1, 4};
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT, &t[n]);
  check_envelope(t[n++], 8, 0, 1, MPI_COMBINER_SUBARRAY);
  const int distribs[] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK}, dargs[] = {2, MPI_DISTRIBUTE_DFLT_DARG},
            psizes[] = {2, 2};
  MPI_Type_create_darray(4, 1, 2, sizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t[n]);
  check_envelope(t[n++], 12, 0, 1, MPI_COMBINER_DARRAY);
  MPI_Type_create_resized(vec, -4, 100, &t[n]);
  check_envelope(t[n++], 0, 2, 1, MPI_COMBINER_RESIZED);

  /* The arguments come back as given. */
  {
    int i[7];
    MPI_Aint a[1];
    MPI_Datatype d[1];
    CHECK(MPI_Type_get_contents(t[3], 7, 0, 1, i, a, d) == MPI_SUCCESS);
    CHECK(i[0] == 3 && i[1] == 1 && i[2] == 2 && i[3] == 1 && i[4] == 5 && i[5] == 0 && i[6] == 9 && d[0] == MPI_INT);
    CHECK(error_class(MPI_Type_get_contents(t[3], 6, 0, 1, i, a, d)) == MPI_ERR_ARG);
  }
  {
    int i[2];
    MPI_Aint a[1];
    MPI_Datatype d[1];
    CHECK(MPI_Type_get_contents(t[2], 2, 1, 1, i, a, d) == MPI_SUCCESS);
    CHECK(i[0] == 2 && i[1] == 1 && a[0] == 12);
    /* The vector comes back as a new type of its own, still a vector after vec is freed. */
    check_envelope(d[0], 3, 0, 1, MPI_COMBINER_VECTOR);
    MPI_Type_free(&d[0]);
  }
  {
    int i[4];
    MPI_Aint a[3];
    MPI_Datatype d[3];
    CHECK(MPI_Type_get_contents(t[7], 4, 3, 3, i, a, d) == MPI_SUCCESS);
    CHECK(i[0] == 3 && a[0] == 0 && a[1] == 8 && a[2] == 80 && d[0] == MPI_INT && d[2] == MPI_DOUBLE);
    check_envelope(d[1], 3, 0, 1, MPI_COMBINER_VECTOR);
    MPI_Type_free(&d[1]);
  }
  {
    int i[1];
    MPI_Aint a[2];
    MPI_Datatype d[1];
    CHECK(MPI_Type_get_contents(t[10], 0, 2, 1, i, a, d) == MPI_SUCCESS);
    CHECK(a[0] == -4 && a[1] == 100);
    MPI_Type_free(&d[0]);
  }

  MPI_Type_free(&vec); /* the types made from it keep it */
  for (int k = 0; k < n; ++k) {
    MPI_Type_commit(&t[k]);
    check_rebuilt(t[k]);
  }
  /* A dup of a dup of a committed type moves what the type moves. */
  const int map[] = {0, 1, 5, 6, 10, 11};
  MPI_Datatype v2, d1, d2;
  MPI_Type_vector(3, 2, 5, MPI_INT, &v2);
  MPI_Type_commit(&v2);
  MPI_Type_dup(v2, &d1);
  MPI_Type_dup(d1, &d2);
  MPI_Type_free(&v2);
  MPI_Type_free(&d1);
  check_transfers("dup", d2, 2, &(struct typemap){map, 6, 12});
  MPI_Type_free(&d2);
  for (int k = 0; k < n; ++k) MPI_Type_free(&t[k]);
}

static void true_extents(void) {
  /* A resized indexed type: the bounds move, the data does not. */
  const int lengths[] = {3}, displs[] = {2};
  MPI_Datatype idx, wide;
  MPI_Type_indexed(1, lengths, displs, MPI_INT, &idx);
  check_bounds(idx, 8, 12, 8, 12, 12);
  MPI_Type_create_resized(idx, -16, 64, &wide);
  check_bounds(wide, -16, 64, 8, 12, 12);
  MPI_Type_free(&idx);
  MPI_Type_free(&wide);
  /* The padding of a value-index pair is outside its true extent. */
  check_bounds(MPI_DOUBLE_INT, 0, 16, 0, 12, 12);
  check_bounds(MPI_SHORT_INT, 0, 8, 0, 8, 6);
  /* A vector with a negative stride reaches below 0. */
  MPI_Datatype down;
  MPI_Type_vector(3, 1, -2, MPI_INT, &down);
  check_bounds(down, -16, 20, -16, 20, 12);
  MPI_Type_free(&down);
}

/* MPI_Pack's bytes are what the type sends; MPI_Unpack puts them where a receive would. */
static void pack_and_unpack(void) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Datatype vec;
  MPI_Type_vector(4, 2, 3, MPI_INT, &vec); /* ints 0,1,3,4,6,7,9,10; extent 11 ints */
  MPI_Type_commit(&vec);
  int src[32], dst[span_max], packed_size = 0;
  for (int i = 0; i < 32; ++i) src[i] = 100 * rank + i;
  CHECK(MPI_Pack_size(2, vec, MPI_COMM_WORLD, &packed_size) == MPI_SUCCESS && packed_size == 64);
  /* A header int, then two vectors: positions add up. */
  char buffer[128];
  int position = 0, header = 42 + rank;
  CHECK(MPI_Pack(&header, 1, MPI_INT, buffer, sizeof buffer, &position, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(position == 4);
  CHECK(MPI_Pack(src, 2, vec, buffer, sizeof buffer, &position, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(position == 68);
  /* Packed bytes sent as MPI_PACKED arrive as the type. */
  int got_header = 0;
  char incoming[128];
  CHECK(MPI_Sendrecv(buffer, position, MPI_PACKED, next, 7, incoming, sizeof incoming, MPI_PACKED, prev, 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  int in_pos = 0;
  for (int i = 0; i < span_max; ++i) dst[i] = untouched;
  CHECK(MPI_Unpack(incoming, 68, &in_pos, &got_header, 1, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(MPI_Unpack(incoming, 68, &in_pos, dst, 2, vec, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(got_header == 42 + prev && in_pos == 68);
  const int map[] = {0, 1, 3, 4, 6, 7, 9, 10};
  check_scattered("unpack", dst, 2, &(struct typemap){map, 8, 11}, 100 * prev);
  /* The type sent, received packed: the same bytes MPI_Pack made on the sender. */
  char received[64];
  CHECK(MPI_Sendrecv(src, 2, vec, next, 8, received, 64, MPI_PACKED, prev, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
        MPI_SUCCESS);
  int expect[16];
  for (int k = 0; k < 16; ++k) expect[k] = 100 * prev + map[k % 8] + (k / 8) * 11;
  CHECK(memcmp(received, expect, 64) == 0);
  /* Too little room, or too little data: MPI_ERR_TRUNCATE, nothing moved. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  position = 100;
  CHECK(error_class(MPI_Pack(src, 2, vec, buffer, sizeof buffer, &position, MPI_COMM_WORLD)) == MPI_ERR_TRUNCATE);
  CHECK(position == 100);
  in_pos = 8;
  CHECK(error_class(MPI_Unpack(incoming, 68, &in_pos, dst, 2, vec, MPI_COMM_WORLD)) == MPI_ERR_TRUNCATE);
  CHECK(error_class(MPI_Pack(src, -1, vec, buffer, sizeof buffer, &position, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Pack(src, 1, vec, buffer, sizeof buffer, &position, MPI_COMM_NULL)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Pack(src, 1, MPI_DATATYPE_NULL, buffer, sizeof buffer, &position, MPI_COMM_WORLD)) ==
        MPI_ERR_TYPE);
  MPI_Datatype uncommitted;
  MPI_Type_contiguous(2, MPI_INT, &uncommitted);
  CHECK(error_class(MPI_Unpack(incoming, 68, &in_pos, dst, 1, uncommitted, MPI_COMM_WORLD)) == MPI_ERR_TYPE);
  MPI_Type_free(&uncommitted);
  MPI_Type_free(&vec);
}

static void external32(void) {
  /* Big-endian, with external32's sizes: a long is 4 bytes, a long double an IEEE quad. */
  struct {
    int i;
    short s;
    double d;
    long l;
    long double q;
  } v = {0x01020304, -2, 1.0, -3, 1.5L};
  int lengths[] = {1, 1, 1, 1, 1};
  MPI_Aint displs[5];
  MPI_Aint base;
  MPI_Get_address(&v, &base);
  MPI_Get_address(&v.i, &displs[0]);
  MPI_Get_address(&v.s, &displs[1]);
  MPI_Get_address(&v.d, &displs[2]);
  MPI_Get_address(&v.l, &displs[3]);
  MPI_Get_address(&v.q, &displs[4]);
  for (int k = 0; k < 5; ++k) displs[k] -= base;
  MPI_Datatype types[] = {MPI_INT, MPI_SHORT, MPI_DOUBLE, MPI_LONG, MPI_LONG_DOUBLE}, record;
  MPI_Type_create_struct(5, lengths, displs, types, &record);
  MPI_Type_commit(&record);
  MPI_Aint ext_size = 0;
  CHECK(MPI_Pack_external_size("external32", 1, record, &ext_size) == MPI_SUCCESS && ext_size == 4 + 2 + 8 + 4 + 16);
  CHECK(MPI_Pack_external_size("external32", 3, MPI_LONG, &ext_size) == MPI_SUCCESS && ext_size == 12);
  unsigned char out[64];
  MPI_Aint position = 0;
  CHECK(MPI_Pack_external("external32", &v, 1, record, out, sizeof out, &position) == MPI_SUCCESS);
  CHECK(position == 34);
  const unsigned char want[34] = {1, 2, 3, 4, 0xff, 0xfe, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfd,
                                  0x3f, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(memcmp(out, want, sizeof want) == 0);
  /* And back. */
  struct {
    int i;
    short s;
    double d;
    long l;
    long double q;
  } back;
  memset(&back, 0, sizeof back);
  position = 0;
  CHECK(MPI_Unpack_external("external32", out, 34, &position, &back, 1, record) == MPI_SUCCESS);
  CHECK(position == 34 && back.i == v.i && back.s == v.s && back.d == v.d && back.l == v.l && back.q == v.q);
  /* A vector of ints: only the selected ones, each big-endian. */
  MPI_Datatype vec;
  MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  const int ints[] = {0x0a0b0c0d, 99, 0x01000000};
  position = 0;
  CHECK(MPI_Pack_external("external32", ints, 1, vec, out, sizeof out, &position) == MPI_SUCCESS && position == 8);
  const unsigned char want_ints[] = {0x0a, 0x0b, 0x0c, 0x0d, 1, 0, 0, 0};
  CHECK(memcmp(out, want_ints, 8) == 0);
  /* Errors: a long that needs more than 4 bytes, another representation, too little room. */
  const long big = 1L << 40;
  position = 0;
  CHECK(error_class(MPI_Pack_external("external32", &big, 1, MPI_LONG, out, sizeof out, &position)) ==
        MPI_ERR_CONVERSION);
  CHECK(error_class(MPI_Pack_external("native", ints, 1, vec, out, sizeof out, &position)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Pack_external_size("external64", 1, vec, &ext_size)) == MPI_ERR_ARG);
  position = 0;
  CHECK(error_class(MPI_Pack_external("external32", ints, 1, vec, out, 7, &position)) == MPI_ERR_TRUNCATE);
  position = 0;
  CHECK(error_class(MPI_Unpack_external("external32", out, 4, &position, &back, 1, vec)) == MPI_ERR_TRUNCATE);
  MPI_Type_free(&vec);
  MPI_Type_free(&record);
}

static void match_size(void) {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  CHECK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &t) == MPI_SUCCESS && t == MPI_INTEGER4);
  CHECK(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 8, &t) == MPI_SUCCESS && t == MPI_INTEGER8);
  CHECK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &t) == MPI_SUCCESS && t == MPI_REAL8);
  CHECK(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &t) == MPI_SUCCESS && t == MPI_COMPLEX16);
  int bytes = 0;
  MPI_Type_size(t, &bytes);
  CHECK(bytes == 16);
  CHECK(error_class(MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_match_size(42, 4, &t)) == MPI_ERR_ARG);
}

/* Types whose description would be huge per element are made at once. */
static void large_types_are_cheap(void) {
  const double start = now();
  MPI_Datatype t;
  CHECK(MPI_Type_contiguous(INT_MAX, MPI_DOUBLE, &t) == MPI_SUCCESS);
  MPI_Type_commit(&t);
  MPI_Count bytes;
  MPI_Type_size_x(t, &bytes);
  CHECK(bytes == (MPI_Count)INT_MAX * 8);
  MPI_Type_free(&t);
  const int lengths[] = {INT_MAX / 2, INT_MAX / 2}, displs[] = {0, INT_MAX / 2 + 10};
  CHECK(MPI_Type_indexed(2, lengths, displs, MPI_INT, &t) == MPI_SUCCESS);
  MPI_Type_size_x(t, &bytes);
  CHECK(bytes == (MPI_Count)(INT_MAX / 2) * 2 * 4);
  MPI_Type_free(&t);
  const int sizes[] = {1 << 20, 1 << 20, 4}, subsizes[] = {1 << 19, 1 << 19, 2}, starts[] = {1, 2, 1};
  CHECK(MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &t) == MPI_SUCCESS);
  MPI_Type_size_x(t, &bytes);
  CHECK(bytes == (MPI_Count)1 << 42);
  MPI_Type_free(&t);
  const int distribs[] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE},
            dargs[] = {3, 1, MPI_DISTRIBUTE_DFLT_DARG}, psizes[] = {2, 2, 1};
  CHECK(MPI_Type_create_darray(4, 2, 3, sizes, distribs, dargs, psizes, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t) ==
        MPI_SUCCESS);
  MPI_Type_commit(&t);
  MPI_Type_free(&t);
  CHECK(now() - start < 1.0);
}

static void bad_arguments(void) {
  MPI_Datatype t;
  const int lengths[] = {1, -1}, displs[] = {0, 4}, ok[] = {1, 1};
  const MPI_Aint adispls[] = {0, 16};
  CHECK(error_class(MPI_Type_indexed(-1, ok, displs, MPI_INT, &t)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_indexed(2, lengths, displs, MPI_INT, &t)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_indexed(2, ok, displs, MPI_DATATYPE_NULL, &t)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_indexed(2, NULL, displs, MPI_INT, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_indexed(2, ok, displs, MPI_INT, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_hindexed(-3, ok, adispls, MPI_INT, &t)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_create_hindexed(2, ok, adispls, MPI_DATATYPE_NULL, &t)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_create_indexed_block(2, -1, displs, MPI_INT, &t)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_create_indexed_block(-1, 1, displs, MPI_INT, &t)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_create_hindexed_block(2, 1, adispls, MPI_DATATYPE_NULL, &t)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_create_hindexed_block(-2, 1, adispls, MPI_INT, &t)) == MPI_ERR_COUNT);
  const int sizes[] = {4, 5}, subsizes[] = {2, 6}, starts[] = {0, 0}, late[] = {3, 0}, fits[] = {2, 2};
  CHECK(error_class(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_subarray(2, sizes, fits, late, MPI_ORDER_C, MPI_INT, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_subarray(2, sizes, fits, starts, 7, MPI_INT, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_subarray(0, sizes, fits, starts, MPI_ORDER_C, MPI_INT, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_subarray(2, sizes, fits, starts, MPI_ORDER_C, MPI_DATATYPE_NULL, &t)) ==
        MPI_ERR_TYPE);
  const int block[] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK}, none[] = {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_BLOCK},
            bad_distrib[] = {9, MPI_DISTRIBUTE_BLOCK}, dflt[] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG},
            small[] = {1, 1}, zero[] = {0, 1}, grid[] = {2, 2};
  CHECK(error_class(MPI_Type_create_darray(3, 0, 2, sizes, block, dflt, grid, MPI_ORDER_C, MPI_INT, &t)) ==
        MPI_ERR_ARG); /* a 2x2 grid is not 3 processes */
  CHECK(error_class(MPI_Type_create_darray(4, 4, 2, sizes, block, dflt, grid, MPI_ORDER_C, MPI_INT, &t)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_darray(4, 0, 2, sizes, none, dflt, grid, MPI_ORDER_C, MPI_INT, &t)) ==
        MPI_ERR_ARG); /* not distributed, yet 2 processes */
  CHECK(error_class(MPI_Type_create_darray(4, 0, 2, sizes, block, small, grid, MPI_ORDER_C, MPI_INT, &t)) ==
        MPI_ERR_ARG); /* blocks of 1 on 2 processes do not cover 4 */
  CHECK(error_class(MPI_Type_create_darray(4, 0, 2, sizes, bad_distrib, dflt, grid, MPI_ORDER_C, MPI_INT, &t)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_darray(4, 0, 2, sizes, block, zero, grid, MPI_ORDER_C, MPI_INT, &t)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_darray(4, 0, 2, sizes, block, dflt, grid, 5, MPI_INT, &t)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_darray(4, 0, 2, sizes, block, dflt, grid, MPI_ORDER_C, MPI_DATATYPE_NULL, &t)) ==
        MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_dup(MPI_DATATYPE_NULL, &t)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_dup(MPI_INT, NULL)) == MPI_ERR_ARG);
  int i;
  CHECK(error_class(MPI_Type_get_envelope(MPI_DATATYPE_NULL, &i, &i, &i, &i)) == MPI_ERR_TYPE);
  MPI_Aint a;
  CHECK(error_class(MPI_Type_get_true_extent(MPI_DATATYPE_NULL, &a, &a)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_get_true_extent(MPI_INT, NULL, &a)) == MPI_ERR_ARG);
  MPI_Count c;
  CHECK(error_class(MPI_Type_get_true_extent_x(MPI_DATATYPE_NULL, &c, &c)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Pack_external_size("external32", -1, MPI_INT, &a)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Pack_external_size("external32", 1, MPI_DATATYPE_NULL, &a)) == MPI_ERR_TYPE);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  indexed_types();
  subarrays();
  darrays();
  envelopes_and_contents();
  true_extents();
  pack_and_unpack();
  external32();
  match_size();
  large_types_are_cheap();
  bad_arguments();
  return finish("types_test");
}
