// Shared by the C entry points of collectives: a checked buffer argument, and
// the per-rank (or per-neighbour) counts, displacements and datatypes of the
// v and w variants.
#pragma once

#include <algorithm>
#include <climits>
#include <memory>
#include <span>
#include <vector>

#include "c_api.hpp"
#include "collectives.hpp"

namespace viastack::mpi {

struct Buffer {
  const void* buf;
  int count;
  const Datatype* type;
};

inline Buffer checked_buffer(const void* buf, int count, MPI_Datatype datatype) {
  check_count(count);
  const Datatype& type = datatype_of(datatype);
  check_buffer(buf == MPI_IN_PLACE ? nullptr : buf, buf == MPI_IN_PLACE ? 0 : count, type);
  return Buffer{buf, count, &type};
}

// The count and displacement arrays a v variant was given, and the error
// class for each when it is NULL where significant (Open MPI 4's classes).
struct PerRank {
  const int* counts;
  const int* displs;
  int null_counts_error, null_displs_error;
};

// Per-rank counts and displacements; uniform ones for the non-v variants.
struct RankLayout {
  std::vector<int> counts, displs;
  RankLayout(int n, int count) : counts(std::size_t(n), count), displs(std::size_t(n)) {
    for (int r = 0; r < n; ++r) displs[std::size_t(r)] = r * count;
  }
  RankLayout(int n, const PerRank& given) {
    check(n, given);
    counts.assign(given.counts, given.counts + n);
    displs.assign(given.displs, given.displs + n);
  }
  static void check(int n, const PerRank& given) {
    require(given.displs != nullptr, given.null_displs_error, "null displacement array");
    require(given.counts != nullptr, given.null_counts_error, "null count array");
    for (int r = 0; r < n; ++r) check_count(given.counts[r]);
  }
};

// The v variants' layout (per_rank given), or the uniform one of `count`.
inline RankLayout layout_of(int n, const PerRank* per_rank, int count) {
  return per_rank ? RankLayout(n, *per_rank) : RankLayout(n, count);
}

// The per-rank counts and displacements a collective call's algorithm reads,
// and what keeps them alive while a non-blocking call runs. Without an
// allocation where it can (a small blocking collective is otherwise mostly
// malloc and free): a blocking call reads the v variants' arrays where the
// user gave them, and a uniform layout on up to kMaxRanks ranks in the
// caller's `scratch` (no thread-local look-up, no reference count: each costs
// a small call as much as the collective itself on shared memory); a
// larger one, and the non-blocking calls', is the thread's last (n, count),
// shared by its calls.
struct LayoutRef {
  std::span<const int> counts, displs;
  std::shared_ptr<const void> keep;  // null when nothing needs keeping
};
struct UniformScratch {
  static constexpr int kMaxRanks = 64;
  int counts[kMaxRanks], displs[kMaxRanks];
};
// The allocating cases, out of line so that the blocking ones inline into their callers.
inline LayoutRef kept_layout(int n, const PerRank* per_rank, int count) {
  if (per_rank) {
    // One allocation, counts then displacements (a vector each took three).
    RankLayout::check(n, *per_rank);
    const auto size = std::size_t(n);
    std::shared_ptr<int[]> copied = std::make_shared_for_overwrite<int[]>(2 * size);
    std::copy_n(per_rank->counts, size, copied.get());
    std::copy_n(per_rank->displs, size, copied.get() + size);
    return {{copied.get(), size}, {copied.get() + size, size}, copied};
  }
  thread_local std::shared_ptr<const RankLayout> last_uniform;
  if (!last_uniform || last_uniform->counts.size() != std::size_t(n) || last_uniform->counts[0] != count)
    last_uniform = std::make_shared<const RankLayout>(n, count);
  return {last_uniform->counts, last_uniform->displs, last_uniform};
}
[[gnu::always_inline]] inline LayoutRef call_layout(int n, const PerRank* per_rank, int count, bool nonblocking,
                                                    UniformScratch& scratch) {
  if (per_rank && !nonblocking) {
    RankLayout::check(n, *per_rank);
    return {{per_rank->counts, std::size_t(n)}, {per_rank->displs, std::size_t(n)}, nullptr};
  }
  if (!per_rank && !nonblocking && n <= UniformScratch::kMaxRanks) {
    for (int r = 0; r < n; ++r) {
      scratch.counts[r] = count;
      scratch.displs[r] = r * count;
    }
    return {{scratch.counts, std::size_t(n)}, {scratch.displs, std::size_t(n)}, nullptr};
  }
  return kept_layout(n, per_rank, count);
}

// The w variants' arrays: a count, a displacement in bytes and a datatype per
// block. Displacement: int (MPI_Alltoallw) or MPI_Aint (MPI_Neighbor_alltoallw),
// which must fit an int here. check_typed checks them and looks the datatypes
// up into `types` (n of them).
template <class Displacement>
void check_typed(int n, const int* counts, const Displacement* displs, const MPI_Datatype* given_types,
                 const Datatype** types) {
  require(counts != nullptr && displs != nullptr && given_types != nullptr, MPI_ERR_ARG,
          "null count, displacement or datatype array");
  for (int i = 0; i < n; ++i) {
    check_count(counts[i]);
    if constexpr (sizeof(Displacement) > sizeof(int))
      require(displs[i] >= INT_MIN && displs[i] <= INT_MAX, MPI_ERR_ARG,
              "a displacement of 2 GiB or more is not supported");
    types[i] = &datatype_of(given_types[i]);
  }
}

// The arrays copied, for a call that outlives its arguments (non-blocking) or
// whose displacements are not ints: in one allocation, where three vectors
// took a small ialltoallw three times as many mallocs.
class TypedLayout {
 public:
  template <class Displacement>
  TypedLayout(int n, const int* given_counts, const Displacement* given_displs, const MPI_Datatype* given_types)
      : n_(std::size_t(std::max(n, 0))), storage_(new std::byte[n_ * (sizeof(const Datatype*) + 2 * sizeof(int))]) {
    check_typed(n, given_counts, given_displs, given_types, types());
    std::copy_n(given_counts, n_, counts());
    std::copy_n(given_displs, n_, displs());  // each fits an int (checked)
  }
  Blocks blocks(const void* buf) const {
    return Blocks{buf, {counts(), n_}, {displs(), n_}, nullptr, {types(), n_}};
  }

 private:
  // The datatypes first, for their alignment, then the counts and the displacements.
  const Datatype** types() const { return reinterpret_cast<const Datatype**>(storage_.get()); }
  int* counts() const { return reinterpret_cast<int*>(storage_.get() + n_ * sizeof(const Datatype*)); }
  int* displs() const { return counts() + n_; }

  std::size_t n_;
  std::unique_ptr<std::byte[]> storage_;
};

// A blocking call's arrays on up to kMaxRanks ranks, without an allocation (a
// small alltoallw on shared memory was mostly malloc and free): the counts
// and displacements read where the caller gave them, the datatypes looked up
// here.
struct TypedScratch {
  static constexpr int kMaxRanks = 64;
  const Datatype* types[kMaxRanks];

  Blocks blocks(const void* buf, int n, const int* counts, const int* displs, const MPI_Datatype* given_types) {
    check_typed(n, counts, displs, given_types, types);
    const auto size = std::size_t(n);
    return Blocks{buf, {counts, size}, {displs, size}, nullptr, {types, size}};
  }
};

}  // namespace viastack::mpi
