/* One file written collectively through views that interleave the ranks, in
 * three regions: a 2-D int array split by columns (subarray filetype), blocks
 * of doubles dealt out in turn (a contiguous filetype resized to every rank's
 * share), and each rank's rank+1 letters in rank order (write_ordered). Then
 * read back collectively and compared. io_openmpi.sh runs it on viastack and
 * on Open MPI and compares the files byte by byte.
 * Usage: io_interleave FILE */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { ROWS = 6, COLS = 3, B = 2, K = 8 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 2) {
    if (rank == 0) fprintf(stderr, "usage: io_interleave FILE\n");
    MPI_Finalize();
    return 2;
  }
  MPI_File fh;
  if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
    fprintf(stderr, "rank %d: cannot open %s\n", rank, argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_File_set_size(fh, 0);

  /* Region 1: ROWS x (COLS*size) ints, rank r holding columns r*COLS .. r*COLS+COLS-1. */
  int sizes[2] = {ROWS, COLS * size}, subsizes[2] = {ROWS, COLS}, starts[2] = {0, rank * COLS};
  MPI_Datatype columns;
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &columns);
  MPI_Type_commit(&columns);
  int ints[ROWS][COLS], ints_back[ROWS][COLS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) ints[i][j] = 100 * i + rank * COLS + j;
  MPI_File_set_view(fh, 0, MPI_INT, columns, "native", MPI_INFO_NULL);
  MPI_File_write_all(fh, ints, ROWS * COLS, MPI_INT, MPI_STATUS_IGNORE);
  const MPI_Offset region2 = (MPI_Offset)(ROWS * COLS * size * sizeof(int));

  /* Region 2: blocks of B doubles, block k of rank r at global block k*size + r. */
  MPI_Datatype block, dealt;
  MPI_Type_contiguous(B, MPI_DOUBLE, &block);
  MPI_Type_create_resized(block, 0, (MPI_Aint)(B * size * sizeof(double)), &dealt);
  MPI_Type_commit(&dealt);
  double doubles[B * K], doubles_back[B * K];
  for (int i = 0; i < B * K; ++i) doubles[i] = (i / B) * B * size + rank * B + i % B + 0.5;
  MPI_File_set_view(fh, region2 + (MPI_Offset)(rank * B * sizeof(double)), MPI_DOUBLE, dealt, "native",
                    MPI_INFO_NULL);
  MPI_File_write_all(fh, doubles, B * K, MPI_DOUBLE, MPI_STATUS_IGNORE);
  const MPI_Offset region3 = region2 + (MPI_Offset)(B * K * size * sizeof(double));

  /* Region 3: rank+1 letters from each rank, in rank order. */
  char letters[64], letters_back[64];
  memset(letters, 'A' + rank, sizeof letters);
  MPI_File_set_view(fh, region3, MPI_CHAR, MPI_CHAR, "native", MPI_INFO_NULL);
  MPI_File_write_ordered(fh, letters, rank + 1, MPI_CHAR, MPI_STATUS_IGNORE);
  MPI_File_sync(fh);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_sync(fh);

  /* Read it all back the same ways. */
  MPI_File_set_view(fh, 0, MPI_INT, columns, "native", MPI_INFO_NULL);
  MPI_File_read_all(fh, ints_back, ROWS * COLS, MPI_INT, MPI_STATUS_IGNORE);
  failures += memcmp(ints, ints_back, sizeof ints) != 0;
  MPI_File_set_view(fh, region2 + (MPI_Offset)(rank * B * sizeof(double)), MPI_DOUBLE, dealt, "native",
                    MPI_INFO_NULL);
  MPI_File_read_at_all(fh, 0, doubles_back, B * K, MPI_DOUBLE, MPI_STATUS_IGNORE);
  failures += memcmp(doubles, doubles_back, sizeof doubles) != 0;
  MPI_File_set_view(fh, region3, MPI_CHAR, MPI_CHAR, "native", MPI_INFO_NULL);
  MPI_File_read_ordered(fh, letters_back, rank + 1, MPI_CHAR, MPI_STATUS_IGNORE);
  failures += memcmp(letters, letters_back, (size_t)rank + 1) != 0;
  MPI_Offset bytes = 0;
  MPI_File_get_size(fh, &bytes);
  failures += bytes != region3 + size * (size + 1) / 2;
  MPI_File_close(&fh);
  MPI_Type_free(&columns);
  MPI_Type_free(&block);
  MPI_Type_free(&dealt);

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("io_interleave on %d ranks: %s\n", size, total ? "FAILED" : "ok");
  MPI_Finalize();
  return total ? 1 : 0;
}
