#include "utcp/checksum.hpp"

#include <bit>
#include <cstdio>
#include <cstring>

#include "wire/bytes.hpp"

namespace utcp::wire {

std::string Ipv4Address::to_string() const {
  char text[16];
  std::snprintf(text, sizeof text, "%u.%u.%u.%u", value >> 24, value >> 16 & 0xff, value >> 8 & 0xff, value & 0xff);
  return text;
}

std::optional<Ipv4Address> Ipv4Address::parse(std::string_view text) {
  std::uint32_t value = 0;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0) {
      if (text.empty() || text.front() != '.') return std::nullopt;
      text.remove_prefix(1);
    }
    std::size_t digits = 0;
    std::uint32_t number = 0;
    while (digits < text.size() && digits < 4 && text[digits] >= '0' && text[digits] <= '9')
      number = number * 10 + static_cast<std::uint32_t>(text[digits++] - '0');
    if (digits == 0 || digits > 3 || number > 255) return std::nullopt;
    text.remove_prefix(digits);
    value = value << 8 | number;
  }
  if (!text.empty()) return std::nullopt;
  return Ipv4Address{value};
}

void Checksum::add(std::span<const std::uint8_t> bytes) { sum(bytes, nullptr); }

void Checksum::add_copy(std::span<const std::uint8_t> bytes, std::uint8_t* to) {
  if (!bytes.empty()) sum(bytes, to);
}

namespace {

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UTCP_THREAD_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define UTCP_THREAD_SANITIZER 1
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(UTCP_THREAD_SANITIZER)
// Built twice, for AVX2 and for the x86-64 baseline (SSE2); the loader picks
// the one the CPU runs. (Not under ThreadSanitizer: the loader runs the
// choosing function before the sanitizer's runtime is up, and it crashes.)
#define UTCP_WIDEST_VECTORS [[gnu::target_clones("avx2", "default")]]
#else
#define UTCP_WIDEST_VECTORS
#endif

// Four 64-bit lanes (GCC's and Clang's vector extension).
using Lanes = std::uint64_t __attribute__((vector_size(32)));

// The sum of the 32-bit words of bytes[0, size), size a multiple of 32, in
// the machine's byte order; copied to `to` on the way when it is not null.
// Each lane adds less than 2^32 a step and the eight lanes are added at the
// end: below 2^64 up to 2^29 steps, 16 GiB.
UTCP_WIDEST_VECTORS std::uint64_t sum_words(const std::uint8_t* bytes, std::size_t size, std::uint8_t* to) {
  constexpr std::uint64_t low_half = 0xffffffffu;
  Lanes low{}, high{};
  if (to) {
    for (std::size_t i = 0; i < size; i += sizeof(Lanes)) {
      Lanes words;
      std::memcpy(&words, bytes + i, sizeof words);
      std::memcpy(to + i, &words, sizeof words);
      low += words & low_half;
      high += words >> 32;
    }
  } else {
    for (std::size_t i = 0; i < size; i += sizeof(Lanes)) {
      Lanes words;
      std::memcpy(&words, bytes + i, sizeof words);
      low += words & low_half;
      high += words >> 32;
    }
  }
  const Lanes total = low + high;
  return total[0] + total[1] + total[2] + total[3];
}

}  // namespace

// The sum of bytes, copied to `to` on the way when it is not null: one loop
// for both, so the copy is the load the sum needs anyway.
void Checksum::sum(std::span<const std::uint8_t> bytes, std::uint8_t* to) {
  std::size_t i = 0;
  if (odd_ && !bytes.empty()) {
    sum_ += bytes[0];  // completes the word whose high byte came last time
    if (to) to[0] = bytes[0];
    i = 1;
    odd_ = false;
  }
  // The bulk summed as 32-bit words in the machine's byte order, 32 bytes a
  // step in vector lanes, then eight at a time: 2^16 = 1 modulo 0xffff, so
  // 32-bit words sum as their 16-bit halves do, and RFC 1071 §2(B) lets the
  // order be swapped once, on the folded sum. (A 16-bit loop made the
  // checksum cost as much as every copy of a TCP stream together; the scalar
  // 8-byte loop alone still cost a fifth of a 1 MiB stream's time on either
  // side.) Each 8-byte step adds less than 2^33.
  const std::size_t vector_bytes = (bytes.size() - i) / sizeof(Lanes) * sizeof(Lanes);
  std::uint64_t native = 0;
  if (vector_bytes > 0) {  // short pieces (a header's words) skip the indirect call
    native = sum_words(bytes.data() + i, vector_bytes, to ? to + i : nullptr);
    i += vector_bytes;
  }
  if (to) {
    for (; i + 8 <= bytes.size(); i += 8) {
      std::uint64_t eight;
      std::memcpy(&eight, &bytes[i], sizeof eight);
      std::memcpy(to + i, &eight, sizeof eight);
      native += (eight & 0xffffffffu) + (eight >> 32);
    }
  } else {
    for (; i + 8 <= bytes.size(); i += 8) {
      std::uint64_t eight;
      std::memcpy(&eight, &bytes[i], sizeof eight);
      native += (eight & 0xffffffffu) + (eight >> 32);
    }
  }
  while (native >> 16) native = (native & 0xffff) + (native >> 16);
  if constexpr (std::endian::native == std::endian::little) native = (native >> 8) | ((native & 0xff) << 8);
  sum_ += native;
  if (to) std::memcpy(to + i, &bytes[i], bytes.size() - i);
  // A 64-bit accumulator cannot overflow: a buffer would need 2^48 words.
  for (; i + 1 < bytes.size(); i += 2) sum_ += detail::load16(&bytes[i]);
  if (i < bytes.size()) {
    sum_ += static_cast<std::uint32_t>(bytes[i]) << 8;
    odd_ = true;
  }
}

void Checksum::add_u16(std::uint16_t word) {
  const std::uint8_t bytes[2] = {static_cast<std::uint8_t>(word >> 8), static_cast<std::uint8_t>(word)};
  add(bytes);
}

void Checksum::add_u32(std::uint32_t word) {
  add_u16(static_cast<std::uint16_t>(word >> 16));
  add_u16(static_cast<std::uint16_t>(word));
}

std::uint16_t Checksum::folded_sum() const {
  std::uint64_t sum = sum_;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(sum);
}

std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes) {
  Checksum checksum;
  checksum.add(bytes);
  return checksum.finish();
}

Checksum pseudo_header_checksum(Ipv4Address source, Ipv4Address destination, std::uint8_t protocol,
                                std::uint16_t transport_length) {
  Checksum checksum;
  checksum.add_u32(source.value);
  checksum.add_u32(destination.value);
  checksum.add_u16(protocol);  // a zero byte, then the protocol
  checksum.add_u16(transport_length);
  return checksum;
}

std::uint16_t update_checksum(std::uint16_t checksum, std::uint16_t old_word, std::uint16_t new_word) {
  std::uint32_t sum = static_cast<std::uint16_t>(~checksum);
  sum += static_cast<std::uint16_t>(~old_word);
  sum += new_word;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

}  // namespace utcp::wire
