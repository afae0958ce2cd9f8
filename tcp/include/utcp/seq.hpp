// TCP sequence numbers: 32-bit counters compared modulo 2^32 (RFC 9293
// §3.4), so that a < b means b is less than 2^31 ahead of a.
#pragma once

#include <cstdint>

namespace utcp::wire {

class SeqNumber {
 public:
  constexpr SeqNumber() = default;
  constexpr explicit SeqNumber(std::uint32_t value) : value_(value) {}
  constexpr std::uint32_t value() const { return value_; }

  constexpr SeqNumber operator+(std::uint32_t count) const { return SeqNumber(value_ + count); }
  constexpr SeqNumber operator-(std::uint32_t count) const { return SeqNumber(value_ - count); }
  constexpr SeqNumber& operator+=(std::uint32_t count) { return *this = *this + count; }
  // How far this is ahead of other (negative: behind), within ±2^31.
  constexpr std::int32_t operator-(SeqNumber other) const { return static_cast<std::int32_t>(value_ - other.value_); }

  friend constexpr bool operator==(SeqNumber, SeqNumber) = default;
  friend constexpr bool operator<(SeqNumber a, SeqNumber b) { return a - b < 0; }
  friend constexpr bool operator<=(SeqNumber a, SeqNumber b) { return a - b <= 0; }
  friend constexpr bool operator>(SeqNumber a, SeqNumber b) { return a - b > 0; }
  friend constexpr bool operator>=(SeqNumber a, SeqNumber b) { return a - b >= 0; }

 private:
  std::uint32_t value_ = 0;
};

// start <= seq < start + size, modulo 2^32: the test RFC 9293 §3.10.7.4
// applies to segments against the receive window (RCV.NXT, RCV.WND).
constexpr bool in_window(SeqNumber seq, SeqNumber start, std::uint32_t size) {
  return seq.value() - start.value() < size;
}

}  // namespace utcp::wire
