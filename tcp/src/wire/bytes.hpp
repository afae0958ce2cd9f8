// Big-endian (network order) loads and stores, and the payload placement
// every emitter shares. Private to the wire layer.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "utcp/result.hpp"

namespace utcp::wire::detail {

inline std::uint16_t load16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
inline std::uint32_t load32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}
inline void store16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void store32(std::uint8_t* p, std::uint32_t v) {
  store16(p, static_cast<std::uint16_t>(v >> 16));
  store16(p + 2, static_cast<std::uint16_t>(v));
}

// The size of a header of header_length bytes and its payload, checked
// against the length field's limit and the room in `out`.
inline std::size_t total_length(std::size_t header_length, std::size_t payload_length, std::span<std::uint8_t> out,
                                std::size_t max_total, const char* what) {
  const std::size_t total = header_length + payload_length;
  if (total > max_total || out.size() < total) {
    std::string message = what;
    message += total > max_total ? ": longer than its length field can say" : ": output buffer too small";
    throw std::length_error(message);
  }
  return total;
}

// Checks as total_length() and copies the payload behind the header unless
// it is already there (the caller may have written it in place). Returns the
// total size.
inline std::size_t place_payload(std::size_t header_length, std::span<const std::uint8_t> payload,
                                 std::span<std::uint8_t> out, std::size_t max_total, const char* what) {
  const std::size_t total = total_length(header_length, payload.size(), out, max_total, what);
  std::uint8_t* destination = out.data() + header_length;
  if (!payload.empty() && payload.data() != destination) std::memmove(destination, payload.data(), payload.size());
  return total;
}

// Walks an options area laid out as IPv4's (RFC 791 §3.1) and TCP's
// (RFC 9293 §3.1): kind 0 ends the list, kind 1 is a single padding byte,
// any other kind is followed by a length counting kind and length bytes, then
// data. Calls visit(kind, data) for each of the others and stops at its
// first error.
template <class Visitor>
std::optional<Error> walk_options(std::span<const std::uint8_t> options, Visitor&& visit) {
  constexpr std::uint8_t end_of_list = 0;
  constexpr std::uint8_t no_operation = 1;
  for (std::size_t i = 0; i < options.size();) {
    const std::uint8_t kind = options[i];
    if (kind == end_of_list) break;
    if (kind == no_operation) {
      ++i;
      continue;
    }
    if (i + 1 >= options.size()) return Error::option_truncated;
    const std::size_t length = options[i + 1];
    if (length < 2) return Error::bad_option_length;
    if (length > options.size() - i) return Error::option_truncated;
    if (const std::optional<Error> error = visit(kind, options.subspan(i + 2, length - 2))) return error;
    i += length;
  }
  return std::nullopt;
}

}  // namespace utcp::wire::detail
