// C entry points: collective operations and user reduction operations.
#include <algorithm>
#include <optional>
#include <vector>

#include "c_api.hpp"
#include "c_api_layout.hpp"
#include "collectives.hpp"
#include "ops.hpp"

using namespace viastack::mpi;

namespace {

void check_root(const Communicator& comm, int root) {
  require(root >= 0 && root < comm.size(), MPI_ERR_ROOT, "root is not a rank of the communicator");
}

}  // namespace

int MPI_Barrier(MPI_Comm comm) {
  return guarded("MPI_Barrier", comm, [&] {
    runtime();
    barrier(communicator_of(comm));
  });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return guarded("MPI_Bcast", comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    Buffer b = checked_buffer(buffer, count, datatype);
    check_root(c, root);
    bcast(buffer, std::size_t(count), *b.type, root, c);
  });
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  return guarded("MPI_Reduce", comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    Buffer b = checked_buffer(sendbuf, count, datatype);
    check_root(c, root);
    const void* input = sendbuf == MPI_IN_PLACE && c.rank() == root ? recvbuf : sendbuf;
    reduce(input, recvbuf, std::size_t(count), *b.type, op_of(op), root, c);
  });
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return guarded("MPI_Allreduce", comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    Buffer b = checked_buffer(recvbuf, count, datatype);
    allreduce(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, std::size_t(count), *b.type, op_of(op), c);
  });
}

namespace {

// reduction: scan or exscan.
int prefix_common(const char* function, decltype(&scan) reduction, const void* sendbuf, void* recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    Buffer b = checked_buffer(recvbuf, count, datatype);
    reduction(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, std::size_t(count), *b.type, op_of(op), c);
  });
}

// MPI_Reduce_scatter's recvcounts, or MPI_Reduce_scatter_block's one block_count for every rank.
int reduce_scatter_common(const char* function, const void* sendbuf, void* recvbuf, const int recvcounts[],
                          std::optional<int> block_count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    require(block_count || recvcounts != nullptr, MPI_ERR_COUNT, "null count array");  // Open MPI 4's class
    const std::vector<int> counts = block_count ? std::vector<int>(std::size_t(c.size()), *block_count)
                                                : std::vector<int>(recvcounts, recvcounts + c.size());
    std::size_t total = 0;
    for (int x : counts) {
      check_count(x);
      total += std::size_t(x);
    }
    require(recvbuf != MPI_IN_PLACE, MPI_ERR_ARG, "MPI_IN_PLACE is given as sendbuf, not recvbuf");
    Buffer b = checked_buffer(recvbuf, counts[std::size_t(c.rank())], datatype);
    check_buffer(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, int(std::min<std::size_t>(total, INT_MAX)), *b.type);
    // In place, the input is the whole of recvbuf: it is read before the result lands at its start.
    reduce_scatter(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, counts, *b.type, op_of(op), c);
  });
}

}  // namespace

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return prefix_common("MPI_Scan", scan, sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return prefix_common("MPI_Exscan", exscan, sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return reduce_scatter_common("MPI_Reduce_scatter_block", sendbuf, recvbuf, nullptr, recvcount, datatype, op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  return reduce_scatter_common("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, std::nullopt, datatype, op, comm);
}

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype, MPI_Op op) {
  return guarded("MPI_Reduce_local", MPI_COMM_WORLD, [&] {
    runtime();
    require(inbuf != MPI_IN_PLACE && inoutbuf != MPI_IN_PLACE, MPI_ERR_BUFFER, "MPI_IN_PLACE is not allowed here");
    checked_buffer(inbuf, count, datatype);
    Buffer b = checked_buffer(inoutbuf, count, datatype);
    const Op& o = op_of(op);
    o.check_applies_to(*b.type);
    if (count > 0) o.apply(inbuf, inoutbuf, std::size_t(count), *b.type);
  });
}

namespace {

// per_rank: the receive arrays of the v variant (read at the root only); nullptr for the uniform one.
int gather_common(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const Datatype* rtype = is_root ? &datatype_of(recvtype) : nullptr;
    RankLayout layout = is_root ? layout_of(c.size(), per_rank, recvcount) : RankLayout(c.size(), recvcount);
    Blocks recv{recvbuf, layout.counts, layout.displs, rtype};
    if (sendbuf == MPI_IN_PLACE && is_root) {
      const std::byte* own = static_cast<const std::byte*>(recvbuf) + layout.displs[std::size_t(root)] * rtype->extent();
      return gatherv(own, std::size_t(layout.counts[std::size_t(root)]), *rtype, recv, root, c);
    }
    Buffer s = checked_buffer(sendbuf, sendcount, sendtype);
    gatherv(sendbuf, std::size_t(sendcount), *s.type, recv, root, c);
  });
}

// per_rank: the send arrays of the v variant (read at the root only); nullptr for the uniform one.
int scatter_common(const char* function, const void* sendbuf, const PerRank* per_rank, int sendcount,
                   MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const Datatype* stype = is_root ? &datatype_of(sendtype) : nullptr;
    RankLayout layout = is_root ? layout_of(c.size(), per_rank, sendcount) : RankLayout(c.size(), sendcount);
    Blocks send{sendbuf, layout.counts, layout.displs, stype};
    if (recvbuf == MPI_IN_PLACE && is_root) {
      // The root's own block stays where it is: scatter it onto itself.
      auto* own = const_cast<std::byte*>(static_cast<const std::byte*>(sendbuf)) +
                  layout.displs[std::size_t(root)] * stype->extent();
      return scatterv(send, own, std::size_t(layout.counts[std::size_t(root)]), *stype, root, c);
    }
    Buffer r = checked_buffer(recvbuf, recvcount, recvtype);
    scatterv(send, recvbuf, std::size_t(recvcount), *r.type, root, c);
  });
}

int allgather_common(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    const Datatype& rtype = datatype_of(recvtype);
    RankLayout layout = layout_of(c.size(), per_rank, recvcount);
    Blocks recv{recvbuf, layout.counts, layout.displs, &rtype};
    if (sendbuf == MPI_IN_PLACE) {
      const std::byte* own = static_cast<const std::byte*>(recvbuf) + layout.displs[std::size_t(c.rank())] * rtype.extent();
      return allgatherv(own, std::size_t(layout.counts[std::size_t(c.rank())]), rtype, recv, c);
    }
    Buffer s = checked_buffer(sendbuf, sendcount, sendtype);
    allgatherv(sendbuf, std::size_t(sendcount), *s.type, recv, c);
  });
}

// In place, the send arrays are not read.
int alltoall_common(const char* function, const void* sendbuf, const PerRank* send_per_rank, int sendcount,
                    MPI_Datatype sendtype, void* recvbuf, const PerRank* recv_per_rank, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    const Datatype& rtype = datatype_of(recvtype);
    RankLayout rlayout = layout_of(c.size(), recv_per_rank, recvcount);
    Blocks recv{recvbuf, rlayout.counts, rlayout.displs, &rtype};
    if (sendbuf == MPI_IN_PLACE) return alltoallv_in_place(recv, c);
    const Datatype& stype = datatype_of(sendtype);
    RankLayout slayout = layout_of(c.size(), send_per_rank, sendcount);
    alltoallv(Blocks{sendbuf, slayout.counts, slayout.displs, &stype}, recv, c);
  });
}

}  // namespace

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather_common("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype, root, comm);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const PerRank per_rank{recvcounts, displs, MPI_ERR_COUNT, MPI_ERR_ARG};
  return gather_common("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, &per_rank, 0, recvtype, root, comm);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter_common("MPI_Scatter", sendbuf, nullptr, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const PerRank per_rank{sendcounts, displs, MPI_ERR_COUNT, MPI_ERR_ARG};
  return scatter_common("MPI_Scatterv", sendbuf, &per_rank, 0, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_common("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype, comm);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  // Open MPI 4 reads NULL counts here (and crashes); they are MPI_ERR_COUNT as in MPI_Gatherv.
  const PerRank per_rank{recvcounts, displs, MPI_ERR_COUNT, MPI_ERR_BUFFER};
  return allgather_common("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, &per_rank, 0, recvtype, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_common("MPI_Alltoall", sendbuf, nullptr, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype,
                         comm);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void* recvbuf,
                  const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  const PerRank send_per_rank{sendcounts, sdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  const PerRank recv_per_rank{recvcounts, rdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  return alltoall_common("MPI_Alltoallv", sendbuf, &send_per_rank, 0, sendtype, recvbuf, &recv_per_rank, 0, recvtype,
                         comm);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm) {
  return guarded("MPI_Alltoallw", comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    const TypedLayout recv(c.size(), recvcounts, rdispls, recvtypes);
    // In place, the send arrays are not read.
    if (sendbuf == MPI_IN_PLACE) return alltoallv_in_place(recv.blocks(recvbuf), c);
    const TypedLayout send(c.size(), sendcounts, sdispls, sendtypes);
    alltoallv(send.blocks(sendbuf), recv.blocks(recvbuf), c);
  });
}

int MPI_Op_create(MPI_User_function* function, int commute, MPI_Op* op) {
  return guarded("MPI_Op_create", MPI_COMM_WORLD, [&] {
    check_pointer(reinterpret_cast<const void*>(function), "null function");
    check_pointer(op, "null output pointer");
    *op = &(new Op(function, commute != 0))->handle;
  });
}

int MPI_Op_free(MPI_Op* op) {
  return guarded("MPI_Op_free", MPI_COMM_WORLD, [&] {
    check_pointer(op, "null handle pointer");
    free_op(op);
  });
}
