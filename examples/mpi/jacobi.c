/* jacobi: solves Laplace's equation on an N x N grid by Jacobi iteration,
 * rows split across the ranks, halo rows swapped with MPI_Sendrecv and the
 * residual combined with MPI_Allreduce. The boundary holds u = x, whose
 * harmonic extension is u = x everywhere, so the answer can be checked. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 48 };

static double boundary(int col) { return (double)col / (N + 1); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* A band of the interior's N rows is ours, plus a halo row on each side. */
  const int rows = (rank + 1) * N / size - rank * N / size;
  const int width = N + 2;
  double* u = calloc((size_t)(rows + 2) * width, sizeof(double));
  double* next = calloc((size_t)(rows + 2) * width, sizeof(double));
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
    MPI_Sendrecv(&u[1 * width], width, MPI_DOUBLE, up, 0, &u[(rows + 1) * width], width, MPI_DOUBLE, down, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[rows * width], width, MPI_DOUBLE, down, 1, &u[0], width, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
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
    MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }

  double error = 0, worst;
  for (int r = 1; r <= rows; ++r)
    for (int c = 1; c <= N; ++c) error = fmax(error, fabs(u[r * width + c] - boundary(c)));
  MPI_Reduce(&error, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int failed = 0;
  if (rank == 0) {
    failed = worst > 1e-4;
    printf("jacobi: %dx%d grid on %d ranks, %d iterations, max error %.2e: %s\n", N, N, size, iterations, worst,
           failed ? "WRONG" : "ok");
  }
  free(u);
  free(next);
  MPI_Finalize();
  return failed;
}
