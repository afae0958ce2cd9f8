// stencil.hpp: the interface of exercise stencil (given: do not change).
//
// A 2-D Jacobi stencil in Split-C. The grid has `rows` x `cols` doubles,
// row-major, in a blocked spread array: rank r holds rows r*R .. r*R+R-1,
// R = rows / PROCS (rows is a multiple of PROCS), as one block of R*cols
// elements (grid.local() on rank r; grid.base(q) points to rank q's).
//
// One sweep replaces every interior point by the average of its four
// neighbours as they were before the sweep:
//
//   new[i][j] = (old[i-1][j] + old[i+1][j] + old[i][j-1] + old[i][j+1]) * 0.25
//
// for 0 < i < rows-1 and 0 < j < cols-1, in that order of additions (the
// checker compares with a serial computation that adds the same way). The
// boundary (the first and last row and column) never changes.
#pragma once

#include <splitc/splitc.hpp>

#include <cstddef>

struct stencil_problem {
  std::size_t rows, cols;
  int sweeps;
};

// Collective: every rank calls it with the same problem. Runs `sweeps`
// sweeps over `grid`, whose elements the harness has filled, and leaves the
// result in `grid`, every rank's block complete when it returns on every
// rank. `scratch` is a second array of the same shape, yours to use.
void stencil_run(const stencil_problem& problem, splitc::spread_array<double>& grid,
                 splitc::spread_array<double>& scratch);
