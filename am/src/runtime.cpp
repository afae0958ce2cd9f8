#include "runtime.hpp"

#include <via/bootstrap.hpp>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

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
// Descriptors per peer for messages that carry only acknowledgements. They
// add no receives at the peer: every acknowledgement in flight answers one
// of its open requests, as a reply would.
constexpr std::uint32_t kAckDescs = 4;
// A bundle of deferred requests leaves once it holds this many: as many as
// leave room in the bundle's answer for a reply of 4 words to each, and as
// no request takes more room than such a reply, the count bounds its bytes.
using detail::kBundleItems;
static_assert(kBundleItems == wire::kMaxPayload / wire::item_bytes(wire::kMaxArgs, 0));
// Service passes an owed acknowledgement may wait for a message to ride on
// before it goes out alone: a program that keeps making AM calls without
// ever waiting still answers its peers.
constexpr std::uint64_t kMaxAckDelayPasses = 32;
constexpr std::uint64_t kRdmaPiece = 64u << 20;  // largest single RDMA descriptor
constexpr std::uint32_t kConnectTimeoutMs = 60000;
constexpr std::uint16_t kBarrierArrive = 0, kBarrierRelease = 1;

std::string last_error_text;
HandlerEntry handlers[AM_MAX_HANDLERS];

void print_returned(const Returned& r) {
  std::fprintf(stderr, "am: message to rank %d (handler %d) returned: %s\n", r.dest, r.handler, r.description);
}
std::function<void(const Returned&)> error_handler = print_returned;

// The handler at `index` if it takes a message with `payload_bytes` bytes.
const HandlerEntry* message_handler(std::uint16_t index, std::uint32_t payload_bytes) {
  if (index >= AM_MAX_HANDLERS) return nullptr;
  const HandlerEntry& e = handlers[index];
  return std::int64_t(payload_bytes) <= e.max_payload ? &e : nullptr;
}

const char* cause_text(int cause) {
  switch (cause) {
    case AM_E_BADHANDLER: return "no handler of that kind is registered at that index on the destination";
    case AM_E_BADSEGOFF: return "the remote range lies outside the destination's segment";
    case AM_E_BADLENGTH: return "the destination refused the message's length";
    case AM_E_TIMEOUT: return "nothing came from the destination for the peer timeout";
    default: return "the destination is unreachable (its VI broke: the process died or left)";
  }
}

}  // namespace

Status error(Status s, std::string why) {
  last_error_text = std::move(why);
  return s;
}
const char* last_error_message() { return last_error_text.c_str(); }

HandlerEntry* handler_table() { return handlers; }
void set_error_handler_fn(std::function<void(const Returned&)> fn) {
  error_handler = fn ? std::move(fn) : std::function<void(const Returned&)>(print_returned);
}

std::unique_ptr<Runtime> Runtime::instance_;

Runtime::Runtime(const Config& config) : config_(config), depth_(std::uint16_t(std::clamp(config.depth, 1u, 1024u))) {
  policy_.retransmit = config.reliability == Reliability::unreliable;
  policy_.min_rto_ns = std::max<std::uint64_t>(config.retransmit_ms, 1) * 1'000'000;
  policy_.timeout_ns = config.timeout_ms * 1'000'000;
}

Runtime::~Runtime() {
  if (detail::bundle_rooms.data() == rooms_.data()) detail::bundle_rooms = {};
  if (nic_) {
    for (auto& p : peers_)
      if (p->vi) {
        if (p->vi->state() == via::ViState::connected) p->vi->disconnect();
        nic_->destroy_vi(p->vi);
      }
    for (Operation& op : ops_)
      if (op.registered) nic_->deregister_memory(op.local, op.local_handle);
    if (segment_handle_) nic_->deregister_memory(segment_, segment_handle_);
    if (arena_handle_) nic_->deregister_memory(arena_, arena_handle_);
  }
  nic_.reset();
  std::free(arena_);
  if (own_segment_) std::free(segment_);
}

std::uint64_t Runtime::now_ns() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000ull + std::uint64_t(ts.tv_nsec);
}

VIP_DESCRIPTOR* Runtime::desc(std::uint32_t i) const {
  return reinterpret_cast<VIP_DESCRIPTOR*>(descs_ + std::size_t(i) * kDescStride);
}
std::byte* Runtime::buffer(std::uint32_t i) const { return buffers_ + std::size_t(i) * kBufBytes; }

// ---- set-up and tear-down ----

Status Runtime::enable(const Config& config) {
  if (instance_) return error(Status::bad_arg, "am_enable: already enabled");
  // Installed first: peers' first requests may arrive while we wait for their hellos.
  instance_.reset(new Runtime(config));
  const Status s = instance_->start();
  if (s != Status::ok) instance_.reset();
  return s;
}

Status Runtime::start() {
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) return error(Status::enable_failed, "am_enable: " + why);
  const int size = job->size();
  me_ = job->rank();
  if (size > 4096) return error(Status::enable_failed, "am_enable: more than 4096 ranks");
  auto check = [](via::Result r, const char* what) {
    std::string why = "am_enable: ";
    why += what;
    why += ": ";
    why += via::describe(r);
    return r == via::Result::success ? Status::ok : error(Status::enable_failed, why);
  };
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
  if ((s = check(nic_->create_ptag(ptag_), "create protection tag")) != Status::ok) return s;

  // Segment: the target of stores and the source of gets, open to the peers' RDMA.
  segment_bytes_ = config_.segment ? config_.segment_bytes : std::max<std::size_t>(config_.segment_bytes, 64);
  if (config_.segment) {
    segment_ = static_cast<std::byte*>(config_.segment);
  } else {
    segment_ = static_cast<std::byte*>(std::aligned_alloc(4096, (segment_bytes_ + 4095) / 4096 * 4096));
    own_segment_ = true;
    if (!segment_) return error(Status::resource, "am_enable: cannot allocate the segment");
  }
  if (segment_bytes_ &&
      (s = check(nic_->register_memory(segment_, segment_bytes_, via::MemAttributes{ptag_, true, true}, segment_handle_),
                 "register the segment")) != Status::ok)
    return s;

  // Arena: per peer `depth` request buffers (a bundle is written in its
  // slot's), `depth` reply buffers, kAckDescs acknowledgement buffers and
  // 2 x depth receive buffers (a peer has at most depth requests and depth
  // answers on the way to us) plus kLateReposts, and RDMA descriptors.
  const std::uint32_t per_peer = 4u * depth_ + kAckDescs + kLateReposts;
  const std::uint32_t buffers = per_peer * std::uint32_t(size);
  const std::uint32_t descs = buffers + kRdmaDescs;
  arena_bytes_ = (std::size_t(descs) * kDescStride + std::size_t(buffers) * kBufBytes + 4095) / 4096 * 4096;
  arena_ = static_cast<std::byte*>(std::aligned_alloc(4096, arena_bytes_));
  if (!arena_) return error(Status::resource, "am_enable: cannot allocate message buffers");
  std::memset(arena_, 0, arena_bytes_);
  descs_ = arena_;
  buffers_ = arena_ + std::size_t(descs) * kDescStride;
  if ((s = check(nic_->register_memory(arena_, arena_bytes_, via::MemAttributes{ptag_, false, false}, arena_handle_),
                 "register message buffers")) != Status::ok)
    return s;
  desc_info_.resize(descs);
  first_rdma_ = buffers;
  rdma_op_.resize(kRdmaDescs);
  for (std::uint32_t i = 0; i < kRdmaDescs; ++i) {
    desc_info_[first_rdma_ + i] = DescInfo{Role::rdma, 0, std::uint16_t(i)};
    rdma_free_.push_back(first_rdma_ + i);
  }

  via::ViAttributes attrs;
  attrs.reliability = config_.reliability == Reliability::reliable ? VIP_SERVICE_RELIABLE_DELIVERY : VIP_SERVICE_UNRELIABLE;
  attrs.ptag = ptag_;
  attrs.rdma_write = true;
  attrs.rdma_read = config_.reliability == Reliability::reliable;
  const via::NetAddress local{{}, {'a', 'm'}};
  rooms_.resize(std::size_t(size));
  // Published now: handlers run (and may defer requests) while start waits for the peers.
  detail::bundle_rooms = rooms_;
  for (int r = 0; r < size; ++r) {
    peers_.push_back(std::make_unique<Peer>(r, depth_, policy_, kMaxAckDelayPasses, max_sends, max_receives));
    Peer& p = *peers_.back();
    p.room = &rooms_[std::size_t(r)];
    p.first_desc = per_peer * std::uint32_t(r);
    const std::uint32_t first_receive = 2u * depth_ + kAckDescs;
    for (std::uint32_t i = 0; i < per_peer; ++i) {
      const Role role = i < depth_          ? Role::request
                        : i < 2u * depth_   ? Role::reply
                        : i < first_receive ? Role::ack
                                            : Role::receive;
      desc_info_[p.first_desc + i] = DescInfo{role, std::uint16_t(r), std::uint16_t(i % depth_)};
    }
    if (r == me_) {
      p.seg_base = std::uintptr_t(segment_);
      p.seg_bytes = segment_bytes_;
      p.hello_received = true;
      continue;
    }
    if ((s = check(nic_->create_vi(attrs, nullptr, nullptr, p.vi), "create VI")) != Status::ok) return s;
    remote_.push_back(&p);
    for (std::uint32_t i = first_receive; i < per_peer; ++i)
      if (!post_recv(p, p.first_desc + i)) return error(Status::enable_failed, "am_enable: cannot post receives");
    via::NetAddress remote{{}, {'a', 'm'}};
    if ((s = check(nic_->resolve("rank" + std::to_string(r), 0, remote.host), "resolve a peer")) != Status::ok) return s;
    if ((s = check(p.vi->connect_peer_request(local, remote, kConnectTimeoutMs), "connect request")) != Status::ok)
      return s;
  }
  for (auto& p : peers_)
    if (p->vi && (s = check(p->vi->connect_peer_wait(), "connect to a peer")) != Status::ok) return s;

  // Hello: tell every peer where our segment is (and check we agree on the depth).
  for (auto& p : peers_) {
    if (!p->vi) continue;
    const Word args[4] = {std::uintptr_t(segment_), segment_bytes_, segment_handle_, depth_};
    Sent sent;
    sent.purpose = Purpose::hello;
    if ((s = send_request(*p, wire::Kind::hello, wire::kNoHandler, args, 4, nullptr, 0, sent)) != Status::ok)
      return error(Status::enable_failed, "am_enable: a peer is unreachable");
  }
  auto everyone = [&] {
    return std::all_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed || p->hello_received; }) &&
           hellos_acked_ + 1 >= peers_.size();
  };
  block_until([&] { return everyone() || std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed; }); });
  if (!everyone() || std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed; }))
    return error(Status::enable_failed, "am_enable: a peer failed during set-up");
  return Status::ok;
}

Status Runtime::disable() {
  if (!instance_) return error(Status::not_init, "am_disable: AM is not enabled");
  Runtime& rt = *instance_;
  rt.disabling_ = true;
  const Status s = rt.barrier();
  // Every request answered both ways: ours by the peers, theirs by us (what
  // we still owe goes out before the connections close).
  rt.block_until([&] {
    bool idle = rt.posted_sends_ == 0 && !rt.owes_acks();
    for (auto& p : rt.peers_) idle = idle && (p->failed || p->window.outstanding() == 0);
    return idle;
  });
  instance_.reset();
  return s;
}

void* Runtime::segment(int proc) const {
  return proc >= 0 && proc < procs() ? reinterpret_cast<void*>(peers_[proc]->seg_base) : nullptr;
}
std::size_t Runtime::segment_size(int proc) const { return proc >= 0 && proc < procs() ? peers_[proc]->seg_bytes : 0; }

// ---- I/O ----

// Sends the message in buffer `di` to p.
bool Runtime::post_send(Peer& p, std::uint32_t di, std::uint32_t length) {
  if (!p.vi) {
    std::byte* buf = buffer(di);
    loopback_.emplace_back(buf, buf + length);
    return true;
  }
  return !p.failed && send_frame(p, di, length);
}

// Polls until p has a credit for a request; false if p failed meanwhile.
bool Runtime::await_credit(Peer& p) {
  if (!p.window.has_credit()) {
    ++counters_.credit_stalls;
    block_until([&] { return p.window.has_credit() || p.failed; });
  }
  return !p.failed;
}

// Opens an empty bundle to p in a request slot of its own; false if p
// failed meanwhile.
bool Runtime::open_bundle(Peer& p) {
  if (!await_credit(p)) return false;
  const std::uint16_t slot = p.window.open();
  p.sent[slot] = Sent{Purpose::bundle};
  const std::uint32_t di = request_desc(p, slot);
  if (desc_info_[di].posted) wait_send_free(p, di);
  if (p.failed) return false;
  flush(p);  // one that a handler run during the wait opened
  if (p.failed) return false;  // and p failed sending it: the slot came back with the rest
  p.bundle_slot = slot;
  *p.room = detail::BundleRoom{buffer(di) + wire::kHeaderBytes, nullptr, kBundleItems};
  ++open_bundles_;
  return true;
}

// The bytes of items in p's open bundle.
std::uint32_t Runtime::bundle_bytes(const Peer& p) const {
  return std::uint32_t(p.room->next - (buffer(request_desc(p, std::uint16_t(p.bundle_slot))) + wire::kHeaderBytes));
}

// Closes p's open bundle to more requests; returns the bytes of its items.
std::uint32_t Runtime::close_bundle(Peer& p) {
  const std::uint32_t bytes = bundle_bytes(p);
  *p.room = detail::BundleRoom{};
  p.bundle_slot = kNoBundle;
  --open_bundles_;
  return bytes;
}

// Sends p's bundle, if one is open: its header goes in front of its items.
void Runtime::flush(Peer& p) {
  if (p.bundle_slot == kNoBundle) return;
  const auto slot = std::uint16_t(p.bundle_slot);
  if (!p.failed) counters_.requests_sent += kBundleItems - p.room->items_left;  // a failed peer's come back unsent
  const std::uint32_t bytes = close_bundle(p);
  const std::uint32_t di = request_desc(p, slot);
  const wire::Header h{wire::Kind::bundle, 0, 0, 0, wire::kNoHandler, slot, p.window.seq(slot), bytes};
  std::memcpy(buffer(di), &h, wire::kHeaderBytes);
  p.sent[slot].length = std::uint32_t(wire::kHeaderBytes) + bytes;
  // Its timers start now: the slot may have been stamped while a wait in
  // open_bundle ran timers, long before the bundle filled.
  p.window.restamp(slot);
  ++counters_.bundles_sent;
  post_send(p, di, p.sent[slot].length);
}

void Runtime::flush_all() {
  for (auto it = remote_.begin(); open_bundles_ && it != remote_.end(); ++it) flush(**it);
}

// One frame from buffer `di` to p.
bool Runtime::send_frame(Peer& p, std::uint32_t di, std::uint32_t length) {
  std::byte* buf = buffer(di);
  // A small message leaves at once, copied by the VI: no descriptor to post or
  // retire, and the buffer is free again on return (it keeps its copy for a
  // retransmission). Behind queued work, or with the link full, a descriptor takes it.
  if (length <= via::Vi::kMaxInlineSend) {
    const iovec iov{buf, length};
    if (p.vi->send_inline(&iov, 1) == via::Result::success) return true;
  }
  VIP_DESCRIPTOR* d = desc(di);
  std::memset(&d->CS, 0, sizeof d->CS);
  d->CS.SegCount = 1;
  d->CS.Length = length;
  d->DS[0].Local.Data.Address = buf;
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = length;
  if (p.vi->post_send(d, arena_handle_) != via::Result::success) {
    fail_peer(p, AM_E_UNREACHABLE, "cannot post a send to the peer (its VI is broken)");
    return false;
  }
  desc_info_[di].posted = true;
  ++posted_sends_;
  p.sends.push(di);
  // Usually complete already (the frame is out): retired now, while the
  // descriptor is in cache, unless older sends (RDMA, whose completions run
  // operations' callbacks) come first; service() reaps those.
  if (std::uint32_t done; p.sends.front() == di && take_send(p, done)) on_send_complete(done, d);
  return true;
}

bool Runtime::post_recv(Peer& p, std::uint32_t di) {
  VIP_DESCRIPTOR* d = desc(di);
  std::memset(&d->CS, 0, sizeof d->CS);
  d->CS.SegCount = 1;
  d->CS.Length = kBufBytes;
  d->DS[0].Local.Data.Address = buffer(di);
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = kBufBytes;
  if (p.vi->post_recv(d, arena_handle_) != via::Result::success) return false;
  p.receives.push(di);
  return true;
}

// Takes p's oldest send off its VI's queue if it completed.
bool Runtime::take_send(Peer& p, std::uint32_t& di) {
  if (p.sends.empty()) return false;
  di = p.sends.front();
  if (!(desc(di)->CS.Status & VIP_STATUS_DONE)) return false;
  p.sends.pop();
  VIP_DESCRIPTOR* d;
  p.vi->send_done(d);  // desc(di): the queue completes in order, and it is done
  return true;
}

void Runtime::reap_sends(Peer& p) {
  for (std::uint32_t di; take_send(p, di);) on_send_complete(di, desc(di));
}

// Handles what arrived from p, in order; each receive is taken off the list
// before its handler runs, which may poll again.
int Runtime::receive(Peer& p) {
  int handled = 0;
  while (!p.receives.empty()) {
    const std::uint32_t di = p.receives.front();
    VIP_DESCRIPTOR* d = desc(di);
    if (!(d->CS.Status & VIP_STATUS_DONE)) break;
    p.receives.pop();
    on_receive(p, di, d);
    ++handled;
    // Due acknowledgements go between frames, not after the last: a peer
    // that filled its window waits for them while we work through the rest.
    if (p.filter.ack_due(services_)) send_acks(p);
  }
  return handled;
}

// A buffer is rewritten only once the NIC is done with its last send (callers
// check desc_info_[di].posted first). A send to a dead peer may never finish:
// the timers (in block_until) end the wait.
void Runtime::wait_send_free(Peer& p, std::uint32_t di) {
  block_until([&] { return !desc_info_[di].posted || p.failed; });
}

int Runtime::service() {
  nic_->progress();
  return handle();
}

// Re-posts the receives handled last time, takes in what the NIC's last
// progress completed, then runs the loopback queue and the timers.
int Runtime::handle() {
  int handled = 0;
  for (Peer* p : remote_) {
    while (!p->reposts.empty()) {  // one at a time: a failure runs the error handler, which may poll
      const std::uint32_t di = p->reposts.back();
      p->reposts.pop_back();
      repost(*p, di);
    }
    reap_sends(*p);
    handled += receive(*p);
    if (p->filter.ack_due(services_)) send_acks(*p);
  }
  if (!loopback_.empty()) handled += run_loopback();
  if (vi_error_) {
    vi_error_ = false;
    for (auto& p : peers_)
      if (p->vi && p->vi->state() == via::ViState::error) fail_peer(*p, AM_E_UNREACHABLE, cause_text(AM_E_UNREACHABLE));
  }
  if ((++services_ & 255) == 0) check_timers();  // the clock is read here, not on every poll
  return handled;
}

// The messages to this rank queued so far (handlers may queue more).
int Runtime::run_loopback() {
  int handled = 0;
  for (std::size_t n = loopback_.size(); n > 0 && !loopback_.empty(); --n) {
    std::vector<std::byte> msg = std::move(loopback_.front());
    loopback_.pop_front();
    dispatch(*peers_[me_], msg.data(), msg.size());
    ++handled;
  }
  return handled;
}

template <class Pred>
void Runtime::block_until(Pred&& pred) {
  while (!pred()) {
    flush_all();  // what we wait for may be an answer to a deferred message
    if (service() > 0) continue;
    if (pred()) break;
    // Nothing to handle: about to sleep, so what the peers are owed goes now
    // (the bundles went above, and no handler has run since).
    if (may_owe_acks_) send_all_acks();
    // The NIC's wait runs its progress before each check: handle() is enough.
    // Timers: handle() checks them every 256 calls, which a rank woken now and
    // then by a frame may take seconds to make while what it waits for needs
    // a retransmission; so a wait that timed out checks them, and so does
    // every 16th wait (not each: a ping-pong waits once per round trip, and
    // the check's clock read would cost it ~10 %).
    if (nic_->wait([&] { return handle() > 0 || pred(); }, 20) == via::Result::timeout || (++waits_ & 15) == 0)
      check_timers();
  }
  // Back to the program, which may compute for long without an AM call, while
  // a peer waits for what it is owed (a store's completion, a barrier's
  // acknowledgement): that goes now.
  if (may_owe_acks_) send_all_acks();
}

void Runtime::on_send_complete(std::uint32_t di, VIP_DESCRIPTOR* d) {
  DescInfo& info = desc_info_[di];
  if (info.posted) {
    info.posted = false;
    --posted_sends_;
  }
  if (info.role != Role::rdma) return;
  const std::uint32_t op_index = rdma_op_[info.index];
  rdma_free_.push_back(di);
  Operation& op = ops_[op_index];
  --op.pending;
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
    op_local_done(op);
    op_finish(op, error(Status::unreachable, "RDMA to the peer failed (its VI broke)"));
    return;
  }
  if (op.is_store) {
    if (op.pending == 1) op_local_done(op);  // only the store_done message is left
    op_release_if_done(op);
  } else if (op.pending == 0) {
    finish_get(op);
  }
}

// The VI's receive queue gives a descriptor back (VipRecvDone) when it is
// re-posted: that is off the path from a message to its handler.
void Runtime::on_receive(Peer& p, std::uint32_t di, VIP_DESCRIPTOR* d) {
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) {  // flushed by a broken VI, or a failed receive
    VIP_DESCRIPTOR* done;
    p.vi->recv_done(done);
    return;
  }
  p.window.heard();  // any frame: the peer is alive (a lost answer is not a dead peer)
  ++dispatching_;
  dispatch(p, buffer(di), d->CS.Length);
  --dispatching_;
  if (p.reposts.size() + dispatching_ < kLateReposts)
    p.reposts.push_back(di);
  else
    repost(p, di);
}

void Runtime::repost(Peer& p, std::uint32_t di) {
  VIP_DESCRIPTOR* done;
  p.vi->recv_done(done);  // the queue's oldest, not necessarily desc(di): all that matters is that one leaves
  if (p.vi->state() == via::ViState::connected && !post_recv(p, di))
    fail_peer(p, AM_E_UNREACHABLE, "cannot re-post a receive to the peer's VI");
}

// Handles the message of one frame.
void Runtime::dispatch(Peer& p, std::byte* data, std::size_t length) {
  wire::Message m;
  if (const wire::ParseError e = wire::parse(data, length, m); e != wire::ParseError::none) {
    std::fprintf(stderr, "am: rank %d: dropped a malformed message from rank %d: %s\n", me_, p.rank, wire::describe(e));
    return;
  }
  // A bundle and a bundle's answer count the requests and replies they carry.
  if (m.header.kind != wire::Kind::bundle && m.header.handler != wire::kBundleReply) ++counters_.messages_received;
  // Acknowledgements first: they answer requests older than this message.
  for (unsigned i = 0; i < m.header.acks; ++i) handle_ack(p, m.ack(i));
  switch (m.header.kind) {
    case wire::Kind::reply: handle_reply(p, m); break;
    case wire::Kind::ack: break;
    default: handle_request(p, m); break;
  }
}

// ---- sending ----

Status Runtime::send_request(Peer& p, wire::Kind kind, std::uint16_t handler, const Word* args, unsigned nargs,
                             const void* payload, std::size_t bytes, const Sent& sent) {
  if (p.failed || !await_credit(p))
    return error(Status::unreachable, "rank " + std::to_string(p.rank) + " is unreachable");
  const std::uint16_t slot = p.window.open();
  const std::uint32_t di = request_desc(p, slot);
  if (desc_info_[di].posted) wait_send_free(p, di);
  const wire::Header h{kind, std::uint8_t(nargs), 0, 0, handler, slot, p.window.seq(slot), std::uint32_t(bytes)};
  Sent& s = p.sent[slot];
  s = sent;
  s.length = compose(p, di, h, args, payload);
  ++counters_.requests_sent;
  flush(p);  // the deferred requests before it stay before it
  post_send(p, di, s.length);
  if (p.window.wants_send_time()) p.window.sent_at(now_ns());  // one request in kTimeEvery, or under backoff
  return Status::ok;
}

namespace {
bool valid_request(int dest, int procs, int handler, unsigned nargs) {
  return unsigned(dest) < unsigned(procs) && unsigned(handler) < AM_MAX_HANDLERS && nargs <= wire::kMaxArgs;
}
}  // namespace

// A deferred request that request_deferred could not write into an open
// bundle. Bad arguments and requests to this rank go as send's; otherwise
// p's bundle leaves if it has no room (polling then, as a request does),
// and a new one opens.
Status Runtime::send_deferred(int dest, int handler, const Word* args, unsigned nargs) {
  if (!valid_request(dest, procs(), handler, nargs) || !peers_[dest]->vi)
    return send(false, dest, handler, args, nargs, nullptr, 0);
  Peer& p = *peers_[dest];
  while (!detail::write_item(*p.room, handler, args, nargs)) {
    if (p.bundle_slot != kNoBundle) {
      flush(p);
      service();
    } else if (p.failed || !open_bundle(p)) {
      return error(Status::unreachable, "rank " + std::to_string(p.rank) + " is unreachable");
    }
  }
  return Status::ok;
}

void Runtime::send_reply(Peer& p, std::uint16_t slot, std::uint32_t seq, std::uint8_t status, std::uint16_t handler,
                         const Word* args, unsigned nargs, const void* payload, std::size_t bytes) {
  const std::uint32_t di = reply_desc(p, slot);
  if (desc_info_[di].posted) wait_send_free(p, di);
  const wire::Header h{wire::Kind::reply, std::uint8_t(nargs), status, 0, handler, slot, seq, std::uint32_t(bytes)};
  p.reply_length[slot] = compose(p, di, h, args, payload);
  ++counters_.replies_sent;
  post_send(p, di, p.reply_length[slot]);
  p.filter.replied(slot);
}

// Adds a reply (or a refusal: status set) to the request of a bundle that
// ctx runs, to the items in the slot's reply buffer that the bundle's
// answer carries.
Status Runtime::add_bundle_reply(HandlerContext& ctx, std::uint16_t handler, std::uint8_t status, const Word* args,
                                 unsigned nargs, const void* payload, std::size_t bytes) {
  const std::size_t length = wire::item_bytes(nargs, bytes);
  if (ctx.reply_bytes + length > wire::kMaxPayload)
    return error(Status::too_large,
                 "the replies to one bundle of deferred requests travel in one message of am_max_size() bytes, and "
                 "this one does not fit: reply with large payloads to requests that are not deferred");
  Peer& p = *ctx.peer;
  const std::uint32_t di = reply_desc(p, ctx.slot);
  if (ctx.reply_bytes == 0 && desc_info_[di].posted) wait_send_free(p, di);
  const wire::ItemHeader h{handler, std::uint8_t(nargs), status, ctx.item, std::uint16_t(bytes)};
  ctx.reply_bytes += std::uint32_t(wire::encode_item(buffer(di) + wire::kHeaderBytes + ctx.reply_bytes, h, args, payload));
  if (!status) ++counters_.replies_sent;
  return Status::ok;
}

// Encodes a message to p into buffer `di`, carrying as many of the
// acknowledgements p is owed as fit; returns its length.
std::uint32_t Runtime::compose(Peer& p, std::uint32_t di, wire::Header h, const Word* args, const void* payload) {
  if (!p.filter.owes_acks()) return std::uint32_t(wire::encode(buffer(di), h, args, nullptr, payload));
  Ack acks[wire::kMaxAcks];
  h.acks = std::uint8_t(p.filter.take_acks(acks, wire::kMaxAcks));
  counters_.acks_sent += h.acks;
  return std::uint32_t(wire::encode(buffer(di), h, args, acks, payload));
}

// Sends what p is owed in messages of their own, while an acknowledgement
// buffer is free; whatever is left waits for the next message or pass.
void Runtime::send_acks(Peer& p) {
  while (p.filter.owes_acks() && !p.failed) {
    const std::uint32_t di = ack_desc(p, p.next_ack_desc);
    if (desc_info_[di].posted) return;
    p.next_ack_desc = (p.next_ack_desc + 1) % kAckDescs;
    const wire::Header h{wire::Kind::ack, 0, 0, 0, wire::kNoHandler, 0, 0, 0};
    ++counters_.ack_messages_sent;
    post_send(p, di, compose(p, di, h, nullptr, nullptr));
  }
}

void Runtime::send_all_acks() {
  for (auto& p : peers_)
    if (p->filter.owes_acks()) send_acks(*p);
  may_owe_acks_ = owes_acks();  // some wait for a free buffer
}

bool Runtime::owes_acks() const {
  return std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return !p->failed && p->filter.owes_acks(); });
}

Status Runtime::send(bool reply, int dest, int handler, const Word* args, unsigned nargs, const void* payload,
                     std::size_t bytes) {
  if (dest < 0 || dest >= procs()) return error(Status::bad_arg, "no rank " + std::to_string(dest));
  if (handler < 0 || handler >= AM_MAX_HANDLERS) return error(Status::bad_arg, "handler index out of range");
  if (nargs > wire::kMaxArgs) return error(Status::bad_arg, "more than 4 arguments");
  if (bytes > wire::kMaxPayload) return error(Status::too_large, "payload larger than am_max_size()");
  if (bytes && !payload) return error(Status::bad_arg, "payload is null");
  if (reply) {
    HandlerContext* ctx = context_;
    if (!ctx || !ctx->may_reply) return error(Status::not_in_handler, "a reply is allowed only inside a request handler");
    if (ctx->replied) return error(Status::not_in_handler, "a request handler may reply only once");
    if (dest != ctx->peer->rank) return error(Status::bad_arg, "a reply goes only to the requester");
    if (ctx->in_bundle) {
      const Status s = add_bundle_reply(*ctx, std::uint16_t(handler), 0, args, nargs, payload, bytes);
      ctx->replied = s == Status::ok;
      return s;
    }
    ctx->replied = true;
    send_reply(*ctx->peer, ctx->slot, ctx->seq, 0, std::uint16_t(handler), args, nargs, payload, bytes);
    return Status::ok;
  }
  const Status s =
      send_request(*peers_[dest], wire::Kind::request, std::uint16_t(handler), args, nargs, payload, bytes, Sent{});
  service();  // every request also polls; after sending, so that the request is not kept waiting
  return s;
}

// ---- receiving ----

void Runtime::handle_request(Peer& p, const wire::Message& m) {
  const wire::Header& h = m.header;
  switch (p.filter.admit(h.slot, h.seq)) {
    case Admission::bad_slot:
      std::fprintf(stderr, "am: rank %d: dropped a request from rank %d naming slot %u (depth %u)\n", me_, p.rank,
                   h.slot, depth_);
      return;
    case Admission::duplicate:
      ++counters_.duplicates_dropped;
      // Our answer was lost (or is slow): answer again the same way.
      switch (p.filter.answer(h.slot)) {
        case Answer::replied:
          if (!desc_info_[reply_desc(p, h.slot)].posted) post_send(p, reply_desc(p, h.slot), p.reply_length[h.slot]);
          return;
        case Answer::acknowledged:
          p.filter.acknowledge_again(h.slot, services_);
          may_owe_acks_ = true;
          send_acks(p);
          return;
        case Answer::running:  // the handler is still at work: its answer comes when it is done
          return;
      }
      return;
    case Admission::stale:
      ++counters_.duplicates_dropped;
      return;
    case Admission::fresh:
      break;
  }
  HandlerContext ctx{&p, h.slot, h.seq, true, false};
  HandlerContext* outer = context_;
  context_ = &ctx;
  const std::uint8_t status = run_request(p, m, ctx);
  context_ = outer;
  // The answer returns the requester's credit: the handler's reply, a
  // returned request's status, or else an acknowledgement, sent later
  // with others.
  if (ctx.replied) return;
  if (status) {
    send_reply(p, h.slot, h.seq, status, wire::kNoHandler, nullptr, 0, nullptr, 0);
  } else {
    p.filter.acknowledge(h.slot, services_);
    may_owe_acks_ = true;
  }
}

// Runs one fresh request; returns the AM_E_* cause if it is refused.
std::uint8_t Runtime::run_request(Peer& p, const wire::Message& m, HandlerContext& ctx) {
  const wire::Header& h = m.header;
  std::byte* payload = const_cast<std::byte*>(m.payload);
  switch (h.kind) {
    case wire::Kind::request: {
      const HandlerEntry* entry = message_handler(h.handler, h.payload_bytes);
      if (!entry) return AM_E_BADHANDLER;
      entry->message(Delivery{p.rank, h.nargs, reinterpret_cast<const std::byte*>(m.args), payload, h.payload_bytes});
      return 0;
    }
    case wire::Kind::bundle:
      run_bundle(p, m, ctx);
      return 0;
    case wire::Kind::store_data:
    case wire::Kind::store_done: {
      const std::uint64_t addr = m.args[0];
      const std::uint64_t bytes = h.kind == wire::Kind::store_data ? h.payload_bytes : m.args[1];
      if (!in_my_segment(addr, bytes)) return AM_E_BADSEGOFF;
      if (h.payload_bytes > bytes) return AM_E_BADLENGTH;
      if (h.payload_bytes)
        std::memcpy(reinterpret_cast<std::byte*>(addr + bytes - h.payload_bytes), payload, h.payload_bytes);
      if (h.kind == wire::Kind::store_data || h.handler == wire::kNoHandler) return 0;
      const HandlerEntry* entry = h.handler < AM_MAX_HANDLERS ? &handlers[h.handler] : nullptr;
      if (!entry || entry->type != HandlerEntry::Type::memory) return AM_E_BADHANDLER;
      ctx.may_reply = false;  // a store handler answers nobody
      entry->memory(p.rank, reinterpret_cast<void*>(addr), bytes, m.args[2]);
      return 0;
    }
    case wire::Kind::get: {
      const std::uint64_t addr = m.args[0], bytes = m.args[1];
      if (bytes > wire::kMaxPayload) return AM_E_BADLENGTH;
      if (!in_my_segment(addr, bytes)) return AM_E_BADSEGOFF;
      ctx.replied = true;
      send_reply(p, h.slot, h.seq, 0, wire::kNoHandler, nullptr, 0, reinterpret_cast<const void*>(addr), bytes);
      return 0;
    }
    case wire::Kind::hello:
      if (m.args[3] != depth_) {
        std::fprintf(stderr, "am: rank %d: rank %d runs with VIASTACK_AM_DEPTH=%llu, we with %u\n", me_, p.rank,
                     static_cast<unsigned long long>(m.args[3]), depth_);
        fail_peer(p, AM_E_UNREACHABLE, "the peer's AM configuration differs");
        return AM_E_BADLENGTH;
      }
      p.seg_base = m.args[0];
      p.seg_bytes = m.args[1];
      p.seg_handle = via::MemHandle(m.args[2]);
      p.hello_received = true;
      return 0;
    case wire::Kind::barrier:
      if (h.handler == kBarrierArrive)
        ++arrived_[m.args[0] & 1];
      else
        released_epoch_ = std::max(released_epoch_, std::uint32_t(m.args[0]));
      return 0;
    case wire::Kind::reply:
    case wire::Kind::ack:
      break;
  }
  return AM_E_BADLENGTH;
}

// Runs a bundle's requests in order. Their replies, and the refusals of
// requests naming no handler, go back together as the bundle's reply; with
// none, the bundle is acknowledged as one request.
void Runtime::run_bundle(Peer& p, const wire::Message& m, HandlerContext& ctx) {
  ctx.in_bundle = true;
  wire::ItemReader items(m.payload, m.header.payload_bytes, wire::Items::requests);
  const std::uint16_t first = ctx.item;
  for (wire::Item it; items.next(it); ++ctx.item) {
    ctx.replied = false;
    const HandlerEntry* entry = message_handler(it.header.handler, it.header.payload_bytes);
    if (!entry) {
      add_bundle_reply(ctx, wire::kNoHandler, AM_E_BADHANDLER, nullptr, 0, nullptr, 0);
      continue;
    }
    entry->message(Delivery{p.rank, it.header.nargs, it.args, const_cast<std::byte*>(it.payload), it.header.payload_bytes});
  }
  counters_.messages_received += std::uint16_t(ctx.item - first);
  if (items.error() != wire::ParseError::none)
    std::fprintf(stderr, "am: rank %d: dropped a malformed request in a bundle from rank %d, and the rest of it: %s\n",
                 me_, p.rank, wire::describe(items.error()));
  ctx.replied = ctx.reply_bytes > 0;
  if (!ctx.replied) return;
  const std::uint32_t di = reply_desc(p, ctx.slot);
  const wire::Header h{wire::Kind::reply, 0, 0, 0, wire::kBundleReply, ctx.slot, ctx.seq, ctx.reply_bytes};
  std::memcpy(buffer(di), &h, wire::kHeaderBytes);
  p.reply_length[ctx.slot] = std::uint32_t(wire::kHeaderBytes) + ctx.reply_bytes;
  post_send(p, di, p.reply_length[ctx.slot]);
  p.filter.replied(ctx.slot);
}

void Runtime::handle_reply(Peer& p, const wire::Message& m) {
  const wire::Header& h = m.header;
  if (!p.window.close(h.slot, h.seq)) {
    ++counters_.duplicates_dropped;
    return;
  }
  if (p.window.measuring()) p.window.answered_at(now_ns());  // the timed request
  if (h.status) return returned(p, h.slot, h.status, cause_text(h.status));
  const Sent& s = p.sent[h.slot];
  switch (s.purpose) {
    case Purpose::user:
      if (h.handler != wire::kNoHandler) run_reply_handler(p, h, h.handler, h.nargs, reinterpret_cast<const std::byte*>(m.args), m.payload,
                          h.payload_bytes);
      return;
    case Purpose::store_chunk: {
      Operation& op = ops_[s.op];
      --op.pending;
      if (op.pending == 1 && !op.finished) send_last_store_chunk(s.op);  // only the last chunk is left
      op_release_if_done(ops_[s.op]);
      return;
    }
    case Purpose::store_done: {
      Operation& op = ops_[s.op];
      --op.pending;
      op_local_done(op);
      op_finish(op, Status::ok);
      return;
    }
    case Purpose::get_chunk: {
      Operation& op = ops_[s.op];
      --op.pending;
      if (!op.finished && s.chunk && h.payload_bytes)
        std::memcpy(op.local + s.offset, m.payload, std::min<std::size_t>(s.chunk, h.payload_bytes));
      if (op.pending == 0) finish_get(op);
      op_release_if_done(op);
      return;
    }
    case Purpose::hello:
      ++hellos_acked_;
      return;
    case Purpose::barrier:
      return;
    case Purpose::bundle:
      if (h.handler == wire::kBundleReply) run_bundle_replies(p, m);
      return;
  }
}

// Runs the reply handlers of a bundle's answer, and reports its refused
// requests to the error handler. The refused are read from the bundle as
// sent before any handler runs: a handler may send, and reuse the slot.
void Runtime::run_bundle_replies(Peer& p, const wire::Message& m) {
  const wire::Header& h = m.header;
  std::vector<Returned> refused;
  wire::ItemReader items(m.payload, h.payload_bytes, wire::Items::replies);
  for (wire::Item it; items.next(it);) {
    if (!it.header.status) continue;
    const int cause = it.header.status;
    for_each_bundled(p, h.slot, [&](std::uint16_t index, const wire::Item& request) {
      if (index == it.header.index)
        refused.push_back(
            returned_request(p, request.header.handler, request.header.nargs, request.args, cause, cause_text(cause)));
    });
  }
  items = wire::ItemReader(m.payload, h.payload_bytes, wire::Items::replies);
  for (wire::Item it; items.next(it);) {
    if (it.header.status) continue;
    ++counters_.messages_received;
    run_reply_handler(p, h, it.header.handler, it.header.nargs, it.args, it.payload, it.header.payload_bytes);
  }
  if (items.error() != wire::ParseError::none)
    std::fprintf(stderr, "am: rank %d: dropped a malformed reply in a bundle's answer from rank %d, and the rest: %s\n",
                 me_, p.rank, wire::describe(items.error()));
  for (const Returned& r : refused) {
    ++counters_.returned;
    error_handler(r);
  }
}

// Runs the handler a reply names (of the request in answer's slot).
void Runtime::run_reply_handler(Peer& p, const wire::Header& answer, std::uint16_t handler, unsigned nargs,
                                const std::byte* args, const std::byte* payload, std::uint32_t bytes) {
  const HandlerEntry* entry = message_handler(handler, bytes);
  if (!entry) {
    std::fprintf(stderr, "am: rank %d: a reply from rank %d names handler %u, not registered here for it\n", me_,
                 p.rank, handler);
    return;
  }
  HandlerContext ctx{&p, answer.slot, answer.seq, false, false};  // a reply handler may not reply
  HandlerContext* outer = context_;
  context_ = &ctx;
  entry->message(Delivery{p.rank, nargs, args, const_cast<std::byte*>(payload), bytes});
  context_ = outer;
}

// Calls f(index, item) for each request of the bundle in `slot`, as sent
// (or as written so far, while it is open).
template <class F>
void Runtime::for_each_bundled(const Peer& p, std::uint16_t slot, F&& f) {
  const std::uint32_t length = p.bundle_slot == slot ? bundle_bytes(p)
                               : p.sent[slot].length  ? p.sent[slot].length - std::uint32_t(wire::kHeaderBytes)
                                                      : 0;
  wire::ItemReader items(buffer(request_desc(p, slot)) + wire::kHeaderBytes, length, wire::Items::requests);
  std::uint16_t index = 0;
  for (wire::Item it; items.next(it); ++index) f(index, it);
}

Returned Runtime::returned_request(const Peer& p, int handler, unsigned nargs, const std::byte* args, int cause,
                                   const char* why) const {
  Returned r{};
  r.cause = cause;
  r.description = why;
  r.dest = p.rank;
  r.op = AM_OP_REQUEST;
  r.handler = handler == wire::kNoHandler ? -1 : handler;
  r.nargs = int(nargs);
  wire::read_args(r.args, args, nargs);
  return r;
}

// An acknowledgement answers a request as a reply without a handler would.
void Runtime::handle_ack(Peer& p, Ack ack) {
  wire::Message bare{};
  bare.header = wire::Header{wire::Kind::reply, 0, 0, 0, wire::kNoHandler, ack.slot, ack.seq, 0};
  handle_reply(p, bare);
}

// A request came back (refused, timed out, or its peer is gone): the
// returned-message handler hears of it, and its operation fails.
void Runtime::returned(Peer& p, std::uint16_t slot, int cause, const char* why) {
  const Sent& s = p.sent[slot];
  if (s.purpose == Purpose::bundle) {  // each of its requests comes back
    std::vector<Returned> all;
    for_each_bundled(p, slot, [&](std::uint16_t, const wire::Item& it) {
      all.push_back(returned_request(p, it.header.handler, it.header.nargs, it.args, cause, why));
    });
    for (const Returned& r : all) {
      ++counters_.returned;
      error_handler(r);
    }
    return;
  }
  ++counters_.returned;
  wire::Message original{};
  wire::parse(buffer(request_desc(p, slot)), s.length, original);
  Returned r = returned_request(p, original.header.handler, original.header.nargs,
                                reinterpret_cast<const std::byte*>(original.args), cause, why);
  switch (s.purpose) {
    case Purpose::user:
    case Purpose::bundle:
      break;
    case Purpose::store_chunk:
    case Purpose::store_done:
    case Purpose::get_chunk: {
      Operation& op = ops_[s.op];
      --op.pending;
      const bool first = !op.finished;
      op_local_done(op);
      op_finish(op, cause == AM_E_BADSEGOFF || cause == AM_E_BADHANDLER || cause == AM_E_BADLENGTH
                        ? error(Status::bad_arg, why)
                        : error(Status::unreachable, why));
      op_release_if_done(op);
      if (!first) return;  // one report per operation
      r.op = op.is_store ? AM_OP_STORE : AM_OP_GET;
      r.handler = op.handler;
      r.nargs = 3;
      const Word args[4] = {op.remote, op.bytes, op.arg, 0};
      std::memcpy(r.args, args, sizeof r.args);
      break;
    }
    case Purpose::hello:
      return;
    case Purpose::barrier:
      if (disabling_) return;  // peers leaving after the last barrier
      r.op = AM_OP_BARRIER;
      break;
  }
  error_handler(r);
}

void Runtime::fail_peer(Peer& p, int cause, const std::string& why) {
  if (p.failed) return;
  p.failed = true;
  ++failed_peers_;
  p.room->items_left = 0;  // the error handler's requests to p fail now, not wait in a bundle never sent
  p.window.close_all([&](std::uint16_t slot) { returned(p, slot, cause, why.c_str()); });
  if (p.bundle_slot != kNoBundle) close_bundle(p);  // its requests came back above, never sent
}

void Runtime::check_timers() {
  flush_all();  // a deferred request is not resent while its first copy waits in a bundle
  const std::uint64_t now = now_ns();
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.failed || !p.vi || now < p.window.next_deadline()) continue;
    bool given_up = false;
    p.window.advance(
        now,
        [&](std::uint16_t slot) {
          const std::uint32_t di = request_desc(p, slot);
          // Still queued, or a bundle not sent yet: nothing to resend yet.
          if (desc_info_[di].posted || p.sent[slot].length == 0) return;
          ++counters_.retransmitted;
          post_send(p, di, p.sent[slot].length);
        },
        [&] { given_up = true; });
    // The window gave up on a silent peer (reliability.hpp): it is taken for
    // dead, and everything that waits for it comes back.
    if (given_up) fail_peer(p, AM_E_TIMEOUT, cause_text(AM_E_TIMEOUT));
  }
}

bool Runtime::in_my_segment(std::uint64_t addr, std::uint64_t bytes) const {
  const std::uint64_t base = std::uintptr_t(segment_);
  return addr >= base && bytes <= segment_bytes_ && addr - base <= segment_bytes_ - bytes;
}

Status Runtime::check_remote_range(const Peer& p, std::uint64_t addr, std::size_t bytes) const {
  if (addr >= p.seg_base && bytes <= p.seg_bytes && addr - p.seg_base <= p.seg_bytes - bytes) return Status::ok;
  return error(Status::bad_arg, "remote range [" + std::to_string(addr) + ", +" + std::to_string(bytes) +
                                    ") lies outside rank " + std::to_string(p.rank) + "'s segment");
}

// ---- store and get ----

// What store and get both require of their arguments.
Status Runtime::check_bulk(int dest, const void* local, const void* remote, std::size_t bytes) const {
  if (dest < 0 || dest >= procs()) return error(Status::bad_arg, "no rank " + std::to_string(dest));
  if (bytes && !local) return error(Status::bad_arg, "local buffer is null");
  const Peer& p = *peers_[dest];
  if (p.failed) return error(Status::unreachable, "rank " + std::to_string(dest) + " is unreachable");
  return check_remote_range(p, std::uintptr_t(remote), bytes);
}

// A fresh store or get operation with what both record; one step (pending) to go.
std::uint32_t Runtime::new_op(int dest, std::byte* local, const void* remote, std::size_t bytes, int handler, Word arg,
                              std::shared_ptr<Completion> completion) {
  if (free_ops_.empty()) {
    ops_.emplace_back();
    free_ops_.push_back(std::uint32_t(ops_.size() - 1));
  }
  const std::uint32_t i = free_ops_.back();
  free_ops_.pop_back();
  Operation& op = ops_[i] = Operation{};
  op.in_use = true;
  op.peer = dest;
  op.local = local;
  op.remote = std::uintptr_t(remote);
  op.bytes = bytes;
  op.handler = handler;
  op.arg = arg;
  op.completion = std::move(completion);
  op.pending = 1;
  return i;
}

Status Runtime::local_handle(Operation& op) {
  if (in_my_segment(std::uintptr_t(op.local), op.bytes)) {
    op.local_handle = segment_handle_;
    return Status::ok;
  }
  if (nic_->register_memory(op.local, op.bytes, via::MemAttributes{ptag_, false, false}, op.local_handle) !=
      via::Result::success)
    return error(Status::resource, "cannot register the local buffer");
  op.registered = true;
  return Status::ok;
}

Status Runtime::post_rdma(Peer& p, std::uint32_t op_index, bool write) {
  flush(p);  // behind the messages before it, as the VI orders them
  for (std::uint64_t offset = 0; offset < ops_[op_index].bytes; offset += kRdmaPiece) {
    if (rdma_free_.empty()) block_until([&] { return !rdma_free_.empty() || p.failed; });
    Operation& op = ops_[op_index];
    if (p.failed) return error(Status::unreachable, "rank " + std::to_string(p.rank) + " is unreachable");
    const std::uint32_t di = rdma_free_.back();
    rdma_free_.pop_back();
    rdma_op_[di - first_rdma_] = op_index;
    const std::uint32_t piece = std::uint32_t(std::min(kRdmaPiece, op.bytes - offset));
    VIP_DESCRIPTOR* d = desc(di);
    std::memset(d, 0, kDescStride);
    d->CS.Control = write ? VIP_CONTROL_OP_RDMAWRITE : VIP_CONTROL_OP_RDMAREAD;
    d->CS.SegCount = 2;
    d->CS.Length = piece;
    d->DS[0].Remote.Data.AddressBits = op.remote + offset;
    d->DS[0].Remote.Handle = p.seg_handle;
    d->DS[1].Local.Data.Address = op.local + offset;
    d->DS[1].Local.Handle = op.local_handle;
    d->DS[1].Local.Length = piece;
    if (p.vi->post_send(d, arena_handle_) != via::Result::success) {
      rdma_free_.push_back(di);
      fail_peer(p, AM_E_UNREACHABLE, "cannot post RDMA to the peer (its VI is broken)");
      return error(Status::unreachable, "rank " + std::to_string(p.rank) + " is unreachable");
    }
    desc_info_[di].posted = true;
    ++posted_sends_;
    p.sends.push(di);
    ++op.pending;
    ++(write ? counters_.rdma_writes : counters_.rdma_reads);
  }
  return Status::ok;
}

Status Runtime::store(int dest, const void* local, void* remote, std::size_t bytes, int handler, Word arg,
                      am_completion_t on_local, void* on_local_arg, std::shared_ptr<Completion> completion) {
  if (handler != kNoHandler && (handler < 0 || handler >= AM_MAX_HANDLERS))
    return error(Status::bad_arg, "handler index out of range");
  if (Status s = check_bulk(dest, local, remote, bytes); s != Status::ok) return s;
  Peer& p = *peers_[dest];
  service();
  // Pending: the store_done message, sent last.
  const std::uint32_t oi = new_op(dest, static_cast<std::byte*>(const_cast<void*>(local)), remote, bytes, handler, arg,
                                  std::move(completion));
  {
    Operation& op = ops_[oi];
    op.is_store = true;
    op.on_local = on_local;
    op.on_local_arg = on_local_arg;
  }
  counters_.bytes_stored += bytes;
  Status s = Status::ok;
  if (bytes > wire::kMaxPayload && p.vi && config_.reliability == Reliability::reliable) {
    // RDMA write, then the store_done request: a VI's send queue is ordered.
    if ((s = local_handle(ops_[oi])) == Status::ok && (s = post_rdma(p, oi, true)) == Status::ok) {
      const Word args[4] = {ops_[oi].remote, bytes, arg, 0};
      Sent sent{Purpose::store_done, oi, 0, 0, 0};
      s = send_request(p, wire::Kind::store_done, std::uint16_t(handler), args, 3, nullptr, 0, sent);
    }
  } else {
    ops_[oi].unsent = bytes;
    send_store_chunks(oi);
  }
  Operation& op = ops_[oi];
  if (s != Status::ok && !op.finished) {
    --op.pending;
    op_local_done(op);
    op_finish(op, s);
  }
  op_release_if_done(op);
  return s;
}

// Chunked store: every chunk but the last as store_data; the last one goes
// in the store_done message once the others are acknowledged, so the handler
// runs after all the data landed.
void Runtime::send_store_chunks(std::uint32_t oi) {
  Peer& p = *peers_[ops_[oi].peer];
  while (ops_[oi].unsent > wire::kMaxPayload && !ops_[oi].finished) {
    Operation& op = ops_[oi];
    const std::uint64_t offset = op.bytes - op.unsent;
    const Word args[4] = {op.remote + offset, 0, 0, 0};
    Sent sent{Purpose::store_chunk, oi, offset, std::uint32_t(wire::kMaxPayload), 0};
    op.unsent -= wire::kMaxPayload;
    ++op.pending;
    if (send_request(p, wire::Kind::store_data, wire::kNoHandler, args, 1, op.local + offset, wire::kMaxPayload,
                     sent) != Status::ok) {
      --ops_[oi].pending;
      return;  // the peer failed: the operation already completed with its error
    }
  }
  if (ops_[oi].pending == 1 && !ops_[oi].finished) send_last_store_chunk(oi);
}

void Runtime::send_last_store_chunk(std::uint32_t oi) {
  Operation& op = ops_[oi];
  if (op.last_sent) return;
  op.last_sent = true;
  const Word args[4] = {op.remote, op.bytes, op.arg, 0};
  Sent sent{Purpose::store_done, oi, 0, 0, 0};
  const std::uint64_t last = op.unsent;
  op.unsent = 0;
  Status s = send_request(*peers_[op.peer], wire::Kind::store_done, std::uint16_t(op.handler), args, 3,
                          op.local + op.bytes - last, last, sent);
  Operation& again = ops_[oi];  // send_request may have polled and grown ops_
  op_local_done(again);  // the last bytes are copied into the request buffer
  if (s != Status::ok && !again.finished) {
    --again.pending;
    op_finish(again, s);
  }
}

Status Runtime::get(int dest, const void* remote, void* local, std::size_t bytes, int handler, Word arg,
                    std::shared_ptr<Completion> completion) {
  if (handler != kNoHandler && (handler < 0 || handler >= AM_MAX_HANDLERS || handlers[handler].type != HandlerEntry::Type::memory))
    return error(Status::bad_arg, "no mem handler registered at that index");
  if (Status s = check_bulk(dest, local, remote, bytes); s != Status::ok) return s;
  Peer& p = *peers_[dest];
  service();
  // Pending until every piece is asked for.
  const std::uint32_t oi = new_op(dest, static_cast<std::byte*>(local), remote, bytes, handler, arg, std::move(completion));
  ops_[oi].local_done = true;
  counters_.bytes_got += bytes;
  Status s = Status::ok;
  if (bytes > wire::kMaxPayload && p.vi && config_.reliability == Reliability::reliable) {
    if ((s = local_handle(ops_[oi])) == Status::ok) s = post_rdma(p, oi, false);
  } else {
    for (std::uint64_t offset = 0; s == Status::ok && (offset < bytes || offset == 0);) {
      const std::uint64_t chunk = std::min<std::uint64_t>(wire::kMaxPayload, bytes - offset);
      const Word args[4] = {ops_[oi].remote + offset, chunk, 0, 0};
      Sent sent{Purpose::get_chunk, oi, offset, std::uint32_t(chunk), 0};
      ++ops_[oi].pending;
      s = send_request(p, wire::Kind::get, wire::kNoHandler, args, 2, nullptr, 0, sent);
      if (s != Status::ok) --ops_[oi].pending;
      offset += chunk;
      if (chunk == 0) break;
    }
  }
  Operation& op = ops_[oi];
  --op.pending;
  if (s != Status::ok && !op.finished) op_finish(op, s);
  if (op.pending == 0 && !op.finished) finish_get(op);
  op_release_if_done(op);
  return s;
}

void Runtime::finish_get(Operation& op) {
  if (op.finished) return;
  if (op.handler != kNoHandler) handlers[op.handler].memory(op.peer, op.local, op.bytes, op.arg);
  op_finish(op, Status::ok);
}

void Runtime::op_local_done(Operation& op) {
  if (op.local_done) return;
  op.local_done = true;
  if (op.on_local) op.on_local(op.on_local_arg);
}

void Runtime::op_finish(Operation& op, Status s) {
  if (op.finished) return;
  op.finished = true;
  op.status = s;
  if (op.completion) {
    op.completion->status = s;
    op.completion->done = true;
  }
  op_release_if_done(op);
}

void Runtime::op_release_if_done(Operation& op) {
  if (!op.in_use || !op.finished || !op.local_done || op.pending) return;
  if (op.registered) nic_->deregister_memory(op.local, op.local_handle);
  op.in_use = false;
  op.completion.reset();
  free_ops_.push_back(std::uint32_t(&op - ops_.data()));
}

// ---- progress and synchronisation ----

int Runtime::poll() {
  flush_all();
  const int handled = service();
  if (handled == 0 && may_owe_acks_) send_all_acks();  // nothing else to do: answer the peers now
  return handled;
}

Status Runtime::wait(const Completion& c) {
  block_until([&] { return c.done; });
  return c.status;
}

Status Runtime::wait_acknowledged() {
  if (context_) return error(Status::bad_arg, "am_wait_acknowledged inside a handler (a handler may not block)");
  block_until([&] {
    return std::all_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed || p->window.outstanding() == 0; });
  });
  return Status::ok;
}

Status Runtime::wait_until(const std::function<bool()>& pred) {
  if (context_) return error(Status::bad_arg, "am_wait_until inside a handler (a handler may not block)");
  block_until(pred);
  return Status::ok;
}

void Runtime::wait_local(const bool& flag) {
  block_until([&] { return flag; });
}

// Central barrier: everyone tells rank 0, rank 0 releases everyone.
Status Runtime::barrier() {
  const std::uint32_t epoch = ++barrier_epoch_;
  const Word args[4] = {epoch, 0, 0, 0};
  Sent sent;
  sent.purpose = Purpose::barrier;
  auto unreachable = [&] { return error(Status::unreachable, "am_barrier: a rank is unreachable"); };
  if (me_ == 0) {
    const unsigned others = unsigned(procs() - 1);
    auto any_failed = [&] { return std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed; }); };
    block_until([&] { return arrived_[epoch & 1] >= others || any_failed(); });
    if (arrived_[epoch & 1] < others) return unreachable();
    arrived_[epoch & 1] -= others;
    for (auto& p : peers_)
      if (p->vi && send_request(*p, wire::Kind::barrier, kBarrierRelease, args, 1, nullptr, 0, sent) != Status::ok)
        return unreachable();
    return Status::ok;
  }
  Peer& root = *peers_[0];
  if (send_request(root, wire::Kind::barrier, kBarrierArrive, args, 1, nullptr, 0, sent) != Status::ok)
    return unreachable();
  block_until([&] { return released_epoch_ >= epoch || root.failed; });
  return released_epoch_ >= epoch ? Status::ok : unreachable();
}

}  // namespace am::detail
