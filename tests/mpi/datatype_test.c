/* Derived datatypes whose description does not grow with their count. Types
 * of INT_MAX elements (and nested ones) are built, committed and measured
 * under an address-space limit far below what a list of one entry per
 * element would take (16 bytes an element: 32 GiB for INT_MAX doubles);
 * sizes and extents that do not fit are errors, not wrapped values. Large
 * contiguous, vector and nested vector types travel between ranks and arrive
 * byte for byte, packed, unpacked, and type to type. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Room above what the process has mapped after MPI_Init: the transfers below
 * need about 150 MiB; a per-element description of the huge types needs 100 times more. */
enum { headroom_mib = 512 };

#ifdef UNDER_ASAN
/* ASan reserves terabytes of shadow address space, so no RLIMIT_AS: it kills
 * the process itself when its resident memory passes the limit. */
const char* __asan_default_options(void) { return "hard_rss_limit_mb=2048"; }
static void limit_memory(void) {}
#else
/* Limits the address space to what is mapped now plus the headroom, so a type
 * whose description grows with its count fails to allocate instead of taking the machine's memory. */
static void limit_memory(void) {
  FILE* statm = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (!statm || fscanf(statm, "%lu", &pages) != 1) {
    fprintf(stderr, "datatype_test: cannot read /proc/self/statm\n");
    exit(1);
  }
  fclose(statm);
  const rlim_t limit = (rlim_t)pages * 4096 + (rlim_t)headroom_mib * 1024 * 1024;
  struct rlimit rl = {limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) {
    perror("datatype_test: setrlimit");
    exit(1);
  }
}
#endif

static int rank, size;

static long max_rss_kib(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

static void check_size_and_extent(MPI_Datatype type, MPI_Count want_size, MPI_Aint want_lb, MPI_Aint want_extent) {
  MPI_Count size_x = -1, lb_x = -1, extent_x = -1;
  MPI_Aint lb = -1, extent = -1;
  CHECK(MPI_Type_size_x(type, &size_x) == MPI_SUCCESS && size_x == want_size);
  CHECK(MPI_Type_get_extent(type, &lb, &extent) == MPI_SUCCESS && lb == want_lb && extent == want_extent);
  CHECK(MPI_Type_get_extent_x(type, &lb_x, &extent_x) == MPI_SUCCESS && lb_x == want_lb && extent_x == want_extent);
  int size_int = 0;
  CHECK(MPI_Type_size(type, &size_int) == MPI_SUCCESS);
  CHECK(size_int == (want_size > INT_MAX ? MPI_UNDEFINED : (int)want_size));
}

static void huge_types(void) {
  const long rss_before = max_rss_kib();
  const MPI_Count n = INT_MAX;
  MPI_Datatype contiguous = MPI_DATATYPE_NULL, vector = MPI_DATATYPE_NULL, nested_inner = MPI_DATATYPE_NULL,
               nested = MPI_DATATYPE_NULL, too_big = MPI_DATATYPE_NULL;
  CHECK(MPI_Type_contiguous(INT_MAX, MPI_DOUBLE, &contiguous) == MPI_SUCCESS);
  CHECK(MPI_Type_commit(&contiguous) == MPI_SUCCESS);
  check_size_and_extent(contiguous, n * 8, 0, n * 8);

  CHECK(MPI_Type_vector(INT_MAX, 2, 3, MPI_DOUBLE, &vector) == MPI_SUCCESS);
  CHECK(MPI_Type_commit(&vector) == MPI_SUCCESS);
  check_size_and_extent(vector, n * 16, 0, ((n - 1) * 3 + 2) * 8);

  /* 2^20 copies of a vector of 2^20 single bytes two apart: 2^40 bytes of data. */
  CHECK(MPI_Type_vector(1 << 20, 1, 2, MPI_BYTE, &nested_inner) == MPI_SUCCESS);
  CHECK(MPI_Type_create_hvector(1 << 20, 1, (MPI_Aint)1 << 22, nested_inner, &nested) == MPI_SUCCESS);
  CHECK(MPI_Type_commit(&nested) == MPI_SUCCESS);
  const MPI_Count m = (MPI_Count)1 << 20;
  check_size_and_extent(nested, m * m, 0, (m - 1) * (m << 2) + (m - 1) * 2 + 1);

  /* INT_MAX copies of INT_MAX doubles: 2^64 bytes and more, which no MPI_Aint holds. */
  CHECK(error_class(MPI_Type_contiguous(INT_MAX, contiguous, &too_big)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_vector(INT_MAX, INT_MAX, 1, contiguous, &too_big)) == MPI_ERR_COUNT);
  CHECK(too_big == MPI_DATATYPE_NULL);

  MPI_Type_free(&contiguous);
  MPI_Type_free(&vector);
  MPI_Type_free(&nested);
  MPI_Type_free(&nested_inner);
  /* A description per element would have needed gigabytes (and failed under the limit above). */
  CHECK(max_rss_kib() - rss_before < 64 * 1024);
}

static unsigned char pattern(size_t i, int seed) { return (unsigned char)(i * 7 + seed * 13 + (i >> 11)); }

/* Where a (nested) vector type's bytes lie, independently of the library:
 * dims[0].count groups dims[0].stride apart, each of dims[1].count groups
 * dims[1].stride apart, each of dims[2].count blocks of block_bytes
 * dims[2].stride apart; visited in type-map order. */
struct layout {
  struct { size_t count; size_t stride; } dims[3];
  size_t block_bytes;
};

typedef void (*block_visitor)(size_t offset, size_t length, void* context);

static void for_each_block(const struct layout* l, block_visitor visit, void* context) {
  for (size_t i = 0; i < l->dims[0].count; ++i)
    for (size_t j = 0; j < l->dims[1].count; ++j)
      for (size_t k = 0; k < l->dims[2].count; ++k)
        visit(i * l->dims[0].stride + j * l->dims[1].stride + k * l->dims[2].stride, l->block_bytes, context);
}

static void mark_covered(size_t offset, size_t length, void* covered) { memset((char*)covered + offset, 1, length); }

struct packed_cursor {
  unsigned char* packed;
  size_t next;
  int seed;
  int bad;
};

/* The packed bytes are the sender's bytes in type-map order. */
static void check_packed(size_t offset, size_t length, void* context) {
  struct packed_cursor* c = context;
  for (size_t b = 0; b < length; ++b) c->bad |= c->packed[c->next++] != pattern(offset + b, c->seed);
}

static void fill_packed(size_t offset, size_t length, void* context) {
  struct packed_cursor* c = context;
  for (size_t b = 0; b < length; ++b) c->packed[c->next++] = pattern(offset + b, c->seed);
}

/* Sends one element of `type` round the ring three ways (type to type, type
 * to bytes, bytes to type) and checks every byte of the receiving buffers:
 * the type's bytes carry the sender's pattern, the gaps keep their filler. */
static void check_transfer(const char* what, MPI_Datatype type, const struct layout* l) {
  MPI_Type_commit(&type);
  MPI_Count packed_bytes = 0;
  MPI_Aint lb = 0, span = 0;
  MPI_Type_size_x(type, &packed_bytes);
  MPI_Type_get_extent(type, &lb, &span);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  unsigned char* out = malloc((size_t)span);
  unsigned char* in = malloc((size_t)span);
  unsigned char* packed = malloc((size_t)packed_bytes);
  char* covered = calloc((size_t)span, 1);
  for (MPI_Aint i = 0; i < span; ++i) out[i] = pattern((size_t)i, rank);
  for_each_block(l, mark_covered, covered);

  memset(in, 0xEE, (size_t)span);
  MPI_Sendrecv(out, 1, type, next, 70, in, 1, type, prev, 70, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int bad = 0;
  for (MPI_Aint i = 0; i < span; ++i) bad |= in[i] != (covered[i] ? pattern((size_t)i, prev) : 0xEE);
  if (bad) fprintf(stderr, "rank %d: %s: type to type differs\n", rank, what);
  CHECK(!bad);

  MPI_Sendrecv(out, 1, type, next, 71, packed, (int)packed_bytes, MPI_BYTE, prev, 71, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  struct packed_cursor cursor = {packed, 0, prev, 0};
  for_each_block(l, check_packed, &cursor);
  if (cursor.bad) fprintf(stderr, "rank %d: %s: packed bytes differ\n", rank, what);
  CHECK(!cursor.bad && cursor.next == (size_t)packed_bytes);

  /* The sender's pattern packed by the test, unpacked by the receiver's type. */
  cursor = (struct packed_cursor){packed, 0, rank, 0};
  for_each_block(l, fill_packed, &cursor);
  memset(in, 0xEE, (size_t)span);
  MPI_Sendrecv(packed, (int)packed_bytes, MPI_BYTE, next, 72, in, 1, type, prev, 72, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  bad = 0;
  for (MPI_Aint i = 0; i < span; ++i) bad |= in[i] != (covered[i] ? pattern((size_t)i, prev) : 0xEE);
  if (bad) fprintf(stderr, "rank %d: %s: bytes to type differs\n", rank, what);
  CHECK(!bad);

  free(out);
  free(in);
  free(packed);
  free(covered);
  MPI_Type_free(&type);
}

static void large_transfers(void) {
  MPI_Datatype type, inner;
  /* A vector of 2^20 blocks of two doubles, three doubles apart (16 MiB of data). */
  MPI_Type_vector(1 << 20, 2, 3, MPI_DOUBLE, &type);
  check_transfer("vector", type, &(struct layout){{{1 << 20, 24}, {1, 0}, {1, 0}}, 16});

  /* 24 MiB in one contiguous element, of a type that is itself contiguous. */
  MPI_Type_contiguous(3, MPI_INT, &inner);
  MPI_Type_contiguous(1 << 21, inner, &type);
  check_transfer("contiguous", type, &(struct layout){{{1, 0}, {1, 0}, {1, 0}}, (size_t)12 << 21});
  MPI_Type_free(&inner);

  /* An hvector of 4096 pairs of vectors of 64 ints two apart (extent 508
   * bytes), the pairs 1100 bytes apart. */
  MPI_Type_vector(64, 1, 2, MPI_INT, &inner);
  MPI_Type_create_hvector(4096, 2, 1100, inner, &type);
  check_transfer("nested vector", type, &(struct layout){{{4096, 1100}, {2, 508}, {64, 8}}, 4});
  MPI_Type_free(&inner);

  /* A contiguous run of vectors resized so that their extent continues their
   * stride: one longer vector of single bytes. */
  MPI_Type_vector(1000, 1, 3, MPI_BYTE, &inner);
  MPI_Datatype resized;
  MPI_Type_create_resized(inner, 0, 3000, &resized);
  MPI_Type_contiguous(50, resized, &type);
  check_transfer("contiguous of resized vectors", type, &(struct layout){{{50, 3000}, {1000, 3}, {1, 0}}, 1});
  MPI_Type_free(&resized);
  MPI_Type_free(&inner);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Connections are made on first use, and each maps its peer's segment:
   * make them all before measuring what is mapped. */
  int* token = calloc((size_t)size, sizeof *token);
  int* tokens = calloc((size_t)size, sizeof *tokens);
  CHECK(token && tokens && MPI_Alltoall(token, 1, MPI_INT, tokens, 1, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
  free(token);
  free(tokens);
  limit_memory();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  huge_types();
  large_transfers();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  return finish("datatype_test");
}
