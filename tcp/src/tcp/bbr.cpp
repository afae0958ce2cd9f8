// BBR v1 (utcp/bbr.hpp). Rates in bytes of payload per second, windows in
// bytes, time from the samples: no clock is read.
#include "utcp/bbr.hpp"

#include <algorithm>
#include <cmath>

namespace utcp {

using std::chrono::duration_cast;
using std::chrono::microseconds;

// ---- The windowed max filter ----

void WindowedMaxFilter::reset(std::uint64_t time, double value) { estimates_.fill({time, value}); }

double WindowedMaxFilter::update(std::uint64_t time, double value) {
  const Estimate sample{time, value};
  // A new best, or nothing left in the window: it is all three.
  if (value >= estimates_[0].value || time - estimates_[2].time > window_) {
    reset(time, value);
    return best();
  }
  if (value >= estimates_[1].value) {
    estimates_[1] = estimates_[2] = sample;
  } else if (value >= estimates_[2].value) {
    estimates_[2] = sample;
  }
  // Age the estimates: the best out of the window gives way to the next;
  // the second and third are refreshed once a quarter and a half of the
  // window passed with none newer, so that they stand for later sub-windows.
  const std::uint64_t age = time - estimates_[0].time;
  if (age > window_) {
    estimates_[0] = estimates_[1];
    estimates_[1] = estimates_[2];
    estimates_[2] = sample;
    if (time - estimates_[0].time > window_) {
      estimates_[0] = estimates_[1];
      estimates_[1] = estimates_[2];
      estimates_[2] = sample;
    }
  } else if (estimates_[1].time == estimates_[0].time && age > window_ / 4) {
    estimates_[1] = estimates_[2] = sample;
  } else if (estimates_[2].time == estimates_[1].time && age > window_ / 2) {
    estimates_[2] = sample;
  }
  return best();
}

// ---- BBR ----

std::string_view to_string(BbrController::Mode mode) {
  switch (mode) {
    case BbrController::Mode::startup: return "startup";
    case BbrController::Mode::drain: return "drain";
    case BbrController::Mode::probe_bw: return "probe_bw";
    case BbrController::Mode::probe_rtt: return "probe_rtt";
  }
  return "?";
}

void BbrController::start(std::uint32_t mss, Instant now) {
  mss_ = mss;
  initial_cwnd_ = cwnd_ = prior_cwnd_ = initial_window(mss);
  // Before any RTT is known, as Linux: the initial window over 1 ms.
  pacing_rate_ = high_gain * cwnd_ * 1000.0;
  min_rtt_stamp_ = now;
  cycle_stamp_ = now;
}

// The smoothed RTT, once there is one, sets the first pacing rate (the
// initial window over it, at STARTUP's gain) until bandwidth is measured.
void BbrController::on_ack(const AckSample& ack) {
  if (has_seen_rtt_ || ack.smoothed_rtt.count() <= 0) return;
  has_seen_rtt_ = true;
  if (max_bandwidth() == 0)
    pacing_rate_ = high_gain * cwnd_ * 1e6 / static_cast<double>(ack.smoothed_rtt.count());
}

void BbrController::save_cwnd() {
  // Within a loss episode or PROBE_RTT cwnd is already lowered: keep the larger.
  prior_cwnd_ = in_loss_episode_ || mode_ == Mode::probe_rtt ? std::max(prior_cwnd_, cwnd_) : cwnd_;
}

void BbrController::on_enter_recovery(std::uint32_t, Instant) {
  save_cwnd();
  in_loss_episode_ = true;
}

void BbrController::on_recovery_exit(std::uint32_t, Instant) {
  in_loss_episode_ = false;
  cwnd_ = std::max(cwnd_, prior_cwnd_);
}

// As Linux after a timeout: one segment, growing by what is delivered; a
// full-bandwidth check starts over (the timeout ends a round).
void BbrController::on_rto(std::uint32_t, bool within_episode, Instant) {
  if (!within_episode) save_cwnd();
  in_loss_episode_ = true;
  cwnd_ = mss_;
  full_bandwidth_ = 0;
  round_start_ = true;
}

void BbrController::on_spurious_recovery(Instant) {
  in_loss_episode_ = false;
  cwnd_ = std::max(cwnd_, prior_cwnd_);
  full_bandwidth_ = 0;
  full_bandwidth_count_ = 0;
}

void BbrController::on_rate_sample(const RateSample& sample) {
  update_round(sample);
  update_bandwidth(sample);
  update_cycle_phase(sample);
  check_full_bandwidth(sample);
  check_drain(sample);
  update_min_rtt(sample);
  update_ack_aggregation(sample);
  update_pacing_rate();
  update_cwnd(sample);
}

// A round trip ends when a segment sent after its start is delivered.
void BbrController::update_round(const RateSample& sample) {
  round_start_ = false;
  if (sample.interval.count() <= 0) return;
  if (sample.prior_delivered >= next_round_delivered_) {
    next_round_delivered_ = sample.total_delivered;
    ++round_count_;
    round_start_ = true;
    // A timeout's loss episode is over once a round trip got through.
    if (in_loss_episode_ && cwnd_ >= prior_cwnd_) in_loss_episode_ = false;
  }
}

// An app-limited sample only raises the estimate: it says the path can do
// at least that much, not that it can do no more.
void BbrController::update_bandwidth(const RateSample& sample) {
  if (sample.interval.count() <= 0) return;
  const double rate = sample.delivery_rate();
  const bool app_limited = sample.is_app_limited || sample.prior_delivered < probe_rtt_limited_until_;
  if (!app_limited || rate >= max_bandwidth()) max_bandwidth_.update(round_count_, rate);
}

void BbrController::update_cycle_phase(const RateSample& sample) {
  if (mode_ != Mode::probe_bw || !min_rtt_) return;
  const bool full_length = sample.now - cycle_stamp_ > *min_rtt_;
  const std::uint32_t prior_in_flight = sample.bytes_in_flight + sample.newly_delivered;
  bool next = full_length;
  if (pacing_gain_ > 1) {
    // Probing: until the flight reached what the higher rate asks, or a loss says the path is full.
    next = full_length && (sample.newly_lost_segments > 0 || prior_in_flight >= target_inflight(pacing_gain_));
  } else if (pacing_gain_ < 1) {
    // Draining what the probe queued: early once the flight is down to one BDP.
    next = full_length || prior_in_flight <= target_inflight(1);
  }
  if (!next) return;
  cycle_index_ = (cycle_index_ + 1) % pacing_gain_cycle.size();
  cycle_stamp_ = sample.now;
  pacing_gain_ = pacing_gain_cycle[cycle_index_];
}

// STARTUP is over when three rounds in a row (not limited by the
// application) did not raise the bandwidth by 25 %.
void BbrController::check_full_bandwidth(const RateSample& sample) {
  if (filled_pipe_ || !round_start_ || sample.is_app_limited || sample.prior_delivered < probe_rtt_limited_until_)
    return;
  if (max_bandwidth() >= full_bandwidth_ * full_bandwidth_growth) {
    full_bandwidth_ = max_bandwidth();
    full_bandwidth_count_ = 0;
    return;
  }
  filled_pipe_ = ++full_bandwidth_count_ >= full_bandwidth_rounds;
}

void BbrController::check_drain(const RateSample& sample) {
  if (mode_ == Mode::startup && filled_pipe_) {
    mode_ = Mode::drain;
    pacing_gain_ = drain_gain;
    cwnd_gain_ = high_gain;  // the queue drains by pacing; cwnd stays out of the way
  }
  if (mode_ == Mode::drain && sample.bytes_in_flight <= target_inflight(1)) enter_probe_bw(sample.now);
}

void BbrController::enter_probe_bw(Instant now) {
  mode_ = Mode::probe_bw;
  cwnd_gain_ = cwnd_gain;
  cycle_index_ = 2;  // the first phase at gain 1 (see the top of utcp/bbr.hpp)
  pacing_gain_ = pacing_gain_cycle[cycle_index_];
  cycle_stamp_ = now;
}

void BbrController::update_min_rtt(const RateSample& sample) {
  const bool expired = sample.now > min_rtt_stamp_ + min_rtt_window;
  if (sample.rtt && (!min_rtt_ || *sample.rtt < *min_rtt_ || expired)) {
    min_rtt_ = *sample.rtt;
    min_rtt_stamp_ = sample.now;
  }
  if (expired && mode_ != Mode::probe_rtt) {
    save_cwnd();
    mode_ = Mode::probe_rtt;
    pacing_gain_ = 1;
    cwnd_gain_ = 1;
    probe_rtt_done_.reset();
  }
  if (mode_ != Mode::probe_rtt) return;
  // What PROBE_RTT sends measures the window it holds, not the path: its
  // samples count as app-limited, as Linux marks them.
  probe_rtt_limited_until_ = sample.total_delivered + sample.bytes_in_flight;
  // Once the flight is down to the minimum, hold it there 200 ms and at
  // least a round trip: what the RTT is then is the path's, without queue.
  if (!probe_rtt_done_) {
    if (sample.bytes_in_flight <= min_cwnd_segments * mss_) {
      probe_rtt_done_ = sample.now + probe_rtt_duration;
      probe_rtt_round_done_ = false;
      next_round_delivered_ = sample.total_delivered;
    }
    return;
  }
  if (round_start_) probe_rtt_round_done_ = true;
  if (probe_rtt_round_done_ && sample.now >= *probe_rtt_done_) leave_probe_rtt(sample.now);
}

void BbrController::leave_probe_rtt(Instant now) {
  min_rtt_stamp_ = now;
  cwnd_ = std::max(cwnd_, prior_cwnd_);
  if (filled_pipe_) {
    enter_probe_bw(now);
  } else {
    mode_ = Mode::startup;
    pacing_gain_ = cwnd_gain_ = high_gain;
  }
}

// In STARTUP the rate only rises (a sample may come from a round not yet
// at full speed); after it, it follows the estimate.
void BbrController::update_pacing_rate() {
  const double rate = pacing_gain_ * max_bandwidth() * pacing_margin;
  if (rate <= 0) return;
  if (filled_pipe_ || rate > pacing_rate_) pacing_rate_ = rate;
}

std::uint32_t BbrController::target_inflight(double gain) const {
  if (!min_rtt_ || max_bandwidth() <= 0) return initial_cwnd_;
  const double bdp = max_bandwidth() * static_cast<double>(min_rtt_->count()) / 1e6;
  // The bursts pacing lets go, at both ends, are in flight on top of the BDP
  // (Linux's quantization budget: three of them, and two segments more
  // while probing at the first phase of the cycle).
  double target = gain * bdp + 3.0 * pacing_burst(pacing_rate_, mss_);
  if (mode_ == Mode::probe_bw && cycle_index_ == 0) target += 2.0 * mss_;
  return static_cast<std::uint32_t>(std::min<double>(std::ceil(target), 1u << 30));
}

// An epoch starts whenever the ACKs fall behind what BtlBw predicts (or a
// megabyte was delivered in it); what they delivered beyond the prediction
// since is the aggregation the window must cover, bounded by cwnd.
void BbrController::update_ack_aggregation(const RateSample& sample) {
  if (sample.newly_delivered == 0 || sample.interval.count() <= 0) return;
  if (round_start_ && ++extra_delivered_rounds_ >= ack_aggregation_window_rounds) {
    extra_delivered_rounds_ = 0;
    extra_delivered_index_ ^= 1;
    extra_delivered_[extra_delivered_index_] = 0;
  }
  auto expected = static_cast<std::uint64_t>(max_bandwidth() *
                                             std::chrono::duration<double>(sample.now - ack_epoch_start_).count());
  if (ack_epoch_delivered_ <= expected || ack_epoch_delivered_ + sample.newly_delivered >= ack_epoch_reset_bytes) {
    ack_epoch_delivered_ = 0;
    ack_epoch_start_ = sample.now;
    expected = 0;
  }
  ack_epoch_delivered_ += sample.newly_delivered;
  const auto extra = static_cast<std::uint32_t>(std::min<std::uint64_t>(ack_epoch_delivered_ - expected, cwnd_));
  extra_delivered_[extra_delivered_index_] = std::max(extra_delivered_[extra_delivered_index_], extra);
}

std::uint32_t BbrController::ack_aggregation_allowance() const {
  if (!filled_pipe_) return 0;
  const double most = max_bandwidth() * std::chrono::duration<double>(max_ack_aggregation).count();
  return static_cast<std::uint32_t>(std::min<double>(std::max(extra_delivered_[0], extra_delivered_[1]), most));
}

// cwnd grows by what is delivered toward gain × BDP (in STARTUP without
// that bound until the pipe is full), never below four segments, and
// PROBE_RTT holds it there.
void BbrController::update_cwnd(const RateSample& sample) {
  const std::uint32_t minimum = min_cwnd_segments * mss_;
  if (sample.newly_delivered > 0) {
    const std::uint32_t target = target_inflight(cwnd_gain_) + ack_aggregation_allowance();
    const std::uint32_t grown = cwnd_ + std::min(sample.newly_delivered, (1u << 30) - cwnd_);
    if (filled_pipe_) {
      cwnd_ = std::min(grown, target);
    } else if (cwnd_ < target || sample.total_delivered < initial_cwnd_) {
      cwnd_ = grown;
    }
    cwnd_ = std::max(cwnd_, minimum);
  }
  if (mode_ == Mode::probe_rtt) cwnd_ = std::min(cwnd_, minimum);
}

}  // namespace utcp
