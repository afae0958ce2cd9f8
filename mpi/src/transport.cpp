#include "transport.hpp"

#include <algorithm>
#include <chrono>
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
constexpr unsigned kAcceptEvery = 16;  // polls between looks for connection requests, when none of ours is pending
// Every rank accepts on the service's discriminator; a request comes from the
// service's discriminator followed by the requester's rank (4 bytes, little-endian).
constexpr std::uint8_t kService[] = {'m', 'p', 'i'};

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::uint64_t now_ns() {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

void check(via::Result r, const char* what) {
  if (r == via::Result::success) return;
  std::string why = what;
  why += ": ";
  why += via::describe(r);
  abort_job("VIA transport", why);
}

std::vector<std::uint8_t> requester_discriminator(int rank) {
  std::vector<std::uint8_t> d(std::begin(kService), std::end(kService));
  for (int shift = 0; shift < 32; shift += 8) d.push_back(std::uint8_t(std::uint32_t(rank) >> shift));
  return d;
}

// The rank a request comes from, or -1 when its discriminator names none of the job's.
int requester_rank(const std::vector<std::uint8_t>& d, int size) {
  constexpr std::size_t n = sizeof kService;
  if (d.size() != n + 4 || !std::equal(std::begin(kService), std::end(kService), d.begin())) return -1;
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < 4; ++i) rank |= std::uint32_t(d[n + i]) << (8 * i);
  return rank < std::uint32_t(size) ? int(rank) : -1;
}

}  // namespace

Transport::Transport(int rank, int size, std::size_t eager_limit, TransportClient& client)
    : client_(client), rank_(rank), eager_limit_(eager_limit),
      slot_bytes_(round_up(sizeof(WireHeader) + eager_limit, 64)),
      service_{{}, {std::begin(kService), std::end(kService)}}, peers_(std::size_t(size)) {
  check(via::Nic::open("", nic_), "opening the NIC");
  nic_->set_error_handler([this](const via::AsyncError& e) { on_async_error(e); });
  check(nic_->create_ptag(ptag_), "creating a protection tag");

  // Send descriptors, then bounce buffers. Only the descriptors are cleared:
  // a buffer's pages are touched when it is first used.
  const std::size_t descriptor_bytes = kSendDescriptors * kDescriptorBytes;
  arena_bytes_ = round_up(descriptor_bytes + kBounceBuffers * slot_bytes_, 4096);
  arena_ = static_cast<std::byte*>(std::aligned_alloc(4096, arena_bytes_));
  if (!arena_) abort_job("VIA transport", "out of memory for the message buffers");
  std::memset(arena_, 0, descriptor_bytes);
  check(nic_->register_memory(arena_, arena_bytes_, via::MemAttributes{ptag_, false, false}, arena_handle_),
        "registering the message buffers");
  registrations_ = std::make_unique<RegistrationCache>(*nic_, ptag_, 64);

  send_slots_.resize(kSendDescriptors);
  for (int i = kSendDescriptors - 1; i >= 0; --i) free_send_descriptors_.push_back(i);
  for (int i = kBounceBuffers - 1; i >= 0; --i) free_bounces_.push_back(i);
}

Transport::Peer::Peer(int rank) : rank(rank), receives(kReceivesPerPeer), sends(kSendDescriptors) {
  reposts.reserve(kReceivesPerPeer);
}

Transport::~Transport() {
  registrations_.reset();
  nic_.reset();
  peers_.clear();  // their receive buffers, once the NIC that used them is gone
  std::free(arena_);
}

VIP_DESCRIPTOR* Transport::send_descriptor(std::size_t index) {
  return reinterpret_cast<VIP_DESCRIPTOR*>(arena_ + index * kDescriptorBytes);
}

std::byte* Transport::bounce_buffer(int index) {
  return arena_ + kSendDescriptors * kDescriptorBytes + std::size_t(index) * slot_bytes_;
}

VIP_DESCRIPTOR* Transport::receive_descriptor(const Peer& p, int slot) {
  return reinterpret_cast<VIP_DESCRIPTOR*>(p.receive_block.get() + std::size_t(slot) * kDescriptorBytes);
}

std::byte* Transport::receive_buffer(const Peer& p, int slot) {
  return p.receive_block.get() + kReceivesPerPeer * kDescriptorBytes + std::size_t(slot) * slot_bytes_;
}

// ---- connections ----

Transport::Peer& Transport::peer(int rank) {
  if (Peer* p = peers_[std::size_t(rank)].get()) return *p;
  Peer& p = add_peer(rank);
  via::NetAddress local{{}, requester_discriminator(rank_)};
  via::NetAddress remote = service_;
  check(nic_->resolve("rank" + std::to_string(rank), 0, remote.host), "resolving a peer's address");
  check(p.vi->connect_request_start(local, remote, kConnectTimeoutMs), "requesting a connection");
  return p;
}

// A VI for the peer with its receives posted (so that nothing the peer sends
// once connected finds none), on its way to being connected.
Transport::Peer& Transport::add_peer(int rank) {
  auto& slot = peers_[std::size_t(rank)];
  slot = std::make_unique<Peer>(rank);
  Peer& p = *slot;
  via::ViAttributes attrs;
  attrs.reliability = VIP_SERVICE_RELIABLE_DELIVERY;
  attrs.ptag = ptag_;
  attrs.rdma_read = true;   // peers read rendezvous messages from our buffers, and windows
  attrs.rdma_write = true;  // peers write into windows
  check(nic_->create_vi(attrs, nullptr, nullptr, p.vi), "creating a VI");
  p.vi->user_handle = reinterpret_cast<void*>(std::intptr_t(rank));

  const std::size_t descriptor_bytes = kReceivesPerPeer * kDescriptorBytes;
  const std::size_t bytes = round_up(descriptor_bytes + kReceivesPerPeer * slot_bytes_, 4096);
  p.receive_block.reset(static_cast<std::byte*>(std::aligned_alloc(4096, bytes)));
  if (!p.receive_block) abort_job("VIA transport", "out of memory for a peer's receive buffers");
  std::memset(p.receive_block.get(), 0, descriptor_bytes);
  check(nic_->register_memory(p.receive_block.get(), bytes, via::MemAttributes{ptag_, false, false}, p.receive_handle),
        "registering a peer's receive buffers");
  p.send_credits = kCreditWindow;
  for (int s = 0; s < kReceivesPerPeer; ++s) post_receive(p, s);
  p.connect_deadline_ns = now_ns() + std::uint64_t(kConnectTimeoutMs) * 1000000u;
  connecting_.push_back(&p);
  return p;
}

void Transport::advance_connects() {
  for (std::size_t i = 0; i < connecting_.size();) {
    Peer& p = *connecting_[i];
    if (p.vi->state() != via::ViState::connect_pending) {
      // Refused by a lower rank that asks us at the same time: its request is on its way.
      if (now_ns() >= p.connect_deadline_ns) connect_failed(p, "it asked for a connection and never sent its request");
      ++i;
      continue;
    }
    const via::Result r = p.vi->connect_request_done();
    if (r == via::Result::success) {
      on_connected(p);  // leaves connecting_: the next one is at i now
      continue;
    }
    if (r == via::Result::reject && p.rank < rank_) {
      ++i;
      continue;
    }
    if (r != via::Result::not_done) connect_failed(p, via::describe(r));
    ++i;
  }
}

void Transport::accept_requests() {
  via::ConnRequest* request;
  while (nic_->connect_wait(service_, 0, request) == via::Result::success) accept(request);
}

void Transport::accept(via::ConnRequest* request) {
  const int rank = requester_rank(request->remote.discriminator, int(peers_.size()));
  Peer* p = rank < 0 || rank == rank_ ? nullptr : peers_[std::size_t(rank)].get();
  // Refused: what names no other rank of the job, a peer we are connected to
  // (a request it withdrew), and a higher rank while our own request to it is
  // out: ours wins, and the peer accepts it.
  if (rank < 0 || rank == rank_ || (p && p->connected) ||
      (p && p->vi->state() == via::ViState::connect_pending && rank > rank_)) {
    nic_->connect_reject(request);
    return;
  }
  if (!p)
    p = &add_peer(rank);
  else if (p->vi->state() == via::ViState::connect_pending)
    p->vi->disconnect();  // a lower rank's request wins: ours is withdrawn, its VI (and receives) serve this one
  const via::Result r = nic_->connect_accept(request, *p->vi);
  if (r != via::Result::success) connect_failed(*p, std::string("accepting its request: ") + via::describe(r));
  on_connected(*p);
}

void Transport::on_connected(Peer& p) {
  p.connected = true;
  connecting_.erase(std::find(connecting_.begin(), connecting_.end(), &p));
  connected_.push_back(&p);
  if (!p.backlog.empty() || !p.rdma.empty()) backlogged_ = true;
}

void Transport::connect_failed(const Peer& p, const std::string& why) {
  std::string message = "connecting to rank ";
  message += std::to_string(p.rank);
  message += ": ";
  message += why;
  abort_job("VIA transport", message);
}

// A descriptor of one segment; the unused second segment is left as it is.
void Transport::set_single_segment(VIP_DESCRIPTOR* d, std::byte* buffer, std::uint32_t length, via::MemHandle handle) {
  d->CS = VIP_CONTROL_SEGMENT{};
  d->CS.SegCount = 1;
  d->CS.Length = length;
  d->DS[0].Local = VIP_DATA_SEGMENT{};
  d->DS[0].Local.Data.Address = buffer;
  d->DS[0].Local.Handle = handle;
  d->DS[0].Local.Length = length;
}

void Transport::post_receive(Peer& p, int slot) {
  VIP_DESCRIPTOR* d = receive_descriptor(p, slot);
  set_single_segment(d, receive_buffer(p, slot), std::uint32_t(slot_bytes_), p.receive_handle);
  via::Result r = p.vi->post_recv(d, p.receive_handle);
  if (r == via::Result::success)
    p.receives.push(std::uint32_t(slot));
  else if (!p.closed)
    check(r, "posting a receive");
}

bool Transport::send(int peer_rank, WireHeader header, std::span<const std::byte> payload) {
  Peer& p = peer(peer_rank);
  if (p.connected && p.backlog.empty() && try_post(p, header, payload)) return true;
  p.backlog.push_back(Queued{header, std::vector<std::byte>(payload.begin(), payload.end())});
  backlogged_ = true;
  return false;
}

bool Transport::try_post(Peer& p, const WireHeader& header, std::span<const std::byte> payload) {
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

  VIP_DESCRIPTOR* d = send_descriptor(std::size_t(index));
  set_single_segment(d, buf, std::uint32_t(sizeof h + payload.size()), arena_handle_);
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

void Transport::rdma(int peer_rank, const PendingRdma& op) {
  Peer& p = peer(peer_rank);
  if (p.connected && p.rdma.empty() && try_rdma(p, op)) return;
  p.rdma.push_back(op);
  backlogged_ = true;
}

// One descriptor per chunk, all taken at once, or none.
bool Transport::try_rdma(Peer& p, const PendingRdma& op) {
  const std::size_t chunks = (op.len + kRdmaChunk - 1) / kRdmaChunk;
  if (free_send_descriptors_.size() < chunks) return false;
  const via::MemHandle local_handle = registrations_->acquire(op.local, op.len);
  for (std::size_t done = 0; done < op.len; done += kRdmaChunk) {
    const std::size_t chunk = std::min(kRdmaChunk, op.len - done);
    const bool last = done + chunk == op.len;
    const int index = free_send_descriptors_.back();
    free_send_descriptors_.pop_back();
    send_slots_[std::size_t(index)] = SendSlot{-1, op.id, last, local_handle};
    VIP_DESCRIPTOR* d = send_descriptor(std::size_t(index));
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
  // Peers asking for a connection are answered every few polls, and on every
  // one while a request of ours is out (the peer may be asking us too).
  if (!connecting_.empty()) {
    advance_connects();
    accept_requests();
  } else if (++polls_ % kAcceptEvery == 0) {
    accept_requests();
  }
  // By index: handling a message may connect another peer.
  for (std::size_t i = 0; i < connected_.size(); ++i) {
    Peer& p = *connected_[i];
    repost_receives(p);
    reap_sends(p);
    take_receives(p);
  }
  if (backlogged_) flush_backlogs();
}

void Transport::repost_receives(Peer& p) {
  if (p.reposts.empty()) return;
  for (int slot : p.reposts) {
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);  // the VI's oldest, not necessarily this slot's: one leaves per re-post
    post_receive(p, slot);
  }
  p.owed_credits += int(p.reposts.size());
  p.reposts.clear();
  if (p.owed_credits >= kCreditReturnThreshold) backlogged_ = true;
}

void Transport::reap_sends(Peer& p) {
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

// Each receive slot leaves the list before its message is handled.
void Transport::take_receives(Peer& p) {
  while (!p.receives.empty()) {
    const int slot = int(p.receives.front());
    const VIP_DESCRIPTOR* d = receive_descriptor(p, slot);
    if (!(d->CS.Status & VIP_STATUS_DONE)) return;
    p.receives.pop();
    on_receive(p, slot, d);
  }
}

// Only connected peers can send; the others' backlogs are flagged again when they connect.
void Transport::flush_backlogs() {
  backlogged_ = false;
  for (std::size_t i = 0; i < connected_.size(); ++i) {
    Peer& p = *connected_[i];
    while (!p.backlog.empty() && try_post(p, p.backlog.front().header, p.backlog.front().payload))
      p.backlog.pop_front();
    while (!p.rdma.empty() && try_rdma(p, p.rdma.front())) p.rdma.pop_front();
    if (p.owed_credits >= kCreditReturnThreshold && !try_post(p, WireHeader{WireType::credit}, {}))
      backlogged_ = true;
    if (!p.backlog.empty() || !p.rdma.empty()) backlogged_ = true;
  }
}

void Transport::on_send_complete(Peer& p, std::size_t index, const VIP_DESCRIPTOR* d) {
  if ((d->CS.Status & VIP_STATUS_ERROR_MASK) && !p.closed) {
    std::string why = "a transfer to rank ";
    why += std::to_string(p.rank);
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

void Transport::on_receive(Peer& p, int slot, const VIP_DESCRIPTOR* d) {
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);
    if (p.closed) return;  // flushed by the peer's orderly disconnect
    std::string why = "a receive from rank ";
    why += std::to_string(p.rank);
    why += " failed";
    abort_job("progress", why);
  }
  const std::byte* buf = receive_buffer(p, slot);
  WireHeader h;
  if (d->CS.Length < sizeof h) {
    std::string why = "a message from rank ";
    why += std::to_string(p.rank);
    why += " is shorter than a header";
    abort_job("progress", why);
  }
  std::memcpy(&h, buf, sizeof h);
  p.send_credits += h.credits;
  if (h.type == WireType::credit) {  // rare, and owed no credit: its buffer goes back at once
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);
    post_receive(p, slot);
  } else {
    client_.on_message(p.rank, h, {buf + sizeof h, d->CS.Length - sizeof h});
    p.reposts.push_back(slot);
  }
  // Credits only matter to this peer's waiting work; most messages bring one and find none.
  if (h.credits > 0 && (!p.backlog.empty() || !p.rdma.empty())) flush_backlogs();
}

void Transport::on_async_error(const via::AsyncError& error) {
  const auto peer = error.vi ? int(reinterpret_cast<std::intptr_t>(error.vi->user_handle)) : -1;
  if (error.orderly && peer >= 0) {
    peers_[std::size_t(peer)]->closed = true;
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
    if (backlogged_ || !connecting_.empty()) return false;
    for (const Peer* p : connected_)
      if (!p->closed && !p->vi->send_queue_empty()) return false;
    return true;
  };
  wait_until(quiet);
  for (Peer* p : connected_) {
    p->closed = true;
    p->vi->disconnect();
  }
}

}  // namespace viastack::mpi
