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
  std::uint16_t index;  // replies: the place in its bundle of the request answered
  std::uint16_t payload_bytes;
};
static_assert(sizeof(BundleItemHeader) == 8);

// The free part of the bundle open to one rank.
struct BundleRoom {
  std::byte* next = nullptr;  // where the next request goes
  std::uint32_t bytes_left = 0;
  std::uint16_t items_left = 0;  // 0 while no bundle is open
  std::uint16_t items = 0;       // requests in the bundle: the next one's place
};

// One per rank while AM is enabled, empty otherwise. Kept by the runtime.
extern std::span<BundleRoom> bundle_rooms;

// Writes a request of nargs <= 4 words, for a handler below
// AM_MAX_HANDLERS, into `room`; false if no bundle is open there or it is full.
inline bool write_item(BundleRoom& room, int handler, const am_word_t* args, unsigned nargs) {
  const std::uint32_t bytes = sizeof(BundleItemHeader) + nargs * sizeof(am_word_t);
  if (room.items_left == 0 || room.bytes_left < bytes) return false;
  const BundleItemHeader h{std::uint16_t(handler), std::uint8_t(nargs), 0, room.items, 0};
  std::memcpy(room.next, &h, sizeof h);
  // Word by word: a wider load of words the caller has just stored one by
  // one waits for them to leave the CPU's store buffer.
  for (unsigned i = 0; i < nargs; ++i)
    std::memcpy(room.next + sizeof h + i * sizeof(am_word_t), &args[i], sizeof(am_word_t));
  room.next += bytes;
  room.bytes_left -= bytes;
  --room.items_left;
  ++room.items;
  return true;
}

// Writes a request of nargs <= 4 words into dest's open bundle; false if
// none is open, it is full, or dest or handler is out of range (the
// library's send_deferred then sees to it).
inline bool write_deferred(int dest, int handler, const am_word_t* args, unsigned nargs) {
  if (unsigned(dest) >= bundle_rooms.size() || unsigned(handler) >= AM_MAX_HANDLERS) return false;
  return write_item(bundle_rooms[unsigned(dest)], handler, args, nargs);
}

}  // namespace am::detail
