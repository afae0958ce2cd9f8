// The core's sending side: requests (with their credits), replies, and the
// acknowledgements owed to the peers.
#include <algorithm>

#include "core.hpp"

namespace am::detail {

// The sends post_send leaves aside: to this rank itself, through the
// loopback queue, and a peer's first, which reads its segment first.
bool Core::post_send_aside(Peer& p, std::uint32_t buffer, std::uint32_t length) {
  if (p.is_me) {
    loopback_.send(link_.buffer(p.rank, buffer), length);
    return true;
  }
  return know(p) && post_send(p, buffer, length);
}

// Out of post_send, which stays small: it is on the path of every message.
bool Core::wait_queued(Peer& p) {
  block_until([&] { return link_.waiting(p.rank) == 0 || p.failed; });
  return !p.failed;
}

std::uint32_t Core::send_whole(Peer& p, std::uint32_t buffer, wire::Header h, const Word* args, const void* payload) {
  h.acks = 0;
  const auto length = std::uint32_t(wire::encode(link_.buffer(p.rank, buffer), h, args, nullptr, nullptr));
  flush(p);  // the deferred requests before it stay before it
  bool sent = link_.send_whole(p.rank, buffer, length, payload, h.payload_bytes);
  if (!sent)
    block_until([&] {
      return sent || (sent = link_.send_whole(p.rank, buffer, length, payload, h.payload_bytes)) || p.failed;
    });
  return length;
}

// Polls until p has a credit for a request; false if p failed meanwhile.
bool Core::await_credit(Peer& p) {
  if (!p.window.has_credit()) {
    ++counters_.credit_stalls;
    block_until([&] { return p.window.has_credit() || p.failed; });
  }
  return !p.failed;
}

// A buffer is rewritten only once the NIC is done with its last send (callers
// check link_.busy first). A send to a dead peer is flushed with its VI.
void Core::wait_send_free(Peer& p, std::uint32_t buffer) {
  block_until([&] { return !link_.busy(buffer) || p.failed; });
}

inline Status Core::request_to(Peer& p, wire::Kind kind, std::uint16_t handler, const Word* args, unsigned nargs,
                               const void* payload, std::size_t bytes, const Sent& sent) {
  if (p.failed || !await_credit(p))
    return error(Status::unreachable, "rank " + std::to_string(p.rank) + " is unreachable");
  const std::uint16_t slot = p.window.open();
  const std::uint32_t b = link_.request_buffer(p.rank, slot);
  if (link_.busy(b)) wait_send_free(p, b);
  const wire::Header h{kind, std::uint8_t(nargs), 0, 0, handler, slot, p.window.seq(slot), std::uint32_t(bytes)};
  // Field by field, not `s = sent`: the caller has just written `sent` field
  // by field, and a wider load spanning several of those stores would wait
  // until they reach the cache (no store forwarding).
  Sent& s = p.sent[slot];
  s.kind = kind;
  s.op = sent.op;
  s.offset = sent.offset;
  s.chunk = sent.chunk;
  ++counters_.requests_sent;
  if (bytes > wire::kMaxPayload) [[unlikely]] {
    s.length = send_whole(p, b, h, args, payload);
  } else {
    const bool apart = payload_apart(p, bytes);
    s.length = compose(p, b, h, args, apart ? nullptr : payload);
    flush(p);  // the deferred requests before it stay before it
    if (apart)
      post_send_apart(p, b, s.length, payload, bytes);
    else
      post_send(p, b, s.length);
  }
  if (p.window.wants_send_time()) p.window.sent_at(now_ns());  // one request in kTimeEvery, or under backoff
  return Status::ok;
}

Status Core::send_request(Peer& p, wire::Kind kind, std::uint16_t handler, const Word* args, unsigned nargs,
                          const void* payload, std::size_t bytes, const Sent& sent) {
  return request_to(p, kind, handler, args, nargs, payload, bytes, sent);
}

void Core::send_reply(Peer& p, std::uint16_t slot, std::uint32_t seq, std::uint8_t status, std::uint16_t handler,
                      const Word* args, unsigned nargs, const void* payload, std::size_t bytes) {
  const std::uint32_t b = link_.reply_buffer(p.rank, slot);
  if (link_.busy(b)) wait_send_free(p, b);
  const wire::Header h{wire::Kind::reply, std::uint8_t(nargs), status, 0, handler, slot, seq, std::uint32_t(bytes)};
  const bool apart = payload_apart(p, bytes);
  p.reply_length[slot] = compose(p, b, h, args, apart ? nullptr : payload);
  ++counters_.replies_sent;
  if (apart)
    post_send_apart(p, b, p.reply_length[slot], payload, bytes);
  else
    post_send(p, b, p.reply_length[slot]);
  p.filter.replied(slot);
}

// compose's way when p is owed acknowledgements: they ride along, as many as fit.
std::uint32_t Core::compose_with_acks(Peer& p, std::uint32_t buffer, wire::Header h, const Word* args,
                                      const void* payload) {
  Ack acks[wire::kMaxAcks];
  h.acks = std::uint8_t(p.filter.take_acks(acks, wire::kMaxAcks));
  counters_.acks_sent += h.acks;
  return std::uint32_t(wire::encode(link_.buffer(p.rank, buffer), h, args, acks, payload));
}

// Sends what p is owed in messages of their own, while an acknowledgement
// buffer is free; whatever is left waits for the next message or pass.
void Core::send_acks(Peer& p) {
  while (p.filter.owes_acks() && !p.failed) {
    const std::uint32_t b = link_.ack_buffer(p.rank, p.next_ack_buffer);
    if (link_.busy(b)) return;
    p.next_ack_buffer = (p.next_ack_buffer + 1) % Link::kAckBuffers;
    const wire::Header h{wire::Kind::ack, 0, 0, 0, wire::kNoHandler, 0, 0, 0};
    ++counters_.ack_messages_sent;
    post_send(p, b, compose(p, b, h, nullptr, nullptr));
  }
}

void Core::send_all_acks() {
  for (auto& p : peers_)
    if (p->filter.owes_acks()) send_acks(*p);
  may_owe_acks_ = owes_acks();  // some wait for a free buffer
}

bool Core::owes_acks() const {
  return std::any_of(peers_.begin(), peers_.end(), [](auto& p) { return !p->failed && p->filter.owes_acks(); });
}

// am_reply_*: from inside a request handler only, once, to the requester.
Status Core::reply_from_handler(int dest, int handler, const Word* args, unsigned nargs, const void* payload,
                                std::size_t bytes) {
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

Status Core::send(bool reply, int dest, int handler, const Word* args, unsigned nargs, const void* payload,
                  std::size_t bytes) {
  if (dest < 0 || dest >= procs()) return error(Status::bad_arg, "no rank " + std::to_string(dest));
  if (handler < 0 || handler >= AM_MAX_HANDLERS) return error(Status::bad_arg, "handler index out of range");
  if (nargs > wire::kMaxArgs) return error(Status::bad_arg, "more than 4 arguments");
  if (bytes > wire::kMaxPayload) return error(Status::too_large, "payload larger than am_max_size()");
  if (bytes && !payload) return error(Status::bad_arg, "payload is null");
  if (reply) return reply_from_handler(dest, handler, args, nargs, payload, bytes);
  Peer& p = *peers_[dest];
  const Status s = request_to(p, wire::Kind::request, std::uint16_t(handler), args, nargs, payload, bytes, Sent{});
  poll_after_request(p);
  return s;
}

}  // namespace am::detail
