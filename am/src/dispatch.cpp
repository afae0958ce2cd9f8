// The core's receiving side: each message that arrives runs its handler, or
// answers one of our requests; the request kinds of the services (bulk.hpp,
// barrier.hpp) go to them.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core.hpp"
#include "via/copy.hpp"
#include "via/log.hpp"

namespace am::detail {

// Handles the message of one frame.
inline void Core::dispatch(Peer& p, std::byte* data, std::size_t length) {
  wire::Message m;
  if (const wire::ParseError e = wire::parse(data, length, m); e != wire::ParseError::none) {
    VIA_LOG(warn, "am", "dropped a malformed message from rank %d: %s", p.rank, wire::describe(e));
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

inline void Core::handle_request(Peer& p, const wire::Message& m) {
  const wire::Header& h = m.header;
  switch (p.filter.admit(h.slot, h.seq)) {
    case Admission::bad_slot:
      VIA_LOG(warn, "am", "dropped a request from rank %d naming slot %u (depth %u)", p.rank, h.slot, depth_);
      return;
    case Admission::duplicate:
      ++counters_.duplicates_dropped;
      // Our answer was lost (or is slow): answer again the same way.
      switch (p.filter.answer(h.slot)) {
        case Answer::replied:
          if (const std::uint32_t b = link_.reply_buffer(p.rank, h.slot); !link_.busy(b))
            post_send(p, b, p.reply_length[h.slot]);
          return;
        case Answer::acknowledged:
          p.filter.acknowledge_again(h.slot, services_run_);
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
    p.filter.acknowledge(h.slot, services_run_);
    may_owe_acks_ = true;
  }
}

// Runs one fresh request; returns the AM_E_* cause if it is refused. A
// request to a handler of the table inline, the other kinds out of line.
inline std::uint8_t Core::run_request(Peer& p, const wire::Message& m, HandlerContext& ctx) {
  const wire::Header& h = m.header;
  if (h.kind != wire::Kind::request) [[unlikely]]
    return run_other_request(p, m, ctx);
  const HandlerEntry* entry = message_handler(h.handler, h.payload_bytes);
  if (!entry) return AM_E_BADHANDLER;
  entry->message(Delivery{p.rank, h.nargs, reinterpret_cast<const std::byte*>(m.args), const_cast<std::byte*>(m.payload),
                          h.payload_bytes});
  return 0;
}

std::uint8_t Core::run_other_request(Peer& p, const wire::Message& m, HandlerContext& ctx) {
  const wire::Header& h = m.header;
  switch (h.kind) {
    case wire::Kind::bundle:
      run_bundle(p, m, ctx);
      return 0;
    case wire::Kind::reply:
    case wire::Kind::ack:
      return AM_E_BADLENGTH;
    default:
      if (Service* service = services_[std::size_t(h.kind)]) return service->run_request(p, m, ctx);
      return AM_E_BADLENGTH;
  }
}

// Closes the request a reply or an acknowledgement answers; false for a
// duplicate or stale answer.
inline bool Core::close_answered(Peer& p, std::uint16_t slot, std::uint32_t seq) {
  if (!p.window.close(slot, seq)) {
    ++counters_.duplicates_dropped;
    return false;
  }
  if (p.window.measuring()) p.window.answered_at(now_ns());  // the timed request
  return true;
}

void Core::handle_reply(Peer& p, const wire::Message& m) {
  const wire::Header& h = m.header;
  if (!close_answered(p, h.slot, h.seq)) return;
  if (h.status) return returned(p, h.slot, h.status, cause_text(h.status));
  const Sent& s = p.sent[h.slot];
  switch (s.kind) {
    case wire::Kind::request:
      if (h.handler != wire::kNoHandler)
        run_reply_handler(p, h, h.handler, h.nargs, reinterpret_cast<const std::byte*>(m.args), m.payload,
                          h.payload_bytes);
      return;
    case wire::Kind::bundle:
      if (h.handler == wire::kBundleReply) run_bundle_replies(p, m);
      return;
    default:
      if (Service* service = services_[std::size_t(s.kind)]) service->answered(p, s, m);
      return;
  }
}

// Runs the handler a reply names (of the request in answer's slot).
void Core::run_reply_handler(Peer& p, const wire::Header& answer, std::uint16_t handler, unsigned nargs,
                             const std::byte* args, const std::byte* payload, std::uint32_t bytes) {
  const HandlerEntry* entry = message_handler(handler, bytes);
  if (!entry) {
    VIA_LOG(warn, "am", "a reply from rank %d names handler %u, not registered here for it", p.rank, handler);
    return;
  }
  HandlerContext ctx{&p, answer.slot, answer.seq, false, false};  // a reply handler may not reply
  HandlerContext* outer = context_;
  context_ = &ctx;
  entry->message(Delivery{p.rank, nargs, args, const_cast<std::byte*>(payload), bytes});
  context_ = outer;
}

// An acknowledgement answers a request as a reply without a handler, words
// or payload would: a plain request or a bundle is then done; a service
// hears of it with such a reply, the same for every acknowledgement (a
// service reads what the reply carries, not which request it names: that
// is `s`).
inline void Core::handle_ack(Peer& p, Ack ack) {
  static constexpr wire::Message kBare{{wire::Kind::reply, 0, 0, 0, wire::kNoHandler, 0, 0, 0}, {}, nullptr, nullptr};
  if (!close_answered(p, ack.slot, ack.seq)) return;
  const Sent& s = p.sent[ack.slot];
  if (s.kind == wire::Kind::request || s.kind == wire::Kind::bundle) return;
  if (Service* service = services_[std::size_t(s.kind)]) service->answered(p, s, kBare);
}

int Core::run_loopback() {
  return loopback_.run([&](std::byte* data, std::size_t length) { dispatch(*peers_[my_proc()], data, length); });
}

// Whether a message held in the link may be handled there: one that runs
// none of the program's code (a handler, or a callback an answer or an
// acknowledgement completes) while it is held, for that code might wait for
// another message of the same peer, which does not come meanwhile: a store
// carrying no acknowledgements, whose handler (if it names one) runs once
// its bytes have landed and the hold has ended (Bulk::run_request). A whole
// store (wire::kMaxWholeStore), longer than a copy, is always one.
inline bool handled_in_place(std::span<const std::byte> frame) {
  wire::Header h;
  if (frame.size() < wire::kHeaderBytes) return true;  // parse refuses it
  std::memcpy(&h, frame.data(), wire::kHeaderBytes);
  return (h.kind == wire::Kind::store_done || h.kind == wire::Kind::store_data) && h.acks == 0;
}

// The other messages held in the link: copied out, released, handled from the copy.
void Core::dispatch_copy(Peer& p, std::span<std::byte> frame) {
  if (frame.size() > wire::kMaxMessage) return dispatch(p, frame.data(), frame.size());  // parse refuses it
  if (copies_in_use_ == copies_.size()) copies_.push_back(std::make_unique<std::byte[]>(wire::kMaxMessage));
  std::byte* const copy = copies_[copies_in_use_].get();  // new[]'s alignment, enough for any header field
  via::copy_memory(copy, frame.data(), frame.size());
  release_held();
  struct Level {
    std::size_t& in_use;
    ~Level() { --in_use; }
  } level{++copies_in_use_};
  dispatch(p, copy, frame.size());
}

void Core::on_message(int peer, std::span<std::byte> frame) {
  Peer& p = *peers_[std::size_t(peer)];
  if (!know(p)) return;  // a peer of another depth could overrun our receives
  p.window.heard();  // any frame: the peer is alive (a lost answer is not a dead peer)
  const int outer = held_peer_;
  held_peer_ = peer;  // a wait meanwhile ends the hold (block_until)
  // On reliable VIs every AM message is one frame, held in the link (one
  // that is not, too long for a frame, is never AM's; copying it would do no
  // harm): no need to ask.
  if (reliable_ && !handled_in_place(frame))
    dispatch_copy(p, frame);
  else
    dispatch(p, frame.data(), frame.size());
  // Due acknowledgements go between frames, not after the last: a peer
  // that filled its window waits for them while we work through the rest.
  if (p.filter.ack_due(services_run_)) send_acks(p);
  held_peer_ = outer;
}

}  // namespace am::detail
