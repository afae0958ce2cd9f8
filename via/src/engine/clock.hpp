// The engine's one clock: monotonic nanoseconds, for timeouts and deadlines.
#pragma once

#include <time.h>

#include <cstdint>

namespace via {

inline std::uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

}  // namespace via
