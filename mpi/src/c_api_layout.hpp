// Shared by the C entry points of collectives: a checked buffer argument, and
// the per-rank (or per-neighbour) counts, displacements and datatypes of the
// v and w variants.
#pragma once

#include <climits>
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
    require(given.displs != nullptr, given.null_displs_error, "null displacement array");
    require(given.counts != nullptr, given.null_counts_error, "null count array");
    counts.assign(given.counts, given.counts + n);
    displs.assign(given.displs, given.displs + n);
    for (int x : counts) check_count(x);
  }
};

// The v variants' layout (per_rank given), or the uniform one of `count`.
inline RankLayout layout_of(int n, const PerRank* per_rank, int count) {
  return per_rank ? RankLayout(n, *per_rank) : RankLayout(n, count);
}

// The w variants' arrays: a count, a displacement in bytes and a datatype per
// block. Displacement: int (MPI_Alltoallw) or MPI_Aint (MPI_Neighbor_alltoallw),
// which must fit an int here.
struct TypedLayout {
  std::vector<int> counts, displs;
  std::vector<const Datatype*> types;

  template <class Displacement>
  TypedLayout(int n, const int* given_counts, const Displacement* given_displs, const MPI_Datatype* given_types) {
    require(given_counts != nullptr && given_displs != nullptr && given_types != nullptr, MPI_ERR_ARG,
            "null count, displacement or datatype array");
    for (int i = 0; i < n; ++i) {
      check_count(given_counts[i]);
      if constexpr (sizeof(Displacement) > sizeof(int))
        require(given_displs[i] >= INT_MIN && given_displs[i] <= INT_MAX, MPI_ERR_ARG,
                "a displacement of 2 GiB or more is not supported");
      counts.push_back(given_counts[i]);
      displs.push_back(int(given_displs[i]));
      types.push_back(&datatype_of(given_types[i]));
    }
  }
  Blocks blocks(const void* buf) const { return Blocks{buf, counts, displs, nullptr, types}; }
};

}  // namespace viastack::mpi
