// C entry points: process topologies (MPI-3.1 chapter 7). Error classes where
// the standard names none follow Open MPI 4: an off-grid coordinate of a
// non-periodic dimension, and a grid larger than the group, are MPI_ERR_ARG.
// An output array too short for the answer is MPI_ERR_ARG.
#include <algorithm>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "c_api.hpp"
#include "collectives.hpp"
#include "topology.hpp"

using namespace viastack::mpi;

namespace {

// A communicator of `members` (ranks of parent, in order) carrying `topology`;
// MPI_COMM_NULL on the ranks that are not members.
MPI_Comm made_from(const Communicator& parent, std::uint32_t context, const std::vector<int>& members,
                   Topology topology) {
  if (std::find(members.begin(), members.end(), parent.rank()) == members.end()) return MPI_COMM_NULL;
  std::vector<int> world_ranks;
  for (int r : members) world_ranks.push_back(parent.world_rank(r));
  auto group = std::make_shared<Group>(std::move(world_ranks), runtime().world_rank());
  auto comm = std::make_unique<Communicator>(std::move(group), context, parent.errhandler());
  comm->set_topology(std::make_shared<const Topology>(std::move(topology)));
  return comm.release()->handle;
}

std::vector<int> first_ranks(int n) {
  std::vector<int> ranks(static_cast<std::size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

// The grid MPI_Cart_create and MPI_Cart_map are given, checked against a group of group_size.
CartesianTopology checked_grid(int ndims, const int dims[], const int periods[], int group_size) {
  require(ndims >= 0, MPI_ERR_DIMS, "negative number of dimensions");
  require(ndims == 0 || (dims != nullptr && periods != nullptr), MPI_ERR_ARG, "null dims or periods array");
  CartesianTopology cart;
  long long nodes = 1;
  for (int d = 0; d < ndims; ++d) {
    require(dims[d] > 0, MPI_ERR_DIMS, "a dimension of the grid is not positive");
    nodes *= dims[d];
    require(nodes <= group_size, MPI_ERR_ARG, "the grid has more nodes than the communicator has processes");
    cart.dims.push_back(dims[d]);
    cart.periods.push_back(periods[d] != 0);
  }
  return cart;
}

void check_output_length(int given, int needed) {
  require(given >= needed, MPI_ERR_ARG, "an output array is shorter than the answer");
}

void check_rank_in(int rank, int size) {
  require(rank >= 0 && rank < size, MPI_ERR_RANK, "rank not in the topology");
}

// A graph's description: node counts, a non-decreasing index, edges that name nodes.
GraphTopology checked_graph(int nnodes, const int index[], const int edges[], int group_size) {
  require(nnodes >= 0 && nnodes <= group_size, MPI_ERR_ARG, "the number of nodes is not 0 to the communicator's size");
  require(nnodes == 0 || index != nullptr, MPI_ERR_ARG, "null index array");
  GraphTopology graph;
  for (int i = 0; i < nnodes; ++i) {
    require(index[i] >= (i == 0 ? 0 : index[i - 1]), MPI_ERR_ARG, "the index array decreases");
    graph.index.push_back(index[i]);
  }
  const int nedges = nnodes == 0 ? 0 : index[nnodes - 1];
  require(nedges == 0 || edges != nullptr, MPI_ERR_ARG, "null edges array");
  for (int e = 0; e < nedges; ++e) {
    require(edges[e] >= 0 && edges[e] < nnodes, MPI_ERR_RANK, "an edge leads to no node of the graph");
    graph.edges.push_back(edges[e]);
  }
  return graph;
}

// Whether weights is an array of weights, not MPI_UNWEIGHTED or MPI_WEIGHTS_EMPTY.
bool weights_given(const int weights[]) {
  return weights != nullptr && weights != MPI_UNWEIGHTED && weights != MPI_WEIGHTS_EMPTY;
}

// Neighbour ranks of a distributed graph: ranks of the group, each with a non-negative weight.
void check_neighbors(int degree, const int ranks[], const int weights[], int group_size) {
  require(degree >= 0, MPI_ERR_ARG, "negative degree");
  require(degree == 0 || ranks != nullptr, MPI_ERR_ARG, "null neighbour array");
  require(degree == 0 || weights == MPI_UNWEIGHTED || weights_given(weights), MPI_ERR_ARG,
          "no weights for the edges (MPI_UNWEIGHTED says there are none)");
  for (int i = 0; i < degree; ++i) {
    check_rank_in(ranks[i], group_size);
    require(!weights_given(weights) || weights[i] >= 0, MPI_ERR_ARG, "negative edge weight");
  }
}

std::vector<int> weights_or_zeros(int degree, const int weights[]) {
  if (!weights_given(weights)) return std::vector<int>(std::size_t(degree), 0);
  return std::vector<int>(weights, weights + degree);
}

}  // namespace

int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  return guarded("MPI_Dims_create", MPI_COMM_WORLD, [&] {
    require(ndims >= 0, MPI_ERR_DIMS, "negative number of dimensions");
    require(ndims == 0 || dims != nullptr, MPI_ERR_ARG, "null dims array");
    balance_dims(nnodes, std::span<int>(dims, std::size_t(ndims)));
  });
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* comm_cart) {
  return guarded("MPI_Cart_create", comm_old, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm_old);
    check_pointer(comm_cart, "null output pointer");
    (void)reorder;  // ranks are kept: the standard allows it
    CartesianTopology cart = checked_grid(ndims, dims, periods, c.size());
    const std::uint32_t context = rt.agree_on_context(c);
    const int nodes = cart.size();
    *comm_cart = made_from(c, context, first_ranks(nodes), Topology{std::move(cart)});
  });
}

int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank) {
  return guarded("MPI_Cart_map", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(newrank, "null output pointer");
    const int nodes = checked_grid(ndims, dims, periods, c.size()).size();
    *newrank = c.rank() < nodes ? c.rank() : MPI_UNDEFINED;
  });
}

int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  return guarded("MPI_Cartdim_get", comm, [&] {
    runtime();
    const CartesianTopology& cart = cartesian_of(communicator_of(comm));
    check_pointer(ndims, "null output pointer");
    *ndims = cart.ndims();
  });
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  return guarded("MPI_Cart_get", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    const CartesianTopology& cart = cartesian_of(c);
    check_output_length(maxdims, cart.ndims());
    require(cart.ndims() == 0 || (dims && periods && coords), MPI_ERR_ARG, "null output array");
    const std::vector<int> mine = cart.coords_of(c.rank());
    for (int d = 0; d < cart.ndims(); ++d) {
      dims[d] = cart.dims[std::size_t(d)];
      periods[d] = cart.periods[std::size_t(d)] ? 1 : 0;
      coords[d] = mine[std::size_t(d)];
    }
  });
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  return guarded("MPI_Cart_rank", comm, [&] {
    runtime();
    const CartesianTopology& cart = cartesian_of(communicator_of(comm));
    check_pointer(rank, "null output pointer");
    require(cart.ndims() == 0 || coords != nullptr, MPI_ERR_ARG, "null coords array");
    const int r = cart.rank_at(std::span<const int>(coords, std::size_t(cart.ndims())));
    require(r != MPI_PROC_NULL, MPI_ERR_ARG, "a coordinate of a non-periodic dimension is off the grid");
    *rank = r;
  });
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  return guarded("MPI_Cart_coords", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    const CartesianTopology& cart = cartesian_of(c);
    check_rank_in(rank, c.size());
    check_output_length(maxdims, cart.ndims());
    require(cart.ndims() == 0 || coords != nullptr, MPI_ERR_ARG, "null coords array");
    std::ranges::copy(cart.coords_of(rank), coords);
  });
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  return guarded("MPI_Cart_shift", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    const CartesianTopology& cart = cartesian_of(c);
    require(direction >= 0 && direction < cart.ndims(), MPI_ERR_DIMS, "direction is not a dimension of the grid");
    check_pointer(rank_source, "null output pointer");
    check_pointer(rank_dest, "null output pointer");
    std::tie(*rank_source, *rank_dest) = cart.shift(c.rank(), direction, disp);
  });
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  return guarded("MPI_Cart_sub", comm, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm);
    const CartesianTopology& cart = cartesian_of(c);
    check_pointer(newcomm, "null output pointer");
    require(cart.ndims() == 0 || remain_dims != nullptr, MPI_ERR_ARG, "null remain_dims array");
    CartesianTopology sub;
    for (int d = 0; d < cart.ndims(); ++d)
      if (remain_dims[d]) {
        sub.dims.push_back(cart.dims[std::size_t(d)]);
        sub.periods.push_back(cart.periods[std::size_t(d)]);
      }
    // My sub-grid: the ranks whose dropped coordinates are mine; row-major
    // numbering keeps them in the order of their kept coordinates.
    const std::vector<int> mine = cart.coords_of(c.rank());
    std::vector<int> members;
    for (int r = 0; r < c.size(); ++r) {
      const std::vector<int> theirs = cart.coords_of(r);
      bool same = true;
      for (int d = 0; d < cart.ndims(); ++d) same = same && (remain_dims[d] || theirs[std::size_t(d)] == mine[std::size_t(d)]);
      if (same) members.push_back(r);
    }
    const std::uint32_t context = rt.agree_on_context(c);
    *newcomm = made_from(c, context, members, Topology{std::move(sub)});
  });
}

int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder,
                     MPI_Comm* comm_graph) {
  return guarded("MPI_Graph_create", comm_old, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm_old);
    check_pointer(comm_graph, "null output pointer");
    (void)reorder;  // ranks are kept: the standard allows it
    GraphTopology graph = checked_graph(nnodes, index, edges, c.size());
    const std::uint32_t context = rt.agree_on_context(c);
    *comm_graph = made_from(c, context, first_ranks(nnodes), Topology{std::move(graph)});
  });
}

int MPI_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[], int* newrank) {
  return guarded("MPI_Graph_map", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(newrank, "null output pointer");
    checked_graph(nnodes, index, edges, c.size());
    *newrank = c.rank() < nnodes ? c.rank() : MPI_UNDEFINED;
  });
}

int MPI_Graphdims_get(MPI_Comm comm, int* nnodes, int* nedges) {
  return guarded("MPI_Graphdims_get", comm, [&] {
    runtime();
    const GraphTopology& graph = graph_of(communicator_of(comm));
    check_pointer(nnodes, "null output pointer");
    check_pointer(nedges, "null output pointer");
    *nnodes = graph.nnodes();
    *nedges = int(graph.edges.size());
  });
}

int MPI_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[]) {
  return guarded("MPI_Graph_get", comm, [&] {
    runtime();
    const GraphTopology& graph = graph_of(communicator_of(comm));
    check_output_length(maxindex, graph.nnodes());
    check_output_length(maxedges, int(graph.edges.size()));
    require(graph.index.empty() || index != nullptr, MPI_ERR_ARG, "null index array");
    require(graph.edges.empty() || edges != nullptr, MPI_ERR_ARG, "null edges array");
    std::ranges::copy(graph.index, index);
    std::ranges::copy(graph.edges, edges);
  });
}

int MPI_Graph_neighbors_count(MPI_Comm comm, int rank, int* nneighbors) {
  return guarded("MPI_Graph_neighbors_count", comm, [&] {
    runtime();
    const GraphTopology& graph = graph_of(communicator_of(comm));
    check_rank_in(rank, graph.nnodes());
    check_pointer(nneighbors, "null output pointer");
    *nneighbors = int(graph.neighbors(rank).size());
  });
}

int MPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]) {
  return guarded("MPI_Graph_neighbors", comm, [&] {
    runtime();
    const GraphTopology& graph = graph_of(communicator_of(comm));
    check_rank_in(rank, graph.nnodes());
    const std::span<const int> mine = graph.neighbors(rank);
    check_output_length(maxneighbors, int(mine.size()));
    require(mine.empty() || neighbors != nullptr, MPI_ERR_ARG, "null output array");
    std::ranges::copy(mine, neighbors);
  });
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* comm_dist_graph) {
  return guarded("MPI_Dist_graph_create_adjacent", comm_old, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm_old);
    check_pointer(comm_dist_graph, "null output pointer");
    (void)info;     // no hints are used
    (void)reorder;  // ranks are kept: the standard allows it
    check_neighbors(indegree, sources, sourceweights, c.size());
    check_neighbors(outdegree, destinations, destweights, c.size());
    DistGraphTopology graph;
    graph.sources.assign(sources, sources + indegree);
    graph.destinations.assign(destinations, destinations + outdegree);
    graph.source_weights = weights_or_zeros(indegree, sourceweights);
    graph.destination_weights = weights_or_zeros(outdegree, destweights);
    graph.weighted = sourceweights != MPI_UNWEIGHTED;
    const std::uint32_t context = rt.agree_on_context(c);
    *comm_dist_graph = made_from(c, context, first_ranks(c.size()), Topology{std::move(graph)});
  });
}

// Any rank may state any edge: every rank learns all of them (an allgather)
// and keeps its own, in the order of the stating ranks and their lists.
int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm* comm_dist_graph) {
  return guarded("MPI_Dist_graph_create", comm_old, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm_old);
    check_pointer(comm_dist_graph, "null output pointer");
    (void)info;     // no hints are used
    (void)reorder;  // ranks are kept: the standard allows it
    require(n >= 0, MPI_ERR_ARG, "negative number of source nodes");
    require(n == 0 || (sources != nullptr && degrees != nullptr), MPI_ERR_ARG, "null sources or degrees array");
    std::vector<int> stated;  // (source, destination, weight) triples
    for (int i = 0, at = 0; i < n; ++i) {
      check_rank_in(sources[i], c.size());
      const int* these_weights = weights_given(weights) ? weights + at : weights;
      check_neighbors(degrees[i], destinations + at, these_weights, c.size());
      for (int k = 0; k < degrees[i]; ++k, ++at) {
        require(stated.size() + 3 <= std::size_t(INT_MAX), MPI_ERR_COUNT, "too many edges");
        stated.insert(stated.end(), {sources[i], destinations[at], weights_given(weights) ? weights[at] : 0});
      }
    }
    // Everyone learns how many each states, then the edges.
    const Datatype& ints = datatype_of(MPI_INT);
    const int mine = int(stated.size());
    std::vector<int> counts(std::size_t(c.size())), displs(std::size_t(c.size()));
    const std::vector<int> one_each(std::size_t(c.size()), 1), in_rank_order = first_ranks(c.size());
    allgatherv(&mine, 1, ints, Blocks{counts.data(), one_each, in_rank_order, &ints}, c);
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      require(total + std::size_t(counts[r]) <= std::size_t(INT_MAX), MPI_ERR_COUNT, "too many edges in all");
      displs[r] = int(total);
      total += std::size_t(counts[r]);
    }
    std::vector<int> all(total);
    allgatherv(stated.data(), stated.size(), ints, Blocks{all.data(), counts, displs, &ints}, c);
    DistGraphTopology graph;
    graph.weighted = weights != MPI_UNWEIGHTED;
    for (std::size_t e = 0; e < total; e += 3) {
      const int from = all[e], to = all[e + 1], weight = all[e + 2];
      if (from == c.rank()) {
        graph.destinations.push_back(to);
        graph.destination_weights.push_back(weight);
      }
      if (to == c.rank()) {
        graph.sources.push_back(from);
        graph.source_weights.push_back(weight);
      }
    }
    const std::uint32_t context = rt.agree_on_context(c);
    *comm_dist_graph = made_from(c, context, first_ranks(c.size()), Topology{std::move(graph)});
  });
}

int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted) {
  return guarded("MPI_Dist_graph_neighbors_count", comm, [&] {
    runtime();
    const DistGraphTopology& graph = dist_graph_of(communicator_of(comm));
    check_pointer(indegree, "null output pointer");
    check_pointer(outdegree, "null output pointer");
    check_pointer(weighted, "null output pointer");
    *indegree = int(graph.sources.size());
    *outdegree = int(graph.destinations.size());
    *weighted = graph.weighted ? 1 : 0;
  });
}

int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree,
                             int destinations[], int destweights[]) {
  return guarded("MPI_Dist_graph_neighbors", comm, [&] {
    runtime();
    const DistGraphTopology& graph = dist_graph_of(communicator_of(comm));
    check_output_length(maxindegree, int(graph.sources.size()));
    check_output_length(maxoutdegree, int(graph.destinations.size()));
    require(graph.sources.empty() || sources != nullptr, MPI_ERR_ARG, "null sources array");
    require(graph.destinations.empty() || destinations != nullptr, MPI_ERR_ARG, "null destinations array");
    std::ranges::copy(graph.sources, sources);
    std::ranges::copy(graph.destinations, destinations);
    // Weights are written only for a weighted graph, and where the caller gave an array.
    const auto usable = [](const int* w) { return w != nullptr && w != MPI_UNWEIGHTED && w != MPI_WEIGHTS_EMPTY; };
    if (graph.weighted && usable(sourceweights)) std::ranges::copy(graph.source_weights, sourceweights);
    if (graph.weighted && usable(destweights)) std::ranges::copy(graph.destination_weights, destweights);
  });
}

int MPI_Topo_test(MPI_Comm comm, int* status) {
  return guarded("MPI_Topo_test", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(status, "null output pointer");
    *status = c.topology() ? c.topology()->kind() : MPI_UNDEFINED;
  });
}
