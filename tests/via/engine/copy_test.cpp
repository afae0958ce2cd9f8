// via::copy_memory (via/copy.hpp): the same bytes as memcpy, whatever the
// length and however the two ends sit within a cache line, and not one byte
// outside the destination.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "via/copy.hpp"

namespace {

TEST(CopyMemory, CopiesEveryLengthAtEveryRelativeOffsetAndNothingElse) {
  const std::size_t limit = via::detail::string_move_limit();
  const std::size_t lengths[] = {0, 1, 63, 64, 65, 2047, 2048, 2049, 4099, 32768 + 17, limit - 1, limit + 5};
  constexpr std::size_t kSlack = 128;
  std::vector<std::byte> source(limit + 5 + kSlack), destination(limit + 5 + 64 + 2 * kSlack);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = std::byte(i * 131 + 7);
  for (std::size_t n : lengths) {
    for (std::size_t from : {std::size_t(0), std::size_t(1), std::size_t(16), std::size_t(40)}) {
      for (std::size_t to = 0; to < 64; to += 3) {
        std::fill(destination.begin(), destination.end(), std::byte{0xEE});
        via::copy_memory(destination.data() + kSlack + to, source.data() + from, n);
        const std::byte* copied = destination.data() + kSlack + to;
        ASSERT_EQ(std::memcmp(copied, source.data() + from, n), 0) << n << " bytes from offset " << from << " to " << to;
        for (std::size_t i = 1; i <= kSlack; ++i) {
          ASSERT_EQ(copied[-std::ptrdiff_t(i)], std::byte{0xEE}) << n << " bytes to offset " << to << ": before it";
          ASSERT_EQ(copied[n + i - 1], std::byte{0xEE}) << n << " bytes to offset " << to << ": after it";
        }
      }
    }
  }
}

// The slow case, and only it, goes in pieces: the destination 1-31 bytes
// further into its line than the source into its own, 2 KiB to the L2 size.
TEST(CopyMemory, OnlyTheSlowCaseGoesInPieces) {
  alignas(64) static std::byte line[4][64];
  const std::size_t limit = via::detail::string_move_limit();
  auto pieces = [&](std::size_t dst_offset, std::size_t src_offset, std::size_t n) {
    return via::detail::copy_in_pieces(&line[0][dst_offset], &line[2][src_offset], n, 2048);
  };
  EXPECT_TRUE(pieces(16, 0, 32768));   // a page-aligned area into a malloc'd buffer
  EXPECT_TRUE(pieces(1, 0, 2049));
  EXPECT_TRUE(pieces(31, 0, limit - 1));
  EXPECT_TRUE(pieces(49, 48, 32768));
  EXPECT_FALSE(pieces(0, 0, 32768));   // aligned alike
  EXPECT_FALSE(pieces(16, 16, 32768));
  EXPECT_FALSE(pieces(0, 16, 32768));  // the destination behind the source
  EXPECT_FALSE(pieces(32, 0, 32768));  // 32 or more ahead
  EXPECT_FALSE(pieces(13, 48, 32768));  // behind within the line, though 29 ahead modulo 64
  EXPECT_FALSE(pieces(16, 0, 2048));   // below glibc's rep movsb threshold
  EXPECT_FALSE(pieces(16, 0, limit));  // glibc's own vector moves from the L2 size on
}

TEST(CopyMemory, MoveMemoryMovesOverlappingRangesAsMemmoveDoes) {
  std::vector<std::byte> bytes(70000), expected;
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 7 + 3);
  for (std::ptrdiff_t shift : {-4096, -17, 17, 4096}) {
    std::vector<std::byte> moved = bytes;
    expected = bytes;
    std::byte* middle = moved.data() + 8192;
    std::memmove(expected.data() + 8192 + shift, expected.data() + 8192, 50000);
    via::move_memory(middle + shift, middle, 50000);
    EXPECT_EQ(moved, expected) << "shift " << shift;
  }
}

}  // namespace
