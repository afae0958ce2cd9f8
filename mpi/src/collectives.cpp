#include "collectives.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include <via/bootstrap.hpp>
#include <via/config.hpp>
#include <via/copy.hpp>

#include "comm.hpp"
#include "datatype.hpp"
#include "errors.hpp"
#include "ops.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

namespace {

// Step tags inside the collective context: Call::tag adds the call's sequence number.
enum Tag : int { barrier_tag = 1, bcast_tag, reduce_tag, allreduce_tag, gather_tag, scatter_tag, allgather_tag,
                 alltoall_tag, scan_tag, neighbor_tag /* and up: Neighbor::tag is added */ };

const Datatype& bytes_type() { return datatype_of(MPI_BYTE); }

// Up to this many ranks, and this much data gathered in all, barrier,
// allgather and allreduce exchange everything in one round (every rank with
// every other) instead of log2(n) rounds that each wait for the round before:
// with more ranks than cores each such wait costs a context switch.
constexpr int kFlatRanks = 4;
constexpr std::size_t kFlatBytes = 8192;
// Reduce-scatter sends each block once whichever way it goes, so on 3 or 4
// ranks the one round pays at every size, up to this much data in all (its
// temporaries are n-1 blocks where the ring's are two). Measured on 4 ranks
// on 2 cores, 1 MiB blocks: 1.0-1.1 ms flat against 2.6-2.8 ms by the ring
// (Open MPI 1.3 ms). On 2 ranks the ring is one step and needs no temporary.
constexpr std::size_t kFlatReduceScatterBytes = 16u << 20;
// A long local copy inside a collective goes in pieces of this size, with the
// transport polled between them (a rank's own block: copy_typed_polling).
constexpr std::size_t kCopyPiece = 256 * 1024;

// count elements of type, laid out as in a user buffer (the lower bound
// respected); left uninitialised, as every use writes it before reading it.
class TempBuffer {
 public:
  TempBuffer(std::size_t count, const Datatype& type)
      : storage_(new std::byte[count * std::size_t(std::max<std::ptrdiff_t>(type.extent(), 0)) + 1]), lb_(type.lb()) {}
  std::byte* data() { return storage_.get() - lb_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  std::ptrdiff_t lb_;
};

// Folds `incoming` into the running reduction `acc`: acc = incoming op acc
// when incoming comes first in rank order, else acc op incoming. A
// commutative op is applied in place either way; otherwise the result of
// acc op incoming lands in `incoming`, and the two buffers swap roles instead
// of copying it back (the caller copies the result out at the end if `acc` is
// then not where it belongs).
void fold(const Op& op, const Datatype& type, std::size_t count, std::byte*& acc, std::byte*& incoming,
          bool incoming_first) {
  if (incoming_first || op.commutative()) {
    op.apply(incoming, acc, count, type);
    return;
  }
  op.apply(acc, incoming, count, type);
  std::swap(acc, incoming);
}

// Pairwise exchange keeps one partner's blocks in flight at a time, which
// pays where each rank has a core. Where ranks outnumber the cores, a step
// waits for a partner that may not be running, while every block posted at
// once lets whichever ranks run move data: 4 ranks on 2 cores, blocks of
// 1 MiB, 16 interleaved runs, 1.39 / 1.44 / 1.37 x Open MPI pairwise
// (alltoall / ialltoall / ialltoallv), 1.23 / 1.33 / 1.22 all at once.
std::size_t alltoall_pairwise_bytes() {
  if (const auto set = via::config::integer_if_set("VIASTACK_MPI_ALLTOALL_PAIRWISE_BYTES")) return std::size_t(*set);
  if (via::job_outnumbers_cpus_on_this_host()) return SIZE_MAX;
  return std::size_t(via::config::integer("VIASTACK_MPI_ALLTOALL_PAIRWISE_BYTES"));
}

}  // namespace

CollectiveTuning collective_tuning_from_env() {
  return {std::size_t(via::config::integer("VIASTACK_MPI_ALLREDUCE_RING_BYTES")),
          std::size_t(via::config::integer("VIASTACK_MPI_ALLGATHER_RING_BYTES")), alltoall_pairwise_bytes()};
}

void copy_typed(const void* src, std::size_t src_count, const Datatype& src_type, void* dst, std::size_t dst_count,
                const Datatype& dst_type) {
  const std::size_t bytes = std::min(src_count * src_type.size(), dst_count * dst_type.size());
  if (src == dst || bytes == 0) return;
  if (src_type.contiguous() && dst_type.contiguous()) {
    via::move_memory(dst, src, bytes);
    return;
  }
  std::vector<std::byte> packed(src_count * src_type.size());
  src_type.pack(src, src_count, packed.data());
  dst_type.unpack(packed.data(), bytes, dst);
}

namespace {

// A rank's own block, copied once its messages are on their way so that the
// copy overlaps them; a large one in pieces with a poll between them, so that
// a peer reading from this rank through the rings meanwhile is served rather
// than left to take the read back and copy it by the slower single copy
// (alltoall, 2 ranks, 4 MiB: 816 us a call copying it whole, 431 never taking
// reads back; iscatter, 4 ranks on 2 cores, 1 MiB: the root copying its own
// block before it sent the others held all three readers up).
void copy_typed_polling(const void* src, std::size_t src_count, const Datatype& src_type, void* dst,
                        std::size_t dst_count, const Datatype& dst_type) {
  const std::size_t bytes = std::min(src_count * src_type.size(), dst_count * dst_type.size());
  if (bytes <= kCopyPiece || !src_type.contiguous() || !dst_type.contiguous() || src == dst) {
    copy_typed(src, src_count, src_type, dst, dst_count, dst_type);
    return;
  }
  const auto* from = static_cast<const std::byte*>(src);
  auto* to = static_cast<std::byte*>(dst);
  for (std::size_t done = 0; done < bytes; done += kCopyPiece) {
    if (done) runtime().p2p().poll_transport();
    via::move_memory(to + done, from + done, std::min(kCopyPiece, bytes - done));
  }
}

}  // namespace

namespace tasks {

CollectiveTask barrier(Call call) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  if (n <= kFlatRanks) {
    Batch all(call);
    for (int r = 0; r < n; ++r)
      if (r != me) all.recv(nullptr, 0, bytes_type(), r, barrier_tag);
    for (int r = 0; r < n; ++r)
      if (r != me) all.send(nullptr, 0, bytes_type(), r, barrier_tag);
    co_await all;
    co_return;
  }
  for (int distance = 1; distance < n; distance *= 2)
    co_await Batch(call)
        .recv(nullptr, 0, bytes_type(), (me - distance + n) % n, barrier_tag)
        .send(nullptr, 0, bytes_type(), (me + distance) % n, barrier_tag);
}

// Binomial tree. A rank whose buffer is shorter than the root's message (an
// erroneous call) fails with MPI_ERR_TRUNCATE, its buffer filled as far as it
// goes; one with children first passes the whole message on, so that they do
// not wait forever.
CollectiveTask bcast(Call call, void* buf, std::size_t count, const Datatype& type, int root) {
  const Communicator& comm = call.comm();
  const int n = comm.size();
  const int relative = (comm.rank() - root + n) % n;
  std::vector<std::byte> whole;  // the message, when longer than buf takes
  int mask = 1;
  for (; mask < n; mask <<= 1)
    if (relative & mask) {
      const int parent = (relative - mask + root) % n;
      Batch from_parent(call);
      if (mask > 1 && relative + 1 < n)  // it has children: relative + mask / 2, ..., relative + 1
        from_parent.recv_passing_on(buf, count, type, parent, bcast_tag, whole);
      else
        from_parent.recv(buf, count, type, parent, bcast_tag);
      co_await from_parent;
      break;
    }
  Batch children(call);
  for (mask >>= 1; mask > 0; mask >>= 1) {
    const int child = (relative + mask + root) % n;
    if (relative + mask >= n) continue;
    if (whole.empty())
      children.send(buf, count, type, child, bcast_tag);
    else
      children.send(whole.data(), whole.size(), bytes_type(), child, bcast_tag);
  }
  co_await children;
  require(whole.empty(), MPI_ERR_TRUNCATE, "the root broadcast more data than this rank's buffer holds");
}

// Binomial tree. A leaf sends its own buffer; a rank with children receives
// the first child's data straight into its accumulator and folds its own in,
// so the root needs no temporary with one child, one with more, and an
// inner rank one more for its accumulator.
CollectiveTask reduce(Call call, const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type,
                      const Op& op, int root) {
  op.check_applies_to(type);
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  // The tree keeps rank order only when rooted at 0: other roots get the result from 0.
  const int tree_root = op.commutative() ? root : 0;
  const int relative = (me - tree_root + n) % n;
  // Children are relative + mask for each mask below relative's lowest set bit.
  int children = 0, lowest_bit = 1;
  for (; lowest_bit < n && !(relative & lowest_bit); lowest_bit <<= 1)
    if (relative + lowest_bit < n) ++children;
  const bool result_here = me == root && tree_root == root;
  const auto* mine = static_cast<const std::byte*>(send_buf);
  // MPI_IN_PLACE at the root: its data is already in recv_buf, which cannot take the first child's.
  const bool in_place = result_here && send_buf == recv_buf;
  TempBuffer acc_storage(children > 0 && !result_here ? count : 0, type);
  TempBuffer spare_storage(children > 1 || (children > 0 && in_place) ? count : 0, type);
  std::byte* acc = result_here ? static_cast<std::byte*>(recv_buf) : acc_storage.data();
  std::byte* incoming = spare_storage.data();
  const std::byte* contribution = mine;  // what this rank passes up
  for (int mask = 1, child = 0; mask < lowest_bit; mask <<= 1) {
    if (relative + mask >= n) continue;
    const int source = (relative + mask + tree_root) % n;
    if (child++ == 0 && !in_place) {
      // The child's ranks all follow this one in rank order: acc = mine op child's.
      co_await Batch(call).recv(acc, count, type, source, reduce_tag);
      op.apply(mine, acc, count, type);
    } else {
      co_await Batch(call).recv(incoming, count, type, source, reduce_tag);
      fold(op, type, count, acc, incoming, false);
    }
    contribution = acc;
  }
  if (relative != 0) {
    co_await Batch(call).send(contribution, count, type, (relative - lowest_bit + tree_root) % n, reduce_tag);
    if (me != root) co_return;
  }
  if (tree_root == root) {
    if (contribution != recv_buf) copy_typed(contribution, count, type, recv_buf, count, type);
    co_return;
  }
  if (me == tree_root) co_await Batch(call).send(contribution, count, type, root, reduce_tag);
  if (me == root) co_await Batch(call).recv(recv_buf, count, type, tree_root, reduce_tag);
}

namespace {

CollectiveTask recursive_doubling_allreduce(Call call, const void* send_buf, void* recv_buf, std::size_t count,
                                            const Datatype& type, const Op& op) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  // The reduction runs in recv_buf, with one temporary for what arrives.
  copy_typed(send_buf, count, type, recv_buf, count, type);
  auto* const result = static_cast<std::byte*>(recv_buf);
  TempBuffer spare(count, type);
  std::byte *acc = result, *incoming = spare.data();
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  // The first 2*rem ranks pair up (even into odd) so that a power of two remains.
  int new_rank = me - rem;
  if (me < 2 * rem) {
    if (me % 2 == 0) {
      co_await Batch(call).send(acc, count, type, me + 1, allreduce_tag);
      new_rank = -1;
    } else {
      co_await Batch(call).recv(incoming, count, type, me - 1, allreduce_tag);
      fold(op, type, count, acc, incoming, true);
      new_rank = me / 2;
    }
  }
  if (new_rank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      const int new_peer = new_rank ^ mask;
      const int peer = new_peer < rem ? new_peer * 2 + 1 : new_peer + rem;
      co_await Batch(call)
          .recv(incoming, count, type, peer, allreduce_tag)
          .send(acc, count, type, peer, allreduce_tag);
      fold(op, type, count, acc, incoming, peer < me);
    }
  }
  if (me < 2 * rem) {
    if (me % 2 == 1)
      co_await Batch(call).send(acc, count, type, me - 1, allreduce_tag);
    else
      co_await Batch(call).recv(acc, count, type, me + 1, allreduce_tag);
  }
  if (acc != result) copy_typed(acc, count, type, result, count, type);
}

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// The ring reduce-scatter, for commutative ops: block b (counts[b] elements
// of type at displs[b] extents) of every rank's send_buf, reduced, lands in
// rank b's `result`. Block b starts at rank b+1 and travels round the ring to
// b, each rank folding in its own part of it; the partial block in flight
// alternates between two buffers of the largest block, and the last one is
// received straight into `result` (through a buffer when `result` overlaps
// the input: in place). On 2 ranks it needs no temporary; every rank sends
// (n-1)/n of the data whatever n is.
CollectiveTask ring_reduce_scatter(Call call, const void* send_buf, void* result, std::span<const int> counts,
                                   std::span<const int> displs, const Datatype& type, const Op& op) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const auto extent = std::size_t(std::max<std::ptrdiff_t>(type.extent(), 0));
  const auto* input = static_cast<const std::byte*>(send_buf);
  const auto mine = [&](int b) { return input + std::ptrdiff_t(displs[std::size_t(b)]) * type.extent(); };
  const auto length = [&](int b) { return std::size_t(counts[std::size_t(b)]); };
  std::size_t largest = 0, total = 0;
  for (int b = 0; b < n; ++b) {
    largest = std::max(largest, length(b));
    total = std::max(total, std::size_t(displs[std::size_t(b)]) + length(b));
  }
  const bool in_place = overlap(result, length(me) * extent, input, total * extent);
  const int last = n - 2;  // the last step
  const auto used = [&](int k) { return last > k || (in_place && last % 2 == k); };
  TempBuffer storage0(used(0) ? largest : 0, type), storage1(used(1) ? largest : 0, type);
  std::byte* partial[2] = {storage0.data(), storage1.data()};
  std::byte* target = static_cast<std::byte*>(result);
  if (n == 1) copy_typed(mine(0), length(0), type, result, length(0), type);
  for (int step = 0; step <= last; ++step) {
    const int out = (me - step - 1 + n) % n, in = (me - step - 2 + 2 * n) % n;
    const void* outgoing = step == 0 ? static_cast<const void*>(mine(out)) : partial[(step - 1) % 2];
    target = step == last && !in_place ? static_cast<std::byte*>(result) : partial[step % 2];
    co_await Batch(call)
        .recv(target, length(in), type, prev, allreduce_tag)
        .send(outgoing, length(out), type, next, allreduce_tag);
    op.apply(mine(in), target, length(in), type);
  }
  if (target != result) copy_typed(target, length(me), type, result, length(me), type);
}

// The ring allreduce: a ring reduce-scatter into this rank's block of
// recv_buf, then the reduced blocks travel round once more. Every rank sends
// 2(n-1)/n of the data whatever n is, but blocks are combined in ring order,
// not rank order.
CollectiveTask ring_allreduce(Call call, const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type,
                              const Op& op) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<int> firsts(static_cast<std::size_t>(n)), lengths(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b) {
    const auto [first, length] = block_range(count, n, b);
    firsts[std::size_t(b)] = int(first);
    lengths[std::size_t(b)] = int(length);
  }
  auto* acc = static_cast<std::byte*>(recv_buf);
  const auto block = [&](int b) { return acc + std::ptrdiff_t(firsts[std::size_t(b)]) * type.extent(); };
  co_await ring_reduce_scatter(call, send_buf, block(me), lengths, firsts, type, op);
  for (int step = 0; step < n - 1; ++step) {
    const int out = (me - step + n) % n, in = (me - step - 1 + n) % n;
    co_await Batch(call)
        .recv(block(in), std::size_t(lengths[std::size_t(in)]), type, prev, allreduce_tag)
        .send(block(out), std::size_t(lengths[std::size_t(out)]), type, next, allreduce_tag);
  }
}

// Rabenseifner's allreduce, for commutative ops on a power-of-two number of
// ranks: a reduce-scatter by recursive halving (at each step a rank keeps the
// half of its blocks that holds its own block, sends the other half to the
// rank whose number differs in that bit and folds in that rank's half of its
// own), then an allgather by recursive doubling, the steps in reverse. Each
// rank sends as much as in the ring, 2(n-1)/n of the data, in 2 log2(n)
// steps instead of 2(n-1): fewer rounds in which every rank must get a core
// (4 ranks on 2 cores, 1 MiB, iallreduce: 1530 us a call by the ring, 1186
// by recursive doubling, which sends the whole vector at each step). Block b
// is reduced by rank b alone, so every rank gets the same bits. The first
// step receives straight into recv_buf (not in place), the later ones into a
// temporary of a quarter of the data.
CollectiveTask halving_doubling_allreduce(Call call, const void* send_buf, void* recv_buf, std::size_t count,
                                          const Datatype& type, const Op& op) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  // Block b: elements [first(b), first(b + 1)).
  const auto first = [&](int b) { return block_start(count, n, b); };
  const auto elements = [&](int lo, int hi) { return first(hi) - first(lo); };
  const auto* input = static_cast<const std::byte*>(send_buf);
  auto* acc = static_cast<std::byte*>(recv_buf);
  const auto at = [&](auto* buffer, int b) { return buffer + std::ptrdiff_t(first(b)) * type.extent(); };
  TempBuffer incoming(first(n / 4), type);  // the first n/4 blocks: as large as any n/4 of them
  int lo = 0, hi = n;  // the blocks this rank still reduces
  for (int d = n / 2; d >= 1; d /= 2) {
    const int mid = (lo + hi) / 2;
    const bool lower = (me & d) == 0;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int send_lo = lower ? mid : lo, send_hi = lower ? hi : mid;
    const bool first_step = d == n / 2;
    std::byte* into = first_step ? at(acc, keep_lo) : incoming.data();
    co_await Batch(call)
        .recv(into, elements(keep_lo, keep_hi), type, me ^ d, allreduce_tag)
        .send(at(first_step ? input : acc, send_lo), elements(send_lo, send_hi), type, me ^ d, allreduce_tag);
    op.apply(first_step ? at(input, keep_lo) : incoming.data(), at(acc, keep_lo), elements(keep_lo, keep_hi), type);
    lo = keep_lo;
    hi = keep_hi;
  }
  for (int d = 1; d < n; d *= 2) {
    const bool lower = (me & d) == 0;
    const int their_lo = lower ? hi : lo - d, their_hi = lower ? hi + d : lo;
    co_await Batch(call)
        .recv(at(acc, their_lo), elements(their_lo, their_hi), type, me ^ d, allreduce_tag)
        .send(at(acc, lo), elements(lo, hi), type, me ^ d, allreduce_tag);
    lo = std::min(lo, their_lo);
    hi = std::max(hi, their_hi);
  }
}

// Every rank sends its vector to every other and folds all n in rank order
// (from the last: v0 op (v1 op (... op v(n-1)))), so that each gets the same
// bits, for any op. For small vectors on few ranks (kFlatRanks, kFlatBytes).
CollectiveTask flat_allreduce(Call call, const void* send_buf, void* recv_buf, std::size_t count,
                              const Datatype& type, const Op& op) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  const std::ptrdiff_t vector_bytes = std::ptrdiff_t(count) * type.extent();
  auto* result = static_cast<std::byte*>(recv_buf);
  // In place, this rank's vector is in recv_buf, which the fold overwrites first: it gets a slot too.
  const bool keep_mine = send_buf == recv_buf && me != n - 1;
  TempBuffer slots(count * std::size_t(n - 1 + (keep_mine ? 1 : 0)), type);
  const auto vector = [&](int r) -> const std::byte* {
    if (r == me) return keep_mine ? slots.data() + (n - 1) * vector_bytes : static_cast<const std::byte*>(send_buf);
    return slots.data() + (r < me ? r : r - 1) * vector_bytes;
  };
  if (keep_mine) copy_typed(send_buf, count, type, const_cast<std::byte*>(vector(me)), count, type);
  Batch all(call);
  for (int r = 0; r < n; ++r)
    if (r != me) all.recv(const_cast<std::byte*>(vector(r)), count, type, r, allreduce_tag);
  for (int r = 0; r < n; ++r)
    if (r != me) all.send(send_buf, count, type, r, allreduce_tag);
  co_await all;
  copy_typed(vector(n - 1), count, type, result, count, type);
  for (int r = n - 2; r >= 0; --r) op.apply(vector(r), result, count, type);
}

}  // namespace

CollectiveTask allreduce(Call call, const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type,
                         const Op& op) {
  op.check_applies_to(type);
  const int n = call.comm().size();
  if (n <= kFlatRanks && count * type.size() * std::size_t(n) <= kFlatBytes) {
    co_await flat_allreduce(call, send_buf, recv_buf, count, type, op);
    co_return;
  }
  const bool ring = op.commutative() && count >= std::size_t(n) &&
                    count * type.size() >= runtime().collective_tuning().allreduce_ring_bytes;
  if (!ring) {
    co_await recursive_doubling_allreduce(call, send_buf, recv_buf, count, type, op);
    co_return;
  }
  // From 4 ranks on a power of two, the ring's data in fewer steps; not in
  // place, where the first step would receive over this rank's own input.
  const auto extent = std::size_t(std::max<std::ptrdiff_t>(type.extent(), 0));
  const bool halving = n >= 4 && (n & (n - 1)) == 0 && send_buf != recv_buf &&
                       !overlap(send_buf, count * extent, recv_buf, count * extent);
  co_await (halving ? halving_doubling_allreduce : ring_allreduce)(call, send_buf, recv_buf, count, type, op);
}

namespace {

// Recursive doubling: after the step with `mask`, `partial` holds the
// reduction over the aligned block of 2*mask ranks around this one, and
// recv_buf over the part of it before this rank, and this rank too when the
// scan is inclusive. An exclusive scan leaves rank 0's recv_buf alone.
CollectiveTask prefix_reduction(Call call, const void* send_buf, void* recv_buf, std::size_t count,
                                const Datatype& type, const Op& op, bool inclusive) {
  op.check_applies_to(type);
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  TempBuffer partial_storage(count, type), incoming_storage(count, type);
  std::byte *partial = partial_storage.data(), *incoming = incoming_storage.data();
  copy_typed(send_buf, count, type, partial, count, type);
  if (inclusive) copy_typed(send_buf, count, type, recv_buf, count, type);
  bool have_result = inclusive;
  auto* result = static_cast<std::byte*>(recv_buf);
  for (int mask = 1; mask < n; mask <<= 1) {
    const int peer = me ^ mask;
    if (peer >= n) continue;
    co_await Batch(call)
        .recv(incoming, count, type, peer, scan_tag)
        .send(partial, count, type, peer, scan_tag);
    if (peer < me) {
      if (have_result)
        op.apply(incoming, result, count, type);
      else
        copy_typed(incoming, count, type, result, count, type);
      have_result = true;
    }
    // The partial reduction is sent on only if a later step has a peer.
    if ((mask << 1) < n) fold(op, type, count, partial, incoming, peer < me);
  }
}

// A linear chain: rank r receives the reduction over ranks 0..r-1 from r-1
// and passes on the one over 0..r. A rank sends once and waits only for its
// predecessor, so calls made one after another pipeline down the chain:
// better than recursive doubling's exchanges on few ranks (4 on 2 cores).
CollectiveTask linear_prefix_reduction(Call call, const void* send_buf, void* recv_buf, std::size_t count,
                                       const Datatype& type, const Op& op, bool inclusive) {
  op.check_applies_to(type);
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  const auto* mine = static_cast<const std::byte*>(send_buf);
  auto* result = static_cast<std::byte*>(recv_buf);
  if (me == 0) {
    if (inclusive) copy_typed(mine, count, type, result, count, type);
    if (n > 1) co_await Batch(call).send(mine, count, type, 1, scan_tag);
    co_return;
  }
  const bool last = me == n - 1, in_place = send_buf == recv_buf;
  if (!inclusive) {
    // This rank's result is what arrives; it passes on that op its own.
    TempBuffer onward(last ? 0 : count, type);
    if (!last) copy_typed(mine, count, type, onward.data(), count, type);
    co_await Batch(call).recv(result, count, type, me - 1, scan_tag);
    if (last) co_return;
    op.apply(result, onward.data(), count, type);
    co_await Batch(call).send(onward.data(), count, type, me + 1, scan_tag);
    co_return;
  }
  if (op.commutative() && !in_place) {
    co_await Batch(call).recv(result, count, type, me - 1, scan_tag);
    op.apply(mine, result, count, type);
  } else {
    TempBuffer before(count, type);
    co_await Batch(call).recv(before.data(), count, type, me - 1, scan_tag);
    copy_typed(mine, count, type, result, count, type);
    op.apply(before.data(), result, count, type);
  }
  if (!last) co_await Batch(call).send(result, count, type, me + 1, scan_tag);
}

constexpr int kLinearPrefixRanks = 4;  // up to this many ranks, scans take the chain

}  // namespace

CollectiveTask scan(Call call, const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type,
                    const Op& op) {
  return (call.comm().size() <= kLinearPrefixRanks ? linear_prefix_reduction : prefix_reduction)(
      call, send_buf, recv_buf, count, type, op, true);
}

CollectiveTask exscan(Call call, const void* send_buf, void* recv_buf, std::size_t count, const Datatype& type,
                      const Op& op) {
  return (call.comm().size() <= kLinearPrefixRanks ? linear_prefix_reduction : prefix_reduction)(
      call, send_buf, recv_buf, count, type, op, false);
}

namespace {

// Every rank sends each other rank that rank's block of its input, in one
// round, and folds the n blocks of its own in rank order (from the last, as
// flat_allreduce does), for any op: on few ranks, where the ring's n-1
// rounds each cost a wait (a context switch with more ranks than cores).
CollectiveTask flat_reduce_scatter(Call call, const void* send_buf, void* recv_buf, std::span<const int> counts,
                                   std::span<const int> displs, const Datatype& type, const Op& op) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  const auto count = [&](int b) { return std::size_t(counts[std::size_t(b)]); };
  const auto* input = static_cast<const std::byte*>(send_buf);
  const auto block = [&](int b) { return input + std::ptrdiff_t(displs[std::size_t(b)]) * type.extent(); };
  const std::ptrdiff_t slot_bytes = std::ptrdiff_t(count(me)) * type.extent();
  auto* result = static_cast<std::byte*>(recv_buf);
  // In place, the input is all of recv_buf, whose start the fold overwrites
  // first: this rank's block gets a slot too, unless it is the one copied first.
  const bool keep_mine = send_buf == recv_buf && me != n - 1;
  TempBuffer slots(count(me) * std::size_t(n - 1 + (keep_mine ? 1 : 0)), type);
  const auto part = [&](int r) -> const std::byte* {
    if (r == me) return keep_mine ? slots.data() + (n - 1) * slot_bytes : block(me);
    return slots.data() + (r < me ? r : r - 1) * slot_bytes;
  };
  Batch all(call);
  for (int r = 0; r < n; ++r)
    if (r != me) all.recv(const_cast<std::byte*>(part(r)), count(me), type, r, allreduce_tag);
  for (int r = 0; r < n; ++r)
    if (r != me) all.send(block(r), count(r), type, r, allreduce_tag);
  co_await all;
  if (keep_mine) copy_typed(block(me), count(me), type, const_cast<std::byte*>(part(me)), count(me), type);
  copy_typed(part(n - 1), count(me), type, result, count(me), type);
  for (int r = n - 2; r >= 0; --r) op.apply(part(r), result, count(me), type);
}

}  // namespace

CollectiveTask reduce_scatter(Call call, const void* send_buf, void* recv_buf, std::span<const int> counts,
                              const Datatype& type, const Op& op) {
  std::vector<int> displs(counts.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    require(total <= std::size_t(INT_MAX), MPI_ERR_COUNT, "more than INT_MAX elements in all");
    displs[r] = int(total);
    total += std::size_t(counts[r]);
  }
  const int n = call.comm().size();
  if (n <= kFlatRanks &&
      (total * type.size() <= kFlatBytes || (n > 2 && total * std::size_t(std::max<std::ptrdiff_t>(type.extent(), 0)) <= kFlatReduceScatterBytes))) {
    op.check_applies_to(type);
    co_await flat_reduce_scatter(call, send_buf, recv_buf, counts, displs, type, op);
    co_return;
  }
  // The ring takes one step per rank but sends each block only once: on few
  // ranks, or much data, it beats reducing everything to one rank and scattering.
  if (op.commutative() && (n <= 4 || total * type.size() >= runtime().collective_tuning().allreduce_ring_bytes)) {
    op.check_applies_to(type);
    co_await ring_reduce_scatter(call, send_buf, recv_buf, counts, displs, type, op);
    co_return;
  }
  TempBuffer all(total, type);
  co_await reduce(call, send_buf, all.data(), total, type, op, 0);
  co_await scatterv(call, Blocks{all.data(), counts, displs, &type}, recv_buf,
                    std::size_t(counts[std::size_t(call.comm().rank())]), type, 0);
}

}  // namespace tasks

namespace tasks {

CollectiveTask gatherv(Call call, const void* send_buf, std::size_t send_count, const Datatype& send_type,
                       Blocks recv_blocks, int root) {
  const Communicator& comm = call.comm();
  const int me = comm.rank();
  Batch b(call);
  if (me != root) {
    co_await b.send(send_buf, send_count, send_type, root, gather_tag);
    co_return;
  }
  for (int r = 0; r < comm.size(); ++r)
    if (r != me)
      b.recv(writable_block(recv_blocks, r), block_count(recv_blocks, r), block_type(recv_blocks, r), r, gather_tag);
  copy_typed_polling(send_buf, send_count, send_type, writable_block(recv_blocks, me), block_count(recv_blocks, me),
                     block_type(recv_blocks, me));
  co_await b;
}

CollectiveTask scatterv(Call call, Blocks send_blocks, void* recv_buf, std::size_t recv_count,
                        const Datatype& recv_type, int root) {
  const Communicator& comm = call.comm();
  const int me = comm.rank();
  Batch b(call);
  if (me != root) {
    co_await b.recv(recv_buf, recv_count, recv_type, root, scatter_tag);
    co_return;
  }
  for (int r = 0; r < comm.size(); ++r)
    if (r != me)
      b.send(block_address(send_blocks, r), block_count(send_blocks, r), block_type(send_blocks, r), r, scatter_tag);
  copy_typed_polling(block_address(send_blocks, me), block_count(send_blocks, me), block_type(send_blocks, me),
                     recv_buf, recv_count, recv_type);
  co_await b;
}

namespace {

// Each step passes on to the next rank the block received in the step before.
// The first sends this rank's own block from the user's send buffer, and the
// copy of it into the receive buffer is made while that step is under way:
// sent from the copy, the block would be lines this core has just written,
// which the next rank's single-copy read must take from this core's cache
// (2 ranks, 1 MiB: 230-240 us a call against 75-90 us, Open MPI 130). A send
// buffer longer than the block (an erroneous call) is cut to the block by the
// copy and sent from there, as every other block is passed on.
CollectiveTask ring_allgatherv(Call call, const void* send_buf, std::size_t send_count, const Datatype& send_type,
                               Blocks blocks) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  auto copy_own_block = [&] {
    copy_typed(send_buf, send_count, send_type, writable_block(blocks, me), block_count(blocks, me),
               block_type(blocks, me));
  };
  const bool from_send_buf = send_count * send_type.size() <= block_bytes(blocks, me);
  if (!from_send_buf) copy_own_block();
  for (int step = 0; step < n - 1; ++step) {
    const int out = (me - step + n) % n, in = (me - step - 1 + n) % n;
    Batch round(call);
    round.recv(writable_block(blocks, in), block_count(blocks, in), block_type(blocks, in), prev, allgather_tag);
    if (step == 0 && from_send_buf) {
      round.send(send_buf, send_count, send_type, next, allgather_tag);
      copy_own_block();
    } else {
      round.send(block_address(blocks, out), block_count(blocks, out), block_type(blocks, out), next, allgather_tag);
    }
    co_await round;
  }
}

// Recursive doubling for a power of two of ranks: in the step at distance
// `mask` a rank and its partner swap the blocks of their groups of `mask`
// ranks, each block a message of its own straight between the user's
// buffers, so nothing is packed or copied.
CollectiveTask recursive_doubling_allgatherv(Call call, Blocks blocks) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  for (int mask = 1; mask < n; mask <<= 1) {
    const int peer = me ^ mask;
    const int mine = me & ~(mask - 1), theirs = peer & ~(mask - 1);
    Batch exchange(call);
    for (int i = 0; i < mask; ++i)
      exchange.recv(writable_block(blocks, theirs + i), block_count(blocks, theirs + i), block_type(blocks, theirs + i),
                    peer, allgather_tag);
    for (int i = 0; i < mask; ++i)
      exchange.send(block_address(blocks, mine + i), block_count(blocks, mine + i), block_type(blocks, mine + i), peer,
                    allgather_tag);
    co_await exchange;
  }
}

// Bruck's dissemination allgather: ceil(log2 n) steps for any n. A packed
// buffer holds the blocks of ranks me, me+1, …; in the step at distance d a
// rank sends the first min(d, n-d) of them to me-d and appends as many from me+d.
CollectiveTask bruck_allgatherv(Call call, Blocks blocks) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  std::vector<std::size_t> offset(std::size_t(n) + 1);  // of the i-th block from me
  for (int i = 0; i < n; ++i) offset[std::size_t(i) + 1] = offset[std::size_t(i)] + block_bytes(blocks, (me + i) % n);
  std::vector<std::byte> packed(offset.back());
  block_type(blocks, me).pack(block_address(blocks, me), block_count(blocks, me), packed.data());
  for (int d = 1; d < n; d *= 2) {
    const auto k = std::size_t(std::min(d, n - d));
    co_await Batch(call)
        .recv(packed.data() + offset[std::size_t(d)], offset[std::size_t(d) + k] - offset[std::size_t(d)],
              bytes_type(), (me + d) % n, allgather_tag)
        .send(packed.data(), offset[k], bytes_type(), (me - d + n) % n, allgather_tag);
  }
  for (int i = 1; i < n; ++i) {
    const std::size_t bytes = offset[std::size_t(i) + 1] - offset[std::size_t(i)];
    const int from = (me + i) % n;
    if (bytes > 0) block_type(blocks, from).unpack(packed.data() + offset[std::size_t(i)], bytes, writable_block(blocks, from));
  }
}

}  // namespace

CollectiveTask allgatherv(Call call, const void* send_buf, std::size_t send_count, const Datatype& send_type,
                          Blocks recv_blocks) {
  const Communicator& comm = call.comm();
  const int me = comm.rank();
  std::size_t total = 0;  // the same on every rank: all know every count
  for (int r = 0; r < comm.size(); ++r) total += block_bytes(recv_blocks, r);
  const int n = comm.size();
  const bool flat = n <= kFlatRanks && total <= kFlatBytes;
  if (n > 1 && !flat && total >= runtime().collective_tuning().allgather_ring_bytes) {
    co_await ring_allgatherv(call, send_buf, send_count, send_type, recv_blocks);
    co_return;
  }
  copy_typed(send_buf, send_count, send_type, writable_block(recv_blocks, me), block_count(recv_blocks, me),
             block_type(recv_blocks, me));
  if (flat) {
    Batch all(call);
    for (int r = 0; r < n; ++r)
      if (r != me)
        all.recv(writable_block(recv_blocks, r), block_count(recv_blocks, r), block_type(recv_blocks, r), r,
                 allgather_tag);
    for (int r = 0; r < n; ++r)
      if (r != me)
        all.send(block_address(recv_blocks, me), block_count(recv_blocks, me), block_type(recv_blocks, me), r,
                 allgather_tag);
    co_await all;
  } else if ((n & (n - 1)) == 0)
    co_await recursive_doubling_allgatherv(call, recv_blocks);
  else
    co_await bruck_allgatherv(call, recv_blocks);
}

CollectiveTask alltoallv(Call call, Blocks send_blocks, Blocks recv_blocks) {
  const Communicator& comm = call.comm();
  const int n = comm.size(), me = comm.rank();
  auto copy_own_block = [&] {
    copy_typed_polling(block_address(send_blocks, me), block_count(send_blocks, me), block_type(send_blocks, me),
                       writable_block(recv_blocks, me), block_count(recv_blocks, me), block_type(recv_blocks, me));
  };
  if (n == 1) copy_own_block();
  // Each rank may choose for itself: both ways send one message per pair of
  // ranks with the same tag, so they match each other.
  std::size_t largest = 0;
  for (int r = 0; r < n; ++r) largest = std::max(largest, block_bytes(send_blocks, r));
  const bool pairwise = largest >= runtime().collective_tuning().alltoall_pairwise_bytes;
  Batch all(call);
  for (int step = 1; step < n; ++step) {
    const int to = (me + step) % n, from = (me - step + n) % n;
    Batch pair(call);
    Batch& b = pairwise ? pair : all;
    b.recv(writable_block(recv_blocks, from), block_count(recv_blocks, from), block_type(recv_blocks, from), from,
           alltoall_tag);
    b.send(block_address(send_blocks, to), block_count(send_blocks, to), block_type(send_blocks, to), to, alltoall_tag);
    if (step == 1) copy_own_block();
    if (pairwise) co_await pair;
  }
  co_await all;
}

CollectiveTask alltoallv_in_place(Call call, Blocks blocks) {
  const int n = call.comm().size();
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) {
    const std::size_t bytes = block_bytes(blocks, r);
    require(total + bytes <= std::size_t(INT_MAX), MPI_ERR_COUNT, "more than INT_MAX bytes in place");
    counts[std::size_t(r)] = int(bytes);
    displs[std::size_t(r)] = int(total);
    total += bytes;
  }
  std::vector<std::byte> packed(total);
  for (int r = 0; r < n; ++r)
    block_type(blocks, r).pack(block_address(blocks, r), block_count(blocks, r), packed.data() + displs[std::size_t(r)]);
  co_await alltoallv(call, Blocks{packed.data(), counts, displs, &bytes_type()}, blocks);
}

CollectiveTask neighbor_exchange(Call call, Blocks send_blocks, std::span<const Neighbor> destinations,
                                 Blocks recv_blocks, std::span<const Neighbor> sources) {
  Batch b(call);
  for (std::size_t i = 0; i < sources.size(); ++i)
    if (sources[i].rank != MPI_PROC_NULL)
      b.recv(writable_block(recv_blocks, int(i)), block_count(recv_blocks, int(i)), block_type(recv_blocks, int(i)),
             sources[i].rank, neighbor_tag + sources[i].tag);
  for (std::size_t i = 0; i < destinations.size(); ++i)
    if (destinations[i].rank != MPI_PROC_NULL)
      b.send(block_address(send_blocks, int(i)), block_count(send_blocks, int(i)), block_type(send_blocks, int(i)),
             destinations[i].rank, neighbor_tag + destinations[i].tag);
  co_await b;
}

}  // namespace tasks

// The blocking collectives: each task run to its end.

void barrier(const Communicator& comm) { run_blocking(tasks::barrier(Call(comm))); }

void bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& comm) {
  run_blocking(tasks::bcast(Call(comm), buf, count, type, root));
}

void reduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, int root,
            const Communicator& comm) {
  run_blocking(tasks::reduce(Call(comm), send, recv, count, type, op, root));
}

void allreduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
               const Communicator& comm) {
  run_blocking(tasks::allreduce(Call(comm), send, recv, count, type, op));
}

void scan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
          const Communicator& comm) {
  run_blocking(tasks::scan(Call(comm), send, recv, count, type, op));
}

void exscan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
            const Communicator& comm) {
  run_blocking(tasks::exscan(Call(comm), send, recv, count, type, op));
}

void reduce_scatter(const void* send, void* recv, std::span<const int> counts, const Datatype& type, const Op& op,
                    const Communicator& comm) {
  run_blocking(tasks::reduce_scatter(Call(comm), send, recv, counts, type, op));
}

void gatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv, int root,
             const Communicator& comm) {
  run_blocking(tasks::gatherv(Call(comm), send, send_count, send_type, recv, root));
}

void scatterv(const Blocks& send, void* recv, std::size_t recv_count, const Datatype& recv_type, int root,
              const Communicator& comm) {
  run_blocking(tasks::scatterv(Call(comm), send, recv, recv_count, recv_type, root));
}

void allgatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv,
                const Communicator& comm) {
  run_blocking(tasks::allgatherv(Call(comm), send, send_count, send_type, recv));
}

void alltoallv(const Blocks& send, const Blocks& recv, const Communicator& comm) {
  run_blocking(tasks::alltoallv(Call(comm), send, recv));
}

void alltoallv_in_place(const Blocks& blocks, const Communicator& comm) {
  run_blocking(tasks::alltoallv_in_place(Call(comm), blocks));
}

void neighbor_exchange(const Blocks& send, std::span<const Neighbor> destinations, const Blocks& recv,
                       std::span<const Neighbor> sources, const Communicator& comm) {
  run_blocking(tasks::neighbor_exchange(Call(comm), send, destinations, recv, sources));
}

void allreduce_max_u32(const Communicator& comm, std::uint32_t in, std::uint32_t& out) {
  allreduce(&in, &out, 1, datatype_of(MPI_UNSIGNED), op_of(MPI_MAX), comm);
}

}  // namespace viastack::mpi
