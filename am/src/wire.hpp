// The AM wire format. A VIA message (a frame) carries one AM message:
//
//   header (16 bytes) | nargs x 64-bit argument | acks x 8-byte acknowledgement | payload
//
// Any message may carry acknowledgements of the receiver's own requests
// (reliability.hpp): (slot, seq) of requests whose handlers did not reply.
// They sit before the payload, so that the payload stays 8-byte aligned.
//
// A bundle is one request whose payload holds deferred requests (items)
// back to back, each 8-byte aligned:
//
//   item header (8 bytes) | nargs x 64-bit argument | payload, zero-padded to 8 bytes
//
// Its answer is one reply (handler kBundleReply) whose items are the
// replies to its requests, each naming the request it answers by its place
// in the bundle, or an acknowledgement when none replied. One slot, one
// sequence number and one answer serve the whole bundle: reliability and
// flow control cost once per bundle, not once per deferred request.
//
// Parsing is kept apart from the runtime so that it can be fuzzed and tested
// on its own: whatever bytes a peer sends, parse() either accepts a message
// whose lengths add up or says what is wrong with it, and so does ItemReader
// for a bundle's items.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "am/deferred.hpp"
#include "via/copy.hpp"
#include "reliability.hpp"

namespace am::wire {

inline constexpr std::size_t kMaxArgs = 4;
inline constexpr std::size_t kMaxPayload = 4096;  // am_max_size()
inline constexpr std::size_t kMaxAcks = 32;        // acknowledgements one message carries at most
inline constexpr std::size_t kHeaderBytes = 16;
inline constexpr std::size_t kAckBytes = 8;         // slot (2), zero (2), seq (4)
inline constexpr std::size_t kMaxMessage = kHeaderBytes + kMaxArgs * 8 + kMaxAcks * kAckBytes + kMaxPayload;
// A store of more than kMaxPayload bytes may go whole in one store_done
// message of up to this many payload bytes, on a reliable VI (bulk.hpp): one
// frame of the link, handled where it arrived (it carries no
// acknowledgements, which could run the program's code while the link holds
// it), so longer than any buffer the receiver holds.
inline constexpr std::size_t kMaxWholeStore = 16 * 1024;

enum class Kind : std::uint8_t {
  request = 1,     // run `handler` with the arguments (and payload)
  reply = 2,       // answers request instance (slot, seq); handler 0xFFFF: no reply handler (a returned request's status, or a get's bytes)
  store_data = 3,  // args: remote address; payload lands there
  store_done = 4,  // args: remote address, length, user arg; payload (if any) lands there, then the mem handler runs
  get = 5,         // args: remote address, length; the reply carries the bytes
  barrier = 7,     // args: epoch; handler: 0 = arrive (to rank 0), 1 = release (from rank 0)
  ack = 8,         // nothing but acknowledgements (slot and seq unused)
  bundle = 9,      // payload: items, each a request
};
inline constexpr Kind kLastKind = Kind::bundle;
// Kind 6 was hello (segments now go through the job's key-value store): refused as a bad kind.
inline constexpr std::uint8_t kRetiredHello = 6;

inline constexpr std::uint16_t kNoHandler = 0xFFFF;
inline constexpr std::uint16_t kBundleReply = 0xFFFE;  // a reply's handler: its payload holds items

struct Header {
  Kind kind;
  std::uint8_t nargs;
  std::uint8_t status;  // replies: 0, or the AM_E_* cause of a returned request
  std::uint8_t acks;    // acknowledgements carried (<= kMaxAcks)
  std::uint16_t handler;
  std::uint16_t slot;   // request instance at the requester
  std::uint32_t seq;    // sequence number of that instance's current use
  std::uint32_t payload_bytes;
};
static_assert(sizeof(Header) == kHeaderBytes);

static_assert(sizeof(Ack) == kAckBytes && offsetof(Ack, zero) == 2 && offsetof(Ack, seq) == 4);

struct Message {
  Header header;
  std::uint64_t args[kMaxArgs];  // unused ones are 0
  const std::byte* acks;         // header.acks of them
  const std::byte* payload;

  Ack ack(unsigned i) const {
    Ack a;
    std::memcpy(&a, acks + i * kAckBytes, kAckBytes);
    return a;
  }
};

enum class ParseError { none, too_short, bad_kind, too_many_args, too_many_acks, bad_length, payload_too_large, bad_run };
const char* describe(ParseError e);

// Copies n <= kMaxArgs words one word at a time, unrolled: a memcpy of a
// variable length is a library call, and a loop over n costs more than the
// words, on the path of every message. Never a wider load either: it would
// span words the caller has just stored one by one (an argument array),
// which the CPU cannot forward from its store buffer, and so wait.
inline void copy_words(void* to, const void* from, unsigned n) {
  auto* out = static_cast<std::byte*>(to);
  const auto* in = static_cast<const std::byte*>(from);
#pragma GCC unroll 4
  for (unsigned i = 0; i < kMaxArgs; ++i) {
    if (i == n) break;
    std::uint64_t word;
    std::memcpy(&word, in + 8 * i, 8);
    std::memcpy(out + 8 * i, &word, 8);
  }
}

// Reads n <= kMaxArgs argument words into all kMaxArgs of `out`, 0 past n.
inline void read_args(std::uint64_t* out, const std::byte* in, unsigned n) {
#pragma GCC unroll 4
  for (unsigned i = 0; i < kMaxArgs; ++i) {
    std::uint64_t word = 0;
    if (i < n) std::memcpy(&word, in + 8 * i, 8);
    out[i] = word;
  }
}

inline constexpr std::size_t padded(std::size_t n) { return (n + 7) & ~std::size_t(7); }

// Parses exactly one message of `len` bytes a peer sent. Inline: it is on
// the path of every message.
[[gnu::always_inline]] inline ParseError parse(const std::byte* data, std::size_t len, Message& out) {
  if (len < kHeaderBytes) return ParseError::too_short;
  std::memcpy(&out.header, data, kHeaderBytes);
  const Header& h = out.header;
  if (std::uint8_t(h.kind) < std::uint8_t(Kind::request) || std::uint8_t(h.kind) > std::uint8_t(kLastKind) ||
      std::uint8_t(h.kind) == kRetiredHello)
    return ParseError::bad_kind;
  if (h.nargs > kMaxArgs) return ParseError::too_many_args;
  if (h.acks > kMaxAcks) return ParseError::too_many_acks;
  if (h.payload_bytes > kMaxPayload &&
      (h.payload_bytes > kMaxWholeStore || h.kind != Kind::store_done || h.acks != 0)) [[unlikely]]
    return ParseError::payload_too_large;
  const std::size_t args_end = kHeaderBytes + h.nargs * 8u;
  const std::size_t acks_end = args_end + h.acks * kAckBytes;
  if (len != acks_end + h.payload_bytes) return ParseError::bad_length;
  read_args(out.args, data + kHeaderBytes, h.nargs);
  out.acks = data + args_end;
  out.payload = data + acks_end;
  return ParseError::none;
}

// The header of one message (an item) in a bundle. Requests are written
// into bundles in the caller's code too (am/deferred.hpp, whose layout is
// part of the library's ABI): the static_asserts below keep the two in step.
struct ItemHeader {
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
inline constexpr std::size_t kItemHeaderBytes = sizeof(ItemHeader);
static_assert(kItemHeaderBytes == DeferredRoom::kItemHeaderBytes);
static_assert(offsetof(ItemHeader, index) == DeferredRoom::kRunCountAt);
static_assert(offsetof(ItemHeader, nargs) == 2 && offsetof(ItemHeader, status) == 3);

// A bundle holds at most this many requests: then the replies to all of
// them, of up to 4 words each, fit in one message of am_max_size() (4096)
// bytes, and so do the requests themselves, of at most 4 words each.
inline constexpr std::uint16_t kBundleItems = kMaxPayload / (kItemHeaderBytes + kMaxArgs * 8);

struct Item {
  ItemHeader header;
  const std::byte* args;  // header.nargs words, in the bundle (read_args copies them)
  const std::byte* payload;
};

// The room an item takes in a bundle.
inline constexpr std::size_t item_bytes(unsigned nargs, std::size_t payload_bytes) {
  return kItemHeaderBytes + nargs * 8u + padded(payload_bytes);
}

// Writes an item at `at` (room for item_bytes); returns its length there.
inline std::size_t encode_item(std::byte* at, ItemHeader h, const std::uint64_t* args, const void* payload) {
  std::memcpy(at, &h, kItemHeaderBytes);
  copy_words(at + kItemHeaderBytes, args, h.nargs);
  const std::size_t payload_at = kItemHeaderBytes + h.nargs * 8u;
  if (h.payload_bytes == 0) return payload_at;
  via::copy_memory(at + payload_at, payload, h.payload_bytes);
  std::memset(at + payload_at + h.payload_bytes, 0, padded(h.payload_bytes) - h.payload_bytes);
  return payload_at + padded(h.payload_bytes);
}

// What a bundle's payload holds: the requests of a bundle, whose items may
// be runs (BundleItemHeader::index), or the replies to one.
enum class Items { requests, replies };

// The items of a bundle (a payload of `len` bytes), one at a time, each
// request of a run as an item of its own. Items whose lengths do not add up
// end the bundle there, with the error kept.
class ItemReader {
 public:
  ItemReader(const std::byte* data, std::size_t len, Items items)
      : at_(data), end_(data + len), runs_(items == Items::requests) {}
  // The next item: true; false at the end or at a malformed item (error() tells which).
  bool next(Item& out) {
    if (more_in_run_ != 0) {
      --more_in_run_;
      out.header = run_;
      out.args = run_next_;
      out.payload = run_next_ += run_.nargs * 8u;
      return true;
    }
    const std::size_t left = std::size_t(end_ - at_);
    if (left < kItemHeaderBytes) return left != 0 && fail(ParseError::too_short);
    std::memcpy(&out.header, at_, kItemHeaderBytes);
    const ItemHeader& h = out.header;
    if (h.nargs > kMaxArgs || h.payload_bytes > kMaxPayload) [[unlikely]]
      return fail(h.nargs > kMaxArgs ? ParseError::too_many_args : ParseError::payload_too_large);
    std::size_t length = item_bytes(h.nargs, h.payload_bytes);
    const bool run = runs_ && h.index != 0;
    if (run) {
      if (h.payload_bytes != 0 || h.index >= kBundleItems) return fail(ParseError::bad_run);
      length += std::size_t(h.index) * h.nargs * 8u;
    }
    if (left < length) return fail(ParseError::bad_length);
    out.args = at_ + kItemHeaderBytes;
    out.payload = out.args + h.nargs * 8u;
    if (run) {
      more_in_run_ = h.index;
      run_ = h;
      run_next_ = out.payload;
    }
    at_ += length;
    return true;
  }
  ParseError error() const { return error_; }

 private:
  // A malformed item ends the bundle: nothing after it is read.
  bool fail(ParseError e) {
    error_ = e;
    at_ = end_;
    return false;
  }
  const std::byte* at_;
  const std::byte* end_;
  bool runs_;
  std::uint16_t more_in_run_ = 0;  // requests of the current run not yet read
  ItemHeader run_{};
  const std::byte* run_next_ = nullptr;  // their words
  ParseError error_ = ParseError::none;
};

// Writes a message into `buf` (room for kMaxMessage) with header.acks
// acknowledgements from `acks`; returns its length. A null payload is not
// written: its header.payload_bytes are left for the caller to send from
// where they are, behind the rest (the length returned counts them).
inline std::size_t encode(std::byte* buf, const Header& header, const std::uint64_t* args, const Ack* acks,
                          const void* payload) {
  std::memcpy(buf, &header, kHeaderBytes);
  copy_words(buf + kHeaderBytes, args, header.nargs);
  std::size_t at = kHeaderBytes + header.nargs * 8u;
  for (unsigned i = 0; i < header.acks; ++i, at += kAckBytes) std::memcpy(buf + at, &acks[i], kAckBytes);  // the wire's layout
  if (header.payload_bytes && payload) via::copy_memory(buf + at, payload, header.payload_bytes);
  return at + header.payload_bytes;
}

}  // namespace am::wire
