// A stack under test at 10.0.0.2 on one end of a MemoryLink, and the test
// playing every peer at the other end: it builds IPv4 packets (TCP
// segments, fragments, pings) byte by byte, hands them to the stack, polls
// it on virtual time, and parses what the stack sends back.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "utcp/icmp.hpp"
#include "utcp/ipv4.hpp"
#include "utcp/link.hpp"
#include "utcp/stack.hpp"
#include "utcp/tcp_header.hpp"
#include "utcp/tcp_socket.hpp"

namespace utcp::testing {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
namespace flag = wire::tcp_flags;

inline constexpr wire::Ipv4Address stack_address = wire::Ipv4Address::from_octets(10, 0, 0, 2);
inline constexpr wire::Ipv4Address peer_address = wire::Ipv4Address::from_octets(10, 0, 0, 1);

// A segment the stack sent, with its payload copied out.
struct SegmentOut {
  wire::Ipv4Address to;
  wire::TcpHeader header;
  Bytes payload;
};

inline StackConfig stack_config() {
  StackConfig config;
  config.address = stack_address;
  config.prefix_length = 8;  // spoofed sources anywhere in 10/8 are neighbours
  config.tcp_secret = 7;
  return config;
}

// The stack's end of the link, remembering when each packet the test
// injected arrived (the test's `now` then), for a stack that reads its clock
// per packet.
class ArrivalTimedLink final : public Link {
 public:
  explicit ArrivalTimedLink(MemoryLink& inner) : inner_(inner) {}
  std::size_t mtu() const override { return inner_.mtu(); }
  bool reaches(wire::Ipv4Address address) const override { return inner_.reaches(address); }
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) override {
    return inner_.transmit(next_hop, packet);
  }
  std::size_t receive(const PacketSink& deliver, std::size_t budget) override {
    return inner_.receive(
        [&](std::span<const std::uint8_t> packet) {
          last_arrival_ = arrivals_.front();
          arrivals_.pop_front();
          deliver(packet);
        },
        budget);
  }
  void arriving_at(Instant arrival) { arrivals_.push_back(arrival); }
  // The arrival of the packet the stack took last.
  Instant last_arrival() const { return last_arrival_; }

 private:
  MemoryLink& inner_;
  std::deque<Instant> arrivals_;
  Instant last_arrival_{};
};

class PeerHarness {
 public:
  explicit PeerHarness(StackConfig config = stack_config(), std::size_t mtu = 1500) {
    auto [near, far] = MemoryLink::make_pair(mtu);
    near_ = std::move(near);
    far_ = std::move(far);
    timed_ = std::make_unique<ArrivalTimedLink>(*near_);
    stack_ = std::make_unique<Stack>(*timed_, config);
    stack_->set_time(now);
  }

  Stack& stack() { return *stack_; }

  // From now on the stack reads the time per packet, as on real time: each
  // packet at the `now` it was injected at, though one poll may take it
  // together with packets that came before.
  void clock_per_packet() {
    stack_->set_clock([this] { return timed_->last_arrival(); });
  }

  void inject_ip_packet(std::span<const std::uint8_t> packet) {
    timed_->arriving_at(now);
    far_->transmit(stack_address, packet);
  }

  // Hands the stack one IPv4 packet carrying `transport` (already emitted).
  void inject_ip(const wire::Ipv4Header& header, std::span<const std::uint8_t> transport) {
    Bytes packet(wire::ipv4_min_header_length + transport.size());
    packet.resize(wire::emit_ipv4(header, transport, packet));
    inject_ip_packet(packet);
  }

  void inject_tcp(const wire::TcpHeader& header, std::span<const std::uint8_t> payload = {},
                  wire::Ipv4Address from = peer_address) {
    Bytes segment(wire::tcp_max_header_length + payload.size());
    segment.resize(wire::emit_tcp(header, from, stack_address, payload, segment));
    inject_ip(ip_header(from, wire::ip_protocol::tcp), segment);
  }

  void inject_echo_request(std::uint16_t sequence, wire::Ipv4Address from = peer_address) {
    const std::uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    Bytes message(wire::icmp_header_length + sizeof data);
    wire::emit_icmp(wire::IcmpEcho{false, 0x77, sequence}, data, message);
    inject_ip(ip_header(from, wire::ip_protocol::icmp), message);
  }

  static wire::Ipv4Header ip_header(wire::Ipv4Address from, std::uint8_t protocol) {
    wire::Ipv4Header header;
    header.protocol = protocol;
    header.time_to_live = 64;
    header.source = from;
    header.destination = stack_address;
    return header;
  }

  // One poll at `start`: a batch, all that is queued taken at once.
  void poll_once_at(Instant start) { stack_->poll(start); }

  // Polls the stack at `now` until it has taken everything queued.
  void poll() {
    while (stack_->poll(now)) {
    }
  }

  void advance(std::chrono::nanoseconds duration) {
    now += duration;
    poll();
  }

  // Runs the stack's timers up to now + duration.
  void run_for(std::chrono::nanoseconds duration) {
    const Instant until = now + duration;
    while (const auto at = stack_->poll_at()) {
      if (*at > until) break;
      now = std::max(now, *at);
      poll();
    }
    now = until;
    poll();
  }

  // Every packet the stack sent since the last call.
  std::vector<Bytes> take_packets() { return far_->take_all(); }

  // The TCP segments among them, others dropped.
  std::vector<SegmentOut> take_segments() {
    std::vector<SegmentOut> segments;
    for (const Bytes& packet : take_packets()) {
      const auto ip = wire::parse_ipv4(packet);
      if (!ip || ip->header.protocol != wire::ip_protocol::tcp) continue;
      const auto tcp = wire::parse_tcp(ip->payload, ip->header.source, ip->header.destination);
      if (!tcp) {
        ADD_FAILURE() << "the stack sent a TCP segment that does not parse";
        continue;
      }
      segments.push_back({ip->header.destination, tcp->header, {tcp->payload.begin(), tcp->payload.end()}});
    }
    return segments;
  }

  Instant now = Instant{} + std::chrono::hours(1);

 private:
  std::unique_ptr<MemoryLink> near_, far_;
  std::unique_ptr<ArrivalTimedLink> timed_;
  std::unique_ptr<Stack> stack_;
};

// A segment from a peer at `from_port` to the stack's `to_port`.
inline wire::TcpHeader segment_to(std::uint16_t from_port, std::uint16_t to_port, std::uint32_t sequence,
                                  std::uint32_t ack, std::uint8_t flags, std::uint16_t window = 65535) {
  wire::TcpHeader header;
  header.source_port = from_port;
  header.destination_port = to_port;
  header.sequence = wire::SeqNumber(sequence);
  header.acknowledgment = wire::SeqNumber(ack);
  header.flags = flags;
  header.window = window;
  return header;
}

// The peer's side of connections to a listener of the stack under test.
inline constexpr std::uint16_t listen_port = 80;
inline constexpr std::uint32_t peer_iss = 7000;

// The peer's side of one connection to the stack's listener, opened by a
// SYN the test writes (options as given) and completed by its ACK.
struct PeerConnection {
  PeerHarness& harness;
  std::uint16_t port;
  wire::Ipv4Address address = peer_address;
  bool timestamps = false;
  bool sack = false;  // SACK-permitted on the SYN
  std::uint32_t send_next = peer_iss;  // ours, the peer's
  std::uint32_t stack_next = 0;        // the stack's next sequence number, once its SYN-ACK came
  std::uint32_t stack_tsval = 0;
  std::uint32_t clock = 1000;          // the peer's TSval

  wire::TcpHeader header(std::uint8_t flags, std::uint16_t window = 65535) {
    wire::TcpHeader h = segment_to(port, listen_port, send_next, stack_next, flags, window);
    if (timestamps) h.options.timestamps = wire::TcpTimestamps{++clock, stack_tsval};
    return h;
  }

  void send_syn(std::optional<std::uint16_t> mss, bool with_timestamps, std::optional<std::uint8_t> window_scale = 7) {
    timestamps = with_timestamps;
    wire::TcpHeader syn = header(flag::syn);
    syn.options.sack_permitted = sack;
    syn.options.max_segment_size = mss;
    syn.options.window_scale = window_scale;
    harness.inject_tcp(syn, {}, address);
    send_next += 1;
  }

  // Takes the stack's SYN-ACK from `segments`; false if there is none for us.
  bool take_syn_ack(const std::vector<SegmentOut>& segments) {
    for (const SegmentOut& segment : segments) {
      if (segment.to != address || segment.header.destination_port != port) continue;
      if (segment.header.flags != (flag::syn | flag::ack)) continue;
      stack_next = segment.header.sequence.value() + 1;
      if (segment.header.options.timestamps) stack_tsval = segment.header.options.timestamps->value;
      return true;
    }
    return false;
  }

  void send_ack(std::uint16_t window = 65535) { harness.inject_tcp(header(flag::ack, window), {}, address); }

  void send_data(std::uint32_t sequence, std::span<const std::uint8_t> payload) {
    wire::TcpHeader h = header(flag::ack);
    h.sequence = wire::SeqNumber(sequence);
    harness.inject_tcp(h, payload, address);
  }
};

// Opens a connection from the peer to the listener, the SYN carrying these
// options, and accepts it; nullopt if the stack never let it in.
inline std::optional<TcpSocket> open_from_peer(PeerHarness& harness, TcpListener& listener, PeerConnection& peer,
                                        std::optional<std::uint16_t> mss, bool timestamps,
                                        std::optional<std::uint8_t> window_scale = 7) {
  peer.send_syn(mss, timestamps, window_scale);
  harness.poll();
  if (!peer.take_syn_ack(harness.take_segments())) return std::nullopt;
  peer.send_ack();
  harness.poll();
  auto accepted = listener.accept();
  if (!accepted) return std::nullopt;
  accepted->set_nonblocking(true);
  return std::move(*accepted);
}

inline TcpListener listening(Stack& stack) {
  TcpListener listener(stack);
  EXPECT_FALSE(listener.listen({{}, listen_port}));
  listener.set_nonblocking(true);
  return listener;
}

}  // namespace utcp::testing
