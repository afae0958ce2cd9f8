#include "utcp/tcp_header.hpp"

#include <algorithm>
#include <stdexcept>

#include "utcp/checksum.hpp"
#include "utcp/ipv4.hpp"
#include "wire/bytes.hpp"

namespace utcp::wire {
namespace {

constexpr std::uint8_t kind_end_of_list = 0;
constexpr std::uint8_t kind_no_operation = 1;
constexpr std::uint8_t kind_max_segment_size = 2;
constexpr std::uint8_t kind_window_scale = 3;
constexpr std::uint8_t kind_sack_permitted = 4;
constexpr std::uint8_t kind_sack = 5;
constexpr std::uint8_t kind_timestamps = 8;

// Lengths of the option data, after kind and length.
constexpr std::size_t max_segment_size_data = 2;
constexpr std::size_t window_scale_data = 1;
constexpr std::size_t timestamps_data = 8;
constexpr std::size_t sack_block_data = 8;  // RFC 2018 §3; the 40 option bytes bound the count at 4

std::optional<Error> read_option(std::uint8_t kind, std::span<const std::uint8_t> data, TcpOptions& options) {
  switch (kind) {
    case kind_max_segment_size:
      if (data.size() != max_segment_size_data) return Error::bad_option_length;
      options.max_segment_size = detail::load16(data.data());
      break;
    case kind_window_scale:
      if (data.size() != window_scale_data) return Error::bad_option_length;
      options.window_scale = data[0];
      break;
    case kind_sack_permitted:
      if (!data.empty()) return Error::bad_option_length;
      options.sack_permitted = true;
      break;
    case kind_timestamps:
      if (data.size() != timestamps_data) return Error::bad_option_length;
      options.timestamps = TcpTimestamps{detail::load32(data.data()), detail::load32(data.data() + 4)};
      break;
    case kind_sack:
      if (data.empty() || data.size() % sack_block_data != 0) return Error::bad_option_length;
      options.sack_block_count = 0;
      for (std::size_t at = 0; at < data.size() && options.sack_block_count < TcpOptions::max_sack_blocks;
           at += sack_block_data) {
        options.sack_blocks[options.sack_block_count++] =
            SackBlock{SeqNumber(detail::load32(data.data() + at)), SeqNumber(detail::load32(data.data() + at + 4))};
      }
      break;
    default:
      break;  // unknown kinds are skipped (RFC 9293 §3.1: length-bounded)
  }
  return std::nullopt;
}

// Options in the order and alignment Linux gives its SYN, so that ours read
// the same in a capture: MSS; SACK-permitted, or two no-operations, in front
// of timestamps to align them on 4 bytes (RFC 7323 Appendix A); a
// no-operation and window scale.
std::size_t write_options(const TcpOptions& options, std::uint8_t* out) {
  std::uint8_t* p = out;
  if (options.max_segment_size) {
    *p++ = kind_max_segment_size;
    *p++ = 2 + max_segment_size_data;
    detail::store16(p, *options.max_segment_size);
    p += max_segment_size_data;
  }
  if (options.sack_permitted) {
    *p++ = kind_sack_permitted;
    *p++ = 2;
  }
  if (options.timestamps) {
    if (!options.sack_permitted) {
      *p++ = kind_no_operation;
      *p++ = kind_no_operation;
    }
    *p++ = kind_timestamps;
    *p++ = 2 + timestamps_data;
    detail::store32(p, options.timestamps->value);
    detail::store32(p + 4, options.timestamps->echo_reply);
    p += timestamps_data;
  }
  if (options.window_scale) {
    *p++ = kind_no_operation;
    *p++ = kind_window_scale;
    *p++ = 2 + window_scale_data;
    *p++ = *options.window_scale;
  }
  // SACK blocks, aligned by two no-operations (RFC 2018 §3), as many as fit.
  constexpr std::size_t options_room = tcp_max_header_length - tcp_min_header_length;
  const std::size_t used = static_cast<std::size_t>(p - out);
  const std::size_t fit = used + 4 + sack_block_data <= options_room ? (options_room - used - 4) / sack_block_data : 0;
  const std::size_t blocks = std::min<std::size_t>(options.sack_block_count, fit);
  if (blocks > 0) {
    *p++ = kind_no_operation;
    *p++ = kind_no_operation;
    *p++ = kind_sack;
    *p++ = static_cast<std::uint8_t>(2 + blocks * sack_block_data);
    for (std::size_t i = 0; i < blocks; ++i) {
      detail::store32(p, options.sack_blocks[i].left.value());
      detail::store32(p + 4, options.sack_blocks[i].right.value());
      p += sack_block_data;
    }
  }
  // RFC 9293 §3.1: the header is padded with zeros to a 32-bit boundary.
  while ((p - out) % 4 != 0) *p++ = kind_end_of_list;
  return static_cast<std::size_t>(p - out);
}

}  // namespace

Result<TcpSegment> parse_tcp(std::span<const std::uint8_t> segment, Ipv4Address source, Ipv4Address destination) {
  if (segment.size() < tcp_min_header_length) return Error::truncated;
  const std::size_t header_length = (segment[12] >> 4) * 4u;
  if (header_length < tcp_min_header_length || header_length > segment.size()) return Error::bad_data_offset;
  if (segment.size() > ipv4_max_total_length) return Error::bad_length;
  Checksum checksum =
      pseudo_header_checksum(source, destination, ip_protocol::tcp, static_cast<std::uint16_t>(segment.size()));
  checksum.add(segment);
  if (checksum.finish() != 0) return Error::bad_checksum;

  TcpSegment parsed;
  TcpHeader& header = parsed.header;
  header.source_port = detail::load16(&segment[0]);
  header.destination_port = detail::load16(&segment[2]);
  header.sequence = SeqNumber(detail::load32(&segment[4]));
  header.acknowledgment = SeqNumber(detail::load32(&segment[8]));
  header.flags = segment[13];  // the reserved bits in byte 12 are ignored on receipt
  header.window = detail::load16(&segment[14]);
  header.urgent_pointer = detail::load16(&segment[18]);
  const auto read = [&header](std::uint8_t kind, std::span<const std::uint8_t> data) {
    return read_option(kind, data, header.options);
  };
  const std::span<const std::uint8_t> options =
      segment.subspan(tcp_min_header_length, header_length - tcp_min_header_length);
  if (const std::optional<Error> error = detail::walk_options(options, read)) return *error;
  parsed.payload = segment.subspan(header_length);
  return parsed;
}

std::size_t tcp_header_length(const TcpHeader& header) {
  std::uint8_t scratch[tcp_max_header_length - tcp_min_header_length];
  return tcp_min_header_length + write_options(header.options, scratch);
}

namespace {

// The header and options at `bytes`, with the checksum of the segment whose
// payload of payload_length bytes sums to payload_sum.
void write_tcp_header(const TcpHeader& header, Ipv4Address source, Ipv4Address destination, std::size_t header_length,
                      std::size_t payload_length, const Checksum& payload_sum, std::uint8_t* bytes) {
  detail::store16(bytes, header.source_port);
  detail::store16(bytes + 2, header.destination_port);
  detail::store32(bytes + 4, header.sequence.value());
  detail::store32(bytes + 8, header.acknowledgment.value());
  bytes[12] = static_cast<std::uint8_t>(header_length / 4 << 4);
  bytes[13] = header.flags;
  detail::store16(bytes + 14, header.window);
  detail::store16(bytes + 16, 0);
  detail::store16(bytes + 18, header.urgent_pointer);
  write_options(header.options, bytes + tcp_min_header_length);
  Checksum checksum = pseudo_header_checksum(source, destination, ip_protocol::tcp,
                                             static_cast<std::uint16_t>(header_length + payload_length));
  checksum.add({bytes, header_length});
  checksum.add_u16(payload_sum.folded_sum());
  detail::store16(bytes + 16, checksum.finish());
}

}  // namespace

std::size_t emit_tcp(const TcpHeader& header, Ipv4Address source, Ipv4Address destination,
                     std::span<const std::uint8_t> payload, std::span<std::uint8_t> out) {
  const std::size_t header_length = tcp_header_length(header);
  const std::size_t length = detail::total_length(header_length, payload.size(), out,
                                                  ipv4_max_total_length - ipv4_min_header_length, "emit_tcp");
  std::uint8_t* bytes = out.data();
  // The payload's sum is taken as it is copied in: one pass over the data.
  Checksum payload_sum;
  if (payload.data() == bytes + header_length)
    payload_sum.add(payload);  // the caller wrote it in place
  else
    payload_sum.add_copy(payload, bytes + header_length);
  write_tcp_header(header, source, destination, header_length, payload.size(), payload_sum, bytes);
  return length;
}

std::size_t emit_tcp_header(const TcpHeader& header, Ipv4Address source, Ipv4Address destination,
                            std::span<const std::uint8_t> payload, std::span<std::uint8_t> out) {
  const std::size_t header_length = tcp_header_length(header);
  if (header_length + payload.size() > ipv4_max_total_length - ipv4_min_header_length)
    throw std::length_error("emit_tcp_header: longer than its length field can say");
  if (out.size() < header_length) throw std::length_error("emit_tcp_header: output buffer too small");
  Checksum payload_sum;
  payload_sum.add(payload);
  write_tcp_header(header, source, destination, header_length, payload.size(), payload_sum, out.data());
  return header_length;
}

}  // namespace utcp::wire
