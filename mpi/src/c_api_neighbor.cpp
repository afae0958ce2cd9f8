// C entry points: the neighbourhood collectives (MPI-3.1 7.6) over a
// communicator's process topology. Block i of the receive buffer comes from
// the i-th source and block i of the send buffer goes to the i-th destination
// (Topology::sources/destinations); an MPI_PROC_NULL neighbour of a grid's
// edge leaves its block alone.
#include <memory>
#include <optional>
#include <vector>

#include "c_api.hpp"
#include "c_api_layout.hpp"
#include "collectives.hpp"
#include "nonblocking_collectives.hpp"
#include "topology.hpp"

using namespace viastack::mpi;

namespace {

// The neighbours and the per-neighbour layouts of one call, kept together
// for a non-blocking call (MPI_Ineighbor_…) until it completes.
struct Neighborhood {
  std::vector<Neighbor> sources, destinations;
  std::optional<RankLayout> send, recv;
  std::optional<TypedLayout> typed_send, typed_recv;
  std::vector<int> same_count, same_place;  // allgather: the one send buffer, to every destination
  int indegree() const { return int(sources.size()); }
  int outdegree() const { return int(destinations.size()); }
};

std::shared_ptr<Neighborhood> neighborhood_of(const Communicator& comm, const void* sendbuf, const void* recvbuf) {
  const Topology& topology = topology_of(comm);
  require(sendbuf != MPI_IN_PLACE && recvbuf != MPI_IN_PLACE, MPI_ERR_ARG,
          "MPI_IN_PLACE is not allowed in a neighbourhood collective");
  auto n = std::make_shared<Neighborhood>();
  n->sources = topology.sources(comm.rank());
  n->destinations = topology.destinations(comm.rank());
  return n;
}

void check_request(MPI_Request* request, bool nonblocking) {
  if (nonblocking) check_pointer(request, "null request pointer");
}

// per_neighbor: MPI_Neighbor_allgatherv's receive arrays; nullptr for the uniform recvcount.
// request: nullptr for the blocking call.
int allgather_common(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const PerRank* per_neighbor, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    auto n = neighborhood_of(c, sendbuf, recvbuf);
    const Buffer send = checked_buffer(sendbuf, sendcount, sendtype);
    const Datatype& rtype = datatype_of(recvtype);
    n->recv = layout_of(n->indegree(), per_neighbor, recvcount);
    n->same_count.assign(std::size_t(n->outdegree()), sendcount);
    n->same_place.assign(std::size_t(n->outdegree()), 0);
    launch(c,
           tasks::neighbor_exchange(Call(c), Blocks{sendbuf, n->same_count, n->same_place, send.type}, n->destinations,
                                    Blocks{recvbuf, n->recv->counts, n->recv->displs, &rtype}, n->sources),
           request, n);
  });
}

// send_per_neighbor, recv_per_neighbor: MPI_Neighbor_alltoallv's arrays; nullptr for the uniform counts.
int alltoall_common(const char* function, const void* sendbuf, const PerRank* send_per_neighbor, int sendcount,
                    MPI_Datatype sendtype, void* recvbuf, const PerRank* recv_per_neighbor, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    auto n = neighborhood_of(c, sendbuf, recvbuf);
    const Datatype& stype = datatype_of(sendtype);
    const Datatype& rtype = datatype_of(recvtype);
    n->send = layout_of(n->outdegree(), send_per_neighbor, sendcount);
    n->recv = layout_of(n->indegree(), recv_per_neighbor, recvcount);
    launch(c,
           tasks::neighbor_exchange(Call(c), Blocks{sendbuf, n->send->counts, n->send->displs, &stype},
                                    n->destinations, Blocks{recvbuf, n->recv->counts, n->recv->displs, &rtype},
                                    n->sources),
           request, n);
  });
}

int alltoallw_common(const char* function, const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                     const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const MPI_Aint rdispls[],
                     const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    auto n = neighborhood_of(c, sendbuf, recvbuf);
    n->typed_send.emplace(n->outdegree(), sendcounts, sdispls, sendtypes);
    n->typed_recv.emplace(n->indegree(), recvcounts, rdispls, recvtypes);
    launch(c,
           tasks::neighbor_exchange(Call(c), n->typed_send->blocks(sendbuf), n->destinations,
                                    n->typed_recv->blocks(recvbuf), n->sources),
           request, n);
  });
}

}  // namespace

int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_common("MPI_Neighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount,
                          recvtype, comm, nullptr, false);
}

int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgather_common("MPI_Ineighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount,
                          recvtype, comm, request, true);
}

int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  const PerRank per_neighbor{recvcounts, displs, MPI_ERR_ARG, MPI_ERR_ARG};
  return allgather_common("MPI_Neighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, &per_neighbor, 0,
                          recvtype, comm, nullptr, false);
}

int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request* request) {
  const PerRank per_neighbor{recvcounts, displs, MPI_ERR_ARG, MPI_ERR_ARG};
  return allgather_common("MPI_Ineighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, &per_neighbor, 0,
                          recvtype, comm, request, true);
}

int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_common("MPI_Neighbor_alltoall", sendbuf, nullptr, sendcount, sendtype, recvbuf, nullptr, recvcount,
                         recvtype, comm, nullptr, false);
}

int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall_common("MPI_Ineighbor_alltoall", sendbuf, nullptr, sendcount, sendtype, recvbuf, nullptr, recvcount,
                         recvtype, comm, request, true);
}

int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                           void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm) {
  const PerRank send_per_neighbor{sendcounts, sdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  const PerRank recv_per_neighbor{recvcounts, rdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  return alltoall_common("MPI_Neighbor_alltoallv", sendbuf, &send_per_neighbor, 0, sendtype, recvbuf,
                         &recv_per_neighbor, 0, recvtype, comm, nullptr, false);
}

int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request* request) {
  const PerRank send_per_neighbor{sendcounts, sdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  const PerRank recv_per_neighbor{recvcounts, rdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  return alltoall_common("MPI_Ineighbor_alltoallv", sendbuf, &send_per_neighbor, 0, sendtype, recvbuf,
                         &recv_per_neighbor, 0, recvtype, comm, request, true);
}

int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw_common("MPI_Neighbor_alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                          rdispls, recvtypes, comm, nullptr, false);
}

int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request* request) {
  return alltoallw_common("MPI_Ineighbor_alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                          rdispls, recvtypes, comm, request, true);
}
