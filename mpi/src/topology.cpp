#include "topology.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>

#include "comm.hpp"
#include "errors.hpp"

namespace viastack::mpi {

int CartesianTopology::size() const {
  int n = 1;
  for (int d : dims) n *= d;
  return n;
}

std::vector<int> CartesianTopology::coords_of(int rank) const {
  std::vector<int> coords(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    coords[d] = rank % dims[d];
    rank /= dims[d];
  }
  return coords;
}

int CartesianTopology::rank_at(std::span<const int> coords) const {
  int rank = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    int c = coords[d];
    if (c < 0 || c >= dims[d]) {
      if (!periods[d]) return MPI_PROC_NULL;
      c %= dims[d];
      if (c < 0) c += dims[d];
    }
    rank = rank * dims[d] + c;
  }
  return rank;
}

std::pair<int, int> CartesianTopology::shift(int rank, int direction, int disp) const {
  std::vector<int> coords = coords_of(rank);
  const int here = coords[std::size_t(direction)];
  // In 64 bits: a displacement near INT_MAX must not wrap round.
  const auto moved = [&](long long by) {
    const long long c = here + by;
    const int extent = dims[std::size_t(direction)];
    if (c < 0 || c >= extent) {
      if (!periods[std::size_t(direction)]) return MPI_PROC_NULL;
      coords[std::size_t(direction)] = int(((c % extent) + extent) % extent);
    } else {
      coords[std::size_t(direction)] = int(c);
    }
    return rank_at(coords);
  };
  const int source = moved(-static_cast<long long>(disp));
  const int dest = moved(disp);
  return {source, dest};
}

std::span<const int> GraphTopology::neighbors(int rank) const {
  const int first = rank == 0 ? 0 : index[std::size_t(rank) - 1];
  return std::span<const int>(edges).subspan(std::size_t(first), std::size_t(index[std::size_t(rank)] - first));
}

int Topology::kind() const {
  constexpr int kinds[] = {MPI_CART, MPI_GRAPH, MPI_DIST_GRAPH};
  return kinds[shape.index()];
}

namespace {

std::vector<Neighbor> untagged(std::span<const int> ranks) {
  std::vector<Neighbor> neighbors;
  for (int r : ranks) neighbors.push_back({r, 0});
  return neighbors;
}

// A grid's neighbours in block order. Two blocks may go to one rank (a
// periodic dimension of 1 or 2): tag 2d marks what travels up dimension d,
// 2d+1 what travels down, so that the block sent to the lower neighbour lands
// in that rank's upper block and the other way round.
std::vector<Neighbor> grid_neighbors(const CartesianTopology& cart, int rank, bool receiving) {
  std::vector<Neighbor> neighbors;
  for (int d = 0; d < cart.ndims(); ++d) {
    const auto [lower, upper] = cart.shift(rank, d, 1);
    const int up = 2 * d, down = 2 * d + 1;
    neighbors.push_back({lower, receiving ? up : down});
    neighbors.push_back({upper, receiving ? down : up});
  }
  return neighbors;
}

}  // namespace

std::vector<Neighbor> Topology::sources(int rank) const {
  if (const auto* cart = std::get_if<CartesianTopology>(&shape)) return grid_neighbors(*cart, rank, true);
  if (const auto* graph = std::get_if<GraphTopology>(&shape)) return untagged(graph->neighbors(rank));
  return untagged(std::get<DistGraphTopology>(shape).sources);
}

std::vector<Neighbor> Topology::destinations(int rank) const {
  if (const auto* cart = std::get_if<CartesianTopology>(&shape)) return grid_neighbors(*cart, rank, false);
  if (const auto* graph = std::get_if<GraphTopology>(&shape)) return untagged(graph->neighbors(rank));
  return untagged(std::get<DistGraphTopology>(shape).destinations);
}

namespace {

// Whether d^k >= m.
bool power_reaches(long long d, int k, long long m) {
  long long p = 1;
  for (int i = 0; i < k && p < m; ++i) p *= d;
  return p >= m;
}

// Writes k non-increasing factors of m, none above cap, into out, the first
// as small as it can be, then the second, and so on: the most balanced
// choice. divisors: those of a multiple of m, ascending.
bool balanced_factors(int m, int k, int cap, const std::vector<int>& divisors, int* out) {
  if (k == 1) {
    out[0] = m;
    return m <= cap;
  }
  for (int d : divisors) {
    if (d > cap) break;
    // d is the largest of the k factors, so d^k must reach m.
    if (m % d != 0 || !power_reaches(d, k, m)) continue;
    if (balanced_factors(m / d, k - 1, d, divisors, out + 1)) {
      out[0] = d;
      return true;
    }
  }
  return false;
}

}  // namespace

void balance_dims(int nnodes, std::span<int> dims) {
  require(nnodes > 0, MPI_ERR_DIMS, "the number of nodes must be positive");
  long long fixed = 1;
  int free_dims = 0;
  for (int d : dims) {
    require(d >= 0, MPI_ERR_DIMS, "a dimension is negative");
    if (d == 0)
      ++free_dims;
    else
      fixed *= d;
    require(fixed <= nnodes, MPI_ERR_DIMS, "the given dimensions hold more nodes than asked for");
  }
  require(nnodes % fixed == 0, MPI_ERR_DIMS, "the given dimensions do not divide the number of nodes");
  const int rest = int(nnodes / fixed);
  if (free_dims == 0) {
    require(rest == 1, MPI_ERR_DIMS, "the given dimensions do not multiply to the number of nodes");
    return;
  }
  std::vector<int> divisors, large;
  for (int d = 1; d <= rest / d; ++d)
    if (rest % d == 0) {
      divisors.push_back(d);
      if (d != rest / d) large.push_back(rest / d);
    }
  divisors.insert(divisors.end(), large.rbegin(), large.rend());
  std::vector<int> factors(static_cast<std::size_t>(free_dims));
  balanced_factors(rest, free_dims, rest, divisors, factors.data());  // rest, 1, 1, ... always fits
  auto next = factors.begin();
  for (int& d : dims)
    if (d == 0) d = *next++;
}

const Topology& topology_of(const Communicator& comm) {
  require(comm.topology() != nullptr, MPI_ERR_TOPOLOGY, "the communicator has no process topology");
  return *comm.topology();
}

namespace {
template <class Shape>
const Shape& shape_of(const Communicator& comm, const char* why) {
  const Shape* shape = comm.topology() ? std::get_if<Shape>(&comm.topology()->shape) : nullptr;
  require(shape != nullptr, MPI_ERR_TOPOLOGY, why);
  return *shape;
}
}  // namespace

const CartesianTopology& cartesian_of(const Communicator& comm) {
  return shape_of<CartesianTopology>(comm, "the communicator has no Cartesian topology");
}

const GraphTopology& graph_of(const Communicator& comm) {
  return shape_of<GraphTopology>(comm, "the communicator has no graph topology");
}

const DistGraphTopology& dist_graph_of(const Communicator& comm) {
  return shape_of<DistGraphTopology>(comm, "the communicator has no distributed graph topology");
}

}  // namespace viastack::mpi
