// Blocked matrix multiply C = A B with 4 x 4 blocks per processor: on P
// ranks C and A have 4P x 4 blocks and B 4 x 4, the blocks dealt cyclically,
// so that every rank owns 16 blocks of A and of C and computes its 16 blocks
// of C (64 block products, whatever P). Under strong scaling A, B and C have
// 4 x 4 blocks whatever P, and the 16 blocks of C are dealt to the ranks.
// Each rank fetches the next A and B blocks with bulk_get while it
// multiplies the current two.
#include <vector>

#include "suite.hpp"

namespace suite {
namespace {

constexpr std::size_t kBlocks = 4;  // block columns of every matrix; block rows of B, and of A and C on one rank

// Small integers, so that every product and sum is exact in doubles.
double a_entry(std::size_t r, std::size_t c) { return double(int((r * 7 + c * 13) % 11) - 5); }
double b_entry(std::size_t r, std::size_t c) { return double(int((r * 5 + c * 3 + 1) % 9) - 4); }

// c += a * b for n x n row-major blocks.
void multiply_add(double* c, const double* a, const double* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < n; ++k) {
      const double aik = a[i * n + k];
      const double* brow = b + k * n;
      double* crow = c + i * n;
      for (std::size_t j = 0; j < n; ++j) crow[j] += aik * brow[j];
    }
}

}  // namespace

Outcome matrix_multiply(const Problem& problem) {
  const std::size_t n = problem.at().mm_block;  // block side
  const std::size_t block = n * n;
  const std::size_t rows = problem.total(kBlocks);  // block rows of A and C
  // Block (i, j) is element range [(i * kBlocks + j) * block, +block) of its matrix.
  splitc::spread_array<double> a(rows * kBlocks * block, block), b(kBlocks * kBlocks * block, block),
      c(rows * kBlocks * block, block);
  auto first = [&](std::size_t i, std::size_t j) { return (i * kBlocks + j) * block; };
  auto mine = [&](std::size_t i, std::size_t j) { return c.owner(first(i, j)) == MYPROC; };
  auto fill_blocks = [&](splitc::spread_array<double>& m, std::size_t block_rows, auto entry) {
    for (std::size_t i = 0; i < block_rows; ++i)
      for (std::size_t j = 0; j < kBlocks; ++j) {
        if (m.owner(first(i, j)) != MYPROC) continue;
        double* mb = m[first(i, j)].local();
        for (std::size_t r = 0; r < n; ++r)
          for (std::size_t col = 0; col < n; ++col) mb[r * n + col] = entry(i * n + r, j * n + col);
      }
  };
  fill_blocks(a, rows, a_entry);
  fill_blocks(b, kBlocks, b_entry);
  splitc::barrier();

  // Two A blocks and two B blocks: the current pair and the one in flight.
  LocalArray<double> a_buf(2 * block), b_buf(2 * block);
  auto fetch = [&](std::size_t i, std::size_t j, std::size_t k, std::size_t slot) {
    splitc::bulk_get(a_buf.data() + slot * block, a[first(i, k)], block);
    splitc::bulk_get(b_buf.data() + slot * block, b[first(k, j)], block);
  };
  Outcome out;
  out.problem = "A, C " + std::to_string(rows) + "x4, B 4x4 blocks of " + std::to_string(n) + "^2";
  out.seconds = timed([&] {
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < kBlocks; ++j) {
        if (!mine(i, j)) continue;
        double* cb = c[first(i, j)].local();
        fetch(i, j, 0, 0);
        for (std::size_t k = 0; k < kBlocks; ++k) {
          splitc::sync();  // this step's pair is here
          if (k + 1 < kBlocks) fetch(i, j, k + 1, (k + 1) % 2);
          multiply_add(cb, a_buf.data() + (k % 2) * block, b_buf.data() + (k % 2) * block, n);
        }
      }
  });

  // Freivalds: C x = A (B x) for each of our blocks, x of small integers.
  std::string why;
  std::vector<double> x(n), bx(n), expect(n);
  for (std::size_t t = 0; t < n; ++t) x[t] = double(int(t % 5) - 2);
  for (std::size_t i = 0; i < rows && why.empty(); ++i)
    for (std::size_t j = 0; j < kBlocks && why.empty(); ++j) {
      if (!mine(i, j)) continue;
      std::fill(expect.begin(), expect.end(), 0.0);
      for (std::size_t k = 0; k < kBlocks; ++k) {
        for (std::size_t r = 0; r < n; ++r) {
          bx[r] = 0;
          for (std::size_t col = 0; col < n; ++col) bx[r] += b_entry(k * n + r, j * n + col) * x[col];
        }
        for (std::size_t r = 0; r < n; ++r)
          for (std::size_t col = 0; col < n; ++col) expect[r] += a_entry(i * n + r, k * n + col) * bx[col];
      }
      const double* cb = c[first(i, j)].local();
      for (std::size_t r = 0; r < n && why.empty(); ++r) {
        double got = 0;
        for (std::size_t col = 0; col < n; ++col) got += cb[r * n + col] * x[col];
        if (got != expect[r]) {
          why = "block (";
          why += std::to_string(i) + "," + std::to_string(j) + ") of C is wrong";
        }
      }
    }
  out.verified = all_agree(why.empty(), "mm", why);
  return out;
}

}  // namespace suite
