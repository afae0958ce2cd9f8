// The choice between the rings and single copy for large RDMA reads
// (engine/read_path.hpp), driven by the read times it is given.

#include "engine/read_path.hpp"

#include <gtest/gtest.h>

namespace {

using via::ReadPath;
using via::ReadPathChooser;

constexpr std::uint64_t kMin = 64 * 1024, kMax = 16u << 20;

// `reads` reads of `bytes`, each going the way the chooser says and taking
// the time that way costs now; returns how many went single copy.
std::uint32_t run(ReadPathChooser& chooser, std::uint64_t bytes, std::uint32_t reads, std::uint64_t rings_ns,
                  std::uint64_t direct_ns) {
  std::uint32_t direct = 0;
  for (std::uint32_t i = 0; i < reads; ++i) {
    const ReadPath path = chooser.choose(bytes);
    direct += path == ReadPath::direct;
    chooser.record(path, bytes, path == ReadPath::direct ? direct_ns : rings_ns);
  }
  return direct;
}

TEST(ReadPathChooser, ChoosesOnlyBetweenItsSizes) {
  ReadPathChooser chooser(kMin + 1000, kMax);  // the smallest rounds down to a power of two
  EXPECT_FALSE(chooser.chooses(kMin - 1));
  EXPECT_TRUE(chooser.chooses(kMin));
  EXPECT_TRUE(chooser.chooses(kMax - 1));
  EXPECT_FALSE(chooser.chooses(kMax));
  ReadPathChooser never(kMax, kMax);
  EXPECT_FALSE(never.chooses(kMin));
  EXPECT_FALSE(never.chooses(kMax));
}

TEST(ReadPathChooser, TriesEachWayThenKeepsTheFasterOneAndProbesTheOther) {
  ReadPathChooser chooser(kMin, kMax);
  EXPECT_EQ(chooser.choose(kMin), ReadPath::rings);
  chooser.record(ReadPath::rings, kMin, 20'000);
  EXPECT_EQ(chooser.choose(kMin), ReadPath::direct);
  chooser.record(ReadPath::direct, kMin, 10'000);
  EXPECT_EQ(chooser.cost(ReadPath::rings, kMin), 20'000'000 / kMin);
  // Single copy is twice as fast: it takes all but kProbeBurst reads in kProbeEvery.
  EXPECT_EQ(run(chooser, kMin, 32 * ReadPathChooser::kProbeEvery, 20'000, 10'000),
            32 * (ReadPathChooser::kProbeEvery - ReadPathChooser::kProbeBurst));
}

// The reads a run of `reads` spends on the way that measured slower.
constexpr std::uint32_t probes(std::uint32_t reads) {
  return (reads / ReadPathChooser::kProbeEvery + 1) * ReadPathChooser::kProbeBurst;
}

TEST(ReadPathChooser, FollowsTheMachineWhenItsStateChanges) {
  ReadPathChooser chooser(kMin, kMax);
  const std::uint64_t bytes = 256 * 1024;
  // Rings 16 us, single copy 22 (a fast state): the rings.
  EXPECT_LE(run(chooser, bytes, 640, 16'000, 22'000), probes(640));
  // Now the rings take 55: within a few reads, single copy.
  run(chooser, bytes, 16, 55'000, 22'000);
  EXPECT_GE(run(chooser, bytes, 640, 55'000, 22'000), 640 - probes(640));
  // And back, once the probes of the rings have seen it (a burst is enough
  // here, half the window; two bursts' worth of reads run).
  run(chooser, bytes, 2 * ReadPathChooser::kProbeEvery, 16'000, 22'000);
  EXPECT_LE(run(chooser, bytes, 640, 16'000, 22'000), probes(640));
}

TEST(ReadPathChooser, OneReadHeldUpDoesNotTurnTheChoice) {
  ReadPathChooser chooser(kMin, kMax);
  const std::uint64_t bytes = 1u << 20;
  run(chooser, bytes, 64, 60'000, 70'000);
  // Every seventh read through the rings held up 5 ms (the scheduler): still the rings.
  std::uint32_t direct = 0;
  for (std::uint32_t i = 0; i < 700; ++i) {
    const ReadPath path = chooser.choose(bytes);
    direct += path == ReadPath::direct;
    chooser.record(path, bytes, path == ReadPath::direct ? 70'000 : i % 7 == 0 ? 5'000'000 : 60'000);
  }
  EXPECT_LE(direct, probes(700));
}

TEST(ReadPathChooser, EachSizeIsChosenForOnItsOwn) {
  ReadPathChooser chooser(kMin, kMax);
  // 40 reads of each size: clear of their first burst of probes (from the 60th).
  run(chooser, kMin, 40, 10'000, 20'000);            // 64 KiB: the rings faster
  run(chooser, 4u << 20, 40, 900'000, 400'000);      // 4 MiB: single copy faster
  EXPECT_EQ(chooser.choose(kMin + 100), ReadPath::rings);
  EXPECT_EQ(chooser.choose((4u << 20) + 100), ReadPath::direct);
  EXPECT_EQ(chooser.cost(ReadPath::direct, 1u << 20), 0u) << "no read of 1 MiB yet";
  EXPECT_EQ(chooser.choose(1u << 20), ReadPath::rings);
}

}  // namespace

// `reads` reads of `bytes` as run() does, each through the rings ending
// with `served` bytes served meanwhile.
std::uint32_t run_serving(ReadPathChooser& chooser, std::uint64_t bytes, std::uint32_t reads,
                          std::uint64_t rings_ns, std::uint64_t direct_ns, std::uint64_t served) {
  std::uint32_t direct = 0;
  for (std::uint32_t i = 0; i < reads; ++i) {
    const ReadPath path = chooser.choose(bytes);
    direct += path == ReadPath::direct;
    chooser.record(path, bytes, path == ReadPath::direct ? direct_ns : rings_ns);
    if (path == ReadPath::rings) chooser.ring_read_ended(bytes, served);
  }
  return direct;
}

// Bidirectional 1 MiB: a read through the rings takes 110 us, one by single
// copy 170, but this end serves as much as it reads: single copy.
TEST(ReadPathChooser, LargeReadsBothWaysGoBySingleCopy) {
  ReadPathChooser chooser(kMin, kMax);
  const std::uint64_t bytes = 1u << 20;
  EXPECT_GE(run_serving(chooser, bytes, 640, 110'000, 170'000, bytes), 640 - probes(640));
  // The stream turns one way (the probes through the rings serve nothing): the times decide again.
  EXPECT_LE(run_serving(chooser, bytes, 640, 110'000, 170'000, 0), probes(640) + 1);
  // Serving a quarter as much (another peer's smaller reads) is not both ways.
  EXPECT_LE(run_serving(chooser, bytes, 640, 110'000, 170'000, bytes / 4), probes(640));
}

// Below kBothWaysSingleCopyFrom the times decide both ways too.
TEST(ReadPathChooser, SmallerReadsBothWaysGoTheFasterWay) {
  ReadPathChooser chooser(kMin, kMax);
  const std::uint64_t bytes = ReadPathChooser::kBothWaysSingleCopyFrom / 2;
  EXPECT_LE(run_serving(chooser, bytes, 640, 9'000, 12'000, bytes), probes(640));
  EXPECT_GE(run_serving(chooser, bytes, 640, 15'000, 12'000, bytes), 640 - probes(640) - 8);
}
