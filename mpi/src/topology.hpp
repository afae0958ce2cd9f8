// Process topologies (MPI-3.1 chapter 7): Cartesian grids, graphs and
// distributed graphs, kept with a communicator (Communicator::topology) and
// shared by its duplicates. Ranks are never reordered: a process keeps its
// rank in the communicator the topology was made from.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "collectives.hpp"

namespace viastack::mpi {

class Communicator;

// Ranks are numbered row-major: the last dimension varies fastest (7.5.1).
struct CartesianTopology {
  std::vector<int> dims;
  std::vector<bool> periods;

  int ndims() const { return int(dims.size()); }
  // How many processes the grid holds (1 for zero dimensions).
  int size() const;
  std::vector<int> coords_of(int rank) const;
  // A periodic coordinate off the grid wraps round; a non-periodic one gives MPI_PROC_NULL.
  int rank_at(std::span<const int> coords) const;
  // MPI_Cart_shift: the ranks disp before and disp after `rank` along `direction`.
  std::pair<int, int> shift(int rank, int direction, int disp) const;
};

// MPI_Graph_create's description: node i's neighbours are edges[index[i-1] .. index[i]).
struct GraphTopology {
  std::vector<int> index, edges;

  int nnodes() const { return int(index.size()); }
  std::span<const int> neighbors(int rank) const;
};

// One process's edges of a distributed graph; weights are 0 when it is unweighted.
struct DistGraphTopology {
  std::vector<int> sources, source_weights, destinations, destination_weights;
  bool weighted = false;
};

struct Topology {
  std::variant<CartesianTopology, GraphTopology, DistGraphTopology> shape;

  // MPI_CART, MPI_GRAPH or MPI_DIST_GRAPH.
  int kind() const;
  // Where a neighbourhood collective of `rank` receives its blocks from and
  // sends them to, in block order: by dimension, the negative direction first,
  // for a grid; the listed neighbours for a graph.
  std::vector<Neighbor> sources(int rank) const;
  std::vector<Neighbor> destinations(int rank) const;
};

// MPI_Dims_create: fills the zero entries of dims so that the product of all
// is nnodes, as close to each other as possible and in non-increasing order.
// Throws MPI_ERR_DIMS when that cannot be done.
void balance_dims(int nnodes, std::span<int> dims);

// The communicator's topology of that kind; throws MPI_ERR_TOPOLOGY if it has another or none.
const Topology& topology_of(const Communicator& comm);
const CartesianTopology& cartesian_of(const Communicator& comm);
const GraphTopology& graph_of(const Communicator& comm);
const DistGraphTopology& dist_graph_of(const Communicator& comm);

}  // namespace viastack::mpi
