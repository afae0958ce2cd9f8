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

}  // namespace
