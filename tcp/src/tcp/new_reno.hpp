// NewReno congestion control: slow start and congestion avoidance (RFC
// 5681 §3.1), fast retransmit and fast recovery with RFC 6582's handling of
// partial acknowledgments. It owns cwnd and ssthresh; the connection tells
// it what the acknowledgments say and retransmits when it is told to.
#pragma once

#include <algorithm>
#include <cstdint>

#include "utcp/seq.hpp"

namespace utcp::tcp {

class NewReno {
 public:
  // RFC 6928's initial window; ssthresh starts "arbitrarily high" (RFC 5681 §3.1).
  void start(std::uint32_t mss, wire::SeqNumber send_unacknowledged) {
    mss_ = mss;
    window_ = std::min(10 * mss, std::max(2 * mss, 14600u));
    threshold_ = 1u << 30;
    recover_ = send_unacknowledged;
  }

  std::uint32_t window() const { return window_; }
  std::uint32_t slow_start_threshold() const { return threshold_; }
  bool in_recovery() const { return in_recovery_; }

  // An ACK that advanced SND.UNA to `ack`, acknowledging `acked` bytes, with
  // `flight` bytes still outstanding. Returns true for a partial ACK in fast
  // recovery: the next hole must be retransmitted at once (RFC 6582 §3.2 step 5).
  bool on_new_ack(std::uint32_t acked, wire::SeqNumber ack, std::uint32_t flight) {
    duplicate_acks_ = 0;
    if (in_recovery_) {
      if (ack >= recover_) {  // a full acknowledgment: leave recovery, deflating the window (step 4, option 1)
        window_ = std::min(threshold_, std::max(flight, mss_) + mss_);
        in_recovery_ = false;
        return false;
      }
      // Partial: deflate by the amount acknowledged, add back one segment if
      // that was at least one (step 5).
      window_ -= std::min(window_, acked);
      if (acked >= mss_) window_ += mss_;
      window_ = std::max(window_, mss_);
      return true;
    }
    if (window_ < threshold_) {
      window_ += std::min(acked, mss_);  // slow start, RFC 5681 eq. 2
    } else {
      window_ += std::max(1u, mss_ * mss_ / window_);  // congestion avoidance, eq. 3
    }
    return false;
  }

  // A duplicate ACK (RFC 5681 §2's definition) with `flight` bytes
  // outstanding, SND.UNA and SND.MAX as given. Returns true on the third:
  // retransmit the first unacknowledged segment now.
  bool on_duplicate_ack(std::uint32_t flight, wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max) {
    if (in_recovery_) {
      window_ += mss_;  // each further duplicate: a segment has left the network (RFC 5681 §3.2 step 4)
      return false;
    }
    if (++duplicate_acks_ != 3) return false;
    // RFC 6582 §3.2 step 2: no new recovery while the ACKs are still about
    // data sent before the last one began (or before the last timeout).
    if (send_unacknowledged < recover_) return false;
    threshold_ = std::max(flight / 2, 2 * mss_);  // RFC 5681 eq. 4
    window_ = threshold_ + 3 * mss_;
    recover_ = send_max;
    in_recovery_ = true;
    return true;
  }

  // The retransmission timer expired: one segment, and ssthresh halved
  // (RFC 5681 §3.1 eq. 4); RFC 6582 §4 remembers where the loss episode ends.
  void on_timeout(std::uint32_t flight, wire::SeqNumber send_max) {
    threshold_ = std::max(flight / 2, 2 * mss_);
    window_ = mss_;
    in_recovery_ = false;
    duplicate_acks_ = 0;
    recover_ = send_max;
  }

 private:
  std::uint32_t mss_ = 536;
  std::uint32_t window_ = 0;
  std::uint32_t threshold_ = 1u << 30;
  wire::SeqNumber recover_;
  int duplicate_acks_ = 0;
  bool in_recovery_ = false;
};

}  // namespace utcp::tcp
