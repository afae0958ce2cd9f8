// AM's core: the handler table, requests and replies, their reliability
// (reliability.hpp) and acknowledgements, bundles of deferred requests,
// dispatch of what arrives, polling, and what comes back to the error
// handler. It sends through the link (link.hpp) and, to this rank itself,
// through the loopback queue (loopback.hpp).
//
// The rest of AM is built on the core's API below: store and get (bulk.hpp)
// and the barrier (barrier.hpp) are services, each answering for the
// request kinds of its own (wire.hpp).
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "am/am.hpp"
#include "am/deferred.hpp"
#include "errors.hpp"
#include "link.hpp"
#include "loopback.hpp"
#include "reliability.hpp"
#include "wire.hpp"

namespace am::detail {

// What the error handler is told a message came back for (an AM_E_* cause).
const char* cause_text(int cause);

struct HandlerEntry {
  enum class Type : std::uint8_t { none, words, payload, memory } type = Type::none;
  // The largest payload a message for this handler may carry: 0 for words,
  // am_max_size() for payload handlers, -1 (none) for memory handlers and
  // empty entries. One test on the path of every message.
  std::int32_t max_payload = -1;
  std::function<void(const Delivery&)> message;
  std::function<void(int, void*, std::size_t, Word)> memory;
};
// Shared by every rank the same way; may be filled before am_enable. Not
// exported: the library's own.
extern HandlerEntry handler_table[AM_MAX_HANDLERS] __attribute__((visibility("hidden")));
// The handler at `index` if it takes a message with `payload_bytes` bytes.
inline const HandlerEntry* message_handler(std::uint16_t index, std::uint32_t payload_bytes) {
  if (index >= AM_MAX_HANDLERS) return nullptr;
  const HandlerEntry& e = handler_table[index];
  return std::int64_t(payload_bytes) <= e.max_payload ? &e : nullptr;
}
void set_error_handler_fn(std::function<void(const Returned&)> fn);
// Runs the program's error handler for a message that came back.
void report_returned(const Returned& r);

// What a request slot is waiting for: the answer to a request of this kind.
struct Sent {
  wire::Kind kind = wire::Kind::request;
  std::uint32_t op = 0;      // a service's own: bulk, its operation
  std::uint64_t offset = 0;  // get chunks: where the bytes go in the local buffer
  std::uint32_t chunk = 0;
  std::uint32_t length = 0;  // encoded message length, for retransmission (0: a bundle not sent yet)
};

inline constexpr std::uint32_t kNoBundle = UINT32_MAX;

struct Peer {
  Peer(int r, bool me, std::uint16_t depth, const RetryPolicy& policy, std::uint64_t max_ack_delay)
      : rank(r), is_me(me), window(depth, policy), filter(depth, max_ack_delay), sent(depth), reply_length(depth) {}
  int rank;
  bool is_me;  // messages to this rank itself go through the loopback queue
  SendWindow window;
  ReceiveFilter filter;
  std::vector<Sent> sent;
  std::vector<std::uint32_t> reply_length;  // per slot: the cached reply (filter.answer says if there is one)
  std::uint32_t next_ack_buffer = 0;
  // The bundle being filled, in the request buffer of its slot: deferred
  // requests written as items (am::write_deferred, into `room`) behind
  // room for its header.
  std::uint32_t bundle_slot = kNoBundle;
  DeferredRoom* room = nullptr;
  bool failed = false;
  bool known = false;  // its segment (seg_*) is known: read when first needed
  std::uint64_t seg_base = 0, seg_bytes = 0;
  via::MemHandle seg_handle = 0;
};

// The request a handler runs for: where its reply goes.
struct HandlerContext {
  Peer* peer;
  std::uint16_t slot;
  std::uint32_t seq;
  bool may_reply;
  bool replied;
  // A request of a bundle: its place there, and the bytes of the replies
  // to the bundle's requests so far (items in the slot's reply buffer).
  bool in_bundle = false;
  std::uint16_t item = 0;
  std::uint32_t reply_bytes = 0;
};

// A part of AM built on the core, answering for request kinds of its own.
class Service {
 public:
  virtual ~Service() = default;
  // Runs a fresh request of its kinds from p; returns the AM_E_* cause if it is refused.
  virtual std::uint8_t run_request(Peer& p, const wire::Message& m, HandlerContext& ctx) = 0;
  // A request it sent was answered: m is the reply, or for an
  // acknowledgement a reply without handler, words or payload (the same
  // for every one: the request is `s`).
  virtual void answered(Peer& p, const Sent& s, const wire::Message& m) = 0;
  // A request it sent came back: fills in r for the error handler, or
  // returns false for it to hear nothing.
  virtual bool returned(Peer& p, const Sent& s, int cause, const char* why, Returned& r) = 0;
};

class Core final : private LinkClient {
 public:
  explicit Core(const Config& config);
  // Opens the link and publishes this rank's segment; connects nobody.
  Status start();
  // Hands the requests of `kind` (and the answers to them) to `service`.
  void add_service(wire::Kind kind, Service* service) { services_[std::size_t(kind)] = service; }

  // ---- the API's ----
  int procs() const { return int(peers_.size()); }
  int my_proc() const { return link_.rank(); }
  void* segment(int proc);
  std::size_t segment_size(int proc);
  int peers_in_use() const { return link_.peers_in_use(); }
  const Counters& counters() const { return counters_; }
  int failed_peers() const { return failed_peers_; }
  Status send(bool reply, int dest, int handler, const Word* args, unsigned nargs, const void* payload,
              std::size_t bytes);
  // send's replies, out of line: a request's way stays short.
  [[gnu::noinline]] Status reply_from_handler(int dest, int handler, const Word* args, unsigned nargs,
                                              const void* payload, std::size_t bytes);
  // am::request_deferred: a request that waits in the destination's bundle.
  Status send_deferred(int dest, int handler, const Word* args, unsigned nargs);
  DeferredRoom* deferred_room(int dest);
  // Sends every bundle now.
  void flush_all();
  int poll();
  Status wait(const Completion& c);
  // am::wait_acknowledged: until every request sent so far is answered.
  Status wait_acknowledged();
  // am::wait_until: block_until for a predicate of the program's.
  Status wait_until(const std::function<bool()>& pred);
  // Polls until `flag` is set (by a completion callback).
  void wait_local(const bool& flag);
  // Until every request is answered both ways: ours by the peers, theirs by
  // us (what we still owe goes out before the connections close).
  void drain();

  // ---- for the services ----
  Peer& peer(int rank) { return *peers_[std::size_t(rank)]; }
  bool any_failed() const;
  Link& link() { return link_; }
  // Who hears of the link's RDMA completions (store/get).
  void set_rdma_done(std::function<void(std::uint32_t tag, bool ok)> fn) { rdma_done_ = std::move(fn); }
  const Config& config() const { return config_; }
  Counters& count() { return counters_; }
  Status send_request(Peer& p, wire::Kind kind, std::uint16_t handler, const Word* args, unsigned nargs,
                      const void* payload, std::size_t bytes, const Sent& sent);
  void send_reply(Peer& p, std::uint16_t slot, std::uint32_t seq, std::uint8_t status, std::uint16_t handler,
                  const Word* args, unsigned nargs, const void* payload, std::size_t bytes);
  // Sends p's bundle, if one is open. Inline: every request asks, and mostly none is.
  void flush(Peer& p) {
    if (p.bundle_slot != kNoBundle) send_bundle(p);
  }
  // Progress: the NIC's, then what it completed; returns the messages handled.
  int service();
  // After a request the program made (a request, a store, a get): polls once
  // in kRequestsPerPoll (a poll that finds nothing costs more than the
  // request), and always after one to this rank itself, whose handler thus
  // runs within the call, and after a get of more than one message (`fetched`
  // bytes above am_max_size): its bytes come back through this rank's rings
  // (an RDMA read's too), which only a poll drains, and a poll costs little
  // beside them (16 KiB gets 0.84x as fast when they polled once in 8).
  // After sending, so that the request is not kept waiting. Peers are still
  // answered within a few requests, and a request short of credits polls
  // until it has one.
  void poll_after_request(const Peer& p, std::size_t fetched = 0) {
    if (++requests_unpolled_ >= kRequestsPerPoll || p.is_me || fetched > wire::kMaxPayload) {
      requests_unpolled_ = 0;
      service();
    }
  }
  // Handles messages until pred() holds.
  template <class Pred>
  void block_until(Pred&& pred);
  void fail_peer(Peer& p, int cause, const std::string& why);
  // Reads p's segment and depth when first needed; false (p failed) if it
  // cannot be read or p runs with another depth.
  bool know(Peer& p) { return p.known || learn(p); }
  // Whether a store of `bytes` to p goes whole in one message, its payload
  // straight from the caller's memory into the link (wire::kMaxWholeStore):
  // past am_max_size(), on reliable VIs, when it fits in one frame of the
  // link; else it goes by RDMA. One message and one copy a side, where the
  // RDMA write and the message behind it cost two messages' work (an 8 KiB
  // store: ~1,000 instructions fewer at the sender, ~400 at the target).
  bool whole_store(const Peer& p, std::size_t bytes) const {
    return bytes <= wire::kMaxWholeStore && payload_apart(p, bytes) &&
           wire::kHeaderBytes + 3 * sizeof(Word) + bytes <= link_.max_whole(p.rank);
  }
  // Ends the hold in the link of the message being handled, if there is one
  // (Link::release_held): its bytes are gone. A service handling a message
  // in place calls it before it runs the program's code, which may wait for
  // that peer's next messages.
  void release_held() {
    if (held_peer_ < 0) return;
    link_.release_held(held_peer_);
    held_peer_ = -1;
  }
  // Inline, the error out of line: on the path of every store and get.
  bool in_my_segment(std::uint64_t addr, std::uint64_t bytes) const {
    const std::uint64_t base = std::uintptr_t(segment_);
    return addr >= base && bytes <= segment_bytes_ && addr - base <= segment_bytes_ - bytes;
  }
  Status check_remote_range(const Peer& p, std::uint64_t addr, std::size_t bytes) const {
    if (addr >= p.seg_base && bytes <= p.seg_bytes && addr - p.seg_base <= p.seg_bytes - bytes) [[likely]]
      return Status::ok;
    return remote_range_error(p, addr, bytes);
  }

 private:
  std::uint64_t now_ns() const;
  bool learn(Peer& p);
  [[gnu::noinline]] static Status remote_range_error(const Peer& p, std::uint64_t addr, std::size_t bytes);
  // Sends the message in `buffer` to p: through the link, or the loopback
  // queue to this rank (post_send_aside). What the link must queue (the
  // first message to a peer waits for the connection) is waited for here: a
  // program may compute for long without an AM call once a send returns, and
  // its message must have left by then. Inline, the rest out of line: it is
  // on the path of every message.
  [[gnu::always_inline]] bool post_send(Peer& p, std::uint32_t buffer, std::uint32_t length) {
    if (p.is_me || !p.known) [[unlikely]]
      return post_send_aside(p, buffer, length);
    return sent_or_wait(p, link_.send(p.rank, buffer, length));
  }
  // Whether a message to p with a payload leaves with its payload apart
  // (compose given none, post_send_apart then): on reliable VIs, which never
  // retransmit from the buffer, to a peer post_send would not leave aside.
  // Its bytes then go from the caller's memory straight into the link (the
  // shm ring), as send() copies them: one copy, and no descriptor or
  // on_sent to handle, where the buffer took a copy more and its send both.
  // A payload of at most Link::kCopiedRegistered bytes is copied into the
  // buffer: the message then mostly goes in one piece, which costs less
  // than a second piece saves.
  bool payload_apart(const Peer& p, std::size_t bytes) const {
    return bytes > Link::kCopiedRegistered && reliable_ && !p.is_me && p.known;
  }
  // post_send for a message composed (in `buffer`, `length` bytes in all)
  // without its last `bytes`, which are at `payload`.
  [[gnu::always_inline]] bool post_send_apart(Peer& p, std::uint32_t buffer, std::uint32_t length,
                                              const void* payload, std::size_t bytes) {
    return sent_or_wait(p, link_.send_apart(p.rank, buffer, length, payload, bytes));
  }
  // request_to's way for a whole store (whole_store): composed in `buffer`
  // without acknowledgements and without its payload, which goes from
  // `payload` only straight into the link: while the link is full, handles
  // messages until the peer has taken enough to make room (or failed).
  // Returns the message's length.
  [[gnu::noinline]] std::uint32_t send_whole(Peer& p, std::uint32_t buffer, wire::Header h, const Word* args,
                                             const void* payload);
  // On its way: true; queued (for the connection): waited for; dropped (the peer is lost): false.
  [[gnu::always_inline]] bool sent_or_wait(Peer& p, Link::Sent sent) {
    switch (sent) {
      case Link::Sent::now:
      case Link::Sent::posted: return true;
      case Link::Sent::dropped: return false;
      case Link::Sent::queued: break;
    }
    return wait_queued(p);
  }
  [[gnu::noinline]] bool post_send_aside(Peer& p, std::uint32_t buffer, std::uint32_t length);
  [[gnu::noinline]] bool wait_queued(Peer& p);
  // send_request's body, inline into Core::send as well: a program's request is one call.
  [[gnu::always_inline]] Status request_to(Peer& p, wire::Kind kind, std::uint16_t handler, const Word* args,
                                           unsigned nargs, const void* payload, std::size_t bytes, const Sent& sent);
  bool await_credit(Peer& p);
  void wait_send_free(Peer& p, std::uint32_t buffer);
  int handle();
  int after_frames(int handled);
  [[gnu::noinline]] void send_due_acks();
  [[gnu::noinline]] int run_loopback();
  // The mesh's (LinkClient): a frame from a peer, handled as it is taken from the NIC.
  void on_message(int peer, std::span<std::byte> frame) override;
  void on_rdma_complete(std::uint64_t tag, bool ok) override { rdma_done_(std::uint32_t(tag), ok); }
  void on_peer_failed(int peer, const std::string& why) override;
  void on_peer_closed(int peer) override { on_peer_failed(peer, "the peer disabled AM"); }
  void on_sent(int, std::uint64_t token) override { link_.sent(token); }
  [[gnu::noinline]] void check_timers();

  bool open_bundle(Peer& p);
  void send_bundle(Peer& p);
  std::uint32_t bundle_bytes(const Peer& p) const;
  std::uint32_t close_bundle(Peer& p);
  Status add_bundle_reply(HandlerContext& ctx, std::uint16_t handler, std::uint8_t status, const Word* args,
                          unsigned nargs, const void* payload, std::size_t bytes);
  void run_bundle(Peer& p, const wire::Message& m, HandlerContext& ctx);
  void run_bundle_replies(Peer& p, const wire::Message& m);
  template <class F>
  void for_each_bundled(const Peer& p, std::uint16_t slot, F&& f);

  // Encodes a message to p into `buffer`, carrying as many of the
  // acknowledgements p is owed as fit; returns its length. Inline, the
  // acknowledgements out of line: mostly there are none.
  [[gnu::always_inline]] std::uint32_t compose(Peer& p, std::uint32_t buffer, wire::Header h, const Word* args, const void* payload) {
    if (p.filter.owes_acks()) [[unlikely]]
      return compose_with_acks(p, buffer, h, args, payload);
    h.acks = 0;
    return std::uint32_t(wire::encode(link_.buffer(p.rank, buffer), h, args, nullptr, payload));
  }
  [[gnu::noinline]] std::uint32_t compose_with_acks(Peer& p, std::uint32_t buffer, wire::Header h, const Word* args,
                                                    const void* payload);
  void send_acks(Peer& p);
  void send_all_acks();
  bool owes_acks() const;
  // The receiving side (dispatch.cpp): inline into the frame's handling,
  // one function from the frame to the handler.
  [[gnu::always_inline]] void dispatch(Peer& p, std::byte* data, std::size_t length);
  [[gnu::noinline]] void dispatch_copy(Peer& p, std::span<std::byte> frame);
  [[gnu::always_inline]] void handle_request(Peer& p, const wire::Message& m);
  [[gnu::always_inline]] std::uint8_t run_request(Peer& p, const wire::Message& m, HandlerContext& ctx);
  [[gnu::noinline]] std::uint8_t run_other_request(Peer& p, const wire::Message& m, HandlerContext& ctx);
  [[gnu::always_inline]] bool close_answered(Peer& p, std::uint16_t slot, std::uint32_t seq);
  void handle_reply(Peer& p, const wire::Message& m);
  void run_reply_handler(Peer& p, const wire::Header& answer, std::uint16_t handler, unsigned nargs,
                         const std::byte* args, const std::byte* payload, std::uint32_t bytes);
  [[gnu::always_inline]] void handle_ack(Peer& p, Ack ack);
  Returned returned_request(const Peer& p, int handler, unsigned nargs, const std::byte* args, int cause,
                            const char* why) const;
  void returned(Peer& p, std::uint16_t slot, int cause, const char* why);

  Config config_;
  bool reliable_;  // config_.reliability is reliable: the engine delivers, AM never retransmits
  std::uint16_t depth_;
  RetryPolicy policy_;
  // The segment: the target of stores and the source of gets. One of our
  // own is freed after the link (declared below) deregistered it.
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> own_segment_;
  std::byte* segment_ = nullptr;
  std::size_t segment_bytes_ = 0;
  std::function<void(std::uint32_t, bool)> rdma_done_ = [](std::uint32_t, bool) {};
  Link link_;
  Loopback loopback_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> remote_;  // every peer but this rank
  std::vector<DeferredRoom> rooms_;
  Service* services_[std::size_t(wire::kLastKind) + 1] = {};
  HandlerContext* context_ = nullptr;
  Counters counters_{};
  unsigned services_run_ = 0;  // service passes, the clock of acknowledgements and timers
  unsigned waits_ = 0;  // block_until's sleeps in the NIC, for the timers' cadence
  // Requests sent since one polled (poll_after_request).
  static constexpr unsigned kRequestsPerPoll = 8;
  unsigned requests_unpolled_ = 0;
  unsigned open_bundles_ = 0;
  int failed_peers_ = 0;  // peers given up on (fail_peer)
  bool may_owe_acks_ = false;  // some peer may be owed acknowledgements (cleared by send_all_acks)
  int held_peer_ = -1;  // the peer whose message on_message is handling, which may be held in the link
  // dispatch_copy's copies, one per level of handlers nested in waits (on
  // the heap: a level per message a wait handles, up to about twice
  // VIASTACK_AM_DEPTH deep, would take megabytes of stack).
  std::vector<std::unique_ptr<std::byte[]>> copies_;
  std::size_t copies_in_use_ = 0;
};

template <class Pred>
void Core::block_until(Pred&& pred) {
  while (!pred()) {
    // Inside the handling of a message held in the link, the peer's next
    // messages wait behind it: whatever this waits for (room in the link,
    // which that peer may free only once it has them), the hold ends first.
    // A message handled in place runs none of the program's code, and its
    // bytes have landed by the time it sends anything; the others were
    // copied out (dispatch_copy).
    if (held_peer_ >= 0) [[unlikely]]
      release_held();
    flush_all();  // what we wait for may be an answer to a deferred message
    // Acknowledgements owed go before the wait, once a pass found nothing to
    // handle (a handler's message may carry them instead): the bundles went
    // above, and no handler has run since. Owed none, the pass is the
    // wait's own first step.
    if (may_owe_acks_) {
      if (service() > 0) continue;
      if (pred()) break;
      send_all_acks();
    }
    // The NIC's wait runs its progress before each check: handle() is enough.
    // Timers: handle() checks them every 256 calls, which a rank woken now and
    // then by a frame may take seconds to make while what it waits for needs
    // a retransmission; so a wait that timed out checks them, and so does
    // every 16th wait (not each: a ping-pong waits once per round trip, and
    // the check's clock read would cost it ~10 %).
    if (link_.wait([&] { return handle() > 0 || pred(); }, 20) == via::Result::timeout || (++waits_ & 15) == 0)
      check_timers();
  }
  // Back to the program, which may compute for long without an AM call, while
  // a peer waits for what it is owed (a store's completion, a barrier's
  // acknowledgement): that goes now.
  if (may_owe_acks_) send_all_acks();
}

// Calls f(index, item) for each request of the bundle in `slot`, as sent
// (or as written so far, while it is open).
template <class F>
void Core::for_each_bundled(const Peer& p, std::uint16_t slot, F&& f) {
  const std::uint32_t length = p.bundle_slot == slot ? bundle_bytes(p)
                               : p.sent[slot].length  ? p.sent[slot].length - std::uint32_t(wire::kHeaderBytes)
                                                      : 0;
  wire::ItemReader items(link_.buffer(p.rank, link_.request_buffer(p.rank, slot)) + wire::kHeaderBytes, length,
                         wire::Items::requests);
  std::uint16_t index = 0;
  for (wire::Item it; items.next(it); ++index) f(index, it);
}

}  // namespace am::detail
