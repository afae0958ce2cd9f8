// The collectives of an intercommunicator (MPI-3.1 5.2.2): data moves from one
// group to the other. In a rooted one the root passes MPI_ROOT, the other
// members of its group MPI_PROC_NULL, and the other group the root's rank in
// it; counts and displacements given per rank name the remote group's ranks,
// except Reduce_scatter's, which scatter over the local group. MPI_IN_PLACE is
// not allowed (MPI_ERR_BUFFER in the reductions, MPI_ERR_ARG in the others,
// Open MPI's classes); Scan and Exscan have no intercommunicator form.
//
// Each runs as a task (collective_task.hpp), blocking or non-blocking alike.
// Data-movement collectives send each block straight from its sender to its
// receiver across the groups. Reductions and Bcast reduce or broadcast within
// a group over the intercommunicator's local intracommunicator, with one
// message between the groups' leaders (rank 0 of each); Barrier is a local
// barrier, an empty message between the leaders and a local broadcast.
//
// Called by the C entry points (c_api_coll.cpp) with their checked arguments;
// request: nullptr for the blocking call, else where the MPI_I… call's goes.
#pragma once

#include <memory>
#include <vector>

#include "c_api_layout.hpp"

namespace viastack::mpi {

class Communicator;
class Datatype;
class Op;

// Throws MPI_ERR_ROOT unless root is MPI_ROOT, MPI_PROC_NULL or a rank of the remote group.
void check_intercomm_root(const Communicator& inter, int root);

void intercomm_barrier(const Communicator& inter, MPI_Request* request);
// Buffers are checked where they are significant (not at MPI_PROC_NULL, nor the send buffer at MPI_ROOT).
void intercomm_bcast(void* buf, int count, MPI_Datatype datatype, int root, const Communicator& inter,
                     MPI_Request* request);
void intercomm_reduce(const void* send, void* recv, int count, MPI_Datatype datatype, const Op& op, int root,
                      const Communicator& inter, MPI_Request* request);
void intercomm_allreduce(const void* send, void* recv, int count, const Datatype& type, const Op& op,
                         const Communicator& inter, MPI_Request* request);
// counts: one per rank of the local group, whose sum the send buffers hold.
void intercomm_reduce_scatter(const void* send, void* recv, std::shared_ptr<const std::vector<int>> counts,
                              const Datatype& type, const Op& op, const Communicator& inter, MPI_Request* request);
// per_rank: the v variant's arrays (nullptr: recvcount, sendcount for every rank).
void intercomm_gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                      const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, int root,
                      const Communicator& inter, MPI_Request* request);
void intercomm_scatter(const void* sendbuf, const PerRank* per_rank, int sendcount, MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, const Communicator& inter,
                       MPI_Request* request);
void intercomm_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, const Communicator& inter,
                         MPI_Request* request);
void intercomm_alltoall(const void* sendbuf, const PerRank* send_per_rank, int sendcount, MPI_Datatype sendtype,
                        void* recvbuf, const PerRank* recv_per_rank, int recvcount, MPI_Datatype recvtype,
                        const Communicator& inter, MPI_Request* request);
void intercomm_alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                         const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                         const MPI_Datatype recvtypes[], const Communicator& inter, MPI_Request* request);

}  // namespace viastack::mpi
