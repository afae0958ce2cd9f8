// How long a wait yields before it sleeps (engine/yield_phase.hpp): fixed,
// or, where ranks outnumber cores, grown to cover the process's recent waits.
#include "engine/yield_phase.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

constexpr std::uint64_t kUs = 1000;

TEST(YieldPhase, AFixedPhaseIgnoresTheWaits) {
  via::YieldPhase phase(1000 * kUs, 1000 * kUs);
  EXPECT_EQ(phase.length(), 1000 * kUs);
  phase.waited(5 * kUs);
  EXPECT_EQ(phase.length(), 1000 * kUs);
  phase.waited(50'000 * kUs);
  EXPECT_EQ(phase.length(), 1000 * kUs);
}

TEST(YieldPhase, StartsShortest) {
  const via::YieldPhase phase(100 * kUs, 1000 * kUs);
  EXPECT_EQ(phase.length(), 100 * kUs);
}

TEST(YieldPhase, ShortWaitsKeepItShortest) {
  via::YieldPhase phase(100 * kUs, 1000 * kUs);
  for (int i = 0; i < 20; ++i) phase.waited(30 * kUs);
  EXPECT_EQ(phase.length(), 100 * kUs);
}

TEST(YieldPhase, CoversTwiceTheLongestRecentWait) {
  via::YieldPhase phase(100 * kUs, 1000 * kUs);
  phase.waited(300 * kUs);
  phase.waited(120 * kUs);
  EXPECT_EQ(phase.length(), 600 * kUs);
}

TEST(YieldPhase, GrowsNoFurtherThanTheLongest) {
  via::YieldPhase phase(100 * kUs, 1000 * kUs);
  phase.waited(800 * kUs);
  EXPECT_EQ(phase.length(), 1000 * kUs);
  phase.waited(1000 * kUs);
  EXPECT_EQ(phase.length(), 1000 * kUs);
}

// A wait longer than the longest phase would have slept anyway: yielding
// before it only takes the core from the ranks with work.
TEST(YieldPhase, OneWaitBeyondTheLongestMakesItShortestUntilForgotten) {
  via::YieldPhase phase(100 * kUs, 1000 * kUs);
  for (int i = 0; i < 4; ++i) phase.waited(400 * kUs);
  phase.waited(1001 * kUs);
  EXPECT_EQ(phase.length(), 100 * kUs);
  for (std::size_t i = 0; i + 1 < via::YieldPhase::kRemembered; ++i) {
    phase.waited(400 * kUs);
    EXPECT_EQ(phase.length(), 100 * kUs) << "after " << i + 1 << " waits";
  }
  phase.waited(400 * kUs);
  EXPECT_EQ(phase.length(), 800 * kUs);
}

TEST(YieldPhase, ALongestBelowTheShortestIsTheShortest) {
  via::YieldPhase phase(100 * kUs, 50 * kUs);
  phase.waited(40 * kUs);
  EXPECT_EQ(phase.length(), 100 * kUs);
}

}  // namespace
