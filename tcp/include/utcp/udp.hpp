// UDP headers (RFC 768).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "utcp/address.hpp"
#include "utcp/result.hpp"

namespace utcp::wire {

inline constexpr std::size_t udp_header_length = 8;

struct UdpHeader {
  std::uint16_t source_port = 0;
  std::uint16_t destination_port = 0;
  friend bool operator==(const UdpHeader&, const UdpHeader&) = default;
};

struct UdpDatagram {
  UdpHeader header;
  std::span<const std::uint8_t> payload;  // up to the length field
  bool checksummed = false;               // false: the sender sent checksum 0, "no checksum"
};

// datagram is the IP payload; the addresses enter the pseudo-header. Checks
// the length field (8 up to the buffer) and, unless it is 0, the checksum.
Result<UdpDatagram> parse_udp(std::span<const std::uint8_t> datagram, Ipv4Address source,
                              Ipv4Address destination);

// Writes the header with its checksum, then the payload (copied unless it
// already sits at out[8]). Returns the datagram length. Throws
// std::length_error if out is too small or the length exceeds 65535.
std::size_t emit_udp(const UdpHeader& header, Ipv4Address source, Ipv4Address destination,
                     std::span<const std::uint8_t> payload, std::span<std::uint8_t> out);

}  // namespace utcp::wire
