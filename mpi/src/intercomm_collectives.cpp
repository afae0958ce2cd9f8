#include "intercomm_collectives.hpp"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <span>

#include "comm.hpp"
#include "datatype.hpp"
#include "nonblocking_collectives.hpp"
#include "ops.hpp"

namespace viastack::mpi {

Call Call::between_groups(const Communicator& inter) { return Call(inter, inter.next_intercomm_collective_sequence()); }

namespace {

// Each group's leader, which alone talks to the other group in Bcast, the reductions and Barrier.
constexpr int kLeader = 0;

// The step tag of the leaders' message; the data-movement collectives use tasks::neighbor_exchange's.
constexpr int kLeaderStep = 1;

const Datatype& bytes_type() { return datatype_of(MPI_BYTE); }

// count elements of type, laid out as in a user buffer (its lower bound respected; never a null pointer).
class Scratch {
 public:
  Scratch(std::size_t count, const Datatype& type)
      : bytes_(count * std::size_t(std::max<std::ptrdiff_t>(type.extent(), 0)) + 1), lb_(type.lb()) {}
  std::byte* data() { return bytes_.data() - lb_; }

 private:
  std::vector<std::byte> bytes_;
  std::ptrdiff_t lb_;
};

bool is_leader(const Communicator& inter) { return inter.rank() == kLeader; }

// Every rank of the remote group, as neighbours: block r goes to (or comes from) remote rank r.
std::vector<Neighbor> every_remote_rank(const Communicator& inter) {
  std::vector<Neighbor> all(std::size_t(inter.remote_group().size()));
  for (std::size_t r = 0; r < all.size(); ++r) all[r] = Neighbor{int(r), 0};
  return all;
}

// The calls' tasks. Every Call is made before the task first waits, in the
// same order on every member: a Call takes the next sequence number of its
// communicator, and a task resumed later could take it out of turn.

CollectiveTask barrier(Call between, Call local_arrival, Call local_release) {
  co_await tasks::barrier(local_arrival);  // everyone here has entered
  if (is_leader(between.comm()))
    co_await Batch(between)
        .recv(nullptr, 0, bytes_type(), kLeader, kLeaderStep)
        .send(nullptr, 0, bytes_type(), kLeader, kLeaderStep);
  co_await tasks::bcast(local_release, nullptr, 0, bytes_type(), kLeader);  // and everyone there
}

// local_spread: the receiving group's call; none in the root's group.
CollectiveTask bcast(Call between, std::optional<Call> local_spread, void* buf, std::size_t count,
                     const Datatype& type, int root) {
  if (root == MPI_PROC_NULL) co_return;
  if (root == MPI_ROOT) {
    co_await Batch(between).send(buf, count, type, kLeader, kLeaderStep);
    co_return;
  }
  if (is_leader(between.comm())) co_await Batch(between).recv(buf, count, type, root, kLeaderStep);
  co_await tasks::bcast(*local_spread, buf, count, type, kLeader);
}

// local_reduction: the sending group's call; none in the root's group.
CollectiveTask reduce(Call between, std::optional<Call> local_reduction, const void* send, void* recv,
                      std::size_t count, const Datatype& type, const Op& op, int root) {
  if (root == MPI_PROC_NULL) co_return;
  if (root == MPI_ROOT) {
    co_await Batch(between).recv(recv, count, type, kLeader, kLeaderStep);
    co_return;
  }
  const bool leader = is_leader(between.comm());
  Scratch ours(leader ? count : 0, type);
  co_await tasks::reduce(*local_reduction, send, ours.data(), count, type, op, kLeader);
  if (leader) co_await Batch(between).send(ours.data(), count, type, root, kLeaderStep);
}

// Both groups reduce at their leader, the leaders swap the results, and each broadcasts the other's.
CollectiveTask allreduce(Call between, Call local_reduction, Call local_spread, const void* send, void* recv,
                         std::size_t count, const Datatype& type, const Op& op) {
  const bool leader = is_leader(between.comm());
  Scratch ours(leader ? count : 0, type);
  co_await tasks::reduce(local_reduction, send, ours.data(), count, type, op, kLeader);
  if (leader)
    co_await Batch(between)
        .recv(recv, count, type, kLeader, kLeaderStep)
        .send(ours.data(), count, type, kLeader, kLeaderStep);
  co_await tasks::bcast(local_spread, recv, count, type, kLeader);
}

// As allreduce, except that each leader scatters the other group's result over its group by `counts`.
CollectiveTask reduce_scatter(Call between, Call local_reduction, Call local_spread, const void* send, void* recv,
                              std::span<const int> counts, const Datatype& type, const Op& op) {
  const bool leader = is_leader(between.comm());
  std::vector<int> displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  const std::size_t total = displs.empty() ? 0 : std::size_t(displs.back() + counts.back());
  Scratch ours(leader ? total : 0, type), theirs(leader ? total : 0, type);
  co_await tasks::reduce(local_reduction, send, ours.data(), total, type, op, kLeader);
  if (leader)
    co_await Batch(between)
        .recv(theirs.data(), total, type, kLeader, kLeaderStep)
        .send(ours.data(), total, type, kLeader, kLeaderStep);
  const int me = between.comm().rank();
  co_await tasks::scatterv(local_spread, Blocks{theirs.data(), counts, displs, &type}, recv,
                           std::size_t(counts[std::size_t(me)]), type, kLeader);
}

// What a data-movement collective's exchange needs kept alive while it runs:
// its per-rank arrays and its neighbour lists.
struct Exchange {
  std::vector<int> send_counts, send_displs;
  std::optional<RankLayout> send_layout, recv_layout;
  std::optional<TypedLayout> send_typed, recv_typed;
  std::vector<Neighbor> destinations, sources;
};

// One block of `count` elements, sent to every rank of `destinations`.
Blocks same_block_for_each(Exchange& x, const void* buf, int count, const Datatype& type) {
  x.send_counts.assign(x.destinations.size(), count);
  x.send_displs.assign(x.destinations.size(), 0);
  return Blocks{buf, x.send_counts, x.send_displs, &type};
}

Blocks blocks_of(const RankLayout& layout, const void* buf, const Datatype& type) {
  return Blocks{buf, layout.counts, layout.displs, &type};
}

void launch_exchange(const Communicator& inter, const std::shared_ptr<Exchange>& x, const Blocks& send,
                     const Blocks& recv, MPI_Request* request) {
  launch(inter, tasks::neighbor_exchange(Call::between_groups(inter), send, x->destinations, recv, x->sources),
         request, x);
}

void require_not_in_place(const void* buf, int error_class) {
  require(buf != MPI_IN_PLACE, error_class, "MPI_IN_PLACE is not allowed on an intercommunicator");
}

std::size_t count_of(int count) { return std::size_t(count); }

// The datatype of a buffer argument, checked with the buffer, at a rank where they are significant;
// at MPI_PROC_NULL nothing is checked (and nothing moves).
const Datatype& significant_type(int root, const void* buf, int count, MPI_Datatype datatype) {
  return root == MPI_PROC_NULL ? datatype_of(MPI_BYTE) : *checked_buffer(buf, count, datatype).type;
}

}  // namespace

void check_intercomm_root(const Communicator& inter, int root) {
  require(root == MPI_ROOT || root == MPI_PROC_NULL || (root >= 0 && root < inter.remote_group().size()),
          MPI_ERR_ROOT, "root must be MPI_ROOT, MPI_PROC_NULL or a rank of the remote group");
}

void intercomm_barrier(const Communicator& inter, MPI_Request* request) {
  const Call between = Call::between_groups(inter);
  const Call local_arrival(inter.local_comm());
  const Call local_release(inter.local_comm());
  launch(inter, barrier(between, local_arrival, local_release), request);
}

void intercomm_bcast(void* buf, int count, MPI_Datatype datatype, int root, const Communicator& inter,
                     MPI_Request* request) {
  check_intercomm_root(inter, root);
  const Datatype& type = significant_type(root, buf, count, datatype);
  const Call between = Call::between_groups(inter);
  const bool receiving = root != MPI_ROOT && root != MPI_PROC_NULL;
  const std::optional<Call> local_spread = receiving ? std::optional<Call>(inter.local_comm()) : std::nullopt;
  launch(inter, bcast(between, local_spread, buf, count_of(count), type, root), request);
}

void intercomm_reduce(const void* send, void* recv, int count, MPI_Datatype datatype, const Op& op, int root,
                      const Communicator& inter, MPI_Request* request) {
  check_intercomm_root(inter, root);
  require_not_in_place(send, MPI_ERR_BUFFER);
  const Datatype& type = significant_type(root, root == MPI_ROOT ? recv : send, count, datatype);
  if (root != MPI_PROC_NULL) op.check_applies_to(type);
  const Call between = Call::between_groups(inter);
  const bool sending = root != MPI_ROOT && root != MPI_PROC_NULL;
  const std::optional<Call> local_reduction = sending ? std::optional<Call>(inter.local_comm()) : std::nullopt;
  launch(inter, reduce(between, local_reduction, send, recv, count_of(count), type, op, root), request);
}

void intercomm_allreduce(const void* send, void* recv, int count, const Datatype& type, const Op& op,
                         const Communicator& inter, MPI_Request* request) {
  require_not_in_place(send, MPI_ERR_BUFFER);
  op.check_applies_to(type);
  const Call between = Call::between_groups(inter);
  const Call local_reduction(inter.local_comm());
  const Call local_spread(inter.local_comm());
  launch(inter, allreduce(between, local_reduction, local_spread, send, recv, count_of(count), type, op), request);
}

void intercomm_reduce_scatter(const void* send, void* recv, std::shared_ptr<const std::vector<int>> counts,
                              const Datatype& type, const Op& op, const Communicator& inter, MPI_Request* request) {
  require_not_in_place(send, MPI_ERR_BUFFER);
  op.check_applies_to(type);
  const Call between = Call::between_groups(inter);
  const Call local_reduction(inter.local_comm());
  const Call local_spread(inter.local_comm());
  launch(inter, reduce_scatter(between, local_reduction, local_spread, send, recv, *counts, type, op), request,
         counts);
}

void intercomm_gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                      const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, int root,
                      const Communicator& inter, MPI_Request* request) {
  check_intercomm_root(inter, root);
  auto x = std::make_shared<Exchange>();
  Blocks send{}, recv{};
  if (root == MPI_ROOT) {
    require_not_in_place(recvbuf, MPI_ERR_ARG);
    const Datatype& type = datatype_of(recvtype);
    x->sources = every_remote_rank(inter);
    recv = blocks_of(x->recv_layout.emplace(layout_of(inter.remote_group().size(), per_rank, recvcount)), recvbuf,
                     type);
  } else if (root != MPI_PROC_NULL) {
    require_not_in_place(sendbuf, MPI_ERR_ARG);
    Buffer b = checked_buffer(sendbuf, sendcount, sendtype);
    x->destinations = {Neighbor{root, 0}};
    send = same_block_for_each(*x, sendbuf, sendcount, *b.type);
  }
  launch_exchange(inter, x, send, recv, request);
}

void intercomm_scatter(const void* sendbuf, const PerRank* per_rank, int sendcount, MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, const Communicator& inter,
                       MPI_Request* request) {
  check_intercomm_root(inter, root);
  auto x = std::make_shared<Exchange>();
  Blocks send{}, recv{};
  if (root == MPI_ROOT) {
    require_not_in_place(sendbuf, MPI_ERR_ARG);
    const Datatype& type = datatype_of(sendtype);
    x->destinations = every_remote_rank(inter);
    send = blocks_of(x->send_layout.emplace(layout_of(inter.remote_group().size(), per_rank, sendcount)), sendbuf,
                     type);
  } else if (root != MPI_PROC_NULL) {
    require_not_in_place(recvbuf, MPI_ERR_ARG);
    Buffer b = checked_buffer(recvbuf, recvcount, recvtype);
    x->sources = {Neighbor{root, 0}};
    recv = blocks_of(x->recv_layout.emplace(1, recvcount), recvbuf, *b.type);
  }
  launch_exchange(inter, x, send, recv, request);
}

void intercomm_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const PerRank* per_rank, int recvcount, MPI_Datatype recvtype, const Communicator& inter,
                         MPI_Request* request) {
  require_not_in_place(sendbuf, MPI_ERR_ARG);
  require_not_in_place(recvbuf, MPI_ERR_ARG);
  Buffer b = checked_buffer(sendbuf, sendcount, sendtype);
  const Datatype& type = datatype_of(recvtype);
  auto x = std::make_shared<Exchange>();
  x->destinations = x->sources = every_remote_rank(inter);
  const Blocks send = same_block_for_each(*x, sendbuf, sendcount, *b.type);
  const Blocks recv =
      blocks_of(x->recv_layout.emplace(layout_of(inter.remote_group().size(), per_rank, recvcount)), recvbuf, type);
  launch_exchange(inter, x, send, recv, request);
}

void intercomm_alltoall(const void* sendbuf, const PerRank* send_per_rank, int sendcount, MPI_Datatype sendtype,
                        void* recvbuf, const PerRank* recv_per_rank, int recvcount, MPI_Datatype recvtype,
                        const Communicator& inter, MPI_Request* request) {
  require_not_in_place(sendbuf, MPI_ERR_ARG);
  require_not_in_place(recvbuf, MPI_ERR_ARG);
  const int n = inter.remote_group().size();
  const Datatype& stype = datatype_of(sendtype);
  const Datatype& rtype = datatype_of(recvtype);
  auto x = std::make_shared<Exchange>();
  x->destinations = x->sources = every_remote_rank(inter);
  const Blocks send = blocks_of(x->send_layout.emplace(layout_of(n, send_per_rank, sendcount)), sendbuf, stype);
  const Blocks recv = blocks_of(x->recv_layout.emplace(layout_of(n, recv_per_rank, recvcount)), recvbuf, rtype);
  launch_exchange(inter, x, send, recv, request);
}

void intercomm_alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                         const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                         const MPI_Datatype recvtypes[], const Communicator& inter, MPI_Request* request) {
  require_not_in_place(sendbuf, MPI_ERR_ARG);
  require_not_in_place(recvbuf, MPI_ERR_ARG);
  const int n = inter.remote_group().size();
  auto x = std::make_shared<Exchange>();
  x->destinations = x->sources = every_remote_rank(inter);
  const Blocks send = x->send_typed.emplace(n, sendcounts, sdispls, sendtypes).blocks(sendbuf);
  const Blocks recv = x->recv_typed.emplace(n, recvcounts, rdispls, recvtypes).blocks(recvbuf);
  launch_exchange(inter, x, send, recv, request);
}

}  // namespace viastack::mpi
