// One-sided communication: windows, their memory, and every synchronization
// MPI-3.1 defines (fence; post/start/complete/wait; lock/unlock, lock_all,
// flush and sync).
//
// Creation: every member registers its window for RDMA read and write and
// tells everyone its (base, handle, size, disp_unit). MPI_Win_allocate's
// memory is the library's; MPI_Win_allocate_shared's is one segment of shared
// memory per node (window_memory.hpp). A dynamic window exposes nothing at
// creation: MPI_Win_attach registers memory, and an origin asks the target
// for its list of attached regions when an access falls outside what it last
// heard (the list is forgotten when an access epoch starts and at
// MPI_Win_sync), a target displacement being an absolute address.
//
// Data: Put is a VIA RDMA write, Get an RDMA read, both from or into the
// user's buffer through the registration cache. Accumulate, Get_accumulate,
// Fetch_and_op and Compare_and_swap are messages the target applies when they
// arrive (the fetching ones answer with the old contents): one thread at a
// time applies them, so they are atomic with respect to each other.
//
// Completion at the target: a message sent after an RDMA write or an
// accumulate travels behind it on the same ordered VI, so when the target has
// handled it, everything before it has landed. Fence sends every member an
// empty message and ends with a barrier; MPI_Win_complete sends each target
// of the access epoch a `complete`, which MPI_Win_wait counts; flush and
// unlock send a `flush` or `unlock` that the target answers.
//
// Passive target: the target keeps a lock queue per window (FIFO; shared
// locks together, an exclusive one alone) and answers a lock request with a
// grant when the lock is free. The target's CPU handles lock requests and
// accumulates, and over tcp RDMA too: while the target computes outside MPI,
// its progress agent does that (progress_agent.hpp), so an origin's unlock
// completes while the target sleeps.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "abi.hpp"
#include "comm.hpp"
#include "datatype.hpp"
#include "ops.hpp"
#include "p2p.hpp"
#include "progress_agent.hpp"
#include "window_memory.hpp"

namespace viastack::mpi {

class Runtime;
class Request;

// What a WireType::rma message asks or answers (WireHeader::rma).
enum class RmaKind : std::uint8_t {
  lock,            // tag: MPI_LOCK_EXCLUSIVE or MPI_LOCK_SHARED
  lock_granted,
  unlock,          // answered by `done` once the lock is released
  flush,           // answered by `done`
  done,
  fetch,           // a fetching accumulate: op `tag` (a Builtin), elements of kind `handle` (a Basic) at `address`
  compare_and_swap,  // payload: the new value, then the compare value
  fetched,         // the old contents at `address`, for the request `token`
  regions,         // a dynamic window's attached regions, please
  region_list,     // some of them: `token` in all, these from index `address`
  post,            // MPI_Win_post: the sender exposes its window to the receiver
  complete,        // MPI_Win_complete: the sender's accesses to the receiver are done
};

enum class WindowFlavor { create, allocate, shared, dynamic };

class Window {
 public:
  // Collective over comm. memory: the window's own (allocate, shared), or null.
  Window(void* base, std::size_t size, int disp_unit, const Communicator& comm, WindowFlavor flavor,
         std::unique_ptr<WindowMemory> memory = nullptr);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  // The window's own communicator (a duplicate of the creating one); its error handler is the window's.
  Communicator& comm() { return *comm_; }
  WindowFlavor flavor() const { return flavor_; }

  // The predefined attributes' values (MPI_WIN_BASE is the base itself, the
  // others point at values that live as long as the window).
  void* base() const { return base_; }
  MPI_Aint* size_attribute() { return &size_attribute_; }
  int* disp_unit_attribute() { return &disp_unit_; }
  int* create_flavor_attribute() { return &create_flavor_; }
  int* model_attribute() { return &memory_model_; }

  // Data movement. target is a rank of comm(), displacement in the target's
  // disp_unit (an address for a dynamic window); `bytes` contiguous bytes at
  // the origin. done, if given, completes when the operation is complete at
  // the origin (its buffers free, or its result here).
  void put(const void* origin, std::size_t bytes, int target, MPI_Aint displacement, Request* done = nullptr);
  void get(void* origin, std::size_t bytes, int target, MPI_Aint displacement, Request* done = nullptr);
  // Elements of kind `basic`, combined into the target by op.
  void accumulate(const void* origin, std::size_t bytes, Basic basic, const Op& op, int target, MPI_Aint displacement,
                  Request* done = nullptr);
  // result receives the target's old contents, which are then combined with
  // origin by op (no_op: left alone; origin may then be null).
  void get_accumulate(const void* origin, void* result, std::size_t bytes, Basic basic, Builtin op, int target,
                      MPI_Aint displacement, Request* done = nullptr);
  // One element of `element_bytes`: result gets the old value, which becomes
  // origin if it equalled compare.
  void compare_and_swap(const void* origin, const void* compare, void* result, std::size_t element_bytes, int target,
                        MPI_Aint displacement);

  // Active target.
  void fence(int assertion);
  void post(const Group& group, int assertion);
  void start(const Group& group, int assertion);
  void complete();
  void wait();
  bool test();
  // Passive target.
  void lock(int lock_type, int target, int assertion);
  void unlock(int target);
  void lock_all(int assertion);
  void unlock_all();
  void flush(int target);
  void flush_all();
  void flush_local(int target);
  void flush_local_all();
  void sync();
  // Whether a lock on target (or on all) is held: request-based operations need one.
  bool in_passive_epoch(int target) const;
  // Throws MPI_ERR_RMA_SYNC while this rank holds a lock or has an epoch
  // other than fence's open (MPI_Win_free).
  void check_no_epoch() const;

  // Dynamic windows.
  void attach(void* base, std::size_t size);
  void detach(const void* base);
  // Shared windows: where rank's memory is in this process (MPI_PROC_NULL:
  // the lowest rank with a non-zero size).
  void shared_query(int rank, MPI_Aint* size, int* disp_unit, void* baseptr) const;

  // The transport's.
  void on_message(int peer, const WireHeader& header, std::span<const std::byte> payload);
  void on_rdma_complete(Request* done);

  // What MPI_Win_get_attr answers for MPI_WIN_BASE, MPI_WIN_SIZE and MPI_WIN_DISP_UNIT.
  ompi_win_t handle{HandleKind::win, this};

 private:
  // Where a member's window is, as the members tell each other at creation.
  struct Member {
    std::uint64_t base;
    std::uint64_t size;
    std::uint32_t handle;
    std::int32_t disp_unit;
  };
  // An attached region of a dynamic window.
  struct Region {
    std::uint64_t base;
    std::uint64_t size;
    std::uint64_t handle;
  };
  // Where an access lands at the target: an address in its memory, and the registration that covers it.
  struct Place {
    std::uint64_t address;
    via::MemHandle handle;
  };
  // This rank's access to a target under passive target.
  enum class Held : std::uint8_t { none, shared, exclusive };
  struct Access {
    Held held = Held::none;
    bool nocheck = false;  // MPI_MODE_NOCHECK: no lock was asked for
  };
  // The target's lock queue for this window.
  struct LockQueue {
    int exclusive_holder = -1;
    int shared_holders = 0;
    std::deque<std::pair<int, int>> waiting;  // (origin, lock type), in arrival order
  };
  // A fetching operation waiting for its answer.
  struct Fetch {
    std::byte* result;
    std::uint64_t address;  // the target address of result's first byte
    std::size_t bytes_left;
    Request* done;
  };

  // Throws unless target may be accessed now and the range fits its window.
  Place place_of(int target, MPI_Aint displacement, std::size_t bytes);
  // The local bytes of an access that arrived; aborts the job if they are not this window's.
  std::byte* local_bytes(int peer, std::uint64_t address, std::size_t bytes) const;
  bool attached_contains(std::uint64_t address, std::size_t bytes) const;
  const Region* find_region(int target, std::uint64_t address, std::size_t bytes) const;
  void fetch_regions(int target);
  void combine(Builtin op, Basic basic, std::byte* into, std::span<const std::byte> data);
  void send_control(int target, RmaKind kind, WireHeader header = WireHeader{WireType::rma},
                    std::span<const std::byte> payload = {});
  std::uint64_t track(Request* done);

  // Lock queue (target side).
  void request_lock(int origin, int lock_type);
  void release_lock(int origin);
  void grant(int origin);
  // Origin side.
  void acquire(int target, int lock_type);
  void wait_local_completion();
  // Asks each target for `kind` (flush or unlock) and waits for every answer.
  void ask_and_wait(std::span<const int> targets, RmaKind kind);
  void forget_regions();
  void check_target(int target) const;

  Runtime& runtime_;
  std::unique_ptr<Communicator> comm_;
  WindowFlavor flavor_;
  std::unique_ptr<WindowMemory> memory_;
  std::byte* base_;
  std::size_t size_;
  MPI_Aint size_attribute_;
  int disp_unit_;
  int create_flavor_;
  int memory_model_ = MPI_WIN_UNIFIED;
  via::MemHandle registration_ = 0;  // none for an empty window or a single member
  std::vector<Member> members_;      // by rank in comm_

  // Origin side.
  std::size_t outstanding_ = 0;  // this rank's RDMA operations not yet complete
  std::unordered_map<std::uint64_t, Fetch> fetches_;
  bool fence_epoch_ = false;
  std::vector<Access> access_;  // by target
  bool lock_all_ = false, lock_all_nocheck_ = false;
  std::vector<bool> start_group_;  // by target, during an access epoch of MPI_Win_start
  bool access_epoch_ = false;
  std::vector<int> posts_;  // by target: posts heard and not yet used by a start
  std::size_t grants_ = 0;  // lock grants heard and not yet used
  std::size_t answers_ = 0; // `done` answers heard and not yet used

  // Target side.
  LockQueue locks_;
  std::vector<int> post_group_;  // the origins of the exposure epoch of MPI_Win_post
  bool exposure_epoch_ = false;
  std::size_t completes_ = 0;  // completes heard in this exposure epoch

  // Dynamic windows.
  std::vector<Region> attached_;                       // this rank's
  std::vector<std::vector<Region>> remote_regions_;    // by target, as last heard
  std::vector<std::size_t> region_list_expected_;      // by target: entries still to come
};

// The windows of this process: where RMA messages and RDMA completions find
// theirs, and the progress agent that handles them while the process is
// outside MPI.
class Windows final : public RmaClient {
 public:
  explicit Windows(P2P& p2p) : p2p_(p2p) {}
  void add(Window& window);
  void remove(Window& window);
  // An id for an RDMA operation of `window`; its completion is reported to the window with `done`.
  std::uint64_t track(Window& window, Request* done);

  void on_rma_message(int peer, const WireHeader& header, std::span<const std::byte> payload) override;
  void on_rdma_complete(std::uint64_t id) override;

 private:
  struct Tracked {
    Window* window;
    Request* done;
  };
  P2P& p2p_;
  std::unordered_map<std::uint32_t, Window*> by_context_;
  std::unordered_map<std::uint64_t, Tracked> rdma_;  // by operation id, until complete
  std::uint64_t handled_ = 0;                         // RMA messages and completions, for the agent
  std::unique_ptr<ProgressAgent> agent_;              // while a window spans processes
};

// The window behind a handle; throws MPI_ERR_WIN for MPI_WIN_NULL, freed or foreign handles.
Window& window_of(MPI_Win handle);

}  // namespace viastack::mpi
