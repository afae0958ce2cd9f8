// The retransmission timeout of RFC 6298: a smoothed round-trip time and
// its variation from samples, the timeout derived from them, and the
// exponential backoff applied while retransmissions go unanswered.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace utcp::tcp {

class RttEstimator {
 public:
  using microseconds = std::chrono::microseconds;
  using milliseconds = std::chrono::milliseconds;

  RttEstimator(milliseconds initial, milliseconds minimum, milliseconds maximum)
      : minimum_(minimum), maximum_(maximum), rto_(std::clamp(initial, minimum, maximum)) {}

  // RFC 6298 §2.2 (the first sample) and §2.3 (later ones), α = 1/8, β = 1/4.
  // A sample also ends any backoff (§5.7).
  void add_sample(microseconds rtt) {
    if (!has_sample_) {
      smoothed_ = rtt;
      variance_ = rtt / 2;
      has_sample_ = true;
    } else {
      variance_ = (3 * variance_ + abs(smoothed_ - rtt)) / 4;
      smoothed_ = (7 * smoothed_ + rtt) / 8;
    }
    // RTO = SRTT + max(G, K*RTTVAR), K = 4, G the clock granularity (1 ms,
    // the tick of our timestamps), within [min_rto, max_rto] (§2.4, §2.5).
    const microseconds rto = smoothed_ + std::max<microseconds>(milliseconds(1), 4 * variance_);
    rto_ = std::clamp(std::chrono::ceil<milliseconds>(rto), minimum_, maximum_);
  }

  // §5.5: the timer expired; double the timeout, up to the maximum.
  void back_off() { rto_ = std::min(rto_ * 2, maximum_); }

  milliseconds rto() const { return rto_; }
  microseconds smoothed() const { return smoothed_; }
  microseconds variance() const { return variance_; }

 private:
  static microseconds abs(microseconds d) { return d < microseconds::zero() ? -d : d; }

  milliseconds minimum_;
  milliseconds maximum_;
  milliseconds rto_;
  bool has_sample_ = false;
  microseconds smoothed_{0};
  microseconds variance_{0};
};

}  // namespace utcp::tcp
