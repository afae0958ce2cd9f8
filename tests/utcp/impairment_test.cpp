// The impairment relay's packet decisions (benchmarks/impair): each
// impairment alone at 0 % and 100 %, the queue's bound, the seed's
// repeatability, the rates over many packets, and bad settings.
#include "impairment.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace impair {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

Bytes packet(std::uint8_t tag, std::size_t size = 40) {
  Bytes bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(tag + i * 3);
  return bytes;
}

std::vector<Bytes> release(ImpairedDirection& direction, Clock::time_point now) {
  std::vector<Bytes> out;
  direction.release_due(now, [&](std::span<const std::uint8_t> bytes) { out.emplace_back(bytes.begin(), bytes.end()); });
  return out;
}

int differing_bits(const Bytes& a, const Bytes& b) {
  int bits = 0;
  for (std::size_t i = 0; i < a.size(); ++i) bits += __builtin_popcount(a[i] ^ b[i]);
  return bits;
}

const Clock::time_point start{};

TEST(ImpairedDirection, WithoutImpairmentEveryPacketLeavesAfterTheDelayInOrder) {
  ImpairedDirection direction({.delay = 1ms}, 1);
  for (std::uint8_t tag = 0; tag < 5; ++tag) direction.accept(packet(tag), start + tag * 10us);
  EXPECT_TRUE(release(direction, start + 999us).empty());
  EXPECT_EQ(direction.next_release(), start + 1ms);
  const std::vector<Bytes> out = release(direction, start + 2ms);
  ASSERT_EQ(out.size(), 5u);
  for (std::uint8_t tag = 0; tag < 5; ++tag) EXPECT_EQ(out[tag], packet(tag));
  EXPECT_FALSE(direction.next_release());
  EXPECT_EQ(direction.counters().packets_in, 5u);
  EXPECT_EQ(direction.counters().packets_out, 5u);
}

TEST(ImpairedDirection, FullLossDropsEverything) {
  ImpairedDirection direction({.loss = 1}, 1);
  for (std::uint8_t tag = 0; tag < 10; ++tag) direction.accept(packet(tag), start);
  EXPECT_TRUE(release(direction, start + 1s).empty());
  EXPECT_EQ(direction.counters().lost, 10u);
}

TEST(ImpairedDirection, FullDuplicationSendsEachPacketTwiceBackToBack) {
  ImpairedDirection direction({.duplicate = 1}, 1);
  direction.accept(packet(1), start);
  direction.accept(packet(2), start);
  const std::vector<Bytes> out = release(direction, start);
  EXPECT_EQ(out, (std::vector<Bytes>{packet(1), packet(1), packet(2), packet(2)}));
  EXPECT_EQ(direction.counters().duplicated, 2u);
}

TEST(ImpairedDirection, CorruptionFlipsExactlyOneBit) {
  ImpairedDirection direction({.corrupt = 1}, 7);
  for (std::uint8_t tag = 0; tag < 50; ++tag) direction.accept(packet(tag, 1 + tag), start);
  direction.accept({}, start);  // an empty packet has no bit to flip
  const std::vector<Bytes> out = release(direction, start);
  ASSERT_EQ(out.size(), 51u);
  for (std::uint8_t tag = 0; tag < 50; ++tag) EXPECT_EQ(differing_bits(out[tag], packet(tag, 1 + tag)), 1) << int{tag};
  EXPECT_TRUE(out[50].empty());
  EXPECT_EQ(direction.counters().corrupted, 50u);
}

TEST(ImpairedDirection, AReorderedPacketOvertakesTheWaitingOnes) {
  ImpairedDirection waits({.delay = 5ms}, 1);
  waits.accept(packet(1), start);
  ImpairedDirection overtakes({.reorder = 1, .delay = 5ms}, 1);
  overtakes.accept(packet(2), start + 1ms);
  EXPECT_TRUE(release(waits, start + 1ms).empty());
  EXPECT_EQ(release(overtakes, start + 1ms), std::vector<Bytes>{packet(2)});
  EXPECT_EQ(overtakes.counters().reordered, 1u);
}

TEST(ImpairedDirection, PacketsBeyondTheLimitAreDropped) {
  ImpairedDirection direction({.delay = 1ms, .limit = 2}, 1);
  for (std::uint8_t tag = 0; tag < 3; ++tag) direction.accept(packet(tag), start);
  EXPECT_EQ(direction.waiting(), 2u);
  EXPECT_EQ(direction.counters().over_limit, 1u);
  EXPECT_EQ(release(direction, start + 1ms), (std::vector<Bytes>{packet(0), packet(1)}));
}

// The same seed and packets give the same result; the rates come out near
// the settings over many packets (bounds far outside binomial noise).
TEST(ImpairedDirection, SeededDecisionsRepeatAndMatchTheRates) {
  const ImpairmentSettings settings{.loss = 0.1, .reorder = 0.05, .duplicate = 0.05, .corrupt = 0.02, .delay = 1ms};
  ImpairedDirection first(settings, 42), second(settings, 42);
  std::vector<Bytes> first_out, second_out;
  for (int i = 0; i < 20000; ++i) {
    const Clock::time_point now = start + i * 1us;
    first.accept(packet(static_cast<std::uint8_t>(i)), now);
    second.accept(packet(static_cast<std::uint8_t>(i)), now);
    for (Bytes& bytes : release(first, now)) first_out.push_back(std::move(bytes));
    for (Bytes& bytes : release(second, now)) second_out.push_back(std::move(bytes));
  }
  EXPECT_EQ(first_out, second_out);
  const ImpairmentCounters& counters = first.counters();
  EXPECT_GT(counters.lost, 1700u);
  EXPECT_LT(counters.lost, 2300u);
  EXPECT_GT(counters.duplicated, 700u);
  EXPECT_LT(counters.duplicated, 1100u);
  EXPECT_GT(counters.reordered, 700u);
  EXPECT_LT(counters.reordered, 1200u);
  EXPECT_GT(counters.corrupted, 250u);
  EXPECT_LT(counters.corrupted, 500u);
}

TEST(ImpairmentSettings, CheckNamesWhatIsWrong) {
  EXPECT_EQ(ImpairmentSettings{}.check(), "");
  EXPECT_NE(ImpairmentSettings{.loss = 1.5}.check().find("loss"), std::string::npos);
  EXPECT_NE(ImpairmentSettings{.corrupt = -0.1}.check().find("corrupt"), std::string::npos);
  EXPECT_NE(ImpairmentSettings{.reorder = std::nan("")}.check().find("reorder"), std::string::npos);
  EXPECT_NE(ImpairmentSettings{.delay = -1us}.check().find("delay"), std::string::npos);
  EXPECT_NE(ImpairmentSettings{.limit = 0}.check().find("limit"), std::string::npos);
}

}  // namespace
}  // namespace impair
