// C entry points: collective operations, blocking and non-blocking (MPI_I…,
// the same checks and the same algorithm, started and left to the progress
// engine), and user reduction operations.
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "c_api.hpp"
#include "c_api_layout.hpp"
#include "collectives.hpp"
#include "intercomm_collectives.hpp"
#include "node_collectives.hpp"
#include "nonblocking_collectives.hpp"
#include "ops.hpp"

using namespace viastack::mpi;

namespace {

void check_root(const Communicator& comm, int root) {
  require(root >= 0 && root < comm.size(), MPI_ERR_ROOT, "root is not a rank of the communicator");
}

// A non-blocking call's request pointer must be there; a blocking call has none.
void check_request(MPI_Request* request, bool nonblocking) {
  if (nonblocking) check_pointer(request, "null request pointer");
}

// request: nullptr for the blocking call, else the MPI_I… call's.
int barrier_common(const char* function, MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter()) return intercomm_barrier(c, request);
    if (!nonblocking && node_collectives::barrier(c)) return;
    launch(c, tasks::barrier(Call(c)), request);
  });
}

int bcast_common(const char* function, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                 MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter()) return intercomm_bcast(buffer, count, datatype, root, c, request);
    Buffer b = checked_buffer(buffer, count, datatype);
    check_root(c, root);
    if (!nonblocking && node_collectives::bcast(buffer, std::size_t(count), *b.type, root, c)) return;
    launch(c, tasks::bcast(Call(c), buffer, std::size_t(count), *b.type, root), request);
  });
}

int reduce_common(const char* function, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, int root, MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter()) return intercomm_reduce(sendbuf, recvbuf, count, datatype, op_of(op), root, c, request);
    Buffer b = checked_buffer(sendbuf, count, datatype);
    check_root(c, root);
    const void* input = sendbuf == MPI_IN_PLACE && c.rank() == root ? recvbuf : sendbuf;
    if (!nonblocking && node_collectives::reduce(input, recvbuf, std::size_t(count), *b.type, op_of(op), root, c)) return;
    launch(c, tasks::reduce(Call(c), input, recvbuf, std::size_t(count), *b.type, op_of(op), root), request);
  });
}

// reduction: tasks::allreduce, scan or exscan.
int allreduce_common(const char* function, decltype(&tasks::allreduce) reduction, const void* sendbuf, void* recvbuf,
                     int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request,
                     bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    Buffer b = checked_buffer(recvbuf, count, datatype);
    if (c.is_inter()) {
      require(reduction == tasks::allreduce, MPI_ERR_COMM, "MPI_Scan and MPI_Exscan take an intracommunicator");
      return intercomm_allreduce(sendbuf, recvbuf, count, *b.type, op_of(op), c, request);
    }
    const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if (!nonblocking) {
      const std::size_t n = std::size_t(count);
      const bool done = reduction == &tasks::allreduce
                            ? node_collectives::allreduce(input, recvbuf, n, *b.type, op_of(op), c)
                            : node_collectives::scan(input, recvbuf, n, *b.type, op_of(op), reduction == &tasks::scan, c);
      if (done) return;
    }
    launch(c, reduction(Call(c), input, recvbuf, std::size_t(count), *b.type, op_of(op)), request);
  });
}

// MPI_Reduce_scatter's recvcounts, or MPI_Reduce_scatter_block's one block_count for every rank.
int reduce_scatter_common(const char* function, const void* sendbuf, void* recvbuf, const int recvcounts[],
                          std::optional<int> block_count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                          MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    require(block_count || recvcounts != nullptr, MPI_ERR_COUNT, "null count array");  // Open MPI 4's class
    auto counts = std::make_shared<const std::vector<int>>(
        block_count ? std::vector<int>(std::size_t(c.size()), *block_count)
                    : std::vector<int>(recvcounts, recvcounts + c.size()));
    std::size_t total = 0;
    for (int x : *counts) {
      check_count(x);
      total += std::size_t(x);
    }
    require(recvbuf != MPI_IN_PLACE, MPI_ERR_ARG, "MPI_IN_PLACE is given as sendbuf, not recvbuf");
    Buffer b = checked_buffer(recvbuf, (*counts)[std::size_t(c.rank())], datatype);
    check_buffer(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, int(std::min<std::size_t>(total, INT_MAX)), *b.type);
    if (c.is_inter()) return intercomm_reduce_scatter(sendbuf, recvbuf, counts, *b.type, op_of(op), c, request);
    // In place, the input is the whole of recvbuf: it is read before the result lands at its start.
    const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if (!nonblocking && node_collectives::reduce_scatter(input, recvbuf, *counts, *b.type, op_of(op), c)) return;
    launch(c, tasks::reduce_scatter(Call(c), input, recvbuf, *counts, *b.type, op_of(op)), request, counts);
  });
}

}  // namespace

int MPI_Barrier(MPI_Comm comm) { return barrier_common("MPI_Barrier", comm, nullptr, false); }

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) { return barrier_common("MPI_Ibarrier", comm, request, true); }

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bcast_common("MPI_Bcast", buffer, count, datatype, root, comm, nullptr, false);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return bcast_common("MPI_Ibcast", buffer, count, datatype, root, comm, request, true);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  return reduce_common("MPI_Reduce", sendbuf, recvbuf, count, datatype, op, root, comm, nullptr, false);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  return reduce_common("MPI_Ireduce", sendbuf, recvbuf, count, datatype, op, root, comm, request, true);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce_common("MPI_Allreduce", tasks::allreduce, sendbuf, recvbuf, count, datatype, op, comm, nullptr,
                          false);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return allreduce_common("MPI_Iallreduce", tasks::allreduce, sendbuf, recvbuf, count, datatype, op, comm, request,
                          true);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce_common("MPI_Scan", tasks::scan, sendbuf, recvbuf, count, datatype, op, comm, nullptr, false);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  return allreduce_common("MPI_Iscan", tasks::scan, sendbuf, recvbuf, count, datatype, op, comm, request, true);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce_common("MPI_Exscan", tasks::exscan, sendbuf, recvbuf, count, datatype, op, comm, nullptr, false);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request* request) {
  return allreduce_common("MPI_Iexscan", tasks::exscan, sendbuf, recvbuf, count, datatype, op, comm, request, true);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return reduce_scatter_common("MPI_Reduce_scatter_block", sendbuf, recvbuf, nullptr, recvcount, datatype, op, comm,
                               nullptr, false);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter_common("MPI_Ireduce_scatter_block", sendbuf, recvbuf, nullptr, recvcount, datatype, op, comm,
                               request, true);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  return reduce_scatter_common("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, std::nullopt, datatype, op, comm,
                               nullptr, false);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter_common("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, std::nullopt, datatype, op, comm,
                               request, true);
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
                  const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                  MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter())
      return intercomm_gather(sendbuf, sendcount, sendtype, recvbuf, per_rank, recvcount, recvtype, root, c, request);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const Datatype* rtype = is_root ? &datatype_of(recvtype) : nullptr;
    UniformScratch scratch;
    const LayoutRef layout = call_layout(c.size(), is_root ? per_rank : nullptr, recvcount, nonblocking, scratch);
    Blocks recv{recvbuf, layout.counts, layout.displs, rtype};
    if (sendbuf == MPI_IN_PLACE && is_root) {
      const std::byte* own = static_cast<const std::byte*>(recvbuf) + layout.displs[std::size_t(root)] * rtype->extent();
      if (!nonblocking && node_collectives::gather(own, std::size_t(layout.counts[std::size_t(root)]), *rtype, recv, root, c))
        return;
      return launch(c, tasks::gatherv(Call(c), own, std::size_t(layout.counts[std::size_t(root)]), *rtype, recv, root),
                    request, layout.keep);
    }
    Buffer s = checked_buffer(sendbuf, sendcount, sendtype);
    if (!nonblocking && node_collectives::gather(sendbuf, std::size_t(sendcount), *s.type, recv, root, c)) return;
    launch(c, tasks::gatherv(Call(c), sendbuf, std::size_t(sendcount), *s.type, recv, root), request, layout.keep);
  });
}

// per_rank: the send arrays of the v variant (read at the root only); nullptr for the uniform one.
int scatter_common(const char* function, const void* sendbuf, const PerRank* per_rank, int sendcount,
                   MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter())
      return intercomm_scatter(sendbuf, per_rank, sendcount, sendtype, recvbuf, recvcount, recvtype, root, c, request);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const Datatype* stype = is_root ? &datatype_of(sendtype) : nullptr;
    UniformScratch scratch;
    const LayoutRef layout = call_layout(c.size(), is_root ? per_rank : nullptr, sendcount, nonblocking, scratch);
    Blocks send{sendbuf, layout.counts, layout.displs, stype};
    if (recvbuf == MPI_IN_PLACE && is_root) {
      // The root's own block stays where it is: scatter it onto itself.
      auto* own = const_cast<std::byte*>(static_cast<const std::byte*>(sendbuf)) +
                  layout.displs[std::size_t(root)] * stype->extent();
      if (!nonblocking && node_collectives::scatter(send, own, std::size_t(layout.counts[std::size_t(root)]), *stype, root, c))
        return;
      return launch(c, tasks::scatterv(Call(c), send, own, std::size_t(layout.counts[std::size_t(root)]), *stype, root),
                    request, layout.keep);
    }
    Buffer r = checked_buffer(recvbuf, recvcount, recvtype);
    if (!nonblocking && node_collectives::scatter(send, recvbuf, std::size_t(recvcount), *r.type, root, c)) return;
    launch(c, tasks::scatterv(Call(c), send, recvbuf, std::size_t(recvcount), *r.type, root), request, layout.keep);
  });
}

int allgather_common(const char* function, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter())
      return intercomm_allgather(sendbuf, sendcount, sendtype, recvbuf, per_rank, recvcount, recvtype, c, request);
    const Datatype& rtype = datatype_of(recvtype);
    UniformScratch scratch;
    const LayoutRef layout = call_layout(c.size(), per_rank, recvcount, nonblocking, scratch);
    Blocks recv{recvbuf, layout.counts, layout.displs, &rtype};
    if (sendbuf == MPI_IN_PLACE) {
      const std::byte* own =
          static_cast<const std::byte*>(recvbuf) + layout.displs[std::size_t(c.rank())] * rtype.extent();
      const std::size_t own_count = std::size_t(layout.counts[std::size_t(c.rank())]);
      if (!nonblocking && node_collectives::allgatherv(own, own_count, rtype, recv, c)) return;
      return launch(c, tasks::allgatherv(Call(c), own, std::size_t(layout.counts[std::size_t(c.rank())]), rtype, recv),
                    request, layout.keep);
    }
    Buffer s = checked_buffer(sendbuf, sendcount, sendtype);
    if (!nonblocking && node_collectives::allgatherv(sendbuf, std::size_t(sendcount), *s.type, recv, c)) return;
    launch(c, tasks::allgatherv(Call(c), sendbuf, std::size_t(sendcount), *s.type, recv), request, layout.keep);
  });
}

// In place, the send arrays are not read.
int alltoall_common(const char* function, const void* sendbuf, const PerRank* send_per_rank, int sendcount,
                    MPI_Datatype sendtype, void* recvbuf, const PerRank* recv_per_rank, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter())
      return intercomm_alltoall(sendbuf, send_per_rank, sendcount, sendtype, recvbuf, recv_per_rank, recvcount,
                                recvtype, c, request);
    const Datatype& rtype = datatype_of(recvtype);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const Datatype* stype = in_place ? nullptr : &datatype_of(sendtype);
    UniformScratch send_scratch, recv_scratch;
    const LayoutRef send_layout =
        in_place ? LayoutRef{} : call_layout(c.size(), send_per_rank, sendcount, nonblocking, send_scratch);
    const LayoutRef recv_layout = call_layout(c.size(), recv_per_rank, recvcount, nonblocking, recv_scratch);
    Blocks recv{recvbuf, recv_layout.counts, recv_layout.displs, &rtype};
    if (in_place) return launch(c, tasks::alltoallv_in_place(Call(c), recv), request, recv_layout.keep);
    Blocks send{sendbuf, send_layout.counts, send_layout.displs, stype};
    const bool uniform = send_per_rank == nullptr && recv_per_rank == nullptr;
    if (!nonblocking && uniform && node_collectives::alltoall(send, recv, c)) return;
    if (!nonblocking && !uniform && node_collectives::alltoallv(send, recv, c)) return;
    using Keeps = std::pair<std::shared_ptr<const void>, std::shared_ptr<const void>>;
    const auto layouts = nonblocking ? std::make_shared<const Keeps>(send_layout.keep, recv_layout.keep) : nullptr;
    launch(c, tasks::alltoallv(Call(c), send, recv), request, layouts);
  });
}

struct AlltoallwLayouts {
  std::optional<TypedLayout> send;
  TypedLayout recv;
};

int alltoallw_common(const char* function, const void* sendbuf, const int sendcounts[], const int sdispls[],
                     const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                     const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request* request, bool nonblocking) {
  return guarded(function, comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    check_request(request, nonblocking);
    if (c.is_inter())
      return intercomm_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, c,
                                 request);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    if (!nonblocking && !in_place && c.size() <= TypedScratch::kMaxRanks) {
      TypedScratch send_types, recv_types;
      const Blocks send = send_types.blocks(sendbuf, c.size(), sendcounts, sdispls, sendtypes);
      const Blocks recv = recv_types.blocks(recvbuf, c.size(), recvcounts, rdispls, recvtypes);
      if (!node_collectives::alltoallv(send, recv, c)) launch(c, tasks::alltoallv(Call(c), send, recv), nullptr);
      return;
    }
    // In place, the send arrays are not read.
    std::optional<TypedLayout> send;
    if (!in_place) send.emplace(c.size(), sendcounts, sdispls, sendtypes);
    TypedLayout recv(c.size(), recvcounts, rdispls, recvtypes);
    if (!nonblocking && !in_place && node_collectives::alltoallv(send->blocks(sendbuf), recv.blocks(recvbuf), c))
      return;
    auto layouts = std::make_shared<const AlltoallwLayouts>(AlltoallwLayouts{std::move(send), std::move(recv)});
    if (in_place) return launch(c, tasks::alltoallv_in_place(Call(c), layouts->recv.blocks(recvbuf)), request, layouts);
    launch(c, tasks::alltoallv(Call(c), layouts->send->blocks(sendbuf), layouts->recv.blocks(recvbuf)), request,
           layouts);
  });
}

}  // namespace

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather_common("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype, root, comm,
                       nullptr, false);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return gather_common("MPI_Igather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype, root, comm,
                       request, true);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const PerRank per_rank{recvcounts, displs, MPI_ERR_COUNT, MPI_ERR_ARG};
  return gather_common("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, &per_rank, 0, recvtype, root, comm,
                       nullptr, false);
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  const PerRank per_rank{recvcounts, displs, MPI_ERR_COUNT, MPI_ERR_ARG};
  return gather_common("MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf, &per_rank, 0, recvtype, root, comm,
                       request, true);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter_common("MPI_Scatter", sendbuf, nullptr, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        nullptr, false);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return scatter_common("MPI_Iscatter", sendbuf, nullptr, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                        comm, request, true);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const PerRank per_rank{sendcounts, displs, MPI_ERR_COUNT, MPI_ERR_ARG};
  return scatter_common("MPI_Scatterv", sendbuf, &per_rank, 0, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        nullptr, false);
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  const PerRank per_rank{sendcounts, displs, MPI_ERR_COUNT, MPI_ERR_ARG};
  return scatter_common("MPI_Iscatterv", sendbuf, &per_rank, 0, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request, true);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_common("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype, comm,
                          nullptr, false);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgather_common("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype, comm,
                          request, true);
}

// Open MPI 4 reads NULL counts in MPI_Allgatherv (and crashes); they are MPI_ERR_COUNT as in MPI_Gatherv.
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  const PerRank per_rank{recvcounts, displs, MPI_ERR_COUNT, MPI_ERR_BUFFER};
  return allgather_common("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, &per_rank, 0, recvtype, comm,
                          nullptr, false);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const PerRank per_rank{recvcounts, displs, MPI_ERR_COUNT, MPI_ERR_BUFFER};
  return allgather_common("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf, &per_rank, 0, recvtype, comm,
                          request, true);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_common("MPI_Alltoall", sendbuf, nullptr, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype,
                         comm, nullptr, false);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall_common("MPI_Ialltoall", sendbuf, nullptr, sendcount, sendtype, recvbuf, nullptr, recvcount, recvtype,
                         comm, request, true);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void* recvbuf,
                  const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  const PerRank send_per_rank{sendcounts, sdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  const PerRank recv_per_rank{recvcounts, rdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  return alltoall_common("MPI_Alltoallv", sendbuf, &send_per_rank, 0, sendtype, recvbuf, &recv_per_rank, 0, recvtype,
                         comm, nullptr, false);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  const PerRank send_per_rank{sendcounts, sdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  const PerRank recv_per_rank{recvcounts, rdispls, MPI_ERR_ARG, MPI_ERR_ARG};
  return alltoall_common("MPI_Ialltoallv", sendbuf, &send_per_rank, 0, sendtype, recvbuf, &recv_per_rank, 0, recvtype,
                         comm, request, true);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm) {
  return alltoallw_common("MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                          recvtypes, comm, nullptr, false);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm, MPI_Request* request) {
  return alltoallw_common("MPI_Ialltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                          recvtypes, comm, request, true);
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
