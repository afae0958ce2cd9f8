#include "utcp/udp.hpp"

#include "utcp/checksum.hpp"
#include "utcp/ipv4.hpp"
#include "wire/bytes.hpp"

namespace utcp::wire {

Result<UdpDatagram> parse_udp(std::span<const std::uint8_t> datagram, Ipv4Address source,
                              Ipv4Address destination) {
  if (datagram.size() < udp_header_length) return Error::truncated;
  const std::uint16_t length = detail::load16(&datagram[4]);
  if (length < udp_header_length || length > datagram.size()) return Error::bad_length;
  const std::span<const std::uint8_t> covered = datagram.first(length);
  // RFC 768: "An all zero transmitted checksum value means that the
  // transmitter generated no checksum".
  const bool checksummed = detail::load16(&datagram[6]) != 0;
  if (checksummed) {
    Checksum checksum = pseudo_header_checksum(source, destination, ip_protocol::udp, length);
    checksum.add(covered);
    if (checksum.finish() != 0) return Error::bad_checksum;
  }
  return UdpDatagram{{detail::load16(&datagram[0]), detail::load16(&datagram[2])},
                     covered.subspan(udp_header_length),
                     checksummed};
}

std::size_t emit_udp(const UdpHeader& header, Ipv4Address source, Ipv4Address destination,
                     std::span<const std::uint8_t> payload, std::span<std::uint8_t> out) {
  const std::size_t length = detail::place_payload(udp_header_length, payload, out, 0xffff, "emit_udp");
  std::uint8_t* bytes = out.data();
  detail::store16(bytes, header.source_port);
  detail::store16(bytes + 2, header.destination_port);
  detail::store16(bytes + 4, static_cast<std::uint16_t>(length));
  detail::store16(bytes + 6, 0);
  Checksum checksum = pseudo_header_checksum(source, destination, ip_protocol::udp, static_cast<std::uint16_t>(length));
  checksum.add(out.first(length));
  // RFC 768: a computed checksum of zero is sent as all ones, since zero means none.
  const std::uint16_t value = checksum.finish();
  detail::store16(bytes + 6, value == 0 ? 0xffff : value);
  return length;
}

}  // namespace utcp::wire
