// Deferred requests written in the caller's own code, without a call into
// the library: for layers above AM (Split-C) whose every get, put and store
// is a deferred request, and for which the call (a PLT jump, the runtime's
// lookups) costs as much as the writing. Everything else uses
// am::request_deferred (am/am.hpp), which sends the same requests.
//
//   am::DeferredRoom* room = am::deferred_room(dest);  // once, after am::enable
//   if (!am::write_deferred(*room, handler, args, 2))  // per request
//     am::request_deferred(dest, handler, args[0], args[1]);
//
// Contract (part of the ABI of libviastack-am.so.0):
// - deferred_room(dest) returns the room of the bundle open to `dest`, the
//   same object from am::enable until am::disable, or nullptr when AM is not
//   enabled or `dest` is not a rank of the job. The library opens, sends and
//   closes the bundles: the room's contents change at every AM call, the
//   object does not move. Do not keep it past am::disable.
// - write_deferred writes a request of at most 4 words for a handler below
//   AM_MAX_HANDLERS into the room and returns true, or returns false and
//   writes nothing when no bundle is open to that rank or it is full (and
//   always for this rank itself, and for a peer AM gave up on). On false,
//   send the request with am::request_deferred, which opens a bundle: the
//   request is then as reliable and as ordered as any deferred request.
// - A request written here is a deferred request: it leaves with its bundle,
//   at the next poll, wait, flush or request to that rank (am/am.hpp).
// - AM is single-threaded: only the thread that makes the process's AM
//   calls may use a room, inside handlers as well as outside.
// - The layout of DeferredRoom and of what write_deferred writes (an item:
//   the 8-byte header below, then the words) is fixed for .so.0; the
//   library checks at build time that its bundle format agrees.
#pragma once

#include <am.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace am {

struct DeferredRoom {
  std::byte* next = nullptr;     // where the next request goes
  std::byte* run = nullptr;      // the header of the last item, which the next request may join
  std::uint16_t items_left = 0;  // requests the bundle still takes; 0 while none is open

  // An item's header: handler (16 bits), nargs (8), 0 (8), the count of
  // further requests of the same handler and nargs that follow this one's
  // words in the item (16 bits, at kRunCountAt: a run), 0 (16).
  static constexpr std::size_t kItemHeaderBytes = 8;
  static constexpr std::size_t kRunCountAt = 4;
};

DeferredRoom* deferred_room(int dest);

inline bool write_deferred(DeferredRoom& room, int handler, const am_word_t* args, unsigned nargs) {
  if (room.items_left == 0 || unsigned(handler) >= AM_MAX_HANDLERS || nargs > 4) return false;
  std::byte* at = room.next;
  // The same handler and argument count as the last item: the header's
  // first four bytes (a request's third byte is 0).
  const std::uint32_t first = std::uint32_t(handler) | std::uint32_t(nargs) << 16;
  std::uint32_t last_first;
  if (room.run && (std::memcpy(&last_first, room.run, sizeof last_first), last_first == first)) {
    std::uint16_t more;
    std::memcpy(&more, room.run + DeferredRoom::kRunCountAt, sizeof more);
    ++more;
    std::memcpy(room.run + DeferredRoom::kRunCountAt, &more, sizeof more);
  } else {
    const std::uint16_t header[4] = {std::uint16_t(handler), std::uint16_t(nargs), 0, 0};
    static_assert(sizeof header == DeferredRoom::kItemHeaderBytes);
    std::memcpy(at, header, sizeof header);
    room.run = at;
    at += sizeof header;
  }
  // Word by word: a wider load of words the caller has just stored one by
  // one waits for them to leave the CPU's store buffer.
  for (unsigned i = 0; i < nargs; ++i) std::memcpy(at + i * sizeof(am_word_t), &args[i], sizeof(am_word_t));
  room.next = at + nargs * sizeof(am_word_t);
  --room.items_left;
  return true;
}

}  // namespace am
