// Collective operations over point-to-point messages in the communicator's
// collective context. Buffers follow MPI's rules, with MPI_IN_PLACE already
// resolved by the caller into `send == recv`.
//
// Algorithms, and where they switch (bytes; environment variables read at MPI_Init):
//   barrier          on up to 4 ranks every rank with every other in one round;
//                    dissemination on more
//   bcast            binomial tree
//   reduce           binomial tree, the first child's data received straight into
//                    the accumulator (the root's: its recv buffer); a non-commutative op
//                    reduces over the tree rooted at rank 0, which keeps rank order, and
//                    0 forwards the result
//   allreduce        on up to 4 ranks and 8 KiB gathered in all: every vector to
//                    every rank in one round, folded in rank order on each (the same
//                    bits everywhere, any op); else recursive doubling (non-powers of
//                    two folded in first) below VIASTACK_MPI_ALLREDUCE_RING_BYTES
//                    (default 64 KiB) of data, ring (reduce-scatter into the recv
//                    buffer, then allgather) from there on; both reduce in the recv
//                    buffer with one temporary; non-commutative ops, and fewer
//                    elements than ranks, stay on recursive doubling
//   scan, exscan     order-preserving: a linear chain (rank r-1 to r) on up to 4
//                    ranks, recursive doubling on more
//   allgather(v)     on up to 4 ranks and 8 KiB gathered in all: one round, every
//                    block to every rank; else below VIASTACK_MPI_ALLGATHER_RING_BYTES
//                    (default 64 KiB) gathered in all: recursive doubling between the
//                    user's buffers on a power of two of ranks, else Bruck's
//                    dissemination; ring from there on
//   alltoall(v/w)    every message posted at once while each block is below
//                    VIASTACK_MPI_ALLTOALL_PAIRWISE_BYTES (default 64 KiB), pairwise
//                    exchange (one partner per step) from there on; where ranks
//                    outnumber the cores (and the variable is unset), all at once
//   gather(v), scatter(v)  linear: the root posts every transfer at once
//   reduce_scatter(_block) on up to 4 ranks and 8 KiB of input, or on 3-4 ranks
//                    and up to 16 MiB: each block to its rank in one round,
//                    folded in rank order there (any op); else
//                    commutative ops on up to 4 ranks, or from
//                    VIASTACK_MPI_ALLREDUCE_RING_BYTES of data: ring reduce-scatter
//                    (each block once round the ring, no temporary on 2 ranks);
//                    otherwise reduce to rank 0, then scatter
//   neighbourhood    every message posted at once
//
// Each algorithm is a coroutine (tasks::…, collective_task.hpp): the blocking
// functions below run one to its end; MPI_I… hands one to the progress engine.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "collective_task.hpp"
#include "datatype.hpp"

namespace viastack::mpi {

class Communicator;
class Datatype;
class Op;

struct CollectiveTuning {
  std::size_t allreduce_ring_bytes, allgather_ring_bytes, alltoall_pairwise_bytes;
};
CollectiveTuning collective_tuning_from_env();

void barrier(const Communicator& comm);
void bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& comm);
void reduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, int root,
            const Communicator& comm);
void allreduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
               const Communicator& comm);
// Inclusive prefix reduction.
void scan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, const Communicator& comm);
// Exclusive prefix reduction: rank r gets ranks 0..r-1 reduced; rank 0's recv is left alone.
void exscan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
            const Communicator& comm);
// Reduces sum(counts) elements; rank r gets counts[r] of them, after those of the ranks before it.
void reduce_scatter(const void* send, void* recv, std::span<const int> counts, const Datatype& type, const Op& op,
                    const Communicator& comm);

// A block description: count elements of type at displacement (in elements of type) of a buffer;
// or, when types is given (MPI_Alltoallw), elements of a type of each block's own at a displacement in bytes.
struct Blocks {
  const void* buf;
  std::span<const int> counts;  // one per rank
  std::span<const int> displs;  // one per rank, in extents of type, or in bytes with types
  const Datatype* type;
  std::span<const Datatype* const> types = {};  // one per rank, or none
};
// Block `rank` of a Blocks: its type, where it is, how many elements and bytes
// (inline: a small collective on shared memory asks them of every block).
inline const Datatype& block_type(const Blocks& blocks, int rank) {
  return blocks.types.empty() ? *blocks.type : *blocks.types[std::size_t(rank)];
}
inline const std::byte* block_address(const Blocks& blocks, int rank) {
  const std::ptrdiff_t displ = blocks.displs[std::size_t(rank)];
  return static_cast<const std::byte*>(blocks.buf) + (blocks.types.empty() ? displ * blocks.type->extent() : displ);
}
inline std::byte* writable_block(const Blocks& blocks, int rank) {
  return const_cast<std::byte*>(block_address(blocks, rank));
}
inline std::size_t block_count(const Blocks& blocks, int rank) { return std::size_t(blocks.counts[std::size_t(rank)]); }
inline std::size_t block_bytes(const Blocks& blocks, int rank) {
  return block_count(blocks, rank) * block_type(blocks, rank).size();
}

// Where block b of `count` elements cut into n blocks starts (the first
// count % n blocks one element longer); block_start(count, n, n) == count.
inline std::size_t block_start(std::size_t count, int n, int b) {
  const std::size_t base = count / std::size_t(n), extra = count % std::size_t(n);
  return std::size_t(b) * base + std::min(std::size_t(b), extra);
}
// Block b of that cut: {where it starts, how many elements}.
inline std::pair<std::size_t, std::size_t> block_range(std::size_t count, int n, int b) {
  const std::size_t first = block_start(count, n, b);
  return {first, block_start(count, n, b + 1) - first};
}

// Gather(v): every rank's `send` lands in root's recv block for that rank.
void gatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv, int root,
             const Communicator& comm);
void scatterv(const Blocks& send, void* recv, std::size_t recv_count, const Datatype& recv_type, int root,
              const Communicator& comm);
void allgatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv,
                const Communicator& comm);
void alltoallv(const Blocks& send, const Blocks& recv, const Communicator& comm);
// MPI_IN_PLACE: every rank's blocks are both what it sends and where it receives.
void alltoallv_in_place(const Blocks& blocks, const Communicator& comm);

// A neighbour in a process topology, and the tag that tells apart two messages
// between the same pair of ranks in one neighbourhood collective.
struct Neighbor {
  int rank;  // or MPI_PROC_NULL: nothing is sent or received for this block
  int tag;
};
// Block i of send goes to destinations[i]; block i of recv comes from sources[i].
void neighbor_exchange(const Blocks& send, std::span<const Neighbor> destinations, const Blocks& recv,
                       std::span<const Neighbor> sources, const Communicator& comm);

// Copies count elements between buffers of possibly different layouts.
void copy_typed(const void* src, std::size_t src_count, const Datatype& src_type, void* dst, std::size_t dst_count,
                const Datatype& dst_type);

// The algorithms as tasks, for the non-blocking collectives: the arguments as
// above (buffers, datatypes, op and the arrays the Blocks and spans point
// into must outlive the task).
namespace tasks {
CollectiveTask barrier(Call call);
CollectiveTask bcast(Call call, void* buf, std::size_t count, const Datatype& type, int root);
CollectiveTask reduce(Call call, const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
                      int root);
CollectiveTask allreduce(Call call, const void* send, void* recv, std::size_t count, const Datatype& type,
                         const Op& op);
CollectiveTask scan(Call call, const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op);
CollectiveTask exscan(Call call, const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op);
CollectiveTask reduce_scatter(Call call, const void* send, void* recv, std::span<const int> counts,
                              const Datatype& type, const Op& op);
CollectiveTask gatherv(Call call, const void* send, std::size_t send_count, const Datatype& send_type, Blocks recv,
                       int root);
CollectiveTask scatterv(Call call, Blocks send, void* recv, std::size_t recv_count, const Datatype& recv_type,
                        int root);
CollectiveTask allgatherv(Call call, const void* send, std::size_t send_count, const Datatype& send_type,
                          Blocks recv);
CollectiveTask alltoallv(Call call, Blocks send, Blocks recv);
CollectiveTask alltoallv_in_place(Call call, Blocks blocks);
CollectiveTask neighbor_exchange(Call call, Blocks send, std::span<const Neighbor> destinations, Blocks recv,
                                 std::span<const Neighbor> sources);
}  // namespace tasks

// The maximum of `in` over the communicator (used to agree on context ids).
void allreduce_max_u32(const Communicator& comm, std::uint32_t in, std::uint32_t& out);

}  // namespace viastack::mpi
