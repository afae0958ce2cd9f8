// Delivery rate estimation: draft-cheng-iccrg-delivery-rate-estimation §3,
// in bytes; the names in comments are the draft's.
#include "utcp/delivery_rate.hpp"

#include <algorithm>
#include <iterator>

namespace utcp {

using std::chrono::duration_cast;
using std::chrono::microseconds;

void DeliveryRateSampler::on_transmit(wire::SeqNumber start, wire::SeqNumber end, Instant now,
                                      bool nothing_in_flight) {
  if (!(start < end)) return;
  if (nothing_in_flight) first_sent_at_ = delivered_at_ = now;  // §3.2: a fresh start
  split_at(start);
  split_at(end);
  bool again = false;
  for (auto it = segments_.lower_bound(start); it != segments_.end() && it->first < end;) {
    again = true;
    it = segments_.erase(it);
  }
  segments_.emplace(start, Segment{end, now, first_sent_at_, delivered_at_, delivered_, app_limited_until_ != 0,
                                   again, false});
}

void DeliveryRateSampler::on_cumulative_ack(wire::SeqNumber ack, Instant now) {
  split_at(ack);
  while (!segments_.empty() && segments_.begin()->second.end <= ack) {
    const auto& [start, segment] = *segments_.begin();
    if (!segment.sacked) deliver(segment, segment.end - start, now);
    segments_.erase(segments_.begin());
  }
}

// Not split at the block's edges (a receiver SACKs whole segments; a forger
// must not grow the map byte by byte), as rack.hpp.
void DeliveryRateSampler::on_sack_block(wire::SeqNumber left, wire::SeqNumber right, Instant now) {
  if (!(left < right) || segments_.empty()) return;
  auto it = segments_.upper_bound(left);
  if (it != segments_.begin() && std::prev(it)->first == left) --it;
  for (; it != segments_.end() && it->second.end <= right; ++it) {
    if (it->second.sacked) continue;
    it->second.sacked = true;
    deliver(it->second, it->second.end - it->first, now);
  }
}

void DeliveryRateSampler::on_app_limited(std::uint32_t bytes_in_flight) {
  app_limited_until_ = std::max<std::uint64_t>(delivered_ + bytes_in_flight, 1);
}

// §3.3 UpdateRateSample: of the segments one ACK delivers, the one sent
// last (the highest delivered count when sent; sent later on a tie) gives
// the sample.
void DeliveryRateSampler::deliver(const Segment& segment, std::uint32_t length, Instant now) {
  delivered_ += length;
  delivered_at_ = now;
  if (!pending_) pending_.emplace();
  pending_->newly_delivered += length;
  const bool newer = pending_->newly_delivered == length || segment.delivered > pending_->prior_delivered ||
                     (segment.delivered == pending_->prior_delivered && segment.sent_at > pending_->sent_at);
  if (!newer) return;
  pending_->prior_delivered = segment.delivered;
  pending_->prior_time = segment.delivered_at;
  pending_->sent_at = segment.sent_at;
  pending_->send_elapsed = duration_cast<microseconds>(segment.sent_at - segment.first_sent_at);
  pending_->app_limited = segment.app_limited;
  pending_->retransmitted = segment.retransmitted;
  first_sent_at_ = segment.sent_at;
}

std::optional<RateSample> DeliveryRateSampler::take_sample(Instant now) {
  if (!pending_) return std::nullopt;
  const Pending taken = *pending_;
  pending_.reset();
  // §3.3: the app-limited period ends once what was in flight at its mark is delivered.
  if (app_limited_until_ != 0 && delivered_ > app_limited_until_) app_limited_until_ = 0;
  RateSample sample;
  sample.now = now;
  sample.total_delivered = delivered_;
  sample.prior_delivered = taken.prior_delivered;
  sample.delivered = delivered_ - taken.prior_delivered;
  sample.newly_delivered = taken.newly_delivered;
  sample.is_app_limited = taken.app_limited;
  if (!taken.retransmitted) {  // a retransmission's ACK may answer either transmission (Karn)
    const auto rtt = duration_cast<microseconds>(now - taken.sent_at);
    sample.rtt = rtt;
    if (!min_rtt_ || rtt < *min_rtt_) min_rtt_ = rtt;
  }
  // §3.3: the longer of the send and ACK intervals; one shorter than the
  // minimum RTT cannot be (ACK compression, or a stretched send phase) and
  // gives no sample.
  const auto ack_elapsed = duration_cast<microseconds>(delivered_at_ - taken.prior_time);
  const microseconds interval = std::max(taken.send_elapsed, ack_elapsed);
  if (interval.count() > 0 && (!min_rtt_ || interval >= *min_rtt_)) sample.interval = interval;
  return sample;
}

void DeliveryRateSampler::split_at(wire::SeqNumber point) {
  auto it = segments_.upper_bound(point);
  if (it == segments_.begin()) return;
  --it;
  if (!(it->first < point && point < it->second.end)) return;
  Segment tail = it->second;
  it->second.end = point;
  segments_.emplace(point, tail);
}

}  // namespace utcp
