#include "utcp/icmp.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "packets.hpp"
#include "utcp/checksum.hpp"

namespace utcp::wire {
namespace {

using test::from_hex;

std::vector<std::uint8_t> icmp_of(std::string_view packet_hex) { return from_hex(packet_hex.substr(40)); }

std::vector<std::uint8_t> build(const IcmpHeader& header, std::span<const std::uint8_t> data) {
  std::vector<std::uint8_t> message(icmp_header_length + data.size());
  EXPECT_EQ(emit_icmp(header, data, message), message.size());
  return message;
}

void fix_checksum(std::vector<std::uint8_t>& message) {
  message[2] = message[3] = 0;
  const std::uint16_t checksum = internet_checksum(message);
  message[2] = static_cast<std::uint8_t>(checksum >> 8);
  message[3] = static_cast<std::uint8_t>(checksum);
}

TEST(Icmp, ParsesLinuxEchoReply) {
  const auto message = icmp_of(test::linux_echo_reply);
  const auto parsed = parse_icmp(message);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(std::get<IcmpEcho>(parsed->header), (IcmpEcho{true, 0x1234, 1}));
  EXPECT_EQ(std::string(parsed->data.begin(), parsed->data.end()), "viastack");
  EXPECT_EQ(build(parsed->header, parsed->data), message);
}

TEST(Icmp, ParsesLinuxPortUnreachable) {
  const auto message = icmp_of(test::linux_port_unreachable);
  const auto parsed = parse_icmp(message);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(std::get<IcmpDestinationUnreachable>(parsed->header).code, unreachable_code::port);
  const auto quoted = parse_quoted_datagram(parsed->data);
  ASSERT_TRUE(quoted);
  EXPECT_EQ(quoted->header.source, test::peer);
  EXPECT_EQ(quoted->header.destination, test::kernel);
  EXPECT_EQ(quoted->header.protocol, ip_protocol::udp);
  EXPECT_EQ(quoted->payload_start[0] << 8 | quoted->payload_start[1], 40000);  // the source port
  EXPECT_EQ(build(parsed->header, parsed->data), message);
}

TEST(Icmp, RoundTripsEchoRequestAndFragmentationNeeded) {
  const std::vector<std::uint8_t> data = {1, 2, 3};
  const IcmpHeader request = IcmpEcho{false, 7, 65535};
  auto message = build(request, data);
  EXPECT_EQ(message[0], 8);
  auto parsed = parse_icmp(message);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->header, request);

  const auto offending = from_hex(test::linux_syn);
  const IcmpHeader too_big = IcmpDestinationUnreachable{unreachable_code::fragmentation_needed, 1500};
  message = build(too_big, icmp_error_quote(offending));
  parsed = parse_icmp(message);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(parsed->header, too_big);
  EXPECT_EQ(parsed->data.size(), 28u);
  // The MTU field is defined for code 4 only; other codes send zero there.
  message = build(IcmpDestinationUnreachable{unreachable_code::port, 1500}, icmp_error_quote(offending));
  EXPECT_EQ(message[6] | message[7], 0);
}

// Time exceeded (type 11), code 1: fragment reassembly time exceeded (RFC
// 792), which a host sends when it gives up reassembling a datagram.
TEST(Icmp, RoundTripsTimeExceeded) {
  const auto offending = from_hex(test::linux_syn);
  const IcmpHeader reassembly = IcmpTimeExceeded{time_exceeded_code::reassembly};
  const auto message = build(reassembly, icmp_error_quote(offending));
  EXPECT_EQ(message[0], 11);
  EXPECT_EQ(message[1], 1);
  EXPECT_EQ(message[4] | message[5] | message[6] | message[7], 0);
  const auto parsed = parse_icmp(message);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(parsed->header, reassembly);
  EXPECT_EQ(parsed->data.size(), 28u);
}

TEST(Icmp, QuoteIsTheHeaderAndEightBytes) {
  const auto packet = from_hex(test::linux_syn);
  const auto quote = icmp_error_quote(packet);
  EXPECT_EQ(quote.size(), 28u);
  EXPECT_EQ(quote.data(), packet.data());
  const std::vector<std::uint8_t> short_packet(packet.begin(), packet.begin() + 24);
  EXPECT_EQ(icmp_error_quote(short_packet).size(), 24u);
  EXPECT_TRUE(icmp_error_quote({}).empty());
}

TEST(Icmp, TruncationAtEveryByte) {
  const auto message = icmp_of(test::linux_port_unreachable);
  for (std::size_t length = 0; length < message.size(); ++length) {
    std::vector<std::uint8_t> cut(message.begin(), message.begin() + static_cast<std::ptrdiff_t>(length));
    if (length >= icmp_header_length) fix_checksum(cut);
    const auto parsed = parse_icmp(cut);
    const bool quote_complete = length >= icmp_header_length + 28;
    if (quote_complete) {
      EXPECT_TRUE(parsed) << length;
      continue;
    }
    ASSERT_FALSE(parsed) << length;
    EXPECT_EQ(parsed.error(), length < icmp_header_length ? Error::truncated : Error::bad_quoted_datagram) << length;
  }
}

TEST(Icmp, RejectsEachMalformedField) {
  const auto error_of = [](std::vector<std::uint8_t> message, bool fix) {
    if (fix) fix_checksum(message);
    const auto parsed = parse_icmp(message);
    return parsed ? std::optional<Error>() : parsed.error();
  };
  auto echo = icmp_of(test::linux_echo_reply);
  auto unreachable = icmp_of(test::linux_port_unreachable);

  auto changed = echo;
  changed[9] ^= 0x40;
  EXPECT_EQ(error_of(changed, false), Error::bad_checksum);
  changed = echo;
  changed[1] = 1;
  EXPECT_EQ(error_of(changed, true), Error::bad_icmp_code);
  changed = unreachable;
  changed[1] = 16;
  EXPECT_EQ(error_of(changed, true), Error::bad_icmp_code);
  changed = unreachable;
  changed[0] = 11;  // time exceeded: codes 0 and 1
  changed[1] = 2;
  EXPECT_EQ(error_of(changed, true), Error::bad_icmp_code);
  changed[1] = 1;
  EXPECT_EQ(error_of(changed, true), std::nullopt);
  changed = echo;
  changed[0] = 11;  // its data is no quote
  EXPECT_EQ(error_of(changed, true), Error::bad_quoted_datagram);
  for (const std::uint8_t type : {4, 5, 12, 13, 255}) {
    changed = echo;
    changed[0] = type;
    EXPECT_EQ(error_of(changed, true), Error::unsupported_icmp_type) << int(type);
  }
  changed = unreachable;
  changed[8] = 0x65;  // the quote is not IPv4
  EXPECT_EQ(error_of(changed, true), Error::bad_quoted_datagram);
  changed = unreachable;
  changed[8] = 0x44;  // its IHL is below 5
  EXPECT_EQ(error_of(changed, true), Error::bad_quoted_datagram);
  changed = unreachable;
  changed[8] = 0x47;  // its header (28 bytes) leaves fewer than 8 bytes of the 25 quoted
  EXPECT_EQ(error_of(changed, true), Error::bad_quoted_datagram);
}

TEST(Icmp, EmitRefusesASmallBuffer) {
  std::vector<std::uint8_t> out(10);
  const std::vector<std::uint8_t> data(3);
  EXPECT_THROW(emit_icmp(IcmpEcho{}, data, out), std::length_error);
}

}  // namespace
}  // namespace utcp::wire
