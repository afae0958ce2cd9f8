// TCP in the stack: sockets, listeners and poll, between two stacks joined
// through a middle box on virtual time. The box passes what each side sends
// to the other, unless a test tampers with it (drops, duplicates, reorders,
// corrupts); blocking calls wait through a Waiter that runs both stacks and
// jumps the clock to the next timer when nothing moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "utcp/checksum.hpp"
#include "utcp/icmp.hpp"
#include "utcp/ipv4.hpp"
#include "utcp/link.hpp"
#include "utcp/stack.hpp"
#include "utcp/tcp_header.hpp"
#include "utcp/tcp_socket.hpp"
#include "utcp/udp_socket.hpp"

namespace {

using namespace std::chrono_literals;
using utcp::Endpoint;
using utcp::Instant;
using utcp::PollEntry;
using utcp::Stack;
using utcp::TcpListener;
using utcp::TcpSocket;
using utcp::TcpState;
using utcp::wire::Ipv4Address;
using Bytes = std::vector<std::uint8_t>;

constexpr Instant start{std::chrono::seconds(1000)};
constexpr Ipv4Address address_a = Ipv4Address::from_octets(10, 0, 0, 1);
constexpr Ipv4Address address_b = Ipv4Address::from_octets(10, 0, 0, 2);
constexpr std::uint16_t port = 5001;

std::error_code errc(std::errc code) { return std::make_error_code(code); }

Bytes pattern(std::size_t size, std::uint32_t seed = 1) {
  Bytes bytes(size);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& byte : bytes) {
    x = x * 1664525u + 1013904223u;
    byte = static_cast<std::uint8_t>(x >> 24);
  }
  return bytes;
}

// `packet` with the first `length` bytes after its first 20 (room left for
// the header) framed as an IPv4 datagram of `protocol`.
Bytes framed_in_ipv4(Bytes packet, std::size_t length, std::uint8_t protocol, Ipv4Address source,
                     Ipv4Address destination) {
  utcp::wire::Ipv4Header ip;
  ip.protocol = protocol;
  ip.time_to_live = 64;
  ip.source = source;
  ip.destination = destination;
  packet.resize(utcp::wire::emit_ipv4(ip, std::span(packet).subspan(20, length), packet));
  return packet;
}

utcp::StackConfig config_for(Ipv4Address address) {
  utcp::StackConfig config;
  config.address = address;
  config.prefix_length = 24;
  config.tcp_secret = 7;  // the same sequence numbers every run
  return config;
}

// A link that passes everything to another; the two below change one thing each.
class ForwardingLink : public utcp::Link {
 public:
  explicit ForwardingLink(utcp::Link& inner) : inner_(inner) {}
  std::size_t mtu() const override { return inner_.mtu(); }
  bool reaches(Ipv4Address next_hop) const override { return inner_.reaches(next_hop); }
  bool transmit(Ipv4Address next_hop, std::span<const std::uint8_t> packet) override {
    return inner_.transmit(next_hop, packet);
  }
  std::size_t receive(const utcp::PacketSink& deliver, std::size_t budget) override {
    return inner_.receive(deliver, budget);
  }

 private:
  utcp::Link& inner_;
};

// A's link, as a VIA link whose VI copies a packet's pieces itself: it
// takes packets up to gather_limit bytes as headers and payload apart
// (counted), and passes them on whole.
class GatheringLink final : public ForwardingLink {
 public:
  GatheringLink(utcp::Link& inner, std::size_t gather_limit) : ForwardingLink(inner), gather_limit_(gather_limit) {}
  std::size_t max_gathered(Ipv4Address) const override { return gather_limit_; }
  bool transmit_gathered(Ipv4Address next_hop, std::span<const std::uint8_t> head,
                         std::span<const std::uint8_t> body) override {
    EXPECT_LE(head.size() + body.size(), gather_limit_);
    ++gathered_;
    return Link::transmit_gathered(next_hop, head, body);
  }
  std::size_t gathered() const { return gathered_; }

 private:
  std::size_t gather_limit_;
  std::size_t gathered_ = 0;
};

// B's link, as a VIA link with so many receive buffers per peer: it says
// how many packets it holds (receive_packets_per_peer) and passes them on.
class BoundedReceiveLink final : public ForwardingLink {
 public:
  BoundedReceiveLink(utcp::Link& inner, std::size_t packets) : ForwardingLink(inner), packets_(packets) {}
  std::size_t receive_packets_per_peer() const override { return packets_; }

 private:
  std::size_t packets_;
};

// Two stacks, A and B, each on a MemoryLink whose other end the box holds.
// With a gather limit, A's link gathers packets up to it (GatheringLink);
// with a receive bound, B's link holds that many packets (BoundedReceiveLink).
class Network : public utcp::Waiter {
 public:
  // Gets the packets one side sent in one step, on their way to the other;
  // it may drop, duplicate, reorder or change them.
  using Tamper = std::function<void(std::vector<Bytes>& packets, bool a_to_b)>;

  explicit Network(std::size_t mtu = 9000, std::optional<std::size_t> gather_limit = std::nullopt,
                   std::size_t b_receive_packets = 0) {
    auto [a_end, a_box] = utcp::MemoryLink::make_pair(mtu);
    auto [b_end, b_box] = utcp::MemoryLink::make_pair(mtu);
    a_link_ = std::move(a_end);
    a_box_ = std::move(a_box);
    b_link_ = std::move(b_end);
    b_box_ = std::move(b_box);
    if (gather_limit) a_gathering_link_ = std::make_unique<GatheringLink>(*a_link_, *gather_limit);
    a_ = std::make_unique<Stack>(a_gathering_link_ ? static_cast<utcp::Link&>(*a_gathering_link_) : *a_link_,
                                 config_for(address_a));
    if (b_receive_packets > 0) b_bounded_link_ = std::make_unique<BoundedReceiveLink>(*b_link_, b_receive_packets);
    b_ = std::make_unique<Stack>(b_bounded_link_ ? static_cast<utcp::Link&>(*b_bounded_link_) : *b_link_,
                                 config_for(address_b));
    a_->set_waiter(this);
    b_->set_waiter(this);
    step();
  }

  Stack& a() { return *a_; }
  Stack& b() { return *b_; }
  Instant now() const { return now_; }
  const GatheringLink* a_gathering_link() const { return a_gathering_link_.get(); }
  void set_tamper(Tamper tamper) { tamper_ = std::move(tamper); }

  // Runs both stacks and carries their packets across once. True if anything happened.
  bool step() {
    bool moved = a_->poll(now_);
    moved = b_->poll(now_) || moved;
    moved = carry(*a_box_, *b_box_, true) || moved;
    moved = carry(*b_box_, *a_box_, false) || moved;
    return moved;
  }

  // Hands B a packet as if A had sent it, and A one as if from B.
  void inject_to_b(const Bytes& packet) { b_box_->transmit(address_b, packet); }
  void inject_to_a(const Bytes& packet) { a_box_->transmit(address_a, packet); }
  // What B sent that the box has not carried yet.
  std::vector<Bytes> take_from_b() { return b_box_->take_all(); }

  bool wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) override {
    const Instant deadline = timeout ? now_ + *timeout : Instant::max();
    for (;;) {
      for (int steps = 0; step(); ++steps) {
        if (ready()) return true;
        if (steps > 1000000) {
          ADD_FAILURE() << "the stacks never settle";
          return false;
        }
      }
      if (ready()) return true;
      if (now_ >= deadline) return false;
      // Nothing moves: the clock jumps to the next timer.
      std::optional<Instant> next = a_->poll_at();
      if (const auto at_b = b_->poll_at(); at_b && (!next || *at_b < *next)) next = at_b;
      if (!next && !timeout) {
        ADD_FAILURE() << "waiting forever for something that cannot happen";
        return false;
      }
      now_ = std::min(deadline, next && *next > now_ ? *next : now_ + 1ms);
    }
  }

  // Lets virtual time pass, the stacks running.
  void run_for(std::chrono::milliseconds duration) { wait_until([] { return false; }, duration); }

 private:
  bool carry(utcp::MemoryLink& from, utcp::MemoryLink& to, bool a_to_b) {
    std::vector<Bytes> packets = from.take_all();
    if (packets.empty()) return false;
    if (tamper_) tamper_(packets, a_to_b);
    for (const Bytes& packet : packets) to.transmit(a_to_b ? address_b : address_a, packet);
    return true;
  }

  std::unique_ptr<utcp::MemoryLink> a_link_, a_box_, b_link_, b_box_;
  std::unique_ptr<GatheringLink> a_gathering_link_;
  std::unique_ptr<BoundedReceiveLink> b_bounded_link_;
  std::unique_ptr<Stack> a_, b_;
  Instant now_ = start;
  Tamper tamper_;
};

bool is_tcp_with_payload(const Bytes& packet) {
  const auto ip = utcp::wire::parse_ipv4(packet);
  return ip && ip->header.protocol == utcp::wire::ip_protocol::tcp &&
         ip->payload.size() > utcp::wire::tcp_min_header_length &&
         ip->payload.size() > std::size_t{(ip->payload[12] >> 4) * 4u};
}

class TcpSockets : public ::testing::Test {
 protected:
  TcpSockets() = default;
  explicit TcpSockets(std::size_t gather_limit) : net_(9000, gather_limit) {}
  TcpSockets(std::optional<std::size_t> gather_limit, std::size_t b_receive_packets)
      : net_(9000, gather_limit, b_receive_packets) {}

  // A connected pair: client on A, server on B (accepted from listener_).
  void connect_pair(TcpSocket& client, std::optional<TcpSocket>& server) {
    ASSERT_FALSE(listener_.listen({{}, port}));
    ASSERT_EQ(client.connect({address_b, port}), std::error_code());
    auto accepted = listener_.accept();
    ASSERT_TRUE(accepted) << accepted.error().message();
    server.emplace(std::move(*accepted));
  }

  // Reads until `size` bytes came or the stream ended.
  static Bytes read_exactly(TcpSocket& socket, std::size_t size) {
    Bytes got, buffer(65536);
    while (got.size() < size) {
      const auto n = socket.receive(buffer);
      if (!n || *n == 0) break;
      got.insert(got.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(*n));
    }
    return got;
  }

  // Hands A an ICMP port unreachable from B quoting `quote` (a datagram's
  // header and first bytes), as a router on the way would.
  void inject_unreachable_to_a(std::span<const std::uint8_t> quote) {
    Bytes answer(200);
    const std::size_t length =
        utcp::wire::emit_icmp(utcp::wire::IcmpDestinationUnreachable{}, quote, std::span(answer).subspan(20));
    net_.inject_to_a(framed_in_ipv4(std::move(answer), length, utcp::wire::ip_protocol::icmp, address_b, address_a));
  }

  Network net_;
  TcpListener listener_{net_.b()};
};

TEST_F(TcpSockets, ConnectAcceptSendReceiveClose) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  EXPECT_EQ(client.state(), TcpState::established);
  EXPECT_EQ(server->state(), TcpState::established);
  EXPECT_EQ(client.remote_endpoint(), (Endpoint{address_b, port}));
  EXPECT_EQ(server->local_endpoint(), (Endpoint{address_b, port}));
  EXPECT_EQ(server->remote_endpoint(), client.local_endpoint());
  EXPECT_GE(client.local_endpoint()->port, 49152);

  const Bytes request = pattern(100000, 1), reply = pattern(3000, 2);
  ASSERT_EQ(client.send(request).value(), request.size());
  EXPECT_EQ(read_exactly(*server, request.size()), request);
  ASSERT_EQ(server->send(reply).value(), reply.size());
  EXPECT_EQ(read_exactly(client, reply.size()), reply);

  // Nothing more: EAGAIN non-blocking, and after the receive timeout.
  Bytes buffer(16);
  client.set_nonblocking(true);
  EXPECT_EQ(client.receive(buffer).error(), errc(std::errc::operation_would_block));
  client.set_nonblocking(false);
  client.set_receive_timeout(300ms);
  const Instant before = net_.now();
  EXPECT_EQ(client.receive(buffer).error(), errc(std::errc::operation_would_block));
  EXPECT_GE(net_.now() - before, 300ms);

  client.close();
  EXPECT_FALSE(client.is_open());
  EXPECT_EQ(client.send(request).error(), errc(std::errc::bad_file_descriptor));
  EXPECT_EQ(server->receive(buffer).value(), 0u);  // the end of the stream
  server->close();
  net_.run_for(1s);
  EXPECT_EQ(net_.a().counters().tcp.active_opens, 1u);
  EXPECT_EQ(net_.b().counters().tcp.passive_opens, 1u);
  EXPECT_EQ(net_.a().counters().tcp.bad_checksum + net_.b().counters().tcp.bad_checksum, 0u);
}

// SO_RCVBUF/SO_SNDBUF before connect (libviastack-preload's setsockopt):
// the window offered stays within the receive buffer; an open connection
// keeps its buffers.
TEST_F(TcpSockets, BufferSizesSetBeforeConnectBoundTheWindow) {
  TcpSocket client(net_.a());
  EXPECT_EQ(client.set_buffer_sizes(0, 4096), errc(std::errc::invalid_argument));
  ASSERT_EQ(client.set_buffer_sizes(8192, 16384), std::error_code());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  const std::optional<utcp::TcpInfo> info = client.info();
  ASSERT_TRUE(info);
  EXPECT_GT(info->receive_window, 0u);
  EXPECT_LE(info->receive_window, 16384u);
  EXPECT_EQ(client.set_buffer_sizes(8192, 65536), errc(std::errc::already_connected));
  const Bytes data = pattern(100000, 3);
  ASSERT_EQ(server->send(data).value(), data.size());
  EXPECT_EQ(read_exactly(client, data.size()), data);
}

// Over a link that gathers (utcp's VIA link on shm: the VI copies the
// headers and the payload from the send ring into the link), data segments
// leave as their headers and the payload where the connection keeps it:
// the stream arrives intact, the ring's wrap included, with valid checksums.
class TcpSocketsOverAGatheringLink : public TcpSockets {
 protected:
  TcpSocketsOverAGatheringLink() : TcpSockets(9000) {}
};

TEST_F(TcpSocketsOverAGatheringLink, DataSegmentsLeaveGatheredAndArriveIntact) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  const std::size_t gathered_before = net_.a_gathering_link()->gathered();
  // Three times round the 1 MiB send ring, a piece at a time (the buffers
  // of both sides could not hold it all unread).
  const std::size_t pieces = 12;
  const Bytes data = pattern(3 << 20, 4);
  const std::size_t piece = data.size() / pieces;
  for (std::size_t i = 0; i < pieces; ++i) {
    const std::span<const std::uint8_t> sending(data.data() + i * piece, piece);
    ASSERT_EQ(client.send(sending).value(), piece);
    ASSERT_EQ(read_exactly(*server, piece), Bytes(sending.begin(), sending.end())) << i;
  }
  const std::size_t segments = data.size() / 8948;  // at least this many carried data
  EXPECT_GE(net_.a_gathering_link()->gathered() - gathered_before, segments);
  EXPECT_EQ(net_.b().counters().tcp.bad_checksum, 0u);
  EXPECT_EQ(net_.a().counters().ip.link_refused, 0u);
}

// B's link holds 8 packets from a peer and drops what comes past them (a
// VIA link's receive buffers, no flow control beneath): B offers a window
// of 6 full-sized segments, not its 1 MiB buffer, and a stream larger than
// the window still arrives whole. Before, B offered 1 MiB: a sender could
// have 117 segments on their way into 8 buffers.
class TcpSocketsIntoABoundedLink : public TcpSockets {
 protected:
  TcpSocketsIntoABoundedLink() : TcpSockets(std::nullopt, 8) {}
};

TEST_F(TcpSocketsIntoABoundedLink, TheWindowOfferedStaysWithinTheLinksReceiveBuffers) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  const utcp::TcpInfo info = client.info().value();
  const std::uint32_t six_segments = 6u * (9000 - 40);  // of the MSS B announced (the MTU less IP and TCP headers)
  EXPECT_GT(info.send_window, 0u);
  EXPECT_LE(info.send_window, six_segments);
  std::size_t largest_in_flight = 0;
  const Bytes data = pattern(1 << 20, 7);
  std::size_t sent = 0;
  Bytes got;
  while (got.size() < data.size()) {
    if (sent < data.size()) {
      client.set_nonblocking(true);
      if (const auto n = client.send(std::span(data).subspan(sent))) sent += *n;
      client.set_nonblocking(false);
    }
    if (const auto now = client.info()) largest_in_flight = std::max(largest_in_flight, now->bytes_in_flight);
    const Bytes piece = read_exactly(*server, std::min<std::size_t>(65536, data.size() - got.size()));
    ASSERT_FALSE(piece.empty());
    got.insert(got.end(), piece.begin(), piece.end());
  }
  EXPECT_EQ(got, data);
  EXPECT_LE(largest_in_flight, six_segments);
  EXPECT_LE(server->info().value().receive_window, six_segments);
}

// A link that gathers only short packets: longer segments are built whole,
// as before, and both kinds arrive.
class TcpSocketsOverALinkGatheringShortPackets : public TcpSockets {
 protected:
  TcpSocketsOverALinkGatheringShortPackets() : TcpSockets(1000) {}
};

TEST_F(TcpSocketsOverALinkGatheringShortPackets, LongerSegmentsAreBuiltWhole) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  client.set_nodelay(true);
  const std::size_t gathered_before = net_.a_gathering_link()->gathered();
  const Bytes small = pattern(500, 5), large = pattern(100000, 6);
  ASSERT_EQ(client.send(small).value(), small.size());
  EXPECT_EQ(read_exactly(*server, small.size()), small);
  EXPECT_EQ(net_.a_gathering_link()->gathered() - gathered_before, 1u);
  ASSERT_EQ(client.send(large).value(), large.size());
  EXPECT_EQ(read_exactly(*server, large.size()), large);
  EXPECT_EQ(net_.b().counters().tcp.bad_checksum, 0u);
}

// A stream of writes that each fit the send buffer (64 KiB writes into 1
// MiB): each write takes in the ACKs that came meanwhile, so what the
// congestion window held back goes on without the program ever waiting.
// Before, the ACKs waited until the buffer filled and a write blocked: the
// link stood idle while the program filled the buffer.
TEST_F(TcpSockets, WritesThatFitTheBufferTakeInAcksAndKeepSending) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  client.set_nonblocking(true);  // a write that had to wait would fail instead
  const Bytes chunk = pattern(65536, 7);
  const std::uint64_t first_window = client.info()->congestion_window;
  std::size_t written = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(client.send(chunk).value(), chunk.size()) << i;
    written += chunk.size();
  }
  const utcp::TcpInfo info = *client.info();
  // More left than the first window allowed: ACKs were taken and answered.
  EXPECT_GT(written - info.bytes_unsent, first_window);
  EXPECT_GT(info.congestion_window, first_window);
  EXPECT_EQ(read_exactly(*server, written).size(), written);
}

// A reader blocked in receive() lends its buffer: the data that arrives
// while it waits is copied straight into it, not into the receive buffer
// and out again; what does not fit waits in the receive buffer for the next
// call, in order.
TEST_F(TcpSockets, AWaitingReaderGetsDataStraightIntoItsBuffer) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  const Bytes data = pattern(30000, 8);
  ASSERT_EQ(client.send(data).value(), data.size());
  // Waits (nothing has crossed yet): the first window's segments fill part of it.
  Bytes first(20000);
  const std::size_t got = server->receive(first).value();
  ASSERT_GT(got, 0u);
  EXPECT_EQ(Bytes(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(got)),
            Bytes(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(got)));
  EXPECT_EQ(server->counters()->bytes_in_directly, got);
  // The rest, arrived before the next receive: through the receive buffer.
  net_.run_for(10ms);
  EXPECT_EQ(read_exactly(*server, data.size() - got), Bytes(data.begin() + static_cast<std::ptrdiff_t>(got), data.end()));
  EXPECT_EQ(server->counters()->bytes_in_directly, got);
  EXPECT_EQ(server->counters()->bytes_in, data.size());

  // A lent buffer smaller than what comes: it fills, the rest waits in order.
  ASSERT_EQ(client.send(data).value(), data.size());
  Bytes small(1000);
  ASSERT_EQ(server->receive(small).value(), small.size());
  EXPECT_EQ(small, Bytes(data.begin(), data.begin() + 1000));
  EXPECT_EQ(server->counters()->bytes_in_directly, got + 1000);
  EXPECT_EQ(read_exactly(*server, data.size() - 1000), Bytes(data.begin() + 1000, data.end()));
}

TEST_F(TcpSockets, ClosedPortRefusesWithReset) {
  TcpSocket client(net_.a());
  EXPECT_EQ(client.connect({address_b, 6000}), errc(std::errc::connection_refused));
  EXPECT_EQ(net_.b().counters().tcp.no_connection, 1u);
  EXPECT_EQ(net_.b().counters().tcp.resets_out, 1u);
  EXPECT_EQ(client.take_error(), std::error_code());  // reported by connect already
  EXPECT_EQ(client.state(), TcpState::closed);
}

TEST_F(TcpSockets, SegmentToAnUnknownPortGetsAReset) {
  // A bare ACK from nowhere: <SEQ=SEG.ACK><CTL=RST> (RFC 9293 §3.10.7.1).
  utcp::wire::TcpHeader header;
  header.source_port = 40000;
  header.destination_port = 7777;
  header.sequence = utcp::wire::SeqNumber(1000);
  header.acknowledgment = utcp::wire::SeqNumber(123456);
  header.flags = utcp::wire::tcp_flags::ack;
  header.window = 1000;
  Bytes packet(100);
  const std::size_t tcp_length =
      utcp::wire::emit_tcp(header, address_a, address_b, {}, std::span(packet).subspan(20));
  net_.inject_to_b(framed_in_ipv4(std::move(packet), tcp_length, utcp::wire::ip_protocol::tcp, address_a, address_b));
  net_.b().poll(net_.now());

  const std::vector<Bytes> answers = net_.take_from_b();
  ASSERT_EQ(answers.size(), 1u);
  const auto answer_ip = utcp::wire::parse_ipv4(answers[0]);
  ASSERT_TRUE(answer_ip);
  const auto reset = utcp::wire::parse_tcp(answer_ip->payload, address_b, address_a);
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->header.flags, utcp::wire::tcp_flags::rst);
  EXPECT_EQ(reset->header.sequence, utcp::wire::SeqNumber(123456));
  EXPECT_EQ(reset->header.source_port, 7777);
  EXPECT_EQ(reset->header.destination_port, 40000);
  EXPECT_EQ(net_.b().counters().tcp.no_connection, 1u);
}

TEST_F(TcpSockets, ConnectTimesOutWhenNothingComesBack) {
  net_.set_tamper([](std::vector<Bytes>& packets, bool) { packets.clear(); });
  TcpSocket client(net_.a());
  const Instant before = net_.now();
  EXPECT_EQ(client.connect({address_b, port}), errc(std::errc::timed_out));
  EXPECT_GT(net_.now() - before, 20s);  // the SYN retried with backoff: 1 + 2 + 4, then max_rto (4 s) four times
  EXPECT_EQ(net_.b().counters().tcp.segments_in, 0u);
}

TEST_F(TcpSockets, IcmpPortUnreachableRefusesAnOpeningConnection) {
  // The box answers A's SYN with a port unreachable quoting it, instead of carrying it.
  net_.set_tamper([this](std::vector<Bytes>& packets, bool a_to_b) {
    if (!a_to_b) return;
    for (const Bytes& packet : packets) inject_unreachable_to_a(utcp::wire::icmp_error_quote(packet));
    packets.clear();
  });
  TcpSocket client(net_.a());
  EXPECT_EQ(client.connect({address_b, port}), errc(std::errc::connection_refused));
  EXPECT_EQ(net_.a().counters().tcp.unreachable_in, 1u);
}

// RFC 5927 §4.1: an ICMP error whose quoted segment is not in flight (its
// sequence number outside SND.UNA..SND.NXT) is dropped and counted, and the
// connection opens.
TEST_F(TcpSockets, IcmpErrorQuotingASequenceNumberNotInFlightIsIgnored) {
  ASSERT_FALSE(listener_.listen({{}, port}));
  bool answered = false;
  net_.set_tamper([&](std::vector<Bytes>& packets, bool a_to_b) {
    if (!a_to_b || answered || packets.empty()) return;
    answered = true;
    Bytes quote(utcp::wire::icmp_error_quote(packets.front()).begin(),
                utcp::wire::icmp_error_quote(packets.front()).end());
    quote.at(20 + 7) ^= 0x01;  // the SYN's sequence number, now one that was never sent
    inject_unreachable_to_a(quote);
  });
  TcpSocket client(net_.a());
  EXPECT_EQ(client.connect({address_b, port}), std::error_code());
  EXPECT_TRUE(answered);
  EXPECT_EQ(net_.a().counters().tcp.unreachable_in, 0u);
  EXPECT_EQ(net_.a().counters().tcp.unreachable_ignored, 1u);
}

// Urgent data reaches the application as such (RFC 9293 §3.8.5): the box
// marks A's data segment urgent up to its 10th byte; B's socket reports
// pri in poll and the urgent bytes left, the data itself stays in order in
// the stream, and both end once B has read past it.
TEST_F(TcpSockets, UrgentDataIsReportedByPollUntilReadPast) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  net_.set_tamper([](std::vector<Bytes>& packets, bool a_to_b) {
    for (Bytes& packet : packets) {
      if (!a_to_b || packet.size() <= 20 + 32) continue;  // headers alone (timestamps): no data
      const auto word = [&](std::size_t at) { return static_cast<std::uint16_t>(packet[at] << 8 | packet[at + 1]); };
      const auto set_word = [&](std::size_t at, std::uint16_t value) {
        const std::uint16_t checksum = utcp::wire::update_checksum(word(36), word(at), value);
        packet[at] = static_cast<std::uint8_t>(value >> 8);
        packet[at + 1] = static_cast<std::uint8_t>(value);
        packet[36] = static_cast<std::uint8_t>(checksum >> 8);
        packet[37] = static_cast<std::uint8_t>(checksum);
      };
      set_word(32, word(32) | utcp::wire::tcp_flags::urg);  // data offset and flags
      set_word(38, 10);                                // the urgent pointer
    }
  });
  const Bytes data = pattern(100);
  ASSERT_EQ(client.send(data).value(), data.size());
  PollEntry entries[] = {{&*server, utcp::poll_events::in | utcp::poll_events::pri}};
  ASSERT_EQ(utcp::poll(net_.b(), entries, 5s).value(), 1u);
  EXPECT_EQ(entries[0].revents, utcp::poll_events::in | utcp::poll_events::pri);
  EXPECT_EQ(server->info()->urgent_bytes, 10u);
  EXPECT_EQ(read_exactly(*server, 100), data);
  EXPECT_EQ(server->info()->urgent_bytes, 0u);
  EXPECT_EQ(utcp::poll(net_.b(), entries, 0s).value(), 0u);
}

TEST_F(TcpSockets, NonBlockingConnectThenPollForWritable) {
  ASSERT_FALSE(listener_.listen({{}, port}));
  TcpSocket client(net_.a());
  client.set_nonblocking(true);
  ASSERT_EQ(client.connect({address_b, port}), errc(std::errc::operation_in_progress));
  EXPECT_EQ(client.connect({address_b, port}), errc(std::errc::connection_already_in_progress));
  EXPECT_FALSE(client.writable());
  PollEntry entries[] = {{&client, utcp::poll_events::out}};
  ASSERT_EQ(utcp::poll(net_.a(), entries, 5s).value(), 1u);
  EXPECT_EQ(entries[0].revents, utcp::poll_events::out);
  EXPECT_EQ(client.take_error(), std::error_code());
  EXPECT_EQ(client.state(), TcpState::established);
  EXPECT_EQ(client.connect({address_b, port}), errc(std::errc::already_connected));

  // A non-blocking connect that fails: writable, and the error from take_error once.
  TcpSocket refused(net_.a());
  refused.set_nonblocking(true);
  ASSERT_EQ(refused.connect({address_b, port + 1}), errc(std::errc::operation_in_progress));
  PollEntry failed[] = {{&refused, utcp::poll_events::out}};
  ASSERT_EQ(utcp::poll(net_.a(), failed, 5s).value(), 1u);
  EXPECT_TRUE(failed[0].revents & utcp::poll_events::err);
  EXPECT_TRUE(failed[0].revents & utcp::poll_events::hup);
  EXPECT_EQ(refused.take_error(), errc(std::errc::connection_refused));
  EXPECT_EQ(refused.take_error(), std::error_code());
}

TEST_F(TcpSockets, PollOverSocketsListenerAndUdp) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  utcp::UdpSocket udp(net_.b());
  ASSERT_FALSE(udp.bind({{}, 9000}));
  TcpSocket idle_client(net_.a());
  PollEntry entries[] = {
      {&*server, utcp::poll_events::in},
      {&listener_, utcp::poll_events::in},
      {&udp, utcp::poll_events::in},
  };
  // Nothing to read yet: a zero timeout just looks, a longer one waits it out.
  EXPECT_EQ(utcp::poll(net_.b(), entries, 0ms).value(), 0u);
  const Instant before = net_.now();
  EXPECT_EQ(utcp::poll(net_.b(), entries, 200ms).value(), 0u);
  EXPECT_EQ(net_.now() - before, 200ms);

  utcp::UdpSocket sender(net_.a());
  ASSERT_TRUE(sender.send_to(pattern(10), {address_b, 9000}));
  ASSERT_EQ(utcp::poll(net_.b(), entries, 1s).value(), 1u);
  EXPECT_EQ(entries[2].revents, utcp::poll_events::in);

  ASSERT_TRUE(client.send(pattern(10)));
  idle_client.set_nonblocking(true);
  ASSERT_EQ(idle_client.connect({address_b, port}), errc(std::errc::operation_in_progress));
  net_.run_for(10ms);
  ASSERT_EQ(utcp::poll(net_.b(), entries, 0ms).value(), 3u);
  EXPECT_EQ(entries[0].revents, utcp::poll_events::in);
  EXPECT_EQ(entries[1].revents, utcp::poll_events::in);
  EXPECT_EQ(entries[2].revents, utcp::poll_events::in);
}

TEST_F(TcpSockets, BacklogBoundsConnectionsWaitingForAccept) {
  ASSERT_FALSE(listener_.listen({{}, port}, 2));
  // The backlog bounds established connections not yet accepted (half-open
  // ones are bounded apart, StackConfig::tcp_max_half_open): the third SYN
  // comes once the first two are established.
  std::vector<TcpSocket> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back(net_.a());
    clients.back().set_nonblocking(true);
    ASSERT_EQ(clients.back().connect({address_b, port}), errc(std::errc::operation_in_progress));
    net_.run_for(10ms);
  }
  net_.run_for(100ms);
  EXPECT_EQ(clients[0].state(), TcpState::established);
  EXPECT_EQ(clients[1].state(), TcpState::established);
  EXPECT_EQ(clients[2].state(), TcpState::syn_sent);  // its SYN was dropped
  EXPECT_EQ(net_.b().counters().tcp.backlog_drops, 1u);

  listener_.set_nonblocking(true);
  ASSERT_TRUE(listener_.accept());
  ASSERT_TRUE(listener_.accept());
  EXPECT_EQ(listener_.accept().error(), errc(std::errc::operation_would_block));
  // The SYN's retransmission finds room now.
  listener_.set_nonblocking(false);
  listener_.set_accept_timeout(5s);
  ASSERT_TRUE(listener_.accept());
  EXPECT_EQ(clients[2].state(), TcpState::established);
}

TEST_F(TcpSockets, ShutdownWriteEndsThePeersStreamOnly) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  ASSERT_TRUE(client.send(pattern(5000)));
  ASSERT_FALSE(client.shutdown(utcp::Shutdown::write));
  EXPECT_EQ(client.send(pattern(1)).error(), errc(std::errc::broken_pipe));
  EXPECT_EQ(read_exactly(*server, 6000), pattern(5000));  // then 0: the end
  Bytes buffer(10);
  EXPECT_EQ(server->receive(buffer).value(), 0u);
  // The other way still works.
  ASSERT_TRUE(server->send(pattern(700, 3)));
  EXPECT_EQ(read_exactly(client, 700), pattern(700, 3));
  ASSERT_FALSE(server->shutdown(utcp::Shutdown::write));
  EXPECT_EQ(client.receive(buffer).value(), 0u);
  net_.run_for(10ms);
  PollEntry entries[] = {{&client, utcp::poll_events::in}};
  ASSERT_EQ(utcp::poll(net_.a(), entries, 0ms).value(), 1u);
  EXPECT_EQ(entries[0].revents, utcp::poll_events::in | utcp::poll_events::hup);
}

TEST_F(TcpSockets, AbortResetsThePeer) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  client.abort();
  EXPECT_FALSE(client.is_open());
  Bytes buffer(10);
  EXPECT_EQ(server->receive(buffer).error(), errc(std::errc::connection_reset));
  EXPECT_EQ(server->state(), TcpState::closed);
  EXPECT_EQ(server->send(pattern(1)).error(), errc(std::errc::connection_reset));
}

TEST_F(TcpSockets, AddressInUseAndOtherBindErrors) {
  ASSERT_FALSE(listener_.listen({{}, port}));
  EXPECT_EQ(listener_.listen({{}, port + 1}), errc(std::errc::invalid_argument));
  TcpListener second(net_.b());
  EXPECT_EQ(second.listen({{}, port}), errc(std::errc::address_in_use));
  TcpSocket socket(net_.b());
  EXPECT_EQ(socket.bind({{}, port}), errc(std::errc::address_in_use));
  EXPECT_EQ(socket.bind({address_a, port + 1}), errc(std::errc::address_not_available));
  ASSERT_FALSE(socket.bind({address_b, port + 1}));
  EXPECT_EQ(socket.bind({{}, port + 2}), errc(std::errc::invalid_argument));
  EXPECT_EQ(second.listen({{}, port + 1}), errc(std::errc::address_in_use));
  // A UDP port of the same number is another port.
  utcp::UdpSocket udp(net_.b());
  EXPECT_FALSE(udp.bind({{}, port}));
  // Closing frees the port.
  listener_.close();
  EXPECT_FALSE(second.listen({{}, port}));
  // Errors of an unconnected or closed socket.
  Bytes buffer(4);
  EXPECT_EQ(socket.send(buffer).error(), errc(std::errc::not_connected));
  EXPECT_EQ(socket.receive(buffer).error(), errc(std::errc::not_connected));
  EXPECT_EQ(socket.shutdown(utcp::Shutdown::both), errc(std::errc::not_connected));
  socket.close();
  EXPECT_EQ(socket.bind({{}, 0}), errc(std::errc::bad_file_descriptor));
  TcpSocket unroutable(net_.a());
  EXPECT_EQ(unroutable.connect({Ipv4Address::from_octets(192, 168, 1, 1), port}),
            errc(std::errc::network_unreachable));
}

TEST_F(TcpSockets, SegmentWithABadChecksumIsCountedAndDropped) {
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  bool corrupted = false;
  net_.set_tamper([&](std::vector<Bytes>& packets, bool a_to_b) {
    for (Bytes& packet : packets)
      if (a_to_b && !corrupted && is_tcp_with_payload(packet)) {
        packet.back() ^= 0x40;  // in the payload: the IP header stays good
        corrupted = true;
      }
  });
  ASSERT_TRUE(client.send(pattern(1000)));
  EXPECT_EQ(read_exactly(*server, 1000), pattern(1000));  // retransmitted
  EXPECT_TRUE(corrupted);
  EXPECT_EQ(net_.b().counters().tcp.bad_checksum, 1u);
  EXPECT_EQ(net_.b().counters().ip.bad_checksum, 0u);
}

// Several MiB each way at MTU 1500 through a box that drops, duplicates and
// reorders; both sides non-blocking, driven by poll.
TEST(TcpLossyLink, LargeTransferBothWaysArrivesIntact) {
  Network net(1500);
  std::mt19937 random(5);
  std::uint64_t dropped = 0, duplicated = 0, reordered = 0;
  net.set_tamper([&](std::vector<Bytes>& packets, bool) {
    std::vector<Bytes> out;
    for (Bytes& packet : packets) {
      const double draw = std::uniform_real_distribution<double>(0, 1)(random);
      if (draw < 0.02) {
        ++dropped;
        continue;
      }
      if (draw < 0.03) {
        ++duplicated;
        out.push_back(packet);
      }
      out.push_back(std::move(packet));
      if (draw > 0.98 && out.size() >= 2) {
        ++reordered;
        std::swap(out[out.size() - 1], out[out.size() - 2]);
      }
    }
    packets = std::move(out);
  });
  TcpListener listener(net.b());
  ASSERT_FALSE(listener.listen({{}, port}));
  TcpSocket client(net.a());
  ASSERT_FALSE(client.connect({address_b, port}));
  auto accepted = listener.accept();
  ASSERT_TRUE(accepted);
  TcpSocket server = std::move(*accepted);

  const std::size_t size = 6u << 20;
  const Bytes to_server = pattern(size, 11), to_client = pattern(size, 12);
  TcpSocket* sockets[] = {&client, &server};
  const Bytes* outgoing[] = {&to_server, &to_client};
  std::size_t sent[2] = {};
  Bytes received[2];
  bool ended[2] = {};
  Bytes buffer(1 << 16);
  for (TcpSocket* socket : sockets) socket->set_nonblocking(true);
  while (!ended[0] || !ended[1]) {
    // Writable stays true after the last send, readable after the end of the
    // stream, and a side with both FINs behind it reports a hang-up: a side
    // is polled for what it still needs and only until it is done, or poll
    // never waits.
    std::vector<PollEntry> entries;
    int side_of[2];
    for (int side = 0; side < 2; ++side) {
      const short wanted = static_cast<short>((ended[side] ? 0 : utcp::poll_events::in) |
                                              (sent[side] < size ? utcp::poll_events::out : 0));
      if (wanted == 0) continue;
      side_of[entries.size()] = side;
      entries.push_back({sockets[side], wanted});
    }
    ASSERT_GT(utcp::poll(net.a(), entries, 60s).value(), 0u);
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const int side = side_of[e];
      const short revents = entries[e].revents;
      TcpSocket& socket = *sockets[side];
      if ((revents & utcp::poll_events::out) && sent[side] < size) {
        const auto n = socket.send(std::span(*outgoing[side]).subspan(sent[side], std::min<std::size_t>(size - sent[side], 100000)));
        ASSERT_TRUE(n) << n.error().message();
        sent[side] += *n;
        if (sent[side] == size) {
          ASSERT_FALSE(socket.shutdown(utcp::Shutdown::write));
        }
      }
      if (revents & utcp::poll_events::in) {
        const auto n = socket.receive(buffer);
        ASSERT_TRUE(n) << n.error().message();
        if (*n == 0) ended[side] = true;
        received[side].insert(received[side].end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(*n));
      }
    }
  }
  EXPECT_TRUE(received[0] == to_client);
  EXPECT_TRUE(received[1] == to_server);
  EXPECT_GT(dropped, 0u);
  EXPECT_GT(duplicated, 0u);
  EXPECT_GT(reordered, 0u);
  EXPECT_GT(client.counters()->retransmitted_segments + server.counters()->retransmitted_segments, 0u);
}

// Linux's SO_REUSEADDR rules: a connection in TIME-WAIT keeps its quad from
// being used again until it ends, but not its port from a new listener.
TEST_F(TcpSockets, TimeWaitBlocksTheQuadButNotANewListener) {
  ASSERT_FALSE(listener_.listen({{}, port}));
  TcpSocket client(net_.a());
  ASSERT_FALSE(client.bind({{}, 40000}));
  ASSERT_FALSE(client.connect({address_b, port}));
  auto server = listener_.accept();
  ASSERT_TRUE(server);
  // The server closes first: its side ends in TIME-WAIT on port 5001.
  server->close();
  Bytes buffer(8);
  EXPECT_EQ(client.receive(buffer).value(), 0u);
  client.close();
  net_.run_for(1s);

  listener_.close();
  TcpListener again(net_.b());
  EXPECT_FALSE(again.listen({{}, port}));

  // The client's side is CLOSED (LAST-ACK acknowledged): its quad is free.
  // From B, the quad (5001, A:40000) is in TIME-WAIT: a socket bound to
  // 5001 cannot connect to A:40000 until it ends.
  TcpListener on_a(net_.a());
  ASSERT_FALSE(on_a.listen({{}, 40000}));
  again.close();
  TcpSocket reuse(net_.b());
  ASSERT_FALSE(reuse.bind({{}, port}));
  EXPECT_EQ(reuse.connect({address_a, 40000}), errc(std::errc::address_in_use));
  net_.run_for(61s);  // 2 MSL
  EXPECT_FALSE(reuse.connect({address_a, 40000}));
}

// TCP_CONGESTION: a socket or listener names its controller before connect
// or listen; a name no controller has is refused and changes nothing.
TEST_F(TcpSockets, CongestionControlIsChosenPerSocketBeforeConnecting) {
  TcpSocket client(net_.a());
  EXPECT_EQ(client.set_congestion_control("vegas"), errc(std::errc::no_such_file_or_directory));
  EXPECT_FALSE(client.set_congestion_control("newreno"));
  EXPECT_EQ(listener_.set_congestion_control("vegas"), errc(std::errc::no_such_file_or_directory));
  EXPECT_FALSE(listener_.set_congestion_control("newreno"));
  utcp::TcpConfig bad;
  bad.congestion_control = "vegas";
  EXPECT_EQ(listener_.set_config(bad), errc(std::errc::no_such_file_or_directory));
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  EXPECT_EQ(client.info()->congestion_control, "newreno");
  EXPECT_EQ(server->info()->congestion_control, "newreno");
  EXPECT_EQ(client.set_congestion_control("cubic"), errc(std::errc::already_connected));
  EXPECT_EQ(listener_.set_congestion_control("cubic"), errc(std::errc::invalid_argument));
  TcpSocket other(net_.a());
  ASSERT_FALSE(other.connect({address_b, port}));
  EXPECT_EQ(other.info()->congestion_control, "bbr");  // the default
}

TEST_F(TcpSockets, VariableChoosesTheControllerOfSocketsThatNameNone) {
  setenv("VIASTACK_UTCP_CC", "newreno", 1);
  TcpSocket client(net_.a());
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  unsetenv("VIASTACK_UTCP_CC");
  EXPECT_EQ(client.info()->congestion_control, "newreno");
  EXPECT_EQ(server->info()->congestion_control, "newreno");
}

// A StackConfig naming no controller: connect and listen refuse with ENOENT
// before a port is taken or a SYN sent.
TEST(TcpSocketConfig, AnUnknownControllerInTheStacksDefaultsIsRefused) {
  auto [link, other_end] = utcp::MemoryLink::make_pair(1500);
  utcp::StackConfig config = config_for(address_a);
  config.tcp.congestion_control = "vegas";
  Stack stack(*link, config);
  TcpSocket socket(stack);
  EXPECT_EQ(socket.connect({address_b, port}), errc(std::errc::no_such_file_or_directory));
  EXPECT_FALSE(socket.local_endpoint());
  EXPECT_TRUE(other_end->take_all().empty());
  TcpListener listener(stack);
  EXPECT_EQ(listener.listen({{}, port}), errc(std::errc::no_such_file_or_directory));
  EXPECT_FALSE(listener.local_endpoint());
}

// The cwnd trace set on a socket before connect follows its connection.
TEST_F(TcpSockets, CongestionTraceSetBeforeConnectReportsTheTransfer) {
  TcpSocket client(net_.a());
  std::vector<utcp::CongestionSample> samples;
  client.set_congestion_trace([&](const utcp::CongestionSample& sample) { samples.push_back(sample); });
  std::optional<TcpSocket> server;
  connect_pair(client, server);
  ASSERT_FALSE(samples.empty());
  EXPECT_EQ(samples.front().phase, utcp::CongestionPhase::slow_start);
  const Bytes data = pattern(200000, 5);
  ASSERT_EQ(client.send(data).value(), data.size());
  EXPECT_EQ(read_exactly(*server, data.size()), data);
  net_.run_for(1s);
  EXPECT_GT(samples.back().cwnd, samples.front().cwnd);  // slow start grew it
  EXPECT_EQ(samples.back().cwnd, client.info()->congestion_window);
}

}  // namespace
