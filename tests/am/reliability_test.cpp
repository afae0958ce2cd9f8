// The reliability state machine and the wire format, packet by packet on
// virtual time: a tiny simulated link between a requester's SendWindow and a
// responder's ReceiveFilter that can lose, duplicate and reorder messages.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <vector>

#include "reliability.hpp"
#include "wire.hpp"

namespace {

using am::Admission;
using am::ReceiveFilter;
using am::RetryPolicy;
using am::SendWindow;

constexpr std::uint64_t kMs = 1'000'000;

RetryPolicy policy() {
  RetryPolicy p;
  p.first_ns = 10 * kMs;
  p.max_interval_ns = 80 * kMs;
  p.timeout_ns = 1000 * kMs;
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

TEST(SendWindow, RetransmitsWithExponentialBackoffThenExpires) {
  SendWindow w(4, policy());
  const auto s = w.open();
  std::vector<std::uint64_t> resent;
  int expired = 0;
  for (std::uint64_t t = 0; t <= 2000 * kMs; t += kMs)
    w.advance(t, [&](std::uint16_t slot) { EXPECT_EQ(slot, s); resent.push_back(t / kMs); },
              [&](std::uint16_t slot) { EXPECT_EQ(slot, s); ++expired; });
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
    w.advance(t, [&](std::uint16_t) { ++resent; }, [&](std::uint16_t) { ++expired; });
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
  auto expire = [&](std::uint16_t) { ++expired; };
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
  EXPECT_EQ(w.next_deadline(), 6010 * kMs);
  w.advance(6000 * kMs + 1000 * kMs, retransmit, expire);
  EXPECT_EQ(expired, 1);
  EXPECT_FALSE(w.is_open(u));
  EXPECT_EQ(w.next_deadline(), am::kNever);
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

TEST(ReceiveFilter, FreshDuplicateStaleAndBadSlot) {
  ReceiveFilter f(2);
  EXPECT_EQ(f.admit(0, 1), Admission::fresh);
  EXPECT_EQ(f.admit(0, 1), Admission::duplicate);
  EXPECT_EQ(f.admit(0, 2), Admission::fresh);
  EXPECT_EQ(f.admit(0, 1), Admission::stale);
  EXPECT_EQ(f.admit(1, 1), Admission::fresh);
  EXPECT_EQ(f.admit(2, 1), Admission::bad_slot);
  // Wrap-around of the 32-bit sequence number.
  ReceiveFilter g(1);
  EXPECT_EQ(g.admit(0, 0x7FFFFFFFu), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0xFFFFFFFEu), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0xFFFFFFFFu), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0), Admission::fresh);
  EXPECT_EQ(g.admit(0, 0xFFFFFFFFu), Admission::stale);
}

// A requester and a responder over a lossy, duplicating, reordering link, on
// virtual time: every request must be handled exactly once and every request
// must see its reply, whatever the link does.
struct Packet {
  bool reply;
  std::uint16_t slot;
  std::uint32_t seq;
  int id;  // which logical request
  std::uint64_t due;
};

struct Simulation {
  Simulation(double drop, double dup, double reorder, std::uint64_t seed)
      : drop_(drop), dup_(dup), reorder_(reorder), rng_(seed), window_(8, policy()), filter_(8) {}

  void send(const Packet& p, std::uint64_t now) {
    if (chance(drop_)) return;
    const int copies = chance(dup_) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      Packet q = p;
      q.due = now + 1 + (chance(reorder_) ? 5 : 0);  // held back: overtaken by later packets
      link_.push_back(q);
    }
  }

  // Runs until all `requests` completed; false if time ran out.
  bool run(int requests, std::uint64_t limit_ms) {
    int next = 0;
    std::map<std::uint16_t, int> slot_request;  // at the requester
    for (std::uint64_t now = 0; now < limit_ms * kMs; now += kMs / 10) {
      while (next < requests && window_.has_credit()) {
        const auto slot = window_.open();
        slot_request[slot] = next;
        send(Packet{false, slot, window_.seq(slot), next, 0}, now);
        ++next;
      }
      window_.advance(now, [&](std::uint16_t slot) {
        ++retransmitted;
        send(Packet{false, slot, window_.seq(slot), slot_request[slot], 0}, now);
      }, [&](std::uint16_t) { ++expired; });
      std::deque<Packet> due;
      for (auto it = link_.begin(); it != link_.end();)
        if (it->due <= now) {
          due.push_back(*it);
          it = link_.erase(it);
        } else {
          ++it;
        }
      for (const Packet& p : due) {
        if (p.reply) {
          if (window_.close(p.slot, p.seq)) ++replies[p.id];
          continue;
        }
        switch (filter_.admit(p.slot, p.seq)) {
          case Admission::fresh:
            ++handled[p.id];
            [[fallthrough]];
          case Admission::duplicate:  // the cached reply goes out again
            send(Packet{true, p.slot, p.seq, p.id, 0}, now);
            break;
          default:
            break;
        }
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
  std::vector<Packet> link_;
  std::map<int, int> handled, replies;
  int retransmitted = 0, expired = 0;
};

TEST(Protocol, ExactlyOnceOverLossDuplicationAndReordering) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Simulation sim(0.2, 0.1, 0.2, seed);
    ASSERT_TRUE(sim.run(500, 100000)) << "seed " << seed;
    EXPECT_EQ(sim.expired, 0);
    EXPECT_GT(sim.retransmitted, 0);
    for (int id = 0; id < 500; ++id) {
      ASSERT_EQ(sim.handled[id], 1) << "request " << id << " seed " << seed;
      ASSERT_EQ(sim.replies[id], 1) << "request " << id << " seed " << seed;
    }
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
  const std::size_t len = encode(buf, h, args, payload);
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

}  // namespace
