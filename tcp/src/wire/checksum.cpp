#include "utcp/checksum.hpp"

#include <cstdio>

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

void Checksum::add(std::span<const std::uint8_t> bytes) {
  std::size_t i = 0;
  if (odd_ && !bytes.empty()) {
    sum_ += bytes[0];  // completes the word whose high byte came last time
    i = 1;
    odd_ = false;
  }
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
