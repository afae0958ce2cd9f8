// One end of a shm connection: frames out through the ring of the peer's VI
// slot, frames in through this VI's own slot, single copy through Linux CMA.
#pragma once

#include <memory>

#include "providers/provider.hpp"
#include "providers/shm/segment.hpp"

namespace via::shm {

class ShmLink final : public Link {
 public:
  // `self`: this NIC's segment; `mine`: this VI's slot in it; `theirs`: the
  // peer VI's slot in the peer's segment, which the link keeps mapped for as
  // long as it lives.
  ShmLink(Segment& self, Ring mine, std::shared_ptr<Segment> peer, Ring theirs, bool cma);
  const char* transport() const override { return "shm"; }
  // A frame must fit the peer's data ring twice over (payloads do not wrap).
  std::size_t max_payload() const override { return theirs_.geometry.max_frame_payload(); }
  bool try_send(const FrameHeader& header, const iovec* iov, std::size_t iovcnt) override;
  bool has_room_for(std::size_t payload_bytes) override;
  std::uint64_t frames_taken_by_peer() const override {
    return theirs_->cells_consumed.load(std::memory_order_relaxed);
  }
  bool peek(const FrameHeader*& header, const std::byte*& payload) override;
  void pop() override;
  bool direct() const override { return cma_; }
  bool direct_read(const iovec* local, std::size_t nlocal, const iovec* remote, std::size_t nremote) override;
  bool direct_write(const iovec* local, std::size_t nlocal, const iovec* remote, std::size_t nremote) override;
  std::atomic<std::uint64_t>* own_read_claim() override { return &mine_->read_claim; }
  // None once the peer closed: its slot may serve another connection's reads.
  std::atomic<std::uint64_t>* peer_read_claim() override {
    return mine_->closed_by.load(std::memory_order_acquire) == kOpen ? &theirs_->read_claim : nullptr;
  }
  std::span<std::atomic<std::uint64_t>> own_ring_read_claims() override { return mine_->ring_read_claims; }
  std::span<std::atomic<std::uint64_t>> peer_ring_read_claims() override {
    if (mine_->closed_by.load(std::memory_order_acquire) != kOpen) return {};
    return theirs_->ring_read_claims;
  }
  bool peer_alive() override { return process_alive(peer_.header.owner_pid, peer_.header.owner_start_time); }
  std::uint32_t check_peer_region(std::uint64_t addr, std::uint64_t len, MemHandle handle, bool write) const override;
  PeerState peer_state() override;
  void close(bool error) override;

 private:
  bool has_room(std::uint64_t data_end) const;
  // has_room after a fresh look at what the consumer freed; if still none,
  // asks it to ring our doorbell when it frees some.
  bool look_for_room(std::uint64_t data_end);
  // Where a payload of len bytes that does not ride in its cell starts in
  // the data ring: payloads are contiguous, so one that does not fit the
  // ring's tail skips it.
  std::uint64_t payload_start(std::uint64_t len) const;

  Segment& self_;
  const Ring mine_;
  std::shared_ptr<Segment> peer_mapping_;
  Segment& peer_;
  const Ring theirs_;
  const bool cma_;
  // Whether each frame sent or taken fences on its own: unless both ends are
  // registered for the sleeper's membarrier.
  const bool fence_;
  // Producer side (into theirs_).
  std::uint64_t send_pos_ = 0;
  std::uint64_t send_data_pos_ = 0;
  std::uint64_t seen_cells_consumed_ = 0;
  std::uint64_t seen_data_consumed_ = 0;
  // Whether a frame was taken from mine_ since the last one sent: if not,
  // sends come one after another, and the cells ahead are worth fetching.
  bool took_since_send_ = true;
  // Consumer side (from mine_).
  std::uint64_t recv_pos_ = 0;
  // Whether each ring's data pages are in this process's page tables yet
  // (map_in_data, once the link has carried kMapInAfterBytes of payload that way).
  bool mine_mapped_in_ = false, theirs_mapped_in_ = false;
  FrameHeader current_{};  // the peeked frame's header, copied out of shared memory
  bool current_frees_data_ = false;  // its payload is in the data ring, handed back by pop()
};

// Sets a slot's rings back to empty, for a new connection.
void reset_rings(const Ring& ring);
// Whether process_vm_readv reaches the owner of `peer` (ptrace rules permitting).
bool cma_works(const Segment& peer);
// Wakes the owner of a segment.
void ring_doorbell(Segment& s);

// Wakes the owner of a segment if it announced that it sleeps. Inline: every
// frame sent pays for it, and mostly nobody sleeps. `fence`: whether this side
// must order its earlier stores before the look itself (see sleeper_fences).
inline void wake(Segment& s, bool fence = true) {
  if (fence) std::atomic_thread_fence(std::memory_order_seq_cst);
  if (s.header.sleeping.load(std::memory_order_relaxed)) [[unlikely]]
    ring_doorbell(s);
}

}  // namespace via::shm
