#include "utcp/tcp_header.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "packets.hpp"
#include "utcp/checksum.hpp"

namespace utcp::wire {
namespace {

using test::from_hex;

std::vector<std::uint8_t> segment_of(std::string_view packet_hex) { return from_hex(packet_hex.substr(40)); }

std::vector<std::uint8_t> build(const TcpHeader& header, std::span<const std::uint8_t> payload = {}) {
  std::vector<std::uint8_t> segment(tcp_header_length(header) + payload.size());
  EXPECT_EQ(emit_tcp(header, test::kernel, test::peer, payload, segment), segment.size());
  return segment;
}

void fix_checksum(std::vector<std::uint8_t>& segment) {
  segment[16] = segment[17] = 0;
  const std::uint16_t checksum =
      test::reference_checksum(test::with_pseudo_header(test::kernel, test::peer, 6, segment));
  segment[16] = static_cast<std::uint8_t>(checksum >> 8);
  segment[17] = static_cast<std::uint8_t>(checksum);
}

std::optional<Error> error_of(const std::vector<std::uint8_t>& segment) {
  const auto parsed = parse_tcp(segment, test::kernel, test::peer);
  return parsed ? std::optional<Error>() : parsed.error();
}

// A segment with the given option bytes (a multiple of 4) and a fixed checksum.
std::vector<std::uint8_t> with_options(std::string_view options_hex) {
  auto segment = from_hex("c9b813893318049b00000000a002faf000000000");
  const auto options = from_hex(options_hex);
  segment.insert(segment.end(), options.begin(), options.end());
  segment[12] = static_cast<std::uint8_t>(segment.size() / 4 << 4);
  fix_checksum(segment);
  return segment;
}

TEST(Tcp, ParsesLinuxSyn) {
  const auto segment = segment_of(test::linux_syn);
  const auto parsed = parse_tcp(segment, test::kernel, test::peer);
  ASSERT_TRUE(parsed) << to_string(parsed.error());
  const TcpHeader& header = parsed->header;
  EXPECT_EQ(header.source_port, 0xc9b8);
  EXPECT_EQ(header.destination_port, 5001);
  EXPECT_EQ(header.sequence, SeqNumber(0x3318049b));
  EXPECT_EQ(header.flags, tcp_flags::syn);
  EXPECT_TRUE(header.has(tcp_flags::syn));
  EXPECT_FALSE(header.has(tcp_flags::ack));
  EXPECT_EQ(header.window, 64240);
  EXPECT_EQ(header.options.max_segment_size, 1460);
  EXPECT_TRUE(header.options.sack_permitted);
  EXPECT_EQ(header.options.timestamps, (TcpTimestamps{0x802a8f41, 0}));
  EXPECT_EQ(header.options.window_scale, 10);
  EXPECT_TRUE(parsed->payload.empty());
}

TEST(Tcp, EmitReproducesLinuxSyn) {
  const auto segment = segment_of(test::linux_syn);
  const auto parsed = parse_tcp(segment, test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(build(parsed->header), segment);
}

TEST(Tcp, RoundTripsEveryOptionCombination) {
  std::mt19937 random(9293);
  for (int combination = 0; combination < 16; ++combination) {
    TcpHeader header;
    header.source_port = 1;
    header.destination_port = 65535;
    header.sequence = SeqNumber(0xffffffff);
    header.acknowledgment = SeqNumber(0x80000000);
    header.flags = static_cast<std::uint8_t>(random());
    header.window = 0xabcd;
    header.urgent_pointer = 0x1234;
    if (combination & 1) header.options.max_segment_size = 8960;
    if (combination & 2) header.options.window_scale = 14;
    if (combination & 4) header.options.sack_permitted = true;
    if (combination & 8) header.options.timestamps = TcpTimestamps{0xdeadbeef, 0x01020304};
    const std::vector<std::uint8_t> payload = {'a', 'b', 'c'};
    const auto segment = build(header, payload);
    EXPECT_EQ((segment[12] >> 4) * 4u, tcp_header_length(header)) << combination;
    EXPECT_EQ(tcp_header_length(header) % 4, 0u);
    const auto parsed = parse_tcp(segment, test::kernel, test::peer);
    ASSERT_TRUE(parsed) << combination << ": " << to_string(parsed.error());
    EXPECT_EQ(parsed->header, header) << combination;
    EXPECT_TRUE(std::equal(parsed->payload.begin(), parsed->payload.end(), payload.begin(), payload.end()));
  }
}

TEST(Tcp, OptionsArePaddedWithEndOfList) {
  TcpHeader header;
  header.options.sack_permitted = true;  // 2 bytes, padded to 4
  const auto segment = build(header);
  EXPECT_EQ(segment.size(), 24u);
  EXPECT_EQ(segment[20], 4);
  EXPECT_EQ(segment[21], 2);
  EXPECT_EQ(segment[22], 0);
  EXPECT_EQ(segment[23], 0);
}

TEST(Tcp, ChecksumMatchesTheReference) {
  TcpHeader header;
  header.flags = tcp_flags::ack | tcp_flags::psh;
  std::vector<std::uint8_t> payload(1001);
  std::mt19937 random(7);
  for (auto& byte : payload) byte = static_cast<std::uint8_t>(random());
  auto segment = build(header, payload);
  const auto sent = static_cast<std::uint16_t>(segment[16] << 8 | segment[17]);
  fix_checksum(segment);
  EXPECT_EQ(static_cast<std::uint16_t>(segment[16] << 8 | segment[17]), sent);
}

// The header alone, for a payload the link gathers from elsewhere: the same
// bytes emit_tcp writes in front of the payload, the checksum included.
TEST(Tcp, HeaderAloneMatchesTheWholeSegment) {
  TcpHeader header;
  header.flags = tcp_flags::ack;
  header.sequence = SeqNumber(123456789);
  header.options.timestamps = TcpTimestamps{7, 9};
  std::mt19937 random(11);
  for (const std::size_t length : {std::size_t{1}, std::size_t{2}, std::size_t{1001}, std::size_t{8948}}) {
    std::vector<std::uint8_t> payload(length);
    for (auto& byte : payload) byte = static_cast<std::uint8_t>(random());
    const auto whole = build(header, payload);
    std::vector<std::uint8_t> alone(tcp_max_header_length);
    const std::size_t header_length = emit_tcp_header(header, test::kernel, test::peer, payload, alone);
    ASSERT_EQ(header_length, tcp_header_length(header));
    EXPECT_TRUE(std::equal(alone.begin(), alone.begin() + static_cast<std::ptrdiff_t>(header_length), whole.begin()))
        << length;
  }
}

TEST(Tcp, ReadsSackBlocks) {
  const auto parsed = parse_tcp(with_options("0101051200000001000000020000000300000004"), test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  const auto blocks = parsed->header.options.sack();
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0], (SackBlock{SeqNumber(1), SeqNumber(2)}));
  EXPECT_EQ(blocks[1], (SackBlock{SeqNumber(3), SeqNumber(4)}));
}

// Blocks are written after the other options, two no-operations in front
// (RFC 2018 §3), as many as fit in 40 bytes: four alone, three beside
// timestamps; they read back the same.
TEST(Tcp, SackBlocksRoundTripAsManyAsFit) {
  TcpHeader header;
  header.flags = tcp_flags::ack;
  for (std::uint32_t i = 0; i < 4; ++i)
    header.options.sack_blocks[i] = SackBlock{SeqNumber(1000 * i + 1), SeqNumber(1000 * i + 500)};
  header.options.sack_block_count = 4;
  auto segment = build(header);
  EXPECT_EQ(segment.size(), 20u + 4 + 32);
  auto parsed = parse_tcp(segment, test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->header.options, header.options);

  header.options.timestamps = TcpTimestamps{7, 8};
  segment = build(header);
  EXPECT_EQ(segment.size(), 60u);
  parsed = parse_tcp(segment, test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->header.options.sack().size(), 3u);
  EXPECT_EQ(parsed->header.options.sack()[2], header.options.sack_blocks[2]);
  EXPECT_EQ(parsed->header.options.timestamps, header.options.timestamps);
}

TEST(Tcp, AcceptsSackBlocksAndSkipsUnknownOptions) {
  EXPECT_EQ(error_of(with_options("0101050a0000000100000002")), std::nullopt);  // one SACK block
  EXPECT_EQ(error_of(with_options("0101052200000001000000020000000300000004000000050000000600000007"
                                  "00000008")),
            std::nullopt);  // four blocks: 34 bytes
  EXPECT_EQ(error_of(with_options("fe04abcd")), std::nullopt);          // experimental (RFC 6994)
  EXPECT_EQ(error_of(with_options("00ffffff")), std::nullopt);          // after end of list: padding
  const auto parsed = parse_tcp(with_options("01010402fe04abcd020405b4"), test::kernel, test::peer);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->header.options.sack_permitted);
  EXPECT_EQ(parsed->header.options.max_segment_size, 1460);
}

TEST(Tcp, RejectsMalformedOptionLengths) {
  EXPECT_EQ(error_of(with_options("01010102")), Error::option_truncated);   // MSS with no length byte
  EXPECT_EQ(error_of(with_options("02080000")), Error::option_truncated);   // runs past the header
  EXPECT_EQ(error_of(with_options("fe010000")), Error::bad_option_length);  // length 1
  EXPECT_EQ(error_of(with_options("fe000000")), Error::bad_option_length);  // length 0
  EXPECT_EQ(error_of(with_options("02030500")), Error::bad_option_length);  // MSS must be 4
  EXPECT_EQ(error_of(with_options("0205050000000000")), Error::bad_option_length);
  EXPECT_EQ(error_of(with_options("03020000")), Error::bad_option_length);  // window scale must be 3
  EXPECT_EQ(error_of(with_options("03040a00")), Error::bad_option_length);
  EXPECT_EQ(error_of(with_options("04030000")), Error::bad_option_length);  // SACK-permitted must be 2
  EXPECT_EQ(error_of(with_options("080800000000000000000000")), Error::bad_option_length);  // timestamps 10
  EXPECT_EQ(error_of(with_options("01010502")), Error::bad_option_length);  // SACK with no block
  EXPECT_EQ(error_of(with_options("0101050a00000000")), Error::option_truncated);  // SACK: a block is cut off
  EXPECT_EQ(error_of(with_options("01010509000000000000000000000000")), Error::bad_option_length);  // 7 bytes of block
}

TEST(Tcp, TruncationAtEveryByteAndDataOffset) {
  const auto segment = segment_of(test::linux_syn);  // data offset 10 = 40 bytes, no payload
  for (std::size_t length = 0; length < segment.size(); ++length) {
    std::vector<std::uint8_t> cut(segment.begin(), segment.begin() + static_cast<std::ptrdiff_t>(length));
    if (length >= 20) fix_checksum(cut);
    const auto parsed = parse_tcp(cut, test::kernel, test::peer);
    ASSERT_FALSE(parsed) << length;
    EXPECT_EQ(parsed.error(), length < 20 ? Error::truncated : Error::bad_data_offset) << length;
  }
  for (std::uint8_t offset = 0; offset < 5; ++offset) {
    auto changed = segment;
    changed[12] = static_cast<std::uint8_t>(offset << 4);
    fix_checksum(changed);
    EXPECT_EQ(error_of(changed), Error::bad_data_offset) << int(offset);
  }
}

TEST(Tcp, RejectsBadChecksumAtEveryBit) {
  const auto segment = segment_of(test::linux_syn);
  for (std::size_t bit = 0; bit < segment.size() * 8; ++bit) {
    auto changed = segment;
    changed[bit / 8] ^= static_cast<std::uint8_t>(1u << bit % 8);
    const auto error = error_of(changed);
    ASSERT_TRUE(error) << bit;
    // Changing the data offset can make the header run past the segment, found before the checksum.
    if (bit / 8 != 12) {
      EXPECT_EQ(*error, Error::bad_checksum) << bit;
    }
  }
  EXPECT_EQ(error_of(segment), std::nullopt);
  EXPECT_FALSE(parse_tcp(segment, test::kernel, Ipv4Address::from_octets(10, 9, 0, 3)));
}

TEST(Tcp, EmitRefusesWhatItCannotWrite) {
  TcpHeader header;
  header.options.timestamps = TcpTimestamps{};
  std::vector<std::uint8_t> out(31);
  EXPECT_THROW(emit_tcp(header, test::kernel, test::peer, {}, out), std::length_error);
  std::vector<std::uint8_t> huge(70000);
  EXPECT_THROW(emit_tcp({}, test::kernel, test::peer, std::span(huge).first(65496), huge), std::length_error);
  EXPECT_THROW(emit_tcp_header(header, test::kernel, test::peer, {}, out), std::length_error);
  EXPECT_THROW(emit_tcp_header({}, test::kernel, test::peer, std::span(huge).first(65496), huge), std::length_error);
}

}  // namespace
}  // namespace utcp::wire
