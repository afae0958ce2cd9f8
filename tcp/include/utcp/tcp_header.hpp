// TCP headers (RFC 9293 §3.1) and the options a modern peer sends on its
// SYN: MSS (RFC 9293 §3.7.1), window scale and timestamps (RFC 7323),
// SACK-permitted (RFC 2018).
#pragma once

#include <cstddef>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "utcp/address.hpp"
#include "utcp/result.hpp"
#include "utcp/seq.hpp"

namespace utcp::wire {

inline constexpr std::size_t tcp_min_header_length = 20;
inline constexpr std::size_t tcp_max_header_length = 60;

namespace tcp_flags {
inline constexpr std::uint8_t fin = 0x01;
inline constexpr std::uint8_t syn = 0x02;
inline constexpr std::uint8_t rst = 0x04;
inline constexpr std::uint8_t psh = 0x08;
inline constexpr std::uint8_t ack = 0x10;
inline constexpr std::uint8_t urg = 0x20;
inline constexpr std::uint8_t ece = 0x40;
inline constexpr std::uint8_t cwr = 0x80;
}  // namespace tcp_flags

struct TcpTimestamps {
  std::uint32_t value = 0;        // TSval
  std::uint32_t echo_reply = 0;   // TSecr
  friend bool operator==(const TcpTimestamps&, const TcpTimestamps&) = default;
};

// One block of a SACK option (RFC 2018 §3): data held from left up to right.
struct SackBlock {
  SeqNumber left;
  SeqNumber right;
  friend bool operator==(const SackBlock&, const SackBlock&) = default;
};

// The options understood; unknown kinds are skipped once their length is
// known to be sound.
struct TcpOptions {
  static constexpr std::size_t max_sack_blocks = 4;  // 2 + 8n option bytes within the 40

  std::optional<std::uint16_t> max_segment_size;
  std::optional<std::uint8_t> window_scale;  // as sent; RFC 7323 §2.3 has the receiver use 14 for larger
  bool sack_permitted = false;
  std::optional<TcpTimestamps> timestamps;
  // The SACK option's blocks, the first sack_block_count of them. Written
  // after the other options, as many as fit in the 40 option bytes.
  std::array<SackBlock, max_sack_blocks> sack_blocks{};
  std::uint8_t sack_block_count = 0;

  std::span<const SackBlock> sack() const { return std::span(sack_blocks).first(sack_block_count); }
  friend bool operator==(const TcpOptions&, const TcpOptions&) = default;
};

struct TcpHeader {
  std::uint16_t source_port = 0;
  std::uint16_t destination_port = 0;
  SeqNumber sequence;
  SeqNumber acknowledgment;
  std::uint8_t flags = 0;  // tcp_flags bits
  std::uint16_t window = 0;
  std::uint16_t urgent_pointer = 0;
  TcpOptions options;

  bool has(std::uint8_t flag) const { return (flags & flag) != 0; }
  friend bool operator==(const TcpHeader&, const TcpHeader&) = default;
};

struct TcpSegment {
  TcpHeader header;
  std::span<const std::uint8_t> payload;
};

// segment is the IP payload; the addresses enter the pseudo-header. Checks
// the fixed header is there, the data offset (5 up to the segment), the
// checksum, then the options: each length at least 2 and inside the header,
// and exactly 4 for MSS, 3 for window scale, 2 for SACK-permitted, 10 for
// timestamps, 2 + 8n (n ≥ 1) for SACK.
Result<TcpSegment> parse_tcp(std::span<const std::uint8_t> segment, Ipv4Address source, Ipv4Address destination);

// The header's length with its options: 20 plus the options padded to a
// multiple of 4.
std::size_t tcp_header_length(const TcpHeader& header);

// Writes the header and options with the checksum, then the payload (copied
// unless it already sits at out[tcp_header_length(header)]). Returns the
// segment length. Throws std::length_error if out is too small or the
// segment could not fit in an IPv4 packet.
std::size_t emit_tcp(const TcpHeader& header, Ipv4Address source, Ipv4Address destination,
                     std::span<const std::uint8_t> payload, std::span<std::uint8_t> out);
// The header and options alone, into out, with the checksum of the segment
// whose payload stays where it is (read, not copied): for a link that
// gathers a packet's pieces itself. Returns the header length. Throws
// std::length_error as emit_tcp for out too small for the header or a
// segment too long for an IPv4 packet.
std::size_t emit_tcp_header(const TcpHeader& header, Ipv4Address source, Ipv4Address destination,
                            std::span<const std::uint8_t> payload, std::span<std::uint8_t> out);

}  // namespace utcp::wire
