// Loss detection and recovery around a congestion controller: the third
// duplicate ACK starts fast retransmit and fast recovery (RFC 5681 §3.2),
// partial acknowledgments retransmit the next hole at once (RFC 6582), and
// a retransmission timeout starts over in slow start. With SACK (RFC 6675)
// the window is not inflated and partial ACKs force nothing: the connection
// sends what its scoreboard says while the pipe is below cwnd, and RACK
// (rack.hpp), not the third duplicate ACK, says when recovery begins. Either
// way the first two duplicate ACKs each let one new segment go (limited
// transmit, RFC 3042). The controller
// (utcp/congestion.hpp) sets cwnd and ssthresh at each of these events;
// the window inflation that keeps data flowing during fast recovery is kept
// here, apart from it, so that every controller recovers the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "utcp/congestion.hpp"
#include "utcp/seq.hpp"

namespace utcp::tcp {

class LossRecovery {
 public:
  explicit LossRecovery(std::unique_ptr<CongestionController> controller) : controller_(std::move(controller)) {}

  void start(std::uint32_t mss, wire::SeqNumber send_unacknowledged, Instant now) {
    mss_ = mss;
    recover_ = send_unacknowledged;
    started_ = true;
    controller_->start(mss, now);
  }

  // SACK-based recovery (RFC 6675) instead of NewReno's.
  void use_sack(bool sack) { sack_ = sack; }

  const CongestionController& controller() const { return *controller_; }
  bool started() const { return started_; }
  bool in_recovery() const { return in_fast_recovery_; }
  // What the sender may have in flight: the controller's cwnd, or during
  // fast recovery that window inflated by the segments that left the network.
  std::uint32_t window() const { return in_fast_recovery_ && !sack_ ? recovery_window_ : controller_->cwnd(); }
  // Limited transmit (RFC 3042): before recovery, one new segment past the
  // window for each of the first two duplicate ACKs, which keeps the ACK
  // clock going when the window is too small to produce three.
  std::uint32_t limited_transmit() const {
    return in_fast_recovery_ ? 0 : static_cast<std::uint32_t>(std::min(duplicate_acks_, 2)) * mss_;
  }
  CongestionPhase phase() const {
    if (in_fast_recovery_) return CongestionPhase::fast_recovery;
    if (after_timeout_) return CongestionPhase::timeout_recovery;
    return controller_->cwnd() < controller_->ssthresh() ? CongestionPhase::slow_start
                                                         : CongestionPhase::congestion_avoidance;
  }

  // An ACK that advanced SND.UNA to `ack` (ack.bytes_in_flight still
  // outstanding). Returns true for a partial ACK in fast recovery: the next
  // hole must be retransmitted at once (RFC 6582 §3.2 step 5).
  bool on_new_ack(const AckSample& sample, wire::SeqNumber ack) {
    duplicate_acks_ = 0;
    if (after_timeout_ && ack >= recover_) after_timeout_ = false;
    if (in_fast_recovery_) {
      if (ack >= recover_) {  // a full acknowledgment: recovery is over (step 4)
        in_fast_recovery_ = false;
        controller_->on_recovery_exit(sample.bytes_in_flight, sample.now);
        return false;
      }
      if (sack_) return false;  // the scoreboard says what goes next
      // Partial: deflate by the amount acknowledged, add back one segment if
      // that was at least one (step 5).
      recovery_window_ -= std::min(recovery_window_, sample.bytes_acknowledged);
      if (sample.bytes_acknowledged >= mss_) recovery_window_ += mss_;
      recovery_window_ = std::max(recovery_window_, mss_);
      return true;
    }
    controller_->on_ack(sample);
    return false;
  }

  // A duplicate ACK (RFC 5681 §2's definition) with `flight` bytes
  // outstanding, SND.UNA and SND.MAX as given. Returns true on the third
  // without SACK: retransmit the first unacknowledged segment now.
  bool on_duplicate_ack(std::uint32_t flight, wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max,
                        Instant now) {
    if (in_fast_recovery_) {
      // Each further duplicate: a segment has left the network (RFC 5681
      // §3.2 step 4); with SACK the pipe counts that.
      if (!sack_) recovery_window_ += mss_;
      return false;
    }
    ++duplicate_acks_;
    if (sack_ || duplicate_acks_ != 3) return false;
    return enter_recovery(flight, send_unacknowledged, send_max, now);
  }

  // Loss detected (the third duplicate ACK, or SACK's IsLost(SND.UNA + 1),
  // RFC 6675 §5): fast recovery begins unless one is going on. Returns
  // whether it began: retransmit the first unacknowledged segment now.
  bool enter_recovery(std::uint32_t flight, wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max,
                      Instant now) {
    // RFC 6582 §3.2 step 2 (RFC 6675 §5 step 2): no new recovery while the
    // ACKs are still about data sent before the last one began (or before
    // the last timeout).
    if (in_fast_recovery_ || send_unacknowledged < recover_) return false;
    // RFC 5681 §3.2 step 2: what limited transmit sent past cwnd is no part
    // of the FlightSize reduced. With SACK that is all the pipe let go while
    // RACK waited, up to as much again as cwnd: counted, the reduction could
    // leave ssthresh above the cwnd the loss happened at.
    controller_->on_enter_recovery(std::min(flight, controller_->cwnd()), now);
    recovery_window_ = controller_->cwnd() + 3 * mss_;  // the three segments the duplicates stand for (step 3)
    recover_ = send_max;
    in_fast_recovery_ = true;
    after_timeout_ = false;
    retransmitted_in_recovery_.clear();
    undo_possible_ = true;
    return true;
  }

  // [start, end) was sent again; during fast recovery it is one of the
  // retransmissions that D-SACK may show spurious.
  void on_retransmission(wire::SeqNumber start, wire::SeqNumber end) {
    if (!in_fast_recovery_ || !undo_possible_) return;
    if (retransmitted_in_recovery_.size() == max_retransmissions_to_undo) {
      undo_possible_ = false;  // too many to follow: the reduction stays
      retransmitted_in_recovery_.clear();
      return;
    }
    retransmitted_in_recovery_.push_back({start, end});
  }

  // The peer reported [left, right) received twice (a D-SACK, RFC 2883).
  // The retransmissions of the last fast recovery inside it arrived twice;
  // once all of them have, the recovery was spurious and is undone: the
  // controller goes back to its window from before (RFC 3708's response,
  // as Linux's undo), fast recovery ends, and a later loss may start a new
  // one at once. Returns whether it was undone.
  bool on_duplicate_reported(wire::SeqNumber left, wire::SeqNumber right, wire::SeqNumber send_unacknowledged,
                             Instant now) {
    if (!undo_possible_ || retransmitted_in_recovery_.empty()) return false;
    std::erase_if(retransmitted_in_recovery_,
                  [&](const Retransmission& sent) { return left <= sent.start && sent.end <= right; });
    if (!retransmitted_in_recovery_.empty()) return false;
    undo_possible_ = false;
    controller_->on_spurious_recovery(now);
    in_fast_recovery_ = false;
    recover_ = send_unacknowledged;
    return true;
  }

  // The retransmission timer expired; RFC 6582 §4 remembers where the loss
  // episode ends.
  void on_timeout(std::uint32_t flight, wire::SeqNumber send_max, Instant now) {
    controller_->on_rto(flight, now);
    in_fast_recovery_ = false;
    undo_possible_ = false;  // only a fast recovery is undone
    retransmitted_in_recovery_.clear();
    after_timeout_ = true;
    duplicate_acks_ = 0;
    recover_ = send_max;
  }

 private:
  struct Retransmission {
    wire::SeqNumber start;
    wire::SeqNumber end;
  };
  // Retransmissions of one recovery followed for undoing it; past this
  // many (a window of about 1 MiB) it is not undone.
  static constexpr std::size_t max_retransmissions_to_undo = 1024;

  std::unique_ptr<CongestionController> controller_;
  std::uint32_t mss_ = 536;
  std::uint32_t recovery_window_ = 0;
  wire::SeqNumber recover_;
  int duplicate_acks_ = 0;
  bool started_ = false;
  bool in_fast_recovery_ = false;
  bool after_timeout_ = false;
  bool sack_ = false;
  std::vector<Retransmission> retransmitted_in_recovery_;
  bool undo_possible_ = false;
};

}  // namespace utcp::tcp
