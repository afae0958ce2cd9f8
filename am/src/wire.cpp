#include "wire.hpp"

namespace am::wire {

const char* describe(ParseError e) {
  switch (e) {
    case ParseError::none: return "no error";
    case ParseError::too_short: return "message shorter than an AM header";
    case ParseError::bad_kind: return "unknown message kind";
    case ParseError::too_many_args: return "more than 4 arguments";
    case ParseError::bad_length: return "message length does not match its header";
    case ParseError::payload_too_large: return "payload larger than am_max_size()";
  }
  return "unknown parse error";
}

ParseError parse(const std::byte* data, std::size_t len, Message& out) {
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
  if (h.nargs) std::memcpy(out.args, data + kHeaderBytes, h.nargs * 8u);
  out.payload = data + args_end;
  return ParseError::none;
}

}  // namespace am::wire
