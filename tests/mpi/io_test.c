/* MPI-IO over POSIX files (issue 18): interleaved views (vector, subarray,
 * resized) written collectively and checked byte by byte with plain POSIX
 * reads on rank 0, collective and independent reads back, the shared file
 * pointer (ordered writes in rank order), non-blocking and split collective
 * variants, sizes, and the error classes under MPI_ERRORS_RETURN (the default
 * for files). Files live in a temporary directory that rank 0 removes; it
 * must be empty by then (no shared-pointer side file left behind).
 * "io_test fatal": under MPI_ERRORS_ARE_FATAL a write to a read-only file ends the job. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static int rank, size;
static char dir[256];

static void path_of(char* out, const char* name) { snprintf(out, 512, "%s/%s", dir, name); }

/* The temporary directory: made by rank 0, its name sent to everyone. */
static void make_dir(void) {
  if (rank == 0) {
    const char* tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/viastack-io-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) dir[0] = '\0';
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!dir[0]) {
    fprintf(stderr, "cannot make a temporary directory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* The whole file as rank 0 reads it with POSIX calls; *length gets its size. */
static unsigned char* posix_read(const char* path, long* length) {
  int fd = open(path, O_RDONLY);
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0) {
    *length = -1;
    if (fd >= 0) close(fd);
    return NULL;
  }
  unsigned char* data = malloc((size_t)info.st_size + 1);
  *length = read(fd, data, (size_t)info.st_size);
  close(fd);
  return data;
}

/* The value at global int index g of the interleaved files. */
static int value_at(long g) { return (int)(g * 7 + 3); }

static int count_of(const MPI_Status* status, MPI_Datatype type) {
  int count = -1;
  MPI_Get_count(status, type, &count);
  return count;
}

/* Ranks write blocks of B ints in turn (block k of rank r at global block k*size + r) through a
 * filetype of B ints resized to B*size ints, displaced by rank*B ints; memory is a strided vector. */
static void interleaved_resized(void) {
  enum { B = 3, K = 50 };
  char path[512];
  path_of(path, "resized.dat");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  MPI_Datatype block, filetype;
  MPI_Type_contiguous(B, MPI_INT, &block);
  MPI_Type_create_resized(block, 0, (MPI_Aint)(B * size * sizeof(int)), &filetype);
  MPI_Type_commit(&filetype);
  CHECK(MPI_File_set_view(fh, (MPI_Offset)(rank * B * sizeof(int)), MPI_INT, filetype, "native", MPI_INFO_NULL) ==
        MPI_SUCCESS);
  /* In memory every other int: a vector of stride 2. */
  int* spread = calloc(2 * B * K, sizeof(int));
  for (int i = 0; i < B * K; ++i) spread[2 * i] = value_at((long)(i / B) * B * size + rank * B + i % B);
  MPI_Datatype every_other;
  MPI_Type_vector(B * K, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  MPI_Status status;
  CHECK(MPI_File_write_all(fh, spread, 1, every_other, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == B * K);
  MPI_Offset position = -1, byte_offset = -1;
  MPI_File_get_position(fh, &position);
  CHECK(position == B * K);
  /* Position B (etypes) is this rank's second block. */
  MPI_File_get_byte_offset(fh, B, &byte_offset);
  CHECK(byte_offset == (MPI_Offset)((B * size + rank * B) * sizeof(int)));
  MPI_Offset disp = -1;
  MPI_Datatype etype_out, filetype_out;
  char datarep[MPI_MAX_DATAREP_STRING];
  CHECK(MPI_File_get_view(fh, &disp, &etype_out, &filetype_out, datarep) == MPI_SUCCESS);
  CHECK(disp == (MPI_Offset)(rank * B * sizeof(int)) && etype_out == MPI_INT && strcmp(datarep, "native") == 0);
  MPI_Aint lb, extent;
  MPI_Type_get_extent(filetype_out, &lb, &extent);
  CHECK(extent == (MPI_Aint)(B * size * sizeof(int)));
  MPI_Type_free(&filetype_out);
  MPI_File_sync(fh);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_sync(fh);

  if (rank == 0) {
    long length;
    unsigned char* bytes = posix_read(path, &length);
    CHECK(length == (long)(B * K * size * sizeof(int)));
    int bad = 0;
    for (long g = 0; g < length / (long)sizeof(int); ++g) {
      int v;
      memcpy(&v, bytes + g * sizeof(int), sizeof v);
      bad += v != value_at(g);
    }
    CHECK(bad == 0);
    free(bytes);
  }

  /* Read back: collectively at an explicit offset into a contiguous buffer, then
   * independently in two halves with the individual pointer into the strided one. */
  int* back = calloc(B * K, sizeof(int));
  CHECK(MPI_File_read_at_all(fh, 0, back, B * K, MPI_INT, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == B * K);
  int bad = 0;
  for (int i = 0; i < B * K; ++i) bad += back[i] != spread[2 * i];
  CHECK(bad == 0);
  memset(spread, 0, 2 * B * K * sizeof(int));
  MPI_File_seek(fh, 0, MPI_SEEK_SET);
  MPI_Datatype half;
  MPI_Type_vector(B * K / 2, 1, 2, MPI_INT, &half);
  MPI_Type_commit(&half);
  CHECK(MPI_File_read(fh, spread, 1, half, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, half) == 1);
  CHECK(MPI_File_read(fh, spread + B * K, 1, half, &status) == MPI_SUCCESS);
  bad = 0;
  for (int i = 0; i < B * K; ++i) bad += back[i] != spread[2 * i];
  CHECK(bad == 0);
  /* At the end of the view's data a read gets nothing. */
  MPI_File_get_position(fh, &position);
  CHECK(position == B * K);
  CHECK(MPI_File_read(fh, back, 1, MPI_INT, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == 0);
  MPI_File_seek(fh, 0, MPI_SEEK_END);
  MPI_File_get_position(fh, &position);
  CHECK(position == B * K);

  MPI_Type_free(&half);
  MPI_Type_free(&every_other);
  MPI_Type_free(&block);
  MPI_Type_free(&filetype);
  free(back);
  free(spread);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  CHECK(fh == MPI_FILE_NULL);
}

/* A ROWS x (COLS*size) array of doubles in C order, rank r holding columns [r*COLS, (r+1)*COLS):
 * a subarray filetype; a vector filetype (one column strip per row) reads it back. */
static void interleaved_subarray(void) {
  enum { ROWS = 20, COLS = 5 };
  char path[512];
  path_of(path, "subarray.dat");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  int sizes[2] = {ROWS, COLS * size}, subsizes[2] = {ROWS, COLS}, starts[2] = {0, rank * COLS};
  MPI_Datatype subarray;
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &subarray);
  MPI_Type_commit(&subarray);
  CHECK(MPI_File_set_view(fh, 0, MPI_DOUBLE, subarray, "native", MPI_INFO_NULL) == MPI_SUCCESS);
  double local[ROWS][COLS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) local[i][j] = i * 1000.0 + rank * COLS + j;
  MPI_Status status;
  CHECK(MPI_File_write_at_all(fh, 0, local, ROWS * COLS, MPI_DOUBLE, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_DOUBLE) == ROWS * COLS);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    long length;
    unsigned char* bytes = posix_read(path, &length);
    CHECK(length == (long)(ROWS * COLS * size * sizeof(double)));
    int bad = 0;
    for (int i = 0; i < ROWS; ++i)
      for (int j = 0; j < COLS * size; ++j) {
        double v;
        memcpy(&v, bytes + (i * COLS * size + j) * sizeof(double), sizeof v);
        bad += v != i * 1000.0 + j;
      }
    CHECK(bad == 0);
    free(bytes);
  }
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  MPI_Datatype strip;
  MPI_Type_vector(ROWS, COLS, COLS * size, MPI_DOUBLE, &strip);
  MPI_Type_commit(&strip);
  CHECK(MPI_File_set_view(fh, (MPI_Offset)(rank * COLS * sizeof(double)), MPI_DOUBLE, strip, "native",
                          MPI_INFO_NULL) == MPI_SUCCESS);
  double back[ROWS][COLS];
  memset(back, 0, sizeof back);
  CHECK(MPI_File_read_all(fh, back, ROWS * COLS, MPI_DOUBLE, &status) == MPI_SUCCESS);
  CHECK(memcmp(back, local, sizeof back) == 0);
  MPI_Type_free(&strip);
  MPI_Type_free(&subarray);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
}

/* The shared file pointer: ordered writes land in rank order (rank r writes r+1 ints), then one
 * int from each rank by write_shared lands after them in some order; read_ordered reads them back. */
static void shared_pointer(void) {
  char path[512];
  path_of(path, "shared.dat");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
  int mine[64];
  for (int i = 0; i <= rank; ++i) mine[i] = rank * 100 + i;
  MPI_Status status;
  CHECK(MPI_File_write_ordered(fh, mine, rank + 1, MPI_INT, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == rank + 1);
  const int ordered = size * (size + 1) / 2;
  MPI_Offset shared = -1;
  MPI_Barrier(MPI_COMM_WORLD); /* everyone's ordered write is done, nobody has written since */
  MPI_File_get_position_shared(fh, &shared);
  CHECK(shared == ordered);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_write_shared(fh, &rank, 1, MPI_INT, &status) == MPI_SUCCESS);
  MPI_File_sync(fh);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_sync(fh);
  MPI_File_get_position_shared(fh, &shared);
  CHECK(shared == ordered + size);
  if (rank == 0) {
    long length;
    unsigned char* bytes = posix_read(path, &length);
    CHECK(length == (long)((ordered + size) * sizeof(int)));
    int at = 0, bad = 0, seen = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i <= r; ++i, ++at) {
        int v;
        memcpy(&v, bytes + at * sizeof(int), sizeof v);
        bad += v != r * 100 + i;
      }
    for (int r = 0; r < size; ++r) {
      int v;
      memcpy(&v, bytes + (ordered + r) * sizeof(int), sizeof v);
      if (v >= 0 && v < size) seen |= 1 << v;
    }
    CHECK(bad == 0);
    CHECK(seen == (1 << size) - 1);
    free(bytes);
  }
  /* Back to the start; everyone reads its own part in order. */
  CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
  int back[64] = {0};
  CHECK(MPI_File_read_ordered(fh, back, rank + 1, MPI_INT, &status) == MPI_SUCCESS);
  CHECK(memcmp(back, mine, (size_t)(rank + 1) * sizeof(int)) == 0);
  /* The split form, and read_shared of the rest: one int each, every rank's value once. */
  CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
  memset(back, 0, sizeof back);
  CHECK(MPI_File_read_ordered_begin(fh, back, rank + 1, MPI_INT) == MPI_SUCCESS);
  CHECK(MPI_File_read_ordered_end(fh, back, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == rank + 1);
  CHECK(memcmp(back, mine, (size_t)(rank + 1) * sizeof(int)) == 0);
  int one = -1, all_seen = 0;
  CHECK(MPI_File_read_shared(fh, &one, 1, MPI_INT, &status) == MPI_SUCCESS);
  int bit = one >= 0 && one < size ? 1 << one : 0;
  MPI_Allreduce(&bit, &all_seen, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
  CHECK(all_seen == (1 << size) - 1);
  /* Seeking from the end: past every int. */
  CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_END) == MPI_SUCCESS);
  MPI_File_get_position_shared(fh, &shared);
  CHECK(shared == ordered + size);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(access(path, F_OK) != 0); /* MPI_MODE_DELETE_ON_CLOSE */
}

/* MPI_MODE_SEQUENTIAL: only the shared file pointer moves through the file. Ordered writes of
 * r+1 ints from rank r, then a view from the shared pointer on (MPI_DISPLACEMENT_CURRENT) whose
 * first int each rank writes by write_shared; explicit offsets, the individual pointer, seeking
 * and a displacement other than MPI_DISPLACEMENT_CURRENT are refused. */
static void sequential(void) {
  char path[512];
  path_of(path, "sequential.dat");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path,
                      MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  int amode = 0;
  MPI_File_get_amode(fh, &amode);
  CHECK(amode & MPI_MODE_SEQUENTIAL);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_ERR_ARG);
  int mine[64];
  unsigned char letters[64];
  for (int i = 0; i <= rank; ++i) mine[i] = rank * 100 + i, letters[i] = (unsigned char)(rank * 10 + i);
  MPI_Status status;
  CHECK(MPI_File_write_ordered(fh, letters, rank + 1, MPI_BYTE, &status) == MPI_SUCCESS);
  CHECK(MPI_File_write_ordered(fh, mine, rank + 1, MPI_INT, &status) == MPI_SUCCESS);
  MPI_Offset at = -1;
  CHECK(MPI_File_get_position_shared(fh, &at) == MPI_SUCCESS);
  const int bytes_then = size * (size + 1) / 2 * (1 + (int)sizeof(int));
  CHECK(at == bytes_then);
  MPI_Barrier(MPI_COMM_WORLD); /* everyone has read it before set_view resets it */
  /* The new view starts where the shared pointer is, which it resets to 0. */
  CHECK(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
  MPI_Offset disp = -1;
  MPI_Datatype etype, filetype;
  char rep[MPI_MAX_DATAREP_STRING];
  CHECK(MPI_File_get_view(fh, &disp, &etype, &filetype, rep) == MPI_SUCCESS);
  CHECK(disp == bytes_then);
  CHECK(MPI_File_get_position_shared(fh, &at) == MPI_SUCCESS && at == 0);
  MPI_Barrier(MPI_COMM_WORLD); /* everyone has seen it before anyone moves it */
  CHECK(MPI_File_write_shared(fh, &rank, 1, MPI_INT, &status) == MPI_SUCCESS);
  int value = 0;
  MPI_Offset position = -1, byte = -1;
  CHECK(MPI_File_write_at(fh, 0, &value, 1, MPI_INT, &status) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(MPI_File_write(fh, &value, 1, MPI_INT, &status) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(MPI_File_write_at_all(fh, 0, &value, 1, MPI_INT, &status) == MPI_ERR_UNSUPPORTED_OPERATION);
  MPI_Request request;
  CHECK(MPI_File_iwrite(fh, &value, 1, MPI_INT, &request) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(MPI_File_seek(fh, 0, MPI_SEEK_SET) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(MPI_File_get_position(fh, &position) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(MPI_File_preallocate(fh, 1 << 20) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(MPI_File_get_byte_offset(fh, 0, &byte) == MPI_SUCCESS && byte == bytes_then);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
  if (rank == 0) {
    long length;
    unsigned char* bytes = posix_read(path, &length);
    CHECK(length == bytes_then + size * (long)sizeof(int));
    int at_byte = 0, bad = 0, seen = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i <= r; ++i) bad += bytes[at_byte++] != r * 10 + i;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i <= r; ++i, at_byte += (int)sizeof(int)) {
        int v;
        memcpy(&v, bytes + at_byte, sizeof v);
        bad += v != r * 100 + i;
      }
    for (int r = 0; r < size; ++r, at_byte += (int)sizeof(int)) {
      int v;
      memcpy(&v, bytes + at_byte, sizeof v);
      if (v >= 0 && v < size) seen |= 1 << v;
    }
    CHECK(bad == 0);
    CHECK(seen == (1 << size) - 1);
    free(bytes);
  }
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
}

/* A data representation of the program's own (MPI_Register_datarep): ints stored big-endian in
 * the file, byte-swapped by its conversion functions on this little-endian machine. */
static int conversions = 0;
static int swap_ints(void* userbuf, MPI_Datatype type, int count, void* filebuf, MPI_Offset position,
                     void* extra_state, int to_file) {
  if (type != MPI_INT || position != 0 || extra_state != &conversions) return MPI_ERR_TYPE;
  unsigned char* from = to_file ? userbuf : filebuf;
  unsigned char* to = to_file ? filebuf : userbuf;
  for (int i = 0; i < count * 4; ++i) to[i] = from[i - i % 4 + 3 - i % 4];
  ++conversions;
  return MPI_SUCCESS;
}
static int read_big_endian(void* userbuf, MPI_Datatype type, int count, void* filebuf, MPI_Offset position,
                           void* extra_state) {
  return swap_ints(userbuf, type, count, filebuf, position, extra_state, 0);
}
static int write_big_endian(void* userbuf, MPI_Datatype type, int count, void* filebuf, MPI_Offset position,
                            void* extra_state) {
  return swap_ints(userbuf, type, count, filebuf, position, extra_state, 1);
}
static int same_extent(MPI_Datatype type, MPI_Aint* extent, void* extra_state) {
  (void)extra_state;
  MPI_Aint lb;
  return MPI_Type_get_extent(type, &lb, extent);
}
static int doubled_extent(MPI_Datatype type, MPI_Aint* extent, void* extra_state) {
  (void)extra_state;
  MPI_Aint lb;
  MPI_Type_get_extent(type, &lb, extent);
  *extent *= 2;
  return MPI_SUCCESS;
}

static void user_datarep(void) {
  enum { N = 5 };
  /* Registered once per process; the names of the predefined ones are taken. */
  CHECK(MPI_Register_datarep("big-endian-ints", read_big_endian, write_big_endian, same_extent, &conversions) ==
        MPI_SUCCESS);
  CHECK(MPI_Register_datarep("big-endian-ints", read_big_endian, write_big_endian, same_extent, &conversions) ==
        MPI_ERR_DUP_DATAREP);
  CHECK(MPI_Register_datarep("native", NULL, NULL, same_extent, NULL) == MPI_ERR_DUP_DATAREP);
  CHECK(MPI_Register_datarep("external32", NULL, NULL, same_extent, NULL) == MPI_ERR_DUP_DATAREP);
  CHECK(MPI_Register_datarep("no-extent", NULL, NULL, NULL, NULL) == MPI_ERR_ARG);
  CHECK(MPI_Register_datarep("wide", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, doubled_extent, NULL) ==
        MPI_SUCCESS);

  char path[512];
  path_of(path, "bigendian.dat");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "wide", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "big-endian-ints", MPI_INFO_NULL) == MPI_SUCCESS);
  MPI_Offset disp;
  MPI_Datatype etype, filetype;
  char rep[MPI_MAX_DATAREP_STRING] = "";
  CHECK(MPI_File_get_view(fh, &disp, &etype, &filetype, rep) == MPI_SUCCESS);
  CHECK(strcmp(rep, "big-endian-ints") == 0);
  MPI_Aint extent = 0;
  CHECK(MPI_File_get_type_extent(fh, MPI_INT, &extent) == MPI_SUCCESS && extent == 4);
  int mine[N], back[N];
  for (int i = 0; i < N; ++i) mine[i] = 0x01020304 + rank * 0x100000 + i;
  MPI_Status status;
  CHECK(MPI_File_write_at_all(fh, rank * N, mine, N, MPI_INT, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == N);
  CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
  if (rank == 0) {
    long length;
    unsigned char* bytes = posix_read(path, &length);
    CHECK(length == (long)(size * N * 4));
    int bad = 0;
    for (int r = 0; r < size && bytes; ++r)
      for (int i = 0; i < N; ++i) {
        const unsigned v = (unsigned)(0x01020304 + r * 0x100000 + i);
        const unsigned char* b = bytes + (r * N + i) * 4;
        bad += b[0] != (v >> 24) || b[1] != ((v >> 16) & 0xff) || b[2] != ((v >> 8) & 0xff) || b[3] != (v & 0xff);
      }
    CHECK(bad == 0);
    free(bytes);
  }
  /* Read back through the view: the values themselves; one read past the end converts what it has. */
  CHECK(MPI_File_read_at(fh, ((rank + 1) % size) * N, back, N, MPI_INT, &status) == MPI_SUCCESS);
  for (int i = 0; i < N; ++i) CHECK(back[i] == 0x01020304 + ((rank + 1) % size) * 0x100000 + i);
  back[0] = back[1] = -1;
  CHECK(MPI_File_read_at(fh, size * N - 1, back, 2, MPI_INT, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == 1 && back[0] == 0x01020304 + (size - 1) * 0x100000 + N - 1 && back[1] == -1);
  CHECK(conversions >= 3);
  /* A conversion function's error is the access's. */
  char letters[4] = "abc";
  CHECK(MPI_File_write_at(fh, 0, letters, 4, MPI_CHAR, &status) == MPI_ERR_TYPE);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
}

/* Non-blocking and split collective accesses: each rank's 100 ints at rank*100. */
static void nonblocking_and_split(void) {
  enum { N = 100 };
  char path[512];
  path_of(path, "nonblocking.dat");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  int mine[N], back[N];
  for (int i = 0; i < N; ++i) mine[i] = rank * N + i;
  const MPI_Offset at = (MPI_Offset)rank * N * sizeof(int);
  MPI_Request request;
  MPI_Status status;
  CHECK(MPI_File_iwrite_at(fh, at, mine, N, MPI_INT, &request) == MPI_SUCCESS);
  CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS);
  CHECK(request == MPI_REQUEST_NULL && count_of(&status, MPI_INT) == N);
  memset(back, 0, sizeof back);
  CHECK(MPI_File_iread_at(fh, at, back, N, MPI_INT, &request) == MPI_SUCCESS);
  int flag = 0;
  for (int tries = 0; !flag && tries < 1000; ++tries) MPI_Test(&request, &flag, &status);
  CHECK(flag && count_of(&status, MPI_INT) == N && memcmp(back, mine, sizeof mine) == 0);
  /* Individual pointer and the collective forms. */
  MPI_File_seek(fh, at, MPI_SEEK_SET);
  memset(back, 0, sizeof back);
  CHECK(MPI_File_iread(fh, back, N, MPI_INT, &request) == MPI_SUCCESS);
  CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS && memcmp(back, mine, sizeof mine) == 0);
  MPI_Offset position;
  MPI_File_get_position(fh, &position);
  CHECK(position == at + (MPI_Offset)sizeof mine);
  for (int i = 0; i < N; ++i) mine[i] = -mine[i];
  CHECK(MPI_File_iwrite_at_all(fh, at, mine, N, MPI_INT, &request) == MPI_SUCCESS);
  CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_File_seek(fh, at, MPI_SEEK_SET);
  memset(back, 0, sizeof back);
  CHECK(MPI_File_iread_all(fh, back, N, MPI_INT, &request) == MPI_SUCCESS);
  CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS && memcmp(back, mine, sizeof mine) == 0);
  /* Split collectives. */
  for (int i = 0; i < N; ++i) mine[i] = 7 * i + rank;
  CHECK(MPI_File_write_at_all_begin(fh, at, mine, N, MPI_INT) == MPI_SUCCESS);
  CHECK(MPI_File_write_at_all_end(fh, mine, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == N);
  memset(back, 0, sizeof back);
  CHECK(MPI_File_read_at_all_begin(fh, at, back, N, MPI_INT) == MPI_SUCCESS);
  /* One split collective at a time; an end needs its begin. */
  CHECK(MPI_File_read_at_all_begin(fh, at, back, N, MPI_INT) == MPI_ERR_IO);
  CHECK(MPI_File_write_all_end(fh, back, &status) == MPI_ERR_IO);
  CHECK(MPI_File_read_at_all_end(fh, back, &status) == MPI_SUCCESS);
  CHECK(count_of(&status, MPI_INT) == N && memcmp(back, mine, sizeof mine) == 0);
  CHECK(MPI_File_read_at_all_end(fh, back, &status) == MPI_ERR_IO);
  MPI_File_seek(fh, at, MPI_SEEK_SET);
  for (int i = 0; i < N; ++i) mine[i] = 3 * i - rank;
  CHECK(MPI_File_write_all_begin(fh, mine, N, MPI_INT) == MPI_SUCCESS);
  CHECK(MPI_File_write_all_end(fh, mine, &status) == MPI_SUCCESS);
  MPI_File_seek(fh, at, MPI_SEEK_SET);
  memset(back, 0, sizeof back);
  CHECK(MPI_File_read_all_begin(fh, back, N, MPI_INT) == MPI_SUCCESS);
  CHECK(MPI_File_read_all_end(fh, back, &status) == MPI_SUCCESS);
  CHECK(memcmp(back, mine, sizeof mine) == 0);
  /* Shared pointer, non-blocking: every rank's int lands once. */
  CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
  CHECK(MPI_File_iwrite_shared(fh, &rank, 1, MPI_INT, &request) == MPI_SUCCESS);
  CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
  int one = -1, bit, all_seen = 0;
  CHECK(MPI_File_iread_shared(fh, &one, 1, MPI_INT, &request) == MPI_SUCCESS);
  CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  bit = one >= 0 && one < size ? 1 << one : 0;
  MPI_Allreduce(&bit, &all_seen, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
  CHECK(all_seen == (1 << size) - 1);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
}

/* set_size, preallocate, get_size, MPI_MODE_APPEND, hints, atomicity, amode, group. */
static void sizes_and_properties(void) {
  char path[512];
  path_of(path, "sizes.dat");
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "cb_nodes", "1");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh) == MPI_SUCCESS);
  MPI_Offset bytes = -1;
  CHECK(MPI_File_get_size(fh, &bytes) == MPI_SUCCESS && bytes == 0);
  CHECK(MPI_File_set_size(fh, 1000) == MPI_SUCCESS);
  MPI_File_get_size(fh, &bytes);
  CHECK(bytes == 1000);
  CHECK(MPI_File_set_size(fh, 10) == MPI_SUCCESS);
  MPI_File_get_size(fh, &bytes);
  CHECK(bytes == 10);
  CHECK(MPI_File_preallocate(fh, 4096) == MPI_SUCCESS);
  MPI_File_get_size(fh, &bytes);
  CHECK(bytes == 4096);
  CHECK(MPI_File_preallocate(fh, 100) == MPI_SUCCESS); /* never shrinks */
  MPI_File_get_size(fh, &bytes);
  CHECK(bytes == 4096);
  if (rank == 0) {
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 4096);
  }
  int amode = 0, flag = -1;
  MPI_File_get_amode(fh, &amode);
  CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR));
  MPI_File_get_atomicity(fh, &flag);
  CHECK(flag == 0);
  CHECK(MPI_File_set_atomicity(fh, 1) == MPI_SUCCESS);
  MPI_File_get_atomicity(fh, &flag);
  CHECK(flag == 1);
  /* Atomic mode: everyone writes 64 KiB of its own byte over the same range; one rank's bytes win whole. */
  enum { SPAN = 65536 };
  unsigned char* fill = malloc(SPAN);
  memset(fill, 'a' + rank, SPAN);
  CHECK(MPI_File_write_at(fh, 0, fill, SPAN, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_read_at(fh, 0, fill, SPAN, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  int mixed = 0;
  for (int i = 1; i < SPAN; ++i) mixed += fill[i] != fill[0];
  CHECK(mixed == 0 && fill[0] >= 'a' && fill[0] < 'a' + size);
  free(fill);
  MPI_Info used;
  char value[MPI_MAX_INFO_VAL + 1];
  CHECK(MPI_File_get_info(fh, &used) == MPI_SUCCESS);
  MPI_Info_get(used, "cb_nodes", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag && strcmp(value, "1") == 0);
  MPI_Info_free(&used);
  MPI_Info_set(info, "striping_factor", "4");
  CHECK(MPI_File_set_info(fh, info) == MPI_SUCCESS);
  MPI_File_get_info(fh, &used);
  MPI_Info_get(used, "striping_factor", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag && strcmp(value, "4") == 0);
  MPI_Info_free(&used);
  MPI_Info_free(&info);
  MPI_Group group, world_group;
  int group_size = 0, group_rank = -1, world_rank = -1;
  CHECK(MPI_File_get_group(fh, &group) == MPI_SUCCESS);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_size(group, &group_size);
  MPI_Group_rank(group, &group_rank);
  MPI_Group_translate_ranks(group, 1, &group_rank, world_group, &world_rank);
  CHECK(group_size == size && group_rank == rank && world_rank == rank);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  MPI_Aint extent = 0;
  CHECK(MPI_File_get_type_extent(fh, MPI_DOUBLE, &extent) == MPI_SUCCESS && extent == sizeof(double));
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  /* MPI_MODE_APPEND: both pointers start at the end. */
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  MPI_Offset position = -1, shared = -1;
  MPI_File_get_position(fh, &position);
  MPI_File_get_position_shared(fh, &shared);
  CHECK(position == 65536 && shared == 65536);
  CHECK(MPI_File_write_ordered(fh, &rank, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_get_size(fh, &bytes);
  CHECK(bytes == 65536 + size * (MPI_Offset)sizeof(int));
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) CHECK(MPI_File_delete(path, MPI_INFO_NULL) == MPI_SUCCESS);
}

static int handler_calls = 0, handler_code = 0;
static void count_file_errors(MPI_File* file, int* code, ...) {
  (void)file;
  ++handler_calls;
  handler_code = *code;
}

/* Each error class, under the default MPI_ERRORS_RETURN. */
static void errors(void) {
  char path[512], missing[512];
  path_of(path, "errors.dat");
  path_of(missing, "missing.dat");
  MPI_Errhandler handler;
  CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &handler) == MPI_SUCCESS);
  CHECK(handler == MPI_ERRORS_RETURN);
  MPI_File fh = MPI_FILE_NULL;
  /* Bad amodes. */
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE, MPI_INFO_NULL, &fh) == MPI_ERR_AMODE);
  CHECK(fh == MPI_FILE_NULL);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == MPI_ERR_AMODE);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh) == MPI_ERR_AMODE);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh) ==
        MPI_ERR_AMODE);
  if (size > 1)
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, rank == 0 ? MPI_MODE_RDONLY : MPI_MODE_RDWR, MPI_INFO_NULL, &fh) ==
          MPI_ERR_NOT_SAME);
  /* Missing files, existing ones with MPI_MODE_EXCL, directories. */
  CHECK(MPI_File_open(MPI_COMM_WORLD, missing, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_ERR_NO_SUCH_FILE);
  CHECK(MPI_File_delete(missing, MPI_INFO_NULL) == MPI_ERR_NO_SUCH_FILE);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) ==
        MPI_SUCCESS);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) ==
        MPI_ERR_FILE_EXISTS);
  CHECK(MPI_File_open(MPI_COMM_WORLD, dir, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_ERR_BAD_FILE);
  /* Permissions (root is never refused). */
  if (geteuid() != 0) {
    if (rank == 0) chmod(path, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_ERR_ACCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) chmod(path, 0644);
  }
  /* Reading a write-only file, writing a read-only one. */
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  int value = 0;
  CHECK(MPI_File_read_at(fh, 0, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_ACCESS);
  CHECK(MPI_File_read_ordered(fh, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_ACCESS);
  /* Bad arguments. */
  CHECK(MPI_File_write_at(fh, -1, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_ARG);
  CHECK(MPI_File_write_at(fh, 0, &value, -1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_COUNT);
  CHECK(MPI_File_write_at(fh, 0, &value, 1, MPI_DATATYPE_NULL, MPI_STATUS_IGNORE) == MPI_ERR_TYPE);
  CHECK(MPI_File_seek(fh, -1, MPI_SEEK_SET) == MPI_ERR_ARG);
  CHECK(MPI_File_seek(fh, 0, 12345) == MPI_ERR_ARG);
  CHECK(MPI_File_set_size(fh, -5) == MPI_ERR_ARG);
  /* Data representations other than "native"; filetypes not made of etypes. */
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "internal", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "xdr", MPI_INFO_NULL) == MPI_ERR_UNSUPPORTED_DATAREP);
  CHECK(MPI_File_set_view(fh, 0, MPI_DOUBLE, MPI_INT, "native", MPI_INFO_NULL) == MPI_ERR_TYPE);
  CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
  /* Only whole etypes. */
  CHECK(MPI_File_write(fh, &value, 1, MPI_SHORT, MPI_STATUS_IGNORE) == MPI_ERR_IO);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  CHECK(MPI_File_write_at(fh, 0, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_READ_ONLY);
  CHECK(MPI_File_write_shared(fh, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_READ_ONLY);
  CHECK(MPI_File_set_size(fh, 0) == MPI_ERR_READ_ONLY);
  CHECK(MPI_File_preallocate(fh, 10) == MPI_ERR_READ_ONLY);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  /* Bad file handles: MPI_FILE_NULL's handler, MPI_ERR_FILE. */
  MPI_Offset bytes;
  CHECK(MPI_File_get_size(MPI_FILE_NULL, &bytes) == MPI_ERR_FILE);
  CHECK(MPI_File_close(&fh) == MPI_ERR_FILE);
  CHECK(MPI_File_write(MPI_FILE_NULL, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_FILE);
  /* No space left: /dev/full (on one rank; the file is opened on MPI_COMM_SELF). */
  if (rank == 0 && access("/dev/full", W_OK) == 0) {
    MPI_File full;
    CHECK(MPI_File_open(MPI_COMM_SELF, "/dev/full", MPI_MODE_WRONLY, MPI_INFO_NULL, &full) == MPI_SUCCESS);
    CHECK(MPI_File_write(full, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_NO_SPACE);
    CHECK(MPI_File_close(&full) == MPI_SUCCESS);
  }
  /* The program's handler, on MPI_FILE_NULL (files opened later take it) and on a file. */
  MPI_Errhandler counting;
  MPI_File_create_errhandler(count_file_errors, &counting);
  CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, counting) == MPI_SUCCESS);
  CHECK(MPI_File_open(MPI_COMM_WORLD, missing, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_ERR_NO_SUCH_FILE);
  CHECK(handler_calls == 1 && handler_code == MPI_ERR_NO_SUCH_FILE);
  CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
  MPI_Errhandler got;
  MPI_File_get_errhandler(fh, &got);
  CHECK(got == counting);
  MPI_Errhandler_free(&got);
  CHECK(MPI_File_write_at(fh, 0, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_READ_ONLY);
  CHECK(handler_calls == 2 && handler_code == MPI_ERR_READ_ONLY);
  CHECK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN) == MPI_SUCCESS);
  CHECK(MPI_File_write_at(fh, 0, &value, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_ERR_READ_ONLY);
  CHECK(handler_calls == 2);
  CHECK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_IO) == MPI_SUCCESS);
  CHECK(handler_calls == 3 && handler_code == MPI_ERR_IO);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
  CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN) == MPI_SUCCESS);
  MPI_Errhandler_free(&counting);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) CHECK(MPI_File_delete(path, MPI_INFO_NULL) == MPI_SUCCESS);
}

/* The file is opened read-only and unlinked with its directory, then written under MPI_ERRORS_ARE_FATAL. */
static int fatal(void) {
  char path[512];
  path_of(path, "fatal.dat");
  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
  MPI_File_close(&fh);
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    unlink(path);
    rmdir(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_set_errhandler(fh, MPI_ERRORS_ARE_FATAL);
  int value = 0;
  MPI_File_write(fh, &value, 1, MPI_INT, MPI_STATUS_IGNORE);
  printf("rank %d: the job went on after a fatal error\n", rank);
  MPI_Finalize();
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  make_dir();
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) return fatal();
  interleaved_resized();
  interleaved_subarray();
  shared_pointer();
  sequential();
  user_datarep();
  nonblocking_and_split();
  sizes_and_properties();
  errors();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    char path[512];
    const char* names[] = {"resized.dat", "subarray.dat"};
    for (int i = 0; i < 2; ++i) {
      path_of(path, names[i]);
      CHECK(unlink(path) == 0);
    }
    CHECK(rmdir(dir) == 0); /* fails if anything else was left, shared-pointer side files included */
  }
  return finish("io_test");
}
