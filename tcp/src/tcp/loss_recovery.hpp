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
//
// Undo. RFC 2883 §5 (D-SACK) and RFC 3522 (Eifel, timestamps) tell a
// spurious retransmission; RFC 3708 and RFC 4015 leave open how far to
// trust them. utcp trusts them as Linux's default TCP does, because that is
// what it is measured against on the same impaired path (issue 23): on a
// path that duplicates and reorders, Linux undoes most reductions and keeps
// a window many times larger than one that halves once per loss. So each
// loss episode (a fast recovery, or a timeout and what it resends) keeps
// where it began (Linux's undo_marker) and how many segments it resent
// (undo_retrans); a D-SACK counts against those as tcp_check_dsack and
// tcp_sacktag_one count it (on_duplicate_reported), an ACK echoing a TSval
// older than the first retransmission's shows the hole filled by the
// original (tcp_packet_delayed), and either undoes the reduction: the
// controller goes back to its window from before, and after a timeout the
// sender goes on with new data rather than back N (RFC 4015).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
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
  // Every ACK's delivery rate sample goes to the controller, in recovery too.
  void on_rate_sample(const RateSample& sample) { controller_->on_rate_sample(sample); }
  std::optional<double> pacing_rate() const { return started_ ? controller_->pacing_rate() : std::nullopt; }
  bool started() const { return started_; }
  bool in_recovery() const { return in_fast_recovery_; }
  // In fast recovery, or repairing what a timeout found lost.
  bool recovering() const { return in_fast_recovery_ || after_timeout_; }
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
  // outstanding), echoing `echoed` (its TSecr, when timestamps are in use).
  //
  // First, Eifel: an ACK covering every retransmission of the episode that
  // echoes a TSval older than the first of them was sent for data that
  // arrived before any retransmission did; the episode was spurious and is
  // undone (timeout_undone after a timeout: the connection must not go
  // back N). Then retransmit_next_hole for a partial ACK in NewReno's fast
  // recovery: the next hole goes at once (RFC 6582 §3.2 step 5).
  enum class AckOutcome { none, retransmit_next_hole, timeout_undone };
  AckOutcome on_new_ack(const AckSample& sample, wire::SeqNumber ack, std::optional<std::uint32_t> echoed) {
    const bool was_after_timeout = after_timeout_;
    const bool undone = undo_if_delayed(ack, echoed, sample.now);
    const bool partial = take_new_ack(sample, ack);
    if (undone && was_after_timeout) return AckOutcome::timeout_undone;
    return partial ? AckOutcome::retransmit_next_hole : AckOutcome::none;
  }

 private:
  // Returns true for a partial ACK in NewReno's recovery.
  bool take_new_ack(const AckSample& sample, wire::SeqNumber ack) {
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
    // Outside recovery `recover` follows SND.UNA: left behind, it would read
    // as ahead of it after 2 GiB without a loss (sequence numbers compare
    // modulo 2^32), and no fast recovery could begin for the next 2 GiB.
    if (recover_ < ack) recover_ = ack;
    controller_->on_ack(sample);
    return false;
  }

 public:

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
    begin_episode(send_unacknowledged);
    return true;
  }

  // [start, end), one segment, was sent again (with `timestamp` as its
  // TSval when timestamps are in use). Within a loss episode it is one of
  // the retransmissions a D-SACK may show spurious, and the first one's
  // TSval is what Eifel compares echoes with.
  void on_retransmission(wire::SeqNumber start, wire::SeqNumber end, std::optional<std::uint32_t> timestamp) {
    ++segments_retransmitted_;
    if (!episode_) return;
    if (episode_->retransmissions.size() == max_retransmissions_to_undo) {
      episode_.reset();  // too many to follow: the reduction stays
      return;
    }
    if (episode_->retransmissions.empty()) episode_->first_retransmission_timestamp = timestamp;
    episode_->highest_retransmitted_end =
        episode_->retransmissions.empty() ? end : std::max(episode_->highest_retransmitted_end, end);
    episode_->retransmissions.push_back({start, end});
    ++episode_->retransmissions_unreported;
  }

  // What a D-SACK did to the episode.
  enum class DuplicateOutcome {
    dubious,  // more segments reported twice than were ever sent twice: ignored (Linux's tcp_dsack_seen)
    counted,
    undone,
  };
  // The peer reported [left, right) received twice (a D-SACK, RFC 2883),
  // in an ACK that found SND.UNA at `prior_unacknowledged` and left it at
  // `send_unacknowledged`. As tcp_check_dsack and tcp_sacktag_one count it:
  // ending past where the episode began, and below the prior SND.UNA, it
  // counts whatever it duplicated (a retransmission, or a segment the
  // network sent twice: Linux's "dumb counting" for data already forgotten);
  // above it, only where it covers a retransmission of the episode. Each
  // segment reported counts one against the episode's retransmissions; at
  // none left the episode is undone: the controller goes back to its window
  // from before, fast recovery or the timeout's ends, and a later loss may
  // start a new episode at once.
  DuplicateOutcome on_duplicate_reported(wire::SeqNumber left, wire::SeqNumber right,
                                         wire::SeqNumber prior_unacknowledged, wire::SeqNumber send_unacknowledged,
                                         Instant now) {
    const std::uint32_t segments = std::max<std::uint32_t>(1, (static_cast<std::uint32_t>(right - left) + mss_ - 1) / mss_);
    segments_reported_twice_ += segments;
    if (segments_reported_twice_ > segments_retransmitted_) return DuplicateOutcome::dubious;
    if (!episode_ || episode_->retransmissions_unreported == 0 || !(episode_->began_at < right))
      return DuplicateOutcome::counted;
    const bool covers_a_retransmission = std::ranges::any_of(
        episode_->retransmissions, [&](const Retransmission& sent) { return left < sent.end && sent.start < right; });
    if (prior_unacknowledged < right && !covers_a_retransmission) return DuplicateOutcome::counted;
    episode_->retransmissions_unreported -= std::min(episode_->retransmissions_unreported, segments);
    if (episode_->retransmissions_unreported > 0) return DuplicateOutcome::counted;
    undo(send_unacknowledged, now);
    return DuplicateOutcome::undone;
  }

  // The retransmission timer expired; RFC 6582 §4 remembers where the loss
  // episode ends. A timeout during a recovery, or after one not yet
  // repaired, goes on with that episode (what an undo restores is from
  // before it began).
  void on_timeout(std::uint32_t flight, wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max, Instant now) {
    const bool within_episode = recovering();
    controller_->on_rto(flight, within_episode, now);
    if (!within_episode) begin_episode(send_unacknowledged);
    in_fast_recovery_ = false;
    after_timeout_ = true;
    duplicate_acks_ = 0;
    recover_ = send_max;
  }

  std::uint64_t reductions_undone() const { return reductions_undone_; }

 private:
  struct Retransmission {
    wire::SeqNumber start;
    wire::SeqNumber end;
  };
  // Retransmissions of one episode followed for undoing it; past this many
  // (a window of about 1 MiB) it is not undone.
  static constexpr std::size_t max_retransmissions_to_undo = 1024;

  // The loss episode a D-SACK or an echo may still undo. It outlives its
  // recovery (a D-SACK often comes after it), until undone or the next one.
  struct Episode {
    // Declared, not implied: clang cannot make the implicit default
    // constructor of a nested class with member initializers while the
    // enclosing class is incomplete (optional::emplace() would not compile).
    explicit Episode(wire::SeqNumber began) : began_at(began) {}
    wire::SeqNumber began_at;  // SND.UNA when it began (Linux's undo_marker)
    std::vector<Retransmission> retransmissions;
    std::uint32_t retransmissions_unreported = 0;  // Linux's undo_retrans
    std::optional<std::uint32_t> first_retransmission_timestamp;  // Linux's retrans_stamp
    wire::SeqNumber highest_retransmitted_end;  // an ACK here or beyond leaves none of them outstanding
  };

  void begin_episode(wire::SeqNumber send_unacknowledged) {
    episode_.emplace(send_unacknowledged);
  }

  // Eifel's test where Linux makes it (tcp_try_undo_partial,
  // tcp_try_undo_recovery, tcp_try_undo_loss): during the recovery or
  // the timeout's repair, on an ACK covering all it resent.
  bool undo_if_delayed(wire::SeqNumber ack, std::optional<std::uint32_t> echoed, Instant now) {
    if (!echoed || !episode_ || !episode_->first_retransmission_timestamp || !recovering())
      return false;
    if (ack < episode_->highest_retransmitted_end) return false;
    if (static_cast<std::int32_t>(*echoed - *episode_->first_retransmission_timestamp) >= 0) return false;
    undo(ack, now);
    return true;
  }

  void undo(wire::SeqNumber send_unacknowledged, Instant now) {
    episode_.reset();
    ++reductions_undone_;
    controller_->on_spurious_recovery(now);
    in_fast_recovery_ = false;
    after_timeout_ = false;
    recover_ = send_unacknowledged;
  }

  std::unique_ptr<CongestionController> controller_;
  std::uint32_t mss_ = 536;
  std::uint32_t recovery_window_ = 0;
  wire::SeqNumber recover_;
  int duplicate_acks_ = 0;
  bool started_ = false;
  bool in_fast_recovery_ = false;
  bool after_timeout_ = false;
  bool sack_ = false;
  std::optional<Episode> episode_;
  // Over the connection, for telling dubious D-SACKs.
  std::uint64_t segments_retransmitted_ = 0;
  std::uint64_t segments_reported_twice_ = 0;
  std::uint64_t reductions_undone_ = 0;
};

}  // namespace utcp::tcp
