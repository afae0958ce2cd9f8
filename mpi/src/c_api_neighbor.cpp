// C entry points: the neighbourhood collectives (MPI-3.1 7.6) over a
// communicator's process topology. Block i of the receive buffer comes from
// the i-th source and block i of the send buffer goes to the i-th destination
// (Topology::sources/destinations); an MPI_PROC_NULL neighbour of a grid's
// edge leaves its block alone.
#include <vector>

#include "c_api.hpp"
#include "c_api_layout.hpp"
#include "collectives.hpp"
#include "topology.hpp"

using namespace viastack::mpi;

namespace {

struct Neighborhood {
  std::vector<Neighbor> sources, destinations;
  int indegree() const { return int(sources.size()); }
  int outdegree() const { return int(destinations.size()); }
};

Neighborhood neighborhood_of(const Communicator& comm, const void* sendbuf, const void* recvbuf) {
  const Topology& topology = topology_of(comm);
  require(sendbuf != MPI_IN_PLACE && recvbuf != MPI_IN_PLACE, MPI_ERR_ARG,
          "MPI_IN_PLACE is not allowed in a neighbourhood collective");
  return {topology.sources(comm.rank()), topology.destinations(comm.rank())};
}

// per_neighbor: MPI_Neighbor_allgatherv's receive arrays; nullptr for the uniform recvcount.
int allgather_common(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const PerRank* per_neighbor, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    const Neighborhood n = neighborhood_of(c, sendbuf, recvbuf);
    const Buffer send = checked_buffer(sendbuf, sendcount, sendtype);
    const Datatype& rtype = datatype_of(recvtype);
    const RankLayout recv = layout_of(n.indegree(), per_neighbor, recvcount);
    // The one send buffer goes to every destination.
    const std::vector<int> same_count(std::size_t(n.outdegree()), sendcount), same_place(std::size_t(n.outdegree()), 0);
    neighbor_exchange(Blocks{sendbuf, same_count, same_place, send.type}, n.destinations,
                      Blocks{recvbuf, recv.counts, recv.displs, &rtype}, n.sources, c);
  });
}

// send_per_neighbor, recv_per_neighbor: MPI_Neighbor_alltoallv's arrays; nullptr for the uniform counts.
int alltoall_common(const char* function, const void* sendbuf, const PerRank* send_per_neighbor, int sendcount,
                    MPI_Datatype sendtype, void* recvbuf, const PerRank* recv_per_neighbor, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    const Neighborhood n = neighborhood_of(c, sendbuf, recvbuf);
    const Datatype& stype = datatype_of(sendtype);
    const Datatype& rtype = datatype_of(recvtype);
    const RankLayout send = layout_of(n.outdegree(), send_per_neighbor, sendcount);
    const RankLayout recv = layout_of(n.indegree(), recv_per_neighbor, recvcount);
    neighbor_exchange(Blocks{sendbuf, send.counts, send.displs, &stype}, n.destinations,
                      Blocks{recvbuf, recv.counts, recv.displs, &rtype}, n.sources, c);
  });
}

}  // namespace

int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_common("MPI_Neighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount,
                          recvtype, comm);
}

int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  const PerRank per_neighbor{recvcounts, displs, MPI_ERR_ARG, MPI_ERR_ARG};
  return allgather_common("MPI_Neighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, &per_neighbor, 0,
                          recvtype, comm);
}

int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_common("MPI_Neighbor_alltoall", sendbuf, nullptr, sendcount, sendtype, recvbuf, nullptr, recvcount,
                         recvtype, comm);
}

int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                           void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm) {
  const PerRank send_per_neighbor{sendcounts, sdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  const PerRank recv_per_neighbor{recvcounts, rdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  return alltoall_common("MPI_Neighbor_alltoallv", sendbuf, &send_per_neighbor, 0, sendtype, recvbuf,
                         &recv_per_neighbor, 0, recvtype, comm);
}

int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return guarded("MPI_Neighbor_alltoallw", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    const Neighborhood n = neighborhood_of(c, sendbuf, recvbuf);
    const TypedLayout send(n.outdegree(), sendcounts, sdispls, sendtypes);
    const TypedLayout recv(n.indegree(), recvcounts, rdispls, recvtypes);
    neighbor_exchange(send.blocks(sendbuf), n.destinations, recv.blocks(recvbuf), n.sources, c);
  });
}
