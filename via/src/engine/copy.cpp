#include "via/copy.hpp"

#include <unistd.h>

namespace via::detail {

std::size_t string_move_limit() {
  static const std::size_t limit = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? std::size_t(l2) : std::size_t{512} << 10;
  }();
  return limit;
}

}  // namespace via::detail
