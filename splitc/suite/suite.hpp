// The Split-C benchmark suite: what every program shares.
#pragma once

#include <splitc/splitc.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace suite {

// Problem sizes are per processor (weak scaling), at both sizes: a job of
// P ranks solves a problem P times as large as a job of one rank.
enum class Size { test, paper };

struct Outcome {
  double seconds = 0;  // the slowest rank's time
  bool verified = false;
  std::string problem;  // the whole job's problem, for the table
};

Outcome matrix_multiply(Size size);
Outcome sample_sort(Size size, bool bulk);
Outcome radix_sort(Size size, bool bulk);
Outcome connected_components(Size size);
Outcome conjugate_gradient(Size size);

// Deterministic pseudo-random numbers (splitmix64): the same stream on
// every rank for the same seed.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// The time of `body` on the slowest rank, between barriers.
template <class Body>
double timed(Body&& body) {
  splitc::barrier();
  const auto start = std::chrono::steady_clock::now();
  body();
  splitc::sync();
  splitc::barrier();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return splitc::all_reduce_to_all(took.count(), splitc::reduce_op::max);
}

// True on every rank if `ok` holds on every rank; a failing rank says why.
inline bool all_agree(bool ok, const char* bench, const std::string& why) {
  if (!ok) std::fprintf(stderr, "%s: rank %d: %s\n", bench, MYPROC, why.c_str());
  return splitc::all_reduce_to_all(ok ? 1 : 0, splitc::reduce_op::min) == 1;
}

// An array in this rank's global memory (the source of bulk stores is then
// already registered with the NIC).
template <class T>
class LocalArray {
 public:
  explicit LocalArray(std::size_t n) : n_(n), p_(splitc::allocate<T>(n)), data_(p_.local()) {}
  ~LocalArray() { splitc::deallocate(p_); }
  LocalArray(const LocalArray&) = delete;
  LocalArray& operator=(const LocalArray&) = delete;
  T* data() const { return data_; }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) const { return data_[i]; }
  std::span<T> span() const { return {data_, n_}; }

 private:
  std::size_t n_;
  splitc::global_ptr<T> p_;
  T* data_;  // p_.local(), kept: element access stays a plain load
};

// Keys moved one message each (small) or one bulk store per destination run.
template <class T>
void send_run(bool bulk, splitc::global_ptr<T> dst, const T* src, std::size_t count) {
  if (bulk) {
    splitc::bulk_store(dst, src, count);
  } else {
    for (std::size_t i = 0; i < count; ++i) splitc::store(dst + std::ptrdiff_t(i), src[i]);
  }
}

// Step `step` (0 .. procs - 1) of an all-to-all from rank `me`: the next rank
// first, this one last. Every rank then sends to a different one at each
// step; in index order, all would first send to rank 0, which would be busy
// storing while the others only sent, and then wait on it.
inline std::size_t staggered(std::size_t step, std::size_t me, std::size_t procs) { return (me + 1 + step) % procs; }

// `count` items dealt to the ranks as evenly as possible: rank r's share
// starts at first(r).
struct Even {
  std::size_t total, ranks;
  std::size_t first(std::size_t r) const { return r * (total / ranks) + std::min(r, total % ranks); }
  std::size_t count(std::size_t r) const { return first(r + 1) - first(r); }
  int owner(std::size_t i) const {
    const std::size_t big = total / ranks + 1, split = (total % ranks) * big;
    return int(i < split ? i / big : (total % ranks) + (i - split) / (total / ranks));
  }
};

}  // namespace suite
