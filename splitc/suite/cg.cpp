// Conjugate gradient on A x = b, A the 5-point Laplacian of an nx x ny grid
// plus a small diagonal shift (sparse, symmetric positive definite), b = 1.
// The grid has a fixed width and a band of rows per rank, so its height grows
// with the ranks (weak scaling), or a fixed height dealt to the ranks in
// bands (strong scaling, at most one rank per row); each iteration stores our edge rows of p into the
// neighbours' ghost rows (bulk_store, store_sync) and takes two dot products
// (all_reduce_to_all).
#include <cmath>
#include <exception>
#include <vector>

#include "suite.hpp"

namespace suite {
namespace {

constexpr double kShift = 0.01;
constexpr double kTolerance = 1e-8;  // on ||r|| / ||b||
constexpr int kMaxIterations = 5000;

class Grid {
 public:
  Grid(std::size_t nx, std::size_t ny)
      : nx_(nx), rows_{ny, std::size_t(PROCS)}, me_(std::size_t(MYPROC)), height_(rows_.count(me_)),
        // [ghost row above | our rows | ghost row below], the same size on every rank
        halo_(splitc::all_allocate<double>((rows_.count(0) + 2) * nx)) {
    std::fill_n(halo_, (rows_.count(0) + 2) * nx, 0.0);
    splitc::barrier();
  }
  // As a spread array's: the barrier throws if a rank is gone, unless an
  // exception is already on its way (a second one would terminate us).
  ~Grid() noexcept(false) {
    if (std::uncaught_exceptions() == 0) splitc::barrier();
    splitc::all_deallocate(halo_);
  }
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;

  std::size_t points() const { return height_ * nx_; }
  // Our rows of the vector that y = A v reads, with room for the ghosts.
  double* own() const { return halo_ + nx_; }

  // y = A v, v in own() (ghosts filled by exchange()).
  void apply(double* y) {
    exchange();
    for (std::size_t i = 0; i < height_; ++i)
      for (std::size_t j = 0; j < nx_; ++j) {
        const double* v = own() + i * nx_ + j;
        double sum = (4 + kShift) * v[0] - v[-std::ptrdiff_t(nx_)] - v[nx_];
        if (j > 0) sum -= v[-1];
        if (j + 1 < nx_) sum -= v[1];
        y[i * nx_ + j] = sum;
      }
  }

 private:
  // Our first row becomes the ghost below of the rank above, our last row
  // the ghost above of the rank below.
  void exchange() {
    const std::size_t procs = std::size_t(PROCS);
    std::size_t expect = 0;
    if (me_ > 0) {
      splitc::bulk_store(splitc::on(int(me_ - 1), halo_) + std::ptrdiff_t((rows_.count(me_ - 1) + 1) * nx_), own(), nx_);
      expect += nx_;
    }
    if (me_ + 1 < procs) {
      splitc::bulk_store(splitc::on(int(me_ + 1), halo_), own() + (height_ - 1) * nx_, nx_);
      expect += nx_;
    }
    splitc::store_sync(expect * sizeof(double));
    splitc::sync();
  }

  std::size_t nx_;
  Even rows_;
  std::size_t me_, height_;
  double* halo_;
};

double dot(const std::vector<double>& a, const double* b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return splitc::all_reduce_to_all(sum, splitc::reduce_op::sum);
}

}  // namespace

Outcome conjugate_gradient(const Problem& problem) {
  const std::size_t width = problem.at().cg_width;
  const std::size_t height = problem.total(problem.at().cg_rows);
  Grid grid(width, height);
  const std::size_t n = grid.points();
  const std::vector<double> b(n, 1.0);
  std::vector<double> x(n, 0.0), r = b, ap(n);
  double* p = grid.own();
  std::copy(r.begin(), r.end(), p);
  const double b_norm = std::sqrt(dot(b, b.data()));
  int iterations = 0;

  Outcome out;
  out.seconds = timed([&] {
    double rr = dot(r, r.data());
    for (; iterations < kMaxIterations && std::sqrt(rr) > kTolerance * b_norm; ++iterations) {
      grid.apply(ap.data());
      const double alpha = rr / dot(ap, p);
      for (std::size_t i = 0; i < n; ++i) {
        x[i] += alpha * p[i];
        r[i] -= alpha * ap[i];
      }
      const double rr_next = dot(r, r.data());
      const double beta = rr_next / rr;
      rr = rr_next;
      for (std::size_t i = 0; i < n; ++i) p[i] = r[i] + beta * p[i];
    }
  });

  // The true residual of the answer, computed afresh.
  std::copy(x.begin(), x.end(), p);
  grid.apply(ap.data());
  for (std::size_t i = 0; i < n; ++i) r[i] = b[i] - ap[i];
  const double residual = std::sqrt(dot(r, r.data())) / b_norm;
  std::string why;
  if (iterations >= kMaxIterations || !(residual <= 10 * kTolerance)) {
    why = "residual ";
    why += std::to_string(residual) + " after " + std::to_string(iterations) + " iterations";
  }
  out.problem = std::to_string(width) + "x" + std::to_string(height) + " grid, " + std::to_string(iterations) +
                " iterations";
  out.verified = all_agree(why.empty(), "cg", why);
  return out;
}

}  // namespace suite
