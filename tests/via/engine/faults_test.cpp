// VIASTACK_FAULTS: parsing, and what unreliable and reliable VIs see under it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "engine/faults.hpp"
#include "providers/provider.hpp"
#include "support/endpoint.hpp"
#include "support/job_directory.hpp"

using namespace testing_support;

namespace {

TEST(FaultPlan, ParsesEveryKnobInAnyOrder) {
  via::FaultPlan plan;
  std::string error;
  ASSERT_TRUE(via::parse_fault_plan("seed=42,reorder=0.25,drop=0.01,dup=0.5,delay_us=50", plan, error)) << error;
  EXPECT_DOUBLE_EQ(plan.drop, 0.01);
  EXPECT_DOUBLE_EQ(plan.dup, 0.5);
  EXPECT_DOUBLE_EQ(plan.reorder, 0.25);
  EXPECT_EQ(plan.delay_us, 50u);
  EXPECT_EQ(plan.seed, 42u);
  EXPECT_TRUE(plan.any());
  ASSERT_TRUE(via::parse_fault_plan("seed=3", plan, error));
  EXPECT_FALSE(plan.any());
}

TEST(FaultPlan, RejectsWhatItDoesNotKnow) {
  via::FaultPlan plan;
  std::string error;
  for (const char* bad : {"drop=2", "drop=-0.1", "drop=", "drop", "loss=0.1", "delay_us=1.5", "seed=x", "dup=0.1,,"}) {
    EXPECT_FALSE(via::parse_fault_plan(bad, plan, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

// Message i: its id in the first 4 bytes, then a pattern seeded by the id;
// every seventh one is large enough to travel as two frames.
std::size_t size_of(std::uint32_t id) { return id % 7 == 0 ? 100000 : 8 + id % 200; }

// A link that records what it is given and refuses frames when told to.
class RecordingLink final : public via::Link {
 public:
  std::function<bool()> has_room = [] { return true; };
  std::vector<std::uint32_t> ids;  // the `imm` of each frame, in the order sent
  const char* transport() const override { return "recording"; }
  std::size_t max_payload() const override { return 1024; }
  bool try_send(const via::FrameHeader& h, const iovec*, std::size_t) override {
    if (!has_room()) return false;
    ids.push_back(h.imm);
    return true;
  }
  bool peek(const via::FrameHeader*&, const std::byte*&) override { return false; }
  void pop() override {}
  PeerState peer_state() override { return PeerState::up; }
  void close(bool) override {}
};

// Offers `count` frames 1 µs apart (virtual time), retrying refused ones, then
// lets 30 ms pass; returns the frames in the order the link took them.
std::vector<std::uint32_t> inject(const char* plan_text, std::uint32_t count, std::function<bool()> room) {
  via::FaultPlan plan;
  std::string error;
  EXPECT_TRUE(via::parse_fault_plan(plan_text, plan, error)) << error;
  via::NicCounters counters;
  via::FaultInjector injector(plan, 42, counters);
  RecordingLink link;
  link.has_room = std::move(room);
  std::uint64_t now = 0;
  for (std::uint32_t id = 0; id < count; ++id) {
    via::FrameHeader h{via::kFrameSend, via::kFlagLast, 0, 0, 0, 0, 0, 0, id};
    while (!injector.send(link, h, nullptr, 0, now)) now += 1000;
    now += 1000;
  }
  for (int i = 0; i < 30 && injector.holding(); ++i) injector.flush(link, now += 1'000'000);
  EXPECT_FALSE(injector.holding());
  return link.ids;
}

TEST(FaultInjector, ASeedGivesTheSameFramesInTheSameOrderHoweverTheLinkDrains) {
  const char* plan = "drop=0.1,dup=0.05,reorder=0.1,seed=3";
  const auto always = inject(plan, 2000, [] { return true; });
  int call = 0;
  const auto every_third_refused = inject(plan, 2000, [&] { return ++call % 3 != 0; });
  EXPECT_EQ(always, every_third_refused);
  EXPECT_NE(always, inject("drop=0.1,dup=0.05,reorder=0.1,seed=4", 2000, [] { return true; }));
  // Something of each kind happened.
  std::map<std::uint32_t, int> times;
  bool reordered = false;
  for (std::size_t i = 0; i < always.size(); ++i) {
    ++times[always[i]];
    if (i > 0 && always[i] < always[i - 1]) reordered = true;
  }
  EXPECT_LT(times.size(), 2000u);
  EXPECT_TRUE(reordered);
  EXPECT_TRUE(std::any_of(times.begin(), times.end(), [](const auto& t) { return t.second == 2; }));
}

TEST(FaultInjector, AReorderedLastFrameGoesOutWithinTheLimit) {
  via::FaultPlan plan;
  std::string error;
  ASSERT_TRUE(via::parse_fault_plan("reorder=1,seed=1", plan, error)) << error;
  via::NicCounters counters;
  via::FaultInjector injector(plan, 1, counters);
  RecordingLink link;
  via::FrameHeader h{via::kFrameSend, via::kFlagLast, 0, 0, 0, 0, 0, 0, 7};
  ASSERT_TRUE(injector.send(link, h, nullptr, 0, 0));
  injector.flush(link, 19'000'000);
  EXPECT_TRUE(link.ids.empty());
  injector.flush(link, 20'000'000);
  EXPECT_EQ(link.ids, std::vector<std::uint32_t>{7});
}

struct Received {
  std::vector<std::uint32_t> ids;  // in arrival order
  int corrupt = 0;
};

// The injector sits in the engine, above the providers: every provider gets the same faults.
class Faults : public ::testing::TestWithParam<const char*> {
 protected:
  void TearDown() override { unsetenv("VIASTACK_FAULTS"); }
  std::string nic(int n) const { return std::string(GetParam()) + ":" + std::to_string(n); }

  // Opens two NICs in a fresh job under `faults`, sends `count` messages over
  // a VI of `level`, and returns what arrived.
  Received run(const char* faults, VIP_RELIABILITY_LEVEL level, std::uint32_t count, via::NicCounters* sender = nullptr) {
    use_unique_job("faultstest");
    setenv("VIASTACK_FAULTS", faults, 1);
    if (std::string(GetParam()) == "tcp") use_job_directory();
    Endpoint a, b;
    a.open(nic(0), 1 << 20);
    b.open(nic(1), 64 * kSlot);
    via::Vi* va = a.create_vi(level);
    via::Vi* vb = b.create_vi(level);
    EXPECT_EQ(connect_peers(a, "rank0", va, b, "rank1", vb, "f"), std::make_pair(via::Result::success, via::Result::success));
    for (int i = 0; i < 64; ++i) expect_ok(vb->post_recv(b.message(std::size_t(i) * kSlot, kSlot), b.arena.handle), "recv");

    Received got;
    auto drain = [&] {
      VIP_DESCRIPTOR* d;
      while (vb->recv_done(d) == via::Result::success) {
        auto* data = static_cast<std::byte*>(d->DS[0].Local.Data.Address);
        std::uint32_t id;
        std::memcpy(&id, data, 4);
        bool intact = (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.Length == size_of(id);
        for (std::size_t i = 4; intact && i < d->CS.Length; ++i) intact = data[i] == std::byte(pattern(id, i));
        if (intact)
          got.ids.push_back(id);
        else
          ++got.corrupt;
        expect_ok(vb->post_recv(d, b.arena.handle), "repost");
      }
      while (va->send_done(d) == via::Result::success) a.release(d);
    };
    for (std::uint32_t id = 0; id < count; ++id) {
      const std::size_t off = std::size_t(id % 4) * kSlot;
      std::memcpy(a.arena.data(off), &id, 4);
      for (std::size_t i = 4; i < size_of(id); ++i) a.arena.data(off)[i] = std::byte(pattern(id, i));
      expect_ok(va->post_send(a.message(off, size_of(id)), a.arena.handle), "send");
      // A few polls per message keep the receiver's queue from running dry.
      for (int i = 0; i < 20; ++i) {
        a.nic->progress();
        b.nic->progress();
      }
      drain();
    }
    // Held-back frames go out within 20 ms.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
    while (std::chrono::steady_clock::now() < until) {
      a.nic->progress();
      b.nic->progress();
      drain();
    }
    EXPECT_EQ(vb->state(), via::ViState::connected);
    EXPECT_EQ(b.nic->counters().dropped_no_receive, 0u);
    if (sender) *sender = a.nic->counters();
    return got;
  }

  static constexpr std::size_t kSlot = 128 * 1024;
};

TEST_P(Faults, UnreliableViSeesLossDuplicationAndReorderingButNeverCorruption) {
  via::NicCounters counters;
  const std::uint32_t n = 3000;
  Received got = run("drop=0.1,dup=0.05,reorder=0.1,seed=7", VIP_SERVICE_UNRELIABLE, n, &counters);
  EXPECT_EQ(got.corrupt, 0);
  std::map<std::uint32_t, int> times;
  bool reordered = false;
  std::uint32_t highest = 0;
  for (std::uint32_t id : got.ids) {
    ++times[id];
    if (id < highest) reordered = true;
    highest = std::max(highest, id);
  }
  int duplicated = 0;
  for (auto& [id, k] : times) duplicated += k > 1;
  EXPECT_GT(times.size(), n * 70 / 100);
  EXPECT_LT(times.size(), n * 95 / 100);
  EXPECT_GT(duplicated, 0);
  EXPECT_TRUE(reordered);
  EXPECT_GT(counters.faults_dropped, 0u);
  EXPECT_GT(counters.faults_duplicated, 0u);
  EXPECT_GT(counters.faults_reordered, 0u);
}

// Across real NICs the same seed loses and duplicates the same frames (the
// order they arrive in is checked on virtual time above: a sender descheduled
// for longer than the reorder limit may release a held frame early).
TEST_P(Faults, TheSameSeedGivesTheSameFaults) {
  auto arrivals = [](const Received& r) {
    std::map<std::uint32_t, int> times;
    for (std::uint32_t id : r.ids) ++times[id];
    return times;
  };
  Received first = run("drop=0.1,dup=0.05,reorder=0.1,seed=11", VIP_SERVICE_UNRELIABLE, 1000);
  Received second = run("drop=0.1,dup=0.05,reorder=0.1,seed=11", VIP_SERVICE_UNRELIABLE, 1000);
  Received other = run("drop=0.1,dup=0.05,reorder=0.1,seed=12", VIP_SERVICE_UNRELIABLE, 1000);
  EXPECT_EQ(arrivals(first), arrivals(second));
  EXPECT_NE(arrivals(first), arrivals(other));
}

TEST_P(Faults, DelayedFramesArriveLateButInOrder) {
  Received got = run("delay_us=200,seed=1", VIP_SERVICE_UNRELIABLE, 200);
  ASSERT_EQ(got.ids.size(), 200u);
  for (std::uint32_t i = 0; i < 200; ++i) EXPECT_EQ(got.ids[i], i);
}

TEST_P(Faults, ReliableVisAreNotTouched) {
  via::NicCounters counters;
  Received got = run("drop=0.3,dup=0.3,reorder=0.3,seed=5", VIP_SERVICE_RELIABLE_DELIVERY, 1000, &counters);
  EXPECT_EQ(got.corrupt, 0);
  ASSERT_EQ(got.ids.size(), 1000u);
  for (std::uint32_t i = 0; i < 1000; ++i) EXPECT_EQ(got.ids[i], i);
  EXPECT_EQ(counters.faults_dropped + counters.faults_duplicated + counters.faults_reordered, 0u);
}

TEST_P(Faults, ABadPlanStopsTheProgramAtOpeningTheNic) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto open_with_a_bad_plan = [this] {
    setenv("VIASTACK_JOB", "faultstest-bad", 1);
    setenv("VIASTACK_FAULTS", "drop=lots", 1);
    std::unique_ptr<via::Nic> nic;
    via::Nic::open(this->nic(0), nic);
  };
  EXPECT_EXIT(open_with_a_bad_plan(), ::testing::ExitedWithCode(1),
              "^viastack\\[via (pid|rank) [0-9]+\\] error: VIASTACK_FAULTS=drop=lots: expected ");
}

INSTANTIATE_TEST_SUITE_P(Providers, Faults, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
