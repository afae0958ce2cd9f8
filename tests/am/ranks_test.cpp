// AM across forked ranks: handlers for every argument count (C and C++
// APIs), replies only inside handlers, store/get at every size class on
// reliable and unreliable VIs, bad input, and a peer killed mid-run.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <am/am.hpp>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "ranks.hpp"

namespace {

using am_test::run_ranks;
using Clock = std::chrono::steady_clock;

// Each body returns 0 on success, or the number of the first failed check.
#define CHECK_OR_RETURN(cond, code)                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "rank %d: check failed: %s (%s)\n", am::my_proc(), #cond, \
                   am::last_error());                                               \
      return code;                                                                  \
    }                                                                               \
  } while (0)

void set_reliability(bool reliable) {
  setenv("VIASTACK_AM_RELIABILITY", reliable ? "reliable" : "unreliable", 1);
}

void expect_all_zero(const std::vector<int>& status) {
  for (std::size_t r = 0; r < status.size(); ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// ---- handlers for every argument count, C API ----

am_word_t c_sum = 0;
int c_replies = 0;
int c_reply_outside = 0;
void c_reply_handler(int, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  c_sum += a0 + a1 + a2 + a3;
  ++c_replies;
  // A reply handler may not reply.
  if (am_reply_0(0, 0) == AM_ERR_NOT_IN_HANDLER) ++c_reply_outside;
}
// Request handler k replies with k arguments: each argument + 1.
void c_request_handler(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  int rc = AM_OK;
  if (a0 == 0)
    rc = am_reply_0(src, 10);
  else if (a1 == 0)
    rc = am_reply_1(src, 10, a0 + 1);
  else if (a2 == 0)
    rc = am_reply_2(src, 10, a0 + 1, a1 + 1);
  else if (a3 == 0)
    rc = am_reply_3(src, 10, a0 + 1, a1 + 1, a2 + 1);
  else
    rc = am_reply_4(src, 10, a0 + 1, a1 + 1, a2 + 1, a3 + 1);
  if (rc != AM_OK) std::abort();
  if (am_reply_0(src, 10) != AM_ERR_NOT_IN_HANDLER) std::abort();  // only one reply
}

TEST(AmRanks, CHandlersForEveryArgumentCount) {
  auto status = run_ranks(2, [](int rank) -> int {
    am_set_handler(9, c_request_handler);
    am_set_handler(10, c_reply_handler);
    CHECK_OR_RETURN(am_enable() == AM_OK, 1);
    CHECK_OR_RETURN(am_procs() == 2 && am_my_proc() == rank, 2);
    // Outside any handler a reply is an error.
    CHECK_OR_RETURN(am_reply_1(1 - rank, 10, 5) == AM_ERR_NOT_IN_HANDLER, 3);
    const int peer = 1 - rank;
    CHECK_OR_RETURN(am_request_0(peer, 9) == AM_OK, 4);
    CHECK_OR_RETURN(am_request_1(peer, 9, 1) == AM_OK, 5);
    CHECK_OR_RETURN(am_request_2(peer, 9, 1, 2) == AM_OK, 6);
    CHECK_OR_RETURN(am_request_3(peer, 9, 1, 2, 3) == AM_OK, 7);
    CHECK_OR_RETURN(am_request_4(peer, 9, 1, 2, 3, 4) == AM_OK, 8);
    while (c_replies < 5) am_poll();
    // Replies: 0 | 2 | 2+3 | 2+3+4 | 2+3+4+5
    CHECK_OR_RETURN(c_sum == 0 + 2 + 5 + 9 + 14, 9);
    CHECK_OR_RETURN(c_reply_outside == 5, 10);
    CHECK_OR_RETURN(am_barrier() == AM_OK, 11);
    CHECK_OR_RETURN(am_disable() == AM_OK, 12);
    CHECK_OR_RETURN(am_request_0(peer, 9) == AM_ERR_NOT_INIT, 13);
    return 0;
  });
  expect_all_zero(status);
}

// ---- the same through the C++ API, typed handlers and payloads ----

TEST(AmRanks, CxxTypedHandlersAndPayloads) {
  auto status = run_ranks(2, [](int rank) -> int {
    int replies = 0;
    long total = 0;
    std::vector<std::byte> echoed;
    am::set_handler(1, [](am::Token t) { t.reply(2, 100); });
    am::set_handler(2, [&](am::Token, int v) { total += v; ++replies; });
    am::set_handler(3, [](am::Token t, int a, long b, unsigned c, double d) {
      t.reply(2, int(a + b + long(c) + long(d)));
    });
    am::set_handler(4, [](am::Token t, std::span<std::byte> payload, int tag) {
      for (auto& b : payload) b = std::byte(int(b) + tag);
      t.reply_payload(5, payload, int(payload.size()));
    });
    am::set_handler(5, [&](am::Token, std::span<std::byte> payload, int size) {
      if (int(payload.size()) == size) echoed.assign(payload.begin(), payload.end());
      ++replies;
    });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    const int peer = 1 - rank;
    CHECK_OR_RETURN(am::request(peer, 1) == am::Status::ok, 2);
    CHECK_OR_RETURN(am::request(peer, 3, 1, 2L, 3u, 4.0) == am::Status::ok, 3);
    std::vector<std::byte> data(am::max_size());
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 13);
    CHECK_OR_RETURN(am::request_payload(peer, 4, data, 1) == am::Status::ok, 4);
    while (replies < 3) am::poll();
    CHECK_OR_RETURN(total == 110, 5);
    CHECK_OR_RETURN(echoed.size() == data.size(), 6);
    for (std::size_t i = 0; i < data.size(); ++i) CHECK_OR_RETURN(echoed[i] == std::byte(int(i * 13 + 1) & 0xFF), 7);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 8);
    return 0;
  });
  expect_all_zero(status);
}

// ---- waiting for what a handler sets ----

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

int c_flag = 0;
void c_set_flag(int, am_word_t value, am_word_t, am_word_t, am_word_t) { c_flag = int(value); }
int c_flag_is_set(void* expected) { return c_flag == *static_cast<int*>(expected); }

// Rank 1 sets a flag on rank 0 by a request after a pause; rank 0 waits for
// it with am::wait_until (C++) and am_wait_until (C), sleeping, not spinning.
TEST(AmRanks, WaitUntilAFlagAHandlerSets) {
  auto status = run_ranks(2, [](int rank) -> int {
    constexpr auto kPause = std::chrono::milliseconds(400);
    int flag = 0;
    am::Status in_handler = am::Status::ok;
    am::set_handler(1, [&](am::Token, int value) { flag = value; });
    am::set_handler(2, [&](am::Token) { in_handler = am::wait_until([] { return true; }); });
    am_set_handler(3, c_set_flag);
    CHECK_OR_RETURN(am::wait_until([] { return true; }) == am::Status::not_init, 1);
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 2);
    CHECK_OR_RETURN(am_wait_until(nullptr, nullptr) == AM_ERR_BAD_ARG, 3);
    if (rank == 1) {
      std::this_thread::sleep_for(kPause);
      CHECK_OR_RETURN(am::request(0, 1, 7) == am::Status::ok, 4);
      CHECK_OR_RETURN(am::request(0, 2) == am::Status::ok, 5);
      std::this_thread::sleep_for(kPause);
      CHECK_OR_RETURN(am::request(0, 3, 9) == am::Status::ok, 6);
    } else {
      const auto wall_start = Clock::now();
      const double cpu_start = cpu_seconds();
      CHECK_OR_RETURN(am::wait_until([&] { return flag == 7; }) == am::Status::ok, 7);
      // Waiting inside a handler is refused.
      CHECK_OR_RETURN(am::wait_until([&] { return in_handler != am::Status::ok; }) == am::Status::ok, 8);
      CHECK_OR_RETURN(in_handler == am::Status::bad_arg, 9);
      int expected = 9;
      CHECK_OR_RETURN(am_wait_until(c_flag_is_set, &expected) == AM_OK, 10);
      const std::chrono::duration<double> wall = Clock::now() - wall_start;
      const double cpu = cpu_seconds() - cpu_start;
      CHECK_OR_RETURN(wall >= kPause, 11);
      if (cpu > 0.5 * wall.count()) {
        std::fprintf(stderr, "rank 0 used %.3f s of CPU waiting %.3f s\n", cpu, wall.count());
        return 12;
      }
    }
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 13);
    return 0;
  });
  expect_all_zero(status);
}

// ---- store and get at every size class ----

int store_handler_calls = 0;
std::size_t store_handler_bytes = 0;

int store_get_body(int rank) {
  am::set_mem_handler(20, [](int, void*, std::size_t n, am::Word arg) {
    ++store_handler_calls;
    store_handler_bytes += n;
    if (arg != 77) std::abort();
  });
  int gets_done = 0;
  am::set_mem_handler(21, [&](int, void*, std::size_t, am::Word) { ++gets_done; });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  const int peer = 1 - rank;
  const std::size_t max = am::max_size();
  const std::size_t sizes[] = {0, 1, 8, 63, max - 1, max, max + 1, 3 * max + 5, 65536, (1u << 20) + 3};
  std::vector<std::byte> out((2u << 20)), in((2u << 20));
  auto* mine = static_cast<std::byte*>(am::segment(rank));
  auto* theirs = static_cast<std::byte*>(am::segment(peer));
  CHECK_OR_RETURN(mine && theirs && am::segment_size(peer) >= (4u << 20), 2);
  int expected_calls = 0;
  std::size_t expected_bytes = 0;
  std::uint64_t seed = 1;
  for (std::size_t n : sizes) {
    for (std::size_t i = 0; i < n; ++i) out[i] = std::byte(testing_support::pattern(seed + rank, i));
    // Store into the peer's segment at an odd offset, from a buffer outside ours (and from inside).
    const std::size_t at = 17 + seed * 64;
    am::Future f = am::store(peer, out.data(), theirs + at, n, 20, 77);
    CHECK_OR_RETURN(f.wait() == am::Status::ok, 3);
    std::memcpy(mine + (8u << 20), out.data(), n);  // a source inside our segment (registered already)
    CHECK_OR_RETURN(am::store(peer, mine + (8u << 20), theirs + (2u << 20) + at, n, 20, 77).wait() == am::Status::ok, 4);
    expected_calls += 2;
    expected_bytes += 2 * n;
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 5);
    // The peer stored into us: check its pattern.
    for (std::size_t i = 0; i < n; ++i) {
      CHECK_OR_RETURN(mine[at + i] == std::byte(testing_support::pattern(seed + peer, i)), 6);
      CHECK_OR_RETURN(mine[(2u << 20) + at + i] == std::byte(testing_support::pattern(seed + peer, i)), 7);
    }
    // Get it back from the peer's segment (what we stored there).
    std::memset(in.data(), 0, n + 1);
    const int before = gets_done;
    CHECK_OR_RETURN(am::get(peer, theirs + at, in.data(), n, 21, 0).wait() == am::Status::ok, 8);
    CHECK_OR_RETURN(gets_done == before + 1, 9);
    CHECK_OR_RETURN(std::memcmp(in.data(), out.data(), n) == 0 && in[n] == std::byte{0}, 10);
    // Blocking C store and get into our own segment.
    CHECK_OR_RETURN(am_store(peer, out.data(), theirs + at, n, 20, 77) == AM_OK, 11);
    ++expected_calls;
    expected_bytes += n;
    // am_store returns once the source may be reused, not once the data is
    // there: the peer's store handler count says when its stores landed here.
    while (store_handler_calls < expected_calls) am::poll();
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 12);
    ++seed;
  }
  CHECK_OR_RETURN(store_handler_calls == expected_calls && store_handler_bytes == expected_bytes, 13);
  // Stores to ourselves go through the loopback path.
  CHECK_OR_RETURN(am::store(rank, out.data(), mine + 5, 100000, 20, 77).wait() == am::Status::ok, 14);
  CHECK_OR_RETURN(std::memcmp(mine + 5, out.data(), 100000) == 0, 15);
  const am::Counters c = am::counters();
  std::printf("rank %d: rdma writes %llu reads %llu, requests %llu, retransmitted %llu\n", rank,
              static_cast<unsigned long long>(c.rdma_writes), static_cast<unsigned long long>(c.rdma_reads),
              static_cast<unsigned long long>(c.requests_sent), static_cast<unsigned long long>(c.retransmitted));
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 16);
  return 0;
}

TEST(AmRanks, StoreGetEverySizeReliable) {
  set_reliability(true);
  expect_all_zero(run_ranks(2, store_get_body));
}

TEST(AmRanks, StoreGetEverySizeUnreliableWithFaults) {
  set_reliability(false);
  setenv("VIASTACK_FAULTS", "drop=0.05,dup=0.02,reorder=0.05,seed=3", 1);
  auto status = run_ranks(2, store_get_body);
  unsetenv("VIASTACK_FAULTS");
  set_reliability(true);
  expect_all_zero(status);
}

// ---- receives re-posted late, at the smallest depths ----

// Handled receives wait to be re-posted until the next poll, in spare
// receives beyond the 2 x depth a peer can fill. At depth 1 and 2 a peer fills
// them all the time: both ranks flood each other on reliable VIs, where a
// message finding no receive posted would break the VI.
int late_repost_body(int rank) {
  constexpr long kRequests = 5000;
  long handled = 0, replies = 0;
  am::set_handler(1, [&](am::Token t, long i) {
    ++handled;
    t.reply(2, i);
  });
  am::set_handler(2, [&](am::Token, long) { ++replies; });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  const int peer = 1 - rank;
  for (long i = 0; i < kRequests; ++i) CHECK_OR_RETURN(am::request(peer, 1, i) == am::Status::ok, 2);
  CHECK_OR_RETURN(am::wait_until([&] { return replies == kRequests; }) == am::Status::ok, 3);
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 4);
  CHECK_OR_RETURN(handled == kRequests && replies == kRequests, 5);
  CHECK_OR_RETURN(am::counters().credit_stalls > 0, 6);  // the window was full: every receive was in use
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 7);
  return 0;
}

// A window deeper than the NIC's queues hold is refused at am_enable, with
// the largest depth that fits (it failed later, posting receives, with no why).
TEST(AmRanks, DepthPastTheNicsQueuesIsAClearError) {
  setenv("VIASTACK_AM_DEPTH", "1024", 1);
  auto status = run_ranks(2, [](int) -> int {
    CHECK_OR_RETURN(am::enable() == am::Status::enable_failed, 1);
    CHECK_OR_RETURN(std::strstr(am::last_error(), "VIASTACK_AM_DEPTH=1024") != nullptr, 2);
    CHECK_OR_RETURN(std::strstr(am::last_error(), "at most 478") != nullptr, 3);
    return 0;
  });
  unsetenv("VIASTACK_AM_DEPTH");
  expect_all_zero(status);
  setenv("VIASTACK_AM_DEPTH", "478", 1);
  status = run_ranks(2, [](int rank) -> int {
    long handled = 0;
    am::set_handler(1, [&](am::Token) { ++handled; });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    for (int i = 0; i < 1000; ++i) CHECK_OR_RETURN(am::request(1 - rank, 1) == am::Status::ok, 2);
    CHECK_OR_RETURN(am::wait_until([&] { return handled == 1000; }) == am::Status::ok, 3);
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 4);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 5);
    return 0;
  });
  unsetenv("VIASTACK_AM_DEPTH");
  expect_all_zero(status);
}

TEST(AmRanks, SmallestDepthsNeverRunOutOfReceives) {
  for (const char* depth : {"1", "2"}) {
    setenv("VIASTACK_AM_DEPTH", depth, 1);
    auto status = run_ranks(2, late_repost_body);
    unsetenv("VIASTACK_AM_DEPTH");
    SCOPED_TRACE(std::string("depth ") + depth);
    expect_all_zero(status);
  }
}

// ---- deferred requests, sent in bundles ----

// Every rank streams deferred requests to every other, with a plain request
// now and then (it leaves behind the bundle it joins); one in four is
// answered by a reply (replies to a bundle go back in one). Each request is
// handled exactly once and, on reliable VIs, in the order sent; each reply
// arrives once; they travelled in bundles.
int deferred_body(int rank, bool reliable) {
  constexpr long kRequests = 20000;
  std::vector<std::vector<unsigned char>> seen(8, std::vector<unsigned char>(kRequests)), answered = seen;
  std::vector<long> next(8, 0);
  long handled = 0, replies = 0, out_of_order = 0, bad = 0;
  am::set_handler(1, [&](am::Token t, long i) {
    if (t.src() < 0 || t.src() >= 8 || i < 0 || i >= kRequests || ++seen[std::size_t(t.src())][std::size_t(i)] > 1) {
      ++bad;
      return;
    }
    if (i != next[std::size_t(t.src())]) ++out_of_order;
    next[std::size_t(t.src())] = i + 1;
    ++handled;
    if (i % 4 == 0 && t.reply(2, i) != am::Status::ok) ++bad;
  });
  am::set_handler(2, [&](am::Token t, long i) {
    if (t.src() < 0 || t.src() >= 8 || i < 0 || i >= kRequests || i % 4 ||
        ++answered[std::size_t(t.src())][std::size_t(i)] > 1)
      ++bad;
    else
      ++replies;
  });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  const int procs = am::procs();
  for (long i = 0; i < kRequests; ++i)
    for (int k = 1; k < procs; ++k) {
      const int dest = (rank + k) % procs;
      const am::Status s = i % 1000 == 999 ? am::request(dest, 1, i) : am::request_deferred(dest, 1, i);
      CHECK_OR_RETURN(s == am::Status::ok, 2);
    }
  CHECK_OR_RETURN(am::wait_until([&] { return handled + bad >= kRequests * (procs - 1); }) == am::Status::ok, 3);
  CHECK_OR_RETURN(am::wait_acknowledged() == am::Status::ok, 4);
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 5);
  CHECK_OR_RETURN(bad == 0 && handled == kRequests * (procs - 1) && replies == kRequests / 4 * (procs - 1), 6);
  CHECK_OR_RETURN(!reliable || out_of_order == 0, 7);
  const am::Counters c = am::counters();
  CHECK_OR_RETURN(c.bundles_sent > 0 && c.bundles_sent * 4 < c.requests_sent, 8);
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 9);
  return 0;
}

TEST(AmRanks, DeferredRequestsArriveOnceAndInOrderInBundles) {
  set_reliability(true);
  expect_all_zero(run_ranks(3, [](int rank) { return deferred_body(rank, true); }));
}

TEST(AmRanks, DeferredRequestsArriveOnceOverLossInBundles) {
  set_reliability(false);
  setenv("VIASTACK_FAULTS", "drop=0.05,dup=0.02,reorder=0.05,seed=5", 1);
  auto status = run_ranks(3, [](int rank) { return deferred_body(rank, false); });
  unsetenv("VIASTACK_FAULTS");
  set_reliability(true);
  expect_all_zero(status);
}

// am::flush sends a deferred request at once: rank 1 has it while rank 0,
// which makes no AM call after the flush, sleeps.
int flush_body(int rank) {
  bool arrived = false;
  am::set_handler(1, [&](am::Token, long) { arrived = true; });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  if (rank == 0) {
    CHECK_OR_RETURN(am::request_deferred(1, 1, 7L) == am::Status::ok, 2);
    am::flush();
    std::this_thread::sleep_for(std::chrono::seconds(3));
  } else {
    const auto start = Clock::now();
    CHECK_OR_RETURN(am::wait_until([&] { return arrived || Clock::now() - start > std::chrono::milliseconds(2500); }) ==
                        am::Status::ok,
                    3);
    CHECK_OR_RETURN(arrived, 4);
  }
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 5);
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 6);
  return 0;
}

TEST(AmRanks, FlushSendsDeferredRequestsAtOnce) { expect_all_zero(run_ranks(2, flush_body)); }

// What a rank owes leaves when its wait ends: after a barrier, and after a
// wait for a one-way request, the sender's wait_acknowledged does not wait
// for a peer that then computes without polling.
int acks_when_a_wait_ends_body(int rank) {
  constexpr auto kBusy = std::chrono::milliseconds(1500);
  bool arrived = false;
  am::set_handler(1, [&](am::Token) { arrived = true; });  // one-way: no reply
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  for (int round = 0; round < 2; ++round) {
    if (round == 0) {
      CHECK_OR_RETURN(am::barrier() == am::Status::ok, 2);
    } else if (rank == 0) {
      CHECK_OR_RETURN(am::request(1, 1) == am::Status::ok, 3);
    } else {
      CHECK_OR_RETURN(am::wait_until([&] { return arrived; }) == am::Status::ok, 4);
    }
    if (rank == 1) {
      std::this_thread::sleep_for(kBusy);
    } else {
      const auto start = Clock::now();
      CHECK_OR_RETURN(am::wait_acknowledged() == am::Status::ok, 5);
      CHECK_OR_RETURN(Clock::now() - start < kBusy / 2, 6 + round);
    }
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 8);
  }
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 9);
  return 0;
}

TEST(AmRanks, AcknowledgementsLeaveWhenAWaitEnds) { expect_all_zero(run_ranks(2, acks_when_a_wait_ends_body)); }

// A rank that only sends requests, with credits to spare (so that no
// request waits for one), still runs the handlers of what arrived: a
// request polls now and then, if not each time. A request to this rank
// itself runs its handler within the call.
int requests_alone_answer_peers_body(int rank) {
  constexpr int kRequests = 20;  // fewer than the depth (32): no request waits for a credit
  constexpr auto kArrival = std::chrono::milliseconds(300);
  bool pinged = false, ponged = false, ran_here = false;
  int sunk = 0;
  am::set_handler(1, [&](am::Token t) {
    pinged = true;
    t.reply(2);
  });
  am::set_handler(2, [&](am::Token) { ponged = true; });
  am::set_handler(3, [&](am::Token) { ++sunk; });
  am::set_handler(4, [&](am::Token) { ran_here = true; });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 2);  // connected both ways
  if (rank == 1) {
    CHECK_OR_RETURN(am::request(0, 1) == am::Status::ok, 3);
    // Ends early if rank 0 failed its checks and left.
    CHECK_OR_RETURN(am::wait_until([&] { return ponged || am::failed_peers() > 0; }) == am::Status::ok, 4);
    CHECK_OR_RETURN(am::wait_until([&] { return sunk == kRequests || am::failed_peers() > 0; }) == am::Status::ok, 5);
    CHECK_OR_RETURN(ponged && sunk == kRequests, 6);
  } else {
    std::this_thread::sleep_for(kArrival);  // the ping waits at this rank's NIC
    for (int i = 0; i < kRequests; ++i) CHECK_OR_RETURN(am::request(1, 3) == am::Status::ok, 12);
    CHECK_OR_RETURN(pinged, 7);
    CHECK_OR_RETURN(am::request(0, 4) == am::Status::ok, 8);
    CHECK_OR_RETURN(ran_here, 9);
  }
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 10);
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 11);
  return 0;
}

TEST(AmRanks, RequestsAloneAnswerPeers) { expect_all_zero(run_ranks(2, requests_alone_answer_peers_body)); }

// The same for stores and gets: a rank that only starts them, with credits
// to spare, still runs the handlers of what arrived, and a store to this
// rank itself runs its handler within the call.
int bulk_alone_answer_peers_body(int rank) {
  constexpr int kEach = 10;  // stores and gets, 2 * kEach fewer than the depth (32)
  constexpr auto kArrival = std::chrono::milliseconds(300);
  bool pinged = false, ponged = false, stored_here = false;
  am::set_handler(1, [&](am::Token t) {
    pinged = true;
    t.reply(2);
  });
  am::set_handler(2, [&](am::Token) { ponged = true; });
  am::set_mem_handler(3, [&](int, void*, std::size_t, am::Word) { stored_here = true; });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 2);  // connected both ways
  if (rank == 1) {
    CHECK_OR_RETURN(am::request(0, 1) == am::Status::ok, 3);
    CHECK_OR_RETURN(am::wait_until([&] { return ponged || am::failed_peers() > 0; }) == am::Status::ok, 4);
    CHECK_OR_RETURN(ponged, 5);
  } else {
    std::this_thread::sleep_for(kArrival);  // the ping waits at this rank's NIC
    auto* theirs = static_cast<std::byte*>(am::segment(1));
    auto* mine = static_cast<std::byte*>(am::segment(0));
    std::vector<am::Future> started;
    for (int i = 0; i < kEach; ++i) {
      started.push_back(am::store(1, mine, theirs + 8 * i, 8));
      started.push_back(am::get(1, theirs + 8 * i, mine + 1024 + 8 * i, 8));
    }
    CHECK_OR_RETURN(pinged, 6);
    CHECK_OR_RETURN(am::store(0, mine, mine + 512, 8, 3).status() == am::Status::ok, 7);
    CHECK_OR_RETURN(stored_here, 8);
    for (const am::Future& f : started) CHECK_OR_RETURN(f.wait() == am::Status::ok, 9);
  }
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 10);
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 11);
  return 0;
}

TEST(AmRanks, StoresAndGetsAloneAnswerPeers) { expect_all_zero(run_ranks(2, bulk_alone_answer_peers_body)); }

// A handler may wait for its requester: rank 1's request handler and store
// handlers (of a store of am_max_size() bytes, and of a whole store of three
// times that, in one message) each send rank 0 three windows of requests, so
// each waits for the credits rank 0's answers return; the store handlers
// first poll until rank 0 answers a ping of theirs. On reliable VIs a
// message is handled where it arrived (the shm ring) and its peer's next
// ones wait behind it: a message that runs a handler is copied out and
// released first, a store released once its bytes landed, or rank 1 would
// wait for answers that never come.
int handlers_wait_for_their_requester_body(int rank) {
  constexpr int kRequests = 3 * 32;  // three windows at the default depth
  int sunk = 0, started = 0;
  am::set_handler(1, [&](am::Token) {
    ++started;
    for (int i = 0; i < kRequests; ++i) am::request(0, 2);
  });
  am::set_handler(2, [&](am::Token) { ++sunk; });
  int pongs = 0;
  am::set_handler(4, [](am::Token t) { t.reply(5); });
  am::set_handler(5, [&](am::Token) { ++pongs; });
  am::set_mem_handler(3, [&](int, void*, std::size_t, am::Word) {
    ++started;
    const int want = pongs + 1;
    am::request(0, 4);
    while (pongs < want) am::poll();
    for (int i = 0; i < kRequests; ++i) am::request(0, 2);
  });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  if (rank == 0) {
    auto* theirs = static_cast<std::byte*>(am::segment(1));
    auto* mine = static_cast<std::byte*>(am::segment(0));
    CHECK_OR_RETURN(am::request(1, 1) == am::Status::ok, 2);
    const am::Future stored = am::store(1, mine, theirs, am::max_size(), 3);
    const am::Future whole = am::store(1, mine, theirs, 3 * am::max_size(), 3);
    CHECK_OR_RETURN(am::wait_until([&] { return sunk == 3 * kRequests || am::failed_peers() > 0; }) == am::Status::ok, 3);
    CHECK_OR_RETURN(stored.wait() == am::Status::ok && whole.wait() == am::Status::ok, 4);
  }
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 5);
  CHECK_OR_RETURN(rank == 1 ? started == 3 : sunk == 3 * kRequests, 6);
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 7);
  return 0;
}

TEST(AmRanks, HandlersMayWaitForTheirRequester) {
  set_reliability(true);
  expect_all_zero(run_ranks(2, handlers_wait_for_their_requester_body, 30));
}

// On reliable VIs a store of up to 16 KiB goes whole, in one message from
// the source straight into the link, not by an RDMA write and a message
// behind it; a larger one by RDMA (and so does one to a peer not connected
// yet: the barrier connects first). A window of them in flight fills the
// link, and each waits for room; each lands whole, its handler after it.
int whole_stores_body(int rank) {
  constexpr std::size_t kWhole = 16 * 1024;
  constexpr int kStream = 100;
  int stored = 0;
  std::size_t stored_bytes = 0;
  am::set_mem_handler(3, [&](int, void*, std::size_t n, am::Word) {
    ++stored;
    stored_bytes += n;
  });
  CHECK_OR_RETURN(am::enable() == am::Status::ok && am::barrier() == am::Status::ok, 1);
  auto* mine = static_cast<std::byte*>(am::segment(rank));
  const std::size_t sizes[] = {am::max_size() + 1, 8192, 12289, kWhole};
  if (rank == 0) {
    auto* theirs = static_cast<std::byte*>(am::segment(1));
    std::vector<std::byte> out(kWhole + 1);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::byte(testing_support::pattern(5, i));
    std::size_t at = 0;
    for (std::size_t n : sizes) {
      CHECK_OR_RETURN(am::store(1, out.data(), theirs + at, n, 3, 0).wait() == am::Status::ok, 2);
      at += n;
    }
    std::vector<am::Future> stream;
    for (int i = 0; i < kStream; ++i) stream.push_back(am::store(1, out.data(), theirs + at, 12288, 3));
    for (const am::Future& f : stream) CHECK_OR_RETURN(f.wait() == am::Status::ok, 3);
    CHECK_OR_RETURN(am::counters().rdma_writes == 0, 4);
    CHECK_OR_RETURN(am::store(1, out.data(), theirs + (1u << 20), kWhole + 1, 3).wait() == am::Status::ok, 5);
    CHECK_OR_RETURN(am::counters().rdma_writes == 1, 6);
  }
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 7);
  if (rank == 1) {
    std::size_t at = 0, expected = 0;
    for (std::size_t n : sizes) {
      for (std::size_t i = 0; i < n; ++i)
        CHECK_OR_RETURN(mine[at + i] == std::byte(testing_support::pattern(5, i)), 8);
      at += n;
      expected += n;
    }
    for (std::size_t i = 0; i < 12288; ++i) CHECK_OR_RETURN(mine[at + i] == std::byte(testing_support::pattern(5, i)), 9);
    for (std::size_t i = 0; i <= kWhole; ++i)
      CHECK_OR_RETURN(mine[(1u << 20) + i] == std::byte(testing_support::pattern(5, i)), 10);
    expected += kStream * 12288 + kWhole + 1;
    CHECK_OR_RETURN(stored == 4 + kStream + 1 && stored_bytes == expected, 11);
  }
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 12);
  return 0;
}

TEST(AmRanks, StoresOfUpTo16KiBGoWholeInOneMessage) {
  set_reliability(true);
  expect_all_zero(run_ranks(2, whole_stores_body));
}

// Futures share their completions' allocations (blocks of several): each
// still reports its own operation, however many follow it, a failed one
// its own error, and one kept past am::disable can still be read.
int futures_each_their_own_body(int rank) {
  constexpr int kStores = 300;  // several blocks' worth
  int stored = 0, returned = 0;
  am::set_mem_handler(3, [&](int, void*, std::size_t, am::Word) { ++stored; });
  if (rank == 0) am::set_mem_handler(4, [](int, void*, std::size_t, am::Word) {});  // not at rank 1
  am::set_error_handler([&](const am::Returned&) { ++returned; });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  am::Future first, refused, last;
  if (rank == 0) {
    auto* theirs = static_cast<std::byte*>(am::segment(1));
    auto* mine = static_cast<std::byte*>(am::segment(0));
    first = am::store(1, mine, theirs, 8, 3);
    CHECK_OR_RETURN(first.wait() == am::Status::ok, 2);
    refused = am::store(1, mine, theirs, 8, 4);  // no such handler at rank 1: comes back
    CHECK_OR_RETURN(refused.wait() == am::Status::bad_arg && returned == 1, 3);
    for (int i = 1; i < kStores; ++i) last = am::store(1, mine, theirs + 8 * (i % 64), 8, 3);
    CHECK_OR_RETURN(last.wait() == am::Status::ok, 4);
    CHECK_OR_RETURN(first.ready() && first.status() == am::Status::ok, 5);
    CHECK_OR_RETURN(refused.ready() && refused.status() == am::Status::bad_arg, 6);
  }
  CHECK_OR_RETURN(am::barrier() == am::Status::ok, 7);
  CHECK_OR_RETURN(rank == 0 || stored == kStores, 8);
  CHECK_OR_RETURN(am::disable() == am::Status::ok, 9);
  if (rank == 0) CHECK_OR_RETURN(first.ready() && refused.status() == am::Status::bad_arg, 10);
  return 0;
}

TEST(AmRanks, FuturesEachReportTheirOwnOperation) { expect_all_zero(run_ranks(2, futures_each_their_own_body)); }

// ---- bad input: a clear error, and the receiver goes on ----

TEST(AmRanks, BadInputIsAClearErrorAndTheReceiverGoesOn) {
  auto status = run_ranks(2, [](int rank) -> int {
    std::vector<am::Returned> returned;
    am::set_error_handler([&](const am::Returned& r) { returned.push_back(r); });
    int pongs = 0;
    am::set_handler(1, [](am::Token t) { t.reply(2); });
    am::set_handler(2, [&](am::Token) { ++pongs; });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    const int peer = 1 - rank;
    // An unregistered handler comes back to the error handler with the cause.
    CHECK_OR_RETURN(am::request(peer, 200, 5) == am::Status::ok, 2);
    // A payload larger than am_max_size: refused at once.
    std::vector<std::byte> big(am::max_size() + 1);
    CHECK_OR_RETURN(am::request_payload(peer, 1, big) == am::Status::too_large, 3);
    // A store outside the remote segment, and a bad rank or handler index.
    auto* theirs = static_cast<std::byte*>(am::segment(peer));
    CHECK_OR_RETURN(am::store(peer, big.data(), theirs + am::segment_size(peer) - 10, 11).wait() == am::Status::bad_arg, 4);
    // The message names the range in hex, as a debugger shows addresses.
    char range[40];
    std::snprintf(range, sizeof range, "[0x%jx, +11)", std::uintmax_t(std::uintptr_t(theirs + am::segment_size(peer) - 10)));
    CHECK_OR_RETURN(std::string(am::last_error()).find(range) != std::string::npos, 13);
    CHECK_OR_RETURN(am::store(peer, big.data(), big.data(), 8).wait() == am::Status::bad_arg, 5);
    CHECK_OR_RETURN(am::get(peer, theirs - 1, big.data(), 8).wait() == am::Status::bad_arg, 6);
    CHECK_OR_RETURN(am::request(7, 1) == am::Status::bad_arg, 7);
    CHECK_OR_RETURN(am::request(peer, 256) == am::Status::bad_arg, 8);
    CHECK_OR_RETURN(am_request_medium(peer, 1, nullptr, 0, 5, nullptr) == AM_ERR_BAD_ARG, 9);
    // The peer still works.
    CHECK_OR_RETURN(am::request(peer, 1) == am::Status::ok, 10);
    while (pongs < 1 || returned.empty()) am::poll();
    CHECK_OR_RETURN(returned.size() == 1 && returned[0].cause == AM_E_BADHANDLER && returned[0].dest == peer &&
                        returned[0].handler == 200 && returned[0].nargs == 1 && returned[0].args[0] == 5,
                    11);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 12);
    return 0;
  });
  expect_all_zero(status);
}

// Deferred requests share one answer: those naming no handler come back to
// the error handler one by one, with their own handler and arguments, and
// a reply that no longer fits the bundle's answer is refused at once.
TEST(AmRanks, BundledRequestsAreRefusedOneByOne) {
  auto status = run_ranks(2, [](int rank) -> int {
    std::vector<am::Returned> returned;
    am::set_error_handler([&](const am::Returned& r) { returned.push_back(r); });
    std::vector<am::Status> reply_status;
    long replies = 0;
    const std::vector<std::byte> kilobytes(1500, std::byte{7});
    am::set_handler(1, [&](am::Token t, long i) { reply_status.push_back(t.reply_payload(2, kilobytes, i)); });
    am::set_handler(2, [&](am::Token, std::span<std::byte> payload, long i) {
      if (payload.size() == kilobytes.size() && i == replies) ++replies;
    });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    const int peer = 1 - rank;
    CHECK_OR_RETURN(am::request_deferred(peer, 1, 0L) == am::Status::ok, 2);
    CHECK_OR_RETURN(am::request_deferred(peer, 200, 7L, 70L) == am::Status::ok, 3);
    CHECK_OR_RETURN(am::request_deferred(peer, 1, 1L) == am::Status::ok, 4);
    CHECK_OR_RETURN(am::request_deferred(peer, 201, 8L) == am::Status::ok, 5);
    CHECK_OR_RETURN(am::request_deferred(peer, 1, 2L) == am::Status::ok, 6);
    am::flush();
    CHECK_OR_RETURN(am::wait_acknowledged() == am::Status::ok, 7);
    CHECK_OR_RETURN(am::wait_until([&] { return reply_status.size() == 3; }) == am::Status::ok, 8);
    CHECK_OR_RETURN(am::counters().bundles_sent == 1, 9);
    // Two replies of 1.5 KB fit one message; the third does not.
    CHECK_OR_RETURN(reply_status[0] == am::Status::ok && reply_status[1] == am::Status::ok &&
                        reply_status[2] == am::Status::too_large && replies == 2,
                    10);
    CHECK_OR_RETURN(returned.size() == 2, 11);
    CHECK_OR_RETURN(returned[0].cause == AM_E_BADHANDLER && returned[0].op == AM_OP_REQUEST &&
                        returned[0].dest == peer && returned[0].handler == 200 && returned[0].nargs == 2 &&
                        returned[0].args[0] == 7 && returned[0].args[1] == 70,
                    12);
    CHECK_OR_RETURN(returned[1].handler == 201 && returned[1].nargs == 1 && returned[1].args[0] == 8, 13);
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 14);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 15);
    return 0;
  });
  expect_all_zero(status);
}

// Requests for one handler in a row share a bundle item (a run); each
// refused one still comes back on its own, with its own arguments, and the
// answers of the others reach their handlers in order.
TEST(AmRanks, RefusedRequestsInRunsComeBackOneByOne) {
  auto status = run_ranks(2, [](int rank) -> int {
    std::vector<am::Returned> returned;
    am::set_error_handler([&](const am::Returned& r) { returned.push_back(r); });
    std::vector<long> got;
    am::set_handler(1, [&](am::Token t, long i) { t.reply(2, i); });
    am::set_handler(2, [&](am::Token, long i) { got.push_back(i); });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    const int peer = 1 - rank;
    const auto before = am::counters().requests_sent;
    for (long i = 0; i < 3; ++i) CHECK_OR_RETURN(am::request_deferred(peer, 1, i) == am::Status::ok, 2);
    for (long i = 0; i < 3; ++i) CHECK_OR_RETURN(am::request_deferred(peer, 200, 10 + i) == am::Status::ok, 3);
    for (long i = 3; i < 5; ++i) CHECK_OR_RETURN(am::request_deferred(peer, 1, i) == am::Status::ok, 4);
    CHECK_OR_RETURN(am::request_deferred(peer, 201, 20L, 21L) == am::Status::ok, 5);
    am::flush();
    CHECK_OR_RETURN(am::wait_acknowledged() == am::Status::ok, 6);
    CHECK_OR_RETURN(am::counters().bundles_sent == 1 && am::counters().requests_sent - before == 9, 7);
    CHECK_OR_RETURN(got == (std::vector<long>{0, 1, 2, 3, 4}), 8);
    CHECK_OR_RETURN(returned.size() == 4, 9);
    for (int k = 0; k < 3; ++k)
      CHECK_OR_RETURN(
          returned[k].handler == 200 && returned[k].nargs == 1 && returned[k].args[0] == am::Word(10 + k), 10 + k);
    CHECK_OR_RETURN(returned[3].handler == 201 && returned[3].nargs == 2 && returned[3].args[0] == 20 &&
                        returned[3].args[1] == 21, 13);
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 14);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 15);
    return 0;
  });
  expect_all_zero(status);
}

// However many deferred requests a bundle holds, a reply of 4 words to
// each fits the bundle's answer (Split-C's gets are answered so).
TEST(AmRanks, WordRepliesToEveryBundledRequestFit) {
  auto status = run_ranks(2, [](int rank) -> int {
    constexpr long kRequests = 1000;
    long replies = 0, bad = 0;
    am::set_handler(1, [&](am::Token t, long i) {
      if (t.reply(2, i, i + 1, i + 2, i + 3) != am::Status::ok) ++bad;
    });
    am::set_handler(2, [&](am::Token, long i, long j, long k, long l) {
      if (i == replies && j == i + 1 && k == i + 2 && l == i + 3)
        ++replies;
      else
        ++bad;
    });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    for (long i = 0; i < kRequests; ++i) CHECK_OR_RETURN(am::request_deferred(1 - rank, 1, i) == am::Status::ok, 2);
    const auto start = Clock::now();
    CHECK_OR_RETURN(am::wait_until([&] {
      return replies + bad == kRequests || Clock::now() - start > std::chrono::seconds(20);
    }) == am::Status::ok, 3);
    CHECK_OR_RETURN(replies == kRequests && bad == 0, 4);
    CHECK_OR_RETURN(am::counters().bundles_sent < kRequests / 8, 5);
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 6);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 7);
    return 0;
  });
  expect_all_zero(status);
}

// Rank 0 sends its first requests while the others may still be inside
// am::enable, waiting for the rest of the hellos; their handler answers with
// deferred requests. Those must go into bundles and arrive, not loop (the
// bundles' free room was once published only when enable returned, and
// each such request opened and sent empty bundles until credits ran out).
TEST(AmRanks, DeferredRequestsFromAHandlerRunWhileEnabling) {
  auto status = run_ranks(4, [](int rank) -> int {
    constexpr long kRounds = 50;
    long answers = 0, refused = 0;
    am::set_handler(1, [&](am::Token t, long i) {
      if (am::request_deferred(t.src(), 2, i) != am::Status::ok) ++refused;
    });
    am::set_handler(2, [&](am::Token, long) { ++answers; });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    if (rank == 0) {
      for (long i = 0; i < kRounds; ++i)
        for (int r = 1; r < am::procs(); ++r) CHECK_OR_RETURN(am::request(r, 1, i) == am::Status::ok, 2);
      const long expected = kRounds * (am::procs() - 1);
      const auto start = Clock::now();
      CHECK_OR_RETURN(am::wait_until([&] {
        return answers == expected || Clock::now() - start > std::chrono::seconds(20);
      }) == am::Status::ok, 3);
      CHECK_OR_RETURN(answers == expected, 4);
    }
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 5);
    CHECK_OR_RETURN(refused == 0, 6);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 7);
    return 0;
  }, 40);
  expect_all_zero(status);
}

// Connections are made on first use: enabling connects nobody, and ranks that
// talk to their neighbours on a ring have VIs to those two only (AM used to
// connect every pair and say hello to each at am::enable).
TEST(AmRanks, RanksTalkingToNeighboursConnectOnlyToThem) {
  auto status = run_ranks(6, [](int rank) -> int {
    long from_left = 0, replies = 0;
    am::set_handler(1, [&](am::Token t) {
      ++from_left;
      t.reply(2);
    });
    am::set_handler(2, [&](am::Token) { ++replies; });
    CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
    CHECK_OR_RETURN(am::peers_in_use() == 0, 2);
    const int procs = am::procs();
    CHECK_OR_RETURN(am::segment((rank + 1) % procs) != nullptr, 3);  // learnt without a connection
    CHECK_OR_RETURN(am::peers_in_use() == 0, 4);
    for (int i = 0; i < 10; ++i) CHECK_OR_RETURN(am::request((rank + 1) % procs, 1) == am::Status::ok, 5);
    CHECK_OR_RETURN(am::wait_until([&] { return from_left == 10 && replies == 10; }) == am::Status::ok, 6);
    // Rank 0, the barrier's root, may hear already from ranks that are done.
    CHECK_OR_RETURN(rank == 0 ? am::peers_in_use() >= 2 : am::peers_in_use() == 2, 7);
    CHECK_OR_RETURN(am::barrier() == am::Status::ok, 8);
    CHECK_OR_RETURN(am::disable() == am::Status::ok, 9);
    return 0;
  });
  expect_all_zero(status);
}

// ---- a peer killed mid-run ----

// deferred: every other request waits in a bundle.
int killed_peer_body(int rank, bool deferred) {
  constexpr int kVictim = 3;
  Clock::time_point last_answer = Clock::now(), reported{};
  int cause = 0;
  // With deferred requests: one more to the dead peer from the error
  // handler is refused, and counts as sent neither itself nor the bundle
  // it finds open (whose requests come back unsent).
  bool in_handler = false;
  am::Status from_handler = am::Status::ok;
  std::uint64_t counted_from_handler = 0;
  am::set_error_handler([&](const am::Returned& r) {
    if (r.dest == kVictim && reported == Clock::time_point{}) {
      reported = Clock::now();
      cause = r.cause;
      if (deferred && !in_handler) {
        in_handler = true;
        const std::uint64_t before = am::counters().requests_sent;
        from_handler = am::request_deferred(kVictim, 1);
        counted_from_handler = am::counters().requests_sent - before;
      }
    }
  });
  long handled = 0;
  am::set_handler(1, [&](am::Token) { ++handled; });
  am::set_handler(2, [&](am::Token t) { t.reply(3); });
  am::set_handler(3, [&](am::Token t) {
    if (t.src() == kVictim) last_answer = Clock::now();
  });
  CHECK_OR_RETURN(am::enable() == am::Status::ok, 1);
  const int procs = am::procs();
  // The death shows as messages returned to the error handler if some were
  // in flight, and in any case as requests refused with `unreachable`.
  bool refused = false;
  for (long i = 0;; ++i) {
    if (rank == kVictim && handled > 3000) raise(SIGKILL);
    for (int k = 1; k < procs; ++k) {
      const int dest = (rank + k) % procs;
      am::Status s = deferred && i % 2 ? am::request_deferred(dest, 1) : am::request(dest, i % 2 ? 1 : 2);
      if (dest == kVictim && s != am::Status::ok) {
        CHECK_OR_RETURN(s == am::Status::unreachable, 2);
        if (!refused && reported == Clock::time_point{}) reported = Clock::now();
        refused = true;
      }
    }
    if (reported != Clock::time_point{}) break;
    CHECK_OR_RETURN(Clock::now() - last_answer < std::chrono::seconds(20), 3);  // no hang
  }
  // The error came within the peer timeout (set to 2 s) of the victim's last answer.
  CHECK_OR_RETURN(reported - last_answer < std::chrono::seconds(4), 4);
  CHECK_OR_RETURN(refused || cause == AM_E_UNREACHABLE || cause == AM_E_TIMEOUT, 5);
  if (deferred && in_handler) {
    CHECK_OR_RETURN(from_handler == am::Status::unreachable, 6);
    CHECK_OR_RETURN(counted_from_handler == 0, 7);
  }
  am::disable();  // the barrier fails (a rank is gone); it must still return
  return 0;
}

void killed_peer(bool reliable, bool deferred = false) {
  set_reliability(reliable);
  setenv("VIASTACK_AM_TIMEOUT_MS", "2000", 1);
  auto status = run_ranks(4, [deferred](int rank) { return killed_peer_body(rank, deferred); });
  unsetenv("VIASTACK_AM_TIMEOUT_MS");
  set_reliability(true);
  EXPECT_EQ(status[3], 128 + SIGKILL);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

TEST(AmRanks, PeerKilledMidRunReliable) { killed_peer(true); }
TEST(AmRanks, PeerKilledMidRunUnreliable) { killed_peer(false); }
TEST(AmRanks, PeerKilledMidRunWithDeferredRequests) { killed_peer(true, true); }

}  // namespace
