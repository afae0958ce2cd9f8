// Collective operations over point-to-point messages in the communicator's
// collective context: dissemination barrier, binomial-tree broadcast and
// reduce, recursive-doubling allreduce, and linear/pairwise algorithms for
// the gather/scatter/alltoall family. Buffers follow MPI's rules, with
// MPI_IN_PLACE already resolved by the caller into `send == recv`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace viastack::mpi {

class Communicator;
class Datatype;
class Op;

void barrier(const Communicator& comm);
void bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& comm);
void reduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, int root,
            const Communicator& comm);
void allreduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
               const Communicator& comm);
// Inclusive prefix reduction.
void scan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, const Communicator& comm);
void reduce_scatter_block(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
                          const Communicator& comm);

// A block description: count elements of type at displacement (in elements of type) of a buffer.
struct Blocks {
  const void* buf;
  std::span<const int> counts;  // one per rank
  std::span<const int> displs;  // one per rank, in extents of type
  const Datatype* type;
};
// Gather(v): every rank's `send` lands in root's recv block for that rank.
void gatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv, int root,
             const Communicator& comm);
void scatterv(const Blocks& send, void* recv, std::size_t recv_count, const Datatype& recv_type, int root,
              const Communicator& comm);
void allgatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv,
                const Communicator& comm);
void alltoallv(const Blocks& send, const Blocks& recv, const Communicator& comm);

// Copies count elements between buffers of possibly different layouts.
void copy_typed(const void* src, std::size_t src_count, const Datatype& src_type, void* dst, std::size_t dst_count,
                const Datatype& dst_type);

// The maximum of `in` over the communicator (used to agree on context ids).
void allreduce_max_u32(const Communicator& comm, std::uint32_t in, std::uint32_t& out);

}  // namespace viastack::mpi
