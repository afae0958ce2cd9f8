#include "utcp/checksum.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "packets.hpp"

namespace utcp::wire {
namespace {

using test::from_hex;

TEST(Checksum, Rfc1071Example) {
  // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (after folding the carry 2).
  const auto bytes = from_hex("0001f203f4f5f6f7");
  Checksum checksum;
  checksum.add(bytes);
  EXPECT_EQ(checksum.folded_sum(), 0xddf2);
  EXPECT_EQ(checksum.finish(), 0x220d);
}

TEST(Checksum, KnownIpv4Header) {
  // The header of Wikipedia's "IPv4 header checksum" example: b861.
  auto header = from_hex("450000730000400040110000c0a80001c0a800c7");
  EXPECT_EQ(internet_checksum(header), 0xb861);
  header[10] = 0xb8;
  header[11] = 0x61;
  EXPECT_EQ(internet_checksum(header), 0);
}

TEST(Checksum, OddLengthPadsWithZero) {
  EXPECT_EQ(internet_checksum(from_hex("abcdef")), internet_checksum(from_hex("abcdef00")));
  EXPECT_EQ(internet_checksum({}), 0xffff);
}

// add_copy must be add plus a copy, whatever the alignment of either buffer,
// the length, and whether an odd byte came before; and write nothing else.
TEST(Checksum, AddCopyEqualsAddAndCopiesExactly) {
  constexpr std::size_t max_length = 2000, guard = 16;
  std::mt19937 random(1624);
  std::vector<std::uint8_t> source(max_length + 8);
  for (auto& byte : source) byte = static_cast<std::uint8_t>(random());
  std::vector<std::uint8_t> destination(max_length + 8 + 2 * guard);
  for (std::size_t source_offset = 0; source_offset < 8; ++source_offset) {
    for (std::size_t destination_offset = 0; destination_offset < 8; destination_offset += 3) {
      for (std::size_t length = 0; length <= max_length; ++length) {
        for (const bool odd_before : {false, true}) {
          const std::span<const std::uint8_t> bytes(source.data() + source_offset, length);
          std::fill(destination.begin(), destination.end(), std::uint8_t{0xa5});
          std::uint8_t* to = destination.data() + guard + destination_offset;
          Checksum plain, copying;
          if (odd_before) {
            plain.add(std::span(source).first(1));
            copying.add(std::span(source).first(1));
          }
          plain.add(bytes);
          copying.add_copy(bytes, to);
          ASSERT_EQ(copying.folded_sum(), plain.folded_sum())
              << "source offset " << source_offset << ", destination offset " << destination_offset << ", length "
              << length << (odd_before ? ", after an odd byte" : "");
          ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), to)) << "length " << length;
          ASSERT_TRUE(std::all_of(destination.data(), to, [](std::uint8_t b) { return b == 0xa5; }));
          ASSERT_TRUE(std::all_of(to + length, destination.data() + destination.size(),
                                  [](std::uint8_t b) { return b == 0xa5; }));
          // Both go on alike: a later piece sums the same after either.
          plain.add(std::span(source).first(3));
          copying.add(std::span(source).first(3));
          ASSERT_EQ(copying.folded_sum(), plain.folded_sum());
        }
      }
    }
  }
}

TEST(Checksum, MatchesReferenceOverEverySplit) {
  std::mt19937 random(1071);
  for (std::size_t length = 0; length < 70; ++length) {
    std::vector<std::uint8_t> bytes(length);
    for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random());
    const std::uint16_t expected = test::reference_checksum(bytes);
    EXPECT_EQ(internet_checksum(bytes), expected) << "length " << length;
    for (std::size_t first = 0; first <= length; ++first) {
      for (std::size_t second = first; second <= length; ++second) {
        Checksum pieces;
        const std::span<const std::uint8_t> all(bytes);
        pieces.add(all.subspan(0, first));
        pieces.add(all.subspan(first, second - first));
        pieces.add(all.subspan(second));
        ASSERT_EQ(pieces.finish(), expected) << "length " << length << " split " << first << "," << second;
      }
    }
  }
}

// Long buffers, where the bulk of the sum is taken eight bytes at a time:
// all ones (the most carries) and random bytes, whole and in odd pieces.
TEST(Checksum, MatchesReferenceOverLongBuffers) {
  std::mt19937 random(1624);
  for (const std::size_t length : {65535u, 65536u, 9000u, 1u << 20}) {
    for (const bool ones : {true, false}) {
      std::vector<std::uint8_t> bytes(length, 0xff);
      if (!ones)
        for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random());
      const std::uint16_t expected = test::reference_checksum(bytes);
      EXPECT_EQ(internet_checksum(bytes), expected) << "length " << length;
      Checksum pieces;
      const std::span<const std::uint8_t> all(bytes);
      for (std::size_t at = 0; at < length;) {
        const std::size_t piece = std::min<std::size_t>(length - at, 1 + random() % 3001);
        pieces.add(all.subspan(at, piece));
        at += piece;
      }
      EXPECT_EQ(pieces.finish(), expected) << "length " << length << " in pieces";
    }
  }
}

TEST(Checksum, WordsAfterAnOddPieceKeepTheirPlace) {
  Checksum words;
  words.add(from_hex("11"));
  words.add_u16(0x2233);
  words.add_u32(0x44556677);
  EXPECT_EQ(words.finish(), internet_checksum(from_hex("11223344556677")));
}

TEST(Checksum, IncrementalUpdateMatchesRecomputation) {
  // RFC 1624 §4's example, then random words: the update equals summing again.
  EXPECT_EQ(update_checksum(0xdd2f, 0x5555, 0x3285), 0x0000);
  std::mt19937 random(1624);
  for (int trial = 0; trial < 10000; ++trial) {
    std::vector<std::uint8_t> bytes(20);
    for (auto& byte : bytes) byte = static_cast<std::uint8_t>(random());
    const std::uint16_t before = internet_checksum(bytes);
    const std::size_t word = random() % 10 * 2;
    const auto old_word = static_cast<std::uint16_t>(bytes[word] << 8 | bytes[word + 1]);
    const auto new_word = static_cast<std::uint16_t>(random());
    bytes[word] = static_cast<std::uint8_t>(new_word >> 8);
    bytes[word + 1] = static_cast<std::uint8_t>(new_word);
    // Both are ones' complement sums; they may differ only as +0 (ffff) and -0 (0000).
    const std::uint16_t updated = update_checksum(before, old_word, new_word);
    const std::uint16_t recomputed = internet_checksum(bytes);
    ASSERT_TRUE(updated == recomputed || (updated | recomputed) == 0xffff) << updated << " vs " << recomputed;
  }
}

TEST(Checksum, PseudoHeaderOfALinuxSegment) {
  const auto packet = from_hex(test::linux_syn);
  const std::span<const std::uint8_t> segment = std::span(packet).subspan(20);
  Checksum checksum = pseudo_header_checksum(test::kernel, test::peer, 6, static_cast<std::uint16_t>(segment.size()));
  checksum.add(segment);
  EXPECT_EQ(checksum.finish(), 0);
  EXPECT_EQ(test::reference_checksum(test::with_pseudo_header(test::kernel, test::peer, 6, segment)), 0);
}

TEST(Ipv4Address, Text) {
  EXPECT_EQ(Ipv4Address::from_octets(10, 9, 0, 255).to_string(), "10.9.0.255");
  EXPECT_EQ(Ipv4Address::from_octets(10, 9, 0, 1).value, 0x0a090001u);
}

}  // namespace
}  // namespace utcp::wire
