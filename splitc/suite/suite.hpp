// The Split-C benchmark suite: what every program shares.
#pragma once

#include <splitc/splitc.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace suite {

enum class Size { test, paper, large };

// Weak: each size is one rank's share, and a job of P ranks solves a problem
// P times as large (ideal: constant time). Strong (--total): each size is the
// whole job's problem, dealt to the ranks (ideal: time / P). One rank solves
// the same problem either way.
enum class Scaling { weak, strong };

// Each program's problem at one size, as one rank solves it.
struct Sizes {
  std::size_t mm_block;       // side of mm's blocks of doubles
  std::size_t ssort_keys;     // ssort_sm and ssort_bulk
  std::size_t rsort_keys;     // rsort_sm and rsort_bulk
  std::size_t cc_vertices;
  std::size_t cg_width, cg_rows;
  std::size_t segment_bytes;  // each rank's AM segment that fits them; 0: the library's default
};

inline const Sizes& sizes(Size size) {
  static constexpr Sizes test{64, 8 << 10, 8 << 10, 4 << 10, 96, 24, 0};
  static constexpr Sizes paper{128, 256 << 10, 256 << 10, 128 << 10, 512, 256, 0};
  // Each program 0.5 s or more on one rank of a 2-core machine (0.8-1.7 s of
  // CPU measured); rsort_bulk, at memory speed on one rank, sets the segment:
  // 192 MiB of keys here and twice that in collective memory.
  static constexpr Sizes large{384, 12 << 20, 48 << 20, 3 << 20, 1024, 1024, std::size_t(1) << 30};
  return size == Size::test ? test : size == Size::paper ? paper : large;
}

struct Problem {
  Size size;
  Scaling scaling;
  const Sizes& at() const { return sizes(size); }
  // The whole job's count of something one rank has `one_rank` of.
  std::size_t total(std::size_t one_rank) const {
    return scaling == Scaling::weak ? one_rank * std::size_t(splitc::procs()) : one_rank;
  }
};

struct Outcome {
  double seconds = 0;  // the slowest rank's time
  bool verified = false;
  std::string problem;  // the whole job's problem, for the table
};

Outcome matrix_multiply(const Problem& problem);
Outcome sample_sort(const Problem& problem, bool bulk);
Outcome radix_sort(const Problem& problem, bool bulk);
Outcome connected_components(const Problem& problem);
Outcome conjugate_gradient(const Problem& problem);

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
