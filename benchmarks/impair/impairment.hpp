// One direction of a user-space impairment relay, in the manner of Linux's
// netem: each packet that comes in is lost, or queued (twice when
// duplicated) to leave after the delay; a reordered copy leaves at once,
// ahead of the ones waiting; a corrupted copy has one random bit flipped.
// Decisions come from a seeded generator, so a run repeats given the same
// packets. No I/O and no clock: callers pass the time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace impair {

using Clock = std::chrono::steady_clock;

struct ImpairmentSettings {
  // Probabilities, 0 to 1, each decided per packet (corrupt and reorder per copy).
  double loss = 0;
  double reorder = 0;
  double duplicate = 0;
  double corrupt = 0;
  std::chrono::microseconds delay{0};
  // Packets waiting at most; one beyond it is dropped (netem's limit).
  std::size_t limit = 1000;

  // Empty when every probability is in [0, 1], the delay not negative and
  // the limit positive; otherwise what is wrong.
  std::string check() const;
};

struct ImpairmentCounters {
  std::uint64_t packets_in = 0;
  std::uint64_t lost = 0;
  std::uint64_t over_limit = 0;  // dropped because `limit` packets were waiting
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t corrupted = 0;
  std::uint64_t packets_out = 0;
};

class ImpairedDirection {
 public:
  ImpairedDirection(const ImpairmentSettings& settings, std::uint64_t seed);

  // Takes a packet that arrived at `now`: drops it or queues its copies.
  void accept(std::span<const std::uint8_t> packet, Clock::time_point now);
  // When the first waiting packet is due; none when nothing waits.
  std::optional<Clock::time_point> next_release() const;
  // Hands each packet due by `now` to deliver, earliest first (in arrival
  // order among equals); returns how many.
  std::size_t release_due(Clock::time_point now, const std::function<void(std::span<const std::uint8_t>)>& deliver);

  std::size_t waiting() const { return queue_.size(); }
  const ImpairmentCounters& counters() const { return counters_; }

 private:
  struct Waiting {
    Clock::time_point release;
    std::uint64_t order;  // arrival order: equal release times keep it
    std::vector<std::uint8_t> bytes;
    // The priority queue puts the greatest first: the latest is "least".
    bool operator<(const Waiting& other) const {
      return release != other.release ? release > other.release : order > other.order;
    }
  };
  bool happens(double probability);
  void enqueue(std::span<const std::uint8_t> packet, Clock::time_point now);

  ImpairmentSettings settings_;
  std::mt19937_64 random_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::priority_queue<Waiting> queue_;
  std::uint64_t next_order_ = 0;
  ImpairmentCounters counters_;
};

}  // namespace impair
