// BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00, as Linux's
// tcp_bbr.c behaves): a model of the path, not a response to loss. It
// keeps the largest delivery rate of the last ten round trips (BtlBw, a
// windowed max filter) and the smallest RTT of the last ten seconds
// (RTprop), paces at a gain times BtlBw and caps the flight at twice their
// product (the BDP). STARTUP doubles the rate each round until it stops
// growing by 25 % for three rounds; DRAIN empties the queue that made;
// PROBE_BW cycles the pacing gain through 5/4, 3/4 and six rounds of 1;
// PROBE_RTT, when RTprop went ten seconds without a new minimum, holds the
// flight to four segments for 200 ms and a round trip to measure it again.
// A random loss does not cut the rate: on a path with 5 % loss a loss-based
// controller collapses, BBR keeps what the path delivers (issue 23).
//
// Recovery: fast recovery leaves cwnd as the model sets it (the pacing rate
// bounds the sending). Linux's round of packet conservation, and its one
// segment less of cwnd per segment found lost, are left out: tried through
// benchmarks/impairment.sh they sent no fewer retransmissions and gave 9
// Mbit/s at 5 % loss where this gives 12 (Linux 13). A retransmission timeout drops cwnd to one segment, from which it
// grows by what each ACK delivers back to the model's target, and an undo
// (a spurious episode) restores the window from before.
//
// As Linux's tcp_bbr.c (not the draft), the target window also covers ACK
// aggregation: data the ACKs delivered beyond what BtlBw predicts over an
// epoch (the largest excess of the last five to ten rounds, at most 100 ms
// of BtlBw) is added once the pipe is full. On a path whose ACKs come in
// bursts (delayed ACKs, a SACK recovery's cumulative jumps, reordering that
// lets a few packets through far sooner than the rest, so that RTprop is
// far below the RTT most packets see) cwnd = 2 BDP alone would starve it.
//
// Left out of v1 as Linux has it: the long-term bandwidth sampling that
// detects token-bucket policers, the restart from idle, and the random
// start of the gain cycle (it starts at the first cruising phase, so that
// tests on virtual time are repeatable).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "utcp/congestion.hpp"

namespace utcp {

// The best (largest) value seen in the last `window` units of time (BBR
// counts round trips), as Kathleen Nichols' algorithm keeps it: the best,
// second best and third best of successively later sub-windows, so that
// when the best ages out a good replacement is already at hand. O(1) per
// sample.
class WindowedMaxFilter {
 public:
  explicit WindowedMaxFilter(std::uint64_t window) : window_(window) {}

  // The value measured at `time` (non-decreasing); returns the best now.
  double update(std::uint64_t time, double value);
  // Forgets everything but this one value.
  void reset(std::uint64_t time, double value);
  double best() const { return estimates_[0].value; }

 private:
  struct Estimate {
    std::uint64_t time = 0;
    double value = 0;
  };
  std::uint64_t window_;
  std::array<Estimate, 3> estimates_{};
};

class BbrController final : public CongestionController {
 public:
  enum class Mode : std::uint8_t { startup, drain, probe_bw, probe_rtt };

  static constexpr double high_gain = 2.885;  // 2/ln 2: the rate doubles each round
  static constexpr double drain_gain = 1 / high_gain;
  static constexpr double cwnd_gain = 2;
  static constexpr std::array<double, 8> pacing_gain_cycle{1.25, 0.75, 1, 1, 1, 1, 1, 1};
  static constexpr std::uint64_t bandwidth_window_rounds = 10;
  static constexpr std::chrono::seconds min_rtt_window{10};
  static constexpr std::chrono::milliseconds probe_rtt_duration{200};
  static constexpr std::uint32_t min_cwnd_segments = 4;
  static constexpr double full_bandwidth_growth = 1.25;
  static constexpr int full_bandwidth_rounds = 3;
  static constexpr double pacing_margin = 0.99;  // pace 1 % below the estimate, to keep queues from building
  static constexpr std::uint64_t ack_aggregation_window_rounds = 5;  // each of the two windows
  static constexpr std::chrono::milliseconds max_ack_aggregation{100};
  static constexpr std::uint64_t ack_epoch_reset_bytes = 1u << 20;

  std::string_view name() const override { return "bbr"; }
  void start(std::uint32_t mss, Instant now) override;
  void on_ack(const AckSample& ack) override;
  void on_enter_recovery(std::uint32_t bytes_in_flight, Instant now) override;
  void on_recovery_exit(std::uint32_t bytes_in_flight, Instant now) override;
  void on_rto(std::uint32_t bytes_in_flight, bool within_episode, Instant now) override;
  void on_spurious_recovery(Instant now) override;
  void on_rate_sample(const RateSample& sample) override;
  std::optional<double> pacing_rate() const override { return pacing_rate_; }
  std::uint32_t cwnd() const override { return cwnd_; }
  // None in STARTUP (as slow start); cwnd once the pipe is full, so that a
  // trace shows the model's window as congestion avoidance.
  std::uint32_t ssthresh() const override { return filled_pipe_ ? cwnd_ : 1u << 30; }

  // The model, for tests and traces.
  Mode mode() const { return mode_; }
  double max_bandwidth() const { return max_bandwidth_.best(); }  // bytes per second
  std::optional<std::chrono::microseconds> min_rtt() const { return min_rtt_; }
  double pacing_gain() const { return pacing_gain_; }
  double current_cwnd_gain() const { return cwnd_gain_; }
  std::uint64_t round_count() const { return round_count_; }
  bool filled_pipe() const { return filled_pipe_; }
  std::size_t cycle_index() const { return cycle_index_; }
  // The flight the model allows at `gain`: gain × BDP plus the bursts pacing sends in.
  std::uint32_t target_inflight(double gain) const;
  // What ACK aggregation adds to the target window (0 before the pipe is full).
  std::uint32_t ack_aggregation_allowance() const;

 private:
  void update_round(const RateSample& sample);
  void update_bandwidth(const RateSample& sample);
  void update_cycle_phase(const RateSample& sample);
  void check_full_bandwidth(const RateSample& sample);
  void check_drain(const RateSample& sample);
  void update_min_rtt(const RateSample& sample);
  void update_pacing_rate();
  void update_ack_aggregation(const RateSample& sample);
  void update_cwnd(const RateSample& sample);
  void enter_probe_bw(Instant now);
  void leave_probe_rtt(Instant now);
  void save_cwnd();

  std::uint32_t mss_ = 536;
  std::uint32_t initial_cwnd_ = 0;
  std::uint32_t cwnd_ = 0;
  std::uint32_t prior_cwnd_ = 0;  // before a loss or PROBE_RTT, restored after
  bool in_loss_episode_ = false;  // between a recovery or timeout and its end: prior_cwnd_ is from before it
  Mode mode_ = Mode::startup;
  double pacing_gain_ = high_gain;
  double cwnd_gain_ = high_gain;
  double pacing_rate_ = 0;  // bytes per second
  bool has_seen_rtt_ = false;

  WindowedMaxFilter max_bandwidth_{bandwidth_window_rounds};
  std::optional<std::chrono::microseconds> min_rtt_;
  Instant min_rtt_stamp_{};

  std::uint64_t round_count_ = 0;
  std::uint64_t next_round_delivered_ = 0;
  bool round_start_ = false;

  bool filled_pipe_ = false;
  double full_bandwidth_ = 0;
  int full_bandwidth_count_ = 0;

  std::size_t cycle_index_ = 0;
  Instant cycle_stamp_{};

  // ACK aggregation: the excess delivered in the current epoch, and the
  // largest excess in each of two alternating windows of rounds.
  Instant ack_epoch_start_{};
  std::uint64_t ack_epoch_delivered_ = 0;
  std::array<std::uint32_t, 2> extra_delivered_{};
  std::size_t extra_delivered_index_ = 0;
  std::uint64_t extra_delivered_rounds_ = 0;

  std::optional<Instant> probe_rtt_done_;
  bool probe_rtt_round_done_ = false;
  std::uint64_t probe_rtt_limited_until_ = 0;  // samples of segments sent before this much was delivered are app-limited
};

std::string_view to_string(BbrController::Mode mode);

}  // namespace utcp
