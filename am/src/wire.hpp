// The AM wire format: one VIA message per AM message.
//
//   header (16 bytes) | nargs x 64-bit argument | payload
//
// Parsing is kept apart from the runtime so that it can be fuzzed and tested
// on its own: whatever bytes a peer sends, parse() either accepts a message
// whose lengths add up or says what is wrong with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace am::wire {

inline constexpr std::size_t kMaxArgs = 4;
inline constexpr std::size_t kMaxPayload = 4096;  // am_max_size()
inline constexpr std::size_t kHeaderBytes = 16;
inline constexpr std::size_t kMaxMessage = kHeaderBytes + kMaxArgs * 8 + kMaxPayload;

enum class Kind : std::uint8_t {
  request = 1,     // run `handler` with the arguments (and payload)
  reply = 2,       // answers request instance (slot, seq); handler 0xFFFF: a bare acknowledgement
  store_data = 3,  // args: remote address; payload lands there, acknowledged by a bare reply
  store_done = 4,  // args: remote address, length, user arg; payload (if any) lands there, then the mem handler runs
  get = 5,         // args: remote address, length; the reply carries the bytes
  hello = 6,       // args: segment base, segment length, segment memory handle, depth
  barrier = 7,     // args: epoch; handler: 0 = arrive (to rank 0), 1 = release (from rank 0)
};
inline constexpr Kind kLastKind = Kind::barrier;

inline constexpr std::uint16_t kNoHandler = 0xFFFF;

struct Header {
  Kind kind;
  std::uint8_t nargs;
  std::uint8_t status;  // replies: 0, or the AM_E_* cause of a returned request
  std::uint8_t reserved;
  std::uint16_t handler;
  std::uint16_t slot;   // request instance at the requester
  std::uint32_t seq;    // sequence number of that instance's current use
  std::uint32_t payload_bytes;
};
static_assert(sizeof(Header) == kHeaderBytes);

struct Message {
  Header header;
  std::uint64_t args[kMaxArgs];  // unused ones are 0
  const std::byte* payload;
};

enum class ParseError { none, too_short, bad_kind, too_many_args, bad_length, payload_too_large };
const char* describe(ParseError e);

// Copies n <= 4 words in fixed-size pieces (a memcpy of a variable length is
// a library call, on the path of every message).
inline void copy_words(void* to, const void* from, unsigned n) {
  switch (n) {
    case 4: std::memcpy(to, from, 32); break;
    case 3: std::memcpy(to, from, 24); break;
    case 2: std::memcpy(to, from, 16); break;
    case 1: std::memcpy(to, from, 8); break;
    default: break;
  }
}

// Parses `len` bytes a peer sent. Inline: it is on the path of every message.
inline ParseError parse(const std::byte* data, std::size_t len, Message& out) {
  if (len < kHeaderBytes) return ParseError::too_short;
  std::memcpy(&out.header, data, kHeaderBytes);
  const Header& h = out.header;
  if (std::uint8_t(h.kind) < std::uint8_t(Kind::request) || std::uint8_t(h.kind) > std::uint8_t(kLastKind))
    return ParseError::bad_kind;
  if (h.nargs > kMaxArgs) return ParseError::too_many_args;
  if (h.payload_bytes > kMaxPayload) return ParseError::payload_too_large;
  const std::size_t args_end = kHeaderBytes + h.nargs * 8u;
  if (len != args_end + h.payload_bytes) return ParseError::bad_length;
  std::memset(out.args, 0, sizeof out.args);
  copy_words(out.args, data + kHeaderBytes, h.nargs);
  out.payload = data + args_end;
  return ParseError::none;
}

// Writes a message into `buf` (room for kMaxMessage); returns its length.
inline std::size_t encode(std::byte* buf, const Header& header, const std::uint64_t* args, const void* payload) {
  std::memcpy(buf, &header, kHeaderBytes);
  copy_words(buf + kHeaderBytes, args, header.nargs);
  const std::size_t at = kHeaderBytes + header.nargs * 8u;
  if (header.payload_bytes) std::memcpy(buf + at, payload, header.payload_bytes);
  return at + header.payload_bytes;
}

}  // namespace am::wire
