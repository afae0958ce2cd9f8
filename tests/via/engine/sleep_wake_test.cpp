// Every message wakes a sleeping receiver at once, and every frame taken out
// of a full ring wakes a sender waiting for room. Here every wait sleeps from
// its first empty look (VIASTACK_SPIN_US=0, VIASTACK_YIELD_US=0), and the
// other side acts after a varying pause of up to a few hundred microseconds,
// so that its action lands on every moment of the sleeper's way into its
// sleep: a store and the sleeper's announcement that pass each other unseen
// (a wake-up lost) leave the sleeper asleep until its time slice ends, 10 ms.
// A process of its own, since the engine reads the settings once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>

#include "support/endpoint.hpp"
#include "via/via.hpp"

using namespace testing_support;

namespace {

void busy_wait(std::chrono::nanoseconds pause) {
  const auto until = std::chrono::steady_clock::now() + pause;
  while (std::chrono::steady_clock::now() < until) {
  }
}

struct Side {
  Endpoint e;
  via::Vi* vi = nullptr;
};

// Two NICs in this process, a VI each, connected.
void connect(Side& a, Side& b, std::size_t arena) {
  use_unique_job("sleepwake");
  a.e.open("shm:0", arena);
  b.e.open("shm:1", arena);
  a.vi = a.e.create_vi();
  b.vi = b.e.create_vi();
  auto [ra, rb] = connect_peers(a.e, "rank0", a.vi, b.e, "rank1", b.vi, "d");
  expect_ok(ra, "connect");
  expect_ok(rb, "connect");
}

// A lost wake-up shows as a sleep that ran its whole slice (10 ms) and ended
// with its wait over though no doorbell rang (NicCounters::late_wakeups).
// Judged only if the waits slept often enough to show anything.
void expect_no_late_wakeups(const via::Nic& nic, std::uint64_t sleeps_before, const char* side) {
  const via::NicCounters& c = nic.counters();
  std::printf("%s: %llu sleeps, %llu late wake-ups\n", side, static_cast<unsigned long long>(c.sleeps - sleeps_before),
              static_cast<unsigned long long>(c.late_wakeups));
  if (c.sleeps - sleeps_before < 200) GTEST_SKIP() << "the " << side << " slept too rarely to judge (a busy machine)";
  // Judged before the sleep is disarmed, a peer that acts as the slice ends
  // rings; only one caught between its store and its ring could be miscounted.
  EXPECT_EQ(c.late_wakeups, 0u) << side;
}

void send(Endpoint& e, via::Vi* vi, std::size_t bytes) {
  VIP_DESCRIPTOR* d = e.message(0, bytes);
  expect_ok(vi->post_send(d, e.arena.handle), "post send");
  VIP_DESCRIPTOR* done = nullptr;
  expect_ok(vi->send_wait(5000, done), "send");
  e.arena.release(done);
}

bool receive(Endpoint& e, via::Vi* vi) {
  VIP_DESCRIPTOR* posted = e.message(64, 64);
  expect_ok(vi->post_recv(posted, e.arena.handle), "post recv");
  VIP_DESCRIPTOR* done = nullptr;
  const bool ok = vi->recv_wait(5000, done) == via::Result::success && done == posted;
  e.arena.release(posted);
  return ok;
}

// A ping-pong whose replies come after a pause of 0-60 us, stepping by 100 ns:
// the pings land on every moment of the waiting side's way into its sleep.
// (With the sender's fence left out and no membarrier in its place, 0 to 20
// of 100,000 round trips lost a wake-up, depending on the machine's state.)
TEST(SleepingReceiver, EveryMessageWakesIt) {
  constexpr int kRoundTrips = 100'000;
  Side a, b;
  connect(a, b, 1 << 16);
  std::atomic<bool> responder_ok = true;
  std::thread responder([&] {
    for (int i = 0; i < kRoundTrips && responder_ok; ++i) {
      if (!receive(b.e, b.vi)) responder_ok = false;
      busy_wait(std::chrono::nanoseconds(i * 37 % 601 * 100));
      send(b.e, b.vi, 8);
    }
  });
  const std::uint64_t sleeps_before = a.e.nic->counters().sleeps;
  for (int i = 0; i < kRoundTrips && responder_ok; ++i) {
    send(a.e, a.vi, 8);
    ASSERT_TRUE(receive(a.e, a.vi)) << "round trip " << i;
  }
  responder.join();
  ASSERT_TRUE(responder_ok);
  expect_no_late_wakeups(*a.e.nic, sleeps_before, "waiting side");
}

// The sender streams messages of 40-120 KiB (frames of up to 64 KiB) into a
// 256 KiB data ring, so that most sends find it full and the sender sleeps
// until the receiver, pausing 0-200 us before it takes what has arrived,
// frees room. (With the receiver never ringing a waiting producer, each of
// the sender's sleeps was late; the narrow race of a request for the doorbell
// made in the last look before the sleep shows rarely if ever here.)
TEST(SleepingSender, EveryFrameTakenWakesIt) {
  constexpr int kMessages = 100'000;
  constexpr std::size_t kLargest = 120 * 1024;
  Side a, b;
  connect(a, b, kLargest);
  auto size_of = [](int i) { return std::size_t(40 * 1024 + i * 7919 % (80 * 1024)); };
  // The receiver keeps more receives posted than the ring holds messages.
  std::atomic<bool> receiver_ok = true;
  std::thread receiver([&] {
    constexpr int kPosted = 64;
    std::deque<VIP_DESCRIPTOR*> posted;
    auto post = [&] {
      VIP_DESCRIPTOR* d = b.e.message(0, kLargest);
      expect_ok(b.vi->post_recv(d, b.e.arena.handle), "post recv");
      posted.push_back(d);
    };
    for (int i = 0; i < kPosted; ++i) post();
    auto take = [&](VIP_DESCRIPTOR* done, int i) {
      if (done != posted.front() || done->CS.Length != size_of(i)) return false;
      posted.pop_front();
      b.e.arena.release(done);
      if (i + kPosted < kMessages) post();
      return true;
    };
    for (int i = 0; i < kMessages && receiver_ok; ++i) {
      busy_wait(std::chrono::nanoseconds(i * 37 % 2003 * 100));
      VIP_DESCRIPTOR* done = nullptr;
      if (b.vi->recv_wait(5000, done) != via::Result::success || !take(done, i)) receiver_ok = false;
      while (receiver_ok && i + 1 < kMessages && b.vi->recv_done(done) == via::Result::success)
        if (!take(done, ++i)) receiver_ok = false;
    }
  });
  const std::uint64_t sleeps_before = a.e.nic->counters().sleeps;
  for (int i = 0; i < kMessages && receiver_ok; ++i) send(a.e, a.vi, size_of(i));
  receiver.join();
  ASSERT_TRUE(receiver_ok);
  expect_no_late_wakeups(*a.e.nic, sleeps_before, "sender");
}

}  // namespace

int main(int argc, char** argv) {
  setenv("VIASTACK_SPIN_US", "0", 1);
  setenv("VIASTACK_YIELD_US", "0", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
