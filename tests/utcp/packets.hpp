// Test vectors and helpers shared by the wire tests.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "utcp/address.hpp"

namespace utcp::wire::test {

inline std::vector<std::uint8_t> from_hex(std::string_view hex) {
  std::vector<std::uint8_t> bytes;
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<std::uint8_t>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return bytes;
}

// Packets Linux 6.x wrote to a TUN device (10.9.0.1 is the kernel, 10.9.0.2
// the far end), checksums as the kernel computed them.
// connect() to 10.9.0.2:5001: SYN with MSS 1460, SACK-permitted, timestamps, window scale 10.
inline constexpr std::string_view linux_syn =
    "4500003c9b48400040068b5f0a0900010a090002c9b813893318049b00000000a002faf014970000020405b40402080a802a8f41000000"
    "000103030a";
// sendto("hello viastack") to 10.9.0.2:7 from port 36311.
inline constexpr std::string_view linux_udp =
    "4500002a6f2640004011b7880a0900010a0900028dd7000700166a3368656c6c6f20766961737461636b";
// Reply to an echo request (identifier 0x1234, sequence 1, data "viastack").
inline constexpr std::string_view linux_echo_reply =
    "45000024af6700004001b75d0a0900010a09000200003e2112340001766961737461636b";
// Port unreachable for a UDP datagram "probe" from 10.9.0.2:40000 to 10.9.0.1:9 (quoted whole).
inline constexpr std::string_view linux_port_unreachable =
    "45c0003daf6800004001b6830a0900010a09000203031130000000004500002101014000401125b70a0900020a0900019c400009000d0a"
    "a170726f6265";

inline constexpr Ipv4Address kernel = Ipv4Address::from_octets(10, 9, 0, 1);
inline constexpr Ipv4Address peer = Ipv4Address::from_octets(10, 9, 0, 2);

// RFC 1071 §4.1's algorithm, transcribed independently of the library: sum
// 16-bit words in 32 bits, add a final odd byte as a padded word, fold, invert.
inline std::uint16_t reference_checksum(std::span<const std::uint8_t> bytes) {
  std::uint64_t sum = 0;
  std::size_t count = bytes.size();
  const std::uint8_t* addr = bytes.data();
  while (count > 1) {
    sum += static_cast<std::uint32_t>(addr[0] << 8 | addr[1]);
    addr += 2;
    count -= 2;
  }
  if (count > 0) sum += static_cast<std::uint32_t>(addr[0] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

// The pseudo-header (RFC 9293 §3.1) as bytes, put in front of segment, for the reference checksum.
inline std::vector<std::uint8_t> with_pseudo_header(Ipv4Address source, Ipv4Address destination,
                                                    std::uint8_t protocol, std::span<const std::uint8_t> segment) {
  std::vector<std::uint8_t> bytes;
  for (const Ipv4Address address : {source, destination})
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(address.value >> shift));
  bytes.push_back(0);
  bytes.push_back(protocol);
  bytes.push_back(static_cast<std::uint8_t>(segment.size() >> 8));
  bytes.push_back(static_cast<std::uint8_t>(segment.size()));
  bytes.insert(bytes.end(), segment.begin(), segment.end());
  return bytes;
}

}  // namespace utcp::wire::test
