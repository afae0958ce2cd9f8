// solution/stencil.cpp: a reference solution of exercise stencil.
//
// Each rank sweeps its own rows. The rows just outside its block (its halo:
// the last row of the rank above, the first of the rank below) it fetches at
// the start of every sweep with one bulk_get each, both in flight at once and
// waited for with one sync(): two messages of `cols` doubles per sweep, not
// one message per point. A barrier ends each sweep, so that no rank reads a
// neighbour's rows of a sweep before they are written, nor overwrites its own
// while a neighbour may still be reading them. The two arrays swap roles
// every sweep; after an odd number of sweeps the result is copied back.
#include <cstring>
#include <utility>
#include <vector>

#include "stencil.hpp"

void stencil_run(const stencil_problem& p, splitc::spread_array<double>& grid,
                 splitc::spread_array<double>& scratch) {
  const std::size_t procs = std::size_t(PROCS), me = std::size_t(MYPROC);
  const std::size_t my_rows = p.rows / procs, cols = p.cols, first_row = me * my_rows;
  std::vector<double> above(cols), below(cols);
  splitc::spread_array<double>*from = &grid, *to = &scratch;
  for (int sweep = 0; sweep < p.sweeps; ++sweep) {
    if (me > 0) splitc::bulk_get(above.data(), from->base(int(me - 1)) + std::ptrdiff_t((my_rows - 1) * cols), cols);
    if (me + 1 < procs) splitc::bulk_get(below.data(), from->base(int(me + 1)), cols);
    splitc::sync();

    const double* old = from->local().data();
    double* next = to->local().data();
    for (std::size_t r = 0; r < my_rows; ++r) {
      const std::size_t i = first_row + r;
      double* out = next + r * cols;
      const double* row = old + r * cols;
      if (i == 0 || i == p.rows - 1) {  // the boundary stays
        std::memcpy(out, row, cols * sizeof(double));
        continue;
      }
      const double* up = r > 0 ? row - cols : above.data();
      const double* down = r + 1 < my_rows ? row + cols : below.data();
      out[0] = row[0];
      for (std::size_t j = 1; j + 1 < cols; ++j) out[j] = (up[j] + down[j] + row[j - 1] + row[j + 1]) * 0.25;
      out[cols - 1] = row[cols - 1];
    }
    splitc::barrier();
    std::swap(from, to);
  }
  if (from != &grid) std::memcpy(grid.local().data(), from->local().data(), my_rows * cols * sizeof(double));
}
