#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace utcp::wire {

// An IPv4 address, held as the 32-bit number whose big-endian bytes are on
// the wire (10.9.0.1 is 0x0a090001).
struct Ipv4Address {
  std::uint32_t value = 0;

  static constexpr Ipv4Address from_octets(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    return {static_cast<std::uint32_t>(a) << 24 | static_cast<std::uint32_t>(b) << 16 |
            static_cast<std::uint32_t>(c) << 8 | d};
  }
  // Dotted-quad text, "10.0.0.1"; none for anything else.
  static std::optional<Ipv4Address> parse(std::string_view text);
  std::string to_string() const;
  friend bool operator==(Ipv4Address, Ipv4Address) = default;
};

}  // namespace utcp::wire
