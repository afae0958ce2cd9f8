// The memory MPI_Win_allocate and MPI_Win_allocate_shared give a window,
// released with it.
//
// A shared window's members are the ranks of one node: the lowest rank makes
// one segment of shared memory holding every member's bytes in rank order
// (contiguous, as MPI's default), every member maps it, and the segment's
// name is removed as soon as all have it, so nothing stays in /dev/shm even
// if the job is killed later. A load or store by one member is seen by the
// others directly (after MPI_Win_sync, as the unified model says).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace viastack::mpi {

class Communicator;

class WindowMemory {
 public:
  // size bytes of this process's own (page-aligned, zeroed).
  static std::unique_ptr<WindowMemory> private_block(std::size_t size);
  // Collective over comm: each member's `size` bytes in one shared segment.
  // Fails with MPI_ERR_RMA_SHARED on every member when comm spans nodes.
  static std::unique_ptr<WindowMemory> shared_segment(std::size_t size, const Communicator& comm);
  ~WindowMemory();
  WindowMemory(const WindowMemory&) = delete;
  WindowMemory& operator=(const WindowMemory&) = delete;

  bool shared() const { return shared_; }
  // Where rank's bytes are mapped in this process, and how many (a private
  // block has only this process's: rank 0).
  std::byte* base(int rank) const { return mapping_ + offsets_[std::size_t(rank)]; }
  std::size_t size(int rank) const { return offsets_[std::size_t(rank) + 1] - offsets_[std::size_t(rank)]; }

 private:
  WindowMemory(std::byte* mapping, std::size_t mapped_bytes, std::vector<std::size_t> offsets, bool shared)
      : mapping_(mapping), mapped_bytes_(mapped_bytes), offsets_(std::move(offsets)), shared_(shared) {}

  std::byte* mapping_;
  std::size_t mapped_bytes_;
  std::vector<std::size_t> offsets_;  // rank r's bytes are [offsets_[r], offsets_[r + 1])
  bool shared_;
};

}  // namespace viastack::mpi
