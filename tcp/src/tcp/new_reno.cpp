// NewReno's window (RFC 5681 §3.1 and §3.2, RFC 6582 §3.2): what utcp did
// before congestion control became pluggable, unchanged.
#include <algorithm>

#include "utcp/congestion.hpp"

namespace utcp {

void NewRenoController::start(std::uint32_t mss, Instant) {
  mss_ = mss;
  window_ = initial_window(mss);
  bytes_acknowledged_in_window_ = 0;
  threshold_ = 1u << 30;  // "arbitrarily high" (RFC 5681 §3.1)
}

void NewRenoController::on_ack(const AckSample& ack) {
  if (window_ < threshold_) {
    window_ += std::min(ack.bytes_acknowledged, mss_);  // slow start, RFC 5681 eq. 2
    return;
  }
  // Congestion avoidance by byte counting, RFC 5681 §3.1's recommended way:
  // one SMSS per window of bytes acknowledged. Eq. 3 (per ACK) grew half as
  // fast against a receiver that acknowledges every second segment.
  bytes_acknowledged_in_window_ += ack.bytes_acknowledged;
  if (bytes_acknowledged_in_window_ >= window_) {
    bytes_acknowledged_in_window_ -= window_;
    window_ += mss_;
  }
}

void NewRenoController::save_for_undo() {
  window_before_recovery_ = window_;
  threshold_before_recovery_ = threshold_;
}

// RFC 5681 eq. 4; the connection inflates the window by three segments
// (and one per further duplicate ACK) while recovery lasts.
void NewRenoController::on_enter_recovery(std::uint32_t bytes_in_flight, Instant) {
  bytes_acknowledged_in_window_ = 0;
  save_for_undo();
  threshold_ = std::max(bytes_in_flight / 2, 2 * mss_);
  window_ = threshold_;
}

// RFC 6582 §3.2 step 4, the first option: no burst of more than one segment
// past what is still in flight.
void NewRenoController::on_recovery_exit(std::uint32_t bytes_in_flight, Instant) {
  window_ = std::min(threshold_, std::max(bytes_in_flight, mss_) + mss_);
}

// As if the loss had not been: the window grown since is kept if larger.
void NewRenoController::on_spurious_recovery(Instant) {
  window_ = std::max(window_, window_before_recovery_);
  threshold_ = std::max(threshold_, threshold_before_recovery_);
}

// One segment, and ssthresh halved (RFC 5681 §3.1 eq. 4).
void NewRenoController::on_rto(std::uint32_t bytes_in_flight, bool within_episode, Instant) {
  bytes_acknowledged_in_window_ = 0;
  if (!within_episode) save_for_undo();
  threshold_ = std::max(bytes_in_flight / 2, 2 * mss_);
  window_ = mss_;
}

}  // namespace utcp
