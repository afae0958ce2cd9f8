#include "transport.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "errors.hpp"

namespace viastack::mpi {

namespace {

constexpr int kCreditWindow = 32;  // data messages a peer may have outstanding to us
constexpr int kSpareReceives = 4;  // for credit-only messages, which need no credit (at most 2 in flight)
constexpr int kReceivesPerPeer = kCreditWindow + kSpareReceives;
constexpr int kCreditReturnThreshold = kCreditWindow / 2;
constexpr int kSendDescriptors = 512;
constexpr int kBounceBuffers = 128;
constexpr std::size_t kDescriptorBytes = 64;  // VIP_DESCRIPTOR_ALIGNMENT; a descriptor with two segments fits
constexpr std::size_t kRdmaChunk = 256u << 20;  // below the VI's maximum transfer
constexpr std::uint32_t kConnectTimeoutMs = 60000;
const std::uint8_t kDiscriminator[] = {'m', 'p', 'i'};

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

void check(via::Result r, const char* what) {
  if (r == via::Result::success) return;
  std::string why = what;
  why += ": ";
  why += via::describe(r);
  abort_job("VIA transport", why);
}

}  // namespace

Transport::Transport(int rank, int size, std::size_t eager_limit, TransportClient& client)
    : client_(client), rank_(rank), eager_limit_(eager_limit),
      slot_bytes_(round_up(sizeof(WireHeader) + eager_limit, 64)), peers_(std::size_t(size)) {
  check(via::Nic::open("", nic_), "opening the NIC");
  nic_->set_error_handler([this](const via::AsyncError& e) { on_async_error(e); });
  check(nic_->create_ptag(ptag_), "creating a protection tag");

  receive_descriptors_ = std::size_t(size) * kReceivesPerPeer;
  const std::size_t descriptors = receive_descriptors_ + kSendDescriptors;
  arena_bytes_ = descriptors * kDescriptorBytes + (receive_descriptors_ + kBounceBuffers) * slot_bytes_;
  arena_bytes_ = round_up(arena_bytes_, 4096);
  arena_ = static_cast<std::byte*>(std::aligned_alloc(4096, arena_bytes_));
  if (!arena_) abort_job("VIA transport", "out of memory for the message buffers");
  std::memset(arena_, 0, arena_bytes_);
  check(nic_->register_memory(arena_, arena_bytes_, via::MemAttributes{ptag_, false, false}, arena_handle_),
        "registering the message buffers");
  registrations_ = std::make_unique<RegistrationCache>(*nic_, ptag_, 64);

  send_slots_.resize(kSendDescriptors);
  for (int i = kSendDescriptors - 1; i >= 0; --i) free_send_descriptors_.push_back(i);
  for (int i = kBounceBuffers - 1; i >= 0; --i) free_bounces_.push_back(i);
  connect_all(rank, size);
}

Transport::Peer::Peer() : receives(kReceivesPerPeer), sends(kSendDescriptors) { reposts.reserve(kReceivesPerPeer); }

Transport::~Transport() {
  registrations_.reset();
  nic_.reset();
  std::free(arena_);
}

VIP_DESCRIPTOR* Transport::descriptor(std::size_t index) {
  return reinterpret_cast<VIP_DESCRIPTOR*>(arena_ + index * kDescriptorBytes);
}

std::byte* Transport::receive_buffer(int peer, int slot) {
  const std::size_t descriptors = receive_descriptors_ + kSendDescriptors;
  return arena_ + descriptors * kDescriptorBytes + (std::size_t(peer) * kReceivesPerPeer + std::size_t(slot)) * slot_bytes_;
}

std::byte* Transport::bounce_buffer(int index) {
  return receive_buffer(0, 0) + (receive_descriptors_ + std::size_t(index)) * slot_bytes_;
}

void Transport::connect_all(int rank, int size) {
  via::ViAttributes attrs;
  attrs.reliability = VIP_SERVICE_RELIABLE_DELIVERY;
  attrs.ptag = ptag_;
  attrs.rdma_read = true;   // peers read rendezvous messages from our buffers, and windows
  attrs.rdma_write = true;  // peers write into windows
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    Peer& peer = peers_[std::size_t(p)];
    check(nic_->create_vi(attrs, nullptr, nullptr, peer.vi), "creating a VI");
    peer.vi->user_handle = reinterpret_cast<void*>(std::intptr_t(p));
    peer.send_credits = kCreditWindow;
    for (int slot = 0; slot < kReceivesPerPeer; ++slot) post_receive(p, slot);
    via::NetAddress local{{}, {std::begin(kDiscriminator), std::end(kDiscriminator)}};
    via::NetAddress remote{{}, local.discriminator};
    std::string name = "rank";
    name += std::to_string(p);
    check(nic_->resolve(name, 0, remote.host), "resolving a peer's address");
    check(peer.vi->connect_peer_request(local, remote, kConnectTimeoutMs), "requesting a connection");
  }
  for (int p = 0; p < size; ++p)
    if (p != rank) check(peers_[std::size_t(p)].vi->connect_peer_wait(), "connecting to a peer");
}

// A descriptor of one segment in the arena; the unused second segment is left as it is.
void Transport::set_single_segment(VIP_DESCRIPTOR* d, std::byte* buffer, std::uint32_t length) const {
  d->CS = VIP_CONTROL_SEGMENT{};
  d->CS.SegCount = 1;
  d->CS.Length = length;
  d->DS[0].Local = VIP_DATA_SEGMENT{};
  d->DS[0].Local.Data.Address = buffer;
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = length;
}

void Transport::post_receive(int peer, int slot) {
  VIP_DESCRIPTOR* d = descriptor(std::size_t(peer) * kReceivesPerPeer + std::size_t(slot));
  set_single_segment(d, receive_buffer(peer, slot), std::uint32_t(slot_bytes_));
  Peer& p = peers_[std::size_t(peer)];
  via::Result r = p.vi->post_recv(d, arena_handle_);
  if (r == via::Result::success)
    p.receives.push(std::uint32_t(slot));
  else if (!p.closed)
    check(r, "posting a receive");
}

bool Transport::send(int peer, WireHeader header, std::span<const std::byte> payload) {
  Peer& p = peers_[std::size_t(peer)];
  if (p.backlog.empty() && try_post(peer, header, payload)) return true;
  p.backlog.push_back(Queued{header, std::vector<std::byte>(payload.begin(), payload.end())});
  backlogged_ = true;
  return false;
}

bool Transport::try_post(int peer, const WireHeader& header, std::span<const std::byte> payload) {
  Peer& p = peers_[std::size_t(peer)];
  const bool needs_credit = header.type != WireType::credit;
  if (needs_credit && p.send_credits == 0) return false;
  if (p.closed) return true;  // the peer finalized; nothing it could still want
  WireHeader h = header;
  h.credits = std::uint16_t(std::min(p.owed_credits, 0xFFFF));
  // Once the message is on its way: the credits it returns are paid, and it
  // holds one of ours.
  auto settle = [&] {
    p.owed_credits -= h.credits;
    if (needs_credit) --p.send_credits;
  };
  // A small message leaves at once, copied by the VI; the rest, and any the
  // link has no room for now, go through a bounce buffer and a descriptor.
  if (sizeof h + payload.size() <= via::Vi::kMaxInlineSend) {
    const iovec iov[2] = {{&h, sizeof h}, {const_cast<std::byte*>(payload.data()), payload.size()}};
    if (p.vi->send_inline(iov, payload.empty() ? 1 : 2) == via::Result::success) {
      settle();
      return true;
    }
  }
  if (free_send_descriptors_.empty() || free_bounces_.empty()) return false;
  const int index = free_send_descriptors_.back();
  free_send_descriptors_.pop_back();
  const int bounce = free_bounces_.back();
  free_bounces_.pop_back();
  send_slots_[std::size_t(index)] = SendSlot{bounce, 0, false, 0};
  settle();
  std::byte* buf = bounce_buffer(bounce);
  std::memcpy(buf, &h, sizeof h);
  if (!payload.empty()) std::memcpy(buf + sizeof h, payload.data(), payload.size());

  VIP_DESCRIPTOR* d = descriptor(receive_descriptors_ + std::size_t(index));
  set_single_segment(d, buf, std::uint32_t(sizeof h + payload.size()));
  check(p.vi->post_send(d, arena_handle_), "posting a send");
  p.sends.push(std::uint32_t(index));
  return true;
}

void Transport::read(int peer, void* local, std::size_t len, std::uint64_t remote_address, via::MemHandle remote_handle,
                     std::uint64_t id) {
  rdma(peer, PendingRdma{false, local, len, remote_address, remote_handle, id});
}

void Transport::write(int peer, const void* local, std::size_t len, std::uint64_t remote_address,
                      via::MemHandle remote_handle, std::uint64_t id) {
  rdma(peer, PendingRdma{true, const_cast<void*>(local), len, remote_address, remote_handle, id});
}

void Transport::rdma(int peer, const PendingRdma& op) {
  Peer& p = peers_[std::size_t(peer)];
  if (p.rdma.empty() && try_rdma(peer, op)) return;
  p.rdma.push_back(op);
  backlogged_ = true;
}

// One descriptor per chunk, all taken at once, or none.
bool Transport::try_rdma(int peer, const PendingRdma& op) {
  const std::size_t chunks = (op.len + kRdmaChunk - 1) / kRdmaChunk;
  if (free_send_descriptors_.size() < chunks) return false;
  Peer& p = peers_[std::size_t(peer)];
  const via::MemHandle local_handle = registrations_->acquire(op.local, op.len);
  for (std::size_t done = 0; done < op.len; done += kRdmaChunk) {
    const std::size_t chunk = std::min(kRdmaChunk, op.len - done);
    const bool last = done + chunk == op.len;
    const int index = free_send_descriptors_.back();
    free_send_descriptors_.pop_back();
    send_slots_[std::size_t(index)] = SendSlot{-1, op.id, last, local_handle};
    VIP_DESCRIPTOR* d = descriptor(receive_descriptors_ + std::size_t(index));
    std::memset(d, 0, kDescriptorBytes);
    d->CS.Control = op.write ? VIP_CONTROL_OP_RDMAWRITE : VIP_CONTROL_OP_RDMAREAD;
    d->CS.SegCount = 2;
    d->CS.Length = std::uint32_t(chunk);
    d->DS[0].Remote.Data.AddressBits = op.remote_address + done;
    d->DS[0].Remote.Handle = op.remote_handle;
    d->DS[1].Local.Data.Address = static_cast<std::byte*>(op.local) + done;
    d->DS[1].Local.Handle = local_handle;
    d->DS[1].Local.Length = std::uint32_t(chunk);
    check(p.vi->post_send(d, arena_handle_), op.write ? "posting an RDMA write" : "posting an RDMA read");
    p.sends.push(std::uint32_t(index));
  }
  return true;
}

via::MemHandle Transport::register_window(void* addr, std::size_t len) {
  via::MemHandle handle = 0;
  via::Result r = nic_->register_memory(addr, len, via::MemAttributes{ptag_, true, true}, handle);
  if (r != via::Result::success) {
    std::string why = "registering the window failed: ";
    why += via::describe(r);
    fail(MPI_ERR_NO_MEM, why);
  }
  return handle;
}

void Transport::deregister_window(void* addr, via::MemHandle handle) { nic_->deregister_memory(addr, handle); }

void Transport::poll() {
  nic_->progress();
  drain();
}

void Transport::drain() {
  for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
    if (!peers_[peer].vi) continue;
    repost_receives(int(peer));
    reap_sends(int(peer));
    take_receives(int(peer));
  }
  if (backlogged_) flush_backlogs();
}

void Transport::repost_receives(int peer) {
  Peer& p = peers_[std::size_t(peer)];
  if (p.reposts.empty()) return;
  for (int slot : p.reposts) {
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);  // the VI's oldest, not necessarily this slot's: one leaves per re-post
    post_receive(peer, slot);
  }
  p.owed_credits += int(p.reposts.size());
  p.reposts.clear();
  if (p.owed_credits >= kCreditReturnThreshold) backlogged_ = true;
}

void Transport::reap_sends(int peer) {
  Peer& p = peers_[std::size_t(peer)];
  while (!p.sends.empty()) {
    const std::size_t index = p.sends.front();
    const VIP_DESCRIPTOR* d = descriptor(receive_descriptors_ + index);
    if (!(d->CS.Status & VIP_STATUS_DONE)) return;
    p.sends.pop();
    VIP_DESCRIPTOR* done;
    p.vi->send_done(done);  // d: the queue completes in order
    on_send_complete(peer, index, d);
  }
}

// Each receive slot leaves the list before its message is handled.
void Transport::take_receives(int peer) {
  Peer& p = peers_[std::size_t(peer)];
  while (!p.receives.empty()) {
    const int slot = int(p.receives.front());
    const VIP_DESCRIPTOR* d = descriptor(std::size_t(peer) * kReceivesPerPeer + std::size_t(slot));
    if (!(d->CS.Status & VIP_STATUS_DONE)) return;
    p.receives.pop();
    on_receive(peer, slot, d);
  }
}

void Transport::flush_backlogs() {
  backlogged_ = false;
  for (std::size_t peer = 0; peer < peers_.size(); ++peer) {
    Peer& p = peers_[peer];
    while (!p.backlog.empty() && try_post(int(peer), p.backlog.front().header, p.backlog.front().payload))
      p.backlog.pop_front();
    while (!p.rdma.empty() && try_rdma(int(peer), p.rdma.front())) p.rdma.pop_front();
    if (p.owed_credits >= kCreditReturnThreshold && !try_post(int(peer), WireHeader{WireType::credit}, {}))
      backlogged_ = true;
    if (!p.backlog.empty() || !p.rdma.empty()) backlogged_ = true;
  }
}

void Transport::on_send_complete(int peer, std::size_t index, const VIP_DESCRIPTOR* d) {
  if ((d->CS.Status & VIP_STATUS_ERROR_MASK) && !peers_[std::size_t(peer)].closed) {
    std::string why = "a transfer to rank ";
    why += std::to_string(peer);
    why += " failed (VIA status 0x";
    char hex[16];
    std::snprintf(hex, sizeof hex, "%x", d->CS.Status);
    why += hex;
    why += ")";
    abort_job("progress", why);
  }
  SendSlot slot = send_slots_[index];
  free_send_descriptors_.push_back(int(index));
  if (slot.bounce >= 0) free_bounces_.push_back(slot.bounce);
  if (slot.reports_rdma) {
    registrations_->release(slot.local_handle);
    client_.on_rdma_complete(slot.rdma_id);
  }
  if (!backlogged_) return;
  flush_backlogs();
}

void Transport::on_receive(int peer, int slot, const VIP_DESCRIPTOR* d) {
  Peer& p = peers_[std::size_t(peer)];
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);
    if (p.closed) return;  // flushed by the peer's orderly disconnect
    std::string why = "a receive from rank ";
    why += std::to_string(peer);
    why += " failed";
    abort_job("progress", why);
  }
  const std::byte* buf = receive_buffer(peer, slot);
  WireHeader h;
  if (d->CS.Length < sizeof h) {
    std::string why = "a message from rank ";
    why += std::to_string(peer);
    why += " is shorter than a header";
    abort_job("progress", why);
  }
  std::memcpy(&h, buf, sizeof h);
  p.send_credits += h.credits;
  if (h.type == WireType::credit) {  // rare, and owed no credit: its buffer goes back at once
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);
    post_receive(peer, slot);
  } else {
    client_.on_message(peer, h, {buf + sizeof h, d->CS.Length - sizeof h});
    p.reposts.push_back(slot);
  }
  // Credits only matter to this peer's waiting work; most messages bring one and find none.
  if (h.credits > 0 && (!p.backlog.empty() || !p.rdma.empty())) flush_backlogs();
}

void Transport::on_async_error(const via::AsyncError& error) {
  const auto peer = error.vi ? int(reinterpret_cast<std::intptr_t>(error.vi->user_handle)) : -1;
  if (error.orderly && peer >= 0) {
    peers_[std::size_t(peer)].closed = true;
    return;
  }
  std::string why = "connection to rank ";
  why += std::to_string(peer);
  why += " lost: ";
  why += error.cause;
  abort_job("progress", why);
}

void Transport::shutdown() {
  auto quiet = [&] {
    if (backlogged_) return false;
    for (const Peer& p : peers_)
      if (p.vi && !p.closed && !p.vi->send_queue_empty()) return false;
    return true;
  };
  wait_until(quiet);
  for (Peer& p : peers_)
    if (p.vi) {
      p.closed = true;
      p.vi->disconnect();
    }
}

}  // namespace viastack::mpi
