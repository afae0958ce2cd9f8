#include "providers/shm/shm_link.hpp"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <optional>

#include "engine/copy.hpp"

namespace via::shm {

namespace {

std::uint64_t total_length(const iovec* iov, std::size_t n) {
  if (n == 1) return iov[0].iov_len;  // a send of one segment: without the vectorised loop's set-up
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) total += iov[i].iov_len;
  return total;
}

void gather(std::byte* dst, const iovec* iov, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    // An empty piece copies nothing (its base may be null).
    copy_bytes(dst, static_cast<const std::byte*>(iov[i].iov_base), iov[i].iov_len);
    dst += iov[i].iov_len;
  }
}

// Maps a ring's data pages into this process's page tables now, writable:
// they exist in the segment's file from the slot's reservation, but each
// mapping of them faults on its first touch of every page. Without this the
// first pass of payloads through the data ring paid a fault on each of its
// pages on each side (1 KiB ping-pong, MPI, 200 round trips: 0.29 us a
// message against 0.15). Done once a link has carried kMapInAfterBytes
// through the data ring, not at connection: a link that carries a few
// messages (most of an all-to-all job's) keeps its small footprint (32 ranks
// mapping every peer's rings at once: VmRSS 13 -> 22 MiB). The cells, a
// quarter of the size, fault in as they are first used. Best effort: an
// older kernel (before Linux 5.14) refuses, and the pages fault in as before.
constexpr std::uint64_t kMapInAfterBytes = 64 * 1024;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14's; C libraries older than glibc 2.35 do not name it
#endif
void map_in_data(const Ring& ring) {
  const std::uintptr_t page = std::uintptr_t(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(ring.data) & ~(page - 1);  // madvise takes whole pages
  const auto end = reinterpret_cast<std::uintptr_t>(ring.data) + ring.geometry.data_bytes;
  (void)madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE);
}

// Asks for a line in a state this core may write, ahead of the write.
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" ::"m"(*static_cast<const char*>(p)));  // __builtin_prefetch(p, 1) without -mprfchw reads
#else
  __builtin_prefetch(p, 1);
#endif
}

}  // namespace

void ring_doorbell(Segment& s) {
  s.header.doorbell.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &s.header.doorbell, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void reset_rings(const Ring& ring) {
  ViSlot& slot = *ring.slot;
  for (std::uint32_t i = 0; i < ring.geometry.cells; ++i) ring.cells[i].seq.store(0, std::memory_order_relaxed);
  slot.cells_consumed.store(0, std::memory_order_relaxed);
  slot.data_consumed.store(0, std::memory_order_relaxed);
  slot.producer_waiting.store(0, std::memory_order_relaxed);
  slot.closed_by.store(kOpen, std::memory_order_release);
}

bool cma_works(const Segment& peer) {
  std::uint64_t value = 0;
  iovec local{&value, sizeof value};
  iovec remote{reinterpret_cast<void*>(peer.header.owner_base + offsetof(SegmentHeader, probe_value)), sizeof value};
  ssize_t n = process_vm_readv(peer.header.owner_pid, &local, 1, &remote, 1, 0);
  return n == sizeof value && value == peer.header.probe_value;
}

ShmLink::ShmLink(Segment& self, Ring mine, std::shared_ptr<Segment> peer, Ring theirs, bool cma)
    : self_(self),
      mine_(mine),
      peer_mapping_(std::move(peer)),
      peer_(*peer_mapping_),
      theirs_(theirs),
      cma_(cma),
      fence_(!(sleeper_fences() && peer_.header.sleeper_fences)) {}

bool ShmLink::has_room(std::uint64_t data_end) const {
  return send_pos_ - seen_cells_consumed_ < theirs_.geometry.cells &&
         data_end - seen_data_consumed_ <= theirs_.geometry.data_bytes;
}

// A frame that fits a compact cell (segment.hpp): a whole message in one
// send frame, small enough, its header nothing the compact form drops.
inline bool compact_fits(const FrameHeader& h, std::uint64_t len) {
  return h.type == kFrameSend && (h.flags & ~kFlagImmediate) == kFlagLast && len <= kCompactBytes &&
         h.length == len && h.total == len && h.offset == 0 && h.raddr == 0 && h.rhandle == 0;
}

std::uint64_t ShmLink::payload_start(std::uint64_t len) const {
  const RingGeometry& ring = theirs_.geometry;
  std::uint64_t start = send_data_pos_;
  if (ring.data_offset(start) + len > ring.data_bytes) start += ring.data_bytes - ring.data_offset(start);
  return start;
}

bool ShmLink::look_for_room(std::uint64_t data_end) {
  seen_cells_consumed_ = theirs_->cells_consumed.load(std::memory_order_acquire);
  seen_data_consumed_ = theirs_->data_consumed.load(std::memory_order_acquire);
  if (has_room(data_end)) return true;
  // Ask the consumer to ring our doorbell when it frees space, then look
  // once more: the store must come before the look, against the
  // consumer's "store what is free, look at producer_waiting" in pop().
  // Without fences of our own, that matters only on the way into a
  // sleep: a request made before the NIC announced it is ordered by the
  // membarrier that follows the announcement, one made in the last look
  // after it needs a membarrier of its own (a NIC that keeps polling
  // sees the room anyway).
  theirs_->producer_waiting.store(1, std::memory_order_relaxed);
  if (fence_)
    std::atomic_thread_fence(std::memory_order_seq_cst);
  else if (self_.header.sleeping.load(std::memory_order_relaxed))
    fence_before_sleep();
  seen_cells_consumed_ = theirs_->cells_consumed.load(std::memory_order_acquire);
  seen_data_consumed_ = theirs_->data_consumed.load(std::memory_order_acquire);
  return has_room(data_end);
}

bool ShmLink::has_room_for(std::size_t payload_bytes) {
  if (mine_->closed_by.load(std::memory_order_acquire) != kOpen) return false;
  const std::uint64_t end = payload_bytes <= kInlineBytes ? send_data_pos_ : payload_start(payload_bytes) + payload_bytes;
  return has_room(end) || look_for_room(end);
}

bool ShmLink::try_send(const FrameHeader& header, const iovec* iov, std::size_t iovcnt) {
  // Once the peer has closed, its slot may already serve another connection:
  // write nothing more there (the VI learns of the close on its slow path).
  if (mine_->closed_by.load(std::memory_order_acquire) != kOpen) return false;
  const std::uint64_t len = total_length(iov, iovcnt);
  const bool compact = compact_fits(header, len);
  const bool in_cell = compact || len <= kInlineBytes;
  const std::uint64_t start = in_cell ? send_data_pos_ : payload_start(len);
  const std::uint64_t end = in_cell ? send_data_pos_ : start + len;
  if (!has_room(end) && !look_for_room(end)) return false;
  const RingGeometry& ring = theirs_.geometry;
  Cell& cell = theirs_.cells[theirs_.geometry.cell_index(send_pos_)];
  if (compact) {
    gather(cell.compact.payload, iov, iovcnt);
    cell.form = kCompactForm | ((header.flags & kFlagImmediate) ? kCompactImmediate : 0) | std::uint32_t(len) << 16 |
                header.message;
    cell.compact.imm = header.imm;
  } else {
    if (in_cell) {
      gather(cell.full.inline_payload, iov, iovcnt);
      cell.form = 0;
    } else {
      gather(theirs_.data + ring.data_offset(start), iov, iovcnt);
      cell.form = ring.data_offset(start);
      send_data_pos_ = end;
    }
    cell.full.data_end = end;
    cell.full.header = header;
  }
  cell.seq.store(std::uint32_t(send_pos_ + 1), std::memory_order_release);
  ++send_pos_;
  // Sent one after another, frames that fit their cell fetch for writing the
  // lines of the cell after the next that a frame of this one's size would
  // take: a cell's lines were last read by the consumer, and taking each back
  // only when written left one transfer between the cores per frame in the
  // way of every later store (the slow state's 8 B bidirectional windows,
  // interleaved sends and receives: 3.1 M frames/s each way, 7.2 with this).
  // The next cell is left alone (a consumer that has caught up is reading
  // it), and so is a cell that may still hold a frame not taken. After a
  // frame taken, as in a ping-pong, nothing is fetched: that cost latency.
  if (in_cell && !took_since_send_ && send_pos_ + 2 - seen_cells_consumed_ <= ring.cells) {
    const std::size_t used = (compact ? offsetof(Cell, compact.payload) : offsetof(Cell, full.inline_payload)) + len;
    const auto* after_next = reinterpret_cast<const std::byte*>(&theirs_.cells[ring.cell_index(send_pos_ + 1)]);
    for (std::size_t line = 0; line < used; line += kLineBytes) prefetch_for_write(after_next + line);
  }
  took_since_send_ = false;
  wake(peer_, fence_);
  if (!theirs_mapped_in_ && send_data_pos_ >= kMapInAfterBytes) [[unlikely]] {
    map_in_data(theirs_);
    theirs_mapped_in_ = true;
  }
  return true;
}

bool ShmLink::peek(const FrameHeader*& header, const std::byte*& payload) {
  const Cell& cell = mine_.cells[mine_.geometry.cell_index(recv_pos_)];
  if (cell.seq.load(std::memory_order_acquire) != std::uint32_t(recv_pos_ + 1)) return false;
  // The peer can write the cell at any time: work from a private copy of the
  // header, and never trust its offsets or lengths beyond the cell's and the
  // ring's bounds.
  const std::uint32_t form = cell.form;
  header = &current_;
  current_frees_data_ = false;
  if (form & kCompactForm) {
    const std::uint32_t length = (form >> 16) & 0xFF;
    const std::uint8_t flags = kFlagLast | ((form & kCompactImmediate) ? kFlagImmediate : 0);
    current_ = FrameHeader{kFrameSend, flags, std::uint16_t(form), length, length, 0, 0, 0, cell.compact.imm};
    payload = cell.compact.payload;
    if (length > kCompactBytes) current_.type = 0;  // malformed: the engine rejects it
    return true;
  }
  current_ = cell.full.header;
  if (current_.length <= kInlineBytes) {
    payload = cell.full.inline_payload;
  } else if (form < mine_.geometry.data_bytes && current_.length <= mine_.geometry.data_bytes - form) {
    payload = mine_.data + form;
    current_frees_data_ = true;
  } else {
    current_.type = 0;  // malformed: the engine rejects it
    payload = mine_.data;
  }
  return true;
}

void ShmLink::pop() {
  const Cell& cell = mine_.cells[mine_.geometry.cell_index(recv_pos_)];
  const bool freed_data = current_frees_data_;
  took_since_send_ = true;
  if (freed_data) mine_->data_consumed.store(cell.full.data_end, std::memory_order_release);
  ++recv_pos_;
  if (!mine_mapped_in_ && freed_data && cell.full.data_end >= kMapInAfterBytes) [[unlikely]] {
    map_in_data(mine_);
    mine_mapped_in_ = true;
  }
  mine_->cells_consumed.store(recv_pos_, std::memory_order_release);
  // A producer that found the ring full waits for our doorbell. Where this
  // side fences on its own, the fence that makes the check race-free is paid
  // only now and then for small frames: a producer blocked on cells is seen
  // within 32 frames. Where not, the producer's membarriers on its way into
  // its sleep order our store and look (try_send).
  if (fence_ && (freed_data || recv_pos_ % 32 == 0)) std::atomic_thread_fence(std::memory_order_seq_cst);
  if (mine_->producer_waiting.load(std::memory_order_relaxed)) {
    mine_->producer_waiting.store(0, std::memory_order_relaxed);
    wake(peer_, fence_);
  }
}

bool ShmLink::direct_read(const iovec* local, std::size_t nlocal, const iovec* remote, std::size_t nremote) {
  const std::uint64_t want = total_length(local, nlocal);
  if (want != total_length(remote, nremote)) return false;
  ssize_t n = process_vm_readv(peer_.header.owner_pid, local, nlocal, remote, nremote, 0);
  return n >= 0 && std::uint64_t(n) == want;
}

bool ShmLink::direct_write(const iovec* local, std::size_t nlocal, const iovec* remote, std::size_t nremote) {
  const std::uint64_t want = total_length(local, nlocal);
  if (want != total_length(remote, nremote)) return false;
  ssize_t n = process_vm_writev(peer_.header.owner_pid, local, nlocal, remote, nremote, 0);
  return n >= 0 && std::uint64_t(n) == want;
}

std::uint32_t ShmLink::check_peer_region(std::uint64_t addr, std::uint64_t len, MemHandle handle, bool write) const {
  const bool vi_allows = write ? theirs_->rdma_write : theirs_->rdma_read;
  const unsigned access = write ? RegionTable::kRdmaWrite : RegionTable::kRdmaRead;
  if (!vi_allows || !peer_.regions.covers(handle, addr, len, theirs_->ptag, access)) return VIP_STATUS_RDMA_PROT_ERROR;
  return 0;
}

Link::PeerState ShmLink::peer_state() {
  auto closed = [&]() -> std::optional<PeerState> {
    switch (mine_->closed_by.load(std::memory_order_acquire)) {
      case kPeerDisconnected: return PeerState::closed;
      case kPeerFailed: return PeerState::failed;
      default: return std::nullopt;
    }
  };
  if (auto state = closed()) return *state;
  // A peer closes before it exits: one that closed and exited since the first
  // look is a closed peer, not a dead one.
  if (!process_alive(peer_.header.owner_pid, peer_.header.owner_start_time)) return closed().value_or(PeerState::dead);
  return PeerState::up;
}

void ShmLink::close(bool error) {
  theirs_->closed_by.store(error ? kPeerFailed : kPeerDisconnected, std::memory_order_release);
  wake(peer_);
}

}  // namespace via::shm
