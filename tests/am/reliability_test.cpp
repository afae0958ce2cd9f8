// The reliability state machine and the wire format, packet by packet on
// virtual time: a tiny simulated link between a requester's SendWindow and a
// responder's ReceiveFilter that can lose, duplicate and reorder messages.
// Requests are answered by replies or by acknowledgements sent in batches.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <vector>

#include "reliability.hpp"
#include "wire.hpp"

namespace {

using am::Ack;
using am::Admission;
using am::Answer;
using am::ReceiveFilter;
using am::RetryPolicy;
using am::SendWindow;

constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kAckDelay = 5;  // ticks an owed acknowledgement waits at most (tests' unit: 1 ms)

RetryPolicy policy() {
  RetryPolicy p;
  p.min_rto_ns = 10 * kMs;
  p.max_rto_ns = 80 * kMs;
  p.timeout_ns = 1000 * kMs;
  p.time_every = 1;  // every request sent while none is timed
  return p;
}

TEST(SendWindow, CreditsBoundOutstandingRequests) {
  SendWindow w(2, policy());
  EXPECT_TRUE(w.has_credit());
  const auto a = w.open(), b = w.open();
  EXPECT_NE(a, b);
  EXPECT_FALSE(w.has_credit());
  EXPECT_EQ(w.outstanding(), 2u);
  EXPECT_TRUE(w.close(a, w.seq(a)));
  EXPECT_TRUE(w.has_credit());
  EXPECT_FALSE(w.close(a, w.seq(a)));  // a duplicate reply closes nothing
}

TEST(SendWindow, ReusedSlotGetsTheNextSequenceNumber) {
  SendWindow w(1, policy());
  const auto s = w.open();
  const auto first = w.seq(s);
  ASSERT_TRUE(w.close(s, first));
  w.open();
  EXPECT_EQ(w.seq(s), first + 1);
  EXPECT_FALSE(w.close(s, first));  // a late reply to the old use
  EXPECT_TRUE(w.close(s, first + 1));
}

// A silent peer on a clean path (no loss measured): given up after the timeout.
TEST(SendWindow, RetransmitsWithExponentialBackoffThenGivesUp) {
  SendWindow w(4, policy());
  const auto s = w.open();
  std::vector<std::uint64_t> resent;
  int expired = 0;
  for (std::uint64_t t = 0; t <= 2000 * kMs; t += kMs)
    w.advance(t, [&](std::uint16_t slot) { EXPECT_EQ(slot, s); resent.push_back(t / kMs); },
              [&] { w.close_all([&](std::uint16_t slot) { EXPECT_EQ(slot, s); ++expired; }); });
  // 10, 30 (+20), 70 (+40), then every 80 (the cap) until 1000 ms.
  ASSERT_GE(resent.size(), 5u);
  EXPECT_EQ(resent[0], 10u);
  EXPECT_EQ(resent[1], 30u);
  EXPECT_EQ(resent[2], 70u);
  EXPECT_EQ(resent[3], 150u);
  EXPECT_EQ(resent[4], 230u);
  EXPECT_LT(resent.back(), 1000u);
  EXPECT_EQ(expired, 1);
  EXPECT_EQ(w.outstanding(), 0u);
  EXPECT_EQ(w.next_deadline(), am::kNever);
}

TEST(SendWindow, NoRetransmissionOnReliableVisButStillATimeout) {
  RetryPolicy p = policy();
  p.retransmit = false;
  SendWindow w(4, p);
  w.open();
  int resent = 0, expired = 0;
  for (std::uint64_t t = 0; t <= 1000 * kMs; t += kMs)
    w.advance(t, [&](std::uint16_t) { ++resent; }, [&] { w.close_all([&](std::uint16_t) { ++expired; }); });
  EXPECT_EQ(resent, 0);
  EXPECT_EQ(expired, 1);
}

// Opening reads no clock: the first advance() after it stamps the send time,
// so a request opened long before the stamp is not retransmitted or expired early.
TEST(SendWindow, SendTimeIsStampedByTheNextAdvance) {
  SendWindow w(2, policy());
  const auto s = w.open();
  EXPECT_EQ(w.next_deadline(), 0u);  // a stamp is due
  int resent = 0, expired = 0;
  auto retransmit = [&](std::uint16_t) { ++resent; };
  auto expire = [&] { w.close_all([&](std::uint16_t) { ++expired; }); };
  w.advance(5000 * kMs, retransmit, expire);  // far past the timeout of a send at 0
  EXPECT_EQ(resent + expired, 0);
  EXPECT_EQ(w.next_deadline(), 5010 * kMs);
  w.advance(5009 * kMs, retransmit, expire);
  EXPECT_EQ(resent, 0);
  w.advance(5010 * kMs, retransmit, expire);
  EXPECT_EQ(resent, 1);
  // Closed and reopened before any advance: one stamp, at the next advance.
  ASSERT_TRUE(w.close(s, w.seq(s)));
  const auto t = w.open();
  ASSERT_TRUE(w.close(t, w.seq(t)));
  const auto u = w.open();
  w.advance(6000 * kMs, retransmit, expire);
  EXPECT_EQ(w.next_deadline(), 6020 * kMs);  // the RTO backed off: s went twice, so nothing was measured
  for (std::uint64_t now = 6001 * kMs; now < 30'000 * kMs && !expired; now += kMs) w.advance(now, retransmit, expire);
  EXPECT_EQ(expired, 1);
  EXPECT_FALSE(w.is_open(u));
  EXPECT_EQ(w.next_deadline(), am::kNever);
}

// A bundle's slot may be stamped while the bundle still fills: restamp()
// starts its timers again when it leaves, so it does not expire at once.
TEST(SendWindow, RestampStartsTheTimersAgain) {
  SendWindow w(2, policy());
  const auto s = w.open();
  int resent = 0, expired = 0;
  auto retransmit = [&](std::uint16_t) { ++resent; };
  auto expire = [&] { w.close_all([&](std::uint16_t) { ++expired; }); };
  w.advance(0, retransmit, expire);  // stamped at 0
  w.restamp(s);
  w.restamp(s);  // twice: still one stamp
  w.advance(5000 * kMs, retransmit, expire);  // far past the timeout of the first stamp
  EXPECT_EQ(resent + expired, 0);
  EXPECT_EQ(w.next_deadline(), 5010 * kMs);
  w.advance(5999 * kMs, retransmit, expire);
  EXPECT_EQ(expired, 0);
  w.advance(6000 * kMs, retransmit, expire);
  EXPECT_EQ(expired, 1);
  EXPECT_FALSE(w.is_open(s));
}

TEST(SendWindow, CloseAllReturnsEveryOpenRequest) {
  SendWindow w(3, policy());
  w.open();
  w.open();
  int closed = 0;
  w.close_all([&](std::uint16_t) { ++closed; });
  EXPECT_EQ(closed, 2);
  EXPECT_EQ(w.outstanding(), 0u);
}

// ---- the retransmission timeout and giving up (RFC 6298, silence) ----

// Opens a request at `sent`, answers it `rtt` later: one round trip measured.
void measure(SendWindow& w, std::uint64_t sent, std::uint64_t rtt) {
  const auto s = w.open();
  w.advance(sent, [](std::uint16_t) { FAIL() << "retransmitted"; }, [] { FAIL() << "given up"; });
  ASSERT_TRUE(w.close(s, w.seq(s)));
  w.advance(sent + rtt, [](std::uint16_t) { FAIL() << "retransmitted"; }, [] { FAIL() << "given up"; });
}

RetryPolicy slow_path_policy() {
  RetryPolicy p = policy();
  p.max_rto_ns = 1000 * kMs;
  p.timeout_ns = 10'000 * kMs;
  return p;
}

TEST(SendWindow, MeasuredRoundTripsSetTheTimeout) {
  SendWindow w(4, slow_path_policy());
  EXPECT_EQ(w.rto_ns(), 10 * kMs);  // min_rto until something is measured
  measure(w, 0, 30 * kMs);
  EXPECT_EQ(w.smoothed_rtt_ns(), 30 * kMs);
  EXPECT_EQ(w.rto_ns(), 90 * kMs);  // SRTT + 4 * RTTVAR, RTTVAR = R/2 at first
  for (std::uint64_t t = 100 * kMs; t < 3000 * kMs; t += 100 * kMs) measure(w, t, 30 * kMs);
  EXPECT_EQ(w.smoothed_rtt_ns(), 30 * kMs);
  EXPECT_LT(w.rto_ns(), 32 * kMs);  // the variation decays
  EXPECT_GT(w.rto_ns(), 30 * kMs);
  // A request now goes again after the measured RTO, not min_rto.
  const std::uint64_t rto = w.rto_ns();
  const auto s = w.open();
  std::uint64_t resent_at = 0;
  for (std::uint64_t t = 5000 * kMs; t < 5100 * kMs && !resent_at; t += kMs / 10)
    w.advance(t, [&](std::uint16_t) { resent_at = t; }, [] { FAIL() << "given up"; });
  const std::uint64_t step = kMs / 10;
  EXPECT_EQ(resent_at, 5000 * kMs + (rto + step - 1) / step * step);
  // Short round trips never take it below min_rto.
  ASSERT_TRUE(w.close(s, w.seq(s)));
  for (std::uint64_t t = 6000 * kMs; t < 9000 * kMs; t += 10 * kMs) measure(w, t, kMs / 100);
  EXPECT_EQ(w.rto_ns(), 10 * kMs);
}

// The clock is read for one request in time_every (sent and answered), and
// for every request while the RTO is backed off, until one is measured.
TEST(SendWindow, TimesOneRequestInTimeEveryAndEachUnderBackoff) {
  RetryPolicy p = slow_path_policy();
  p.time_every = 4;
  SendWindow w(4, p);
  int timed = 0;
  for (std::uint64_t i = 0; i < 11; ++i) {
    const auto s = w.open();
    if (w.wants_send_time()) {
      ++timed;
      w.sent_at(i * kMs);
    }
    ASSERT_TRUE(w.close(s, w.seq(s)));
    if (w.measuring()) w.answered_at(i * kMs + kMs / 2);
  }
  EXPECT_EQ(timed, 3);  // the first, the fifth, the ninth
  EXPECT_EQ(w.smoothed_rtt_ns(), kMs / 2);
  // Backed off: a lost request (the twelfth, not timed), retransmitted.
  const auto lost = w.open();
  EXPECT_FALSE(w.wants_send_time());
  w.advance(100 * kMs, [](std::uint16_t) {}, [] { FAIL(); });
  w.advance(100 * kMs + w.rto_ns(), [](std::uint16_t) {}, [] { FAIL(); });
  ASSERT_GT(w.rto_ns(), 10 * kMs);
  const auto s = w.open();
  ASSERT_TRUE(w.wants_send_time());
  w.sent_at(200 * kMs);
  ASSERT_TRUE(w.close(s, w.seq(s)));
  ASSERT_TRUE(w.measuring());
  w.answered_at(200 * kMs + kMs / 2);
  EXPECT_EQ(w.rto_ns(), 10 * kMs);  // measured: the backoff ended
  EXPECT_TRUE(w.is_open(lost));
}

TEST(SendWindow, KarnsRuleARetransmittedRequestIsNotMeasured) {
  SendWindow w(4, slow_path_policy());
  measure(w, 0, 30 * kMs);
  const std::uint64_t rto = w.rto_ns();
  const auto s = w.open();
  int resent = 0;
  auto retransmit = [&](std::uint16_t) { ++resent; };
  w.advance(1000 * kMs, retransmit, [] { FAIL(); });
  w.advance(1000 * kMs + rto, retransmit, [] { FAIL(); });
  ASSERT_EQ(resent, 1);
  EXPECT_EQ(w.rto_ns(), 2 * rto);  // backed off
  // The answer comes 500 ms after the first copy: not a measurement of the
  // round trip (it may answer the second), so SRTT stays, and the backoff
  // stays until a request sent once is answered.
  ASSERT_TRUE(w.close(s, w.seq(s)));
  w.advance(1500 * kMs, retransmit, [] { FAIL(); });
  EXPECT_EQ(w.smoothed_rtt_ns(), 30 * kMs);
  EXPECT_EQ(w.rto_ns(), 2 * rto);
  measure(w, 2000 * kMs, 30 * kMs);
  EXPECT_LE(w.rto_ns(), rto);  // a valid measurement ends the backoff (RFC 6298 §5.7)
}

// One timer per peer, as TCP has one per connection: requests that time out
// together double the RTO once, not once each.
TEST(SendWindow, TheRtoDoublesOncePerTimeoutNotOncePerRequest) {
  SendWindow w(8, policy());
  std::vector<std::uint16_t> slots;
  for (std::uint64_t t = 0; t < 4; ++t) {  // sent 1 ms apart
    slots.push_back(w.open());
    w.advance(t * kMs, [](std::uint16_t) { FAIL(); }, [] { FAIL(); });
  }
  // The first times out at 10 ms; the others then wait for the doubled RTO
  // (21, 22, 23 ms), as behind TCP's one timer, and double it no further.
  std::vector<std::uint64_t> resent;
  for (std::uint64_t t = 4 * kMs; t <= 29 * kMs; t += kMs)
    w.advance(t, [&](std::uint16_t) { resent.push_back(t / kMs); }, [] { FAIL(); });
  EXPECT_EQ(resent, (std::vector<std::uint64_t>{10, 21, 22, 23}));
  EXPECT_EQ(w.rto_ns(), 20 * kMs);
  EXPECT_EQ(w.unanswered_rounds(), 4u);
}

// The backoff is the peer's: while the peer answers requests sent once at
// the measured pace, a request that was lost several times goes again after
// one RTO, not after 2^n of them.
TEST(SendWindow, AnswersToOtherRequestsEndTheBackoffOfOneLostAgain) {
  SendWindow w(8, policy());
  const auto lost = w.open();
  std::vector<std::uint64_t> resent;
  for (std::uint64_t t = 0; t <= 400 * kMs; t += kMs) {
    if (t % (5 * kMs) == 0 && t > 0) {  // another request, answered in 1 ms, every 5 ms
      const auto s = w.open();
      w.advance(t, [&](std::uint16_t slot) { resent.push_back(t); EXPECT_EQ(slot, lost); }, [] { FAIL(); });
      ASSERT_TRUE(w.close(s, w.seq(s)));
      w.heard();
      continue;
    }
    w.advance(t, [&](std::uint16_t slot) { resent.push_back(t); EXPECT_EQ(slot, lost); }, [] { FAIL(); });
  }
  // min_rto 10 ms: about 40 retransmissions in 400 ms (a backed-off
  // schedule would have sent 7: 10, 30, 70, 150, 230, 310, 390).
  EXPECT_GE(resent.size(), 30u);
  for (std::size_t i = 1; i < resent.size(); ++i) EXPECT_LE(resent[i] - resent[i - 1], 20 * kMs);
  EXPECT_TRUE(w.is_open(lost));
}

// A request unanswered while the peer's other frames keep arriving is
// retransmitted for as long as that lasts; silence for the timeout ends it.
TEST(SendWindow, GivesUpOnSilenceNotOnUnansweredRetransmissions) {
  SendWindow w(4, policy());  // timeout 1000 ms, no loss measured
  w.open();
  int resent = 0;
  std::uint64_t given_up_at = 0;
  auto give_up = [&](std::uint64_t t) {
    given_up_at = t;
    w.close_all([](std::uint16_t) {});
  };
  for (std::uint64_t t = 0; t <= 8000 * kMs && !given_up_at; t += kMs) {
    if (t <= 5000 * kMs && t % (50 * kMs) == 0) w.heard();  // the peer's requests, say
    w.advance(t, [&](std::uint16_t) { ++resent; }, [&] { give_up(t); });
  }
  EXPECT_GE(resent, 5000 / 80);  // every max_rto at least
  EXPECT_GE(given_up_at, 6000 * kMs);
  EXPECT_LE(given_up_at, 6001 * kMs);  // last heard at 5000, stamped at that advance
}

TEST(SendWindow, RoundsToGiveUpGrowWithTheLossMeasured) {
  EXPECT_EQ(am::rounds_to_give_up(0), 0u);
  EXPECT_EQ(am::rounds_to_give_up(0.01), 3u);
  EXPECT_EQ(am::rounds_to_give_up(0.51), 21u);  // 30 % loss each way: 1 - 0.7 * 0.7
  EXPECT_EQ(am::rounds_to_give_up(0.99), am::kMaxGiveUpRounds);
  EXPECT_EQ(am::rounds_to_give_up(1), am::kMaxGiveUpRounds);
}

// After a third of the transmissions needed a retransmission, a silent peer
// is given up only after enough unanswered rounds (13), past the timeout.
TEST(SendWindow, MeasuredLossAsksForMoreUnansweredRoundsBeforeGivingUp) {
  RetryPolicy p = policy();
  p.max_rto_ns = 200 * kMs;
  auto silent_peer_given_up_at = [&](bool lossy) {
    SendWindow w(4, p);
    std::uint64_t t = 0;
    // One request at a time, answered at once; every other one, when lossy,
    // after one retransmission. The last is answered at once (no backoff left).
    for (int i = 0; i <= 200; ++i, t += 100 * kMs) {
      const auto s = w.open();
      w.advance(t, [](std::uint16_t) {}, [] { FAIL(); });
      const std::uint64_t resent_at = lossy && i % 2 ? t + 10 * kMs : t;
      w.advance(resent_at, [](std::uint16_t) {}, [] { FAIL(); });
      w.heard();
      EXPECT_TRUE(w.close(s, w.seq(s)));
      w.advance(resent_at + kMs / 10, [](std::uint16_t) {}, [] { FAIL(); });
    }
    EXPECT_NEAR(w.loss(), lossy ? 1.0 / 3 : 0, 0.01);
    const std::uint64_t start = t;
    w.open();
    std::uint64_t given_up_at = 0;
    for (; t <= start + 10'000 * kMs && !given_up_at; t += kMs)
      w.advance(t, [](std::uint16_t) {}, [&] {
        given_up_at = t - start;
        EXPECT_GE(w.unanswered_rounds(), am::rounds_to_give_up(w.loss()));
        w.close_all([](std::uint16_t) {});
      });
    return given_up_at;
  };
  EXPECT_EQ(silent_peer_given_up_at(false), 1000 * kMs);  // the timeout: no loss seen
  EXPECT_EQ(am::rounds_to_give_up(1.0 / 3), 13u);
  // 13 rounds: 10, 30, 70, 150, 310, then every 200 ms.
  EXPECT_EQ(silent_peer_given_up_at(true), 1910 * kMs);
}

TEST(ReceiveFilter, FreshDuplicateStaleAndBadSlot) {
  ReceiveFilter f(2, kAckDelay);
  EXPECT_EQ(f.admit(0, 1), Admission::fresh);
  EXPECT_EQ(f.admit(0, 1), Admission::duplicate);
  EXPECT_EQ(f.admit(0, 2), Admission::fresh);
  EXPECT_EQ(f.admit(0, 1), Admission::stale);
  EXPECT_EQ(f.admit(1, 1), Admission::fresh);
  EXPECT_EQ(f.admit(2, 1), Admission::bad_slot);
  // Wrap-around of the 32-bit sequence number.
  ReceiveFilter g(1, kAckDelay);
  EXPECT_EQ(g.admit(0, 0x7FFFFFFFu), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0xFFFFFFFEu), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0xFFFFFFFFu), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0xFFFFFFFFu), Admission::stale);
}

// ---- acknowledgements of requests whose handlers do not reply ----

// Takes everything the responder owes, as one message would carry it.
std::vector<Ack> take_all(ReceiveFilter& f) {
  std::vector<Ack> acks(64);
  acks.resize(f.take_acks(acks.data(), unsigned(acks.size())));
  return acks;
}

TEST(Acks, OneAcknowledgementMessageAnswersSeveralRequests) {
  SendWindow w(8, policy());
  ReceiveFilter f(8, kAckDelay);
  std::vector<std::uint16_t> slots;
  for (int i = 0; i < 5; ++i) slots.push_back(w.open());
  for (auto s : slots) {
    ASSERT_EQ(f.admit(s, w.seq(s)), Admission::fresh);
    f.acknowledge(s, 0);  // handled without a reply
  }
  EXPECT_EQ(w.outstanding(), 5u);
  const auto acks = take_all(f);
  ASSERT_EQ(acks.size(), 5u);
  EXPECT_FALSE(f.owes_acks());
  for (const Ack& a : acks) EXPECT_TRUE(w.close(a.slot, a.seq));
  EXPECT_EQ(w.outstanding(), 0u);
  for (const Ack& a : acks) EXPECT_FALSE(w.close(a.slot, a.seq));  // the same message again closes nothing
}

TEST(Acks, DueAtHalfTheWindowAfterADelayOrAtOnceForARetransmission) {
  ReceiveFilter f(8, kAckDelay);
  EXPECT_FALSE(f.ack_due(100));  // nothing owed
  for (std::uint16_t s = 0; s < 3; ++s) {
    ASSERT_EQ(f.admit(s, 1), Admission::fresh);
    f.acknowledge(s, 10);
  }
  EXPECT_TRUE(f.owes_acks());
  EXPECT_FALSE(f.ack_due(10));               // 3 of 8: may wait for a message to ride on
  EXPECT_FALSE(f.ack_due(10 + kAckDelay - 1));
  EXPECT_TRUE(f.ack_due(10 + kAckDelay));    // waited long enough
  ASSERT_EQ(f.admit(3, 1), Admission::fresh);
  f.acknowledge(3, 11);
  EXPECT_TRUE(f.ack_due(11));                // 4 of 8: half the window
  EXPECT_EQ(take_all(f).size(), 4u);
  EXPECT_FALSE(f.ack_due(1000));
  // A retransmitted copy of an acknowledged request: due at once.
  ASSERT_EQ(f.admit(0, 1), Admission::duplicate);
  ASSERT_EQ(f.answer(0), Answer::acknowledged);
  f.acknowledge_again(0, 12);
  EXPECT_TRUE(f.ack_due(12));
  const auto again = take_all(f);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].slot, 0);
  EXPECT_EQ(again[0].seq, 1u);
  EXPECT_FALSE(f.ack_due(1000));
}

TEST(Acks, LostAcknowledgementRetransmissionIsNotHandledTwice) {
  SendWindow w(4, policy());
  ReceiveFilter f(4, kAckDelay);
  int handled = 0, resent = 0;
  const auto s = w.open();
  w.advance(0, [](std::uint16_t) {}, [] {});  // sent at 0
  if (f.admit(s, w.seq(s)) == Admission::fresh) ++handled;
  f.acknowledge(s, 0);
  take_all(f);  // the acknowledgement is lost
  w.advance(10 * kMs, [&](std::uint16_t slot) {
    ++resent;
    // The copy is a duplicate: not handled again, acknowledged again.
    ASSERT_EQ(f.admit(slot, w.seq(slot)), Admission::duplicate);
    ASSERT_EQ(f.answer(slot), Answer::acknowledged);
    f.acknowledge_again(slot, 10);
  }, [] { FAIL() << "given up"; });
  EXPECT_EQ(resent, 1);
  EXPECT_EQ(handled, 1);
  EXPECT_TRUE(f.ack_due(10));
  const auto acks = take_all(f);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_TRUE(w.close(acks[0].slot, acks[0].seq));
  w.advance(1000 * kMs, [&](std::uint16_t) { ++resent; }, [] { FAIL() << "given up"; });
  EXPECT_EQ(resent, 1);  // closed: no more retransmissions
  EXPECT_EQ(w.next_deadline(), am::kNever);
}

TEST(Acks, DuplicateAfterTheAcknowledgementArrivedClosesNothing) {
  SendWindow w(2, policy());
  ReceiveFilter f(2, kAckDelay);
  const auto s = w.open();
  const auto first = w.seq(s);
  ASSERT_EQ(f.admit(s, first), Admission::fresh);
  f.acknowledge(s, 0);
  for (const Ack& a : take_all(f)) ASSERT_TRUE(w.close(a.slot, a.seq));
  // A copy of the request (duplicated by the link) arrives late: answered
  // again, and the answer finds the request closed.
  ASSERT_EQ(f.admit(s, first), Admission::duplicate);
  f.acknowledge_again(s, 1);
  for (const Ack& a : take_all(f)) EXPECT_FALSE(w.close(a.slot, a.seq));
  // The slot's next use: the old copy is stale now, and an old
  // acknowledgement does not close the new request.
  ASSERT_EQ(w.open(), s);
  ASSERT_EQ(f.admit(s, w.seq(s)), Admission::fresh);
  EXPECT_EQ(f.admit(s, first), Admission::stale);
  EXPECT_FALSE(w.close(s, first));
  EXPECT_TRUE(w.is_open(s));
}

TEST(Acks, FullWindowWaitsForTheAcknowledgement) {
  SendWindow w(4, policy());
  ReceiveFilter f(4, kAckDelay);
  for (int i = 0; i < 4; ++i) {
    const auto s = w.open();
    ASSERT_EQ(f.admit(s, w.seq(s)), Admission::fresh);
    f.acknowledge(s, 0);
  }
  EXPECT_FALSE(w.has_credit());  // the requester waits ...
  EXPECT_TRUE(f.ack_due(0));     // ... and the responder owes half the window or more: it sends
  Ack two[2];
  ASSERT_EQ(f.take_acks(two, 2), 2u);  // a message with room for two
  for (const Ack& a : two) ASSERT_TRUE(w.close(a.slot, a.seq));
  EXPECT_TRUE(w.has_credit());
  EXPECT_EQ(w.outstanding(), 2u);
  EXPECT_TRUE(f.owes_acks());  // the rest go in the next message
  EXPECT_EQ(take_all(f).size(), 2u);
}

TEST(Acks, ARunningHandlerOrAReplyIsNotAcknowledged) {
  ReceiveFilter f(2, kAckDelay);
  ASSERT_EQ(f.admit(0, 1), Admission::fresh);
  // A copy arrives while the handler still runs (it polls): nothing to send yet.
  ASSERT_EQ(f.admit(0, 1), Admission::duplicate);
  EXPECT_EQ(f.answer(0), Answer::running);
  f.replied(0);
  EXPECT_EQ(f.answer(0), Answer::replied);  // a copy now gets the cached reply
  EXPECT_FALSE(f.owes_acks());
  EXPECT_EQ(f.answer(1), Answer::running);   // never used: nothing to send
}

TEST(Acks, AtMostOneOwedPerSlotWhateverThePeerSends) {
  ReceiveFilter f(2, kAckDelay);
  // A misbehaving requester reuses slot 0 before it was answered.
  ASSERT_EQ(f.admit(0, 1), Admission::fresh);
  f.acknowledge(0, 0);
  ASSERT_EQ(f.admit(0, 2), Admission::fresh);
  f.acknowledge(0, 0);
  f.acknowledge_again(0, 0);
  const auto acks = take_all(f);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].seq, 2u);
}

// A requester and a responder over a lossy, duplicating, reordering link, on
// virtual time: every request must be handled exactly once and answered
// exactly once, whatever the link does. Every third request's handler
// replies; the others are acknowledged, on replies going back or in
// acknowledgement messages of their own (when due, or when the responder has
// nothing else to do).
enum class Type { request, reply, ack };

struct Packet {
  Type type;
  std::uint16_t slot;
  std::uint32_t seq;
  int id;  // which logical request (requests and replies)
  std::uint64_t due;
  std::vector<Ack> acks;  // carried by replies and acknowledgement messages
};

bool replies(int id) { return id % 3 == 0; }

struct Simulation {
  Simulation(double drop, double dup, double reorder, std::uint64_t seed, const RetryPolicy& retry = policy())
      : drop_(drop), dup_(dup), reorder_(reorder), rng_(seed), window_(8, retry), filter_(8, kAckDelay) {}

  void send(Packet p, std::uint64_t now) {
    if (chance(drop_)) return;
    const int copies = chance(dup_) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      p.due = now + 1 + (chance(reorder_) ? 5 : 0);  // held back: overtaken by later packets
      link_.push_back(p);
    }
  }

  // The responder's answers carry up to 3 owed acknowledgements (a small
  // message, so that some are left for acknowledgement messages).
  std::vector<Ack> owed(unsigned max) {
    std::vector<Ack> acks(max);
    acks.resize(filter_.take_acks(acks.data(), max));
    return acks;
  }

  void at_requester(const Packet& p) {
    window_.heard();
    for (const Ack& a : p.acks)
      if (window_.close(a.slot, a.seq)) {
        ++acknowledged[slot_request_[a.slot]];
        if (p.type == Type::reply) ++acks_on_replies;
      }
    if (p.type == Type::reply && window_.close(p.slot, p.seq)) ++replied[p.id];
  }

  void at_responder(const Packet& p, std::uint64_t tick) {
    switch (filter_.admit(p.slot, p.seq)) {
      case Admission::fresh:
        ++handled[p.id];
        if (replies(p.id)) {
          filter_.replied(p.slot);
          send(Packet{Type::reply, p.slot, p.seq, p.id, 0, owed(3)}, now_);
        } else {
          filter_.acknowledge(p.slot, tick);
        }
        break;
      case Admission::duplicate:
        if (filter_.answer(p.slot) == Answer::replied)  // the cached reply (its acks as first sent: none here)
          send(Packet{Type::reply, p.slot, p.seq, p.id, 0, {}}, now_);
        else if (filter_.answer(p.slot) == Answer::acknowledged)
          filter_.acknowledge_again(p.slot, tick);
        break;
      default:
        break;
    }
  }

  // Runs until all `requests` completed; false if time ran out.
  bool run(int requests, std::uint64_t limit_ms) {
    int next = 0;
    std::uint64_t tick = 0;
    for (now_ = 0; now_ < limit_ms * kMs; now_ += kMs / 10, ++tick) {
      while (next < requests && window_.has_credit()) {
        const auto slot = window_.open();
        slot_request_[slot] = next;
        send(Packet{Type::request, slot, window_.seq(slot), next, 0, {}}, now_);
        ++next;
      }
      window_.advance(now_, [&](std::uint16_t slot) {
        ++retransmitted;
        send(Packet{Type::request, slot, window_.seq(slot), slot_request_[slot], 0, {}}, now_);
      }, [&] { window_.close_all([&](std::uint16_t) { ++expired; }); });
      std::vector<Packet> due;
      for (auto it = link_.begin(); it != link_.end();)
        if (it->due <= now_) {
          due.push_back(std::move(*it));
          it = link_.erase(it);
        } else {
          ++it;
        }
      bool responder_busy = false;
      for (const Packet& p : due) {
        if (p.type == Type::request) {
          at_responder(p, tick);
          responder_busy = true;
        } else {
          at_requester(p);
        }
      }
      // Acknowledgement messages: when due, or when the responder is idle.
      while (filter_.owes_acks() && (filter_.ack_due(tick) || !responder_busy)) {
        send(Packet{Type::ack, 0, 0, -1, 0, owed(4)}, now_);
        ++ack_messages;
      }
      if (next == requests && window_.outstanding() == 0) return true;
    }
    return false;
  }

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  double drop_, dup_, reorder_;
  std::mt19937_64 rng_;
  SendWindow window_;
  ReceiveFilter filter_;
  std::uint64_t now_ = 0;
  std::vector<Packet> link_;
  std::map<std::uint16_t, int> slot_request_;  // at the requester
  std::map<int, int> handled, replied, acknowledged;
  int retransmitted = 0, expired = 0, ack_messages = 0, acks_on_replies = 0;
};

void expect_exactly_once(Simulation& sim, int requests, const std::string& what) {
  for (int id = 0; id < requests; ++id) {
    ASSERT_EQ(sim.handled[id], 1) << "request " << id << " " << what;
    // A request whose handler replies is closed by its reply and by nothing
    // else: an acknowledgement never takes the place of a reply.
    ASSERT_EQ(sim.replied[id], replies(id) ? 1 : 0) << "request " << id << " " << what;
    ASSERT_EQ(sim.acknowledged[id], replies(id) ? 0 : 1) << "request " << id << " " << what;
  }
}

TEST(Protocol, ExactlyOnceOverLossDuplicationAndReordering) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Simulation sim(0.2, 0.1, 0.2, seed);
    ASSERT_TRUE(sim.run(500, 100000)) << "seed " << seed;
    EXPECT_EQ(sim.expired, 0);
    EXPECT_GT(sim.retransmitted, 0);
    expect_exactly_once(sim, 500, "seed " + std::to_string(seed));
  }
}

// On a perfect link, acknowledgements ride on replies or go several to a
// message: far fewer messages back than requests, and no retransmission.
TEST(Protocol, AcknowledgementsAreBatchedAndPiggybacked) {
  Simulation sim(0, 0, 0, 1);
  ASSERT_TRUE(sim.run(600, 100000));
  EXPECT_EQ(sim.retransmitted, 0);
  expect_exactly_once(sim, 600, "perfect link");
  // 400 requests without a reply, acknowledged in far fewer messages, some
  // of them on the 200 replies.
  EXPECT_GT(sim.acks_on_replies, 0);
  EXPECT_LT(sim.ack_messages, 200);
}

// Issue 21, defect 8: at 30 % loss each way, with a peer timeout of only
// five times the longest RTO, a live responder is never given up: its
// frames keep arriving, and the timeout counts silence, not requests that go
// unanswered (with a timeout per request, as before, a request went
// unanswered for 400 ms — 7 tries — about once in 100).
TEST(Protocol, ThirtyPercentLossEachWayNeverGivesUpOnALivePeer) {
  RetryPolicy retry = policy();
  retry.timeout_ns = 400 * kMs;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Simulation sim(0.3, 0, 0, seed, retry);
    ASSERT_TRUE(sim.run(2000, 100000)) << "seed " << seed;
    EXPECT_EQ(sim.expired, 0) << "seed " << seed;
    expect_exactly_once(sim, 2000, "seed " + std::to_string(seed));
  }
}

TEST(Protocol, DeadResponderExpiresEveryRequest) {
  Simulation sim(1.0, 0, 0, 7);  // nothing gets through
  EXPECT_TRUE(sim.run(8, 5000));  // all 8 expire, freeing the window
  EXPECT_EQ(sim.expired, 8);
  EXPECT_TRUE(sim.handled.empty());
}

// ---- wire format ----

TEST(Wire, RoundTripAndRejections) {
  using namespace am::wire;
  std::byte buf[kMaxMessage];
  const std::uint64_t args[4] = {1, 2, 3, 4};
  const char payload[] = "hello";
  const Header h{Kind::request, 3, 0, 0, 7, 2, 99, 5};
  const std::size_t len = encode(buf, h, args, nullptr, payload);
  EXPECT_EQ(len, kHeaderBytes + 3 * 8 + 5);
  Message m;
  ASSERT_EQ(parse(buf, len, m), ParseError::none);
  EXPECT_EQ(m.header.handler, 7);
  EXPECT_EQ(m.header.seq, 99u);
  EXPECT_EQ(m.args[2], 3u);
  EXPECT_EQ(m.args[3], 0u);  // beyond nargs: zero
  EXPECT_EQ(std::memcmp(m.payload, "hello", 5), 0);

  EXPECT_EQ(parse(buf, kHeaderBytes - 1, m), ParseError::too_short);
  EXPECT_EQ(parse(buf, len - 1, m), ParseError::bad_length);
  buf[0] = std::byte{0};
  EXPECT_EQ(parse(buf, len, m), ParseError::bad_kind);
  buf[0] = std::byte(Kind::request);
  buf[1] = std::byte{5};
  EXPECT_EQ(parse(buf, len, m), ParseError::too_many_args);
  buf[1] = std::byte{3};
  const std::uint32_t huge = kMaxPayload + 1;
  std::memcpy(buf + 12, &huge, 4);
  EXPECT_EQ(parse(buf, len, m), ParseError::payload_too_large);
}

// A whole store: one store_done without acknowledgements may carry up to
// kMaxWholeStore bytes; any other message at most kMaxPayload.
TEST(Wire, WholeStoresAloneCarryMoreThanAmMaxSize) {
  using namespace am::wire;
  std::vector<std::byte> buf(kHeaderBytes + 3 * 8 + kAckBytes + kMaxWholeStore + 1);
  const std::uint64_t args[4] = {4096, kMaxWholeStore, 0, 0};
  const Ack ack{3, 9};
  std::vector<std::byte> payload(kMaxWholeStore + 1, std::byte{7});
  Message m;
  Header h{Kind::store_done, 3, 0, 0, kNoHandler, 1, 2, std::uint32_t(kMaxWholeStore)};
  std::size_t len = encode(buf.data(), h, args, nullptr, payload.data());
  ASSERT_EQ(parse(buf.data(), len, m), ParseError::none);
  EXPECT_EQ(m.header.payload_bytes, kMaxWholeStore);
  EXPECT_EQ(m.payload, buf.data() + kHeaderBytes + 3 * 8);
  h.payload_bytes = std::uint32_t(kMaxWholeStore + 1);  // longer than a whole store
  len = encode(buf.data(), h, args, nullptr, payload.data());
  EXPECT_EQ(parse(buf.data(), len, m), ParseError::payload_too_large);
  h.payload_bytes = std::uint32_t(kMaxPayload + 1);
  h.acks = 1;  // with acknowledgements: not whole
  len = encode(buf.data(), h, args, &ack, payload.data());
  EXPECT_EQ(parse(buf.data(), len, m), ParseError::payload_too_large);
  h.acks = 0;
  for (Kind kind : {Kind::request, Kind::reply, Kind::store_data}) {
    h.kind = kind;
    len = encode(buf.data(), h, args, nullptr, payload.data());
    EXPECT_EQ(parse(buf.data(), len, m), ParseError::payload_too_large);
  }
}

// Acknowledgements ride on any message, between the arguments and the
// payload (which stays 8-byte aligned); a standalone one carries nothing else.
TEST(Wire, AcknowledgementsOnAMessage) {
  using namespace am::wire;
  alignas(8) std::byte buf[kMaxMessage];
  // Room for the most arguments a message holds, as callers give it: only the
  // header's count (2) is read.
  const std::uint64_t args[kMaxArgs] = {7, 8};
  const Ack acks[3] = {{0, 1}, {5, 0xFFFFFFFFu}, {31, 42}};
  const char payload[] = "abc";
  Header h{Kind::reply, 2, 0, 3, 9, 4, 77, 3};
  const std::size_t len = encode(buf, h, args, acks, payload);
  EXPECT_EQ(len, kHeaderBytes + 2 * 8 + 3 * kAckBytes + 3);
  Message m;
  ASSERT_EQ(parse(buf, len, m), ParseError::none);
  ASSERT_EQ(m.header.acks, 3);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(m.ack(i).slot, acks[i].slot);
    EXPECT_EQ(m.ack(i).seq, acks[i].seq);
    // On the wire: slot (2 bytes), two zero bytes, seq (4).
    const std::byte* at = buf + kHeaderBytes + 2 * 8 + i * kAckBytes;
    std::uint16_t slot, zero;
    std::uint32_t seq;
    std::memcpy(&slot, at, 2);
    std::memcpy(&zero, at + 2, 2);
    std::memcpy(&seq, at + 4, 4);
    EXPECT_EQ(slot, acks[i].slot);
    EXPECT_EQ(zero, 0);
    EXPECT_EQ(seq, acks[i].seq);
  }
  EXPECT_EQ(m.args[1], 8u);
  EXPECT_EQ(std::memcmp(m.payload, "abc", 3), 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.payload) % 8, 0u);
  EXPECT_EQ(parse(buf, len - 1, m), ParseError::bad_length);
  EXPECT_EQ(parse(buf, len + 8, m), ParseError::bad_length);
  buf[3] = std::byte(kMaxAcks + 1);  // more acknowledgements than a message may carry
  EXPECT_EQ(parse(buf, len, m), ParseError::too_many_acks);

  // A standalone acknowledgement message.
  const Header only{Kind::ack, 0, 0, 1, kNoHandler, 0, 0, 0};
  const std::size_t n = encode(buf, only, args, acks + 2, payload);  // 0 words, 0 bytes of them
  ASSERT_EQ(parse(buf, n, m), ParseError::none);
  EXPECT_EQ(m.header.kind, Kind::ack);
  EXPECT_EQ(m.ack(0).slot, 31);
  EXPECT_EQ(m.ack(0).seq, 42u);
  buf[0] = std::byte(std::uint8_t(kLastKind) + 1);
  EXPECT_EQ(parse(buf, n, m), ParseError::bad_kind);
}

// Reads the first `len` bytes of `items` to the end or the first error:
// how many items were read, and the error.
am::wire::ParseError read_items(const std::byte* items, std::size_t len, am::wire::Items kind, unsigned& count) {
  am::wire::ItemReader r(items, len, kind);
  count = 0;
  for (am::wire::Item x; r.next(x);) ++count;
  return r.error();
}

// A bundle's reply: one message whose payload holds items back to back,
// each padded to 8 bytes; read one at a time, every payload 8-byte aligned.
TEST(Wire, BundleItems) {
  using namespace am::wire;
  alignas(8) std::byte frame[kMaxMessage];
  const std::uint64_t args[kMaxArgs] = {11, 12, 13, 14};
  std::byte* items = frame + kHeaderBytes;
  std::size_t used = 0;
  // 8 + 8 + 3 (padded to 8) = 24 bytes, 8 + 32 = 40, 8 = 8.
  used += encode_item(items + used, ItemHeader{5, 1, 0, 0, 3}, args, "abc");
  used += encode_item(items + used, ItemHeader{6, 4, 0, 1, 0}, args, nullptr);
  used += encode_item(items + used, ItemHeader{kNoHandler, 0, 2, 7, 0}, args, nullptr);
  ASSERT_EQ(used, 24u + 40u + 8u);
  EXPECT_EQ(item_bytes(1, 3), 24u);
  for (std::size_t i = 19; i < 24; ++i) EXPECT_EQ(items[i], std::byte{0}) << "padding byte " << i;
  const Header h{Kind::bundle, 0, 0, 0, kNoHandler, 3, 9, std::uint32_t(used)};
  std::memcpy(frame, &h, kHeaderBytes);

  Message m;
  ASSERT_EQ(parse(frame, kHeaderBytes + used, m), ParseError::none);
  EXPECT_EQ(m.header.kind, Kind::bundle);
  ItemReader reader(m.payload, m.header.payload_bytes, Items::replies);
  Item it;
  std::uint64_t got[kMaxArgs];
  ASSERT_TRUE(reader.next(it));
  EXPECT_EQ(it.header.handler, 5);
  read_args(got, it.args, it.header.nargs);
  EXPECT_EQ(got[0], 11u);
  EXPECT_EQ(got[1], 0u);
  EXPECT_EQ(std::memcmp(it.payload, "abc", 3), 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(it.payload) % 8, 0u);
  ASSERT_TRUE(reader.next(it));
  EXPECT_EQ(it.header.handler, 6);
  EXPECT_EQ(it.header.index, 1);
  read_args(got, it.args, it.header.nargs);
  EXPECT_EQ(got[3], 14u);
  ASSERT_TRUE(reader.next(it));
  EXPECT_EQ(it.header.status, 2);
  EXPECT_EQ(it.header.index, 7);
  EXPECT_FALSE(reader.next(it));
  EXPECT_EQ(reader.error(), ParseError::none);

  auto read_all = [&](std::size_t len, unsigned& count) { return read_items(items, len, Items::replies, count); };
  unsigned count = 0;
  // Cut inside the last item: the first two are read, then the error.
  EXPECT_EQ(read_all(used - 1, count), ParseError::too_short);
  EXPECT_EQ(count, 2u);
  // Cut inside the second item's arguments.
  EXPECT_EQ(read_all(24 + 20, count), ParseError::bad_length);
  EXPECT_EQ(count, 1u);
  // Cut inside the first item's padding: the padding is part of the item.
  EXPECT_EQ(read_all(20, count), ParseError::bad_length);
  EXPECT_EQ(count, 0u);
  // No items at all is a bundle of none.
  EXPECT_EQ(read_all(0, count), ParseError::none);
  EXPECT_EQ(count, 0u);
  // Too many arguments, or a payload past am_max_size(), end the bundle there.
  items[24 + 2] = std::byte{5};
  EXPECT_EQ(read_all(used, count), ParseError::too_many_args);
  EXPECT_EQ(count, 1u);
  const std::uint16_t huge = kMaxPayload + 1;
  std::memcpy(items + 6, &huge, 2);
  EXPECT_EQ(read_all(used, count), ParseError::payload_too_large);
  EXPECT_EQ(count, 0u);
  // A frame of a message and then more bytes is malformed.
  EXPECT_EQ(parse(frame, kHeaderBytes + used + 8, m), ParseError::bad_length);
}

// Deferred requests as am::write_deferred (am/deferred.hpp, inline in the
// caller) puts them in a bundle: a request for the handler, with as many
// words, as the one before joins its item (a run); read back by the
// library's reader, every request is an item of its own, in order.
TEST(Wire, BundleRuns) {
  using namespace am::wire;
  alignas(8) std::byte items[kMaxPayload];
  am::DeferredRoom room{items, nullptr, kBundleItems};
  struct Request {
    int handler;
    unsigned nargs;
  };
  const Request sent[] = {{7, 1}, {7, 1}, {7, 1}, {7, 2}, {8, 2}, {8, 2}, {7, 2}, {9, 0}, {9, 0}, {7, 1}};
  std::uint64_t word = 100;
  for (const Request& r : sent) {
    const std::uint64_t args[2] = {word, word + 1};
    ASSERT_TRUE(am::write_deferred(room, r.handler, args, r.nargs));
    word += 10;
  }
  // 6 items (handler 7 three times with 1 word, 7 with 2, 8 twice with 2,
  // 7 with 2, 9 twice with none, 7 with 1): 6 headers and 12 words.
  const std::size_t used = std::size_t(room.next - items);
  EXPECT_EQ(used, 6 * kItemHeaderBytes + 12 * 8);
  EXPECT_EQ(room.items_left, kBundleItems - 10);

  ItemReader reader(items, used, Items::requests);
  Item it;
  word = 100;
  for (const Request& r : sent) {
    ASSERT_TRUE(reader.next(it));
    EXPECT_EQ(it.header.handler, r.handler);
    EXPECT_EQ(it.header.nargs, r.nargs);
    EXPECT_EQ(it.header.payload_bytes, 0);
    std::uint64_t got[kMaxArgs];
    read_args(got, it.args, it.header.nargs);
    EXPECT_EQ(got[0], r.nargs > 0 ? word : 0u);
    EXPECT_EQ(got[1], r.nargs > 1 ? word + 1 : 0u);
    word += 10;
  }
  EXPECT_FALSE(reader.next(it));
  EXPECT_EQ(reader.error(), ParseError::none);

  auto read_all = [&](std::size_t len, unsigned& count) { return read_items(items, len, Items::requests, count); };
  unsigned count = 0;
  // A run cut short: nothing of it is read.
  EXPECT_EQ(read_all(kItemHeaderBytes + 2 * 8, count), ParseError::bad_length);
  EXPECT_EQ(count, 0u);
  // A run longer than a bundle holds, or one with a payload, is malformed.
  ItemHeader first;
  std::memcpy(&first, items, kItemHeaderBytes);
  ItemHeader bad = first;
  bad.index = kBundleItems;
  std::memcpy(items, &bad, kItemHeaderBytes);
  EXPECT_EQ(read_all(used, count), ParseError::bad_run);
  bad = first;
  bad.payload_bytes = 8;
  std::memcpy(items, &bad, kItemHeaderBytes);
  EXPECT_EQ(read_all(used, count), ParseError::bad_run);
  EXPECT_EQ(count, 0u);
  // Read as a bundle's replies, the same bytes are items whose index is a place.
  std::memcpy(items, &first, kItemHeaderBytes);
  ItemReader replies(items, used, Items::replies);
  ASSERT_TRUE(replies.next(it));
  EXPECT_EQ(it.header.index, 2);  // a place: the next item starts after one request's words
  ASSERT_TRUE(replies.next(it));
  EXPECT_EQ(it.args, items + 2 * kItemHeaderBytes + 8);

  // A full bundle of one handler is one run of kBundleItems requests, and
  // no more fit; a bundle opened again starts with an item of its own.
  room = am::DeferredRoom{items, nullptr, kBundleItems};
  for (unsigned i = 0; i < kBundleItems; ++i) ASSERT_TRUE(am::write_deferred(room, 3, &word, 1));
  EXPECT_FALSE(am::write_deferred(room, 3, &word, 1));
  const std::size_t full = std::size_t(room.next - items);
  EXPECT_EQ(full, kItemHeaderBytes + kBundleItems * 8u);
  EXPECT_EQ(read_items(items, full, Items::requests, count), ParseError::none);
  EXPECT_EQ(count, kBundleItems);
  room = am::DeferredRoom{items, nullptr, kBundleItems};
  ASSERT_TRUE(am::write_deferred(room, 3, &word, 1));
  EXPECT_EQ(std::size_t(room.next - items), kItemHeaderBytes + 8u);
  ItemHeader again;
  std::memcpy(&again, items, kItemHeaderBytes);
  EXPECT_EQ(again.index, 0);

  // What no bundle may hold is refused and nothing written: a handler past
  // the table, more than 4 words; and so is everything once no bundle is open.
  const std::uint64_t five[5] = {1, 2, 3, 4, 5};
  EXPECT_FALSE(am::write_deferred(room, AM_MAX_HANDLERS, &word, 1));
  EXPECT_FALSE(am::write_deferred(room, -1, &word, 1));
  EXPECT_FALSE(am::write_deferred(room, 3, five, 5));
  EXPECT_EQ(std::size_t(room.next - items), kItemHeaderBytes + 8u);
  EXPECT_EQ(room.items_left, kBundleItems - 1);
  room = am::DeferredRoom{};
  EXPECT_FALSE(am::write_deferred(room, 3, &word, 1));
}

}  // namespace
