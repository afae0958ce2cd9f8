// The wire layer of utcp: parsing and building of IPv4, ICMP, UDP and TCP,
// apart from any socket state, and pcap capture.
#pragma once

#include "utcp/address.hpp"
#include "utcp/checksum.hpp"
#include "utcp/icmp.hpp"
#include "utcp/ipv4.hpp"
#include "utcp/pcap.hpp"
#include "utcp/result.hpp"
#include "utcp/seq.hpp"
#include "utcp/tcp_header.hpp"
#include "utcp/udp.hpp"
