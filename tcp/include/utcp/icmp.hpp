// The ICMP messages an IP host needs (RFC 792, RFC 1122 §3.2.2): echo
// request and reply, destination unreachable, and time exceeded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "utcp/ipv4.hpp"
#include "utcp/result.hpp"

namespace utcp::wire {

inline constexpr std::size_t icmp_header_length = 8;

struct IcmpEcho {
  bool reply = false;  // echo reply (type 0) or request (type 8)
  std::uint16_t identifier = 0;
  std::uint16_t sequence = 0;
  friend bool operator==(const IcmpEcho&, const IcmpEcho&) = default;
};

// Codes of destination unreachable (type 3); RFC 792 defines 0-5, RFC 1122
// §3.2.2.1 and RFC 1812 §5.2.7.1 the rest up to 15.
namespace unreachable_code {
inline constexpr std::uint8_t network = 0;
inline constexpr std::uint8_t host = 1;
inline constexpr std::uint8_t protocol = 2;
inline constexpr std::uint8_t port = 3;
inline constexpr std::uint8_t fragmentation_needed = 4;
inline constexpr std::uint8_t last_defined = 15;
}  // namespace unreachable_code

struct IcmpDestinationUnreachable {
  std::uint8_t code = unreachable_code::port;
  std::uint16_t next_hop_mtu = 0;  // RFC 1191, for fragmentation_needed; 0 otherwise
  friend bool operator==(const IcmpDestinationUnreachable&, const IcmpDestinationUnreachable&) = default;
};

// Codes of time exceeded (type 11, RFC 792).
namespace time_exceeded_code {
inline constexpr std::uint8_t in_transit = 0;  // time to live exceeded in transit
inline constexpr std::uint8_t reassembly = 1;  // fragment reassembly time exceeded
}  // namespace time_exceeded_code

struct IcmpTimeExceeded {
  std::uint8_t code = time_exceeded_code::reassembly;
  friend bool operator==(const IcmpTimeExceeded&, const IcmpTimeExceeded&) = default;
};

using IcmpHeader = std::variant<IcmpEcho, IcmpDestinationUnreachable, IcmpTimeExceeded>;

struct IcmpMessage {
  IcmpHeader header;
  // Echo: the data to echo back. Unreachable, time exceeded: the quoted datagram.
  std::span<const std::uint8_t> data;
};

// Checks the length, the checksum over the whole message, the type (echo,
// destination unreachable or time exceeded, others are
// unsupported_icmp_type), the code, and for the errors that the quote parses
// with parse_quoted_datagram.
Result<IcmpMessage> parse_icmp(std::span<const std::uint8_t> message);

// Writes the 8-byte header with its checksum, then data (copied unless it
// already sits at out[8]). Returns the message length. Throws
// std::length_error if out is too small or the message could not fit in an
// IPv4 packet.
std::size_t emit_icmp(const IcmpHeader& header, std::span<const std::uint8_t> data, std::span<std::uint8_t> out);

// What an ICMP error quotes of the datagram that caused it: its IP header
// and the first 8 bytes of its payload (RFC 792), or less if it had less.
std::span<const std::uint8_t> icmp_error_quote(std::span<const std::uint8_t> offending_packet);

// The quoted header of an ICMP error, read for the fields that find the
// socket it concerns: addresses, protocol and (in the 8 payload bytes) the
// ports. Its checksum and total length are not checked: the quote is cut.
struct QuotedDatagram {
  Ipv4Header header;
  std::span<const std::uint8_t> payload_start;  // 8 bytes
};
Result<QuotedDatagram> parse_quoted_datagram(std::span<const std::uint8_t> quote);

}  // namespace utcp::wire
