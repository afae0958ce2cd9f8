#include "utcp/result.hpp"

namespace utcp::wire {

std::string_view to_string(Error error) {
  switch (error) {
    case Error::truncated: return "truncated";
    case Error::bad_version: return "bad_version";
    case Error::bad_header_length: return "bad_header_length";
    case Error::bad_total_length: return "bad_total_length";
    case Error::bad_checksum: return "bad_checksum";
    case Error::reserved_bit_set: return "reserved_bit_set";
    case Error::bad_fragment: return "bad_fragment";
    case Error::bad_length: return "bad_length";
    case Error::bad_data_offset: return "bad_data_offset";
    case Error::option_truncated: return "option_truncated";
    case Error::bad_option_length: return "bad_option_length";
    case Error::unsupported_icmp_type: return "unsupported_icmp_type";
    case Error::bad_icmp_code: return "bad_icmp_code";
    case Error::bad_quoted_datagram: return "bad_quoted_datagram";
  }
  return "unknown";
}

}  // namespace utcp::wire
