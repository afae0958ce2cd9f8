// The part of deferred requests (am::request_deferred) that runs in the
// caller's code: writing a request into the open bundle to its destination.
// It is the path of every Split-C get, put and store, and a call into the
// library for each (a PLT jump, the runtime's lookups) cost as much as the
// writing; the library opens, sends and closes the bundles. The rest of the
// wire format is in am/src/wire.hpp.
#pragma once

#include <am.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace am::detail {

// The header of one message (an item) in a bundle.
struct BundleItemHeader {
  std::uint16_t handler;
  std::uint8_t nargs;
  std::uint8_t status;  // replies: 0, or the AM_E_* cause its request was refused for (handler kNoHandler)
  // Replies: the place in its bundle of the request answered. Requests: how
  // many more requests follow this one's words in the same item (a run), for
  // the same handler, each its own nargs words and no payload: a stream of
  // requests to one handler costs its words, not a header each.
  std::uint16_t index;
  std::uint16_t payload_bytes;
};
static_assert(sizeof(BundleItemHeader) == 8);

// A bundle holds at most this many requests: then the replies to all of
// them, of up to 4 words each, fit in one message of am_max_size() (4096)
// bytes, and so do the requests themselves, of at most 4 words each.
inline constexpr std::uint16_t kBundleItems = 4096 / (sizeof(BundleItemHeader) + 4 * sizeof(am_word_t));

// The free part of the bundle open to one rank.
struct BundleRoom {
  std::byte* next = nullptr;     // where the next request goes
  std::byte* run = nullptr;      // the header of the last item, which the next request may join
  std::uint16_t items_left = 0;  // 0 while no bundle is open
};

// Whether a request joins the run whose item header is at `header`: the
// same handler and argument count (the header's first four bytes; a
// request's status byte is 0).
inline bool joins_run(const std::byte* header, int handler, unsigned nargs) {
  std::uint32_t first;
  std::memcpy(&first, header, sizeof first);
  return first == (std::uint32_t(handler) | std::uint32_t(nargs) << 16);
}

// Writes a request of nargs <= 4 words, for a handler below
// AM_MAX_HANDLERS, into `room`; false if no bundle is open there or it is
// full. A request for the same handler with as many words as the last one
// joins its item (BundleItemHeader::index).
inline bool write_item(BundleRoom& room, int handler, const am_word_t* args, unsigned nargs) {
  if (room.items_left == 0) return false;
  std::byte* at = room.next;
  if (room.run && joins_run(room.run, handler, nargs)) {
    std::uint16_t more;
    std::memcpy(&more, room.run + offsetof(BundleItemHeader, index), sizeof more);
    ++more;
    std::memcpy(room.run + offsetof(BundleItemHeader, index), &more, sizeof more);
  } else {
    const BundleItemHeader h{std::uint16_t(handler), std::uint8_t(nargs), 0, 0, 0};
    std::memcpy(at, &h, sizeof h);
    room.run = at;
    at += sizeof h;
  }
  // Word by word: a wider load of words the caller has just stored one by
  // one waits for them to leave the CPU's store buffer.
  for (unsigned i = 0; i < nargs; ++i) std::memcpy(at + i * sizeof(am_word_t), &args[i], sizeof(am_word_t));
  room.next = at + nargs * sizeof(am_word_t);
  --room.items_left;
  return true;
}

// One per rank while AM is enabled, empty otherwise. Kept by the runtime.
extern std::span<BundleRoom> bundle_rooms;

// Writes a request of nargs <= 4 words into dest's open bundle; false if
// none is open, it is full, or dest or handler is out of range (the
// library's send_deferred then sees to it).
inline bool write_deferred(int dest, int handler, const am_word_t* args, unsigned nargs) {
  if (unsigned(dest) >= bundle_rooms.size() || unsigned(handler) >= AM_MAX_HANDLERS) return false;
  return write_item(bundle_rooms[unsigned(dest)], handler, args, nargs);
}

}  // namespace am::detail
