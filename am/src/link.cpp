#include "link.hpp"

#include <via/bootstrap.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "wire.hpp"

namespace am::detail {

namespace {

constexpr std::size_t kBufBytes = (wire::kMaxMessage + 63) / 64 * 64;
constexpr std::size_t kDescStride = (sizeof(VIP_DESCRIPTOR) + 63) / 64 * 64;
constexpr std::uint32_t kRdmaDescs = 64;
// Receives per peer beyond the 2 x depth it may fill. A handler's reply
// returns the credit before its own receive is re-posted, so each receive
// being handled (handlers may poll, and handle more) needs a spare; the
// spares left over let handled receives wait to be re-posted until the next
// poll, off the path from a message to the next one sent.
constexpr std::uint32_t kLateReposts = 4;
// Acknowledgement buffers add no receives at the peer: every acknowledgement
// in flight answers one of its open requests, as a reply would.
constexpr std::uint32_t kAckDescs = Link::kAckBuffers;
constexpr std::uint32_t kConnectTimeoutMs = 60000;

Status check(via::Result r, const char* what) {
  std::string why = "am_enable: ";
  why += what;
  why += ": ";
  why += via::describe(r);
  return r == via::Result::success ? Status::ok : error(Status::enable_failed, why);
}

}  // namespace

Link::~Link() {
  if (nic_) {
    for (auto& c : channels_)
      if (c->vi) {
        if (c->vi->state() == via::ViState::connected) c->vi->disconnect();
        nic_->destroy_vi(c->vi);
      }
    if (segment_handle_) nic_->deregister_memory(segment_, segment_handle_);
    if (arena_handle_) nic_->deregister_memory(arena_, arena_handle_);
  }
  nic_.reset();
  std::free(arena_);
}

// Per peer: `depth` request buffers (a bundle is written in its slot's),
// `depth` reply buffers, kAckDescs acknowledgement buffers and 2 x depth
// receive buffers (a peer has at most depth requests and depth answers on
// the way to us) plus kLateReposts.
std::uint32_t Link::per_peer() const { return 4u * depth_ + kAckDescs + kLateReposts; }

VIP_DESCRIPTOR* Link::desc(std::uint32_t i) const {
  return reinterpret_cast<VIP_DESCRIPTOR*>(descs_ + std::size_t(i) * kDescStride);
}
std::byte* Link::buffer(std::uint32_t i) const { return buffers_ + std::size_t(i) * kBufBytes; }

// ---- set-up ----

Status Link::open() {
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) return error(Status::enable_failed, "am_enable: " + why);
  size_ = job->size();
  rank_ = job->rank();
  if (size_ > 4096) return error(Status::enable_failed, "am_enable: more than 4096 ranks");
  Status s;
  if ((s = check(via::Nic::open("", nic_), "open NIC")) != Status::ok) return s;
  nic_->set_error_handler([this](const via::AsyncError&) { vi_error_ = true; });
  // A VI's sends: its request, reply and acknowledgement buffers, and at
  // most every RDMA descriptor; its receives: every receive buffer.
  const std::uint32_t max_sends = 2u * depth_ + kAckDescs + kRdmaDescs, max_receives = 2u * depth_ + kLateReposts;
  VIP_NIC_ATTRIBUTES nic_attributes{};
  nic_->query(nic_attributes);
  if (const std::uint32_t queue = std::uint32_t(nic_attributes.MaxDescriptorsPerQueue);
      std::max(max_sends, max_receives) > queue)
    return error(Status::enable_failed,
                 "am_enable: VIASTACK_AM_DEPTH=" + std::to_string(depth_) + " needs " +
                     std::to_string(std::max(max_sends, max_receives)) + " descriptors per VI queue, and this NIC's hold " +
                     std::to_string(queue) + ": use a depth of at most " +
                     std::to_string((queue - std::max(kAckDescs + kRdmaDescs, kLateReposts)) / 2));
  for (int r = 0; r < size_; ++r) channels_.push_back(std::make_unique<Channel>(max_sends, max_receives));
  return check(nic_->create_ptag(ptag_), "create protection tag");
}

Status Link::register_segment(std::byte* segment, std::size_t bytes) {
  segment_ = segment;
  if (!bytes) return Status::ok;
  return check(nic_->register_memory(segment, bytes, via::MemAttributes{ptag_, true, true}, segment_handle_),
               "register the segment");
}

Status Link::connect() {
  // The arena: every peer's buffers, their descriptors, and RDMA descriptors.
  const std::uint32_t buffers = per_peer() * std::uint32_t(size_);
  const std::uint32_t descs = buffers + kRdmaDescs;
  arena_bytes_ = (std::size_t(descs) * kDescStride + std::size_t(buffers) * kBufBytes + 4095) / 4096 * 4096;
  arena_ = static_cast<std::byte*>(std::aligned_alloc(4096, arena_bytes_));
  if (!arena_) return error(Status::resource, "am_enable: cannot allocate message buffers");
  std::memset(arena_, 0, arena_bytes_);
  descs_ = arena_;
  buffers_ = arena_ + std::size_t(descs) * kDescStride;
  Status s;
  if ((s = check(nic_->register_memory(arena_, arena_bytes_, via::MemAttributes{ptag_, false, false}, arena_handle_),
                 "register message buffers")) != Status::ok)
    return s;
  posted_.resize(descs);
  first_rdma_ = buffers;
  rdma_tag_.resize(kRdmaDescs);
  for (std::uint32_t i = 0; i < kRdmaDescs; ++i) rdma_free_.push_back(first_rdma_ + i);

  via::ViAttributes attrs;
  attrs.reliability = reliability_ == Reliability::reliable ? VIP_SERVICE_RELIABLE_DELIVERY : VIP_SERVICE_UNRELIABLE;
  attrs.ptag = ptag_;
  attrs.rdma_write = true;
  attrs.rdma_read = reliability_ == Reliability::reliable;
  const via::NetAddress local{{}, {'a', 'm'}};
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Channel& c = *channels_[r];
    if ((s = check(nic_->create_vi(attrs, nullptr, nullptr, c.vi), "create VI")) != Status::ok) return s;
    for (std::uint32_t i = 2u * depth_ + kAckDescs; i < per_peer(); ++i)
      if (!post_recv(c, first_buffer(r) + i)) return error(Status::enable_failed, "am_enable: cannot post receives");
    via::NetAddress remote{{}, {'a', 'm'}};
    if ((s = check(nic_->resolve("rank" + std::to_string(r), 0, remote.host), "resolve a peer")) != Status::ok) return s;
    if ((s = check(c.vi->connect_peer_request(local, remote, kConnectTimeoutMs), "connect request")) != Status::ok)
      return s;
  }
  for (auto& c : channels_)
    if (c->vi && (s = check(c->vi->connect_peer_wait(), "connect to a peer")) != Status::ok) return s;
  return Status::ok;
}

// ---- sending ----

bool Link::send(int peer, std::uint32_t i, std::uint32_t length) {
  Channel& c = *channels_[peer];
  std::byte* buf = buffer(i);
  // A small message leaves at once, copied by the VI: no descriptor to post or
  // retire, and the buffer is free again on return (it keeps its copy for a
  // retransmission). Behind queued work, or with the link full, a descriptor takes it.
  if (length <= via::Vi::kMaxInlineSend) {
    const iovec iov{buf, length};
    if (c.vi->send_inline(&iov, 1) == via::Result::success) return true;
  }
  VIP_DESCRIPTOR* d = desc(i);
  std::memset(&d->CS, 0, sizeof d->CS);
  d->CS.SegCount = 1;
  d->CS.Length = length;
  d->DS[0].Local.Data.Address = buf;
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = length;
  if (c.vi->post_send(d, arena_handle_) != via::Result::success) return false;
  posted_[i] = true;
  ++posted_sends_;
  c.sends.push(i);
  // Usually complete already (the frame is out): retired now, while the
  // descriptor is in cache, unless older sends (RDMA, whose completions run
  // operations' callbacks) come first; reap_sends retires those.
  if (std::uint32_t done; c.sends.front() == i && take_send(c, done)) on_send_complete(done, d);
  return true;
}

bool Link::rdma(int peer, bool write, std::byte* local, via::MemHandle local_handle, std::uint64_t remote,
                via::MemHandle remote_handle, std::uint32_t bytes, std::uint32_t tag) {
  Channel& c = *channels_[peer];
  const std::uint32_t i = rdma_free_.back();
  rdma_free_.pop_back();
  rdma_tag_[i - first_rdma_] = tag;
  VIP_DESCRIPTOR* d = desc(i);
  std::memset(d, 0, kDescStride);
  d->CS.Control = write ? VIP_CONTROL_OP_RDMAWRITE : VIP_CONTROL_OP_RDMAREAD;
  d->CS.SegCount = 2;
  d->CS.Length = bytes;
  d->DS[0].Remote.Data.AddressBits = remote;
  d->DS[0].Remote.Handle = remote_handle;
  d->DS[1].Local.Data.Address = local;
  d->DS[1].Local.Handle = local_handle;
  d->DS[1].Local.Length = bytes;
  if (c.vi->post_send(d, arena_handle_) != via::Result::success) {
    rdma_free_.push_back(i);
    return false;
  }
  posted_[i] = true;
  ++posted_sends_;
  c.sends.push(i);
  return true;
}

bool Link::register_memory(void* at, std::size_t bytes, via::MemHandle& handle) {
  return nic_->register_memory(at, bytes, via::MemAttributes{ptag_, false, false}, handle) == via::Result::success;
}
void Link::deregister_memory(void* at, via::MemHandle handle) { nic_->deregister_memory(at, handle); }

// Takes c's oldest send off its VI's queue if it completed.
bool Link::take_send(Channel& c, std::uint32_t& i) {
  if (c.sends.empty()) return false;
  i = c.sends.front();
  if (!(desc(i)->CS.Status & VIP_STATUS_DONE)) return false;
  c.sends.pop();
  VIP_DESCRIPTOR* d;
  c.vi->send_done(d);  // desc(i): the queue completes in order, and it is done
  return true;
}

void Link::reap_sends(int peer) {
  Channel& c = *channels_[peer];
  for (std::uint32_t i; take_send(c, i);) on_send_complete(i, desc(i));
}

void Link::on_send_complete(std::uint32_t i, VIP_DESCRIPTOR* d) {
  if (posted_[i]) {
    posted_[i] = false;
    --posted_sends_;
  }
  if (i < first_rdma_) return;
  const std::uint32_t tag = rdma_tag_[i - first_rdma_];
  rdma_free_.push_back(i);
  rdma_done_(tag, !(d->CS.Status & VIP_STATUS_ERROR_MASK));
}

// ---- receiving ----

bool Link::post_recv(Channel& c, std::uint32_t i) {
  VIP_DESCRIPTOR* d = desc(i);
  std::memset(&d->CS, 0, sizeof d->CS);
  d->CS.SegCount = 1;
  d->CS.Length = kBufBytes;
  d->DS[0].Local.Data.Address = buffer(i);
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = kBufBytes;
  if (c.vi->post_recv(d, arena_handle_) != via::Result::success) return false;
  c.receives.push(i);
  return true;
}

bool Link::next_frame(int peer, Frame& f) {
  Channel& c = *channels_[peer];
  if (c.receives.empty()) return false;
  const std::uint32_t i = c.receives.front();
  VIP_DESCRIPTOR* d = desc(i);
  if (!(d->CS.Status & VIP_STATUS_DONE)) return false;
  c.receives.pop();
  f = Frame{i, buffer(i), d->CS.Length, !(d->CS.Status & VIP_STATUS_ERROR_MASK)};
  if (f.ok) ++dispatching_;
  return true;
}

// The VI's receive queue gives a descriptor back (VipRecvDone) when it is
// re-posted: that is off the path from a message to its handler.
bool Link::release(int peer, const Frame& f) {
  Channel& c = *channels_[peer];
  if (!f.ok) {  // not posted again
    VIP_DESCRIPTOR* done;
    c.vi->recv_done(done);
    return true;
  }
  --dispatching_;
  if (c.reposts.size() + dispatching_ < kLateReposts) {
    c.reposts.push_back(f.buffer);
    return true;
  }
  return repost(c, f.buffer);
}

bool Link::repost_next(int peer) {
  Channel& c = *channels_[peer];
  const std::uint32_t i = c.reposts.back();
  c.reposts.pop_back();
  return repost(c, i);
}

bool Link::repost(Channel& c, std::uint32_t i) {
  VIP_DESCRIPTOR* done;
  c.vi->recv_done(done);  // the queue's oldest, not necessarily desc(i): all that matters is that one leaves
  return c.vi->state() != via::ViState::connected || post_recv(c, i);
}

bool Link::broken(int peer) const {
  const via::Vi* vi = channels_[peer]->vi;
  return vi && vi->state() == via::ViState::error;
}

}  // namespace am::detail
