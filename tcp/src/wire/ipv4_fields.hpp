#pragma once

#include <cstdint>

#include "utcp/ipv4.hpp"

namespace utcp::wire::detail {

// The fields of the 20-byte fixed IPv4 header at bytes, unchecked: parse_ipv4
// validates before, an ICMP error's quote only checks there are 20 bytes.
Ipv4Header read_ipv4_fields(const std::uint8_t* bytes);

}  // namespace utcp::wire::detail
