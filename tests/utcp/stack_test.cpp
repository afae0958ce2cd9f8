// The stack packet by packet on virtual time, over in-memory links: two
// stacks talking to each other, or one stack and the test writing and
// reading raw packets at the other end of its link.
#include "utcp/stack.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>

#include "utcp/checksum.hpp"
#include "utcp/icmp.hpp"
#include "utcp/udp.hpp"
#include "utcp/udp_socket.hpp"
#include "utcp/via_host.hpp"
#include "utcp/via_link.hpp"

namespace utcp {
namespace {

using namespace std::chrono_literals;
using wire::Ipv4Address;
using Bytes = std::vector<std::uint8_t>;

constexpr Ipv4Address address_a = Ipv4Address::from_octets(10, 0, 0, 1);
constexpr Ipv4Address address_b = Ipv4Address::from_octets(10, 0, 0, 2);
constexpr Instant start{std::chrono::seconds(1000)};

std::error_code errc(std::errc code) { return std::make_error_code(code); }

Bytes pattern(std::size_t size, std::uint8_t seed = 0) {
  Bytes bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + seed + (i >> 8));
  return bytes;
}

StackConfig config_for(Ipv4Address address) {
  StackConfig config;
  config.address = address;
  return config;
}

// A UDP datagram (header and payload, checksummed) from a to b.
Bytes udp_datagram(Endpoint from, Endpoint to, std::span<const std::uint8_t> payload) {
  Bytes datagram(wire::udp_header_length + payload.size());
  wire::emit_udp({from.port, to.port}, from.address, to.address, payload, datagram);
  return datagram;
}

Bytes ip_packet(const wire::Ipv4Header& header, std::span<const std::uint8_t> payload) {
  Bytes packet(wire::ipv4_min_header_length + payload.size());
  wire::emit_ipv4(header, payload, packet);
  return packet;
}

wire::Ipv4Header header_from_b(std::uint8_t protocol, std::uint16_t identification = 77) {
  wire::Ipv4Header header;
  header.identification = identification;
  header.protocol = protocol;
  header.source = address_b;
  header.destination = address_a;
  return header;
}

// Fragment [offset, offset + size) of a datagram `total` bytes long.
Bytes fragment(const wire::Ipv4Header& header, std::span<const std::uint8_t> datagram, std::size_t offset,
               std::size_t size) {
  wire::Ipv4Header piece = header;
  piece.fragment_offset = static_cast<std::uint16_t>(offset);
  piece.more_fragments = offset + size < datagram.size();
  return ip_packet(piece, datagram.subspan(offset, size));
}

// Stack A on one end of a link; the test holds the other end (as host B).
class OneStack : public ::testing::Test {
 protected:
  explicit OneStack(std::size_t mtu = 1500, StackConfig config = config_for(address_a)) {
    auto [near, far] = MemoryLink::make_pair(mtu);
    link_ = std::move(near);
    far_ = std::move(far);
    stack_ = std::make_unique<Stack>(*link_, config);
  }

  // Hands packets to the stack as if B sent them, and runs it at `now`.
  void inject(const std::vector<Bytes>& packets, Instant now = start) {
    for (const Bytes& packet : packets) ASSERT_TRUE(far_->transmit(address_a, packet));
    stack_->poll(now);
  }
  std::vector<Bytes> sent() { return far_->take_all(); }

  std::unique_ptr<MemoryLink> link_, far_;
  std::unique_ptr<Stack> stack_;
};

// A socket on A port 5000, and a datagram from B:6000 to it, whole.
class Reassembly : public OneStack {
 protected:
  Reassembly() : OneStack(9000), socket_(*stack_), payload_(pattern(3000, 3)) {
    EXPECT_FALSE(socket_.bind({{}, 5000}));
    socket_.set_nonblocking(true);
    datagram_ = udp_datagram({address_b, 6000}, {address_a, 5000}, payload_);
  }
  Bytes piece(std::size_t offset, std::size_t size, std::uint16_t identification = 77) {
    return fragment(header_from_b(wire::ip_protocol::udp, identification), datagram_, offset, size);
  }
  // The datagram arrived whole and once.
  void expect_delivered_once() {
    Bytes buffer(4000);
    const auto received = socket_.receive_from(buffer);
    ASSERT_TRUE(received) << received.error().message();
    EXPECT_EQ(received->from, (Endpoint{address_b, 6000}));
    buffer.resize(received->size);
    EXPECT_EQ(buffer, payload_);
    EXPECT_EQ(socket_.receive_from(buffer).error(), errc(std::errc::operation_would_block));
  }

  UdpSocket socket_;
  Bytes payload_, datagram_;  // datagram_: 3008 bytes
};

TEST_F(Reassembly, InOrder) {
  inject({piece(0, 1480), piece(1480, 1480), piece(2960, 48)});
  expect_delivered_once();
  const StackCounters counters = stack_->counters();
  EXPECT_EQ(counters.reassembly.fragments, 3u);
  EXPECT_EQ(counters.reassembly.reassembled, 1u);
  EXPECT_EQ(stack_->poll_at(), std::nullopt);
}

TEST_F(Reassembly, OutOfOrder) {
  inject({piece(2960, 48), piece(0, 1480)});
  EXPECT_EQ(socket_.queued_datagrams(), 0u);
  inject({piece(1480, 1480)});
  expect_delivered_once();
}

TEST_F(Reassembly, InterleavedWithAnotherDatagram) {
  inject({piece(0, 1480, 1), piece(1480, 1480, 2), piece(2960, 48, 1), piece(0, 1480, 2)});
  inject({piece(2960, 48, 2), piece(1480, 1480, 1)});
  EXPECT_EQ(socket_.queued_datagrams(), 2u);
  EXPECT_EQ(stack_->counters().reassembly.reassembled, 2u);
}

TEST_F(Reassembly, ExactDuplicatesAreCountedAndIgnored) {
  inject({piece(0, 1480), piece(0, 1480), piece(1480, 1480), piece(1480, 1480), piece(2960, 48)});
  expect_delivered_once();
  EXPECT_EQ(stack_->counters().reassembly.duplicates, 2u);
}

TEST_F(Reassembly, OverlapDiscardsTheDatagram) {
  inject({piece(0, 1480), piece(1472, 1488)});  // starts 8 bytes inside the first
  EXPECT_EQ(stack_->counters().reassembly.overlaps, 1u);
  // What is left starts over and never completes.
  inject({piece(2960, 48)});
  EXPECT_EQ(socket_.queued_datagrams(), 0u);
  EXPECT_EQ(stack_->counters().reassembly.reassembled, 0u);
}

TEST_F(Reassembly, FragmentContainingAnotherIsAnOverlap) {
  inject({piece(1480, 8), piece(0, 2960)});
  EXPECT_EQ(stack_->counters().reassembly.overlaps, 1u);
}

TEST_F(Reassembly, FragmentsDisagreeingOnTheEndAreMalformed) {
  // A second last fragment with another end.
  inject({piece(2960, 48)});
  wire::Ipv4Header last = header_from_b(wire::ip_protocol::udp);
  last.fragment_offset = 1480;
  inject({ip_packet(last, std::span(datagram_).subspan(1480, 1480))});
  EXPECT_EQ(stack_->counters().reassembly.malformed, 1u);
  // A middle fragment past the end a last fragment gave.
  wire::Ipv4Header early_end = header_from_b(wire::ip_protocol::udp, 90);
  early_end.fragment_offset = 1480;  // last: the datagram ends at 1496
  inject({ip_packet(early_end, pattern(16))});
  wire::Ipv4Header beyond = early_end;
  beyond.fragment_offset = 1496;
  beyond.more_fragments = true;
  inject({ip_packet(beyond, pattern(16))});
  EXPECT_EQ(stack_->counters().reassembly.malformed, 2u);
  // A last fragment ending before data already held.
  wire::Ipv4Header middle = header_from_b(wire::ip_protocol::udp, 91);
  middle.fragment_offset = 1496;
  middle.more_fragments = true;
  wire::Ipv4Header short_last = header_from_b(wire::ip_protocol::udp, 91);
  short_last.fragment_offset = 8;
  inject({ip_packet(middle, pattern(16)), ip_packet(short_last, pattern(16))});
  EXPECT_EQ(stack_->counters().reassembly.malformed, 3u);
  EXPECT_EQ(socket_.queued_datagrams(), 0u);
  EXPECT_EQ(stack_->counters().reassembly.reassembled, 0u);
}

TEST_F(Reassembly, IncompleteDatagramTimesOut) {
  inject({piece(0, 1480), piece(2960, 48)}, start);
  ASSERT_EQ(stack_->poll_at(), start + 30s);
  stack_->poll(start + 29s);
  EXPECT_EQ(stack_->counters().reassembly.timeouts, 0u);
  stack_->poll(start + 30s);
  EXPECT_EQ(stack_->counters().reassembly.timeouts, 1u);
  EXPECT_EQ(stack_->poll_at(), std::nullopt);
  // The missing piece alone now starts a new datagram.
  inject({piece(1480, 1480)}, start + 31s);
  EXPECT_EQ(socket_.queued_datagrams(), 0u);
}

// RFC 792, RFC 1122 §3.2.2.4: a datagram whose reassembly timed out is
// reported to its source with ICMP time exceeded (code 1) quoting its first
// fragment, but only if that fragment (offset 0) arrived.
TEST_F(Reassembly, ATimeoutIsReportedWithTimeExceededQuotingTheFirstFragment) {
  inject({piece(0, 1480), piece(2960, 48)}, start);
  inject({piece(1480, 1480, 78), piece(2960, 48, 78)}, start + 1s);  // no first fragment
  Bytes icmp_error = pattern(3000, 5);  // a fragmented ICMP error: never answered with one
  icmp_error[0] = 3;
  inject({fragment(header_from_b(wire::ip_protocol::icmp, 79), icmp_error, 0, 1480)}, start + 1s);
  EXPECT_TRUE(sent().empty());
  stack_->poll(start + 31s);
  EXPECT_EQ(stack_->counters().reassembly.timeouts, 3u);
  const auto replies = sent();
  ASSERT_EQ(replies.size(), 1u);
  const auto packet = wire::parse_ipv4(replies[0]);
  ASSERT_TRUE(packet);
  EXPECT_EQ(packet->header.source, address_a);
  EXPECT_EQ(packet->header.destination, address_b);
  const auto message = wire::parse_icmp(packet->payload);
  ASSERT_TRUE(message);
  EXPECT_EQ(message->header, wire::IcmpHeader(wire::IcmpTimeExceeded{wire::time_exceeded_code::reassembly}));
  const auto quoted = wire::parse_quoted_datagram(message->data);
  ASSERT_TRUE(quoted);
  EXPECT_EQ(quoted->header.identification, 77);
  EXPECT_EQ(quoted->header.protocol, wire::ip_protocol::udp);
  EXPECT_TRUE(quoted->header.more_fragments);
  EXPECT_EQ(quoted->header.fragment_offset, 0);
  EXPECT_EQ(message->data[2] << 8 | message->data[3], 20 + 1480);  // the fragment's total length
  EXPECT_EQ(Bytes(quoted->payload_start.begin(), quoted->payload_start.end()),
            Bytes(datagram_.begin(), datagram_.begin() + 8));
  EXPECT_EQ(stack_->counters().icmp.time_exceeded_out, 1u);
}

// One that comes in (about a datagram we sent) is counted, and changes nothing.
TEST_F(OneStack, TimeExceededInIsCounted) {
  const Bytes offending = ip_packet(header_from_b(wire::ip_protocol::udp), pattern(8));
  Bytes message(wire::icmp_header_length + offending.size());
  message.resize(wire::emit_icmp(wire::IcmpTimeExceeded{wire::time_exceeded_code::in_transit},
                                 wire::icmp_error_quote(offending), message));
  inject({ip_packet(header_from_b(wire::ip_protocol::icmp), message)});
  EXPECT_EQ(stack_->counters().icmp.time_exceeded_in, 1u);
  EXPECT_TRUE(sent().empty());
}

TEST(Reassembler, MemoryBoundEvictsTheOldestDatagram) {
  Reassembler reassembler(ReassemblyLimits{30s, 0});  // raised to one largest datagram
  wire::Ipv4Header header = header_from_b(wire::ip_protocol::udp);
  header.fragment_offset = 60000;  // a last fragment far out makes the datagram hold 60008 bytes
  const Bytes tail = pattern(8);
  EXPECT_FALSE(reassembler.offer(header, tail, start));
  header.identification = 78;
  EXPECT_FALSE(reassembler.offer(header, tail, start));
  EXPECT_EQ(reassembler.counters().evicted, 1u);
  EXPECT_EQ(reassembler.datagrams_pending(), 1u);
  EXPECT_LE(reassembler.bytes_held(), wire::ipv4_max_total_length + 256);
  // The survivor is the newer one: completing it works.
  header.fragment_offset = 0;
  header.more_fragments = true;
  const Bytes head = pattern(60000);
  const auto datagram = reassembler.offer(header, head, start);
  ASSERT_TRUE(datagram);
  EXPECT_EQ(datagram->payload.size(), 60008u);
  EXPECT_EQ(reassembler.bytes_held(), 0u);
}

TEST(Reassembler, EmptyFragmentIsMalformed) {
  Reassembler reassembler;
  wire::Ipv4Header header = header_from_b(wire::ip_protocol::udp);
  header.more_fragments = true;
  EXPECT_FALSE(reassembler.offer(header, {}, start));
  EXPECT_EQ(reassembler.counters().malformed, 1u);
  EXPECT_EQ(reassembler.datagrams_pending(), 0u);
}

TEST_F(OneStack, BadChecksumsAreCountedAndDropped) {
  UdpSocket socket(*stack_);
  ASSERT_FALSE(socket.bind({{}, 5000}));
  Bytes good = ip_packet(header_from_b(wire::ip_protocol::udp), udp_datagram({address_b, 1}, {address_a, 5000}, pattern(20)));
  Bytes bad_ip = good;
  bad_ip[8] ^= 1;  // TTL changed under the header checksum
  Bytes bad_udp = good;
  bad_udp.back() ^= 0x40;
  wire::Ipv4Header icmp_header = header_from_b(wire::ip_protocol::icmp);
  Bytes echo(wire::icmp_header_length + 4);
  wire::emit_icmp(wire::IcmpEcho{false, 1, 1}, pattern(4), echo);
  echo[5] ^= 1;
  const Bytes bad_icmp = ip_packet(icmp_header, echo);
  const Bytes truncated(good.begin(), good.begin() + 12);
  inject({bad_ip, bad_udp, bad_icmp, truncated, good});

  const StackCounters counters = stack_->counters();
  EXPECT_EQ(counters.ip.packets_in, 5u);
  EXPECT_EQ(counters.ip.bad_checksum, 1u);
  EXPECT_EQ(counters.ip.malformed, 1u);
  EXPECT_EQ(counters.udp.bad_checksum, 1u);
  EXPECT_EQ(counters.icmp.bad_checksum, 1u);
  EXPECT_EQ(counters.udp.datagrams_in, 1u);
  EXPECT_EQ(socket.queued_datagrams(), 1u);
  EXPECT_TRUE(sent().empty());  // no answer to any of them
}

TEST_F(OneStack, AcceptsUdpWithoutChecksum) {
  UdpSocket socket(*stack_);
  ASSERT_FALSE(socket.bind({{}, 5000}));
  Bytes datagram = udp_datagram({address_b, 1}, {address_a, 5000}, pattern(20));
  datagram[6] = datagram[7] = 0;  // RFC 768: none sent
  inject({ip_packet(header_from_b(wire::ip_protocol::udp), datagram)});
  EXPECT_EQ(socket.queued_datagrams(), 1u);
}

TEST_F(OneStack, DropsPacketsForOtherHosts) {
  UdpSocket socket(*stack_);
  ASSERT_FALSE(socket.bind({{}, 5000}));
  wire::Ipv4Header header = header_from_b(wire::ip_protocol::udp);
  header.destination = Ipv4Address::from_octets(10, 0, 0, 9);
  inject({ip_packet(header, udp_datagram({address_b, 1}, {header.destination, 5000}, pattern(4)))});
  EXPECT_EQ(stack_->counters().ip.not_for_us, 1u);
  EXPECT_EQ(socket.queued_datagrams(), 0u);
}

// A packet from the link that claims the stack's own address as its source
// is spoofed (Linux calls it a martian and drops it): dropped before anything
// answers it. A fragment of one, left to time out, once made the stack send
// its reassembly time-exceeded error to itself (found by utcp_fuzz).
TEST_F(OneStack, DropsPacketsFromTheLinkThatClaimItsOwnAddress) {
  UdpSocket socket(*stack_);
  ASSERT_FALSE(socket.bind({{}, 5000}));
  wire::Ipv4Header header = header_from_b(wire::ip_protocol::udp);
  header.source = address_a;
  inject({ip_packet(header, udp_datagram({address_a, 1}, {address_a, 5000}, pattern(4)))});
  EXPECT_EQ(stack_->counters().ip.own_source, 1u);
  EXPECT_EQ(socket.queued_datagrams(), 0u);
  header.more_fragments = true;
  inject({ip_packet(header, pattern(16))}, start);
  stack_->poll(start + 31s);
  EXPECT_EQ(stack_->counters().ip.own_source, 2u);
  EXPECT_EQ(stack_->counters().icmp.time_exceeded_out, 0u);
  EXPECT_EQ(stack_->poll_at(), std::nullopt);
}

TEST_F(OneStack, AnswersEchoRequests) {
  Bytes echo(wire::icmp_header_length + 5);
  wire::emit_icmp(wire::IcmpEcho{false, 0x1234, 9}, pattern(5), echo);
  inject({ip_packet(header_from_b(wire::ip_protocol::icmp), echo)});
  const auto replies = sent();
  ASSERT_EQ(replies.size(), 1u);
  const auto packet = wire::parse_ipv4(replies[0]);
  ASSERT_TRUE(packet);
  EXPECT_EQ(packet->header.source, address_a);
  EXPECT_EQ(packet->header.destination, address_b);
  const auto message = wire::parse_icmp(packet->payload);
  ASSERT_TRUE(message);
  EXPECT_EQ(std::get<wire::IcmpEcho>(message->header), (wire::IcmpEcho{true, 0x1234, 9}));
  EXPECT_EQ(Bytes(message->data.begin(), message->data.end()), pattern(5));
  EXPECT_EQ(stack_->counters().icmp.echo_requests_in, 1u);
}

TEST_F(OneStack, UnknownProtocolGetsProtocolUnreachable) {
  inject({ip_packet(header_from_b(99), pattern(12))});
  EXPECT_EQ(stack_->counters().ip.unknown_protocol, 1u);
  const auto replies = sent();
  ASSERT_EQ(replies.size(), 1u);
  const auto message = wire::parse_icmp(wire::parse_ipv4(replies[0])->payload);
  ASSERT_TRUE(message);
  EXPECT_EQ(std::get<wire::IcmpDestinationUnreachable>(message->header).code, wire::unreachable_code::protocol);
  const auto quoted = wire::parse_quoted_datagram(message->data);
  ASSERT_TRUE(quoted);
  EXPECT_EQ(quoted->header.protocol, 99);
}

TEST_F(OneStack, NoErrorAboutDatagramsFromNonUnicastSources) {
  wire::Ipv4Header header = header_from_b(wire::ip_protocol::udp);
  header.source = Ipv4Address::from_octets(10, 0, 255, 255);  // the subnet's broadcast
  inject({ip_packet(header, udp_datagram({header.source, 1}, {address_a, 9}, pattern(4)))});
  EXPECT_EQ(stack_->counters().udp.no_port, 1u);
  EXPECT_TRUE(sent().empty());
}

TEST_F(OneStack, ReceiveQueueOverflowIsCounted) {
  UdpSocket socket(*stack_);
  ASSERT_FALSE(socket.bind({{}, 5000}));
  socket.set_receive_queue_limits(2, 1 << 20);
  UdpSocket bytes_bound(*stack_);
  ASSERT_FALSE(bytes_bound.bind({{}, 5001}));
  bytes_bound.set_receive_queue_limits(100, 250);
  std::vector<Bytes> packets;
  for (std::uint16_t i = 0; i < 5; ++i) {
    packets.push_back(ip_packet(header_from_b(wire::ip_protocol::udp, i),
                                udp_datagram({address_b, 1}, {address_a, 5000}, pattern(10, i))));
    packets.push_back(ip_packet(header_from_b(wire::ip_protocol::udp, i),
                                udp_datagram({address_b, 1}, {address_a, 5001}, pattern(100, i))));
  }
  inject(packets);
  EXPECT_EQ(socket.queued_datagrams(), 2u);
  EXPECT_EQ(socket.receive_queue_drops(), 3u);
  EXPECT_EQ(bytes_bound.queued_datagrams(), 2u);  // a third would pass 250 bytes
  EXPECT_EQ(bytes_bound.receive_queue_drops(), 3u);
  EXPECT_EQ(stack_->counters().udp.receive_queue_drops, 6u);
  // The oldest are kept, in order.
  socket.set_nonblocking(true);
  Bytes buffer(64);
  const auto first = socket.receive_from(buffer);
  ASSERT_TRUE(first);
  EXPECT_EQ(Bytes(buffer.begin(), buffer.begin() + first->size), pattern(10, 0));
}

// Two stacks on one in-memory link.
class TwoStacks : public ::testing::Test {
 protected:
  explicit TwoStacks(std::size_t mtu = 1500) {
    auto [a, b] = MemoryLink::make_pair(mtu);
    link_a_ = std::move(a);
    link_b_ = std::move(b);
    a_ = std::make_unique<Stack>(*link_a_, config_for(address_a));
    b_ = std::make_unique<Stack>(*link_b_, config_for(address_b));
  }
  // Runs both stacks until neither has anything left to do.
  void settle(Instant now = start) {
    for (int round = 0; round < 100; ++round) {
      const bool any_a = a_->poll(now);
      const bool any_b = b_->poll(now);
      if (!any_a && !any_b) return;
    }
    FAIL() << "the stacks kept talking";
  }

  std::unique_ptr<MemoryLink> link_a_, link_b_;
  std::unique_ptr<Stack> a_, b_;
};

TEST_F(TwoStacks, Ping) {
  ASSERT_FALSE(a_->send_echo_request(address_b, 42, 1, pattern(56)));
  settle();
  const auto reply = a_->take_echo_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->from, address_b);
  EXPECT_EQ(reply->identifier, 42);
  EXPECT_EQ(reply->sequence, 1);
  EXPECT_EQ(reply->data, pattern(56));
  EXPECT_FALSE(a_->take_echo_reply());
  EXPECT_EQ(a_->counters().icmp.echo_requests_out, 1u);
  EXPECT_EQ(b_->counters().icmp.echo_requests_in, 1u);
  EXPECT_EQ(a_->counters().icmp.echo_replies_in, 1u);
}

TEST_F(TwoStacks, PingOfALargeDatagramFragments) {
  ASSERT_FALSE(a_->send_echo_request(address_b, 1, 2, pattern(20000)));
  settle();
  const auto reply = a_->take_echo_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->data, pattern(20000));
  EXPECT_EQ(b_->counters().reassembly.reassembled, 1u);
  EXPECT_EQ(a_->counters().reassembly.reassembled, 1u);
}

TEST_F(TwoStacks, EchoRepliesBeyondTheQueueAreCounted) {
  for (std::uint16_t sequence = 0; sequence < 70; ++sequence)
    ASSERT_FALSE(a_->send_echo_request(address_b, 1, sequence, pattern(8)));
  settle();
  EXPECT_EQ(a_->counters().icmp.echo_replies_in, 70u);
  EXPECT_EQ(a_->counters().icmp.echo_replies_dropped, 6u);
  std::uint16_t expected = 0;
  while (const auto reply = a_->take_echo_reply()) EXPECT_EQ(reply->sequence, expected++);
  EXPECT_EQ(expected, 64);
}

// The smallest MTU every IPv4 link must carry (RFC 791): 48 bytes a fragment.
class SmallestMtu : public TwoStacks {
 protected:
  SmallestMtu() : TwoStacks(68) {}
};

TEST_F(SmallestMtu, DatagramsStillGetThrough) {
  UdpSocket server(*b_), client(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  server.set_nonblocking(true);
  ASSERT_TRUE(client.send_to(pattern(1000, 9), {address_b, 7}));
  EXPECT_EQ(a_->counters().ip.fragments_out, (1008u + 47) / 48);
  settle();
  Bytes buffer(1000);
  const auto got = server.receive_from(buffer);
  ASSERT_TRUE(got);
  EXPECT_EQ(buffer, pattern(1000, 9));
}

TEST_F(TwoStacks, UdpBothWays) {
  UdpSocket server(*b_), client(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  server.set_nonblocking(true);
  client.set_nonblocking(true);
  const Bytes request = pattern(100);
  ASSERT_EQ(client.send_to(request, {address_b, 7}).value(), 100u);
  settle();
  Bytes buffer(200);
  const auto got = server.receive_from(buffer);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size, 100u);
  EXPECT_FALSE(got->truncated);
  EXPECT_EQ(got->from, *client.local_endpoint());
  EXPECT_EQ(Bytes(buffer.begin(), buffer.begin() + 100), request);
  // Reply to the sender's ephemeral port.
  ASSERT_TRUE(server.send_to(pattern(30, 1), got->from));
  settle();
  const auto reply = client.receive_from(buffer);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->from, (Endpoint{address_b, 7}));
  EXPECT_EQ(Bytes(buffer.begin(), buffer.begin() + 30), pattern(30, 1));
  EXPECT_EQ(a_->counters().udp.datagrams_out, 1u);
  EXPECT_EQ(b_->counters().udp.datagrams_in, 1u);
}

TEST_F(TwoStacks, ATruncatedDatagramTellsItsWholeLengthAndTheNextOneIsSizedBeforeItIsTaken) {
  UdpSocket server(*b_), client(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  server.set_nonblocking(true);
  EXPECT_EQ(server.next_datagram_size(), std::nullopt);
  const Bytes long_one = pattern(300, 2);
  ASSERT_TRUE(client.send_to(long_one, {address_b, 7}));
  ASSERT_TRUE(client.send_to(pattern(40, 3), {address_b, 7}));
  settle();
  EXPECT_EQ(server.next_datagram_size(), 300u);
  Bytes small(100);
  const auto first = server.receive_from(small);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->size, 100u);
  EXPECT_TRUE(first->truncated);
  EXPECT_EQ(first->datagram_size, 300u);
  EXPECT_EQ(small, Bytes(long_one.begin(), long_one.begin() + 100));
  EXPECT_EQ(server.next_datagram_size(), 40u);
  const auto second = server.receive_from(small);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->datagram_size, 40u);
  EXPECT_FALSE(second->truncated);
  EXPECT_EQ(server.next_datagram_size(), std::nullopt);
}

// iperf3's UDP server: the socket that heard a client connects to it, and a
// new socket is bound to the same port for the next client (both with
// SO_REUSEADDR). The connected socket gets its peer's datagrams, the other
// socket everyone else's.
TEST_F(TwoStacks, SocketsThatAllowReuseShareAPortAndAConnectedOneGetsItsPeersDatagrams) {
  UdpSocket first(*b_), second(*b_), without_reuse(*b_), client(*a_), stranger(*a_);
  first.set_reuse_address(true);
  second.set_reuse_address(true);
  ASSERT_FALSE(first.bind({{}, 5201}));
  EXPECT_EQ(without_reuse.bind({{}, 5201}), std::errc::address_in_use);
  ASSERT_FALSE(client.bind({{}, 4000}));
  ASSERT_FALSE(stranger.bind({{}, 4001}));
  ASSERT_FALSE(first.connect({address_a, 4000}));
  ASSERT_FALSE(second.bind({{}, 5201}));
  for (UdpSocket* socket : {&first, &second}) socket->set_nonblocking(true);
  ASSERT_TRUE(client.send_to(pattern(10, 1), {address_b, 5201}));
  ASSERT_TRUE(stranger.send_to(pattern(20, 2), {address_b, 5201}));
  settle();
  Bytes buffer(100);
  const auto to_first = first.receive_from(buffer);
  ASSERT_TRUE(to_first);
  EXPECT_EQ(to_first->size, 10u);
  EXPECT_FALSE(first.readable());
  const auto to_second = second.receive_from(buffer);
  ASSERT_TRUE(to_second);
  EXPECT_EQ(to_second->size, 20u);
  EXPECT_EQ(to_second->from, (Endpoint{address_a, 4001}));
  // Closing one leaves the port to the other.
  first.close();
  ASSERT_TRUE(client.send_to(pattern(30, 3), {address_b, 5201}));
  settle();
  const auto after_close = second.receive_from(buffer);
  ASSERT_TRUE(after_close);
  EXPECT_EQ(after_close->size, 30u);
  second.close();
  EXPECT_FALSE(without_reuse.bind({{}, 5201}));
}

TEST_F(TwoStacks, LargestDatagramFragmentsAndReassembles) {
  UdpSocket server(*b_), client(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  server.set_nonblocking(true);
  const Bytes payload = pattern(udp_max_payload, 5);
  ASSERT_TRUE(client.send_to(payload, {address_b, 7}));
  // 65515 transport bytes in fragments of 1480.
  EXPECT_EQ(a_->counters().ip.fragments_out, (65515u + 1479) / 1480);
  EXPECT_EQ(a_->counters().ip.datagrams_fragmented, 1u);
  for (const Bytes& packet : link_b_->take_all()) {
    EXPECT_LE(packet.size(), 1500u);
    ASSERT_TRUE(link_a_->transmit(address_b, packet));  // back where they were
  }
  settle();
  Bytes buffer(70000);
  const auto got = server.receive_from(buffer);
  ASSERT_TRUE(got);
  buffer.resize(got->size);
  EXPECT_EQ(buffer, payload);
}

TEST_F(TwoStacks, PortUnreachableRefusesAConnectedSocket) {
  UdpSocket client(*a_);
  client.set_nonblocking(true);
  ASSERT_FALSE(client.connect({address_b, 9}));
  ASSERT_TRUE(client.send(pattern(10)));
  settle();
  EXPECT_EQ(b_->counters().udp.no_port, 1u);
  EXPECT_EQ(b_->counters().icmp.unreachable_out, 1u);
  EXPECT_EQ(a_->counters().icmp.unreachable_in, 1u);
  EXPECT_TRUE(client.readable());
  Bytes buffer(16);
  EXPECT_EQ(client.receive_from(buffer).error(), errc(std::errc::connection_refused));
  // Reported once.
  EXPECT_EQ(client.receive_from(buffer).error(), errc(std::errc::operation_would_block));
  // A send reports it too.
  ASSERT_TRUE(client.send(pattern(10)));
  settle();
  EXPECT_EQ(client.send(pattern(10)).error(), errc(std::errc::connection_refused));
}

TEST_F(TwoStacks, UnconnectedSocketIgnoresPortUnreachable) {
  UdpSocket client(*a_);
  client.set_nonblocking(true);
  ASSERT_TRUE(client.send_to(pattern(10), {address_b, 9}));
  settle();
  EXPECT_EQ(a_->counters().icmp.unreachable_in, 1u);
  EXPECT_FALSE(client.readable());
}

TEST_F(TwoStacks, ConnectedSocketTakesOnlyItsPeer) {
  UdpSocket server(*b_), peer(*a_), stranger(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  ASSERT_FALSE(peer.bind({{}, 1000}));
  ASSERT_FALSE(server.connect({address_a, 1000}));
  ASSERT_TRUE(stranger.send_to(pattern(4), {address_b, 7}));
  ASSERT_TRUE(peer.send_to(pattern(4), {address_b, 7}));
  settle();
  EXPECT_EQ(server.queued_datagrams(), 1u);
  EXPECT_EQ(b_->counters().udp.no_port, 1u);
}

TEST_F(TwoStacks, LoopbackStaysOffTheLink) {
  UdpSocket server(*a_), client(*a_);
  ASSERT_FALSE(server.bind({address_a, 7}));
  ASSERT_TRUE(client.send_to(pattern(30000), {address_a, 7}));  // no fragmenting to ourselves
  EXPECT_EQ(link_b_->pending(), 0u);
  settle();
  EXPECT_EQ(server.queued_datagrams(), 1u);
  EXPECT_EQ(a_->counters().ip.fragments_out, 0u);
}

TEST_F(TwoStacks, SocketCallErrors) {
  UdpSocket socket(*a_), other(*a_);
  EXPECT_EQ(socket.bind({Ipv4Address::from_octets(10, 0, 0, 7), 1}), errc(std::errc::address_not_available));
  EXPECT_FALSE(socket.bind({{}, 4000}));
  EXPECT_EQ(socket.bind({{}, 4001}), errc(std::errc::invalid_argument));
  EXPECT_EQ(other.bind({{}, 4000}), errc(std::errc::address_in_use));
  EXPECT_EQ(socket.send(pattern(1)).error(), errc(std::errc::destination_address_required));
  EXPECT_EQ(socket.send_to(pattern(udp_max_payload + 1), {address_b, 7}).error(), errc(std::errc::message_size));
  EXPECT_EQ(socket.send_to(pattern(1), {address_b, 0}).error(), errc(std::errc::invalid_argument));
  EXPECT_EQ(socket.connect({Ipv4Address::from_octets(192, 168, 0, 1), 7}), errc(std::errc::network_unreachable));
  EXPECT_EQ(socket.connect({address_b, 0}), errc(std::errc::invalid_argument));
  Bytes buffer(8);
  // Blocking, but the stack has no Waiter to block with.
  EXPECT_EQ(socket.receive_from(buffer).error(), errc(std::errc::operation_would_block));
  socket.close();
  EXPECT_FALSE(socket.is_open());
  EXPECT_EQ(socket.bind({{}, 1}), errc(std::errc::bad_file_descriptor));
  EXPECT_EQ(socket.send_to(pattern(1), {address_b, 7}).error(), errc(std::errc::bad_file_descriptor));
  EXPECT_EQ(socket.receive_from(buffer).error(), errc(std::errc::bad_file_descriptor));
  // Closing freed the port.
  UdpSocket again(*a_);
  EXPECT_FALSE(again.bind({{}, 4000}));
}

// RFC 6056: where a stack starts looking for free ports follows from its
// secret, so a program run again (a new stack on the same address) does not
// begin with the port its last run had.
TEST(EphemeralPorts, WhereTheSearchStartsFollowsTheStacksSecret) {
  std::set<std::uint16_t> first_ports;
  for (std::uint64_t secret : {1u, 2u, 3u, 1000u}) {
    auto [link, far] = MemoryLink::make_pair(1500);
    StackConfig config = config_for(address_a);
    config.tcp_secret = secret;
    Stack stack(*link, config);
    UdpSocket socket(stack);
    ASSERT_FALSE(socket.bind({}));
    const std::uint16_t port = socket.local_endpoint()->port;
    EXPECT_GE(port, 49152);
    first_ports.insert(port);
  }
  EXPECT_EQ(first_ports.size(), 4u);
}

TEST_F(TwoStacks, EphemeralPortsAreDistinctAndDynamic) {
  std::vector<UdpSocket> sockets;
  std::set<std::uint16_t> ports;
  for (int i = 0; i < 50; ++i) {
    sockets.emplace_back(*a_);
    ASSERT_FALSE(sockets.back().bind({}));
    const std::uint16_t port = sockets.back().local_endpoint()->port;
    EXPECT_GE(port, 49152);
    ports.insert(port);
  }
  EXPECT_EQ(ports.size(), 50u);
  // Sending from an unbound socket binds one.
  UdpSocket unbound(*a_);
  ASSERT_TRUE(unbound.send_to(pattern(1), {address_b, 7}));
  ASSERT_TRUE(unbound.local_endpoint());
  EXPECT_FALSE(ports.contains(unbound.local_endpoint()->port));
}

TEST_F(TwoStacks, ReceiveTruncatesToTheBuffer) {
  UdpSocket server(*b_), client(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  ASSERT_TRUE(client.send_to(pattern(100), {address_b, 7}));
  settle();
  server.set_nonblocking(true);
  Bytes buffer(10);
  const auto got = server.receive_from(buffer);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size, 10u);
  EXPECT_TRUE(got->truncated);
  const Bytes sent = pattern(100);
  EXPECT_EQ(buffer, Bytes(sent.begin(), sent.begin() + 10));
  EXPECT_EQ(server.queued_datagrams(), 0u);  // the rest is gone
}

// A Waiter that runs both stacks on virtual time, a millisecond a step.
class VirtualWaiter : public Waiter {
 public:
  VirtualWaiter(Stack& a, Stack& b, Instant& now) : a_(a), b_(b), now_(now) {}
  bool wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) override {
    const Instant deadline = timeout ? now_ + *timeout : Instant::max();
    for (;;) {
      a_.poll(now_);
      b_.poll(now_);
      if (ready()) return true;
      if (now_ >= deadline) return false;
      now_ += 1ms;
    }
  }

 private:
  Stack &a_, &b_;
  Instant& now_;
};

TEST_F(TwoStacks, BlockingReceiveWaitsThroughTheWaiter) {
  Instant now = start;
  VirtualWaiter waiter(*a_, *b_, now);
  b_->set_waiter(&waiter);
  UdpSocket server(*b_), client(*a_);
  ASSERT_FALSE(server.bind({{}, 7}));
  ASSERT_TRUE(client.send_to(pattern(64), {address_b, 7}));
  Bytes buffer(64);
  const auto got = server.receive_from(buffer);  // blocking: the waiter polls A and B
  ASSERT_TRUE(got);
  EXPECT_EQ(buffer, pattern(64));
  // With nothing coming, the receive timeout ends the wait.
  server.set_receive_timeout(250ms);
  const Instant before = now;
  EXPECT_EQ(server.receive_from(buffer).error(), errc(std::errc::operation_would_block));
  EXPECT_EQ(now - before, 250ms);
}

TEST(TracingLink, RecordsBothDirectionsWithTheClock) {
  auto [a, b] = MemoryLink::make_pair();
  std::string name = "utcp_trace_";
  name += std::to_string(::getpid());
  name += ".pcap";
  const std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::chrono::microseconds clock{1'700'000'000'000'000};
  {
    wire::PcapWriter writer(path);
    TracingLink traced(*a, writer, [&clock] { return clock += 1ms; });
    Stack stack_a(traced, config_for(address_a));
    Stack stack_b(*b, config_for(address_b));
    ASSERT_FALSE(stack_a.send_echo_request(address_b, 1, 1, pattern(3000)));  // one packet at MTU 9000
    stack_b.poll(start);
    stack_a.poll(start);
    ASSERT_TRUE(stack_a.take_echo_reply());
    EXPECT_EQ(stack_a.counters().ip.packets_out + stack_a.counters().ip.packets_in, 2u);
  }
  std::ifstream in(path, std::ios::binary);
  const Bytes file{std::istreambuf_iterator<char>(in), {}};
  std::filesystem::remove(path);
  const std::size_t packet = wire::ipv4_min_header_length + wire::icmp_header_length + 3000;
  ASSERT_EQ(file.size(), 24 + 2 * (16 + packet));
  std::uint32_t seconds, micros;
  std::memcpy(&seconds, &file[24], 4);
  std::memcpy(&micros, &file[28], 4);
  EXPECT_EQ(seconds, 1'700'000'000u);
  EXPECT_EQ(micros, 1000u);
  // The second record is the reply: source B.
  const std::size_t second = 24 + 16 + packet + 16;
  const auto reply = wire::parse_ipv4(std::span(file).subspan(second, packet));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->header.source, address_b);
}

TEST(AddressPlan, RanksMapToAddressesAndBack) {
  const AddressPlan plan;
  EXPECT_EQ(plan.address_of(0), Ipv4Address::from_octets(10, 0, 0, 1));
  EXPECT_EQ(plan.address_of(255), Ipv4Address::from_octets(10, 0, 1, 0));
  EXPECT_EQ(plan.rank_of(Ipv4Address::from_octets(10, 0, 1, 0), 256), 255);
  EXPECT_EQ(plan.rank_of(Ipv4Address::from_octets(10, 0, 1, 0), 255), std::nullopt);
  EXPECT_EQ(plan.rank_of(Ipv4Address::from_octets(10, 0, 0, 0), 4), std::nullopt);
  EXPECT_EQ(plan.rank_of(Ipv4Address::from_octets(9, 255, 255, 255), 4), std::nullopt);
  EXPECT_EQ(Ipv4Address::parse("192.168.4.255"), Ipv4Address::from_octets(192, 168, 4, 255));
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "1.2.3.4 ", "1..3.4", "1.2.3.0004", "1.2.3.256", "a.b.c.d"})
    EXPECT_FALSE(Ipv4Address::parse(bad)) << bad;
  const auto parsed = AddressPlan::parse("192.168.4.0/24");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->network, Ipv4Address::from_octets(192, 168, 4, 0));
  EXPECT_EQ(parsed->prefix_length, 24);
  for (const char* bad : {"10.0.0.0", "10.0.0.1/16", "10.0.0.0/31", "10.0.0.0/7", "10.0.0/16", "10.0.0.0/16x",
                          "256.0.0.0/16", "10.0.0.0/"})
    EXPECT_FALSE(AddressPlan::parse(bad)) << bad;
}

// Sets environment variables for one test and puts them back after.
class HostEnvironment : public ::testing::Test {
 protected:
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name, value, 1);
  }
  void TearDown() override {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(HostEnvironment, HostConfigurationFromTheEnvironment) {
  set("VIASTACK_RANK", "2");
  set("VIASTACK_SIZE", "4");
  set("VIASTACK_UTCP_MTU", "1500");
  set("VIASTACK_UTCP_RECEIVE_BUFFERS", "256");
  set("VIASTACK_UTCP_NETWORK", "192.168.0.0/24");
  set("VIASTACK_TRACE", "/tmp/run.pcap");
  const ViaHostConfig config = ViaHostConfig::from_environment();
  EXPECT_EQ(config.rank, 2);
  EXPECT_EQ(config.size, 4);
  EXPECT_EQ(config.link.mtu, 1500u);
  EXPECT_EQ(config.link.receive_buffers_per_peer, 256u);
  EXPECT_EQ(config.link.addresses.address_of(2), Ipv4Address::from_octets(192, 168, 0, 3));
  EXPECT_EQ(config.link.addresses.prefix_length, 24);
  ASSERT_TRUE(config.trace);
  EXPECT_EQ(trace_file_for_rank(*config.trace, config.rank, config.size), "/tmp/run.rank2.pcap");
  EXPECT_EQ(trace_file_for_rank(*config.trace, 0, 1), "/tmp/run.pcap");
}

// A bad setting stops the program with one line naming it (via/config.hpp).
TEST_F(HostEnvironment, BadSettingsStopTheProgramByName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        set("VIASTACK_UTCP_MTU", "60");
        (void)ViaHostConfig::from_environment();
      },
      ::testing::ExitedWithCode(1),
      "^viastack\\[via (pid|rank) [0-9]+\\] error: VIASTACK_UTCP_MTU=60: expected an integer from 68 to 65535 bytes");
  EXPECT_EXIT(
      {
        set("VIASTACK_UTCP_RECEIVE_BUFFERS", "1");
        (void)ViaHostConfig::from_environment();
      },
      ::testing::ExitedWithCode(1),
      "^viastack\\[via (pid|rank) [0-9]+\\] error: VIASTACK_UTCP_RECEIVE_BUFFERS=1: expected an integer from 2 to 4096");
  EXPECT_EXIT(
      {
        set("VIASTACK_UTCP_NETWORK", "10.0.0.1/16");
        (void)ViaHostConfig::from_environment();
      },
      ::testing::ExitedWithCode(1),
      "^viastack\\[via (pid|rank) [0-9]+\\] error: VIASTACK_UTCP_NETWORK=10.0.0.1/16: expected an IPv4 network");
}

}  // namespace
}  // namespace utcp
