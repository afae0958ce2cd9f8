#include "core.hpp"
#include "via/log.hpp"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

namespace am::detail {

namespace {

// Service passes an owed acknowledgement may wait for a message to ride on
// before it goes out alone: a program that keeps making AM calls without
// ever waiting still answers its peers.
constexpr std::uint64_t kMaxAckDelayPasses = 32;

std::string last_error_text;

void print_returned(const Returned& r) {
  VIA_LOG(warn, "am", "message to rank %d (handler %d) returned: %s", r.dest, r.handler, r.description);
}
std::function<void(const Returned&)> error_handler = print_returned;

}  // namespace

HandlerEntry handler_table[AM_MAX_HANDLERS];

Status error(Status s, std::string why) {
  last_error_text = std::move(why);
  return s;
}
const char* last_error_message() { return last_error_text.c_str(); }

const char* cause_text(int cause) {
  switch (cause) {
    case AM_E_BADHANDLER: return "no handler of that kind is registered at that index on the destination";
    case AM_E_BADSEGOFF: return "the remote range lies outside the destination's segment";
    case AM_E_BADLENGTH: return "the destination refused the message's length";
    case AM_E_TIMEOUT: return "nothing came from the destination for the peer timeout";
    default: return "the destination is unreachable (its VI broke: the process died or left)";
  }
}

void set_error_handler_fn(std::function<void(const Returned&)> fn) {
  error_handler = fn ? std::move(fn) : std::function<void(const Returned&)>(print_returned);
}
void report_returned(const Returned& r) { error_handler(r); }

Core::Core(const Config& config)
    : config_(config),
      reliable_(config.reliability == Reliability::reliable),
      depth_(std::uint16_t(std::clamp(config.depth, 1u, 1024u))),
      link_(depth_, config.reliability, *this) {
  policy_.retransmit = config.reliability == Reliability::unreliable;
  policy_.min_rto_ns = std::max<std::uint64_t>(config.retransmit_ms, 1) * 1'000'000;
  policy_.timeout_ns = config.timeout_ms * 1'000'000;
}

std::uint64_t Core::now_ns() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000ull + std::uint64_t(ts.tv_nsec);
}

// ---- set-up ----

Status Core::start() {
  Status s;
  if ((s = link_.open()) != Status::ok) return s;
  const int size = link_.size(), me = link_.rank();
  // Segment: the target of stores and the source of gets, open to the peers' RDMA.
  segment_bytes_ = config_.segment ? config_.segment_bytes : std::max<std::size_t>(config_.segment_bytes, 64);
  if (config_.segment) {
    segment_ = static_cast<std::byte*>(config_.segment);
  } else {
    own_segment_.reset(static_cast<std::byte*>(std::aligned_alloc(4096, (segment_bytes_ + 4095) / 4096 * 4096)));
    segment_ = own_segment_.get();
    if (!segment_) return error(Status::resource, "am_enable: cannot allocate the segment");
  }
  if ((s = link_.register_segment(segment_, segment_bytes_)) != Status::ok) return s;
  // Rooms first: handlers run (and may defer requests) as soon as a peer's first message arrives.
  rooms_.resize(std::size_t(size));
  for (int r = 0; r < size; ++r) {
    peers_.push_back(std::make_unique<Peer>(r, r == me, depth_, policy_, kMaxAckDelayPasses));
    Peer& p = *peers_.back();
    p.room = &rooms_[std::size_t(r)];
    if (r == me) {
      p.seg_base = std::uintptr_t(segment_);
      p.seg_bytes = segment_bytes_;
      p.seg_handle = link_.segment_handle();
      p.known = true;
    } else {
      remote_.push_back(&p);
    }
  }
  return link_.publish_segment(depth_);
}

bool Core::learn(Peer& p) {
  if (p.failed) return false;
  Link::PeerSegment seg;
  std::string why;
  if (!link_.lookup_segment(p.rank, seg, why)) {
    fail_peer(p, AM_E_UNREACHABLE, "cannot learn the peer's segment: " + why);
    return false;
  }
  if (seg.depth != depth_) {
    VIA_LOG(error, "am", "rank %d runs with VIASTACK_AM_DEPTH=%llu, this rank with %u", p.rank,
            static_cast<unsigned long long>(seg.depth), depth_);
    fail_peer(p, AM_E_UNREACHABLE, "the peer's AM configuration differs");
    return false;
  }
  p.seg_base = seg.base;
  p.seg_bytes = seg.bytes;
  p.seg_handle = seg.handle;
  p.known = true;
  return true;
}

void Core::drain() {
  block_until([&] {
    bool idle = link_.idle() && !owes_acks();
    for (auto& p : peers_) idle = idle && (p->failed || p->window.outstanding() == 0);
    return idle;
  });
}

void* Core::segment(int proc) {
  return proc >= 0 && proc < procs() && know(*peers_[proc]) ? reinterpret_cast<void*>(peers_[proc]->seg_base) : nullptr;
}
std::size_t Core::segment_size(int proc) {
  return proc >= 0 && proc < procs() && know(*peers_[proc]) ? peers_[proc]->seg_bytes : 0;
}

bool Core::any_failed() const {
  return std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed; });
}

Status Core::remote_range_error(const Peer& p, std::uint64_t addr, std::size_t bytes) {
  char range[64];
  std::snprintf(range, sizeof range, "[0x%" PRIx64 ", +%zu)", addr, bytes);
  return error(Status::bad_arg,
               "remote range " + std::string(range) + " lies outside rank " + std::to_string(p.rank) + "'s segment");
}

// ---- progress ----

int Core::service() { return after_frames(link_.poll()); }

int Core::handle() { return after_frames(link_.handle_completed()); }

// What the link's frames leave to do: acknowledgements that fell due, the
// loopback queue, and now and then the timers.
// Each step apart (out of line): this runs on every poll and every look of
// a wait, and mostly finds nothing to do.
int Core::after_frames(int handled) {
  // Only acknowledging a request makes a peer owed (dispatch sets the flag):
  // a poll with nobody owed looks at no peer, however many there are.
  if (may_owe_acks_) send_due_acks();
  if (!loopback_.empty()) handled += run_loopback();
  if ((++services_run_ & 255) == 0) check_timers();  // the clock is read here, not on every poll
  return handled;
}

void Core::send_due_acks() {
  for (Peer* p : remote_)
    if (p->filter.ack_due(services_run_)) send_acks(*p);
}

void Core::on_peer_failed(int peer, const std::string& why) {
  fail_peer(*peers_[std::size_t(peer)], AM_E_UNREACHABLE, "the destination is unreachable (" + why + ")");
}

int Core::poll() {
  flush_all();
  const int handled = service();
  if (handled == 0 && may_owe_acks_) send_all_acks();  // nothing else to do: answer the peers now
  return handled;
}

Status Core::wait(const Completion& c) {
  block_until([&] { return c.done; });
  return c.status;
}

Status Core::wait_acknowledged() {
  if (context_) return error(Status::bad_arg, "am_wait_acknowledged inside a handler (a handler may not block)");
  block_until([&] {
    return std::all_of(peers_.begin(), peers_.end(), [](auto& p) { return p->failed || p->window.outstanding() == 0; });
  });
  return Status::ok;
}

Status Core::wait_until(const std::function<bool()>& pred) {
  if (context_) return error(Status::bad_arg, "am_wait_until inside a handler (a handler may not block)");
  block_until(pred);
  return Status::ok;
}

void Core::wait_local(const bool& flag) {
  block_until([&] { return flag; });
}

// ---- failures ----

void Core::check_timers() {
  flush_all();  // a deferred request is not resent while its first copy waits in a bundle
  const std::uint64_t now = now_ns();
  for (Peer* pp : remote_) {
    Peer& p = *pp;
    if (p.failed || now < p.window.next_deadline()) continue;
    bool given_up = false;
    p.window.advance(
        now,
        [&](std::uint16_t slot) {
          const std::uint32_t b = link_.request_buffer(p.rank, slot);
          // Still with the NIC, or a bundle not sent yet: nothing to resend yet.
          if (link_.busy(b) || p.sent[slot].length == 0) return;
          ++counters_.retransmitted;
          post_send(p, b, p.sent[slot].length);
        },
        [&] { given_up = true; });
    // The window gave up on a silent peer (reliability.hpp): it is taken for
    // dead, and everything that waits for it comes back.
    if (given_up) fail_peer(p, AM_E_TIMEOUT, cause_text(AM_E_TIMEOUT));
  }
}

void Core::fail_peer(Peer& p, int cause, const std::string& why) {
  if (p.failed) return;
  p.failed = true;
  ++failed_peers_;
  p.room->items_left = 0;  // the error handler's requests to p fail now, not wait in a bundle never sent
  p.window.close_all([&](std::uint16_t slot) { returned(p, slot, cause, why.c_str()); });
  if (p.bundle_slot != kNoBundle) close_bundle(p);  // its requests came back above, never sent
}

Returned Core::returned_request(const Peer& p, int handler, unsigned nargs, const std::byte* args, int cause,
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

// A request came back (refused, timed out, or its peer is gone): the
// returned-message handler hears of it, and its operation fails.
void Core::returned(Peer& p, std::uint16_t slot, int cause, const char* why) {
  const Sent& s = p.sent[slot];
  if (s.kind == wire::Kind::bundle) {  // each of its requests comes back
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
  wire::parse(link_.buffer(p.rank, link_.request_buffer(p.rank, slot)), s.length, original);
  Returned r = returned_request(p, original.header.handler, original.header.nargs,
                                reinterpret_cast<const std::byte*>(original.args), cause, why);
  if (Service* service = services_[std::size_t(s.kind)]; service && !service->returned(p, s, cause, why, r)) return;
  error_handler(r);
}

}  // namespace am::detail
