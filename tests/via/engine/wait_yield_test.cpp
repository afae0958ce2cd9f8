// A wait that may not spin (VIASTACK_SPIN_US=0, as when a node holds more
// ranks than the job's CPUs there) gives the core away from its first empty
// look: its peer may be waiting for that core. A process of its own, since
// the engine reads the setting once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "support/endpoint.hpp"
#include "via/via.hpp"

namespace {

TEST(WaitWithoutSpinning, YieldsFromItsFirstEmptyLook) {
  testing_support::use_unique_job("waityield");
  std::unique_ptr<via::Nic> nic;
  ASSERT_EQ(via::Nic::open("shm:0", nic), via::Result::success);
  int asked = 0;
  ASSERT_EQ(nic->wait([&] { return ++asked == 4; }, 5000), via::Result::success);
  // Asked on entry, after the first poll, after the first step of the loop,
  // and then after one yield: not only every 16th of the 254 polls before.
  EXPECT_EQ(nic->counters().yields, 1u);
}

TEST(WaitWithoutSpinning, KeepsYieldingWhileNothingComes) {
  testing_support::use_unique_job("waityield");
  std::unique_ptr<via::Nic> nic;
  ASSERT_EQ(via::Nic::open("shm:0", nic), via::Result::success);
  int asked = 0;
  ASSERT_EQ(nic->wait([&] { return ++asked == 50; }, 5000), via::Result::success);
  EXPECT_EQ(nic->counters().yields, 47u);  // one before each look after the first three
}

}  // namespace

int main(int argc, char** argv) {
  setenv("VIASTACK_SPIN_US", "0", 1);
  setenv("VIASTACK_YIELD_US", "10000000", 1);  // never reach the sleep within these tests
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
