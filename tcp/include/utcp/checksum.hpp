// The Internet checksum (RFC 1071): the ones' complement of the ones'
// complement sum of the data taken as big-endian 16-bit words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "utcp/address.hpp"

namespace utcp::wire {

// Accumulates the sum over any number of pieces; the result is the same as
// over their concatenation, however the pieces split it (odd lengths too).
class Checksum {
 public:
  void add(std::span<const std::uint8_t> bytes);
  // Copies bytes to `to` (bytes.size() of them, not overlapping) and adds
  // them, in one pass over the data: what a segment's payload costs when it
  // is copied into the packet anyway.
  void add_copy(std::span<const std::uint8_t> bytes, std::uint8_t* to);
  void add_u16(std::uint16_t word);
  void add_u32(std::uint32_t word);
  // The 16-bit ones' complement sum so far, carries folded in (RFC 1071 §4.1).
  std::uint16_t folded_sum() const;
  // The value to store in a checksum field; a receiver that sums data with
  // its checksum field in place gets 0 when it verifies.
  std::uint16_t finish() const { return static_cast<std::uint16_t>(~folded_sum()); }

 private:
  void sum(std::span<const std::uint8_t> bytes, std::uint8_t* to);

  std::uint64_t sum_ = 0;
  bool odd_ = false;  // the next byte is the low half of a word
};

// The checksum of one buffer.
std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes);

// A sum started with the pseudo-header UDP (RFC 768) and TCP (RFC 9293
// §3.1) put in front of their segment: source, destination, zero, protocol,
// and the transport length.
Checksum pseudo_header_checksum(Ipv4Address source, Ipv4Address destination, std::uint8_t protocol,
                                std::uint16_t transport_length);

// RFC 1071 §2(4) incremental update, in the form of RFC 1624 eqn. 3
// (HC' = ~(~HC + ~m + m')): the checksum after one 16-bit word of the
// covered data changes from old_word to new_word, without summing it all again.
std::uint16_t update_checksum(std::uint16_t checksum, std::uint16_t old_word, std::uint16_t new_word);

}  // namespace utcp::wire
