#include "utcp/icmp.hpp"

#include <algorithm>

#include "utcp/checksum.hpp"
#include "wire/bytes.hpp"
#include "wire/ipv4_fields.hpp"

namespace utcp::wire {
namespace {

constexpr std::uint8_t type_echo_reply = 0;
constexpr std::uint8_t type_destination_unreachable = 3;
constexpr std::uint8_t type_echo_request = 8;
constexpr std::uint8_t type_time_exceeded = 11;
constexpr std::size_t quoted_payload_length = 8;

}  // namespace

Result<QuotedDatagram> parse_quoted_datagram(std::span<const std::uint8_t> quote) {
  if (quote.size() < ipv4_min_header_length || quote[0] >> 4 != 4) return Error::bad_quoted_datagram;
  const std::size_t header_length = (quote[0] & 0x0f) * 4u;
  if (header_length < ipv4_min_header_length || quote.size() < header_length + quoted_payload_length)
    return Error::bad_quoted_datagram;
  return QuotedDatagram{detail::read_ipv4_fields(quote.data()), quote.subspan(header_length, quoted_payload_length)};
}

Result<IcmpMessage> parse_icmp(std::span<const std::uint8_t> message) {
  if (message.size() < icmp_header_length) return Error::truncated;
  if (internet_checksum(message) != 0) return Error::bad_checksum;
  const std::uint8_t type = message[0];
  const std::uint8_t code = message[1];
  const std::span<const std::uint8_t> data = message.subspan(icmp_header_length);
  switch (type) {
    case type_echo_reply:
    case type_echo_request:
      if (code != 0) return Error::bad_icmp_code;
      return IcmpMessage{IcmpEcho{type == type_echo_reply, detail::load16(&message[4]), detail::load16(&message[6])},
                         data};
    case type_destination_unreachable: {
      if (code > unreachable_code::last_defined) return Error::bad_icmp_code;
      if (!parse_quoted_datagram(data)) return Error::bad_quoted_datagram;
      // Bytes 4-5 are unused (zero), 6-7 the next-hop MTU for code 4 (RFC 1191 §4).
      const std::uint16_t mtu = code == unreachable_code::fragmentation_needed ? detail::load16(&message[6]) : 0;
      return IcmpMessage{IcmpDestinationUnreachable{code, mtu}, data};
    }
    case type_time_exceeded:
      if (code > time_exceeded_code::reassembly) return Error::bad_icmp_code;
      if (!parse_quoted_datagram(data)) return Error::bad_quoted_datagram;
      return IcmpMessage{IcmpTimeExceeded{code}, data};
    default:
      return Error::unsupported_icmp_type;
  }
}

std::size_t emit_icmp(const IcmpHeader& header, std::span<const std::uint8_t> data, std::span<std::uint8_t> out) {
  const std::size_t length = detail::place_payload(icmp_header_length, data, out,
                                                   ipv4_max_total_length - ipv4_min_header_length, "emit_icmp");
  std::uint8_t* bytes = out.data();
  if (const auto* echo = std::get_if<IcmpEcho>(&header)) {
    bytes[0] = echo->reply ? type_echo_reply : type_echo_request;
    bytes[1] = 0;
    detail::store16(bytes + 4, echo->identifier);
    detail::store16(bytes + 6, echo->sequence);
  } else if (const auto* unreachable = std::get_if<IcmpDestinationUnreachable>(&header)) {
    bytes[0] = type_destination_unreachable;
    bytes[1] = unreachable->code;
    detail::store16(bytes + 4, 0);
    const bool has_mtu = unreachable->code == unreachable_code::fragmentation_needed;
    detail::store16(bytes + 6, has_mtu ? unreachable->next_hop_mtu : 0);
  } else {
    bytes[0] = type_time_exceeded;
    bytes[1] = std::get<IcmpTimeExceeded>(header).code;
    detail::store32(bytes + 4, 0);  // unused
  }
  detail::store16(bytes + 2, 0);
  detail::store16(bytes + 2, internet_checksum(out.first(length)));
  return length;
}

std::span<const std::uint8_t> icmp_error_quote(std::span<const std::uint8_t> offending_packet) {
  const std::size_t header_length = offending_packet.empty() ? 0 : (offending_packet[0] & 0x0fu) * 4u;
  return offending_packet.first(std::min(offending_packet.size(), header_length + quoted_payload_length));
}

}  // namespace utcp::wire
