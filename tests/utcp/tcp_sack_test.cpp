// SACK (RFC 2018) and SACK-based loss recovery (RFC 6675), packet by packet
// on virtual time: SACK-permitted on the SYNs, the blocks a receiver sends
// (most recent first, as many as fit), and a sender that repairs three
// holes of one window in one round trip where NewReno repairs one per round
// trip; limited transmit (RFC 3042) and RACK-TLP (RFC 8985): loss told from
// reordering by time, lost retransmissions and tails found without the RTO;
// then whole transfers through a lossy pipe.
#include <algorithm>
#include <iostream>
#include <set>

#include "tcp_connection_harness.hpp"
#include "utcp/tcp_header.hpp"

namespace utcp::testing {
namespace {

class SackTest : public ConnectionTest {
 protected:
  // Active open with the peer's SYN-ACK offering SACK (and timestamps if asked).
  void open_offering_sack(bool peer_sack = true, bool peer_timestamps = false) {
    connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
    syn = next_sent();
    now += handshake_round_trip;
    TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
    syn_ack.options.max_segment_size = 1000;
    syn_ack.options.sack_permitted = peer_sack;
    if (peer_timestamps) syn_ack.options.timestamps = wire::TcpTimestamps{1, syn.header.options.timestamps->value};
    feed(syn_ack);
    ASSERT_EQ(connection->state(), TcpState::established);
    next_sent();  // the ACK
  }

  using Blocks = std::vector<wire::SackBlock>;
  // A block of the peer's data, [left, right) in offsets from its first byte.
  static wire::SackBlock peer_block(std::uint32_t left, std::uint32_t right) {
    return wire::SackBlock{SeqNumber(peer_iss + 1 + left), SeqNumber(peer_iss + 1 + right)};
  }
  static Blocks blocks_of(const wire::TcpOptions& options) { return Blocks(options.sack().begin(), options.sack().end()); }

  // An ACK from the peer of everything before `ack` (offsets from our first
  // data byte) reporting `blocks`, each [left, right) in the same offsets.
  void ack_with_sack(std::uint32_t ack, std::initializer_list<std::pair<std::uint32_t, std::uint32_t>> blocks) {
    TcpHeader header = from_peer(peer_iss + 1, iss + 1 + ack, flag::ack);
    for (const auto& [left, right] : blocks)
      header.options.sack_blocks[header.options.sack_block_count++] =
          wire::SackBlock{SeqNumber(iss + 1 + left), SeqNumber(iss + 1 + right)};
    feed(header);
  }

  // The offsets of the data segments sent again since the last call.
  std::set<std::uint32_t> retransmissions() {
    std::set<std::uint32_t> offsets;
    while (!sent.empty()) {
      const SentSegment segment = next_sent();
      const std::uint32_t offset = segment.header.sequence - SeqNumber(iss + 1);
      if (!segment.payload.empty() && offset < highest_sent) offsets.insert(offset);
      highest_sent = std::max<std::uint32_t>(highest_sent, offset + static_cast<std::uint32_t>(segment.payload.size()));
    }
    return offsets;
  }

  void feed_the_window_with_three_holes();

  SentSegment syn;
  std::uint32_t highest_sent = 0;
  std::chrono::microseconds handshake_round_trip{0};  // the first RTT sample
};

TEST_F(SackTest, NegotiatedOnlyWhenBothSynsCarryIt) {
  open_offering_sack();
  EXPECT_TRUE(syn.header.options.sack_permitted);
  EXPECT_TRUE(connection->info().sack);
  open_offering_sack(false);
  EXPECT_FALSE(connection->info().sack);
  config.sack = false;
  open_offering_sack();
  EXPECT_FALSE(syn.header.options.sack_permitted);
  EXPECT_FALSE(connection->info().sack);
}

TEST_F(SackTest, ASynAckAnswersSackOnlyIfTheSynOfferedIt) {
  for (const bool offered : {true, false}) {
    TcpHeader peer_syn = from_peer(peer_iss, 0, flag::syn);
    peer_syn.options.max_segment_size = 1000;
    peer_syn.options.sack_permitted = offered;
    connection = TcpConnection::accept(ports, config, {peer_syn, {}}, SeqNumber(iss), now, capture());
    const SentSegment syn_ack = next_sent();
    EXPECT_EQ(syn_ack.header.options.sack_permitted, offered);
  }
}

// RFC 2018 §4: each ACK for out-of-order data reports the block holding
// the segment that just arrived first, then the most recent others; four
// fit beside no other option, three beside timestamps.
TEST_F(SackTest, ReceiverReportsTheMostRecentBlocksFirst) {
  open_offering_sack();
  const auto data = pattern(500);
  auto from_offset = [&](std::uint32_t offset) {
    feed(from_peer(peer_iss + 1 + offset, iss + 1, flag::ack), data);
    return next_sent().header.options;
  };
  EXPECT_EQ(blocks_of(from_offset(1000)), (Blocks{peer_block(1000, 1500)}));
  EXPECT_EQ(blocks_of(from_offset(3000)), (Blocks{peer_block(3000, 3500), peer_block(1000, 1500)}));
  from_offset(5000);
  from_offset(7000);
  EXPECT_EQ(blocks_of(from_offset(9000)),
            (Blocks{peer_block(9000, 9500), peer_block(7000, 7500), peer_block(5000, 5500), peer_block(3000, 3500)}));
  // A segment joining a block reports the whole block first.
  EXPECT_EQ(blocks_of(from_offset(3500)),
            (Blocks{peer_block(3000, 4000), peer_block(9000, 9500), peer_block(7000, 7500), peer_block(5000, 5500)}));
  // The hole at the front fills: what is delivered is no longer reported.
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), pattern(1000));
  const SentSegment ack = next_sent();
  EXPECT_EQ(ack.header.acknowledgment, SeqNumber(peer_iss + 1 + 1500));
  EXPECT_EQ(blocks_of(ack.header.options),
            (Blocks{peer_block(3000, 4000), peer_block(9000, 9500), peer_block(7000, 7500), peer_block(5000, 5500)}));
}

// RFC 2018 §4: the blocks after the first repeat the most recent *other*
// blocks, never a part of the first again. A run of consecutive segments
// arriving out of order is one block, however many segments (and however
// many more than a block's walk looks at) it took: an older run must still
// be reported beside it, and no two blocks of one ACK may overlap.
TEST_F(SackTest, AGrowingBlockDoesNotCrowdOutTheOlderOnes) {
  open_offering_sack();
  const auto data = pattern(500);
  auto from_offset = [&](std::uint32_t offset) {
    feed(from_peer(peer_iss + 1 + offset, iss + 1, flag::ack), data);
    return next_sent().header.options;
  };
  from_offset(1000);
  wire::TcpOptions options;
  constexpr std::uint32_t run_segments = 100;  // more than the 64 segments a block's walk looks at each way, within the queue's bound
  for (std::uint32_t i = 0; i < run_segments; ++i) {
    options = from_offset(3000 + 500 * i);
    const auto blocks = options.sack();
    ASSERT_GE(blocks.size(), 2u) << "after segment " << i;
    EXPECT_EQ(blocks[0].right, SeqNumber(peer_iss + 1 + 3000 + 500 * (i + 1))) << "after segment " << i;
    EXPECT_EQ(blocks[1], peer_block(1000, 1500)) << "after segment " << i;
    for (std::size_t a = 0; a < blocks.size(); ++a)
      for (std::size_t b = a + 1; b < blocks.size(); ++b)
        EXPECT_TRUE(blocks[a].right < blocks[b].left || blocks[b].right < blocks[a].left)
            << "blocks " << a << " and " << b << " overlap after segment " << i;
    if (HasFailure()) return;
  }
}

TEST_F(SackTest, ThreeBlocksBesideTimestamps) {
  config.timestamps = true;
  open_offering_sack(true, true);
  ASSERT_TRUE(connection->info().timestamps);
  const auto data = pattern(500);
  for (const std::uint32_t offset : {1000u, 3000u, 5000u, 7000u}) {
    TcpHeader header = from_peer(peer_iss + 1 + offset, iss + 1, flag::ack);
    header.options.timestamps = wire::TcpTimestamps{2, 0};
    feed(header, data);
  }
  const SentSegment ack = sent.back();
  ASSERT_EQ(ack.header.options.sack().size(), 3u);
  EXPECT_EQ(ack.header.options.sack()[0].left, SeqNumber(peer_iss + 1 + 7000));
  EXPECT_EQ(wire::tcp_header_length(ack.header), 60u);  // 20 + 12 (timestamps) + 28 (three blocks)
}

// RFC 2018 §4: every ACK that does not acknowledge all the data held
// carries SACK blocks, the data segments of a two-way stream too; their
// payload shrinks by the option's bytes so that the segment stays within the
// MSS (as Linux does).
TEST_F(SackTest, DataSegmentsCarrySackBlocksWithinTheSegmentSize) {
  config.timestamps = true;
  open_offering_sack(true, true);
  TcpHeader ahead = from_peer(peer_iss + 1 + 1000, iss + 1, flag::ack);
  ahead.options.timestamps = wire::TcpTimestamps{2, 0};
  feed(ahead, pattern(500));
  next_sent();  // the duplicate ACK
  send(pattern(3000));
  const std::uint32_t header_and_timestamps = 20 + 12;
  std::uint32_t sent_bytes = 0;
  while (!sent.empty()) {
    const SentSegment segment = next_sent();
    ASSERT_FALSE(segment.payload.empty());
    ASSERT_EQ(segment.header.options.sack().size(), 1u);
    EXPECT_EQ(segment.header.options.sack()[0].left, SeqNumber(peer_iss + 1 + 1000));
    EXPECT_EQ(segment.header.options.sack()[0].right, SeqNumber(peer_iss + 1 + 1500));
    EXPECT_LE(segment.payload.size() + wire::tcp_header_length(segment.header) - 20, 1000u);
    EXPECT_GT(wire::tcp_header_length(segment.header), header_and_timestamps);
    sent_bytes += static_cast<std::uint32_t>(segment.payload.size());
  }
  EXPECT_EQ(sent_bytes, 3000u);
}

// Segments 2, 5 and 8 of a window of 12 are lost (offsets 1000, 4000,
// 7000). The peer's duplicate ACKs report what came after each hole; from
// them alone, before any cumulative ACK moves, all three holes go again:
// one round trip. Without SACK only the first goes, and the others wait a
// round trip each for partial ACKs.
void SackTest::feed_the_window_with_three_holes() {
  ack_with_sack(1000, {});  // segment 1: cwnd 11 segments, two more go (11 and 12)
  ack_with_sack(1000, {{2000, 3000}});
  ack_with_sack(1000, {{2000, 4000}});
  ack_with_sack(1000, {{5000, 6000}, {2000, 4000}});  // the third duplicate
  ack_with_sack(1000, {{5000, 7000}, {2000, 4000}});
  ack_with_sack(1000, {{8000, 9000}, {5000, 7000}, {2000, 4000}});
  ack_with_sack(1000, {{8000, 10000}, {5000, 7000}, {2000, 4000}});
  ack_with_sack(1000, {{8000, 11000}, {5000, 7000}, {2000, 4000}});
  ack_with_sack(1000, {{8000, 12000}, {5000, 7000}, {2000, 4000}});
}

TEST_F(SackTest, ThreeLossesInOneWindowAreRepairedInOneRoundTrip) {
  open_offering_sack();
  send(pattern(20000));
  EXPECT_TRUE(retransmissions().empty());  // the first ten segments
  feed_the_window_with_three_holes();
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000, 4000, 7000}));
  EXPECT_TRUE(connection->info().in_recovery);
  EXPECT_EQ(connection->counters().fast_retransmits, 1u);
  EXPECT_EQ(connection->info().slow_start_threshold, 5500u);  // half the 11000 in flight
  // The retransmissions arrive: one cumulative ACK past the recovery point ends it.
  ack_with_sack(12000, {});
  EXPECT_FALSE(connection->info().in_recovery);
  EXPECT_EQ(connection->counters().timeouts, 0u);
  EXPECT_EQ(connection->counters().retransmitted_segments, 3u);
}

TEST_F(SackTest, WithoutSackNewRenoRepairsOneHolePerRoundTrip) {
  config.sack = false;
  open_offering_sack();
  send(pattern(20000));
  retransmissions();
  // The same ACKs; without SACK negotiated their blocks mean nothing.
  feed_the_window_with_three_holes();
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000}));
  ack_with_sack(4000, {});  // a partial ACK: the second hole, a round trip later
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{4000}));
}

// A block outside what is outstanding (old, or past anything sent) is
// ignored: it neither starts recovery nor retransmits anything.
TEST_F(SackTest, BlocksOutsideTheOutstandingDataAreIgnored) {
  open_offering_sack();
  send(pattern(5000));
  retransmissions();
  ack_with_sack(0, {{6000, 9000}, {7000, 10000}, {20000, 30000}});
  ack_with_sack(0, {{4294960000u, 100}});
  EXPECT_FALSE(connection->info().in_recovery);
  EXPECT_TRUE(retransmissions().empty());
}

// ---- Limited transmit (RFC 3042), RACK-TLP (RFC 8985) ----

// The first ten segments go at once (IW 10); one round trip later the first
// is acknowledged, which gives RACK its first RTT (10 ms) and lets two more go.
class RackTest : public SackTest {
 protected:
  // An ACK of `ack` bytes, with one SACK block if given, echoing the TSval
  // `echoed` (the peer's own clock ticking once per ACK).
  void ack_echoing(std::uint32_t ack, std::optional<std::pair<std::uint32_t, std::uint32_t>> block,
                   std::uint32_t echoed) {
    ack_stamped(ack, block, echoed, ++peer_clock_);
  }
  // The same with the peer's TSval given: an ACK the path delayed past later ones.
  void ack_stamped(std::uint32_t ack, std::optional<std::pair<std::uint32_t, std::uint32_t>> block,
                   std::uint32_t echoed, std::uint32_t stamp) {
    TcpHeader header = from_peer(peer_iss + 1, iss + 1 + ack, flag::ack);
    header.options.timestamps = wire::TcpTimestamps{stamp, echoed};
    if (block)
      header.options.sack_blocks[header.options.sack_block_count++] =
          wire::SackBlock{SeqNumber(iss + 1 + block->first), SeqNumber(iss + 1 + block->second)};
    feed(header);
  }
  std::uint32_t peer_clock_ = 2;
  static constexpr std::uint32_t kTimestampedSegment = 1000 - 12;  // the peer's MSS less the timestamps
  // Timestamps and SACK on, 30000 bytes sent, the first segment acknowledged
  // a millisecond later. Returns the TSval every later ACK echoes.
  std::uint32_t send_and_acknowledge_the_first_segment() {
    config.timestamps = true;
    open_offering_sack(true, true);
    send(pattern(30000));
    const std::uint32_t first_sent = sent.front().header.options.timestamps->value;
    retransmissions();
    now += 1ms;
    ack_echoing(kTimestampedSegment, {}, first_sent);
    return first_sent;
  }
  // The third segment SACKed past the second (overtaken, not lost): once
  // RACK's window passes the second goes again.
  void overtake_the_second_segment(std::uint32_t first_sent) {
    const std::uint32_t segment = kTimestampedSegment;
    now += 200us;
    ack_echoing(segment, std::pair{2 * segment, 3 * segment}, first_sent);
    retransmissions();
    run_for(1ms);
    ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{segment}));
  }
  void open_and_fill_the_window() {
    open_offering_sack();
    send(pattern(30000));
    retransmissions();
    now += 10ms;
    ack_with_sack(1000, {});
    retransmissions();
    ASSERT_EQ(highest_sent, 12000u);
  }
  // Segments 2 and 3 (offsets 1000, 2000) missing, the next nine SACKed
  // (the last two, sent a round trip later, a millisecond later): with
  // DupThresh SACKed and no reordering seen both are lost at once, and both
  // go again as the pipe drains below the halved cwnd.
  void lose_segments_2_and_3() {
    for (std::uint32_t edge = 4000; edge <= 10000; edge += 1000) ack_with_sack(1000, {{3000, edge}});
    now += 1ms;
    for (std::uint32_t edge = 11000; edge <= 12000; edge += 1000) ack_with_sack(1000, {{3000, edge}});
    EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000, 2000}));
    EXPECT_TRUE(connection->info().in_recovery);
  }
  // Data segments sent for the first time since the last call.
  std::set<std::uint32_t> new_segments() {
    std::set<std::uint32_t> offsets;
    const std::uint32_t before = highest_sent;
    while (!sent.empty()) {
      const SentSegment segment = next_sent();
      const std::uint32_t offset = segment.header.sequence - SeqNumber(iss + 1);
      if (!segment.payload.empty() && offset >= before) offsets.insert(offset);
      highest_sent = std::max<std::uint32_t>(highest_sent, offset + static_cast<std::uint32_t>(segment.payload.size()));
    }
    return offsets;
  }
};

// RFC 3042: the first and the second duplicate ACK each let one new segment
// go past a full cwnd, so that a window too small for three duplicates still
// produces them; a third does not (and nothing is retransmitted while
// RACK's reordering window runs).
TEST_F(RackTest, LimitedTransmitSendsOneNewSegmentOnEachOfTheFirstTwoDuplicates) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 3000}});
  EXPECT_EQ(new_segments(), (std::set<std::uint32_t>{12000}));
  ack_with_sack(1000, {{2000, 4000}});
  EXPECT_EQ(new_segments(), (std::set<std::uint32_t>{13000}));
  EXPECT_EQ(connection->counters().retransmitted_segments, 0u);
}

// RFC 6675 §5 step (3): with SACK, what may go before recovery is cwnd less
// the pipe, not less all that is outstanding: each segment the peer SACKs
// has left the network, so a new one takes its place. Once the path has
// shown it reorders, RACK waits a quarter of the minimum RTT before it
// calls the hole lost; the ACK clock must not stop meanwhile, whatever the
// peer's window does (Linux's ACKs open it as its reader drains the data,
// which makes none of them a duplicate by RFC 5681's definition).
TEST_F(RackTest, EachSegmentSackedWhileRackWaitsLetsANewOneGo) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 3000}});
  ack_with_sack(3000, {});  // segment 2 came late: reordering seen, RACK waits from now on
  new_segments();
  const std::uint32_t first_new = highest_sent;
  std::uint16_t window = 60000;
  for (std::uint32_t edge = 5000; edge <= 9000; edge += 1000) {
    TcpHeader header = from_peer(peer_iss + 1, iss + 1 + 3000, flag::ack, window += 1000);
    header.options.sack_blocks[header.options.sack_block_count++] =
        wire::SackBlock{SeqNumber(iss + 1 + 4000), SeqNumber(iss + 1 + edge)};
    feed(header);
  }
  // Five SACKed, five new segments; nothing retransmitted within the window.
  EXPECT_EQ(new_segments(), (std::set<std::uint32_t>{first_new, first_new + 1000, first_new + 2000,
                                                     first_new + 3000, first_new + 4000}));
  EXPECT_FALSE(connection->info().in_recovery);
  EXPECT_EQ(connection->counters().retransmitted_segments, 0u);
}

// RFC 5681 §3.2 step 2: what limited transmit sent does not count in the
// FlightSize that recovery halves. With SACK that is all that went past
// cwnd while RACK waited, which may be as much again as cwnd: counted, the
// "reduction" would raise ssthresh above the cwnd the loss happened at.
TEST_F(RackTest, WhatWentPastCwndWhileRackWaitedDoesNotCountInTheReduction) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 3000}});
  ack_with_sack(3000, {});  // reordering seen
  const std::uint32_t cwnd = connection->info().congestion_window;
  for (std::uint32_t edge = 5000; edge <= 10000; edge += 1000) ack_with_sack(3000, {{4000, edge}});
  new_segments();
  ASSERT_GT(highest_sent - 3000, cwnd + 5000);  // six SACKed, six more sent
  ASSERT_FALSE(connection->info().in_recovery);
  run_for(5ms);  // segment 4 (offset 3000) is lost
  ASSERT_TRUE(connection->info().in_recovery);
  EXPECT_EQ(connection->info().slow_start_threshold, cwnd / 2);
}

// A tail loss: the last two segments of a write are lost, so no duplicate
// ACK will ever come. The probe timeout (two smoothed RTTs) sends the last
// segment again; the peer's SACK of it lets RACK find the other lost, all
// without a retransmission timeout.
TEST_F(RackTest, TailLossIsRecoveredByAProbeWithoutTimeout) {
  open_offering_sack();
  send(pattern(5000));
  retransmissions();
  now += 10ms;
  ack_with_sack(3000, {});  // segments 4 and 5 (offsets 3000, 4000) are lost
  EXPECT_TRUE(retransmissions().empty());
  run_for(25ms);  // the PTO: 2 × SRTT = 20 ms, well before the RTO (at least 200 ms)
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{4000}));
  now += 10ms;
  ack_with_sack(3000, {{4000, 5000}});
  run_for(5ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{3000}));
  now += 10ms;
  ack_with_sack(5000, {});
  EXPECT_TRUE(connection->all_acknowledged());
  EXPECT_EQ(connection->counters().timeouts, 0u);
}

// Reordering, not loss: once the receiver has shown that it reorders (a
// segment arrived after a later one without having been sent again), RACK
// waits a quarter of the minimum RTT before it calls a segment lost. A
// segment overtaken by four others is then not retransmitted, where three
// duplicate ACKs (RFC 6675's DupThresh) would have sent it again.
TEST_F(RackTest, AReorderedSegmentIsNotRetransmittedWithinTheReorderingWindow) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 3000}});
  ack_with_sack(3000, {});  // segment 2 came late: reordering seen
  ack_with_sack(3000, {{4000, 5000}});
  ack_with_sack(3000, {{4000, 6000}});
  ack_with_sack(3000, {{4000, 7000}});
  ack_with_sack(3000, {{4000, 8000}});
  now += 1ms;
  ack_with_sack(8000, {});  // segment 4 arrives, within the window
  run_for(10ms);
  EXPECT_TRUE(retransmissions().empty());
  EXPECT_FALSE(connection->info().in_recovery);
  EXPECT_EQ(connection->counters().retransmitted_segments, 0u);
}

// When the reordering window passes without the segment, it is lost: the
// reordering timer retransmits it without waiting for another ACK.
TEST_F(RackTest, ASegmentMissingPastTheReorderingWindowIsRetransmittedByTheTimer) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 3000}});
  EXPECT_TRUE(retransmissions().empty());
  run_for(5ms);  // a quarter of the 10 ms minimum RTT
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000}));
  EXPECT_TRUE(connection->info().in_recovery);
  EXPECT_EQ(connection->counters().timeouts, 0u);
}

// A retransmission lost again: RFC 6675 alone can only wait for the RTO;
// RACK sees segments sent after it delivered and sends it a third time.
TEST_F(RackTest, ALostRetransmissionIsDetectedWithoutTimeout) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 3000}});
  run_for(5ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000}));
  // The originals after it are SACKed, which frees the pipe for new data,
  // sent after the retransmission; the first of that is SACKed, the
  // retransmission is not.
  now += 2ms;
  for (std::uint32_t edge = 4000; edge <= 13000; edge += 1000) ack_with_sack(1000, {{2000, edge}});
  const std::set<std::uint32_t> fresh = new_segments();
  ASSERT_FALSE(fresh.empty());
  ASSERT_EQ(*fresh.begin(), 13000u);
  now += 10ms;
  ack_with_sack(1000, {{2000, 14000}});
  run_for(1ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000}));
  EXPECT_EQ(connection->counters().timeouts, 0u);
}

// RFC 8985 §6.2 step 2: the ACK of a segment sent again may answer the
// original (reordered, not lost). Its timestamp echo tells: older than the
// retransmission's TSval, it says nothing of when the retransmission went,
// so RACK does not take the retransmission as the latest segment delivered
// (which would make every segment sent before it overdue). The minimum
// RTT cannot tell here: the retransmission is a millisecond old and the path's
// shortest round trip is as short.
TEST_F(RackTest, AnAckEchoingTheOriginalDoesNotMakeEarlierSegmentsLost) {
  const std::uint32_t first_sent = send_and_acknowledge_the_first_segment();  // a 1 ms round trip
  ASSERT_NO_FATAL_FAILURE(overtake_the_second_segment(first_sent));
  now += 1200us;
  ack_echoing(3 * kTimestampedSegment, {}, first_sent);  // its original arrives, late
  run_for(100us);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{}));
}

// The same for a SACK (RFC 8985 §6.2 step 2 asks it of every segment newly
// acknowledged, cumulatively or selectively): segments 2 and 3 deemed lost
// and sent again, then segment 3's original SACKed late by an ACK echoing a
// TSval older than its retransmission. Taken as the retransmission's
// delivery, it made segment 2's retransmission, sent just before, lost a
// reordering window later, and under reordering each spurious retransmission
// made the ones sent before it lost in turn.
TEST_F(RackTest, ASackEchoingTheOriginalDoesNotMakeEarlierRetransmissionsLost) {
  const std::uint32_t first_sent = send_and_acknowledge_the_first_segment();  // a 1 ms round trip
  const std::uint32_t segment = kTimestampedSegment;
  now += 200us;
  ack_echoing(segment, std::pair{3 * segment, 10 * segment}, first_sent);
  run_for(1ms);
  ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{segment, 2 * segment}));
  now += 1500us;  // longer ago than the minimum RTT: that test cannot tell
  ack_echoing(segment, std::pair{2 * segment, 10 * segment}, first_sent);
  run_for(1ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{}));
}

// RFC 8985 §6.2 step 2: RACK.rtt is the round trip of the segment sent
// last among those each ACK delivers, whether or not it was sent after
// RACK.xmit_ts (which only moves forward). A segment overtaken on the path
// gives a short round trip; the ACKs of the segments it overtook, sent
// before it, give the path's longer one again, and the segments still
// waiting for their ACK are judged by that. Kept from the overtaking
// segment until a later one was delivered, the short round trip made
// them lost before their ACK could come, and they went again for nothing.
TEST_F(RackTest, TheRoundTripOfEachAckJudgesTheSegmentsStillWaiting) {
  handshake_round_trip = 10ms;  // SRTT, which bounds the window, is above it
  open_offering_sack();
  send(pattern(1000));
  retransmissions();
  now += 10ms;
  ack_with_sack(1000, {});  // the minimum RTT: 10 ms; the reordering window 2.5 ms
  for (int i = 0; i < 3; ++i) {  // segments 2, 3, 4 (offsets 1000-3000), a millisecond apart
    send(pattern(1000));
    now += 1ms;
  }
  retransmissions();
  ASSERT_EQ(highest_sent, 4000u);
  now += 9ms;  // segment 4 SACKed 10 ms after it went: it overtook 2 and 3
  ack_with_sack(1000, {{3000, 4000}});
  EXPECT_TRUE(retransmissions().empty());  // 2 and 3 within RACK.rtt plus the window
  now += 200us;  // segment 2's ACK, 12.2 ms after it went: RACK.rtt 12.2 ms
  ack_with_sack(2000, {{3000, 4000}});
  run_for(2ms);  // segment 3 is due at 1 + 12.2 + 2.5 ms, not 1 + 10 + 2.5
  EXPECT_TRUE(retransmissions().empty());
  ack_with_sack(4000, {});
  EXPECT_EQ(connection->counters().retransmitted_segments, 0u);
}

// RFC 6675 §5.1 and Linux (tcp_timeout_mark_lost): a retransmission
// timeout keeps the SACK marks, and what it repairs are the holes, not the
// data SACKed. Here segments 2 and 6 (offsets 1000, 5000) are lost, and
// their retransmissions too; after the timeout, the ACK that the first hole's
// repair draws lets two segments go, and only the second hole does. Going
// back N, segment 7 went too, SACKed long before.
TEST_F(RackTest, ATimeoutKeepsTheSackMarksAndRepairsOnlyTheHoles) {
  open_offering_sack();
  send(pattern(12000));  // no more: recovery sends nothing new
  retransmissions();
  now += 10ms;
  ack_with_sack(1000, {});
  retransmissions();
  ASSERT_EQ(highest_sent, 12000u);
  ack_with_sack(1000, {{2000, 5000}});
  ack_with_sack(1000, {{6000, 12000}, {2000, 5000}});
  run_for(1ms);
  ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{1000, 5000}));
  while (connection->counters().timeouts == 0) run_for(1ms);  // both retransmissions lost: the RTO
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{1000}));
  now += 10ms;
  ack_with_sack(5000, {{6000, 12000}});
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{5000}));
}

// RFC 2018 §8: a receiver may discard what it SACKed. When the first
// segment outstanding is marked SACKed at a timeout, the peer acknowledged
// up to it and not past it: it reneged (as Linux tells it), and the marks
// go; everything is sent again, SACKed or not.
TEST_F(RackTest, ATimeoutAfterTheReceiverRenegedSendsTheSackedDataAgain) {
  open_and_fill_the_window();
  ack_with_sack(1000, {{2000, 5000}});
  now += 1ms;
  ack_with_sack(2000, {});  // segment 2 arrived; 3 and 4, SACKed, were dropped
  retransmissions();
  while (connection->counters().timeouts == 0) run_for(1ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{2000}));
  now += 10ms;
  ack_with_sack(3000, {});
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{3000, 4000}));
}

// ---- ACKs overtaken on the path (PAWS) ----

// PAWS (RFC 7323 §5.3) would drop every ACK that a later one overtook, its
// TSval being older than TS.Recent; on a path that reorders, most of them,
// and the SACK blocks they alone carried with them: the segments those
// reported were then called lost when a later one was SACKed, and sent
// again for nothing. As Linux's tcp_disordered_ack, a duplicate ACK that
// changes neither SND.UNA nor the window, within an RTO of TS.Recent, is
// taken; it cannot move the connection's state backwards (a smaller window
// it offers is from before the one in use, and left alone).
TEST_F(RackTest, AnOvertakenDuplicateAckIsTakenWithItsSackBlock) {
  const std::uint32_t first_sent = send_and_acknowledge_the_first_segment();
  const std::uint32_t segment = kTimestampedSegment;
  now += 200us;
  ack_stamped(segment, std::pair{3 * segment, 4 * segment}, first_sent, peer_clock_ + 2);
  const std::uint32_t window = connection->info().send_window;
  TcpHeader overtaken = from_peer(peer_iss + 1, iss + 1 + segment, flag::ack, 50000);  // sent before it
  overtaken.options.timestamps = wire::TcpTimestamps{peer_clock_ + 1, first_sent};
  overtaken.options.sack_blocks[overtaken.options.sack_block_count++] =
      wire::SackBlock{SeqNumber(iss + 1 + 2 * segment), SeqNumber(iss + 1 + 3 * segment)};
  feed(overtaken);
  peer_clock_ += 2;
  EXPECT_EQ(connection->counters().paws_rejected, 0u);
  EXPECT_EQ(connection->info().send_window, window);
  for (const SentSegment& reply : sent) EXPECT_FALSE(reply.payload.empty()) << "an ACK answered a duplicate ACK";
  run_for(1ms);
  std::set<std::uint32_t> resent = retransmissions();
  // All past segment 2 SACKed: the pipe empties and whatever is deemed lost goes.
  ack_echoing(segment, std::pair{3 * segment, highest_sent}, first_sent);
  run_for(1ms);
  resent.merge(retransmissions());
  EXPECT_EQ(resent, (std::set<std::uint32_t>{segment}));
}

// Everything else PAWS still drops: an overtaken ACK that acknowledges less
// than SND.UNA (it is old), one offering more window than the one in use
// (it would open it), one older than TS.Recent by more than an RTO.
TEST_F(RackTest, OvertakenAcksThatAreNotHarmlessDuplicatesAreStillRejected) {
  const std::uint32_t first_sent = send_and_acknowledge_the_first_segment();
  const std::uint32_t segment = kTimestampedSegment;
  now += 200us;
  ack_stamped(2 * segment, {}, first_sent, peer_clock_ + 2);
  ack_stamped(segment, {}, first_sent, peer_clock_ + 1);  // below SND.UNA now
  EXPECT_EQ(connection->counters().paws_rejected, 1u);
  TcpHeader wider = from_peer(peer_iss + 1, iss + 1 + 2 * segment, flag::ack, 65000);
  wider.options.timestamps = wire::TcpTimestamps{peer_clock_ + 1, first_sent};
  feed(wider);
  EXPECT_EQ(connection->counters().paws_rejected, 2u);
  peer_clock_ += 2;
  const auto rto_ticks = static_cast<std::uint32_t>(connection->info().rto.count());  // the peer's clock: 1 ms
  ack_stamped(2 * segment, {}, first_sent, peer_clock_ - rto_ticks - 1);
  EXPECT_EQ(connection->counters().paws_rejected, 3u);
  ack_stamped(2 * segment, {}, first_sent, peer_clock_ - rto_ticks);
  EXPECT_EQ(connection->counters().paws_rejected, 3u);
}

// RFC 7323 §5.3 answers a segment PAWS drops with an ACK; for one without
// data Linux sends that ACK at most once per 500 ms (tcp_oow_rate_limited,
// tcp_invalid_ratelimit): on a path that reorders, every overtaken old ACK
// drew one, as many ACKs as the peer sent, none of use to it.
TEST_F(RackTest, OvertakenAcksDrawAtMostOneAckPerHalfSecond) {
  const std::uint32_t first_sent = send_and_acknowledge_the_first_segment();
  const std::uint32_t segment = kTimestampedSegment;
  now += 200us;
  ack_stamped(2 * segment, {}, first_sent, peer_clock_ + 3);
  peer_clock_ += 3;
  retransmissions();
  const auto pure_acks = [&] {
    std::size_t count = 0;
    for (; !sent.empty(); sent.pop_front()) count += sent.front().payload.empty() ? 1 : 0;
    return count;
  };
  ack_stamped(segment, {}, first_sent, peer_clock_ - 2);  // both below SND.UNA now, and overtaken
  ack_stamped(segment, {}, first_sent, peer_clock_ - 1);
  EXPECT_EQ(connection->counters().paws_rejected, 2u);
  EXPECT_EQ(pure_acks(), 1u);
  now += 499ms;
  ack_stamped(segment, {}, first_sent, peer_clock_ - 1);
  EXPECT_EQ(pure_acks(), 0u);
  now += 1ms;
  ack_stamped(segment, {}, first_sent, peer_clock_ - 1);
  EXPECT_EQ(pure_acks(), 1u);
  // A segment with data that PAWS drops is still answered every time.
  TcpHeader old_data = from_peer(peer_iss + 1, iss + 1 + 2 * segment, flag::ack);
  old_data.options.timestamps = wire::TcpTimestamps{peer_clock_ - 1, first_sent};
  feed(old_data, pattern(10));
  feed(old_data, pattern(10));
  EXPECT_EQ(pure_acks(), 2u);
}

// ---- D-SACK (RFC 2883) ----

// A segment that arrives again (all of it, or part of it, below RCV.NXT) is
// reported in the first SACK block of the ACK it draws, before the blocks
// of data held out of order, and in that one ACK only.
TEST_F(SackTest, ReceiverReportsADuplicateSegmentInTheFirstBlock) {
  open_offering_sack();
  const auto data = pattern(1000);
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), data);
  feed(from_peer(peer_iss + 1 + 3000, iss + 1, flag::ack), data);  // out of order
  sent.clear();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack), data);  // the first again
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(blocks_of(next_sent().header.options), (Blocks{peer_block(0, 1000), peer_block(3000, 4000)}));
  // Half of it again with the next 500 bytes: the old half is the duplicate.
  feed(from_peer(peer_iss + 1 + 500, iss + 1, flag::ack), data);
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(blocks_of(sent.back().header.options), (Blocks{peer_block(500, 1000), peer_block(3000, 4000)}));
  sent.clear();
  // The next ACK reports only what is held.
  feed(from_peer(peer_iss + 1 + 5000, iss + 1, flag::ack), data);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(blocks_of(next_sent().header.options), (Blocks{peer_block(5000, 6000), peer_block(3000, 4000)}));
}

// RFC 2883 §4.2: data held out of order that arrives again is a duplicate
// too, reported in the first block, the block holding it second (so the
// sender tells the D-SACK from a SACK: RFC 2883 §4, Linux's
// tcp_check_dsack). Without it a sender never learns that its retransmission
// of data we had was spurious, and can neither undo its reduction nor widen
// its reordering window.
TEST_F(SackTest, ReceiverReportsADuplicateOfDataHeldOutOfOrder) {
  open_offering_sack();
  const auto data = pattern(1000);
  feed(from_peer(peer_iss + 1 + 3000, iss + 1, flag::ack), data);
  feed(from_peer(peer_iss + 1 + 6000, iss + 1, flag::ack), data);
  feed(from_peer(peer_iss + 1 + 7000, iss + 1, flag::ack), data);
  sent.clear();
  feed(from_peer(peer_iss + 1 + 3000, iss + 1, flag::ack), data);  // held already
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(blocks_of(next_sent().header.options), (Blocks{peer_block(3000, 4000), peer_block(3000, 4000), peer_block(6000, 8000)}));
  // Overlapping the end of a run: only the part held is the duplicate.
  feed(from_peer(peer_iss + 1 + 7500, iss + 1, flag::ack), data);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(blocks_of(next_sent().header.options), (Blocks{peer_block(7500, 8000), peer_block(6000, 8500), peer_block(3000, 4000)}));
  // Reported once: the next ACK carries only the SACK blocks.
  feed(from_peer(peer_iss + 1 + 10000, iss + 1, flag::ack), data);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(blocks_of(next_sent().header.options), (Blocks{peer_block(10000, 11000), peer_block(6000, 8500), peer_block(3000, 4000)}));
}

// Two segments reordered, not lost, and retransmitted by a recovery that
// halved the window; their originals arrive, and then the peer reports
// each retransmission as a duplicate. Once every retransmission of the
// recovery is reported so, it was spurious: cwnd and ssthresh go back to
// what they were before it (as Linux's undo, RFC 3708's idea).
TEST_F(RackTest, ASpuriousRecoveryIsUndoneOnceEachRetransmissionIsReportedDuplicate) {
  open_and_fill_the_window();
  const std::uint32_t cwnd_before = connection->info().congestion_window;
  const std::uint32_t ssthresh_before = connection->info().slow_start_threshold;
  lose_segments_2_and_3();
  ASSERT_LT(connection->info().congestion_window, cwnd_before);
  now += 1ms;
  new_segments();
  ack_with_sack(highest_sent, {});  // the originals arrive, and all sent since
  now += 9ms;
  ack_with_sack(highest_sent, {{1000, 2000}});  // D-SACK: the retransmission of 1000 arrived twice
  EXPECT_LT(connection->info().congestion_window, cwnd_before);  // one retransmission not known spurious yet
  ack_with_sack(highest_sent, {{2000, 3000}});
  EXPECT_GE(connection->info().congestion_window, cwnd_before);
  EXPECT_EQ(connection->info().slow_start_threshold, ssthresh_before);
  EXPECT_FALSE(connection->info().in_recovery);
}

// A duplicate report of data still outstanding (SACKed, above SND.UNA)
// and sent once (the network duplicated it) undoes nothing: above SND.UNA,
// Linux counts a D-SACK against the retransmissions only where it covers a
// segment retransmitted (tcp_sacktag_one), and so does utcp.
TEST_F(RackTest, ADuplicateOfDataNotRetransmittedUndoesNothing) {
  open_and_fill_the_window();
  lose_segments_2_and_3();
  const std::uint32_t reduced = connection->info().congestion_window;
  ack_with_sack(1000, {{3000, 4000}, {3000, 12000}});  // 3000 twice: inside the second block
  ack_with_sack(1000, {{4000, 5000}, {3000, 12000}});
  EXPECT_EQ(connection->info().congestion_window, reduced);
  EXPECT_TRUE(connection->info().in_recovery);
}

// ---- Undo as Linux does it (issue 23) ----
//
// RFC 2883 §5 and RFC 3708 detect spurious retransmissions and leave the
// response open. utcp responds as Linux's default TCP, the target it is
// measured against on the same impaired path: D-SACKs are counted against
// the retransmissions of the last loss episode as tcp_check_dsack and
// tcp_sacktag_one count them, timestamps tell a hole filled by the original
// (Eifel, RFC 3522, Linux's tcp_packet_delayed), and either undoes the
// reduction (RFC 4015's response: cwnd and ssthresh as before, no go-back-N
// after a timeout).

// Linux's "dumb counting": a duplicate reported of data below SND.UNA counts
// against the episode's retransmissions whatever it duplicated, a
// retransmission or a segment the network sent twice, so long as it lies
// past where the episode began. Once the count is zero the reduction is
// undone, after the recovery ended too. (This reverses what utcp did
// before: it undid only once each retransmission was itself reported.)
TEST_F(RackTest, DuplicatesOfAcknowledgedDataPastTheEpisodesStartUndoTheReduction) {
  open_and_fill_the_window();
  const std::uint32_t cwnd_before = connection->info().congestion_window;
  const std::uint32_t ssthresh_before = connection->info().slow_start_threshold;
  lose_segments_2_and_3();  // two retransmissions, of 1000 and 2000
  now += 1ms;
  new_segments();
  ack_with_sack(highest_sent, {});  // the retransmissions arrive: recovery over, the reduction stays
  ASSERT_FALSE(connection->info().in_recovery);
  const std::uint32_t reduced = connection->info().congestion_window;
  ASSERT_LT(reduced, cwnd_before);
  now += 1ms;
  ack_with_sack(highest_sent, {{5000, 6000}});  // sent once: the network duplicated it
  EXPECT_EQ(connection->info().congestion_window, reduced);  // one of two counted
  ack_with_sack(highest_sent, {{7000, 8000}});
  EXPECT_GE(connection->info().congestion_window, cwnd_before);
  EXPECT_EQ(connection->info().slow_start_threshold, ssthresh_before);
  EXPECT_EQ(connection->counters().reductions_undone, 1u);
}

// What does not count: a duplicate of data from before the episode began
// (below SND.UNA when it did), and duplicates beyond the number of segments
// ever retransmitted (Linux's "dubious" D-SACKs: a peer that reported every
// segment twice would otherwise undo every reduction).
TEST_F(RackTest, DuplicatesFromBeforeTheEpisodeOrBeyondAllRetransmissionsUndoNothing) {
  open_and_fill_the_window();
  for (std::uint32_t edge = 3000; edge <= 10000; edge += 1000) ack_with_sack(1000, {{2000, edge}});
  now += 1ms;
  for (std::uint32_t edge = 11000; edge <= 12000; edge += 1000) ack_with_sack(1000, {{2000, edge}});
  ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{1000}));
  ASSERT_TRUE(connection->info().in_recovery);
  now += 1ms;
  new_segments();
  ack_with_sack(highest_sent, {});
  const std::uint32_t reduced = connection->info().congestion_window;
  ack_with_sack(highest_sent, {{0, 1000}});  // acknowledged before the loss was detected
  EXPECT_EQ(connection->info().congestion_window, reduced);
  ack_with_sack(highest_sent, {{5000, 6000}});  // a second duplicate segment, with one retransmitted in all
  EXPECT_EQ(connection->info().congestion_window, reduced);
  EXPECT_EQ(connection->counters().reductions_undone, 0u);
}

// Eifel (RFC 3522): segment 2 was overtaken, not lost; RACK sent it again.
// The ACK that then covers it echoes the TSval of the original, older than
// the retransmission's: the hole was filled by the original, the recovery
// was spurious, and it is undone at once, before any D-SACK could say so.
TEST_F(RackTest, AnAckEchoingTheOriginalOfTheRetransmissionUndoesTheRecovery) {
  const std::uint32_t first_sent = send_and_acknowledge_the_first_segment();
  const std::uint32_t cwnd_before = connection->info().congestion_window;
  const std::uint32_t ssthresh_before = connection->info().slow_start_threshold;
  ASSERT_NO_FATAL_FAILURE(overtake_the_second_segment(first_sent));
  ASSERT_TRUE(connection->info().in_recovery);
  ASSERT_LT(connection->info().congestion_window, cwnd_before);
  now += 1200us;
  ack_echoing(3 * kTimestampedSegment, {}, first_sent);  // its original arrives, late
  EXPECT_FALSE(connection->info().in_recovery);
  EXPECT_GE(connection->info().congestion_window, cwnd_before);
  EXPECT_EQ(connection->info().slow_start_threshold, ssthresh_before);
  EXPECT_EQ(connection->counters().reductions_undone, 1u);
}

// The same after a retransmission timeout (RFC 4015's response): the ACKs
// were only late. The first of them echoes a TSval older than the
// retransmission's, so the window goes back to what it was and the sender
// goes on with new data where it had stopped, instead of sending the rest
// of the window again (go-back-N) one slow-start step at a time.
TEST_F(SackTest, ATimeoutShownSpuriousByTimestampsIsUndoneWithoutGoingBackN) {
  config.timestamps = true;
  open_offering_sack(false, true);
  const std::uint32_t segment = 1000 - 12;
  send(pattern(30 * segment));
  const std::uint32_t first_sent = sent.front().header.options.timestamps->value;
  retransmissions();
  ASSERT_EQ(highest_sent, 10 * segment);  // the initial window
  const std::uint32_t cwnd_before = connection->info().congestion_window;
  const std::uint32_t ssthresh_before = connection->info().slow_start_threshold;
  while (connection->counters().timeouts == 0) run_for(10ms);
  ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{0}));
  ASSERT_LT(connection->info().congestion_window, cwnd_before);
  now += 1ms;
  TcpHeader late = from_peer(peer_iss + 1, iss + 1 + 5 * segment, flag::ack);
  late.options.timestamps = wire::TcpTimestamps{3, first_sent};
  feed(late);
  EXPECT_GE(connection->info().congestion_window, cwnd_before);
  EXPECT_EQ(connection->info().slow_start_threshold, ssthresh_before);
  EXPECT_EQ(connection->counters().reductions_undone, 1u);
  // What goes now is new data, from where the first window ended.
  EXPECT_TRUE(retransmissions().empty());
  EXPECT_GT(highest_sent, 10 * segment);
}

// The retransmission did fill the hole: the ACK echoes its TSval, and the
// reduction stays.
TEST_F(SackTest, ATimeoutWhoseRetransmissionFilledTheHoleStays) {
  config.timestamps = true;
  open_offering_sack(false, true);
  const std::uint32_t segment = 1000 - 12;
  send(pattern(30 * segment));
  retransmissions();
  const std::uint32_t cwnd_before = connection->info().congestion_window;
  while (connection->counters().timeouts == 0) run_for(10ms);
  ASSERT_FALSE(sent.empty());
  const std::uint32_t retransmission_sent = sent.back().header.options.timestamps->value;
  ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{0}));
  now += 1ms;
  TcpHeader answer = from_peer(peer_iss + 1, iss + 1 + 5 * segment, flag::ack);
  answer.options.timestamps = wire::TcpTimestamps{3, retransmission_sent};
  feed(answer);
  EXPECT_LT(connection->info().congestion_window, cwnd_before);
  EXPECT_EQ(connection->counters().reductions_undone, 0u);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{5 * segment, 6 * segment}));  // go-back-N, slow start
}

// ---- RACK's reordering window adapts (RFC 8985 §6.2 step 4) ----

// In the first test below, a hole is retransmitted and the peer then reports
// the retransmission a duplicate (the original was only late): the reordering
// window grows from a quarter of the minimum RTT (2.5 ms here) to half
// (5 ms) for what follows. Without the D-SACK the next hole would go again
// after 2.5 ms.
class ReorderingWindowTest : public RackTest {
 protected:
  // The segment at SND.UNA (`acknowledged`) missing, the one after SACKed a
  // round trip (10 ms) after both went: RACK's time for it begins.
  void next_segment_overtaken() {
    now += 10ms;
    ack_with_sack(acknowledged, {{acknowledged + 1000, acknowledged + 2000}});
  }
  // Everything sent so far arrives, a round trip after the last of it went
  // (no shorter sample lowers the minimum RTT); recovery, if any, ends.
  void everything_arrives() {
    retransmissions();
    now += 10ms;
    ack_with_sack(highest_sent, {});
    acknowledged = highest_sent;
    new_segments();
  }
  // A spurious retransmission reported as such: the window widens.
  void widen_once() {
    next_segment_overtaken();
    run_for(3ms);
    ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{acknowledged}));
    const std::uint32_t spurious = acknowledged;
    everything_arrives();
    ack_with_sack(acknowledged, {{spurious, spurious + 1000}});
  }

  // The handshake's round trip as long as the data's: SRTT, which bounds
  // the window, stays above the widened window.
  ReorderingWindowTest() { handshake_round_trip = 10ms; }

  std::uint32_t acknowledged = 1000;
};

TEST_F(ReorderingWindowTest, ADsackWidensTheWindowByAQuarterOfTheMinimumRtt) {
  open_and_fill_the_window();
  widen_once();
  next_segment_overtaken();
  run_for(4ms);  // past 2.5 ms, within 5
  EXPECT_TRUE(retransmissions().empty());
  run_for(2ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{acknowledged}));
}

// The round that must pass before a D-SACK widens the window again ends, as
// in Linux, once a segment sent after the last widening is delivered, even
// SACKed past a hole. (RFC 8985 waits for SND.UNA to pass SND.NXT of the
// widening: with a hole at SND.UNA, as under steady loss, the window
// stayed narrow and overtaken segments were retransmitted.) Here the second
// D-SACK comes while the hole holds SND.UNA: the window grows to three
// quarters of the minimum RTT (7.5 ms).
TEST_F(ReorderingWindowTest, ADsackARoundLaterWidensAgainThoughAHoleHoldsSndUna) {
  open_and_fill_the_window();
  send(pattern(100000));
  widen_once();  // 5 ms
  const std::uint32_t hole = acknowledged;
  next_segment_overtaken();  // what it frees goes: sent after the widening
  run_for(6ms);
  ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{hole}));
  now += 4ms;  // a round trip (10 ms) after they went: the minimum RTT stays
  const std::uint32_t sent_then = highest_sent;
  ack_with_sack(hole, {{hole + 1000, sent_then}});  // delivered past the hole: a round
  new_segments();
  ack_with_sack(hole, {{hole + 1000, hole + 2000}, {hole + 1000, sent_then}});  // a duplicate
  everything_arrives();
  next_segment_overtaken();
  run_for(7ms);  // past 5 ms, within 7.5
  EXPECT_TRUE(retransmissions().empty());
  run_for(1ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{acknowledged}));
}

// RFC 8985 §6.2 step 4: sixteen recoveries in a row without a D-SACK and
// the window is back to a quarter of the minimum RTT (reo_wnd_persist):
// reordering the path showed once does not slow loss detection for ever.
TEST_F(ReorderingWindowTest, SixteenRecoveriesWithoutADsackNarrowItAgain) {
  open_and_fill_the_window();
  send(pattern(100000));  // enough for all of them
  widen_once();
  for (int recovery = 0; recovery < 16; ++recovery) {
    next_segment_overtaken();
    run_for(20ms);
    ASSERT_EQ(retransmissions(), (std::set<std::uint32_t>{acknowledged})) << "recovery " << recovery;
    everything_arrives();
    ASSERT_FALSE(connection->info().in_recovery);
  }
  next_segment_overtaken();
  run_for(3ms);
  EXPECT_EQ(retransmissions(), (std::set<std::uint32_t>{acknowledged}));
}

// ---- Whole transfers ----

struct Transfer {
  bool completed = false;
  std::vector<std::uint8_t> received;
};

Transfer transfer(Loopback& loopback, const std::vector<std::uint8_t>& data) {
  Transfer result;
  std::size_t written = 0;
  bool closed = false;
  std::vector<std::uint8_t> buffer(64 * 1024);
  loopback.connect();
  result.completed = loopback.run_until([&] {
    TcpConnection& client = *loopback.client;
    if (client.state() == TcpState::established && written < data.size()) {
      auto taken = client.send(std::span(data).subspan(written), loopback.now);
      if (taken) written += *taken;
    }
    if (written == data.size() && !closed) {
      client.close(loopback.now);
      closed = true;
    }
    if (loopback.server && loopback.server->readable()) {
      auto got = loopback.server->receive(buffer, loopback.now);
      if (got && *got > 0) result.received.insert(result.received.end(), buffer.begin(), buffer.begin() + *got);
    }
    return result.received.size() == data.size() && client.all_acknowledged();
  }, 3600s);
  return result;
}

TEST(SackLoopbackTest, LossyTransferNeedsFewerTimeoutsWithSack) {
  const auto data = pattern(4u << 20, 9);
  std::uint64_t timeouts[2] = {};
  for (const bool sack : {true, false}) {
    TcpConfig config;
    config.max_segment_size = 1460;
    config.sack = sack;
    Loopback::Options options{config, config};
    options.loss = 0.03;
    options.reorder = 0.01;
    options.delay = 5ms;
    options.seed = 23;
    Loopback loopback(options);
    const Instant start = loopback.now;
    const Transfer result = transfer(loopback, data);
    ASSERT_TRUE(result.completed) << "sack " << sack;
    EXPECT_EQ(result.received, data) << "sack " << sack;
    EXPECT_EQ(loopback.client->info().sack, sack);
    timeouts[sack ? 0 : 1] = loopback.client->counters().timeouts;
    std::cout << "4 MiB at 3 % loss, SACK " << (sack ? "on" : "off") << ": " << timeouts[sack ? 0 : 1]
              << " retransmission timeouts, " << loopback.client->counters().fast_retransmits << " recoveries, "
              << loopback.client->counters().retransmitted_segments << " segments retransmitted, "
              << std::chrono::duration_cast<std::chrono::milliseconds>(loopback.now - start).count()
              << " ms\n";
  }
  EXPECT_LT(timeouts[0], timeouts[1]);
  // RACK-TLP: losses (lost retransmissions and tails included) are found by
  // ACKs and the probe, not the RTO (17 timeouts before RACK-TLP, 0 after).
  EXPECT_LE(timeouts[0], 2u);
}

}  // namespace
}  // namespace utcp::testing
