// libFuzzer target for utcp's wire parsers: IPv4, ICMP, UDP and TCP headers
// from any bytes must parse or be rejected with an error, never crash or read
// outside the buffer; whatever parses must build back into bytes that parse
// to the same header and payload. The last mode feeds a sequence of packets
// through a whole stack's input path (reassembly, ICMP, UDP sockets, TCP
// connections, a listener and the sockets it accepts) on virtual time.
//
// The first input byte picks the parser. Random bytes almost never carry a
// valid checksum, so most modes first write the right checksum into the
// input, letting the fuzzer reach the checks behind it (options, lengths).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "utcp/stack.hpp"
#include "utcp/tcp_socket.hpp"
#include "utcp/udp_socket.hpp"
#include "utcp/wire.hpp"

namespace {

using namespace utcp::wire;

constexpr Ipv4Address source = Ipv4Address::from_octets(10, 0, 0, 1);
constexpr Ipv4Address destination = Ipv4Address::from_octets(10, 0, 0, 2);

void require(bool condition) {
  if (!condition) std::abort();
}

bool same_bytes(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

void store_checksum(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint16_t checksum) {
  bytes[at] = static_cast<std::uint8_t>(checksum >> 8);
  bytes[at + 1] = static_cast<std::uint8_t>(checksum);
}

// Writes the checksum a transport header at offset `at` would need, over the
// bytes the protocol covers (`covered` of them, capped at the input).
void fix_transport_checksum(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint8_t protocol,
                            std::size_t covered) {
  if (bytes.size() < at + 2) return;
  covered = std::min(covered, bytes.size());
  store_checksum(bytes, at, 0);
  Checksum checksum;
  if (protocol != ip_protocol::icmp)
    checksum = pseudo_header_checksum(source, destination, protocol, static_cast<std::uint16_t>(covered));
  checksum.add(std::span(bytes).first(covered));
  store_checksum(bytes, at, checksum.finish());
}

void round_trip_ipv4(const Ipv4Packet& packet) {
  std::vector<std::uint8_t> out(ipv4_min_header_length + packet.payload.size());
  emit_ipv4(packet.header, packet.payload, out);
  const auto again = parse_ipv4(out);
  require(again.has_value() && again->header == packet.header && same_bytes(again->payload, packet.payload));
}

void round_trip_icmp(const IcmpMessage& message) {
  std::vector<std::uint8_t> out(icmp_header_length + message.data.size());
  emit_icmp(message.header, message.data, out);
  const auto again = parse_icmp(out);
  require(again.has_value() && again->header == message.header && same_bytes(again->data, message.data));
  if (!std::holds_alternative<IcmpEcho>(message.header))  // the errors quote a datagram
    require(parse_quoted_datagram(message.data).has_value());
}

void round_trip_udp(const UdpDatagram& datagram, Ipv4Address from, Ipv4Address to) {
  std::vector<std::uint8_t> out(udp_header_length + datagram.payload.size());
  emit_udp(datagram.header, from, to, datagram.payload, out);
  const auto again = parse_udp(out, from, to);
  require(again.has_value() && again->header == datagram.header && again->checksummed &&
          same_bytes(again->payload, datagram.payload));
}

void round_trip_tcp(const TcpSegment& segment, Ipv4Address from, Ipv4Address to) {
  std::vector<std::uint8_t> out(tcp_header_length(segment.header) + segment.payload.size());
  if (out.size() > ipv4_max_total_length - ipv4_min_header_length) return;  // options re-laid out larger
  emit_tcp(segment.header, from, to, segment.payload, out);
  const auto again = parse_tcp(out, from, to);
  require(again.has_value() && again->header == segment.header && same_bytes(again->payload, segment.payload));
}

// Every parser over the same bytes, with checksums as they are.
void parse_everything(std::span<const std::uint8_t> bytes) {
  if (const auto packet = parse_ipv4(bytes)) {
    round_trip_ipv4(*packet);
    const Ipv4Header& header = packet->header;
    if (header.protocol == ip_protocol::icmp) {
      if (const auto message = parse_icmp(packet->payload)) round_trip_icmp(*message);
    } else if (header.protocol == ip_protocol::udp) {
      if (const auto datagram = parse_udp(packet->payload, header.source, header.destination))
        round_trip_udp(*datagram, header.source, header.destination);
    } else if (header.protocol == ip_protocol::tcp) {
      if (const auto segment = parse_tcp(packet->payload, header.source, header.destination))
        round_trip_tcp(*segment, header.source, header.destination);
    }
  }
  (void)icmp_error_quote(bytes);
  (void)parse_quoted_datagram(bytes);
}

constexpr Ipv4Address stack_address = destination;

Ipv4Address address_at(const std::vector<std::uint8_t>& bytes, std::size_t at) {
  return Ipv4Address::from_octets(bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]);
}

// The input as packets to a stack at 10.0.0.2: each is a 2-byte length, a
// control byte and the bytes. Control bit 0 readdresses the packet to the
// stack and bit 1 fixes its header checksum, so that most packets get past
// the IPv4 checks; bit 2 fixes an unfragmented UDP, TCP or ICMP checksum; the
// high five bits advance time by that many 100 ms (reassembly times out at
// 1 s). TCP meets a listener on port 80, the sockets it accepts (which read
// everything and answer), and a connection opening from the first ephemeral
// port (49152) to 10.0.0.1:9.
void feed_stack(std::span<const std::uint8_t> input) {
  auto [near, far] = utcp::MemoryLink::make_pair(ipv4_max_total_length);
  utcp::StackConfig config;
  config.address = stack_address;
  config.reassembly.timeout = std::chrono::seconds(1);
  config.reassembly.max_bytes = 0;  // raised to one largest datagram: evictions are reached
  config.udp_receive_queue_datagrams = 4;
  utcp::Stack stack(*near, config);
  utcp::UdpSocket bound(stack), connected(stack);
  bound.bind({{}, 7});
  connected.bind({{}, 8});
  connected.connect({source, 9});
  bound.set_nonblocking(true);
  connected.set_nonblocking(true);
  std::optional<utcp::TcpListener> listener(std::in_place, stack);
  listener->listen({{}, 80}, 4);
  listener->set_nonblocking(true);
  std::vector<utcp::TcpSocket> tcp_sockets;
  tcp_sockets.emplace_back(stack);
  tcp_sockets.back().set_nonblocking(true);
  (void)tcp_sockets.back().connect({source, 9});
  constexpr std::uint8_t answer[] = {'o', 'k', '\n'};

  utcp::Instant now{};
  std::uint8_t buffer[ipv4_max_total_length];
  while (input.size() >= 3) {
    const std::size_t length = std::min<std::size_t>(input[0] << 8 | input[1], input.size() - 3);
    const std::uint8_t control = input[2];
    std::vector<std::uint8_t> packet(input.begin() + 3, input.begin() + 3 + static_cast<std::ptrdiff_t>(length));
    input = input.subspan(3 + length);
    if (packet.size() >= ipv4_min_header_length) {
      if (control & 1) {
        packet[16] = static_cast<std::uint8_t>(stack_address.value >> 24);
        packet[17] = static_cast<std::uint8_t>(stack_address.value >> 16);
        packet[18] = static_cast<std::uint8_t>(stack_address.value >> 8);
        packet[19] = static_cast<std::uint8_t>(stack_address.value);
      }
      const std::size_t header_length = std::min<std::size_t>((packet[0] & 0x0f) * 4u, packet.size());
      const bool unfragmented = (packet[6] & 0x3f) == 0 && packet[7] == 0;
      if ((control & 4) && unfragmented && header_length >= ipv4_min_header_length) {
        std::vector<std::uint8_t> transport(packet.begin() + static_cast<std::ptrdiff_t>(header_length), packet.end());
        if (packet[9] == ip_protocol::udp && transport.size() >= udp_header_length) {
          const std::size_t covered = std::min<std::size_t>(transport[4] << 8 | transport[5], transport.size());
          store_checksum(transport, 6, 0);
          Checksum checksum = pseudo_header_checksum(address_at(packet, 12), address_at(packet, 16), ip_protocol::udp,
                                                     static_cast<std::uint16_t>(covered));
          checksum.add(std::span(transport).first(covered));
          store_checksum(transport, 6, checksum.finish());
        }
        if (packet[9] == ip_protocol::icmp) fix_transport_checksum(transport, 2, ip_protocol::icmp, transport.size());
        if (packet[9] == ip_protocol::tcp && transport.size() >= tcp_min_header_length &&
            transport.size() <= ipv4_max_total_length) {
          store_checksum(transport, 16, 0);
          Checksum checksum = pseudo_header_checksum(address_at(packet, 12), address_at(packet, 16), ip_protocol::tcp,
                                                     static_cast<std::uint16_t>(transport.size()));
          checksum.add(transport);
          store_checksum(transport, 16, checksum.finish());
        }
        std::copy(transport.begin(), transport.end(), packet.begin() + static_cast<std::ptrdiff_t>(header_length));
      }
      if (control & 2) {
        store_checksum(packet, 10, 0);
        store_checksum(packet, 10, internet_checksum(std::span(packet).first(header_length)));
      }
    }
    far->transmit(stack_address, packet);
    now += std::chrono::milliseconds(100) * (control >> 3);
    stack.poll(now);
    while (bound.receive_from(buffer)) {
    }
    while (connected.receive_from(buffer)) {
    }
    while (stack.take_echo_reply()) {
    }
    while (tcp_sockets.size() < 8) {
      auto accepted = listener->accept();
      if (!accepted) break;
      tcp_sockets.push_back(std::move(*accepted));
      tcp_sockets.back().set_nonblocking(true);
    }
    for (utcp::TcpSocket& socket : tcp_sockets) {
      bool got = false;
      while (auto n = socket.receive(buffer)) {
        if (*n == 0) break;
        got = true;
      }
      if (got) (void)socket.send(answer);
      (void)socket.take_error();
    }
    (void)far->take_all();
  }
  // Reset every connection and close the listener; then whatever was left
  // half reassembled times out, and nothing is left to wait for.
  for (utcp::TcpSocket& socket : tcp_sockets) socket.abort();
  tcp_sockets.clear();
  listener.reset();
  stack.poll(now + std::chrono::seconds(2));
  (void)far->take_all();
  require(!stack.poll_at().has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0] % 6;
  std::vector<std::uint8_t> bytes(data + 1, data + size);
  switch (mode) {
    case 0:
      parse_everything(bytes);
      break;
    case 1: {  // IPv4 with a valid header checksum
      if (bytes.size() >= ipv4_min_header_length) {
        const std::size_t header_length = std::min<std::size_t>((bytes[0] & 0x0f) * 4u, bytes.size());
        store_checksum(bytes, 10, 0);
        store_checksum(bytes, 10, internet_checksum(std::span(bytes).first(header_length)));
      }
      if (const auto packet = parse_ipv4(bytes)) round_trip_ipv4(*packet);
      break;
    }
    case 2:
      fix_transport_checksum(bytes, 2, ip_protocol::icmp, bytes.size());
      if (const auto message = parse_icmp(bytes)) round_trip_icmp(*message);
      break;
    case 3: {
      const std::size_t length = bytes.size() >= udp_header_length ? (bytes[4] << 8 | bytes[5]) : 0;
      fix_transport_checksum(bytes, 6, ip_protocol::udp, length);
      if (const auto datagram = parse_udp(bytes, source, destination)) round_trip_udp(*datagram, source, destination);
      break;
    }
    case 4:
      if (bytes.size() <= ipv4_max_total_length) fix_transport_checksum(bytes, 16, ip_protocol::tcp, bytes.size());
      if (const auto segment = parse_tcp(bytes, source, destination)) round_trip_tcp(*segment, source, destination);
      break;
    case 5:
      feed_stack(bytes);
      break;
  }
  return 0;
}
