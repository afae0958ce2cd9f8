// TcpConnection: opening (active, passive, simultaneous, the MSS option),
// closing (active, passive, simultaneous, TIME-WAIT) and resets (RFC 9293,
// RFC 5961), segment by segment on virtual time.
#include <array>

#include "tcp_connection_harness.hpp"

namespace utcp::testing {
namespace {

using OpenTest = ConnectionTest;
using CloseTest = ConnectionTest;
using ResetTest = ConnectionTest;

TEST_F(OpenTest, ActiveOpenSendsSynThenAcksTheSynAck) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  EXPECT_EQ(connection->state(), TcpState::syn_sent);
  const SentSegment syn = next_sent();
  EXPECT_EQ(syn.header.flags, flag::syn);
  EXPECT_EQ(syn.header.sequence, SeqNumber(iss));
  EXPECT_EQ(syn.header.source_port, 1000);
  EXPECT_EQ(syn.header.destination_port, 2000);
  EXPECT_EQ(syn.header.options.max_segment_size, 1000);
  EXPECT_FALSE(syn.header.options.window_scale);
  EXPECT_FALSE(syn.header.options.timestamps);
  EXPECT_EQ(syn.header.window, 64000);
  EXPECT_EQ(connection->next_timer(), now + 1s);  // the initial RTO

  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack, 30000);
  syn_ack.options.max_segment_size = 1460;
  feed(syn_ack);
  EXPECT_EQ(connection->state(), TcpState::established);
  EXPECT_TRUE(connection->was_established());
  const SentSegment ack = next_sent();
  EXPECT_EQ(ack.header.flags, flag::ack);
  EXPECT_EQ(ack.header.sequence, SeqNumber(iss + 1));
  EXPECT_EQ(ack.header.acknowledgment, SeqNumber(peer_iss + 1));
  EXPECT_TRUE(sent.empty());
  EXPECT_FALSE(connection->next_timer());  // nothing outstanding
  const TcpInfo info = connection->info();
  EXPECT_EQ(info.send_window, 30000u);
  EXPECT_EQ(info.max_segment_size, 1000);  // min(1460, ours)
  EXPECT_TRUE(connection->all_acknowledged());
}

TEST_F(OpenTest, PassiveOpenAnswersSynAckAndEstablishesOnAck) {
  TcpHeader syn = from_peer(peer_iss, 0, flag::syn, 20000);
  syn.options.max_segment_size = 800;
  connection = TcpConnection::accept(ports, config, {syn, {}}, SeqNumber(iss), now, capture());
  EXPECT_EQ(connection->state(), TcpState::syn_received);
  const SentSegment syn_ack = next_sent();
  EXPECT_EQ(syn_ack.header.flags, flag::syn | flag::ack);
  EXPECT_EQ(syn_ack.header.sequence, SeqNumber(iss));
  EXPECT_EQ(syn_ack.header.acknowledgment, SeqNumber(peer_iss + 1));
  EXPECT_EQ(syn_ack.header.options.max_segment_size, 1000);

  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 20000));
  EXPECT_EQ(connection->state(), TcpState::established);
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(connection->info().max_segment_size, 800);
  EXPECT_EQ(connection->info().send_window, 20000u);
}

TEST_F(OpenTest, PassiveOpenResendsSynAckForARepeatedSyn) {
  const TcpHeader syn = from_peer(peer_iss, 0, flag::syn);
  connection = TcpConnection::accept(ports, config, {syn, {}}, SeqNumber(iss), now, capture());
  next_sent();
  feed(syn);
  const SentSegment again = next_sent();
  EXPECT_EQ(again.header.flags, flag::syn | flag::ack);
  EXPECT_EQ(again.header.sequence, SeqNumber(iss));
  EXPECT_EQ(connection->state(), TcpState::syn_received);
}

TEST_F(OpenTest, SynAckWithABadAckIsAnsweredWithReset) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  feed(from_peer(peer_iss, iss + 7, flag::syn | flag::ack));
  const SentSegment reset = next_sent();
  EXPECT_EQ(reset.header.flags, flag::rst);
  EXPECT_EQ(reset.header.sequence, SeqNumber(iss + 7));
  EXPECT_EQ(connection->state(), TcpState::syn_sent);
}

TEST_F(OpenTest, MssIs536WhenThePeerSendsNone) {
  open_active(60000, std::nullopt);
  EXPECT_EQ(connection->info().max_segment_size, 536);
  send(pattern(2000));
  EXPECT_EQ(next_sent().payload.size(), 536u);
}

TEST_F(OpenTest, MssLeavesRoomForTimestamps) {
  config.timestamps = true;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  const SentSegment syn = next_sent();
  ASSERT_TRUE(syn.header.options.timestamps);
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
  syn_ack.options.max_segment_size = 1460;
  syn_ack.options.timestamps = wire::TcpTimestamps{777, syn.header.options.timestamps->value};
  feed(syn_ack);
  const SentSegment ack = next_sent();
  ASSERT_TRUE(ack.header.options.timestamps);
  EXPECT_EQ(ack.header.options.timestamps->echo_reply, 777u);
  EXPECT_TRUE(connection->info().timestamps);
  EXPECT_EQ(connection->info().max_segment_size, 1000 - 12);  // RFC 9293 §3.7.1: options come out of the MSS
}

TEST_F(OpenTest, SimultaneousOpenGoesThroughSynReceived) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  // The peer's SYN crosses ours.
  TcpHeader syn = from_peer(peer_iss, 0, flag::syn);
  syn.options.max_segment_size = 1000;
  feed(syn);
  EXPECT_EQ(connection->state(), TcpState::syn_received);
  const SentSegment syn_ack = next_sent();
  EXPECT_EQ(syn_ack.header.flags, flag::syn | flag::ack);
  EXPECT_EQ(syn_ack.header.sequence, SeqNumber(iss));
  EXPECT_EQ(syn_ack.header.acknowledgment, SeqNumber(peer_iss + 1));
  // The peer's SYN-ACK (its SYN again, acknowledging ours).
  feed(from_peer(peer_iss, iss + 1, flag::syn | flag::ack));
  EXPECT_EQ(connection->state(), TcpState::established);
  EXPECT_TRUE(connection->was_established());
}

// RFC 7323 §2.2: the window of a SYN-ACK is never scaled, also when it
// ends a simultaneous open in SYN-RECEIVED, after both SYNs offered scaling.
TEST_F(OpenTest, ASimultaneousOpensSynAckWindowIsNotScaled) {
  config.window_scaling = true;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  TcpHeader syn = from_peer(peer_iss, 0, flag::syn, 30000);
  syn.options.max_segment_size = 1000;
  syn.options.window_scale = 7;
  feed(syn);
  ASSERT_EQ(connection->state(), TcpState::syn_received);
  ASSERT_EQ(connection->info().send_window_scale, 7);
  next_sent();
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack, 20000);
  syn_ack.options.max_segment_size = 1000;
  syn_ack.options.window_scale = 7;
  feed(syn_ack);
  EXPECT_EQ(connection->state(), TcpState::established);
  EXPECT_EQ(connection->info().send_window, 20000u);
  // The next segment's window is scaled.
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack, 300));
  EXPECT_EQ(connection->info().send_window, 300u << 7);
}

TEST_F(OpenTest, SimultaneousOpenOfTwoConnections) {
  Loopback::Options options{plain_config(), plain_config()};
  Loopback loopback(options);
  loopback.connect_both();
  ASSERT_TRUE(loopback.run_until([&] {
    return loopback.client->state() == TcpState::established && loopback.server->state() == TcpState::established;
  }));
  const auto data = pattern(5000);
  ASSERT_EQ(*loopback.client->send(data, loopback.now), data.size());
  std::vector<std::uint8_t> received(10000);
  ASSERT_TRUE(loopback.run_until([&] { return loopback.server->info().bytes_readable == data.size(); }));
  received.resize(*loopback.server->receive(received, loopback.now));
  EXPECT_EQ(received, data);
}

TEST_F(OpenTest, SynRetriesExhaustedTimeOut) {
  config.syn_retries = 2;
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  run_for(1s);  // first retransmission, RTO doubles to 2 s
  EXPECT_EQ(next_sent().header.flags, flag::syn);
  run_for(2s);
  EXPECT_EQ(next_sent().header.flags, flag::syn);
  EXPECT_EQ(connection->state(), TcpState::syn_sent);
  run_for(4s);
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::timed_out);
  EXPECT_EQ(connection->counters().retransmitted_segments, 2u);
}

TEST_F(OpenTest, PortUnreachableInSynSentRefuses) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  EXPECT_TRUE(connection->on_icmp_unreachable(3, SeqNumber(iss), now));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::connection_refused);
}

// RFC 5927 §4.1: an ICMP error is taken only if the sequence number of the
// segment it quotes is in flight (SND.UNA <= SEG.SEQ < SND.NXT); anyone who
// knows the four-tuple could otherwise refuse an opening connection.
TEST_F(OpenTest, AnIcmpErrorQuotingASequenceNumberNotInFlightIsIgnored) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  for (const std::uint32_t quoted : {iss - 1, iss + 1, iss + 70000, iss + 0x80000000u})
    EXPECT_FALSE(connection->on_icmp_unreachable(3, SeqNumber(quoted), now)) << quoted;
  EXPECT_EQ(connection->state(), TcpState::syn_sent);
  feed(from_peer(peer_iss, iss + 1, flag::syn | flag::ack));
  EXPECT_EQ(connection->state(), TcpState::established);
}

TEST_F(OpenTest, HostUnreachableIsASoftErrorReportedAtTimeout) {
  config.data_retries = 1;
  open_active();
  send(pattern(100));
  EXPECT_TRUE(connection->on_icmp_unreachable(1, SeqNumber(iss + 1), now));
  EXPECT_EQ(connection->state(), TcpState::established);
  run_for(10s);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::host_unreachable);
}

TEST_F(OpenTest, ASoftErrorQuotingDataNotInFlightIsIgnored) {
  config.data_retries = 1;
  open_active();
  send(pattern(100));
  // Past SND.NXT, and before SND.UNA (the SYN, acknowledged).
  EXPECT_FALSE(connection->on_icmp_unreachable(1, SeqNumber(iss + 101), now));
  EXPECT_FALSE(connection->on_icmp_unreachable(1, SeqNumber(iss), now));
  run_for(10s);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::timed_out);
}

TEST_F(OpenTest, DataQueuedBeforeEstablishedGoesAfterTheHandshake) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  send(pattern(300));
  EXPECT_TRUE(sent.empty());
  TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack);
  syn_ack.options.max_segment_size = 1000;
  feed(syn_ack);
  const SentSegment data = next_sent();
  EXPECT_EQ(data.payload, pattern(300));
  EXPECT_EQ(data.header.acknowledgment, SeqNumber(peer_iss + 1));
}

// ---- Closing ----

TEST_F(CloseTest, ActiveCloseThroughTimeWait) {
  config.time_wait = 10s;
  open_active();
  connection->close(now);
  EXPECT_EQ(connection->state(), TcpState::fin_wait_1);
  const SentSegment fin = next_sent();
  EXPECT_EQ(fin.header.flags, flag::fin | flag::ack);
  EXPECT_EQ(fin.header.sequence, SeqNumber(iss + 1));
  EXPECT_EQ(connection->send_space(), 0u);
  EXPECT_EQ(connection->send(pattern(1), now).error(), std::errc::broken_pipe);

  feed(from_peer(peer_iss + 1, iss + 2, flag::ack));
  EXPECT_EQ(connection->state(), TcpState::fin_wait_2);
  feed(from_peer(peer_iss + 1, iss + 2, flag::fin | flag::ack));
  EXPECT_EQ(connection->state(), TcpState::time_wait);
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 2));
  EXPECT_EQ(connection->next_timer(), now + 10s);

  // The FIN again (our ACK was lost): ACKed once more, and 2 MSL starts over.
  run_for(6s);
  feed(from_peer(peer_iss + 1, iss + 2, flag::fin | flag::ack));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 2));
  EXPECT_EQ(connection->next_timer(), now + 10s);
  run_for(9s);
  EXPECT_EQ(connection->state(), TcpState::time_wait);
  run_for(1s);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_TRUE(connection->finished());
  EXPECT_FALSE(connection->error());
  EXPECT_FALSE(connection->next_timer());
}

TEST_F(CloseTest, PassiveCloseThroughCloseWaitAndLastAck) {
  open_active();
  feed(from_peer(peer_iss + 1, iss + 1, flag::fin | flag::ack));
  EXPECT_EQ(connection->state(), TcpState::close_wait);
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 2));  // a FIN is ACKed at once
  EXPECT_TRUE(connection->readable());
  std::array<std::uint8_t, 10> buffer{};
  EXPECT_EQ(*connection->receive(buffer, now), 0u);  // the end of the stream

  send(pattern(10));  // CLOSE-WAIT may still send
  EXPECT_EQ(next_sent().payload.size(), 10u);
  connection->close(now);
  EXPECT_EQ(connection->state(), TcpState::last_ack);
  const SentSegment fin = next_sent();  // a FIN alone is not held back by Nagle
  EXPECT_EQ(fin.header.flags, flag::fin | flag::ack);
  EXPECT_EQ(fin.header.sequence, SeqNumber(iss + 11));
  feed(from_peer(peer_iss + 2, iss + 11, flag::ack));
  EXPECT_EQ(connection->state(), TcpState::last_ack);
  feed(from_peer(peer_iss + 2, iss + 12, flag::ack));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_FALSE(connection->error());
}

TEST_F(CloseTest, SimultaneousCloseThroughClosing) {
  config.time_wait = 4s;
  open_active();
  connection->shutdown_write(now);
  EXPECT_EQ(next_sent().header.flags, flag::fin | flag::ack);
  // The peer's FIN crosses ours: it does not acknowledge our FIN.
  feed(from_peer(peer_iss + 1, iss + 1, flag::fin | flag::ack));
  EXPECT_EQ(connection->state(), TcpState::closing);
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 2));
  feed(from_peer(peer_iss + 2, iss + 2, flag::ack));
  EXPECT_EQ(connection->state(), TcpState::time_wait);
  run_for(4s);
  EXPECT_EQ(connection->state(), TcpState::closed);
}

TEST_F(CloseTest, HalfClosedFinWait2WaitsForThePeer) {
  open_active();
  connection->shutdown_write(now);
  feed(from_peer(peer_iss + 1, iss + 2, flag::ack));
  ASSERT_EQ(connection->state(), TcpState::fin_wait_2);
  EXPECT_FALSE(connection->next_timer());  // the application may still read
  feed(from_peer(peer_iss + 1, iss + 2, flag::ack), pattern(100));
  EXPECT_EQ(receive_all(), pattern(100));
}

TEST_F(CloseTest, OrphanedFinWait2GivesUpAfterTwoMsl) {
  config.time_wait = 5s;
  open_active();
  connection->close(now);
  feed(from_peer(peer_iss + 1, iss + 2, flag::ack));
  ASSERT_EQ(connection->state(), TcpState::fin_wait_2);
  EXPECT_EQ(connection->next_timer(), now + 5s);
  run_for(5s);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_FALSE(connection->error());
}

TEST_F(CloseTest, FinRetransmittedUntilAcknowledged) {
  open_active();
  connection->shutdown_write(now);
  next_sent();
  run_for(1s);
  const SentSegment again = next_sent();
  EXPECT_EQ(again.header.flags, flag::fin | flag::ack);
  EXPECT_EQ(again.header.sequence, SeqNumber(iss + 1));
}

TEST_F(CloseTest, CloseWithUnreadDataSendsReset) {
  open_active();
  feed(from_peer(peer_iss + 1, iss + 1, flag::ack | flag::psh), pattern(100));
  connection->close(now);
  const SentSegment reset = next_sent();
  EXPECT_EQ(reset.header.flags, flag::rst | flag::ack);
  EXPECT_EQ(reset.header.sequence, SeqNumber(iss + 1));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->counters().resets_out, 1u);
}

TEST_F(CloseTest, DataArrivingAfterCloseIsAnsweredWithReset) {
  open_active();
  connection->close(now);
  next_sent();  // FIN
  feed(from_peer(peer_iss + 1, iss + 2, flag::ack), pattern(50));
  EXPECT_EQ(next_sent().header.flags, flag::rst | flag::ack);
  EXPECT_EQ(connection->state(), TcpState::closed);
}

TEST_F(CloseTest, AbortSendsResetAndCloses) {
  open_active();
  connection->abort(now);
  EXPECT_EQ(next_sent().header.flags, flag::rst | flag::ack);
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->send(pattern(1), now).error(), std::errc::broken_pipe);
}

// ---- Resets (RFC 9293 §3.10.7, RFC 5961) ----

TEST_F(ResetTest, InSynSentWithAcceptableAckRefuses) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  feed(from_peer(0, iss + 1, flag::rst | flag::ack));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::connection_refused);
  EXPECT_EQ(connection->send(pattern(1), now).error(), std::errc::connection_refused);
}

TEST_F(ResetTest, InSynSentWithUnacceptableAckOrNoAckIsIgnored) {
  connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
  next_sent();
  feed(from_peer(0, iss + 50, flag::rst | flag::ack));
  feed(from_peer(0, 0, flag::rst));
  EXPECT_EQ(connection->state(), TcpState::syn_sent);
  EXPECT_TRUE(sent.empty());
}

TEST_F(ResetTest, InSynReceivedCloses) {
  connection = TcpConnection::accept(ports, config, {from_peer(peer_iss, 0, flag::syn), {}}, SeqNumber(iss), now,
                                     capture());
  next_sent();
  feed(from_peer(peer_iss + 1, 0, flag::rst));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_FALSE(connection->was_established());
}

TEST_F(ResetTest, ExactSequenceInEstablishedResets) {
  open_active();
  feed(from_peer(peer_iss + 1, 0, flag::rst));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_EQ(connection->error(), std::errc::connection_reset);
  EXPECT_EQ(connection->counters().resets_in, 1u);
  std::array<std::uint8_t, 4> buffer{};
  EXPECT_EQ(connection->receive(buffer, now).error(), std::errc::connection_reset);
  EXPECT_TRUE(sent.empty());
}

TEST_F(ResetTest, InWindowButNotExactGetsAChallengeAck) {
  open_active();
  feed(from_peer(peer_iss + 1000, 0, flag::rst));
  EXPECT_EQ(connection->state(), TcpState::established);
  const SentSegment challenge = next_sent();
  EXPECT_EQ(challenge.header.flags, flag::ack);
  EXPECT_EQ(challenge.header.acknowledgment, SeqNumber(peer_iss + 1));
  EXPECT_EQ(connection->counters().challenge_acks, 1u);
  EXPECT_EQ(connection->counters().resets_in, 0u);
}

TEST_F(ResetTest, OutsideTheWindowIsDropped) {
  open_active();
  feed(from_peer(peer_iss + 1 + 100000, 0, flag::rst));
  feed(from_peer(peer_iss - 10, 0, flag::rst));
  EXPECT_EQ(connection->state(), TcpState::established);
  EXPECT_TRUE(sent.empty());
}

TEST_F(ResetTest, InFinWait2AndCloseWaitResets) {
  open_active();
  connection->shutdown_write(now);
  feed(from_peer(peer_iss + 1, iss + 2, flag::ack));
  ASSERT_EQ(connection->state(), TcpState::fin_wait_2);
  feed(from_peer(peer_iss + 1, 0, flag::rst));
  EXPECT_EQ(connection->error(), std::errc::connection_reset);
}

TEST_F(ResetTest, InTimeWaitCloses) {
  open_active();
  connection->shutdown_write(now);
  feed(from_peer(peer_iss + 1, iss + 2, flag::fin | flag::ack));
  ASSERT_EQ(connection->state(), TcpState::time_wait);
  feed(from_peer(peer_iss + 2, 0, flag::rst));
  EXPECT_EQ(connection->state(), TcpState::closed);
  EXPECT_FALSE(connection->error());
}

TEST_F(ResetTest, SynInEstablishedGetsAChallengeAck) {
  open_active();
  feed(from_peer(peer_iss + 1, 0, flag::syn));
  EXPECT_EQ(connection->state(), TcpState::established);
  EXPECT_EQ(next_sent().header.flags, flag::ack);
  EXPECT_EQ(connection->counters().challenge_acks, 1u);
}

TEST_F(ResetTest, AckOfUnsentDataIsAnsweredAndDropped) {
  open_active();
  feed(from_peer(peer_iss + 1, iss + 5000, flag::ack), pattern(10));
  const SentSegment ack = next_sent();
  EXPECT_EQ(ack.header.acknowledgment, SeqNumber(peer_iss + 1));  // the data was not taken
  EXPECT_EQ(connection->info().bytes_readable, 0u);
}

TEST_F(ResetTest, AckTooFarBehindGetsAChallengeAck) {
  open_active(1000);  // the peer's largest window: 1000
  feed(from_peer(peer_iss + 1, iss - 5000, flag::ack), pattern(10));
  EXPECT_EQ(next_sent().header.acknowledgment, SeqNumber(peer_iss + 1));
  EXPECT_EQ(connection->counters().challenge_acks, 1u);
  EXPECT_EQ(connection->info().bytes_readable, 0u);
}

TEST(ResetFor, AnswersAnAckWithItsAcknowledgmentAsSequence) {
  TcpHeader in;
  in.source_port = 5;
  in.destination_port = 6;
  in.sequence = SeqNumber(10);
  in.acknowledgment = SeqNumber(77);
  in.flags = flag::ack;
  const auto reset = reset_for({in, {}});
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->flags, flag::rst);
  EXPECT_EQ(reset->sequence, SeqNumber(77));
  EXPECT_EQ(reset->source_port, 6);
  EXPECT_EQ(reset->destination_port, 5);
}

TEST(ResetFor, AnswersASynWithAnAckOfIt) {
  TcpHeader in;
  in.sequence = SeqNumber(0xffffffff);
  in.flags = flag::syn | flag::fin;
  const std::array<std::uint8_t, 3> payload{1, 2, 3};
  const auto reset = reset_for({in, payload});
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->flags, flag::rst | flag::ack);
  EXPECT_EQ(reset->sequence, SeqNumber(0));
  EXPECT_EQ(reset->acknowledgment, SeqNumber(4));  // wraps: SEQ + 3 bytes + SYN + FIN
}

TEST(ResetFor, NeverAnswersAReset) {
  TcpHeader in;
  in.flags = flag::rst | flag::ack;
  EXPECT_FALSE(reset_for({in, {}}));
}

TEST(InitialSequenceNumber, DependsOnTheConnectionAndAdvancesEveryFourMicroseconds) {
  const Instant t = Instant{} + 10s;
  const std::array<std::uint8_t, 4> a{1, 2, 3, 4};
  const std::array<std::uint8_t, 4> b{1, 2, 3, 5};
  EXPECT_NE(initial_sequence_number(a, 42, t), initial_sequence_number(b, 42, t));
  EXPECT_NE(initial_sequence_number(a, 42, t), initial_sequence_number(a, 43, t));
  EXPECT_EQ(initial_sequence_number(a, 42, t), initial_sequence_number(a, 42, t));
  EXPECT_EQ(initial_sequence_number(a, 42, t + 400us) - initial_sequence_number(a, 42, t), 100);
}

}  // namespace
}  // namespace utcp::testing
