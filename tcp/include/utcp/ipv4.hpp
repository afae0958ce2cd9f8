// IPv4 headers (RFC 791).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "utcp/address.hpp"
#include "utcp/result.hpp"

namespace utcp::wire {

namespace ip_protocol {
inline constexpr std::uint8_t icmp = 1;
inline constexpr std::uint8_t tcp = 6;
inline constexpr std::uint8_t udp = 17;
}  // namespace ip_protocol

inline constexpr std::size_t ipv4_min_header_length = 20;
inline constexpr std::size_t ipv4_max_total_length = 65535;

// The header's fields, less those derived from the bytes around them
// (IHL, total length, checksum).
struct Ipv4Header {
  std::uint8_t type_of_service = 0;  // DSCP and ECN
  std::uint16_t identification = 0;
  bool dont_fragment = false;
  bool more_fragments = false;
  std::uint16_t fragment_offset = 0;  // in bytes: a multiple of 8, at most 8191 * 8
  std::uint8_t time_to_live = 64;
  std::uint8_t protocol = 0;
  Ipv4Address source;
  Ipv4Address destination;

  friend bool operator==(const Ipv4Header&, const Ipv4Header&) = default;
};

struct Ipv4Packet {
  Ipv4Header header;
  std::span<const std::uint8_t> options;  // the header's bytes after the fixed 20, well formed but not interpreted
  std::span<const std::uint8_t> payload;  // up to the total length; link padding after it is dropped
};

// Checks, in this order: the fixed header is there, version 4, IHL in 5..
// and within the total length and the buffer, total length within the buffer,
// the header checksum, the reserved flag clear, the fragment's bounds, and
// that the options are well-formed type-length-value items.
Result<Ipv4Packet> parse_ipv4(std::span<const std::uint8_t> packet);

// Writes a 20-byte header (no options) with its checksum, then the payload
// (copied unless it already sits at out[20]). Returns the total length.
// Throws std::length_error if out is too small or the packet would exceed
// 65535 bytes, std::invalid_argument for a fragment offset not a multiple of 8.
std::size_t emit_ipv4(const Ipv4Header& header, std::span<const std::uint8_t> payload, std::span<std::uint8_t> out);
// The 20-byte header alone, for a payload of payload_length bytes that lies
// elsewhere; returns the total length. Throws as emit_ipv4.
std::size_t emit_ipv4_header(const Ipv4Header& header, std::size_t payload_length, std::span<std::uint8_t> out);

}  // namespace utcp::wire
