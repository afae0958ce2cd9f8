#include "utcp/ipv4.hpp"

#include <stdexcept>

#include "utcp/checksum.hpp"
#include "wire/bytes.hpp"
#include "wire/ipv4_fields.hpp"

namespace utcp::wire {
namespace {

// Flags and fragment offset share a 16-bit word (RFC 791 §3.1).
constexpr std::uint16_t reserved_flag = 0x8000;
constexpr std::uint16_t dont_fragment_flag = 0x4000;
constexpr std::uint16_t more_fragments_flag = 0x2000;
constexpr std::uint16_t fragment_offset_mask = 0x1fff;

}  // namespace

Ipv4Header detail::read_ipv4_fields(const std::uint8_t* bytes) {
  const std::uint16_t flags_and_offset = detail::load16(bytes + 6);
  Ipv4Header header;
  header.type_of_service = bytes[1];
  header.identification = detail::load16(bytes + 4);
  header.dont_fragment = flags_and_offset & dont_fragment_flag;
  header.more_fragments = flags_and_offset & more_fragments_flag;
  header.fragment_offset = static_cast<std::uint16_t>((flags_and_offset & fragment_offset_mask) * 8u);
  header.time_to_live = bytes[8];
  header.protocol = bytes[9];
  header.source.value = detail::load32(bytes + 12);
  header.destination.value = detail::load32(bytes + 16);
  return header;
}

Result<Ipv4Packet> parse_ipv4(std::span<const std::uint8_t> packet) {
  if (packet.size() < ipv4_min_header_length) return Error::truncated;
  const std::uint8_t* bytes = packet.data();
  if (bytes[0] >> 4 != 4) return Error::bad_version;
  const std::size_t header_length = (bytes[0] & 0x0f) * 4u;
  const std::size_t total_length = detail::load16(bytes + 2);
  if (header_length < ipv4_min_header_length || header_length > packet.size() || header_length > total_length)
    return Error::bad_header_length;
  if (total_length > packet.size()) return Error::bad_total_length;
  if (internet_checksum(packet.first(header_length)) != 0) return Error::bad_checksum;

  if (detail::load16(bytes + 6) & reserved_flag) return Error::reserved_bit_set;
  Ipv4Packet parsed;
  const Ipv4Header& header = parsed.header = detail::read_ipv4_fields(bytes);
  parsed.options = packet.subspan(ipv4_min_header_length, header_length - ipv4_min_header_length);
  parsed.payload = packet.subspan(header_length, total_length - header_length);

  // A reassembled datagram cannot exceed 65535 bytes; every fragment but the
  // last carries a multiple of 8 bytes (RFC 791 §2.3, "Fragmentation").
  if (header.fragment_offset + parsed.payload.size() > ipv4_max_total_length - ipv4_min_header_length ||
      (header.more_fragments && parsed.payload.size() % 8 != 0))
    return Error::bad_fragment;

  // Options are skipped, but only once they are known to stay inside the header.
  const auto accept_any = [](std::uint8_t, std::span<const std::uint8_t>) { return std::optional<Error>(); };
  if (const std::optional<Error> error = detail::walk_options(parsed.options, accept_any)) return *error;
  return parsed;
}

std::size_t emit_ipv4(const Ipv4Header& header, std::span<const std::uint8_t> payload, std::span<std::uint8_t> out) {
  const std::size_t total_length =
      detail::place_payload(ipv4_min_header_length, payload, out, ipv4_max_total_length, "emit_ipv4");
  emit_ipv4_header(header, payload.size(), out);
  return total_length;
}

std::size_t emit_ipv4_header(const Ipv4Header& header, std::size_t payload_length, std::span<std::uint8_t> out) {
  if (header.fragment_offset % 8 != 0) throw std::invalid_argument("emit_ipv4: fragment offset must be a multiple of 8");
  const std::size_t total_length = ipv4_min_header_length + payload_length;
  if (total_length > ipv4_max_total_length) throw std::length_error("emit_ipv4: longer than its length field can say");
  if (out.size() < ipv4_min_header_length) throw std::length_error("emit_ipv4: output buffer too small");
  std::uint8_t* bytes = out.data();
  bytes[0] = 0x45;  // version 4, IHL 5
  bytes[1] = header.type_of_service;
  detail::store16(bytes + 2, static_cast<std::uint16_t>(total_length));
  detail::store16(bytes + 4, header.identification);
  std::uint16_t flags_and_offset = static_cast<std::uint16_t>(header.fragment_offset / 8);
  if (header.dont_fragment) flags_and_offset |= dont_fragment_flag;
  if (header.more_fragments) flags_and_offset |= more_fragments_flag;
  detail::store16(bytes + 6, flags_and_offset);
  bytes[8] = header.time_to_live;
  bytes[9] = header.protocol;
  detail::store16(bytes + 10, 0);
  detail::store32(bytes + 12, header.source.value);
  detail::store32(bytes + 16, header.destination.value);
  detail::store16(bytes + 10, internet_checksum(out.first(ipv4_min_header_length)));
  return total_length;
}

}  // namespace utcp::wire
