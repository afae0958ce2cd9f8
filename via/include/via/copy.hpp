// Copying message data without falling into a slow case of the CPU's string
// move, for every layer's copies of a few KiB and more.
//
// glibc 2.36 (Debian 12) copies from 2112 bytes (its x86_rep_movsb_threshold
// there) up to the L2 cache's size with `rep movsb`. On AMD Zen 3 (EPYC 7xx3)
// that instruction runs at about 2 GB/s instead of 25-50 when the
// destination's offset within its 64-byte line is 1-31 bytes past the
// source's: a copy from a page-aligned staging area or ring into a malloc'd
// buffer (16 bytes into a page) took 20 times as long as the same copy
// aligned. In pieces of 2 KiB, which glibc moves with vector loads and
// stores, such a copy runs at 25-55 GB/s (docs/PERFORMANCE.md). Other copies
// are left whole: above the L2 cache's size glibc uses vector moves itself,
// and at other offsets rep movsb is as fast as the pieces or faster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace via {

namespace detail {
// The largest copy that glibc makes with rep movsb on AMD: the L2 cache's size.
std::size_t string_move_limit();

// Whether a copy of n bytes from src to dst is the slow case, made in pieces.
// The offsets are compared within their lines, not modulo 64: a source 48
// bytes into its line and a destination 13 bytes into its own copy at full
// speed, as measured.
inline bool copy_in_pieces(const void* dst, const void* src, std::size_t n, std::size_t piece) {
  const auto ahead = std::ptrdiff_t(reinterpret_cast<std::uintptr_t>(dst) & 63) -
                     std::ptrdiff_t(reinterpret_cast<std::uintptr_t>(src) & 63);
  return n > piece && ahead > 0 && ahead < 32 && n < string_move_limit();
}
}  // namespace detail

// Like memcpy: the ranges must not overlap.
inline void copy_memory(void* dst, const void* src, std::size_t n) {
  constexpr std::size_t kPiece = 2048;  // below glibc's rep movsb threshold
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  if (detail::copy_in_pieces(to, from, n, kPiece))
    for (; n > kPiece; n -= kPiece, to += kPiece, from += kPiece) std::memcpy(to, from, kPiece);
  std::memcpy(to, from, n);
}

// Like memmove: ranges that overlap are moved whole.
inline void move_memory(void* dst, const void* src, std::size_t n) {
  const auto to = reinterpret_cast<std::uintptr_t>(dst), from = reinterpret_cast<std::uintptr_t>(src);
  if (to + n <= from || from + n <= to)
    copy_memory(dst, src, n);
  else
    std::memmove(dst, src, n);
}

}  // namespace via
