/* jacobi: solves Laplace's equation on an N x N grid by Jacobi iteration,
 * rows split across the ranks, halo rows swapped with MPI_Sendrecv (or, with
 * the argument "put", written into the neighbours' grids with MPI_Put between
 * two MPI_Win_fence calls) and the residual combined with MPI_Allreduce. The
 * boundary holds u = x, whose harmonic extension is u = x everywhere, so the
 * answer can be checked. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 48 };

static double boundary(int col) { return (double)col / (N + 1); }

/* The interior rows of a rank's band. */
static int rows_of(int rank, int size) { return (rank + 1) * N / size - rank * N / size; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* A band of the interior's N rows is ours, plus a halo row on each side. */
  const int rows = rows_of(rank, size);
  const int width = N + 2;
  double* u = calloc((size_t)(rows + 2) * width, sizeof(double));
  double* next = calloc((size_t)(rows + 2) * width, sizeof(double));
  /* With "put", each grid is a window, swapped along with the grids. */
  const int use_put = argc > 1 && strcmp(argv[1], "put") == 0;
  MPI_Win u_win = MPI_WIN_NULL, next_win = MPI_WIN_NULL;
  if (use_put) {
    const MPI_Aint bytes = (MPI_Aint)(rows + 2) * width * (MPI_Aint)sizeof(double);
    MPI_Win_create(u, bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &u_win);
    MPI_Win_create(next, bytes, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &next_win);
  }
  for (int r = 0; r < rows + 2; ++r) {
    u[r * width] = next[r * width] = boundary(0);
    u[r * width + N + 1] = next[r * width + N + 1] = boundary(N + 1);
  }
  for (int c = 0; c < width; ++c) {
    if (rank == 0) u[c] = next[c] = boundary(c);
    if (rank == size - 1) u[(rows + 1) * width + c] = next[(rows + 1) * width + c] = boundary(c);
  }
  const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;

  double residual = 1;
  int iterations = 0;
  for (; iterations < 20000 && residual > 1e-12; ++iterations) {
    if (use_put) {
      /* Our first row is the upper neighbour's bottom halo, our last the lower neighbour's top halo. */
      MPI_Win_fence(0, u_win);
      const MPI_Aint up_halo = up == MPI_PROC_NULL ? 0 : (MPI_Aint)(rows_of(up, size) + 1) * width;
      MPI_Put(&u[1 * width], width, MPI_DOUBLE, up, up_halo, width, MPI_DOUBLE, u_win);
      MPI_Put(&u[rows * width], width, MPI_DOUBLE, down, 0, width, MPI_DOUBLE, u_win);
      MPI_Win_fence(0, u_win);
    } else {
      MPI_Sendrecv(&u[1 * width], width, MPI_DOUBLE, up, 0, &u[(rows + 1) * width], width, MPI_DOUBLE, down, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Sendrecv(&u[rows * width], width, MPI_DOUBLE, down, 1, &u[0], width, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
    double local = 0;
    for (int r = 1; r <= rows; ++r)
      for (int c = 1; c <= N; ++c) {
        const double v = 0.25 * (u[(r - 1) * width + c] + u[(r + 1) * width + c] + u[r * width + c - 1] +
                                 u[r * width + c + 1]);
        local += (v - u[r * width + c]) * (v - u[r * width + c]);
        next[r * width + c] = v;
      }
    double* t = u;
    u = next;
    next = t;
    MPI_Win w = u_win;
    u_win = next_win;
    next_win = w;
    MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }

  double error = 0, worst;
  for (int r = 1; r <= rows; ++r)
    for (int c = 1; c <= N; ++c) error = fmax(error, fabs(u[r * width + c] - boundary(c)));
  MPI_Reduce(&error, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int failed = 0;
  if (rank == 0) {
    failed = worst > 1e-4;
    printf("jacobi: %dx%d grid on %d ranks, halos by %s, %d iterations, max error %.2e: %s\n", N, N, size,
           use_put ? "MPI_Put" : "MPI_Sendrecv", iterations, worst, failed ? "WRONG" : "ok");
  }
  if (use_put) {
    MPI_Win_free(&u_win);
    MPI_Win_free(&next_win);
  }
  free(u);
  free(next);
  MPI_Finalize();
  return failed;
}
