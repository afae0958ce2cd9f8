// Bundles of deferred requests (wire.hpp): one open per peer at a time, in
// the request buffer of a slot of its own, filled by am::write_deferred
// (am/deferred.hpp) and send_deferred, run in order by the receiver, and
// answered by one reply whose items are the replies to its requests.
#include <cstdio>
#include <cstring>

#include "core.hpp"
#include "via/log.hpp"

namespace am::detail {

// A bundle of deferred requests leaves once it holds kBundleItems: as many
// as leave room in the bundle's answer for a reply of 4 words to each, and
// as no request takes more room than such a reply, the count bounds its bytes.
static_assert(wire::kBundleItems == wire::kMaxPayload / wire::item_bytes(wire::kMaxArgs, 0));

DeferredRoom* Core::deferred_room(int dest) {
  return dest >= 0 && dest < procs() ? &rooms_[std::size_t(dest)] : nullptr;
}

// Opens an empty bundle to p in a request slot of its own; false if p
// failed meanwhile.
bool Core::open_bundle(Peer& p) {
  if (!await_credit(p)) return false;
  const std::uint16_t slot = p.window.open();
  p.sent[slot] = Sent{wire::Kind::bundle};
  const std::uint32_t b = link_.request_buffer(p.rank, slot);
  if (link_.busy(b)) wait_send_free(p, b);
  if (p.failed) return false;
  flush(p);  // one that a handler run during the waits opened
  if (p.failed) return false;  // and p failed sending it: the slot came back with the rest
  p.bundle_slot = slot;
  *p.room = DeferredRoom{link_.buffer(p.rank, b) + wire::kHeaderBytes, nullptr, wire::kBundleItems};
  ++open_bundles_;
  return true;
}

// The bytes of items in p's open bundle.
std::uint32_t Core::bundle_bytes(const Peer& p) const {
  return std::uint32_t(p.room->next -
                       (link_.buffer(p.rank, link_.request_buffer(p.rank, std::uint16_t(p.bundle_slot))) + wire::kHeaderBytes));
}

// Closes p's open bundle to more requests; returns the bytes of its items.
std::uint32_t Core::close_bundle(Peer& p) {
  const std::uint32_t bytes = bundle_bytes(p);
  *p.room = DeferredRoom{};
  p.bundle_slot = kNoBundle;
  --open_bundles_;
  return bytes;
}

// Sends p's open bundle, its header in front of its items.
void Core::send_bundle(Peer& p) {
  const auto slot = std::uint16_t(p.bundle_slot);
  if (!p.failed) counters_.requests_sent += wire::kBundleItems - p.room->items_left;  // a failed peer's come back unsent
  const std::uint32_t bytes = close_bundle(p);
  const std::uint32_t b = link_.request_buffer(p.rank, slot);
  const wire::Header h{wire::Kind::bundle, 0, 0, 0, wire::kNoHandler, slot, p.window.seq(slot), bytes};
  std::memcpy(link_.buffer(p.rank, b), &h, wire::kHeaderBytes);
  p.sent[slot].length = std::uint32_t(wire::kHeaderBytes) + bytes;
  // Its timers start now: the slot may have been stamped while a wait in
  // open_bundle ran timers, long before the bundle filled.
  p.window.restamp(slot);
  ++counters_.bundles_sent;
  post_send(p, b, p.sent[slot].length);
}

void Core::flush_all() {
  for (auto it = remote_.begin(); open_bundles_ && it != remote_.end(); ++it) flush(**it);
}

// A deferred request that am::write_deferred could not write into an open
// bundle. Bad arguments and requests to this rank go as send's; otherwise
// p's bundle leaves if it has no room (polling then, as a request does),
// and a new one opens.
Status Core::send_deferred(int dest, int handler, const Word* args, unsigned nargs) {
  if (unsigned(dest) >= unsigned(procs()) || unsigned(handler) >= AM_MAX_HANDLERS || nargs > wire::kMaxArgs ||
      peers_[dest]->is_me)
    return send(false, dest, handler, args, nargs, nullptr, 0);
  Peer& p = *peers_[dest];
  while (!write_deferred(*p.room, handler, args, nargs)) {
    if (p.bundle_slot != kNoBundle) {
      flush(p);
      service();
    } else if (p.failed || !open_bundle(p)) {
      return error(Status::unreachable, "rank " + std::to_string(p.rank) + " is unreachable");
    }
  }
  return Status::ok;
}

// Adds a reply (or a refusal: status set) to the request of a bundle that
// ctx runs, to the items in the slot's reply buffer that the bundle's
// answer carries.
Status Core::add_bundle_reply(HandlerContext& ctx, std::uint16_t handler, std::uint8_t status, const Word* args,
                              unsigned nargs, const void* payload, std::size_t bytes) {
  const std::size_t length = wire::item_bytes(nargs, bytes);
  if (ctx.reply_bytes + length > wire::kMaxPayload)
    return error(Status::too_large,
                 "the replies to one bundle of deferred requests travel in one message of am_max_size() bytes, and "
                 "this one does not fit: reply with large payloads to requests that are not deferred");
  Peer& p = *ctx.peer;
  const std::uint32_t b = link_.reply_buffer(p.rank, ctx.slot);
  if (ctx.reply_bytes == 0 && link_.busy(b)) wait_send_free(p, b);
  const wire::ItemHeader h{handler, std::uint8_t(nargs), status, ctx.item, std::uint16_t(bytes)};
  ctx.reply_bytes +=
      std::uint32_t(wire::encode_item(link_.buffer(p.rank, b) + wire::kHeaderBytes + ctx.reply_bytes, h, args, payload));
  if (!status) ++counters_.replies_sent;
  return Status::ok;
}

// Runs a bundle's requests in order. Their replies, and the refusals of
// requests naming no handler, go back together as the bundle's reply; with
// none, the bundle is acknowledged as one request.
void Core::run_bundle(Peer& p, const wire::Message& m, HandlerContext& ctx) {
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
    VIA_LOG(warn, "am", "dropped a malformed request in a bundle from rank %d, and the rest of it: %s", p.rank,
            wire::describe(items.error()));
  ctx.replied = ctx.reply_bytes > 0;
  if (!ctx.replied) return;
  const std::uint32_t b = link_.reply_buffer(p.rank, ctx.slot);
  if (ctx.reply_bytes == 0 && link_.busy(b)) wait_send_free(p, b);
  const wire::Header h{wire::Kind::reply, 0, 0, 0, wire::kBundleReply, ctx.slot, ctx.seq, ctx.reply_bytes};
  std::memcpy(link_.buffer(p.rank, b), &h, wire::kHeaderBytes);
  p.reply_length[ctx.slot] = std::uint32_t(wire::kHeaderBytes) + ctx.reply_bytes;
  post_send(p, b, p.reply_length[ctx.slot]);
  p.filter.replied(ctx.slot);
}

// Runs the reply handlers of a bundle's answer, and reports its refused
// requests to the error handler. The refused are read from the bundle as
// sent before any handler runs: a handler may send, and reuse the slot.
void Core::run_bundle_replies(Peer& p, const wire::Message& m) {
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
    VIA_LOG(warn, "am", "dropped a malformed reply in a bundle's answer from rank %d, and the rest: %s", p.rank,
            wire::describe(items.error()));
  for (const Returned& r : refused) {
    ++counters_.returned;
    report_returned(r);
  }
}

}  // namespace am::detail
