// RACK-TLP (RFC 8985), the sender's loss detection with SACK: every
// segment outstanding is remembered with when it was last sent, whether
// the peer SACKed it and whether it is deemed lost. A segment is lost once
// a segment sent after it was delivered and a reordering window has passed
// since (time, not the count of duplicate ACKs: a lost retransmission is
// found as a lost original is, and reordering within the window is not
// loss). It is also the SACK scoreboard: the pipe (RFC 6675's bytes still
// in the network) and the next lost segment to send come from it. The tail
// loss probe's timeout is computed here; sending it is the connection's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>

#include "utcp/reassembly.hpp"  // Instant
#include "utcp/seq.hpp"

namespace utcp::tcp {

class Rack {
 public:
  using Duration = std::chrono::microseconds;
  static constexpr int duplicate_threshold = 3;  // RFC 8985 §6.2 step 4's DupThresh
  static constexpr int recoveries_widened = 16;   // RFC 8985 §6.2 step 4's RACK.reo_wnd_persist

  struct Range {
    wire::SeqNumber start;
    wire::SeqNumber end;
  };

  void clear() {
    segments_ = {};
    sacked_segments_ = lost_segments_ = retransmitted_segments_ = 0;
    pipe_ = 0;
  }
  bool empty() const { return segments_.empty(); }

  // [start, end) went out at `now` (with `timestamp` as its TSval, when
  // timestamps are in use): the first time, or again (then any mark of
  // loss or SACK on it is gone: it is in the network once more).
  void on_transmit(wire::SeqNumber start, wire::SeqNumber end, Instant now, std::optional<std::uint32_t> timestamp) {
    if (!(start < end)) return;
    split_at(start);
    split_at(end);
    bool again = false;
    for (auto it = segments_.lower_bound(start); it != segments_.end() && it->first < end;) {
      again = true;
      forget(it);
      it = segments_.erase(it);
    }
    segments_.emplace(start, Segment{end, now, timestamp, ++transmissions_, again});
    if (again) ++retransmitted_segments_;
    pipe_ += static_cast<std::uint32_t>(end - start);
  }

  // An ACK arrived: what it delivers (on_cumulative_ack, on_sack_block) sets RACK.rtt afresh.
  void on_ack() { newest_in_ack_ = 0; }

  // SND.UNA moved to `ack`, by an ACK echoing `echoed` (its TSecr, when
  // timestamps are in use): what lies below is delivered and forgotten.
  // (RFC 7323 §4.3 makes the echo that of the segment that moved the
  // peer's RCV.NXT: of the original or of the retransmission, whichever
  // filled the hole.)
  void on_cumulative_ack(wire::SeqNumber ack, Instant now, std::optional<std::uint32_t> echoed) {
    split_at(ack);
    while (!segments_.empty() && segments_.begin()->second.end <= ack) {
      Segment& segment = segments_.begin()->second;
      if (!segment.sacked) on_delivered(segment, now, echoed);
      forget(segments_.begin());
      segments_.erase(segments_.begin());
    }
  }

  // A SACK block, in an ACK echoing `echoed` (its TSecr, when timestamps
  // are in use): the segments wholly inside it are delivered. (Not split at
  // its edges: a receiver SACKs whole segments, and splitting at edges a
  // forger chose would let it grow the map byte by byte.)
  void on_sack_block(wire::SeqNumber left, wire::SeqNumber right, Instant now, std::optional<std::uint32_t> echoed) {
    if (!(left < right) || segments_.empty()) return;
    auto it = segments_.upper_bound(left);
    if (it != segments_.begin() && std::prev(it)->first == left) --it;
    for (; it != segments_.end() && it->second.end <= right; ++it) {
      Segment& segment = it->second;
      if (segment.sacked) continue;
      if (segment.lost) --lost_segments_;
      else pipe_ -= static_cast<std::uint32_t>(segment.end - it->first);
      segment.sacked = true;
      segment.lost = false;
      ++sacked_segments_;
      on_delivered(segment, now, echoed);
    }
  }

  // RFC 8985 §6.2 step 5: marks lost every segment sent before the most
  // recently delivered one whose time is up, that is RACK.rtt plus the
  // reordering window after it was sent. Returns how long until the next
  // one's time is up, if one is waiting (the reordering timer).
  //
  // Segments sent once went in sequence order, so past the first of them
  // sent after the delivered one, none judged is left but retransmissions:
  // with none outstanding the scan ends there, and an ACK in a loss-free
  // stream costs a step or two, not one per segment in flight.
  std::optional<Duration> detect_losses(Instant now, Duration smoothed_rtt, bool in_recovery) {
    if (delivered_order_ == 0) return std::nullopt;
    const Duration window = reordering_window(smoothed_rtt, in_recovery);
    std::optional<Duration> wait;
    for (auto& [start, segment] : segments_) {
      if (segment.sent_order > delivered_order_ && retransmitted_segments_ == 0) break;
      if (segment.sacked || segment.lost || segment.sent_order > delivered_order_) continue;
      const auto remaining = std::chrono::duration_cast<Duration>(segment.sent_at + rtt_ + window - now);
      if (remaining <= Duration::zero()) {
        segment.lost = true;
        ++lost_segments_;
        ++segments_marked_lost_;
        pipe_ -= static_cast<std::uint32_t>(segment.end - start);
      } else {
        wait = std::max(wait.value_or(Duration::zero()), remaining);
      }
    }
    return wait;
  }

  // A D-SACK (RFC 2883) reported data received twice: the path reorders
  // (or a retransmission was spurious), so the reordering window widens by
  // a quarter of the minimum RTT, at most once a round trip, and stays so
  // for the next sixteen recoveries (RFC 8985 §6.2 step 4). The round ends
  // as Linux's tcp_rack_update_reo_wnd ends it: once a segment sent after
  // the widening is delivered, SACKed or acknowledged. (The RFC waits for
  // SND.UNA to pass what was sent by then, which a hole holds back: under
  // steady loss and reordering the window grew once in many round trips
  // and spurious retransmissions went on.) Call it after the ACK's SACK
  // blocks are taken: what the ACK delivers counts.
  void on_duplicate_reported() {
    reordering_seen_ = true;
    if (widened_after_ && delivered_order_ > *widened_after_) widened_after_.reset();
    if (widened_after_) return;
    widened_after_ = transmissions_;
    ++reordering_window_multiple_;
    recoveries_to_keep_widened_ = recoveries_widened;
  }

  // A fast recovery or a timeout's ended (step 4's "else"): after sixteen
  // with no D-SACK between, the window narrows back to one quarter of the
  // minimum RTT, so that reordering seen once does not slow loss detection
  // for ever.
  void on_recovery_exit() {
    if (recoveries_to_keep_widened_ > 0 && --recoveries_to_keep_widened_ == 0) reordering_window_multiple_ = 1;
  }

  // A retransmission timeout (RFC 8985 §6.3, RFC 6675 §5.1), as Linux's
  // tcp_timeout_mark_lost: the SACK marks stay, and every segment not
  // SACKed is lost but those sent within RACK.rtt (the first outstanding
  // always), so that recovery repairs the holes, not what arrived. Unless
  // the receiver reneged (RFC 2018 §8 lets it discard what it SACKed): the
  // first segment outstanding SACKed means that the peer acknowledged up
  // to it and not past; then the marks go, everything is in the network
  // again, and the sender goes back N. Returns whether the marks stayed.
  bool on_timeout(Instant now) {
    const bool reneged = !segments_.empty() && segments_.begin()->second.sacked;
    pipe_ = 0;
    lost_segments_ = 0;
    if (reneged) sacked_segments_ = 0;
    for (auto& [start, segment] : segments_) {
      if (reneged)
        segment.sacked = segment.lost = false;
      else if (!segment.sacked)
        segment.lost = start == segments_.begin()->first || segment.sent_at + rtt_ <= now;
      if (segment.lost)
        ++lost_segments_;
      else if (!segment.sacked)
        pipe_ += static_cast<std::uint32_t>(segment.end - start);
    }
    return !reneged;
  }

  bool any_sacked() const { return sacked_segments_ > 0; }
  bool any_lost() const { return lost_segments_ > 0; }
  // Segments detect_losses has marked lost, over the connection (a
  // delivery rate sample tells its controller how many one ACK marked).
  std::uint64_t segments_marked_lost() const { return segments_marked_lost_; }

  // RFC 6675's pipe: the bytes sent and neither SACKed nor deemed lost
  // (kept as the marks change: the sender asks for it per segment it sends).
  std::uint64_t pipe() const { return pipe_; }

  // The first segment deemed lost and not sent again since.
  std::optional<Range> first_lost() const {
    for (const auto& [start, segment] : segments_)
      if (segment.lost) return Range{start, segment.end};
    return std::nullopt;
  }

  // The highest segment outstanding and not SACKed: what a tail loss probe
  // sends again when there is no new data (RFC 8985 §7.3).
  std::optional<Range> last_unsacked() const {
    for (auto it = segments_.rbegin(); it != segments_.rend(); ++it)
      if (!it->second.sacked) return Range{it->first, it->second.end};
    return std::nullopt;
  }

  std::optional<Duration> min_rtt() const { return min_rtt_; }

 private:
  struct Segment {
    wire::SeqNumber end;
    Instant sent_at;
    std::optional<std::uint32_t> timestamp;  // the TSval it last went with
    // Transmissions so far when it went: orders segments sent at the same
    // instant (RFC 8985 breaks such ties by sequence number, which puts a
    // retransmission before the originals sent after it the first time).
    std::uint64_t sent_order = 0;
    bool retransmitted = false;
    bool sacked = false;
    bool lost = false;
  };

  // What a segment about to be erased counted for.
  void forget(std::map<wire::SeqNumber, Segment>::const_iterator it) {
    if (it->second.sacked) --sacked_segments_;
    if (it->second.lost) --lost_segments_;
    if (it->second.retransmitted) --retransmitted_segments_;
    if (!it->second.sacked && !it->second.lost) pipe_ -= static_cast<std::uint32_t>(it->second.end - it->first);
  }

  // RFC 8985 §6.2 steps 2 and 3 for a segment just delivered, by an ACK
  // echoing `echoed` (none when unknown). Step 2 asks the echo of every
  // segment newly delivered, cumulatively or selectively: a SACK's echo is
  // of the last segment that arrived in order (RFC 7323 §4.3), so one older
  // than a SACKed retransmission cannot show that the retransmission
  // arrived, and a SACK of its original (reordered, not lost) is common.
  // Taken as the retransmission's, it made every segment sent before it lost
  // a reordering window later, retransmissions among them, whose originals'
  // SACKs did the same in turn: under issue 23's impairment, 84 k of 87 k
  // segments deemed lost in a 20 MB transfer.
  void on_delivered(const Segment& segment, Instant now, std::optional<std::uint32_t> echoed) {
    const auto rtt = std::chrono::duration_cast<Duration>(now - segment.sent_at);
    // Delivered before the one after it in sequence, though sent once: the path reorders.
    if (!segment.retransmitted && highest_delivered_ && segment.end < *highest_delivered_) reordering_seen_ = true;
    if (!highest_delivered_ || *highest_delivered_ < segment.end) highest_delivered_ = segment.end;
    if (!segment.retransmitted) min_rtt_ = std::min(min_rtt_.value_or(rtt), rtt);
    // A retransmission acknowledged sooner than any round trip can be, or by
    // an ACK echoing a TSval older than its own: the original's delivery,
    // which says nothing of when the retransmission went (step 2's two tests).
    if (segment.retransmitted && min_rtt_ && rtt < *min_rtt_) return;
    if (segment.retransmitted && echoed && segment.timestamp &&
        static_cast<std::int32_t>(*echoed - *segment.timestamp) < 0)
      return;
    // RACK.rtt: of the segment sent last among those this ACK delivers
    // (the RFC takes them in the order they were sent), though sent before
    // RACK.xmit_ts: an overtaking segment's short round trip must not judge
    // the segments it overtook once their own ACKs show the path's longer one.
    if (segment.sent_order > newest_in_ack_) {
      newest_in_ack_ = segment.sent_order;
      rtt_ = rtt;
    }
    delivered_order_ = std::max(delivered_order_, segment.sent_order);  // 0: none delivered yet
  }

  // RFC 8985 §6.2 step 4: until the path has shown it reorders, no wait in
  // recovery or once DupThresh segments are SACKed (as fast as DupThresh);
  // otherwise a quarter of the minimum RTT, at most one smoothed RTT.
  Duration reordering_window(Duration smoothed_rtt, bool in_recovery) const {
    if (!reordering_seen_ && (in_recovery || sacked_segments_ >= duplicate_threshold)) return Duration::zero();
    if (!min_rtt_) return Duration::zero();
    return std::min(reordering_window_multiple_ * *min_rtt_ / 4, smoothed_rtt);
  }

  // Cuts the segment holding `point` (not at its start) in two.
  void split_at(wire::SeqNumber point) {
    auto it = segments_.upper_bound(point);
    if (it == segments_.begin()) return;
    --it;
    if (!(it->first < point) || !(point < it->second.end)) return;
    Segment upper = it->second;
    it->second.end = point;
    if (upper.sacked) ++sacked_segments_;
    if (upper.lost) ++lost_segments_;
    if (upper.retransmitted) ++retransmitted_segments_;
    segments_.emplace_hint(std::next(it), point, upper);
  }

  std::map<wire::SeqNumber, Segment> segments_;  // start -> segment, disjoint, SND.UNA to SND.MAX
  std::size_t sacked_segments_ = 0;
  std::size_t lost_segments_ = 0;
  std::uint64_t segments_marked_lost_ = 0;
  std::size_t retransmitted_segments_ = 0;
  std::uint64_t pipe_ = 0;  // the bytes of the segments neither SACKed nor lost
  std::uint64_t transmissions_ = 0;
  // RACK.xmit_ts: the most recently sent segment delivered (by its
  // sent_order, the segments sent no later are the ones it judges); RACK.rtt:
  // of the last ACK's most recently sent segment delivered (on_delivered).
  std::uint64_t delivered_order_ = 0;
  Duration rtt_{0};
  std::uint64_t newest_in_ack_ = 0;  // the sent_order of the segment that set rtt_, in the ACK being taken
  std::optional<wire::SeqNumber> highest_delivered_;  // RACK.fack
  std::optional<Duration> min_rtt_;
  bool reordering_seen_ = false;
  int reordering_window_multiple_ = 1;              // RACK.reo_wnd_mult
  int recoveries_to_keep_widened_ = 0;              // RACK.reo_wnd_persist
  std::optional<std::uint64_t> widened_after_;       // RACK.dsack_round: the transmissions by the last widening
};

// RFC 8985 §7.2: the probe timeout, two smoothed RTTs (one second before
// any), plus the peer's worst delayed ACK when only one segment is out and
// the ACK of it may wait for a second.
inline std::chrono::microseconds probe_timeout(std::chrono::microseconds smoothed_rtt, bool one_segment_outstanding) {
  using namespace std::chrono_literals;
  constexpr std::chrono::microseconds worst_case_delayed_ack = 200ms;
  if (smoothed_rtt == 0us) return 1s;
  return 2 * smoothed_rtt + (one_segment_outstanding ? worst_case_delayed_ack : 0us);
}

}  // namespace utcp::tcp
