#include "utcp/udp.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "packets.hpp"

namespace utcp::wire {
namespace {

using test::from_hex;

std::vector<std::uint8_t> udp_of(std::string_view packet_hex) { return from_hex(packet_hex.substr(40)); }

std::vector<std::uint8_t> build(const UdpHeader& header, std::span<const std::uint8_t> payload,
                                Ipv4Address source = test::kernel, Ipv4Address destination = test::peer) {
  std::vector<std::uint8_t> datagram(udp_header_length + payload.size());
  EXPECT_EQ(emit_udp(header, source, destination, payload, datagram), datagram.size());
  return datagram;
}

TEST(Udp, ParsesAndReproducesLinuxDatagram) {
  const auto datagram = udp_of(test::linux_udp);
  const auto parsed = parse_udp(datagram, test::kernel, test::peer);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  EXPECT_EQ(parsed->header, (UdpHeader{36311, 7}));
  EXPECT_TRUE(parsed->checksummed);
  EXPECT_EQ(std::string(parsed->payload.begin(), parsed->payload.end()), "hello viastack");
  EXPECT_EQ(build(parsed->header, parsed->payload), datagram);
}

TEST(Udp, ChecksumMatchesTheReferenceAndCoversTheAddresses) {
  std::mt19937 random(768);
  for (std::size_t length = 0; length < 40; ++length) {
    std::vector<std::uint8_t> payload(length);
    for (auto& byte : payload) byte = static_cast<std::uint8_t>(random());
    const auto datagram = build({1234, 53}, payload);
    const std::uint16_t sent = static_cast<std::uint16_t>(datagram[6] << 8 | datagram[7]);
    auto zeroed = datagram;
    zeroed[6] = zeroed[7] = 0;
    const std::uint16_t expected = test::reference_checksum(test::with_pseudo_header(test::kernel, test::peer, 17, zeroed));
    EXPECT_EQ(sent, expected == 0 ? 0xffff : expected);
    const auto parsed = parse_udp(datagram, test::kernel, test::peer);
    ASSERT_TRUE(parsed);
    EXPECT_TRUE(std::equal(parsed->payload.begin(), parsed->payload.end(), payload.begin(), payload.end()));
    const auto misaddressed = parse_udp(datagram, test::kernel, Ipv4Address::from_octets(10, 9, 0, 3));
    ASSERT_FALSE(misaddressed);
    EXPECT_EQ(misaddressed.error(), Error::bad_checksum);
  }
}

TEST(Udp, ComputedZeroIsSentAsAllOnes) {
  // RFC 768: a checksum that computes to zero goes out as ffff. Find a
  // payload word that makes the sum come out so.
  auto datagram = build({1, 2}, std::vector<std::uint8_t>(2, 0));
  const std::uint16_t with_zero_word = static_cast<std::uint16_t>(datagram[6] << 8 | datagram[7]);
  const std::uint8_t word[2] = {static_cast<std::uint8_t>(with_zero_word >> 8), static_cast<std::uint8_t>(with_zero_word)};
  datagram = build({1, 2}, word);
  EXPECT_EQ(datagram[6], 0xff);
  EXPECT_EQ(datagram[7], 0xff);
  EXPECT_TRUE(parse_udp(datagram, test::kernel, test::peer));
}

TEST(Udp, ZeroChecksumMeansNone) {
  auto datagram = udp_of(test::linux_udp);
  datagram[6] = datagram[7] = 0;
  datagram[10] ^= 0xff;  // would fail any checksum
  const auto parsed = parse_udp(datagram, test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  EXPECT_FALSE(parsed->checksummed);
}

TEST(Udp, TruncationAndLengthField) {
  const auto datagram = udp_of(test::linux_udp);
  for (std::size_t length = 0; length < datagram.size(); ++length) {
    const auto parsed = parse_udp(std::span(datagram).first(length), test::kernel, test::peer);
    ASSERT_FALSE(parsed) << length;
    EXPECT_EQ(parsed.error(), length < 8 ? Error::truncated : Error::bad_length) << length;
  }
  for (const std::uint8_t bad_length : {0, 7}) {
    auto changed = datagram;
    changed[5] = bad_length;
    changed[6] = changed[7] = 0;
    const auto parsed = parse_udp(changed, test::kernel, test::peer);
    ASSERT_FALSE(parsed);
    EXPECT_EQ(parsed.error(), Error::bad_length);
  }
  auto corrupted = datagram;
  corrupted.back() ^= 1;
  const auto parsed = parse_udp(corrupted, test::kernel, test::peer);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), Error::bad_checksum);
}

TEST(Udp, BytesAfterTheLengthAreNotPayload) {
  auto datagram = udp_of(test::linux_udp);
  datagram.push_back(0xee);
  const auto parsed = parse_udp(datagram, test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->payload.size(), 14u);
}

TEST(Udp, EmitRefusesWhatItCannotWrite) {
  std::vector<std::uint8_t> out(70000);
  EXPECT_THROW(emit_udp({}, test::kernel, test::peer, std::span(out).first(65528), out), std::length_error);
  EXPECT_THROW(emit_udp({}, test::kernel, test::peer, std::span(out).first(10), std::span(out).first(17)),
               std::length_error);
}

}  // namespace
}  // namespace utcp::wire
