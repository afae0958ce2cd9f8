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

// A stream posts its reads before the first through the rings has ended:
// the others go by single copy meanwhile, not all through the rings untimed.
TEST(ReadPathChooser, ReadsPostedBeforeTheFirstThroughTheRingsEndsGoBySingleCopy) {
  ReadPathChooser chooser(kMin, kMax);
  EXPECT_EQ(chooser.choose(kMin), ReadPath::rings);
  for (int i = 0; i < 63; ++i) {
    EXPECT_EQ(chooser.choose(kMin), ReadPath::direct) << i;
    if (i % 2) chooser.record(ReadPath::direct, kMin, 10'000);
  }
  chooser.record(ReadPath::rings, kMin, 5'000);
  EXPECT_EQ(chooser.choose(kMin), ReadPath::rings);
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

// Two processes reading `bytes` from each other `reads` times, each read
// taking the time its way costs: each serves the other's reads through the
// rings. Returns how many of a's and of b's went single copy.
std::pair<std::uint32_t, std::uint32_t> both_ways(ReadPathChooser& a, ReadPathChooser& b, std::uint64_t bytes,
                                                  std::uint32_t reads, std::uint64_t rings_ns,
                                                  std::uint64_t direct_ns) {
  std::uint32_t a_direct = 0, b_direct = 0;
  for (std::uint32_t i = 0; i < reads; ++i) {
    const ReadPath pa = a.choose(bytes), pb = b.choose(bytes);
    if (pa == ReadPath::rings) b.served(bytes);
    if (pb == ReadPath::rings) a.served(bytes);
    a.record(pa, bytes, pa == ReadPath::direct ? direct_ns : rings_ns);
    b.record(pb, bytes, pb == ReadPath::direct ? direct_ns : rings_ns);
    a_direct += pa == ReadPath::direct;
    b_direct += pb == ReadPath::direct;
  }
  return {a_direct, b_direct};
}

// Bidirectional 1 MiB: a read through the rings takes 110 us, one by single
// copy 170, but each end serves the other's: single copy, though the two
// ends' counts of reads, and so their probes, are apart (b read alone first).
TEST(ReadPathChooser, LargeReadsBothWaysGoBySingleCopy) {
  ReadPathChooser a(kMin, kMax), b(kMin, kMax);
  const std::uint64_t bytes = 1u << 20;
  EXPECT_LE(run(b, bytes, 40, 110'000, 170'000), probes(40));  // alone, b keeps the rings
  const auto [a_direct, b_direct] = both_ways(a, b, bytes, 640, 110'000, 170'000);
  EXPECT_GE(a_direct, 640 - probes(640) - 1);
  EXPECT_GE(b_direct, 640 - probes(640) - 1);
  // The stream turns one way (b stops reading, nor do its probes come): the
  // times decide again once a has made kBothWaysMemory reads.
  EXPECT_LE(run(a, bytes, 640, 110'000, 170'000), ReadPathChooser::kBothWaysMemory + probes(640));
  EXPECT_LE(run(a, bytes, 640, 110'000, 170'000), probes(640));
}

// Below kBothWaysSingleCopyFrom the times decide both ways too.
TEST(ReadPathChooser, SmallerReadsBothWaysGoTheFasterWay) {
  ReadPathChooser a(kMin, kMax), b(kMin, kMax);
  const std::uint64_t bytes = ReadPathChooser::kBothWaysSingleCopyFrom / 2;
  const auto [a_direct, b_direct] = both_ways(a, b, bytes, 640, 9'000, 12'000);
  EXPECT_LE(a_direct, probes(640) + 1);
  EXPECT_LE(b_direct, probes(640) + 1);
}

}  // namespace
