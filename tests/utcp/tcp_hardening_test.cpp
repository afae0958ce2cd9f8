// utcp against a hostile peer, packet by packet on virtual time: crafted
// MSS options, out-of-order floods, SYN floods and tiny-fragment floods.
// Each test reproduces one defect found by probing utcp as an attacker
// (issue 23: a crafted SYN crashed the process, MSS had no floor, the
// out-of-order queue and the SYN queue were unbounded, reassembly scanned
// every pending datagram per fragment).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "peer_harness.hpp"
#include "tcp_connection_harness.hpp"
#include "utcp/tcp_socket.hpp"

namespace utcp::testing {
namespace {

using wire::SeqNumber;
using wire::TcpHeader;

std::size_t largest_payload(const std::vector<SegmentOut>& segments) {
  std::size_t largest = 0;
  for (const SegmentOut& segment : segments) largest = std::max(largest, segment.payload.size());
  return largest;
}

// ---- 1. One crafted SYN must not kill the process ----

// MSS 0-11 with timestamps made the payload per segment (MSS less 12 bytes
// of options) wrap to ~4 GiB: the next send built a segment of the whole
// window and emit_tcp threw std::length_error out of TcpSocket::send (and of
// Stack::poll when a window update let the data go).
TEST(TcpHostilePeer, TinyMssWithTimestampsNeverThrows) {
  for (std::uint16_t mss = 0; mss < 12; ++mss) {
    SCOPED_TRACE(mss);
    PeerHarness harness;
    TcpListener listener = listening(harness.stack());
    PeerConnection peer{harness, 40000};
    std::optional<TcpSocket> socket = open_from_peer(harness, listener, peer, mss, true);
    ASSERT_TRUE(socket);
    // A zero window first, so that the data waits for the window update.
    peer.send_ack(0);
    harness.poll();
    const std::vector<std::uint8_t> data = pattern(100000);
    EXPECT_NO_THROW((void)socket->send(data));
    EXPECT_NO_THROW({
      peer.send_ack(65535);
      harness.poll();
    });
    const std::vector<SegmentOut> sent = harness.take_segments();
    EXPECT_GT(largest_payload(sent), 0u);
    EXPECT_LE(largest_payload(sent), 36u);  // the 48-byte floor less 12 bytes of timestamps
  }
}

// ---- 2. The MSS is clamped to [48, MTU - 40] ----

struct MssCase {
  std::optional<std::uint16_t> offered;
  bool timestamps;
  std::size_t payload;  // the largest segment's payload the stack then sends
};

class TcpMssClamp : public ::testing::TestWithParam<MssCase> {};

TEST_P(TcpMssClamp, SegmentsStayInsideTheClamp) {
  const MssCase& c = GetParam();
  PeerHarness harness(stack_config(), 1500);
  TcpListener listener = listening(harness.stack());
  PeerConnection peer{harness, 40000};
  std::optional<TcpSocket> socket = open_from_peer(harness, listener, peer, c.offered, c.timestamps);
  ASSERT_TRUE(socket);
  const std::vector<std::uint8_t> data = pattern(20000);
  ASSERT_TRUE(socket->send(data));
  harness.poll();
  EXPECT_EQ(largest_payload(harness.take_segments()), c.payload);
  EXPECT_EQ(socket->info()->max_segment_size, c.payload);
}

INSTANTIATE_TEST_SUITE_P(Edges, TcpMssClamp,
                         ::testing::Values(MssCase{0, false, 48},      // stalled the connection for ever
                                           MssCase{1, false, 48},      // 1-byte segments (CVE-2019-11479)
                                           MssCase{12, true, 36},      // nothing left beside the timestamps
                                           MssCase{47, false, 48},     // just under the floor
                                           MssCase{48, false, 48},     // the floor itself
                                           MssCase{9000, false, 1460},  // above the link's MTU
                                           MssCase{9000, true, 1448}));

// ---- 3. Out-of-order data is bounded, trimmed, and inserted in O(log n) ----

class OutOfOrderTest : public ConnectionTest {
 protected:
  // The peer's byte stream: the byte at sequence number s is stream_byte(s).
  static std::uint8_t stream_byte(std::uint32_t sequence) { return static_cast<std::uint8_t>(sequence * 131 >> 3); }
  static std::vector<std::uint8_t> stream(std::uint32_t sequence, std::size_t size) {
    std::vector<std::uint8_t> bytes(size);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = stream_byte(sequence + static_cast<std::uint32_t>(i));
    return bytes;
  }
  void feed_stream(std::uint32_t offset, std::size_t size) {
    const std::uint32_t sequence = peer_iss + 1 + offset;
    feed(from_peer(sequence, iss + 1, flag::ack), stream(sequence, size));
  }
  // Open with a 4 MiB window (scaled), for more data out of order than 64 KiB.
  void open_with_large_window() {
    config.window_scaling = true;
    config.receive_buffer = 4u << 20;
    connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
    next_sent();
    TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
    syn_ack.options.max_segment_size = 1000;
    syn_ack.options.window_scale = 0;
    feed(syn_ack);
    ASSERT_EQ(connection->state(), TcpState::established);
  }
};

// 100k overlapping 1,400-byte segments held +129.5 MB: each was kept whole.
TEST_F(OutOfOrderTest, OverlappingFloodIsTrimmedToTheWindow) {
  open_active();
  for (std::uint32_t i = 0; i < 20000; ++i) {
    feed_stream(1 + i * 3 % 62000, 1000);  // byte 0 missing: all of it waits
    sent.clear();
  }
  const TcpInfo info = connection->info();
  EXPECT_LE(info.out_of_order_bytes, config.receive_buffer);
  EXPECT_LE(info.out_of_order_segments, config.max_out_of_order_segments);
  // The hole fills: every byte comes out once, in order, as the peer sent it.
  feed_stream(0, 1);
  const std::vector<std::uint8_t> got = receive_all();
  EXPECT_EQ(got.size(), 1 + 59997 + 1000u);  // up to the end of the furthest segment
  EXPECT_EQ(got, stream(peer_iss + 1, got.size()));
  EXPECT_EQ(connection->info().out_of_order_segments, 0u);
}

TEST_F(OutOfOrderTest, SegmentCountIsBoundedAndTheFurthestGoFirst) {
  config.max_out_of_order_segments = 100;
  open_active();
  for (std::uint32_t offset = 2; offset < 60000; offset += 2) feed_stream(offset, 1);
  EXPECT_EQ(connection->info().out_of_order_segments, 100u);
  EXPECT_GT(connection->counters().out_of_order_dropped, 0u);
  // What was kept is the front: bytes 0 and 1 fill the first holes.
  feed_stream(0, 2);
  feed_stream(3, 1);
  EXPECT_EQ(receive_all(), stream(peer_iss + 1, 5));
}

// Descending offsets inserted into a sorted vector cost a move of every
// segment held per segment: quadratic.
TEST_F(OutOfOrderTest, DescendingOffsetsCostNoQuadraticWork) {
  config.max_out_of_order_segments = 1u << 20;
  open_with_large_window();
  constexpr std::uint32_t count = 60000;
  const auto started = std::chrono::steady_clock::now();
  for (std::uint32_t i = count; i > 0; --i) {
    feed_stream(2 * i, 1);
    sent.clear();
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(connection->info().out_of_order_segments, count);
  // ~30 ms once insertion is logarithmic (a few times that under a
  // sanitizer); the quadratic form took over 10 s.
  EXPECT_LT(elapsed, 1500ms);
}

// While a hole waits, the segments behind it come in order: each one held
// apart cost a map node, an allocation, and a step of every SACK block's
// walk (a sixth of a receiver's CPU under 1 % loss). One continuing the
// piece before it joins it, up to 64 KiB a piece.
TEST_F(OutOfOrderTest, SegmentsContinuingEachOtherAreHeldAsOnePiece) {
  open_with_large_window();
  for (std::uint32_t i = 1; i <= 100; ++i) feed_stream(i * 1000, 1000);  // bytes 0-999 missing
  TcpInfo info = connection->info();
  EXPECT_EQ(info.out_of_order_bytes, 100000u);
  EXPECT_EQ(info.out_of_order_segments, 2u);  // 65 of 1,000 bytes fill the first piece
  // One apart from the rest, then the one between joins the piece before it.
  feed_stream(102000, 1000);
  feed_stream(101000, 1000);
  info = connection->info();
  EXPECT_EQ(info.out_of_order_bytes, 102000u);
  EXPECT_EQ(info.out_of_order_segments, 3u);
  feed_stream(0, 1000);
  EXPECT_EQ(receive_all(), stream(peer_iss + 1, 103000));
  EXPECT_EQ(connection->info().out_of_order_segments, 0u);
}

// The stack bounds what all connections together hold.
TEST(TcpHostilePeer, OutOfOrderDataIsBoundedPerStack) {
  StackConfig config = stack_config();
  config.tcp_out_of_order_bytes = 100000;
  config.tcp_out_of_order_segments = 150;
  PeerHarness harness(config);
  TcpListener listener = listening(harness.stack());
  std::vector<PeerConnection> peers;
  std::vector<TcpSocket> sockets;
  for (std::uint16_t i = 0; i < 4; ++i) peers.push_back(PeerConnection{harness, static_cast<std::uint16_t>(40000 + i)});
  for (PeerConnection& peer : peers) {
    std::optional<TcpSocket> socket = open_from_peer(harness, listener, peer, 1000, false, std::nullopt);
    ASSERT_TRUE(socket);
    sockets.push_back(std::move(*socket));
  }
  const std::vector<std::uint8_t> payload = pattern(1000);
  for (PeerConnection& peer : peers)
    for (std::uint32_t k = 1; k <= 60; ++k) peer.send_data(peer.send_next + k * 1000, payload);
  harness.poll();
  const StackCounters counters = harness.stack().counters();
  EXPECT_LE(counters.tcp.out_of_order_bytes, 100000u);
  EXPECT_LE(counters.tcp.out_of_order_segments, 150u);
  EXPECT_GT(counters.tcp.out_of_order_bytes, 0u);
  std::uint64_t dropped = 0;
  for (const TcpSocket& socket : sockets) dropped += socket.counters()->out_of_order_dropped;
  EXPECT_GE(dropped, 4u * 60u - 100u);
}

// ---- 4. A SYN flood does not lock the port ----

// 10,000 SYNs from spoofed sources in 0.2 s held the listener's queue for
// ~127 s: a legitimate connect timed out.
TEST(TcpHostilePeer, LegitimateConnectionIsAcceptedDuringAndAfterASynFlood) {
  StackConfig config = stack_config();
  config.tcp.max_rto = std::chrono::seconds(60);  // as RFC 6298 allows: the half-open lifetime must not follow it
  PeerHarness harness(config);
  TcpListener listener = listening(harness.stack());
  auto spoofed_syn = [&](std::uint32_t i) {
    const wire::Ipv4Address from = wire::Ipv4Address::from_octets(10, 1 + (i >> 16 & 0x3f), i >> 8 & 0xff, i & 0xff);
    TcpHeader syn = segment_to(static_cast<std::uint16_t>(1024 + i % 60000), listen_port, i * 7919, 0, flag::syn);
    syn.options.max_segment_size = 1460;
    harness.inject_tcp(syn, {}, from);
  };
  PeerConnection during{harness, 40000};
  PeerConnection after{harness, 40001};
  // 50 SYNs a millisecond for 200 ms; the legitimate SYN in the middle, its
  // ACK a millisecond later.
  for (std::uint32_t i = 0; i < 10000; ++i) {
    spoofed_syn(i);
    if (i == 5000) during.send_syn(1460, true);
    if (i % 50 == 49) {
      harness.advance(1ms);
      const std::vector<SegmentOut> segments = harness.take_segments();
      if (during.stack_next == 0 && during.take_syn_ack(segments)) during.send_ack();
    }
  }
  harness.poll();
  ASSERT_NE(during.stack_next, 0u) << "the legitimate SYN was not answered";
  auto first = listener.accept();
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->remote_endpoint(), (Endpoint{peer_address, 40000}));
  // Right after the flood.
  std::optional<TcpSocket> second = open_from_peer(harness, listener, after, 1460, true);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->remote_endpoint(), (Endpoint{peer_address, 40001}));
  EXPECT_GT(harness.stack().counters().tcp.half_open_evictions, 0u);

  // The half-open connections give up well before 127 s: after 30 s nothing
  // is left to retransmit.
  harness.run_for(30s);
  (void)harness.take_packets();
  EXPECT_FALSE(harness.stack().poll_at().has_value());
  harness.run_for(100s);
  EXPECT_TRUE(harness.take_segments().empty());
}

// ---- 6. A tiny-fragment flood does not starve the stack ----

Bytes fragment_packet(std::uint16_t identification, wire::Ipv4Address from, std::uint16_t offset, bool more) {
  wire::Ipv4Header header = PeerHarness::ip_header(from, wire::ip_protocol::udp);
  header.identification = identification;
  header.fragment_offset = offset;
  header.more_fragments = more;
  const std::uint8_t payload[8] = {};
  Bytes packet(wire::ipv4_min_header_length + sizeof payload);
  packet.resize(wire::emit_ipv4(header, payload, packet));
  return packet;
}

std::size_t echo_replies(const std::vector<Bytes>& packets) {
  std::size_t replies = 0;
  for (const Bytes& packet : packets) {
    const auto ip = wire::parse_ipv4(packet);
    if (!ip || ip->header.protocol != wire::ip_protocol::icmp) continue;
    const auto message = wire::parse_icmp(ip->payload);
    if (!message) continue;
    if (const auto* echo = std::get_if<wire::IcmpEcho>(&message->header); echo && echo->reply) ++replies;
  }
  return replies;
}

// 8-byte first fragments, each of a new datagram, with a ping after every
// 100: every ping is answered in the round it was sent, the reassembler stays
// within its bounds, and the flood costs little per fragment however many
// datagrams are pending (each fragment scanned all of them: at 16k pending
// only 17% of a real flood was processed).
TEST(TcpHostilePeer, TinyFragmentFloodDoesNotStarvePings) {
  PeerHarness harness;
  constexpr std::uint32_t fragments = 200000;
  std::size_t pings = 0, replies = 0;
  const auto started = std::chrono::steady_clock::now();
  for (std::uint32_t i = 0; i < fragments; ++i) {
    const wire::Ipv4Address from = wire::Ipv4Address::from_octets(10, 2 + (i >> 16 & 0x3f), 0, 1);
    harness.inject_ip_packet(fragment_packet(static_cast<std::uint16_t>(i), from, 0, true));
    if (i % 100 == 99) {
      harness.inject_echo_request(static_cast<std::uint16_t>(pings++));
      harness.advance(1ms);
      replies += echo_replies(harness.take_packets());
      ASSERT_EQ(replies, pings) << "a ping went unanswered during the flood";
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  const StackCounters counters = harness.stack().counters();
  EXPECT_EQ(counters.reassembly.fragments, fragments);
  EXPECT_GT(counters.reassembly.evicted, 0u);
  EXPECT_EQ(counters.icmp.echo_requests_in, pings);
  // ~0.3 s once a fragment costs O(log n); the scan took over 5 s.
  EXPECT_LT(elapsed, 3s);
}

// One datagram sent as hundreds of 8-byte fragments is discarded once it
// passes the per-datagram bound, not held fragment by fragment.
TEST(TcpHostilePeer, FragmentsPerDatagramAreBounded) {
  StackConfig config = stack_config();
  config.reassembly.max_fragments_per_datagram = 16;
  PeerHarness harness(config);
  // 16 held, the 17th discards the datagram, the 13 after it start anew.
  for (std::uint16_t k = 0; k < 30; ++k) harness.inject_ip_packet(fragment_packet(1, peer_address, k * 16, true));
  harness.poll();
  const StackCounters counters = harness.stack().counters();
  EXPECT_EQ(counters.reassembly.fragments, 30u);
  EXPECT_EQ(counters.reassembly.too_many_fragments, 1u);
}

}  // namespace
}  // namespace utcp::testing
