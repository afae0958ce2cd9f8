// One-sided communication: windows with fence synchronization.
//
// MPI_Win_create registers every member's window for RDMA read and write and
// tells everyone every (base, handle, size, disp_unit). Put is a VIA RDMA
// write, Get an RDMA read, both from or into the user's buffer through the
// registration cache. Accumulate is a message the target applies when it
// arrives: progress is single-threaded, so updates never interleave.
//
// A fence waits until this rank's RDMA operations on the window are complete
// locally, then sends every member a message: it travels behind the RDMA
// writes and accumulate messages on the same ordered VI, so when a rank has
// heard from every member, everything aimed at its window has landed. A
// barrier then keeps anyone from reading a window before its owner has heard.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "abi.hpp"
#include "comm.hpp"
#include "datatype.hpp"
#include "ops.hpp"
#include "p2p.hpp"

namespace viastack::mpi {

class Runtime;

class Window {
 public:
  // Collective over comm.
  Window(void* base, std::size_t size, int disp_unit, const Communicator& comm);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  // The window's own communicator (a duplicate of the creating one); its error handler is the window's.
  Communicator& comm() { return *comm_; }

  // target is a rank of comm(), displacement in the target's disp_unit; the
  // origin buffer holds `bytes` contiguous bytes.
  void put(const void* origin, std::size_t bytes, int target, MPI_Aint displacement);
  void get(void* origin, std::size_t bytes, int target, MPI_Aint displacement);
  // Elements of kind `basic`, combined into the target by op.
  void accumulate(const void* origin, std::size_t bytes, Basic basic, const Op& op, int target, MPI_Aint displacement);
  // Collective: completes the epoch's operations, and opens the next epoch
  // unless MPI_MODE_NOSUCCEED (after which the window may be deleted).
  void fence(int assertion);

  // An accumulate message for this window.
  void on_accumulate(const WireHeader& header, std::span<const std::byte> payload);
  void on_rdma_complete() { --outstanding_; }

  // What MPI_Win_get_attr answers for MPI_WIN_BASE, MPI_WIN_SIZE and MPI_WIN_DISP_UNIT.
  void* base() const { return base_; }
  MPI_Aint* size_attribute() { return &size_attribute_; }
  int* disp_unit_attribute() { return &disp_unit_attribute_; }

  ompi_win_t handle{HandleKind::win, this};

 private:
  // Where a member's window is, as the members tell each other at creation.
  struct Member {
    std::uint64_t base;
    std::uint64_t size;
    std::uint32_t handle;
    std::int32_t disp_unit;
  };
  // The byte offset of an access to target's window; throws unless an epoch is open and the range fits.
  std::uint64_t target_offset(int target, MPI_Aint displacement, std::size_t bytes) const;
  void combine(Builtin op, Basic basic, std::uint64_t offset, std::span<const std::byte> data);

  Runtime& runtime_;
  std::unique_ptr<Communicator> comm_;
  std::byte* base_;
  std::size_t size_;
  via::MemHandle registration_ = 0;  // none for an empty window or a single member
  std::vector<Member> members_;      // by rank in comm_
  std::size_t outstanding_ = 0;      // this rank's RDMA operations not yet complete
  bool epoch_open_ = false;
  MPI_Aint size_attribute_;
  int disp_unit_attribute_;
};

// The windows of this process: where accumulate messages and RDMA completions find theirs.
class Windows final : public RmaClient {
 public:
  explicit Windows(P2P& p2p) : p2p_(p2p) {}
  void add(Window& window);
  void remove(Window& window);
  // An id for an RDMA operation of `window`; its completion is reported to the window.
  std::uint64_t track(Window& window);

  void on_accumulate(int peer, const WireHeader& header, std::span<const std::byte> payload) override;
  void on_rdma_complete(std::uint64_t id) override;

 private:
  P2P& p2p_;
  std::unordered_map<std::uint32_t, Window*> by_context_;
  std::unordered_map<std::uint64_t, Window*> rdma_;  // by operation id, until complete
};

// The window behind a handle; throws MPI_ERR_WIN for MPI_WIN_NULL, freed or foreign handles.
Window& window_of(MPI_Win handle);

}  // namespace viastack::mpi
