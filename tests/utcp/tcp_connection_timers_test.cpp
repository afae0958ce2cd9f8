// TcpConnection: retransmission (RFC 6298: the RTO from samples, backoff,
// Karn's rule, giving up), NewReno (RFC 5681, RFC 6582: slow start,
// congestion avoidance, fast retransmit, partial ACKs) and keepalive.
#include "tcp_connection_harness.hpp"

namespace utcp::testing {
namespace {

using RetransmissionTest = ConnectionTest;
using CongestionTest = ConnectionTest;
using KeepaliveTest = ConnectionTest;

TEST_F(RetransmissionTest, TimeoutRetransmitsAndBacksOff) {
  config.initial_rto = 1000ms;
  config.max_rto = 60000ms;  // RFC 6298's least maximum: the doubling shows up to 8 s
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  // The SYN times out once before the SYN-ACK comes.
  run_for(1s);
  EXPECT_EQ(next_sent().header.flags, flag::syn);
  EXPECT_EQ(connection->info().rto, 2000ms);
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
  syn_ack.options.max_segment_size = 1000;
  feed(syn_ack);
  next_sent();
  // Karn: the SYN was retransmitted, so its ACK gives no sample; the backed-off RTO stays.
  EXPECT_EQ(connection->info().smoothed_rtt, 0us);
  EXPECT_EQ(connection->info().rto, 2000ms);

  send(pattern(500));
  const SentSegment original = next_sent();
  EXPECT_EQ(connection->next_timer(), now + 2s);
  run_for(2s);
  const SentSegment again = next_sent();
  EXPECT_EQ(again.header.sequence, original.header.sequence);
  EXPECT_EQ(again.payload, original.payload);
  EXPECT_EQ(connection->info().rto, 4000ms);
  EXPECT_EQ(connection->next_timer(), now + 4s);
  run_for(4s);
  next_sent();
  EXPECT_EQ(connection->info().rto, 8000ms);
  EXPECT_EQ(connection->counters().timeouts, 3u);
  EXPECT_EQ(connection->counters().retransmitted_segments, 3u);

  // Acknowledged after retransmissions: still no sample, the RTO stays backed off.
  run_for(100ms);
  feed(from_peer(peer_iss + 1, iss + 501, flag::ack));
  EXPECT_EQ(connection->info().smoothed_rtt, 0us);
  EXPECT_EQ(connection->info().rto, 8000ms);
  EXPECT_EQ(connection->next_timer(), now + 1s);  // only the emptied send buffer's release

  // New data, acknowledged in 50 ms: a sample, and the RTO from it (at least min_rto).
  send(pattern(100));
  next_sent();
  run_for(50ms);
  feed(from_peer(peer_iss + 1, iss + 601, flag::ack));
  EXPECT_EQ(connection->info().smoothed_rtt, 50ms);
  EXPECT_EQ(connection->info().rtt_variance, 25ms);
  EXPECT_EQ(connection->info().rto, 200ms);  // 50 + 4 * 25 = 150, below min_rto
}

TEST_F(RetransmissionTest, RtoFollowsRfc6298Formulas) {
  config.min_rto = 1ms;
  config.nodelay = true;
  open_active();
  auto exchange = [this](std::chrono::milliseconds rtt, std::uint32_t acked) {
    send(pattern(10));
    next_sent();
    now += rtt;  // the ACK comes before the (tiny) RTO is looked at
    feed(from_peer(peer_iss + 1, iss + 1 + acked, flag::ack));
  };
  // The handshake's sample was 0 (same instant): SRTT 0, RTTVAR 0.
  exchange(100ms, 10);
  // SRTT = 7/8 * 0 + 1/8 * 100 = 12.5 ms; RTTVAR = 3/4 * 0 + 1/4 * 100 = 25 ms.
  EXPECT_EQ(connection->info().smoothed_rtt, 12500us);
  EXPECT_EQ(connection->info().rtt_variance, 25000us);
  EXPECT_EQ(connection->info().rto, 113ms);  // 12.5 + 4 * 25 = 112.5, rounded up
  exchange(200ms, 20);
  // RTTVAR = 3/4 * 25 + 1/4 * |12.5 - 200| = 65.625 ms; SRTT = 7/8 * 12.5 + 1/8 * 200 = 35.9375 ms.
  EXPECT_EQ(connection->info().rtt_variance, 65625us);
  EXPECT_EQ(connection->info().smoothed_rtt, 35937us);
  EXPECT_EQ(connection->info().rto, 299ms);  // 35.937 + 262.5 = 298.44, rounded up
}

TEST_F(RetransmissionTest, FirstSampleSetsSrttAndHalfOfIt) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  run_for(300ms);
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
  feed(syn_ack);
  EXPECT_EQ(connection->info().smoothed_rtt, 300ms);
  EXPECT_EQ(connection->info().rtt_variance, 150ms);
  EXPECT_EQ(connection->info().rto, 900ms);  // 300 + 4 * 150
}

TEST_F(RetransmissionTest, RetriesExhaustedTimeOutAndClose) {
  config.data_retries = 3;
  open_active();
  send(pattern(100));
  next_sent();
  for (int retry = 0; retry < 3; ++retry) {
    run_for(*connection->next_timer() - now);
    EXPECT_EQ(next_sent().payload.size(), 100u);
  }
  EXPECT_EQ(connection->state(), TcpState::established);
  run_for(*connection->next_timer() - now);
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::timed_out);
  EXPECT_EQ(connection->send(pattern(1), now).error(), std::errc::timed_out);
  EXPECT_FALSE(connection->next_timer());
}

// Issue 21, defect 8: a peer is given up on silence. Our segment goes
// unanswered through three timeouts (data_retries), but the peer's own
// segments keep arriving between them: it is alive, the loss is loss, and
// the connection goes on; once the peer falls silent, three more timeouts end
// it. (Before, retries counted timeouts without a new ACK, whatever else
// came: the connection died at the fourth timeout.)
TEST_F(RetransmissionTest, APeerThatKeepsSendingIsNotGivenUp) {
  config.data_retries = 3;
  config.delayed_ack = false;  // our ACK of the peer's data goes at once
  open_active();
  send(pattern(100));
  next_sent();
  std::uint32_t peer_sequence = peer_iss + 1;
  for (int timeout = 0; timeout < 6; ++timeout) {
    run_for(*connection->next_timer() - now);
    ASSERT_EQ(connection->state(), TcpState::established) << "timeout " << timeout;
    EXPECT_EQ(next_sent().payload.size(), 100u);  // the retransmission
    // The peer's data (ACKing nothing new: our segment and its ACKs are lost).
    feed(from_peer(peer_sequence, iss + 1, flag::ack), pattern(10));
    peer_sequence += 10;
    sent.clear();  // our ACK of it
  }
  // Silence. Half of what we sent went again: a loss that asks for more
  // than data_retries before a silent peer is taken for dead (18 at this
  // loss), and no more than 64.
  int silent_timeouts = 0;
  while (connection->state() == TcpState::established && silent_timeouts < 100) {
    run_for(*connection->next_timer() - now);
    ++silent_timeouts;
  }
  EXPECT_GT(silent_timeouts, 3);
  EXPECT_LE(silent_timeouts, 65);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::timed_out);
}

// With timestamps, the ACK of a retransmitted segment gives an RTT sample
// from the timestamp it echoes (RFC 7323 §4), which ends the backoff: the
// next timeout is one measured RTO away, not the doubled one.
TEST_F(RetransmissionTest, AnEchoedTimestampEndsTheBackoffAfterARetransmission) {
  config.min_rto = 200ms;
  config.timestamps = true;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  const SentSegment syn = next_sent();
  ASSERT_TRUE(syn.header.options.timestamps);
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
  syn_ack.options.max_segment_size = 1000;
  syn_ack.options.timestamps = wire::TcpTimestamps{5000, syn.header.options.timestamps->value};
  feed(syn_ack);
  next_sent();
  send(pattern(100));
  next_sent();
  run_for(*connection->next_timer() - now);
  const SentSegment again = next_sent();
  const std::chrono::milliseconds backed_off = connection->info().rto;
  ASSERT_GT(backed_off, 200ms);
  run_for(10ms);
  TcpHeader ack = from_peer(peer_iss + 1, iss + 101, flag::ack);
  ack.options.timestamps = wire::TcpTimestamps{5001, again.header.options.timestamps->value};
  feed(ack);
  EXPECT_EQ(connection->info().rto, 200ms);  // measured 10 ms: min_rto, the backoff over
  EXPECT_EQ(connection->info().smoothed_rtt < 20ms, true);
}

TEST_F(RetransmissionTest, MaxRtoCapsTheBackoff) {
  config.max_rto = 3000ms;
  open_active();
  send(pattern(100));
  next_sent();
  for (int i = 0; i < 5; ++i) run_for(*connection->next_timer() - now);
  EXPECT_EQ(connection->info().rto, 3000ms);
}

TEST_F(RetransmissionTest, TimeoutGoesBackNInSlowStart) {
  open_active();
  send(pattern(5000));
  for (int i = 0; i < 5; ++i) next_sent();
  run_for(*connection->next_timer() - now);
  EXPECT_EQ(next_sent().header.sequence, SeqNumber(iss + 1));  // one segment: cwnd is 1 MSS
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(connection->info().congestion_window, 1000u);
  EXPECT_EQ(connection->info().slow_start_threshold, 2500u);  // half of the 5000 in flight
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  EXPECT_EQ(next_sent().header.sequence, SeqNumber(iss + 1001));  // cwnd 2 MSS: the next two again
  EXPECT_EQ(next_sent().header.sequence, SeqNumber(iss + 2001));
  EXPECT_TRUE(sent.empty());
  // The receiver had the rest: one ACK covers everything.
  feed(from_peer(peer_iss + 1, iss + 5001, flag::ack));
  EXPECT_TRUE(connection->all_acknowledged());
}

// After a timeout SND.NXT went back to SND.UNA; a pure ACK must still be
// numbered SND.MAX. The peer took everything already, and would find an ACK
// numbered SND.NXT below its RCV.NXT, drop it, ACK field and all: in a
// transfer both ways, each side retransmitting old data, neither ever learnt
// the other's ACKs (found by TcpLossyLink).
TEST_F(RetransmissionTest, PureAckAfterATimeoutIsNumberedPastEverythingSent) {
  open_active();
  send(pattern(3000));
  for (int i = 0; i < 3; ++i) next_sent();
  run_for(*connection->next_timer() - now);
  EXPECT_EQ(next_sent().header.sequence, SeqNumber(iss + 1));  // go back N
  ASSERT_EQ(connection->info().send_next, SeqNumber(iss + 1001));
  // Data from the peer whose ACK is old: we answer it with a pure ACK.
  const auto data = pattern(10);
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack | flag::psh), data);
  run_for(std::chrono::milliseconds(100));  // the delayed ACK, if any
  const SentSegment ack = next_sent();
  EXPECT_TRUE(ack.payload.empty());
  EXPECT_EQ(ack.header.sequence, SeqNumber(iss + 3001));
  EXPECT_EQ(ack.header.acknowledgment, SeqNumber(peer_iss + 11));
}

TEST_F(CongestionTest, InitialWindowAndSlowStart) {
  open_active();
  EXPECT_EQ(connection->info().congestion_window, 10000u);  // RFC 6928: min(10 MSS, max(2 MSS, 14600))
  send(pattern(30000));
  std::uint32_t sent_segments = 0;
  while (!sent.empty()) {
    next_sent();
    ++sent_segments;
  }
  EXPECT_EQ(sent_segments, 10u);
  // Each ACK of a full segment in slow start grows cwnd by one MSS and lets two go.
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  EXPECT_EQ(connection->info().congestion_window, 11000u);
  EXPECT_EQ(sent.size(), 2u);
  sent.clear();
  // An ACK of two segments still grows it by one MSS only (RFC 5681 eq. 2).
  feed(from_peer(peer_iss + 1, iss + 3001, flag::ack));
  EXPECT_EQ(connection->info().congestion_window, 12000u);
}

TEST_F(CongestionTest, CongestionAvoidanceGrowsAboutOneSegmentPerWindow) {
  open_active();
  send(pattern(8000));
  sent.clear();
  run_for(*connection->next_timer() - now);  // timeout: ssthresh 4000, cwnd 1000
  sent.clear();
  std::uint32_t acked = 0;
  auto ack_next = [&] {
    acked += 1000;
    feed(from_peer(peer_iss + 1, iss + 1 + acked, flag::ack));
  };
  ack_next();
  EXPECT_EQ(connection->info().congestion_window, 2000u);
  ack_next();
  ack_next();
  EXPECT_EQ(connection->info().congestion_window, 4000u);  // reached ssthresh
  // Byte counting (RFC 5681 §3.1): one MSS once a window's bytes are acknowledged.
  for (int i = 0; i < 3; ++i) {
    ack_next();
    EXPECT_EQ(connection->info().congestion_window, 4000u);
  }
  ack_next();
  EXPECT_EQ(connection->info().congestion_window, 5000u);
}

TEST_F(CongestionTest, FastRetransmitAndNewRenoPartialAck) {
  open_active();
  send(pattern(10000));
  for (int i = 0; i < 10; ++i) next_sent();
  // Segments 2 (iss+1001) and 6 (iss+5001) are lost.
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  sent.clear();  // slow start let two new segments go... there are none: all 10000 bytes were out
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  EXPECT_TRUE(sent.empty());
  EXPECT_FALSE(connection->info().in_recovery);
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));  // the third duplicate
  const SentSegment fast = next_sent();
  EXPECT_EQ(fast.header.sequence, SeqNumber(iss + 1001));
  EXPECT_EQ(fast.payload.size(), 1000u);
  EXPECT_EQ(connection->counters().fast_retransmits, 1u);
  EXPECT_EQ(connection->counters().duplicate_acks_in, 3u);
  EXPECT_TRUE(connection->info().in_recovery);
  EXPECT_EQ(connection->info().slow_start_threshold, 4500u);  // half of the 9000 in flight
  EXPECT_EQ(connection->info().congestion_window, 4500u + 3000u);
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  EXPECT_EQ(connection->info().congestion_window, 8500u);  // inflated by each further duplicate

  // A partial ACK: up to the second hole, which goes at once.
  feed(from_peer(peer_iss + 1, iss + 5001, flag::ack));
  const SentSegment partial = next_sent();
  EXPECT_EQ(partial.header.sequence, SeqNumber(iss + 5001));
  EXPECT_TRUE(connection->info().in_recovery);
  EXPECT_EQ(connection->info().congestion_window, 8500u - 4000u + 1000u);
  EXPECT_EQ(connection->counters().timeouts, 0u);

  // The full ACK ends recovery: cwnd = min(ssthresh, flight + MSS).
  feed(from_peer(peer_iss + 1, iss + 10001, flag::ack));
  EXPECT_FALSE(connection->info().in_recovery);
  EXPECT_EQ(connection->info().congestion_window, 2000u);
  EXPECT_TRUE(connection->all_acknowledged());
  EXPECT_EQ(connection->counters().retransmitted_segments, 2u);
}

TEST_F(CongestionTest, WindowUpdatesAreNotDuplicateAcks) {
  open_active();
  send(pattern(3000));
  sent.clear();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 50000));
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 40000));
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 30000));
  EXPECT_EQ(connection->counters().duplicate_acks_in, 0u);
  EXPECT_EQ(connection->counters().fast_retransmits, 0u);
}

TEST_F(KeepaliveTest, ProbesAfterIdleAndTimesOutUnanswered) {
  config.keepalive = true;
  config.keepalive_idle = 10s;
  config.keepalive_interval = 1s;
  config.keepalive_probes = 3;
  open_active();
  EXPECT_EQ(connection->next_timer(), now + 10s);
  run_for(10s);
  const SentSegment probe = next_sent();
  EXPECT_EQ(probe.header.flags, flag::ack);
  EXPECT_EQ(probe.header.sequence, SeqNumber(iss));  // SND.NXT - 1
  EXPECT_TRUE(probe.payload.empty());
  // Answered: idle again from here.
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack));
  EXPECT_EQ(connection->next_timer(), now + 10s);
  run_for(10s);
  run_for(2s);
  EXPECT_EQ(connection->counters().keepalive_probes, 4u);
  EXPECT_EQ(connection->state(), TcpState::established);
  run_for(1s);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::timed_out);
}

TEST_F(KeepaliveTest, OffByDefaultAndSwitchable) {
  open_active();
  EXPECT_FALSE(connection->next_timer());
  connection->set_keepalive(true, now);
  EXPECT_EQ(connection->next_timer(), now + config.keepalive_idle);
}

}  // namespace
}  // namespace utcp::testing
