// harness.cpp: the driver of exercise stencil (given: do not change).
//
//   viarun -n N stencil [--rows N] [--cols N] [--sweeps N]
//
// Fills the grid, times your stencil_run (stencil.cpp) on every rank (the
// slowest rank's time counts), then rank 0 gathers the grid, runs the same
// sweeps serially and compares every point. Prints the time of both, and the
// first point that differs if one does.
#include <splitc/splitc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "example_options.h"
#include "stencil.hpp"

namespace {

double initial_value(std::size_t i, std::size_t j) { return double((i * 31 + j * 17) % 101) / 100.0; }

// The serial computation the result must match.
std::vector<double> serial_sweeps(const stencil_problem& p) {
  std::vector<double> old(p.rows * p.cols), next;
  for (std::size_t i = 0; i < p.rows; ++i)
    for (std::size_t j = 0; j < p.cols; ++j) old[i * p.cols + j] = initial_value(i, j);
  next = old;
  for (int sweep = 0; sweep < p.sweeps; ++sweep) {
    for (std::size_t i = 1; i + 1 < p.rows; ++i)
      for (std::size_t j = 1; j + 1 < p.cols; ++j)
        next[i * p.cols + j] = (old[(i - 1) * p.cols + j] + old[(i + 1) * p.cols + j] + old[i * p.cols + j - 1] +
                                old[i * p.cols + j + 1]) *
                               0.25;
    std::swap(old, next);
  }
  return old;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run(const stencil_problem& p) {
  const std::size_t procs = std::size_t(PROCS), me = std::size_t(MYPROC);
  if (p.rows % procs != 0) {
    if (me == 0) std::fprintf(stderr, "stencil: %zu rows do not divide among %zu ranks\n", p.rows, procs);
    return EXAMPLE_USAGE;
  }
  const std::size_t block = p.rows / procs * p.cols;
  splitc::spread_array<double> grid(p.rows * p.cols, block), scratch(p.rows * p.cols, block);
  for (std::size_t k = 0; k < block; ++k) grid.local()[k] = initial_value(me * block / p.cols + k / p.cols, k % p.cols);
  splitc::barrier();

  const auto start = std::chrono::steady_clock::now();
  stencil_run(p, grid, scratch);
  const double mine = seconds_since(start);
  splitc::barrier();
  const double slowest = splitc::all_reduce_to_all_max(mine);

  if (me != 0) {
    splitc::barrier();  // rank 0 reads every block
    return EXAMPLE_OK;
  }
  std::vector<double> result(p.rows * p.cols);
  for (std::size_t r = 0; r < procs; ++r) splitc::bulk_read(&result[r * block], grid.base(int(r)), block);
  splitc::barrier();
  const auto serial_start = std::chrono::steady_clock::now();
  const std::vector<double> expected = serial_sweeps(p);
  const double serial = seconds_since(serial_start);
  for (std::size_t k = 0; k < result.size(); ++k) {
    if (std::fabs(result[k] - expected[k]) <= 1e-12) continue;
    const std::size_t i = k / p.cols, j = k % p.cols;
    std::fprintf(stderr,
                 "stencil: point (%zu, %zu) (rank %zu's row %zu) is %.17g, the serial computation gives %.17g\n", i,
                 j, i / (p.rows / procs), i % (p.rows / procs), result[k], expected[k]);
    return EXAMPLE_FAILED;
  }
  std::printf("stencil: %zu ranks, %zu x %zu grid, %d sweeps: parallel_ms=%.1f serial_ms=%.1f; every point checked\n",
              procs, p.rows, p.cols, p.sweeps, slowest * 1e3, serial * 1e3);
  return EXAMPLE_OK;
}

}  // namespace

int main(int argc, char** argv) {
  long rows = 512, cols = 512, sweeps = 100;
  usage_text =
      "usage: viarun -n N stencil [--rows N] [--cols N] [--sweeps N]\n"
      "\n"
      "Exercise stencil: your Jacobi sweeps (stencil.cpp) on a blocked spread array,\n"
      "timed, then checked point by point at rank 0 against a serial computation.\n"
      "\n"
      "  --rows N    grid rows, a multiple of the ranks (3..100000, default 512)\n"
      "  --cols N    grid columns (3..100000, default 512)\n"
      "  --sweeps N  sweeps (0..100000, default 100)\n"
      "  --help      this text\n"
      "\n"
      "Exit status: 0 every point right; 1 a wrong point or a Split-C error; 2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--rows", 3, 100000, &rows) &&
        !number_option(argc, argv, &i, "--cols", 3, 100000, &cols) &&
        !number_option(argc, argv, &i, "--sweeps", 0, 100000, &sweeps))
      usage_error("unknown option", argv[i]);
  }
  try {
    splitc::session session;
    return run({std::size_t(rows), std::size_t(cols), int(sweeps)});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stencil: %s\n", e.what());
    return EXAMPLE_FAILED;
  }
}
