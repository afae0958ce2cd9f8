// Blocking collectives among the ranks of one node through shared memory, as
// Open MPI's coll/sm and MPICH's shared-memory collectives do: no message,
// no matching, no copy through a ring; each rank copies its contribution into
// its slot of a segment every member maps, raises a flag, and reads the
// others' slots once their flags say the data is there.
//
// Used only where it pays and where every member decides alike from what all
// of them know: an intracommunicator of 2 to kMaxRanks ranks, all on one node,
// over the shm or mixed provider (tcp is kept for what it is tested for), and
// at most kSlotBytes of data per rank (the switch point; larger calls keep the
// point-to-point algorithms of collectives.hpp), but for gather(v),
// scatter(v) and alltoallv, which send a larger block as a message, and
// bcast, allreduce and allgather(v), which stage larger data in large areas
// (kLargeBytes; a bcast between two members from 64 KiB, or above half of
// one, goes as one message). Reductions need a contiguous
// datatype (the op works on the slots in place) and a commutative op (a
// non-commutative one keeps the bracketing of the point-to-point algorithms,
// which the non-blocking calls share); the other calls pack and unpack any
// datatype. The non-blocking collectives keep the point-to-point path.
//
// The segment is made at the communicator's first call that qualifies (a
// collective call itself: WindowMemory::shared_segment, whose name is gone
// from /dev/shm as soon as every member mapped it), and unmapped when the
// communicator is freed. If it cannot be made, every member learns so and the
// communicator keeps the point-to-point algorithms.
//
// Flags are call numbers that only grow (each member counts its calls on the
// communicator alike), so a flag of an earlier call is never mistaken for a
// later one. Each slot has 64 buffers, used by calls in turn; a member
// writes a buffer again only once every member has finished the call that
// last used it (its `done` number), so a root that runs ahead of its readers
// (bcast, reduce's leaves) waits there instead of overwriting what they read.
//
// Waits go through the point-to-point wait (P2P::wait_until), so they follow
// the same policy as every other wait (spin for VIASTACK_SPIN_US, none on an
// oversubscribed node; yield; then sleep in the kernel) and keep the
// point-to-point traffic and the non-blocking collectives moving. A waiter
// that may be asleep says so in its slot; whoever raises a flag then sends it
// an empty message, whose arrival wakes it. A waiter that has waited long
// checks that every member's process still lives, and ends the job if one
// ended (as the point-to-point path does when a peer's connection fails).
#pragma once

#include <cstddef>
#include <span>

namespace viastack::mpi {

class Communicator;
class Datatype;
class Op;
struct Blocks;

namespace node_collectives {

inline constexpr int kMaxRanks = 16;
inline constexpr std::size_t kSlotBytes = 8192;
// Bcast, allreduce and allgather(v) above kSlotBytes stage data in a member's
// large areas of this size (bcast and allreduce in pieces of it; allgather(v)
// only when every block fits).
inline constexpr std::size_t kLargeBytes = std::size_t{1} << 20;

// Each returns false, having done nothing, when the call is not for shared
// memory (above); the caller then runs the point-to-point algorithm. The
// arguments are as for the functions of collectives.hpp, MPI_IN_PLACE
// resolved into send == recv (or into the root's own block).
bool barrier(const Communicator& comm);
// MPI_Bcast at any size: the root's size decides for every member (above
// kSlotBytes the root stages the data in its large areas, or between two
// members from 64 KiB, or 512 KiB, sends it as a message), so a receiver
// whose buffer is smaller gets MPI_ERR_TRUNCATE whichever way the data goes.
bool bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& comm);
bool reduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, int root,
            const Communicator& comm);
// MPI_Allreduce at any size: above kSlotBytes a shared-memory reduce-scatter
// and allgather (node_collectives.cpp's allreduce_large).
bool allreduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
               const Communicator& comm);
// MPI_Gather(v) and MPI_Scatter(v), at any size: a block above kSlotBytes goes
// as a message of its own, which the side that knows its size (the sender of
// a gather, the root of a scatter) says in the size it posts.
bool gather(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv, int root,
            const Communicator& comm);
bool scatter(const Blocks& send, void* recv, std::size_t recv_count, const Datatype& recv_type, int root,
             const Communicator& comm);
// MPI_Allgather(v): every rank knows every block's size; blocks of up to kLargeBytes.
bool allgatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv,
                const Communicator& comm);
// MPI_Alltoall, not in place: every block the same size (not the v and w
// variants, whose sizes a rank knows only for its own blocks); at most
// kSlotBytes of data per rank in all.
bool alltoall(const Blocks& send, const Blocks& recv, const Communicator& comm);
// MPI_Alltoallv, not in place, at any size: each sender
// puts a table of where its blocks are at the start of its buffer, then the
// blocks in rank order while they fit; one that does not goes as a message,
// which the table says.
bool alltoallv(const Blocks& send, const Blocks& recv, const Communicator& comm);
// MPI_Scan (inclusive) and MPI_Exscan: rank r folds the vectors of ranks 0..r
// (0..r-1) in rank order.
bool scan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, bool inclusive,
          const Communicator& comm);
// MPI_Reduce_scatter(_block): every rank knows every count; at most kSlotBytes
// of input per rank.
bool reduce_scatter(const void* send, void* recv, std::span<const int> counts, const Datatype& type, const Op& op,
                    const Communicator& comm);

}  // namespace node_collectives

// A communicator's segment and call count (node_collectives.cpp), made on first use.
class NodeCollectives;

}  // namespace viastack::mpi
