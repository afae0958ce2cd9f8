// An outcome: the value, or what went wrong. The wire layer's parsers give
// the one thing wrong with the bytes (Error); the stack's socket calls give an
// errno-style std::error_code (utcp::Result, below).
// (std::expected is C++23; this is the part of it utcp needs.)
#pragma once

#include <string_view>
#include <system_error>
#include <utility>
#include <variant>

namespace utcp::wire {

enum class Error {
  truncated,              // shorter than the fixed part of the header
  bad_version,            // IPv4: version field is not 4
  bad_header_length,      // IPv4: IHL < 5, or the header runs past the total length or the buffer
  bad_total_length,       // IPv4: total length < header length, or past the buffer
  bad_checksum,           // the Internet checksum does not verify
  reserved_bit_set,       // IPv4: the reserved flag bit is 1 (RFC 791)
  bad_fragment,           // IPv4: the fragment ends past 65535, or a non-final fragment is not a multiple of 8 bytes
  bad_length,             // UDP: length field < 8 or past the buffer; TCP: a segment too long for IPv4
  bad_data_offset,        // TCP: data offset < 5 or past the segment
  option_truncated,       // an option's length byte is missing, or its length runs past the options area
  bad_option_length,      // an option's length is < 2, or wrong for its kind
  unsupported_icmp_type,  // ICMP: neither echo nor destination unreachable
  bad_icmp_code,          // ICMP: a code the type does not define
  bad_quoted_datagram,    // ICMP error: the quoted datagram is not an IPv4 header + 8 bytes
};

// The error's name, e.g. "bad_checksum", for counters and logs.
std::string_view to_string(Error error);

template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(E error) : state_(std::move(error)) {}

  bool has_value() const { return state_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  // Throw std::bad_variant_access when called on the other alternative.
  const T& value() const { return std::get<0>(state_); }
  // Mutable access, for values that are moved out (a TcpSocket from accept).
  T& value() { return std::get<0>(state_); }
  const E& error() const { return std::get<1>(state_); }
  const T& operator*() const { return value(); }
  T& operator*() { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, E> state_;
};

}  // namespace utcp::wire

namespace utcp {

// What the stack's calls return: the value, or an errno-style error
// (std::errc values in std::generic_category: ECONNREFUSED, EAGAIN, ...).
template <class T>
using Result = wire::Result<T, std::error_code>;

}  // namespace utcp
