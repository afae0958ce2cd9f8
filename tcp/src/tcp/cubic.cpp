// CUBIC (RFC 9438). The RFC counts windows in segments and time in seconds;
// so does this file, in doubles, and cwnd() turns segments into bytes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "utcp/congestion.hpp"

namespace utcp {
namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// "Arbitrarily high" (RFC 5681 §3.1), as NewReno's.
constexpr double initial_ssthresh_bytes = 1u << 30;

std::uint32_t to_bytes(double segments, double mss) {
  const double bytes = std::floor(segments * mss);
  return static_cast<std::uint32_t>(std::min<double>(bytes, std::numeric_limits<std::uint32_t>::max()));
}

}  // namespace

void CubicController::start(std::uint32_t mss, Instant) {
  mss_ = mss;
  cwnd_ = static_cast<double>(initial_window(mss)) / mss_;
  ssthresh_ = initial_ssthresh_bytes / mss_;
  w_max_ = 0;
  cwnd_prior_ = 0;
  epoch_.reset();
}

double CubicController::w_cubic(double t) const { return c * std::pow(t - k_, 3) + w_max_; }

void CubicController::on_ack(const AckSample& ack) {
  const double acked = ack.bytes_acknowledged / mss_;
  if (cwnd_ < ssthresh_) {
    cwnd_ += std::min(acked, 1.0);  // RFC 5681's slow start (§4.10)
    return;
  }
  if (!epoch_) {
    // A congestion avoidance stage begins (§4.2): K from where the window is
    // now to W_max; with no W_max above it (none yet, or after a timeout,
    // §4.8), K = 0 and W_max is the window now. W_est starts here (§4.3).
    epoch_ = ack.now;
    if (w_max_ > cwnd_) {
      k_ = std::cbrt((w_max_ - cwnd_) / c);
    } else {
      k_ = 0;
      w_max_ = cwnd_;
    }
    w_est_ = cwnd_;
  }
  const double t = seconds(ack.now - *epoch_);
  // §4.3: AIMD's window with the same average as Reno's, α until it reaches
  // the window before the last reduction, 1 after.
  w_est_ += (w_est_ >= cwnd_prior_ ? 1.0 : alpha) * acked / cwnd_;
  if (w_cubic(t) < w_est_) {
    cwnd_ = w_est_;  // the Reno-friendly region
    return;
  }
  // §4.4 and §4.5 (concave and convex regions): toward W_cubic one RTT
  // ahead, by at most half the window per RTT.
  const double rtt = seconds(ack.smoothed_rtt > std::chrono::microseconds::zero()
                                 ? ack.smoothed_rtt
                                 : ack.rtt.value_or(std::chrono::microseconds::zero()));
  const double target = std::clamp(w_cubic(t + rtt), cwnd_, 1.5 * cwnd_);
  cwnd_ += (target - cwnd_) / cwnd_ * acked;
}

// §4.6 (multiplicative decrease) with §4.7 (fast convergence): W_max below
// the last one means less room than before, so give some of it up.
void CubicController::reduce(std::uint32_t bytes_in_flight) {
  epoch_.reset();
  w_max_ = cwnd_ < w_max_ ? cwnd_ * (1 + beta) / 2 : cwnd_;
  cwnd_prior_ = cwnd_;
  ssthresh_ = std::max(bytes_in_flight / mss_ * beta, 2.0);
}

void CubicController::save_for_undo() { before_recovery_ = Saved{cwnd_, ssthresh_, w_max_, cwnd_prior_, epoch_, k_, w_est_}; }

void CubicController::on_enter_recovery(std::uint32_t bytes_in_flight, Instant) {
  save_for_undo();
  reduce(bytes_in_flight);
  cwnd_ = ssthresh_;
}

// RFC 6582 §3.2 step 4's second option: the window set when recovery began.
void CubicController::on_recovery_exit(std::uint32_t, Instant) { cwnd_ = ssthresh_; }

// The stage the reduction ended goes on as if it had not happened (the
// window grown since is kept if larger).
void CubicController::on_spurious_recovery(Instant) {
  if (!before_recovery_) return;
  const Saved saved = *std::exchange(before_recovery_, std::nullopt);
  cwnd_ = std::max(cwnd_, saved.cwnd);
  ssthresh_ = saved.ssthresh;
  w_max_ = saved.w_max;
  cwnd_prior_ = saved.cwnd_prior;
  epoch_ = saved.epoch;
  k_ = saved.k;
  w_est_ = saved.w_est;
}

// §4.8: ssthresh as for a loss, cwnd one segment (RFC 5681); the next
// congestion avoidance stage takes K = 0 and W_max from where it begins.
void CubicController::on_rto(std::uint32_t bytes_in_flight, bool within_episode, Instant) {
  if (!within_episode) save_for_undo();
  reduce(bytes_in_flight);
  w_max_ = 0;
  cwnd_ = 1;
}

std::uint32_t CubicController::cwnd() const { return to_bytes(cwnd_, mss_); }
std::uint32_t CubicController::ssthresh() const { return to_bytes(ssthresh_, mss_); }

}  // namespace utcp
