#include "utcp/ipv4.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "packets.hpp"
#include "utcp/checksum.hpp"

namespace utcp::wire {
namespace {

using test::from_hex;

// Rewrites the header checksum after a test changed a field, so that the
// parser gets past the checksum to the check under test.
void fix_header_checksum(std::vector<std::uint8_t>& packet) {
  const std::size_t header_length = std::min<std::size_t>((packet[0] & 0x0f) * 4u, packet.size());
  packet[10] = packet[11] = 0;
  const std::uint16_t checksum = internet_checksum(std::span(packet).first(header_length));
  packet[10] = static_cast<std::uint8_t>(checksum >> 8);
  packet[11] = static_cast<std::uint8_t>(checksum);
}

std::vector<std::uint8_t> build(const Ipv4Header& header, std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> packet(ipv4_min_header_length + payload.size());
  EXPECT_EQ(emit_ipv4(header, payload, packet), packet.size());
  return packet;
}

TEST(Ipv4, ParsesALinuxPacket) {
  const auto packet = from_hex(test::linux_syn);
  const auto parsed = parse_ipv4(packet);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(parsed->header.identification, 0x9b48);
  EXPECT_TRUE(parsed->header.dont_fragment);
  EXPECT_FALSE(parsed->header.more_fragments);
  EXPECT_EQ(parsed->header.fragment_offset, 0);
  EXPECT_EQ(parsed->header.time_to_live, 64);
  EXPECT_EQ(parsed->header.protocol, ip_protocol::tcp);
  EXPECT_EQ(parsed->header.source, test::kernel);
  EXPECT_EQ(parsed->header.destination, test::peer);
  EXPECT_TRUE(parsed->options.empty());
  EXPECT_EQ(parsed->payload.size(), 40u);
  EXPECT_EQ(parsed->payload.data(), packet.data() + 20);
}

TEST(Ipv4, EmitReproducesLinuxBytes) {
  for (const std::string_view hex : {test::linux_syn, test::linux_udp, test::linux_echo_reply,
                                     test::linux_port_unreachable}) {
    const auto packet = from_hex(hex);
    const auto parsed = parse_ipv4(packet);
    ASSERT_TRUE(parsed);
    EXPECT_EQ(build(parsed->header, parsed->payload), packet) << hex;
  }
}

TEST(Ipv4, RoundTripsEveryField) {
  Ipv4Header header;
  header.type_of_service = 0xb8;
  header.identification = 0xbeef;
  header.more_fragments = true;
  header.fragment_offset = 8189 * 8;  // the last offset at which a datagram can still end by 65535
  header.time_to_live = 1;
  header.protocol = ip_protocol::udp;
  header.source = Ipv4Address::from_octets(10, 0, 0, 1);
  header.destination = Ipv4Address::from_octets(10, 0, 255, 254);
  auto packet = build(header, {});
  auto parsed = parse_ipv4(packet);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(parsed->header, header);

  header.more_fragments = false;
  header.dont_fragment = true;
  header.fragment_offset = 0;
  const std::vector<std::uint8_t> data(1000, 0x5a);
  packet = build(header, data);
  parsed = parse_ipv4(packet);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->header, header);
  EXPECT_TRUE(std::equal(parsed->payload.begin(), parsed->payload.end(), data.begin(), data.end()));
}

TEST(Ipv4, EmitsAPayloadAlreadyInPlace) {
  std::vector<std::uint8_t> packet(28);
  for (std::size_t i = 20; i < 28; ++i) packet[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(emit_ipv4(Ipv4Header{}, std::span(packet).subspan(20), packet), 28u);
  const auto parsed = parse_ipv4(packet);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->payload[7], 27);
}

TEST(Ipv4, HeaderAloneMatchesTheWholePacket) {
  Ipv4Header header;
  header.identification = 0x1234;
  header.protocol = 6;
  std::vector<std::uint8_t> whole(20 + 300);
  EXPECT_EQ(emit_ipv4(header, std::vector<std::uint8_t>(300, 0xab), whole), whole.size());
  std::vector<std::uint8_t> alone(20);
  EXPECT_EQ(emit_ipv4_header(header, 300, alone), whole.size());
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), whole.begin()));
  EXPECT_THROW(emit_ipv4_header(header, 65516, alone), std::length_error);
  EXPECT_THROW(emit_ipv4_header(header, 0, std::span(alone).first(19)), std::length_error);
}

TEST(Ipv4, EmitRefusesWhatItCannotWrite) {
  std::vector<std::uint8_t> small(27);
  const std::vector<std::uint8_t> payload(8);
  EXPECT_THROW(emit_ipv4(Ipv4Header{}, payload, small), std::length_error);
  std::vector<std::uint8_t> huge(70000);
  EXPECT_THROW(emit_ipv4(Ipv4Header{}, std::span(huge).first(65516), huge), std::length_error);
  Ipv4Header unaligned;
  unaligned.fragment_offset = 12;
  EXPECT_THROW(emit_ipv4(unaligned, payload, huge), std::invalid_argument);
}

TEST(Ipv4, DropsLinkPaddingAfterTheTotalLength) {
  auto packet = from_hex(test::linux_udp);
  const std::size_t total = packet.size();
  packet.resize(total + 6, 0);  // Ethernet pads short frames
  const auto parsed = parse_ipv4(packet);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->payload.size(), total - 20);
}

TEST(Ipv4, TruncationAtEveryByteNamesTheField) {
  // A header with 8 option bytes, so that the IHL range is exercised too.
  auto packet = from_hex("4700002c00000000400100000a0000010a000002010101010101010008000000000000000000000000000000");
  packet[3] = static_cast<std::uint8_t>(packet.size());
  fix_header_checksum(packet);
  ASSERT_TRUE(parse_ipv4(packet));
  for (std::size_t length = 0; length < packet.size(); ++length) {
    const auto parsed = parse_ipv4(std::span(packet).first(length));
    ASSERT_FALSE(parsed) << length;
    const Error expected = length < 20 ? Error::truncated
                           : length < 28 ? Error::bad_header_length
                                         : Error::bad_total_length;
    EXPECT_EQ(parsed.error(), expected) << length;
  }
}

TEST(Ipv4, RejectsEachMalformedField) {
  const auto good = from_hex(test::linux_udp);
  const auto check = [&good](auto change, Error expected) {
    auto packet = good;
    change(packet);
    fix_header_checksum(packet);
    const auto parsed = parse_ipv4(packet);
    ASSERT_FALSE(parsed);
    EXPECT_EQ(parsed.error(), expected) << to_string(parsed.error());
  };
  check([](auto& p) { p[0] = 0x65; }, Error::bad_version);
  for (std::uint8_t ihl = 0; ihl < 5; ++ihl) check([ihl](auto& p) { p[0] = 0x40 | ihl; }, Error::bad_header_length);
  check([](auto& p) { p[0] = 0x4f; }, Error::bad_header_length);  // 60 bytes, past the 42 there are
  check([](auto& p) { p[2] = 0; p[3] = 19; }, Error::bad_header_length);
  check([](auto& p) { p[3] = static_cast<std::uint8_t>(p.size() + 1); }, Error::bad_total_length);
  check([](auto& p) { p[6] |= 0x80; }, Error::reserved_bit_set);
  check([](auto& p) { p[6] = 0x3f; p[7] = 0xff; }, Error::bad_fragment);        // 65528 + 22 > 65515
  check([](auto& p) { p[6] = 0x20; p[7] = 0x00; }, Error::bad_fragment);        // MF with 22 bytes
  auto corrupted = good;
  corrupted[15] ^= 1;
  const auto parsed = parse_ipv4(corrupted);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), Error::bad_checksum);
}

TEST(Ipv4, ChecksOptionsStayInsideTheHeader) {
  const auto with_options = [](std::string_view options_hex) {
    auto packet = from_hex("4000001800000000400100000a0000010a000002");
    const auto options = from_hex(options_hex);
    packet.insert(packet.end(), options.begin(), options.end());
    packet[0] = static_cast<std::uint8_t>(0x40 | packet.size() / 4);
    packet[3] = static_cast<std::uint8_t>(packet.size());
    fix_header_checksum(packet);
    return packet;
  };
  const auto error_of = [](const std::vector<std::uint8_t>& packet) {
    const auto parsed = parse_ipv4(packet);
    return parsed ? std::optional<Error>() : parsed.error();
  };
  EXPECT_EQ(error_of(with_options("01010100")), std::nullopt);          // NOPs, end of list
  EXPECT_EQ(error_of(with_options("00ffffff")), std::nullopt);          // after end of list: padding
  EXPECT_EQ(error_of(with_options("94040000")), std::nullopt);          // router alert (RFC 2113)
  EXPECT_EQ(error_of(with_options("01010107")), Error::option_truncated);  // no length byte
  EXPECT_EQ(error_of(with_options("07090000")), Error::option_truncated);  // runs past the header
  EXPECT_EQ(error_of(with_options("07010000")), Error::bad_option_length);
  EXPECT_EQ(error_of(with_options("07000000")), Error::bad_option_length);
}

}  // namespace
}  // namespace utcp::wire
