// TcpConnection: data both ways, acknowledgments (delayed, every second
// segment, at once for reordering), the out-of-order queue, windows (the
// acceptability test, updates, scaling, zero window), Nagle, PAWS, and
// sequence numbers wrapping.
#include <array>

#include "tcp_connection_harness.hpp"

namespace utcp::testing {
namespace {

using DataTest = ConnectionTest;
using WindowTest = ConnectionTest;

TEST_F(DataTest, SendsFullSegmentsWithPushOnTheLast) {
  open_active();
  const auto data = pattern(2500);
  send(data);
  const SentSegment first = next_sent();
  const SentSegment second = next_sent();
  const SentSegment third = next_sent();
  EXPECT_EQ(first.header.sequence, SeqNumber(iss + 1));
  EXPECT_EQ(first.payload.size(), 1000u);
  EXPECT_EQ(second.header.sequence, SeqNumber(iss + 1001));
  EXPECT_EQ(third.header.sequence, SeqNumber(iss + 2001));
  EXPECT_EQ(third.payload.size(), 500u);
  EXPECT_FALSE(second.header.has(flag::psh));
  EXPECT_TRUE(third.header.has(flag::psh));  // Nagle (Minshall's form) lets it go: no small segment is out
  std::vector<std::uint8_t> joined = first.payload;
  joined.insert(joined.end(), second.payload.begin(), second.payload.end());
  joined.insert(joined.end(), third.payload.begin(), third.payload.end());
  EXPECT_EQ(joined, data);
  EXPECT_EQ(connection->info().bytes_in_flight, 2500u);
  EXPECT_EQ(connection->counters().bytes_out, 2500u);

  feed(from_peer(peer_iss + 1, iss + 2501, flag::ack));
  EXPECT_TRUE(connection->all_acknowledged());
  // No timer but the one that gives the emptied send buffer back a second later.
  EXPECT_EQ(connection->next_timer(), now + 1s);
  run_for(1s);
  EXPECT_FALSE(connection->next_timer());
}

TEST_F(DataTest, ReceivesInOrderData) {
  open_active();
  const auto data = pattern(700, 3);
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack | flag::psh), data);
  EXPECT_TRUE(connection->readable());
  EXPECT_EQ(connection->info().bytes_readable, 700u);
  std::array<std::uint8_t, 300> part{};
  ASSERT_EQ(*connection->receive(part, now), 300u);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin()));
  EXPECT_EQ(receive_all(), std::vector<std::uint8_t>(data.begin() + 300, data.end()));
  EXPECT_EQ(connection->receive(part, now).error(), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(connection->counters().bytes_in, 700u);
}

// RFC 9293 §3.8.5: the application learns of urgent data, and how much of it
// is left to read. The urgent pointer points past the last urgent byte (RFC
// 6093); the data stays in the stream. How many bytes from the next one read
// lead up to the pointer is reported until they are read, and again when
// the pointer advances; one that does not advance changes nothing.
TEST_F(DataTest, UrgentDataIsReportedUntilReadPast) {
  open_active();
  EXPECT_EQ(connection->info().urgent_bytes, 0u);
  TcpHeader segment = from_peer(peer_iss + 1, iss + 1, flag::ack | flag::psh | flag::urg);
  segment.urgent_pointer = 60;
  feed(segment, pattern(100));
  EXPECT_EQ(connection->info().urgent_bytes, 60u);
  EXPECT_EQ(connection->counters().urgent_in, 1u);
  std::array<std::uint8_t, 50> part{};
  ASSERT_EQ(*connection->receive(part, now), 50u);
  EXPECT_EQ(connection->info().urgent_bytes, 10u);
  ASSERT_EQ(*connection->receive(part, now), 50u);
  EXPECT_EQ(connection->info().urgent_bytes, 0u);

  // A pointer past the data received: urgent data still to come.
  segment.sequence = SeqNumber(peer_iss + 101);
  segment.urgent_pointer = 500;
  feed(segment, pattern(100));
  EXPECT_EQ(connection->info().urgent_bytes, 500u);
  // The rest of that segment's stream, with the same pointer: no news.
  segment.sequence = SeqNumber(peer_iss + 201);
  segment.urgent_pointer = 400;
  feed(segment, pattern(100));
  EXPECT_EQ(connection->info().urgent_bytes, 500u);
  EXPECT_EQ(connection->counters().urgent_in, 2u);
  EXPECT_EQ(receive_all().size(), 200u);
  EXPECT_EQ(connection->info().urgent_bytes, 300u);
}

TEST_F(DataTest, EchoBothWaysPiggybacksTheAck) {
  open_active();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack | flag::psh), pattern(100));
  EXPECT_TRUE(sent.empty());  // the ACK is delayed...
  send(receive_all());
  const SentSegment reply = next_sent();  // ...and rides on the reply
  EXPECT_EQ(reply.header.acknowledgment, SeqNumber(peer_iss + 101));
  EXPECT_EQ(reply.payload, pattern(100));
  EXPECT_FALSE(connection->next_timer() && *connection->next_timer() < now + 40ms);
}

TEST_F(DataTest, DelayedAckTimer) {
  open_active();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), pattern(100));
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(connection->next_timer(), now + 40ms);
  run_for(39ms);
  EXPECT_TRUE(sent.empty());
  run_for(1ms);
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 101));
  EXPECT_FALSE(connection->next_timer());
}

TEST_F(DataTest, AckEverySecondFullSegment) {
  open_active();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), pattern(1000));
  EXPECT_TRUE(sent.empty());
  feed(from_peer(peer_iss + 1001, iss + 1, flag::ack), pattern(1000));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 2001));
  feed(from_peer(peer_iss + 2001, iss + 1, flag::ack), pattern(1000));
  EXPECT_TRUE(sent.empty());
}

TEST_F(DataTest, DelayedAckOffAcksEverySegment) {
  config.delayed_ack = false;
  open_active();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), pattern(10));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 11));
}

TEST_F(DataTest, OutOfOrderSegmentsAreHeldThenDeliveredInOrder) {
  open_active();
  const auto data = pattern(3000, 9);
  const std::span<const std::uint8_t> bytes(data);
  feed(from_peer(peer_iss + 2001, iss + 1, flag::ack), bytes.subspan(2000, 1000));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 1));  // a duplicate ACK at once
  feed(from_peer(peer_iss + 1001, iss + 1, flag::ack), bytes.subspan(1000, 1000));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 1));
  feed(from_peer(peer_iss + 2001, iss + 1, flag::ack), bytes.subspan(2000, 1000));  // a duplicate of one held
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 1));
  EXPECT_FALSE(connection->readable());
  EXPECT_EQ(connection->counters().out_of_order_segments, 3u);

  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), bytes.subspan(0, 1000));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 3001));  // the hole filled: at once
  EXPECT_EQ(receive_all(), data);
}

TEST_F(DataTest, OverlappingRetransmissionIsTrimmed) {
  open_active();
  const auto data = pattern(1500, 4);
  const std::span<const std::uint8_t> bytes(data);
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), bytes.first(1000));
  feed(from_peer(peer_iss + 501, iss + 1, flag::ack), bytes.subspan(500));  // 500 old bytes, 500 new
  EXPECT_EQ(receive_all(), data);
}

// A segment whose data all arrived already is unacceptable (§3.10.7.4), but
// the ACK riding on it may be new: the peer resent its data, and meanwhile
// received ours. As BSD (which trims such a segment to nothing and goes on),
// its ACK is taken; the data is not, and is answered with an ACK at once.
TEST_F(DataTest, TheAckOnADuplicateSegmentIsTaken) {
  open_active();
  send(pattern(500));
  next_sent();
  const auto data = pattern(100, 5);
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack | flag::psh), data);
  EXPECT_EQ(receive_all(), data);
  sent.clear();
  // The same data again, now acknowledging ours.
  feed(from_peer(peer_iss + 1, iss + 501, flag::ack | flag::psh), data);
  EXPECT_EQ(connection->info().bytes_in_flight, 0u);
  EXPECT_EQ(connection->info().bytes_readable, 0u);
  const SentSegment ack = next_sent();
  EXPECT_EQ(ack.header.acknowledgment, SeqNumber(peer_iss + 101));
  EXPECT_TRUE(ack.payload.empty());
  // One acknowledging what was never sent changes nothing.
  feed(from_peer(peer_iss + 1, iss + 900, flag::ack | flag::psh), data);
  EXPECT_EQ(connection->info().send_unacknowledged, SeqNumber(iss + 501));
}

TEST_F(DataTest, OutOfOrderFinIsTakenWhenTheHoleFills) {
  open_active();
  feed(from_peer(peer_iss + 101, iss + 1, flag::ack | flag::fin), pattern(100, 2));
  EXPECT_EQ(connection->state(), TcpState::established);
  next_sent();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), pattern(100, 1));
  EXPECT_EQ(connection->state(), TcpState::close_wait);
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 202));
  EXPECT_EQ(receive_all().size(), 200u);
  std::array<std::uint8_t, 1> buffer{};
  EXPECT_EQ(*connection->receive(buffer, now), 0u);
}

TEST_F(DataTest, NagleHoldsASmallSegmentWhileDataIsUnacknowledged) {
  open_active();
  send(pattern(100));
  EXPECT_EQ(next_sent().payload.size(), 100u);
  send(pattern(50));
  send(pattern(50));
  EXPECT_TRUE(sent.empty());
  feed(from_peer(peer_iss + 1, iss + 101, flag::ack));
  EXPECT_EQ(next_sent().payload.size(), 100u);  // the two small writes together
}

TEST_F(DataTest, NodelaySendsSmallSegmentsAtOnce) {
  config.nodelay = true;
  open_active();
  send(pattern(100));
  send(pattern(50));
  EXPECT_EQ(next_sent().payload.size(), 100u);
  EXPECT_EQ(next_sent().payload.size(), 50u);
}

TEST_F(DataTest, SetNodelayReleasesWhatNagleHeld) {
  open_active();
  send(pattern(100));
  send(pattern(50));
  next_sent();
  EXPECT_TRUE(sent.empty());
  connection->set_nodelay(true, now);
  EXPECT_EQ(next_sent().payload.size(), 50u);
}

TEST_F(DataTest, SequenceNumbersWrapAcrossTwoToThe32) {
  config.nodelay = true;
  constexpr std::uint32_t near_end = 0xfffffc00;  // 1 KiB before the wrap
  connection = TcpConnection::connect(ports, config, SeqNumber(near_end), now, capture());
  next_sent();
  TcpHeader syn_ack = from_peer(0xffffff00, near_end + 1, flag::syn | flag::ack);
  syn_ack.options.max_segment_size = 1000;
  feed(syn_ack);
  next_sent();
  const auto data = pattern(5000, 8);
  send(data);
  std::vector<std::uint8_t> out;
  while (!sent.empty()) {
    const SentSegment segment = next_sent();
    out.insert(out.end(), segment.payload.begin(), segment.payload.end());
    feed(from_peer(0xffffff01, (segment.header.sequence + static_cast<std::uint32_t>(segment.payload.size())).value(),
                   flag::ack));
  }
  EXPECT_EQ(out, data);
  EXPECT_TRUE(connection->all_acknowledged());
  EXPECT_EQ(connection->info().send_unacknowledged, SeqNumber(near_end + 5001));
  // And the receiving side: 2000 bytes from just before the wrap.
  const auto incoming = pattern(2000, 5);
  feed(from_peer(0xffffff01, near_end + 5001, flag::ack), std::span(incoming).first(1000));
  feed(from_peer(0xffffff01 + 1000, near_end + 5001, flag::ack), std::span(incoming).subspan(1000));
  EXPECT_EQ(receive_all(), incoming);
  EXPECT_EQ(connection->info().receive_next, SeqNumber(0xffffff01 + 2000));
}

TEST_F(WindowTest, SegmentsOutsideTheWindowAreCountedAndAcked) {
  open_active();
  feed(from_peer(peer_iss + 1 + 64000, iss + 1, flag::ack), pattern(10));  // just past the window
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 1));
  feed(from_peer(peer_iss - 100, iss + 1, flag::ack), pattern(10));  // old
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 1));
  EXPECT_EQ(connection->counters().outside_window, 2u);
  EXPECT_FALSE(connection->readable());
}

TEST_F(WindowTest, UpdateSentOnceTheReaderFreesTwoSegments) {
  config.receive_buffer = 4000;
  config.delayed_ack = false;
  open_active();
  for (std::uint32_t offset = 0; offset < 4000; offset += 1000) {
    feed(from_peer(peer_iss + 1 + offset, iss + 1, flag::ack), pattern(1000));
    EXPECT_EQ(next_sent().header.window, 4000 - offset - 1000);
  }
  EXPECT_EQ(connection->info().receive_window, 0u);
  // The window is closed: data is not acceptable, and is answered with an ACK.
  feed(from_peer(peer_iss + 4001, iss + 1, flag::ack), pattern(1));
  EXPECT_EQ(next_sent().header.window, 0);
  std::array<std::uint8_t, 1000> buffer{};
  ASSERT_EQ(*connection->receive(buffer, now), 1000u);
  EXPECT_TRUE(sent.empty());  // one segment freed: not worth an update (SWS avoidance)
  ASSERT_EQ(*connection->receive(buffer, now), 1000u);
  const SentSegment update = next_sent();
  EXPECT_EQ(update.header.window, 2000);
  EXPECT_EQ(update.header.acknowledgment, SeqNumber(peer_iss + 4001));
}

TEST_F(WindowTest, ZeroWindowIsProbedWithBackoffUntilItOpens) {
  open_active(0);
  send(pattern(300));
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(connection->info().bytes_unsent, 300u);
  ASSERT_TRUE(connection->next_timer());
  const auto first_interval = *connection->next_timer() - now;
  EXPECT_EQ(first_interval, connection->info().rto);
  run_for(first_interval);
  const SentSegment probe = next_sent();
  EXPECT_EQ(probe.header.sequence, SeqNumber(iss));  // SND.UNA - 1: the peer must answer
  EXPECT_TRUE(probe.payload.empty());
  EXPECT_EQ(*connection->next_timer() - now, 2 * first_interval);  // backoff
  run_for(2 * first_interval);
  next_sent();
  EXPECT_EQ(connection->counters().zero_window_probes, 2u);
  EXPECT_EQ(*connection->next_timer() - now, 4 * first_interval);
  // The answer opens the window.
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 1000));
  const SentSegment data = next_sent();
  EXPECT_EQ(data.payload.size(), 300u);
  EXPECT_EQ(connection->state(), TcpState::established);
}

// A FIN takes a sequence number, and a peer whose window is closed drops
// it (as Linux does): sent into the closed window it was retried only by the
// retransmission timer, seconds after the window opened. As Linux, it now
// waits for room in the window, the persist timer probes meanwhile, and it
// goes as soon as the window opens.
TEST_F(WindowTest, AFinWaitsForTheWindowToOpenAndGoesWhenItDoes) {
  open_active(1000);
  send(pattern(1000));
  next_sent();
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack, 0));  // all taken, the window closed
  connection->close(now);
  EXPECT_EQ(connection->state(), TcpState::fin_wait_1);
  EXPECT_TRUE(sent.empty());
  ASSERT_TRUE(connection->next_timer());
  run_for(*connection->next_timer() - now);
  const SentSegment probe = next_sent();
  EXPECT_FALSE(probe.header.has(flag::fin));
  EXPECT_EQ(connection->counters().zero_window_probes, 1u);
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack, 1000));  // the answer opens it
  const SentSegment fin = next_sent();
  EXPECT_TRUE(fin.header.has(flag::fin));
  EXPECT_EQ(fin.header.sequence, SeqNumber(iss + 1001));
  feed(from_peer(peer_iss + 1, iss + 1002, flag::ack, 1000));
  EXPECT_EQ(connection->state(), TcpState::fin_wait_2);
  EXPECT_EQ(connection->counters().timeouts, 0u);
}

TEST_F(WindowTest, ZeroWindowLaterInTheTransfer) {
  open_active(2000);
  send(pattern(3000));
  next_sent();
  next_sent();
  EXPECT_TRUE(sent.empty());
  feed(from_peer(peer_iss + 1, iss + 2001, flag::ack, 0));  // all taken, nothing more
  EXPECT_TRUE(sent.empty());
  run_for(*connection->next_timer() - now);
  EXPECT_EQ(connection->counters().zero_window_probes, 1u);
  EXPECT_TRUE(next_sent().payload.empty());
  feed(from_peer(peer_iss + 1, iss + 2001, flag::ack, 5000));
  EXPECT_EQ(next_sent().payload.size(), 1000u);
}

TEST_F(WindowTest, ScalingIsNegotiatedAndApplied) {
  config.window_scaling = true;
  config.receive_buffer = 1u << 20;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  const SentSegment syn = next_sent();
  ASSERT_TRUE(syn.header.options.window_scale);
  EXPECT_EQ(*syn.header.options.window_scale, 5);  // 65535 << 5 covers 1 MiB, << 4 does not
  EXPECT_EQ(syn.header.window, 65535);             // a SYN's window is never scaled
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack, 65535);
  syn_ack.options.max_segment_size = 1000;
  syn_ack.options.window_scale = 7;
  feed(syn_ack);
  const SentSegment ack = next_sent();
  EXPECT_EQ(ack.header.window, (1u << 20) >> 5);  // the whole buffer, scaled
  EXPECT_EQ(connection->info().send_window, 65535u);  // from the SYN-ACK, unscaled
  // Later segments' windows are scaled: 2000 << 7 = 256000 bytes.
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 2000));
  EXPECT_EQ(connection->info().send_window, 256000u);
  EXPECT_EQ(connection->info().receive_window_scale, 5);
  EXPECT_EQ(connection->info().send_window_scale, 7);
  EXPECT_EQ(connection->info().receive_window, 1u << 20);
  // We accept data more than 64 KiB past RCV.NXT.
  feed(from_peer(peer_iss + 1 + 200000, iss + 1, flag::ack), pattern(10));
  EXPECT_EQ(connection->counters().out_of_order_segments, 1u);
  EXPECT_EQ(connection->counters().outside_window, 0u);
}

// A reader that stops, with window scaling (1 MiB buffer: scale 5) and
// segments whose size is no multiple of the unit: no ACK ever offers more
// than the free buffer, and the window reaches zero when the buffer is full.
// (Rounding the field up made the offer grow a few bytes past the buffer
// with every ACK: the window never closed, the bytes sent into the excess
// were dropped, and the sender timed out against a live peer.)
TEST_F(WindowTest, ScaledWindowNeverOffersMoreThanTheFreeBuffer) {
  config.window_scaling = true;
  config.receive_buffer = 1u << 20;
  config.max_segment_size = 1448;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();  // SYN
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack, 65535);
  syn_ack.options.max_segment_size = 1448;
  syn_ack.options.window_scale = 5;
  feed(syn_ack);
  ASSERT_EQ(connection->info().receive_window_scale, 5);
  sent.clear();
  const auto segment = pattern(1448);
  std::uint16_t last_window = 1;
  for (int i = 0; i < 1000 && connection->info().bytes_readable < config.receive_buffer; ++i) {
    const SeqNumber next = connection->info().receive_next;
    feed(from_peer(next.value(), iss + 1, flag::ack), segment);
    run_for(std::chrono::milliseconds(50));  // the delayed ACK
    const std::size_t free = config.receive_buffer - connection->info().bytes_readable;
    while (!sent.empty()) {
      const SentSegment ack = next_sent();
      ASSERT_LE(std::size_t{ack.header.window} << 5, free) << "segment " << i;
      last_window = ack.header.window;
    }
  }
  EXPECT_EQ(connection->info().bytes_readable, config.receive_buffer);
  EXPECT_EQ(last_window, 0);
  EXPECT_EQ(connection->info().receive_window, 0u);
}

// A pure ACK numbered at the right edge of our window (where a sender that
// filled it numbers them: SND.MAX) is acceptable, and its ACK field is taken.
TEST_F(WindowTest, PureAckAtTheRightEdgeIsAccepted) {
  open_active();
  send(pattern(1000));
  next_sent();
  const std::uint32_t window = connection->info().receive_window;
  ASSERT_GT(window, 0u);
  feed(from_peer(peer_iss + 1 + window, iss + 1001, flag::ack));
  EXPECT_TRUE(connection->all_acknowledged());
  EXPECT_EQ(connection->counters().outside_window, 0u);
  // One past the edge is not.
  feed(from_peer(peer_iss + 2 + window, iss + 1001, flag::ack));
  EXPECT_EQ(connection->counters().outside_window, 1u);
}

// Our window closed: a probe with data at RCV.NXT is not taken, but the
// acknowledgement it carries is (RFC 9293 §3.10.7.4's allowance), and a
// probe is no duplicate ACK.
TEST_F(WindowTest, ZeroWindowProbeStillAcknowledgesOurData) {
  open_active();
  send(pattern(1000));
  next_sent();
  std::uint32_t sequence = peer_iss + 1;
  const auto full = pattern(1000);
  while (connection->info().receive_window > 0) {
    feed(from_peer(sequence, iss + 1, flag::ack), full);
    sequence += 1000;
  }
  ASSERT_EQ(connection->info().bytes_readable, config.receive_buffer);
  ASSERT_FALSE(connection->all_acknowledged());
  const auto one = pattern(1);
  for (int probe = 0; probe < 3; ++probe) feed(from_peer(sequence, iss + 1001, flag::ack), one);
  EXPECT_TRUE(connection->all_acknowledged());
  EXPECT_EQ(connection->info().bytes_readable, config.receive_buffer);  // the probe's byte is not taken
  EXPECT_EQ(connection->counters().fast_retransmits, 0u);
  EXPECT_EQ(connection->counters().duplicate_acks_in, 0u);
}

TEST_F(WindowTest, ScalingNotUsedUnlessBothOffer) {
  config.window_scaling = true;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack, 65535);
  feed(syn_ack);
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 2000));
  EXPECT_EQ(connection->info().send_window, 2000u);
  EXPECT_EQ(connection->info().receive_window_scale, 0);
}

TEST_F(WindowTest, PawsRejectsAnOldTimestamp) {
  config.timestamps = true;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
  syn_ack.options.max_segment_size = 1000;
  syn_ack.options.timestamps = wire::TcpTimestamps{1000, 0};
  feed(syn_ack);
  next_sent();
  TcpHeader fresh = from_peer(peer_iss + 1, iss + 1, flag::ack);
  fresh.options.timestamps = wire::TcpTimestamps{1010, 0};
  feed(fresh, pattern(10));
  EXPECT_EQ(connection->info().bytes_readable, 10u);
  TcpHeader old = from_peer(peer_iss + 11, iss + 1, flag::ack);
  old.options.timestamps = wire::TcpTimestamps{1005, 0};  // older than TS.Recent (1010)
  feed(old, pattern(10));
  EXPECT_EQ(connection->counters().paws_rejected, 1u);
  EXPECT_EQ(connection->info().bytes_readable, 10u);
  const SentSegment ack = next_sent();
  EXPECT_EQ(ack.header.acknowledgment, SeqNumber(peer_iss + 11));
  ASSERT_TRUE(ack.header.options.timestamps);
  EXPECT_EQ(ack.header.options.timestamps->echo_reply, 1010u);
  // A timestamp that wrapped past 2^32 is newer, not older.
  TcpHeader wrapped = from_peer(peer_iss + 11, iss + 1, flag::ack);
  wrapped.options.timestamps = wire::TcpTimestamps{1010 + 0x7fffffffu, 0};
  feed(wrapped, pattern(10));
  EXPECT_EQ(connection->info().bytes_readable, 20u);
}

}  // namespace
}  // namespace utcp::testing
