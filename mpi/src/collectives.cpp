#include "collectives.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm.hpp"
#include "datatype.hpp"
#include "errors.hpp"
#include "ops.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

namespace {

// Tags inside the collective context; each collective call completes before
// the next starts on a communicator, so one tag per algorithm suffices.
enum Tag : int { barrier_tag = 1, bcast_tag, reduce_tag, allreduce_tag, gather_tag, scatter_tag, allgather_tag,
                 alltoall_tag, scan_tag };

const Datatype& bytes_type() { return datatype_of(MPI_BYTE); }

// count elements of type, laid out as in a user buffer (the lower bound respected).
class TempBuffer {
 public:
  TempBuffer(std::size_t count, const Datatype& type)
      : storage_(count * std::size_t(std::max<std::ptrdiff_t>(type.extent(), 0)) + 1), lb_(type.lb()) {}
  std::byte* data() { return storage_.data() - lb_; }

 private:
  std::vector<std::byte> storage_;
  std::ptrdiff_t lb_;
};

// The ranks of a non-blocking batch, waited for together.
class Batch {
 public:
  explicit Batch(const Communicator& comm) : comm_(comm), p2p_(runtime().p2p()) {}
  // Left non-empty only when an error cut the batch short: pending requests then clean up after themselves.
  ~Batch() {
    for (Request* r : requests_) {
      if (r->complete)
        delete r;
      else
        r->detached = true;
    }
  }
  void send(const void* buf, std::size_t count, const Datatype& type, int dest, int tag) {
    requests_.push_back(p2p_.isend(buf, count, type, dest, tag, comm_, comm_.collective_context(), SendMode::standard));
  }
  void recv(void* buf, std::size_t count, const Datatype& type, int source, int tag) {
    requests_.push_back(p2p_.irecv(buf, count, type, source, tag, comm_, comm_.collective_context()));
  }
  void wait() {
    p2p_.wait_until([&] { return std::all_of(requests_.begin(), requests_.end(), [](Request* r) { return r->complete; }); });
    for (Request* r : requests_) {
      const int error = r->error;
      delete r;
      if (error != MPI_SUCCESS) {
        requests_.clear();
        fail(error, "a message of a collective operation did not fit (the ranks disagree on counts or types)");
      }
    }
    requests_.clear();
  }

 private:
  const Communicator& comm_;
  P2P& p2p_;
  std::vector<Request*> requests_;
};

void send(const void* buf, std::size_t count, const Datatype& type, int dest, int tag, const Communicator& comm) {
  Batch b(comm);
  b.send(buf, count, type, dest, tag);
  b.wait();
}

void recv(void* buf, std::size_t count, const Datatype& type, int source, int tag, const Communicator& comm) {
  Batch b(comm);
  b.recv(buf, count, type, source, tag);
  b.wait();
}

void exchange(const void* out, void* in, std::size_t count, const Datatype& type, int peer, int tag,
              const Communicator& comm) {
  Batch b(comm);
  b.recv(in, count, type, peer, tag);
  b.send(out, count, type, peer, tag);
  b.wait();
}

// acc = other op acc when `other` comes first in rank order, else acc = acc op other.
void combine(const Op& op, const Datatype& type, std::size_t count, std::byte* acc, std::byte* other, bool other_first) {
  if (other_first) {
    op.apply(other, acc, count, type);
    return;
  }
  op.apply(acc, other, count, type);
  copy_typed(other, count, type, acc, count, type);
}

}  // namespace

void copy_typed(const void* src, std::size_t src_count, const Datatype& src_type, void* dst, std::size_t dst_count,
                const Datatype& dst_type) {
  const std::size_t bytes = std::min(src_count * src_type.size(), dst_count * dst_type.size());
  if (src == dst || bytes == 0) return;
  if (src_type.contiguous() && dst_type.contiguous()) {
    std::memmove(dst, src, bytes);
    return;
  }
  std::vector<std::byte> packed(src_count * src_type.size());
  src_type.pack(src, src_count, packed.data());
  dst_type.unpack(packed.data(), bytes, dst);
}

void barrier(const Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  for (int distance = 1; distance < n; distance *= 2) {
    Batch b(comm);
    b.recv(nullptr, 0, bytes_type(), (me - distance + n) % n, barrier_tag);
    b.send(nullptr, 0, bytes_type(), (me + distance) % n, barrier_tag);
    b.wait();
  }
}

void bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& comm) {
  const int n = comm.size();
  const int relative = (comm.rank() - root + n) % n;
  int mask = 1;
  for (; mask < n; mask <<= 1)
    if (relative & mask) {
      recv(buf, count, type, (relative - mask + root) % n, bcast_tag, comm);
      break;
    }
  Batch children(comm);
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n) children.send(buf, count, type, (relative + mask + root) % n, bcast_tag);
  children.wait();
}

void reduce(const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type, const Op& op, int root,
            const Communicator& comm) {
  op.check_applies_to(type);
  const int n = comm.size(), me = comm.rank();
  // The tree keeps rank order only when rooted at 0: other roots get the result from 0.
  const int tree_root = op.commutative() ? root : 0;
  TempBuffer acc(count, type), incoming(count, type);
  copy_typed(send_buf, count, type, acc.data(), count, type);
  const int relative = (me - tree_root + n) % n;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (relative & mask) {
      send(acc.data(), count, type, (relative - mask + tree_root) % n, reduce_tag, comm);
      break;
    }
    if ((relative | mask) < n) {
      recv(incoming.data(), count, type, ((relative | mask) + tree_root) % n, reduce_tag, comm);
      combine(op, type, count, acc.data(), incoming.data(), false);
    }
  }
  if (tree_root == root) {
    if (me == root) copy_typed(acc.data(), count, type, recv_buf, count, type);
    return;
  }
  if (me == tree_root) send(acc.data(), count, type, root, reduce_tag, comm);
  if (me == root) recv(recv_buf, count, type, tree_root, reduce_tag, comm);
}

void allreduce(const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type, const Op& op,
               const Communicator& comm) {
  op.check_applies_to(type);
  const int n = comm.size(), me = comm.rank();
  TempBuffer acc(count, type), incoming(count, type);
  copy_typed(send_buf, count, type, acc.data(), count, type);
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  // The first 2*rem ranks pair up (even into odd) so that a power of two remains.
  int new_rank = me - rem;
  if (me < 2 * rem) {
    if (me % 2 == 0) {
      send(acc.data(), count, type, me + 1, allreduce_tag, comm);
      new_rank = -1;
    } else {
      recv(incoming.data(), count, type, me - 1, allreduce_tag, comm);
      combine(op, type, count, acc.data(), incoming.data(), true);
      new_rank = me / 2;
    }
  }
  if (new_rank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      const int new_peer = new_rank ^ mask;
      const int peer = new_peer < rem ? new_peer * 2 + 1 : new_peer + rem;
      exchange(acc.data(), incoming.data(), count, type, peer, allreduce_tag, comm);
      combine(op, type, count, acc.data(), incoming.data(), peer < me);
    }
  }
  if (me < 2 * rem) {
    if (me % 2 == 1)
      send(acc.data(), count, type, me - 1, allreduce_tag, comm);
    else
      recv(acc.data(), count, type, me + 1, allreduce_tag, comm);
  }
  copy_typed(acc.data(), count, type, recv_buf, count, type);
}

void scan(const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type, const Op& op,
          const Communicator& comm) {
  op.check_applies_to(type);
  const int me = comm.rank();
  TempBuffer acc(count, type), incoming(count, type);
  copy_typed(send_buf, count, type, acc.data(), count, type);
  if (me > 0) {
    recv(incoming.data(), count, type, me - 1, scan_tag, comm);
    combine(op, type, count, acc.data(), incoming.data(), true);
  }
  if (me + 1 < comm.size()) send(acc.data(), count, type, me + 1, scan_tag, comm);
  copy_typed(acc.data(), count, type, recv_buf, count, type);
}

void reduce_scatter_block(const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type, const Op& op,
                          const Communicator& comm) {
  const int n = comm.size();
  TempBuffer all(count * std::size_t(n), type);
  reduce(send_buf, all.data(), count * std::size_t(n), type, op, 0, comm);
  std::vector<int> counts(static_cast<std::size_t>(n), static_cast<int>(count));
  std::vector<int> displs(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) displs[std::size_t(r)] = r * int(count);
  scatterv(Blocks{all.data(), counts, displs, &type}, recv_buf, count, type, 0, comm);
}

namespace {
const std::byte* block_address(const Blocks& blocks, int rank) {
  return static_cast<const std::byte*>(blocks.buf) + std::ptrdiff_t(blocks.displs[std::size_t(rank)]) * blocks.type->extent();
}
}  // namespace

void gatherv(const void* send_buf, std::size_t send_count, const Datatype& send_type, const Blocks& recv_blocks, int root,
             const Communicator& comm) {
  const int me = comm.rank();
  Batch b(comm);
  if (me != root) {
    b.send(send_buf, send_count, send_type, root, gather_tag);
    b.wait();
    return;
  }
  for (int r = 0; r < comm.size(); ++r) {
    auto* dst = const_cast<std::byte*>(block_address(recv_blocks, r));
    const auto n = std::size_t(recv_blocks.counts[std::size_t(r)]);
    if (r == me)
      copy_typed(send_buf, send_count, send_type, dst, n, *recv_blocks.type);
    else
      b.recv(dst, n, *recv_blocks.type, r, gather_tag);
  }
  b.wait();
}

void scatterv(const Blocks& send_blocks, void* recv_buf, std::size_t recv_count, const Datatype& recv_type, int root,
              const Communicator& comm) {
  const int me = comm.rank();
  Batch b(comm);
  if (me != root) {
    b.recv(recv_buf, recv_count, recv_type, root, scatter_tag);
    b.wait();
    return;
  }
  for (int r = 0; r < comm.size(); ++r) {
    const std::byte* src = block_address(send_blocks, r);
    const auto n = std::size_t(send_blocks.counts[std::size_t(r)]);
    if (r == me)
      copy_typed(src, n, *send_blocks.type, recv_buf, recv_count, recv_type);
    else
      b.send(src, n, *send_blocks.type, r, scatter_tag);
  }
  b.wait();
}

void allgatherv(const void* send_buf, std::size_t send_count, const Datatype& send_type, const Blocks& recv_blocks,
                const Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  Batch b(comm);
  for (int i = 1; i < n; ++i) {
    const int from = (me - i + n) % n;
    b.recv(const_cast<std::byte*>(block_address(recv_blocks, from)), std::size_t(recv_blocks.counts[std::size_t(from)]),
           *recv_blocks.type, from, allgather_tag);
  }
  for (int i = 1; i < n; ++i) b.send(send_buf, send_count, send_type, (me + i) % n, allgather_tag);
  copy_typed(send_buf, send_count, send_type, const_cast<std::byte*>(block_address(recv_blocks, me)),
             std::size_t(recv_blocks.counts[std::size_t(me)]), *recv_blocks.type);
  b.wait();
}

void alltoallv(const Blocks& send_blocks, const Blocks& recv_blocks, const Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  Batch b(comm);
  for (int i = 1; i < n; ++i) {
    const int from = (me - i + n) % n;
    b.recv(const_cast<std::byte*>(block_address(recv_blocks, from)), std::size_t(recv_blocks.counts[std::size_t(from)]),
           *recv_blocks.type, from, alltoall_tag);
  }
  for (int i = 1; i < n; ++i) {
    const int to = (me + i) % n;
    b.send(block_address(send_blocks, to), std::size_t(send_blocks.counts[std::size_t(to)]), *send_blocks.type, to,
           alltoall_tag);
  }
  copy_typed(block_address(send_blocks, me), std::size_t(send_blocks.counts[std::size_t(me)]), *send_blocks.type,
             const_cast<std::byte*>(block_address(recv_blocks, me)), std::size_t(recv_blocks.counts[std::size_t(me)]),
             *recv_blocks.type);
  b.wait();
}

void allreduce_max_u32(const Communicator& comm, std::uint32_t in, std::uint32_t& out) {
  allreduce(&in, &out, 1, datatype_of(MPI_UNSIGNED), op_of(MPI_MAX), comm);
}

}  // namespace viastack::mpi
