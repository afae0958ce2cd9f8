// Copies whose length is known only at run time, most of them a few bytes:
// the frame of a small message is gathered and scattered piece by piece (the
// mesh's header, the client's, a few bytes of payload), and for so few bytes
// the call to memcpy costs more than the copy.
#pragma once

#include <cstddef>
#include <cstring>

#include "via/copy.hpp"

namespace via {

// Like memcpy (the ranges must not overlap); up to 64 bytes without a call:
// two fixed-size moves that overlap in the middle.
inline void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n > 64) {
    copy_memory(dst, src, n);
  } else if (n >= 32) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n > 0) {
    dst[0] = src[0];
    dst[n / 2] = src[n / 2];
    dst[n - 1] = src[n - 1];
  }
}

}  // namespace via
