// The mesh's messages, RDMA and completions. Completions are read from the
// descriptors of each VI's queues, oldest first, rather than through a
// completion queue, and a handled receive buffer is re-posted by the next
// poll: both keep work off the path from a message's arrival to its handler.
#include <algorithm>
#include <cstring>

#include "engine/engine.hpp"
#include "mesh_peer.hpp"
#include "via/copy.hpp"
#include "via/log.hpp"

namespace via {

using namespace mesh_detail;

namespace {

constexpr std::size_t kRdmaChunk = 256u << 20;  // below the VI's maximum transfer

// A descriptor of one segment; the unused second segment is left as it is.
void set_single_segment(VIP_DESCRIPTOR* d, std::byte* buffer, std::uint32_t length, MemHandle handle) {
  d->CS = VIP_CONTROL_SEGMENT{};
  d->CS.SegCount = 1;
  d->CS.Length = length;
  d->DS[0].Local = VIP_DATA_SEGMENT{};
  d->DS[0].Local.Data.Address = buffer;
  d->DS[0].Local.Handle = handle;
  d->DS[0].Local.Length = length;
}

}  // namespace

VIP_DESCRIPTOR* Mesh::send_descriptor(std::size_t index) {
  return reinterpret_cast<VIP_DESCRIPTOR*>(arena_.get() + index * kDescriptorBytes);
}

std::byte* Mesh::bounce_buffer(std::uint32_t index) {
  return arena_.get() + options_.send_descriptors * kDescriptorBytes + std::size_t(index) * slot_bytes_;
}

VIP_DESCRIPTOR* Mesh::receive_descriptor(const Peer& p, std::uint32_t slot) {
  return reinterpret_cast<VIP_DESCRIPTOR*>(p.receive_block.get() + std::size_t(slot) * kDescriptorBytes);
}

std::uint32_t Mesh::receive_slot(const Peer& p, const VIP_DESCRIPTOR* d) {
  return std::uint32_t((reinterpret_cast<const std::byte*>(d) - p.receive_block.get()) / kDescriptorBytes);
}

std::byte* Mesh::receive_buffer(const Peer& p, std::uint32_t slot) {
  return p.receive_block.get() + receives_per_peer_ * kDescriptorBytes + std::size_t(slot) * slot_bytes_;
}

bool Mesh::post_receive(Peer& p, std::uint32_t slot) {
  VIP_DESCRIPTOR* d = receive_descriptor(p, slot);
  set_single_segment(d, receive_buffer(p, slot), std::uint32_t(slot_bytes_), p.receive_handle);
  if (p.vi->post_recv(d, p.receive_handle) != Result::success) return false;
  p.receives.push(slot);
  return true;
}

Mesh::Sent Mesh::send(int rank, std::span<const std::byte> head, std::span<const std::byte> body) {
  const bool fits = head.size() + body.size() <= options_.message_bytes;
  // The common case first, in as few steps as it takes: a connected peer
  // with nothing waiting before this message.
  if (Peer* known = unsigned(rank) < peers_.size() ? peers_[std::size_t(rank)].get() : nullptr;
      known && known->connected && !known->failed && !known->closed && known->backlog.empty() && fits &&
      try_send(*known, false, head, body))
    return Sent::now;
  return send_waiting(rank, head, body);
}

// send()'s other ways, out of line: its common case then saves no registers for them.
[[gnu::noinline]] Mesh::Sent Mesh::send_waiting(int rank, std::span<const std::byte> head,
                                                std::span<const std::byte> body) {
  const bool fits = head.size() + body.size() <= options_.message_bytes;
  if (!reachable(rank) || !fits) {
    ++counters_.dropped;
    return Sent::dropped;
  }
  Peer& p = peer(rank);
  if (p.failed) {
    ++counters_.dropped;
    return Sent::dropped;
  }
  if (p.connected && p.backlog.empty() && try_send(p, false, head, body)) return Sent::now;
  if (options_.backlog_limit && p.backlog.size() >= options_.backlog_limit) {
    ++counters_.dropped;
    return Sent::dropped;
  }
  Queued& q = p.backlog.emplace_back();
  q.bytes.reserve(head.size() + body.size());
  q.bytes.insert(q.bytes.end(), head.begin(), head.end());
  q.bytes.insert(q.bytes.end(), body.begin(), body.end());
  ++counters_.queued;
  backlogged_ = true;
  return Sent::queued;
}

Mesh::Sent Mesh::send_registered(int rank, std::span<const std::byte> bytes, MemHandle handle, std::uint64_t token) {
  Peer* p = unsigned(rank) < peers_.size() ? peers_[std::size_t(rank)].get() : nullptr;
  if (!p || !p->connected || p->failed || p->closed || !p->backlog.empty()) return send(rank, bytes);
  if (bytes.size() < copied_registered_limit_) {
    // What send() would do with it (no header, no credit to take or return),
    // without its checks again: the path of every small message.
    const iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
    if (p->vi->send_inline(&iov, bytes.empty() ? 0 : 1) != Result::success) [[unlikely]]
      return send(p->rank, {static_cast<const std::byte*>(iov.iov_base), iov.iov_len});
    ++counters_.inline_sends;
    return Sent::now;
  }
  return post_registered(*p, bytes, handle, token);
}

bool Mesh::send_whole(int rank, std::span<const std::byte> head, std::span<const std::byte> body) {
  Peer* p = unsigned(rank) < peers_.size() ? peers_[std::size_t(rank)].get() : nullptr;
  if (!p || !p->connected || p->failed || p->closed || !p->backlog.empty() || header_bytes_ ||
      !options_.consume_in_place)
    return false;
  const iovec iov[2] = {{const_cast<std::byte*>(head.data()), head.size()},
                        {const_cast<std::byte*>(body.data()), body.size()}};
  if (impl(*p->vi).send_inline(iov, 2, head.size() + body.size()) != Result::success) return false;
  ++counters_.inline_sends;
  return true;
}

// Out of line: send_registered's common case then saves no registers for it.
[[gnu::noinline]] Mesh::Sent Mesh::post_registered(Peer& p, std::span<const std::byte> bytes, MemHandle handle,
                                                   std::uint64_t token) {
  if (header_bytes_ || bytes.size() > options_.message_bytes) return send(p.rank, bytes);
  if (free_send_descriptors_.empty()) reclaim_sends(p);
  if (free_send_descriptors_.empty()) return send(p.rank, bytes);
  const std::uint32_t index = free_send_descriptors_.back();
  free_send_descriptors_.pop_back();
  send_slots_[index] = SendSlot{SendSlot::kNoBounce, token, false, true, 0};
  VIP_DESCRIPTOR* d = send_descriptor(index);
  set_single_segment(d, const_cast<std::byte*>(bytes.data()), std::uint32_t(bytes.size()), handle);
  if (p.vi->post_send(d, arena_handle_) != Result::success) {
    free_send_descriptors_.push_back(index);
    return send(p.rank, bytes);  // the VI is gone: dropped with the peer
  }
  ++counters_.registered_sends;
  p.sends.push(index);
  return Sent::posted;
}

// False when it must wait: no credit, or no descriptor or bounce buffer.
// Inline: what send() does for nearly every message.
[[gnu::always_inline]] inline bool Mesh::try_send(Peer& p, bool credit_only, std::span<const std::byte> head,
                                                  std::span<const std::byte> body) {
  const bool needs_credit = options_.flow_control && !credit_only;
  if (needs_credit && p.send_credits == 0) return false;
  if (p.closed || p.failed) return true;  // nothing the peer could still want
  MeshFrameHeader h{};
  h.credits = std::uint16_t(std::min<std::uint32_t>(p.owed_credits, 0xFFFF));
  h.kind = credit_only ? MeshFrameHeader::credit : MeshFrameHeader::data;
  // A message of one frame leaves at once, copied by the VI from the
  // caller's memory straight into the link (the shm ring); the rest, and any
  // the link has no room for now, go through a bounce buffer and a
  // descriptor: one copy more, and the descriptor's work. send_inline itself
  // refuses a message longer than a frame: no call to ask it first.
  const std::size_t length = header_bytes_ + head.size() + body.size();
  iovec iov[3];
  std::size_t parts = 0;
  if (header_bytes_) iov[parts++] = {&h, header_bytes_};
  if (!head.empty()) iov[parts++] = {const_cast<std::byte*>(head.data()), head.size()};
  if (!body.empty()) iov[parts++] = {const_cast<std::byte*>(body.data()), body.size()};
  if (impl(*p.vi).send_inline(iov, parts, length) == Result::success) {
    settle_send(p, h, needs_credit);
    ++counters_.inline_sends;
    return true;
  }
  return send_bounced(p, h, needs_credit, head, body);
}

// Once a message is on its way: the credits it returns are paid, and it
// holds one of ours.
void Mesh::settle_send(Peer& p, const MeshFrameHeader& h, bool needs_credit) {
  p.owed_credits -= h.credits;
  if (needs_credit) --p.send_credits;
}

// try_send's way through a bounce buffer and a descriptor, out of line.
[[gnu::noinline]] bool Mesh::send_bounced(Peer& p, const MeshFrameHeader& h, bool needs_credit,
                                          std::span<const std::byte> head, std::span<const std::byte> body) {
  const std::size_t length = header_bytes_ + head.size() + body.size();
  if (free_send_descriptors_.empty() || free_bounces_.empty()) reclaim_sends(p);
  if (free_send_descriptors_.empty() || free_bounces_.empty()) return false;
  const std::uint32_t index = free_send_descriptors_.back();
  free_send_descriptors_.pop_back();
  const std::uint32_t bounce = free_bounces_.back();
  free_bounces_.pop_back();
  send_slots_[index] = SendSlot{bounce, 0, false, false, 0};
  settle_send(p, h, needs_credit);
  std::byte* buf = bounce_buffer(bounce);
  std::memcpy(buf, &h, header_bytes_);
  if (!head.empty()) std::memcpy(buf + header_bytes_, head.data(), head.size());
  if (!body.empty()) copy_memory(buf + header_bytes_ + head.size(), body.data(), body.size());
  VIP_DESCRIPTOR* d = send_descriptor(index);
  set_single_segment(d, buf, std::uint32_t(length), arena_handle_);
  if (const Result r = p.vi->post_send(d, arena_handle_); r != Result::success) {
    free_send_descriptors_.push_back(index);
    free_bounces_.push_back(bounce);
    fail_peer(p, std::string("posting a send: ") + describe(r));
    return true;
  }
  ++counters_.bounce_sends;
  p.sends.push(index);
  return true;
}

void Mesh::read(int peer, void* local, std::size_t len, std::uint64_t remote_address, MemHandle remote_handle,
                std::uint64_t id) {
  rdma(peer, PendingRdma{false, local, len, remote_address, remote_handle, id});
}

void Mesh::write(int peer, const void* local, std::size_t len, std::uint64_t remote_address, MemHandle remote_handle,
                 std::uint64_t id) {
  rdma(peer, PendingRdma{true, const_cast<void*>(local), len, remote_address, remote_handle, id});
}

void Mesh::rdma(int rank, const PendingRdma& op) {
  Peer* p = reachable(rank) ? &peer(rank) : nullptr;
  if (!p || p->failed) {
    notices_.push_back(Notice{Notice::rdma_failed, rank, op.id, {}});
    return;
  }
  if (p->connected && p->backlog.empty() && try_rdma(*p, op)) return;
  p->backlog.push_back(Queued{{}, true, op});
  backlogged_ = true;
}

// One descriptor per chunk, all taken at once, or none.
bool Mesh::try_rdma(Peer& p, const PendingRdma& op) {
  const std::size_t chunks = std::max<std::size_t>(1, (op.len + kRdmaChunk - 1) / kRdmaChunk);
  if (free_send_descriptors_.size() < chunks) return false;
  MemHandle local_handle = 0;
  if (const Result r = registrations_->acquire(op.local, op.len, local_handle); r != Result::success) {
    notices_.push_back(Notice{Notice::rdma_failed, p.rank, op.id, {}});
    return true;
  }
  std::size_t done = 0;
  do {
    const std::size_t chunk = std::min(kRdmaChunk, op.len - done);
    const bool last = done + chunk == op.len;
    const std::uint32_t index = free_send_descriptors_.back();
    free_send_descriptors_.pop_back();
    send_slots_[index] = SendSlot{SendSlot::kNoBounce, op.id, last, false, local_handle};
    VIP_DESCRIPTOR* d = send_descriptor(index);
    std::memset(d, 0, kDescriptorBytes);
    d->CS.Control = op.write ? VIP_CONTROL_OP_RDMAWRITE : VIP_CONTROL_OP_RDMAREAD;
    d->CS.SegCount = 2;
    d->CS.Length = std::uint32_t(chunk);
    d->DS[0].Remote.Data.AddressBits = op.remote_address + done;
    d->DS[0].Remote.Handle = op.remote_handle;
    d->DS[1].Local.Data.Address = static_cast<std::byte*>(op.local) + done;
    d->DS[1].Local.Handle = local_handle;
    d->DS[1].Local.Length = std::uint32_t(chunk);
    if (const Result r = p.vi->post_send(d, arena_handle_); r != Result::success) {
      // The chunks already posted are flushed with the VI; this one reports.
      free_send_descriptors_.push_back(index);
      if (last) {
        registrations_->release(local_handle);
        notices_.push_back(Notice{Notice::rdma_failed, p.rank, op.id, {}});
      }
      fail_peer(p, std::string(op.write ? "posting an RDMA write: " : "posting an RDMA read: ") + describe(r));
      return true;
    }
    p.sends.push(index);
    done += chunk;
  } while (done < op.len);
  return true;
}

Result Mesh::register_exposed(void* addr, std::size_t len, MemHandle& out) {
  registrations_->invalidate(addr, len);
  return nic_.register_memory(addr, len, MemAttributes{ptag_, options_.rdma_write, options_.rdma_read}, out);
}

void Mesh::deregister_exposed(void* addr, std::size_t len, MemHandle handle) {
  nic_.deregister_memory(addr, handle);
  registrations_->invalidate(addr, len);
}

int Mesh::poll(std::size_t max_messages) {
  nic_.progress();
  return drain(max_messages);
}

int Mesh::wait_step() {
  // A rank that sleeps is woken by a peer's connection request too.
  if (nic_counters_.sleeps != sleeps_seen_) {
    sleeps_seen_ = nic_counters_.sleeps;
    accept_requests();
  }
  return drain();
}

int Mesh::drain(std::size_t max_messages) {
  // Peers asking for a connection are answered every few polls, and on every
  // one while a request of ours is out (the peer may be asking us too).
  if (!connecting_.empty()) {
    advance_connects();
    accept_requests();
  } else if (++polls_ % kAcceptEvery == 0) {
    accept_requests();
  }
  int handled = 0;
  // By index: handling a message may connect another peer (it joins the
  // end, and the next poll). A bounded poll starts one peer later each time,
  // so that none waits behind the others. No division on this path: a
  // waiting rank runs it back to back, and its length is how late a message
  // is seen.
  const std::size_t count = connected_.size();
  std::size_t i = 0;
  if (max_messages != SIZE_MAX && count > 0) {
    if (++first_peer_ >= count) first_peer_ = 0;
    i = first_peer_;
  }
  for (std::size_t n = 0; n < count; ++n) {
    Peer& p = *connected_[i];
    if (++i == count) i = 0;
    // With credits, handled receives go back here, and their credits with
    // them; without, take_receives sends them back a few at a time.
    if (options_.flow_control && !p.reposts.empty()) repost_receives(p);
    if (!p.sends.empty()) reap_sends(p);
    handled += take_receives(p, max_messages - std::size_t(handled));
  }
  if (backlogged_) flush_backlogs();
  if (!notices_.empty()) deliver_notices();
  return handled;
}

// In one call to the VI: its oldest completions leave, these buffers go back.
void Mesh::repost_receives(Peer& p) {
  ViImpl& vi = impl(*p.vi);
  const std::size_t count = p.reposts.size();
  vi.retire_recvs(count);
  if (!p.failed && !p.closed) {
    // The descriptors are as post_receive left them (the VI writes only their
    // status, length and immediate data), over the receive block registered
    // until the VI is destroyed: the engine's trusted re-post, without
    // post_recv's checks.
    const std::size_t posted = vi.repost_recvs(p.reposts.data(), count);
    for (std::size_t i = 0; i < posted; ++i) p.receives.push(receive_slot(p, p.reposts[i]));
  }
  if (options_.flow_control) {
    p.owed_credits += std::uint32_t(count);
    if (p.owed_credits >= options_.receives_per_peer / 2) backlogged_ = true;
  }
  p.reposts.clear();
}

void Mesh::repost(Peer& p, std::uint32_t slot) {
  ViImpl& vi = impl(*p.vi);
  vi.retire_recvs(1);  // the VI's oldest, not necessarily this slot's: one leaves per re-post
  VIP_DESCRIPTOR* d = receive_descriptor(p, slot);
  if (!p.failed && !p.closed && vi.repost_recvs(&d, 1) == 1) p.receives.push(slot);
}

void Mesh::reap_sends(Peer& p) {
  while (!p.sends.empty()) {
    const std::size_t index = p.sends.front();
    const VIP_DESCRIPTOR* d = send_descriptor(index);
    if (!(d->CS.Status & VIP_STATUS_DONE)) return;
    p.sends.pop();
    VIP_DESCRIPTOR* done;
    p.vi->send_done(done);  // d: the queue completes in order
    on_send_complete(p, index, d);
  }
}

// Each receive slot leaves the list before its message is handled. With
// consume_in_place, messages of one frame come from the link in between, in
// the order of arrival: each only once every receive completed before it is handled.
int Mesh::take_receives(Peer& p, std::size_t max_messages) {
  int handled = 0;
  for (;;) {
    while (!p.receives.empty() && std::size_t(handled) < max_messages) {
      const std::uint32_t slot = p.receives.front();
      VIP_DESCRIPTOR* d = receive_descriptor(p, slot);
      const VIP_UINT32 status = d->CS.Status;
      if (!(status & VIP_STATUS_DONE)) break;
      p.receives.pop();
      ++handled;
      // The commonest message, without a frame header (no flow control) and
      // not broken, here; on_receive the rest.
      if (header_bytes_ != 0 || (status & VIP_STATUS_ERROR_MASK)) [[unlikely]] {
        on_receive(p, slot, d);
        continue;
      }
      client_.on_message(p.rank, {receive_buffer(p, slot), d->CS.Length});
      // After the handler, which may poll: the buffer is its until then. A
      // few wait (the receives' spares: fewer than that many between two
      // messages, so a peer that floods us finds buffers), and go back in one call.
      p.reposts.push_back(d);
      if (p.reposts.size() >= kDeferredReposts) repost_receives(p);
    }
    if (!options_.consume_in_place) return handled;
    // Messages in the link one after another; a frame that is not one may
    // have completed a receive: those first, back at the top.
    ViImpl& vi = impl(*p.vi);
    std::span<const std::byte> frame;
    ViImpl::NextFrame next = ViImpl::NextFrame::none;
    while (std::size_t(handled) < max_messages && (next = vi.next_frame(frame)) == ViImpl::NextFrame::message) {
      on_frame_in_place(p, frame);
      // Unless the handler released it early (release_held); a nested poll
      // since then released whatever frame it took.
      if (vi.holding()) vi.release_frame();
      ++handled;
    }
    if (std::size_t(handled) >= max_messages || next == ViImpl::NextFrame::none) return handled;
  }
}

// on_receive's work for a message still in the link: no buffer to re-post,
// so its credit is owed at once.
void Mesh::on_frame_in_place(Peer& p, std::span<const std::byte> frame) {
  if (header_bytes_ == 0) {  // no flow control: the frame is the message, and no credit is owed
    ++counters_.in_place;
    client_.on_message(p.rank, {const_cast<std::byte*>(frame.data()), frame.size()});
    return;
  }
  MeshFrameHeader h{};
  if (frame.size() < header_bytes_) {
    ++counters_.receive_errors;
    return;
  }
  std::memcpy(&h, frame.data(), sizeof h);  // copied out: the peer may write the link's memory
  p.send_credits += h.credits;
  if (h.kind != MeshFrameHeader::credit) {
    ++counters_.in_place;
    client_.on_message(p.rank, {const_cast<std::byte*>(frame.data()) + header_bytes_, frame.size() - header_bytes_});
    if (++p.owed_credits >= options_.receives_per_peer / 2) backlogged_ = true;
  }
  if (h.credits > 0 && !p.backlog.empty()) flush_backlogs();
}

// Only connected peers can send; the others' backlogs are flagged again when they connect.
void Mesh::flush_backlogs() {
  backlogged_ = false;
  for (std::size_t i = 0; i < connected_.size(); ++i) {
    Peer& p = *connected_[i];
    while (!p.backlog.empty()) {
      const Queued& q = p.backlog.front();
      if (!(q.is_rdma ? try_rdma(p, q.rdma) : try_send(p, false, q.bytes, {}))) break;
      p.backlog.pop_front();
    }
    if (options_.flow_control && p.owed_credits >= options_.receives_per_peer / 2 && !p.failed && !p.closed) {
      if (try_send(p, true, {}, {}))
        ++counters_.credit_messages;
      else
        backlogged_ = true;
    }
    if (!p.backlog.empty()) backlogged_ = true;
  }
}

void Mesh::on_send_complete(Peer& p, std::size_t index, const VIP_DESCRIPTOR* d) {
  const bool ok = !(d->CS.Status & VIP_STATUS_ERROR_MASK);
  if (!ok) fail_peer(p, "a transfer failed (VIA status " + std::to_string(d->CS.Status) + ")");
  const SendSlot slot = send_slots_[index];
  free_send_descriptors_.push_back(std::uint32_t(index));
  if (slot.bounce != SendSlot::kNoBounce) free_bounces_.push_back(slot.bounce);
  if (slot.reports_sent) client_.on_sent(p.rank, slot.rdma_id);
  if (slot.reports_rdma) {
    registrations_->release(slot.local_handle);
    if (ok)
      client_.on_rdma_complete(slot.rdma_id, true);
    else
      notices_.push_back(Notice{Notice::rdma_failed, p.rank, slot.rdma_id, {}});
  }
}

// Frees the buffers of p's completed message sends, oldest first, up to its
// first RDMA (whose completion the client hears of from a poll, not from
// inside a send): a sender that streams finds buffers without polling.
void Mesh::reclaim_sends(Peer& p) {
  while (!p.sends.empty()) {
    const std::size_t index = p.sends.front();
    const VIP_DESCRIPTOR* d = send_descriptor(index);
    if (!(d->CS.Status & VIP_STATUS_DONE) || send_slots_[index].bounce == SendSlot::kNoBounce) return;
    p.sends.pop();
    VIP_DESCRIPTOR* done;
    p.vi->send_done(done);
    on_send_complete(p, index, d);
  }
}

void Mesh::on_receive(Peer& p, std::uint32_t slot, const VIP_DESCRIPTOR* d) {
  MeshFrameHeader h{};
  const bool broken = (d->CS.Status & VIP_STATUS_ERROR_MASK) || d->CS.Length < header_bytes_;
  if (broken) {
    // Flushed by a broken VI (reported by the NIC), or on an unreliable VI a
    // frame too long or too short: dropped, and the buffer goes back.
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);
    ++counters_.receive_errors;
    if (!p.failed && !p.closed && p.vi->state() == ViState::connected) post_receive(p, slot);
    return;
  }
  std::byte* buf = receive_buffer(p, slot);
  if (header_bytes_) std::memcpy(&h, buf, sizeof h);  // its size known here: a move, not a call to memcpy
  p.send_credits += h.credits;
  if (h.kind == MeshFrameHeader::credit) {  // rare, and owed no credit: its buffer goes back at once
    repost(p, slot);
  } else {
    client_.on_message(p.rank, {buf + header_bytes_, d->CS.Length - header_bytes_});
    // After the handler, which may poll: the buffer is its until then. The
    // next poll re-posts it (a message with a header has credits), off the
    // path from this message to the program's next send.
    p.reposts.push_back(receive_descriptor(p, slot));
  }
  // Credits only matter to this peer's waiting work; most messages bring one and find none.
  if (h.credits > 0 && !p.backlog.empty()) flush_backlogs();
}

std::size_t Mesh::backlog(int rank) const {
  const Peer* p = rank >= 0 && rank < size() ? peers_[std::size_t(rank)].get() : nullptr;
  return p ? p->backlog.size() : 0;
}

bool Mesh::held(int rank) const {
  const Peer* p = rank >= 0 && rank < size() ? peers_[std::size_t(rank)].get() : nullptr;
  return p && p->vi && impl(*p->vi).holding();
}

void Mesh::release_held(int rank) {
  if (!held(rank)) return;
  impl(*peers_[std::size_t(rank)]->vi).release_frame();
}

std::size_t Mesh::max_inline_send(int rank) const {
  const Peer* p = rank >= 0 && rank < size() ? peers_[std::size_t(rank)].get() : nullptr;
  if (!p || !p->connected) return 0;
  const std::size_t frame = p->vi->max_inline_send();
  return frame > header_bytes_ ? frame - header_bytes_ : 0;
}

std::size_t Mesh::max_whole_send(int rank) const {
  return header_bytes_ || !options_.consume_in_place ? 0 : max_inline_send(rank);
}

bool Mesh::idle() const {
  if (backlogged_ || !connecting_.empty()) return false;
  for (const Peer* p : connected_)
    if (!p->closed && !p->failed && !p->vi->send_queue_empty()) return false;
  return true;
}

bool Mesh::shutdown() {
  const bool drained = wait_until([&] { return idle(); }, options_.connect_timeout_ms);
  if (!drained) {
    std::size_t queued = 0;
    for (const Peer* p : connected_) queued += p->backlog.size();
    VIA_LOG(warn, "via", "mesh %s: shutting down with sends unfinished after %u ms (%zu messages queued): a peer stopped taking them",
            options_.service.c_str(), options_.connect_timeout_ms, queued);
  }
  // Requests that reached us are answered, and closed with the rest: a peer
  // that asked (its last messages may be for nobody who waits) hears that we
  // left instead of waiting out its connect timeout.
  accept_requests();
  for (Peer* p : connected_) {
    if (p->closed || p->failed) continue;
    p->closed = true;
    p->vi->disconnect();
  }
  return drained;
}

}  // namespace via
