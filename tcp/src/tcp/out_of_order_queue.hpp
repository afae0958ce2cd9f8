// Segments that arrived ahead of RCV.NXT, kept sorted by sequence number
// until the hole in front of them fills (RFC 9293 §3.10.7.4: "segments with
// higher beginning sequence numbers SHOULD be held for later processing").
// Every segment held lies inside the receive window, so comparing sequence
// numbers modulo 2^32 orders them consistently.
//
// What is held never overlaps: a segment is trimmed to the bytes not held
// yet (and replaces the ones it covers whole), so the bytes held stay within
// the window however a peer overlaps its segments; a map makes each
// insertion O(log n) in any order. The segments are bounded per connection
// and, through a budget shared by all connections, per stack; past a bound
// the segments furthest ahead go first (as Linux prunes its queue), since
// the ones nearest RCV.NXT are the next to be delivered.
//
// A segment that continues the one held before it joins it (up to
// max_piece_bytes, as GRO joins up to 64 KiB): while a hole waits, the
// segments behind it arrive in order, and held one by one each cost a map
// node and an allocation, and a SACK block a walk over all of them. So a
// "segment" held is a piece of contiguous data, and the bounds on segments
// count pieces (what costs overhead), the bounds on bytes the bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "utcp/seq.hpp"
#include "utcp/tcp_connection.hpp"  // TcpOutOfOrderBudget

namespace utcp::tcp {

class OutOfOrderQueue {
 public:
  struct Segment {
    wire::SeqNumber sequence;
    std::vector<std::uint8_t> bytes;
    bool fin = false;
    wire::SeqNumber end() const { return sequence + static_cast<std::uint32_t>(bytes.size()) + (fin ? 1 : 0); }
  };

  // shared may be null: no bound beyond max_segments.
  OutOfOrderQueue(std::size_t max_segments, TcpOutOfOrderBudget* shared) : max_segments_(max_segments), shared_(shared) {}
  OutOfOrderQueue(const OutOfOrderQueue&) = delete;
  OutOfOrderQueue& operator=(const OutOfOrderQueue&) = delete;
  ~OutOfOrderQueue() { clear(); }

  bool empty() const { return segments_.empty(); }
  std::size_t size() const { return segments_.size(); }
  std::size_t bytes() const { return bytes_; }

  // Holds the part of the segment not held already. Returns how many
  // segments the bounds cost: this one, or ones further ahead.
  std::size_t insert(wire::SeqNumber sequence, std::span<const std::uint8_t> bytes, bool fin) {
    // Above this a piece takes no more: a piece is what the bounds drop at once.
    constexpr std::size_t max_piece_bytes = 64 * 1024;
    wire::SeqNumber start = sequence;
    const wire::SeqNumber end = sequence + static_cast<std::uint32_t>(bytes.size()) + (fin ? 1 : 0);
    auto next = segments_.lower_bound(start);
    if (next != segments_.begin()) {
      const Segment& previous = std::prev(next)->second;
      if (previous.end() >= end) return 0;  // a retransmission of what is held
      if (previous.end() > start) {
        bytes = bytes.subspan(std::min<std::size_t>(previous.end() - start, bytes.size()));
        start = previous.end();
      }
    }
    while (next != segments_.end() && next->first < end) {
      if (next->second.end() <= end) {  // covered whole: this segment replaces it
        next = erase(next);
        continue;
      }
      bytes = bytes.first(std::min<std::size_t>(next->first - start, bytes.size()));  // stops where it starts
      fin = false;
      break;
    }
    if (bytes.empty() && !fin) return 0;
    const auto joins = [&] {
      if (next == segments_.begin()) return false;
      const Segment& previous = std::prev(next)->second;
      return !previous.fin && previous.end() == start && previous.bytes.size() + bytes.size() <= max_piece_bytes;
    };
    std::size_t dropped = 0;
    while (over_bounds(bytes.size(), joins() ? 0 : 1)) {
      ++dropped;
      if (segments_.empty() || !(start < std::prev(segments_.end())->first)) return dropped;  // this one is furthest
      erase(std::prev(segments_.end()));
      next = segments_.lower_bound(start);  // the piece erased may have been `next`
    }
    if (joins()) {
      Segment& previous = std::prev(next)->second;
      previous.bytes.insert(previous.bytes.end(), bytes.begin(), bytes.end());
      previous.fin = fin;
      take(bytes.size(), 0);
      return dropped;
    }
    take(bytes.size(), 1);
    segments_.emplace_hint(next, start, Segment{start, {bytes.begin(), bytes.end()}, fin});
    return dropped;
  }

  // Removes and returns the first segment that reaches past `next` while
  // starting at or before it (its bytes before `next` are already
  // delivered); segments wholly before `next` are discarded on the way.
  std::optional<Segment> pop_reachable(wire::SeqNumber next) {
    while (!segments_.empty() && segments_.begin()->first <= next) {
      Segment front = std::move(segments_.begin()->second);
      give_back(front.bytes.size(), 1);
      segments_.erase(segments_.begin());
      if (front.end() > next) return front;
    }
    return std::nullopt;
  }

  // The first part of [start, end) held already (a segment that overlaps
  // it), if any: what a segment covering [start, end) would bring twice.
  std::optional<std::pair<wire::SeqNumber, wire::SeqNumber>> held_within(wire::SeqNumber start,
                                                                         wire::SeqNumber end) const {
    auto it = segments_.upper_bound(start);
    if (it != segments_.begin() && start < std::prev(it)->second.end()) --it;
    if (it == segments_.end() || !(it->first < end)) return std::nullopt;
    return std::pair{std::max(start, it->first), std::min(end, it->second.end())};
  }

  // The contiguous data held around `sequence` (a SACK block, RFC 2018),
  // looking at most max_run_segments segments each way from the one that
  // holds it (a block may report less than all that is contiguous; the
  // bound keeps an ACK's cost independent of how much is held). None if no
  // segment holds it.
  std::optional<std::pair<wire::SeqNumber, wire::SeqNumber>> run_around(wire::SeqNumber sequence) const {
    constexpr int max_run_segments = 64;
    auto holder = segments_.upper_bound(sequence);
    if (holder == segments_.begin()) return std::nullopt;
    --holder;
    if (!(sequence < holder->second.end())) return std::nullopt;
    auto first = holder;
    for (int i = 0; i < max_run_segments && first != segments_.begin(); ++i) {
      if (std::prev(first)->second.end() != first->first) break;
      --first;
    }
    auto last = holder;
    for (int i = 0; i < max_run_segments && std::next(last) != segments_.end(); ++i) {
      if (last->second.end() != std::next(last)->first) break;
      ++last;
    }
    return std::pair{first->first, last->second.end()};
  }

  void clear() {
    give_back(bytes_, segments_.size());
    segments_.clear();
  }

 private:
  using Map = std::map<wire::SeqNumber, Segment>;

  bool over_bounds(std::size_t more_bytes, std::size_t more_segments) const {
    if (segments_.size() + more_segments > max_segments_) return true;
    return shared_ && (shared_->segments + more_segments > shared_->max_segments ||
                       shared_->bytes + more_bytes > shared_->max_bytes);
  }
  Map::iterator erase(Map::iterator it) {
    give_back(it->second.bytes.size(), 1);
    return segments_.erase(it);
  }
  void take(std::size_t bytes, std::size_t segments) {
    bytes_ += bytes;
    if (shared_) {
      shared_->bytes += bytes;
      shared_->segments += segments;
    }
  }
  void give_back(std::size_t bytes, std::size_t segments) {
    bytes_ -= bytes;
    if (shared_) {
      shared_->bytes -= bytes;
      shared_->segments -= segments;
    }
  }

  std::size_t max_segments_;
  TcpOutOfOrderBudget* shared_;
  Map segments_;
  std::size_t bytes_ = 0;
};

}  // namespace utcp::tcp
