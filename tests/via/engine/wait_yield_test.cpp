// A wait that may not spin (VIASTACK_SPIN_US=0, as when a node holds more
// ranks than the job's CPUs there) gives the core away from its first empty
// look: its peer may be waiting for that core. A process of its own, since
// the engine reads the setting once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "support/endpoint.hpp"
#include "via/via.hpp"

namespace {

class WaitWithoutSpinning : public ::testing::Test {
 protected:
  void SetUp() override {
    testing_support::use_unique_job("waityield");
    ASSERT_EQ(via::Nic::open("shm:0", nic), via::Result::success);
  }
  // Waits until the condition has been asked `looks` times; the yields it
  // took. The wait also looks at its peers every 10 ms (and at the condition
  // then): on a loaded machine, where a yield may give the core away for
  // milliseconds, those looks stand in for yields, one per 10 ms the wait took.
  struct Yields {
    std::uint64_t taken, peer_looks_at_most;
  };
  Yields yields_until_asked(int looks) {
    int asked = 0;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(nic->wait([&] { return ++asked == looks; }, 5000), via::Result::success);
    const auto took = std::chrono::steady_clock::now() - start;
    return {nic->counters().yields, std::uint64_t(took / std::chrono::milliseconds(10))};
  }
  void expect_yields(int looks, std::uint64_t yields) {
    const Yields y = yields_until_asked(looks);
    EXPECT_LE(y.taken, yields);
    EXPECT_GE(y.taken + y.peer_looks_at_most, yields) << y.taken << " yields";
  }
  std::unique_ptr<via::Nic> nic;
};

// Asked on entry, after the first poll, after the first step of the loop,
// and then after one yield: not only every 16th of the 254 polls before.
TEST_F(WaitWithoutSpinning, YieldsFromItsFirstEmptyLook) { expect_yields(4, 1); }

// One yield before each look after the first three.
TEST_F(WaitWithoutSpinning, KeepsYieldingWhileNothingComes) { expect_yields(50, 47); }

}  // namespace

int main(int argc, char** argv) {
  setenv("VIASTACK_SPIN_US", "0", 1);
  setenv("VIASTACK_YIELD_US", "10000000", 1);  // never reach the sleep within these tests
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
