// Layout of a shm-provider NIC's shared segment, /dev/shm/viastack.<job>/nic.<nic>.
//
// A job's segments live in a folder only their user can enter (0700), so
// another user on the machine can neither see their names nor take a name
// first; a peer's segment is mapped only if it belongs to the same user.
//
// Each NIC owns one segment. Peers map it to (1) post connection requests into
// its inbox, (2) write frames into the receive ring of the VI slot they are
// connected to, (3) read its region table before single-copy RDMA. A ring has
// one producer (the peer VI) and one consumer (the owner): cells carry a
// sequence number written last, so the consumer learns of a new frame from
// the cell itself and never reads a counter the producer writes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/frame.hpp"
#include "engine/region_table.hpp"
#include "via/bootstrap.hpp"

namespace via::shm {

inline constexpr std::uint64_t kMagic = 0x31306d6873616976ull;  // "viashm01"
inline constexpr std::uint32_t kVersion = 6;
inline constexpr std::uint32_t kMaxVi = 1024;  // slots are backed by memory only once used
// A frame's payload rides in its cell when it fits: no data-ring bytes to
// write, read and hand back, nor a fence and a store to hand them back.
inline constexpr std::uint32_t kCellBytes = 256;
inline constexpr std::uint32_t kLineBytes = 64;  // a cache line, the unit cells are fetched in
inline constexpr std::uint32_t kMaxFramePayload = 64 * 1024;
inline constexpr std::uint32_t kInboxEntries = 64;
inline constexpr std::uint32_t kMaxDiscriminator = 16;

// A cell is in one of two forms, told apart by `form`'s top bit.
// Full: any frame, its header whole; its payload inline (up to 200 bytes) or
// in the data ring. Compact: a whole message in one send frame (the commonest
// frame), its header folded into `form` and `imm`, its payload (up to 240
// bytes) from byte 16. An 8-byte MPI message (the mesh's 8-byte header, MPI's
// 16-byte eager header, the data) then takes 48 bytes: one cache line to
// write and to read, where the full form took two; when the two cores' caches
// are far apart, each line a message takes is what it costs.
inline constexpr std::uint32_t kCompactForm = 1u << 31;
inline constexpr std::uint32_t kCompactImmediate = 1u << 30;  // bits 16-23: length; 0-15: message number

struct FullCell {
  std::uint64_t data_end;  // data-ring position just past this frame's payload
  FrameHeader header;
  std::byte inline_payload[kCellBytes - 16 - sizeof(FrameHeader)];
};
struct CompactCell {
  std::uint32_t imm;
  std::uint32_t reserved;  // keeps the payload 16-byte aligned, as the full form's is 8
  std::byte payload[kCellBytes - 16];
};

struct alignas(kCellBytes) Cell {
  std::atomic<std::uint32_t> seq;  // (position + 1) once the frame is complete
  std::uint32_t form;               // compact: kCompactForm and the header; full: the payload's data-ring offset
  union {
    FullCell full;
    CompactCell compact;
  };
};
static_assert(sizeof(Cell) == kCellBytes);
static_assert(offsetof(Cell, full) == 8 && offsetof(Cell, compact) == 8);
inline constexpr std::uint32_t kInlineBytes = sizeof(FullCell::inline_payload);
inline constexpr std::uint32_t kCompactBytes = sizeof(CompactCell::payload);
static_assert(kCompactBytes < 256);  // the length's 8 bits in `form`

// A slot's word: its state and, while a request is open or was answered, the
// request's number. kSlotClosed keeps the number of the request a connection
// came from: a peer that matched it, sent and closed before the other side
// looked is told from one that withdrew its request.
enum SlotState : std::uint32_t { kSlotFree = 0, kSlotIdle, kSlotPending, kSlotConnected, kSlotRejected, kSlotClosed };
inline std::uint64_t slot_word(SlotState s, std::uint64_t request) { return (request << 8) | s; }
inline SlotState slot_state(std::uint64_t word) { return SlotState(word & 0xFF); }
// The word a slot is left with when its VI leaves `word`'s state for `next`.
inline std::uint64_t slot_word_after(std::uint64_t word, SlotState next) {
  const SlotState state = slot_state(word);
  return state == kSlotConnected || state == kSlotClosed ? slot_word(kSlotClosed, word >> 8) : slot_word(next, 0);
}

enum ClosedBy : std::uint32_t { kOpen = 0, kPeerDisconnected = 1, kPeerFailed = 2 };

struct alignas(kCellBytes) ViSlot {
  // Connection state: SlotState in the low byte, the pending request's id above.
  // An accepting server moves it Pending -> Connected/Rejected by compare-and-swap.
  std::atomic<std::uint64_t> state_word;
  std::uint32_t generation;
  // What a peer checks before single-copy RDMA into this VI's memory.
  std::uint32_t ptag;
  std::uint32_t rdma_write;
  std::uint32_t rdma_read;
  // Filled in by the server that accepts this slot's request.
  std::uint32_t peer_nic;
  std::uint32_t peer_slot;
  std::uint16_t peer_reliability;
  std::uint8_t peer_rdma_write;
  std::uint8_t peer_rdma_read;
  std::uint32_t peer_max_transfer;
  alignas(64) std::atomic<std::uint32_t> closed_by;  // written by the peer
  std::atomic<std::uint32_t> producer_waiting;       // the peer found the ring full
  alignas(64) std::atomic<std::uint64_t> cells_consumed;  // written by the owner
  alignas(64) std::atomic<std::uint64_t> data_consumed;   // written by the owner
  // A shared single-copy read this VI made (frame.hpp: read_claim_word):
  // offered by the owner, claimed by the peer or taken back by the owner.
  // Never reset, so that read numbers are unique over the slot's life.
  // Rarely touched (reads of hundreds of KiB), so it shares a line.
  std::atomic<std::uint64_t> read_claim;
  // Reads this VI asked its peer to serve through the rings and may take back
  // (frame.hpp: kFlagWithdrawable), by read number modulo their count; never
  // reset either. Touched twice a read, by each end once: a line of their own.
  alignas(64) std::atomic<std::uint64_t> ring_read_claims[8];
  // The slot's rings follow: RingGeometry::cells cells, then the data ring.
};

// How large each VI's rings are: frames in flight (cells) and the payload
// ring's bytes. A NIC with few local peers gets deep rings for bandwidth; a
// node crowded with ranks gets small ones, so that each pair of them can
// connect within /dev/shm (a frame's payload is at most half the ring).
struct RingGeometry {
  std::uint32_t cells;
  std::uint32_t data_bytes;

  static constexpr std::uint32_t kMinCells = 32, kMaxCells = 256;
  static constexpr std::uint32_t kMinData = 16 * 1024, kMaxData = 256 * 1024;
  // The geometry for a node running `local_ranks` ranks of the job.
  static RingGeometry for_local_ranks(int local_ranks);
  // Powers of two within the bounds above (a peer's header is checked with it).
  bool valid() const;
  // One VI slot: its fixed part, its cells and its data ring.
  std::size_t slot_bytes() const { return sizeof(ViSlot) + std::size_t(cells) * kCellBytes + data_bytes; }
  std::uint32_t max_frame_payload() const { return std::min(kMaxFramePayload, data_bytes / 2); }
  // Where ring position `pos` falls (both sizes are powers of two).
  std::uint32_t cell_index(std::uint64_t pos) const { return std::uint32_t(pos) & (cells - 1); }
  std::uint32_t data_offset(std::uint64_t pos) const { return std::uint32_t(pos) & (data_bytes - 1); }
};

// A view of one VI slot and its rings, in this process's mapping.
struct Ring {
  ViSlot* slot = nullptr;
  Cell* cells = nullptr;
  std::byte* data = nullptr;
  RingGeometry geometry{};
  ViSlot* operator->() const { return slot; }
};

enum ControlType : std::uint8_t { kControlConnect = 1, kControlPeer = 2 };

struct ControlMessage {
  std::uint8_t type;
  std::uint8_t local_disc_len;   // the sender's own discriminator
  std::uint8_t target_disc_len;  // the discriminator it wants to reach here
  std::uint8_t rdma_write;
  std::uint8_t rdma_read;
  std::uint8_t pad;
  std::uint16_t reliability;
  std::uint32_t from_nic;
  std::uint32_t from_slot;
  std::uint32_t from_generation;
  std::uint32_t max_transfer;
  std::uint64_t request;
  std::uint8_t local_disc[kMaxDiscriminator];
  std::uint8_t target_disc[kMaxDiscriminator];
};

// Multi-producer inbox (a bounded queue with per-entry sequence numbers):
// producers claim a position by compare-and-swap, the owner consumes.
struct alignas(128) InboxEntry {
  std::atomic<std::uint64_t> seq;
  ControlMessage message;
};

struct SegmentHeader {
  std::atomic<std::uint64_t> magic;  // written last when the segment is ready
  std::uint32_t version;
  std::uint32_t nic_id;
  std::int32_t owner_pid;
  std::uint32_t owner_pid_namespace;  // the inode of the owner's pid namespace: its pid means nothing elsewhere
  std::uint64_t owner_start_time;     // with the pid, identifies the owner across pid reuse
  std::uint64_t owner_base;        // the owner's mapping address of this segment
  std::uint64_t probe_value;       // read through CMA to learn whether CMA works
  std::uint64_t segment_size;
  RingGeometry rings;  // of every VI slot in this segment
  // The owner runs membarrier before it sleeps (sleeper_fences below);
  // 0 in older segments, whose peers then fence on every frame.
  std::uint32_t sleeper_fences;
  alignas(64) std::atomic<std::uint32_t> sleeping;  // the owner is (about to be) asleep
  alignas(64) std::atomic<std::uint32_t> doorbell;  // futex word peers bump to wake it
  alignas(64) std::atomic<std::uint64_t> inbox_write;
};

struct Segment {
  SegmentHeader header;
  InboxEntry inbox[kInboxEntries];
  RegionTable regions;
  // kMaxVi VI slots follow, from kSlotsOffset on, header.rings.slot_bytes() apart.
  Ring ring(std::uint32_t slot);
};
// Where the slots start: the fixed part is reserved at creation, slots when used.
inline constexpr std::size_t kSlotsOffset = (sizeof(Segment) + 4095) / 4096 * 4096;
inline std::size_t segment_bytes(RingGeometry g) { return kSlotsOffset + std::size_t(kMaxVi) * g.slot_bytes(); }

inline Ring Segment::ring(std::uint32_t slot) {
  const RingGeometry g = header.rings;
  auto* base = reinterpret_cast<std::byte*>(this) + kSlotsOffset + std::size_t(slot) * g.slot_bytes();
  auto* s = reinterpret_cast<ViSlot*>(base);
  auto* cells = reinterpret_cast<Cell*>(base + sizeof(ViSlot));
  return Ring{s, cells, reinterpret_cast<std::byte*>(cells + g.cells), g};
}

// Asymmetric fences. A sender stores its frame, then looks at the receiver's
// `sleeping` flag; a receiver about to sleep stores that flag, then looks at
// its rings. Each side needs its store ordered before its load, or both may
// miss the other (x86 lets a load overtake an earlier store to another
// location); the same goes for a producer that asks for a doorbell when room
// is made (`producer_waiting`) and the consumer that makes it. A full fence on
// every frame stalls the sender until its stores have reached the other core,
// which cut the small-message rate by a fifth or more; so the side that
// rarely needs it pays instead: a NIC on its way into its sleep runs
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), which puts a full fence into
// every running thread of the processes registered for it, after announcing
// the sleep and again after any request for a doorbell its last look makes
// (ShmLink::try_send). The two calls are via's (via/bootstrap.hpp), the MPI
// library's shared-memory collectives use them too: sleeper_fences() says
// whether this process is registered (links between two registered processes
// leave their per-frame fences to the sleeper), fence_before_sleep() is that
// membarrier, or a full fence where this process is not registered.
// Whether a membarrier failed after registering (not known to happen): peers
// may then go unseen, so sleeps are kept short.
bool sleeper_fences_failed();

// The folder holding a job's segments, "/dev/shm/viastack.<job>", job being the bootstrap's job id.
std::string job_directory(const std::string& job);
// Creates the job's folder unless it exists, and checks that it is a folder of
// this user's that no other user may enter; false with the reason otherwise.
bool prepare_job_directory(const std::string& job, std::string& error);
// Removes the job's folder and every segment in it (viarun, after the job).
void remove_job_directory(const std::string& job);
// Removes the folders of this user's other jobs whose segments' owners have
// all ended (in this pid namespace): what jobs whose every process was
// SIGKILLed left, as nobody of theirs could. An empty folder goes only once
// untouched for 2 s (a job may be about to create its segments in it).
// Called by a process's first NIC; `job` is its own, left alone.
void remove_dead_jobs(const std::string& job);
// The start time of a process (from /proc), 0 if it does not exist or has
// ended (a zombie). Async-signal-safe.
std::uint64_t process_start_time(int pid);
// Alive: the same process (by start time) and not a zombie. Async-signal-safe.
bool process_alive(int pid, std::uint64_t start_time);

// This NIC's own segment, created in place of a stale one. The space of its
// header, inbox and region table is reserved at once (a full /dev/shm is an
// error here, never a SIGBUS later); a VI slot's space is reserved when the
// slot is first used (reserve_slot). `fd` stays open for that.
Segment* create_segment(const std::string& job, std::uint32_t nic, RingGeometry rings, int& fd, std::string& error);
// Reserves the space of VI slot `slot`; false with the reason if /dev/shm is full.
bool reserve_slot(int fd, RingGeometry rings, std::uint32_t slot, std::string& error);
// Maps a live peer's segment, if it is this user's; `inode` identifies this incarnation of the name.
Segment* open_segment(const std::string& job, std::uint32_t nic, std::uint64_t& inode);
// The inode currently behind a NIC's segment name, 0 if there is none: a NIC
// closed and opened again keeps its name but gets a new file.
std::uint64_t segment_inode(const std::string& job, std::uint32_t nic);
void unmap_segment(Segment* s);  // of either kind
// Removes this NIC's segment, and those of the job's NICs whose owners died;
// the job's folder goes with the last.
void remove_segment(const std::string& job, std::uint32_t nic);
// Removes every segment this process created, and those of its jobs' NICs
// whose owners died, for a process about to end without exit handlers
// (async-signal-safe; its NICs are dead afterwards).
void remove_owned_segments();
// Removes every segment of the jobs this process has NICs in, on this node,
// its peers' too, and the jobs' folders: for a process that ends the whole
// job, since a launcher may end the other ranks with SIGKILL (Hydra does).
// Async-signal-safe; the NICs are dead afterwards.
void remove_job_segments();

}  // namespace via::shm
