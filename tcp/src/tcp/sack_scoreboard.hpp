// The sender's SACK scoreboard (RFC 6675 §3): which sequence ranges above
// SND.UNA the receiver reported holding, and from them the holes between
// them, each with RFC 6675's IsLost() answer. Loss recovery asks it for the
// pipe (the bytes still in the network) and the next segment to send.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

#include "utcp/seq.hpp"

namespace utcp::tcp {

class SackScoreboard {
 public:
  // A range of sequence space not SACKed, between SND.UNA and SND.MAX.
  struct Hole {
    wire::SeqNumber start;
    wire::SeqNumber end;
    // IsLost() of every byte in it: DupThresh (3) SACKed ranges above it,
    // or more than (DupThresh - 1) MSS SACKed above it.
    bool lost = false;
  };

  // Ranges kept at most; past it the SACK information furthest ahead is
  // forgotten (ignoring SACK information is always safe, RFC 2018 §8).
  static constexpr std::size_t max_ranges = 256;
  static constexpr int duplicate_threshold = 3;

  bool empty() const { return ranges_.empty(); }
  void clear() { ranges_.clear(); }

  // A block from an ACK, taken if it lies within (SND.UNA, SND.MAX]; others
  // (old, reneged or forged) are ignored. Returns whether it SACKed bytes
  // not SACKed before.
  bool add(wire::SeqNumber left, wire::SeqNumber right, wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max) {
    if (!(send_unacknowledged < left) || !(left < right) || send_max < right) return false;
    auto next = ranges_.upper_bound(left);
    if (next != ranges_.begin()) {
      auto previous = std::prev(next);
      if (previous->second >= right) return false;  // known already
      if (previous->second >= left) {
        left = previous->first;
        next = ranges_.erase(previous);
      }
    }
    while (next != ranges_.end() && next->first <= right) {
      right = std::max(right, next->second);
      next = ranges_.erase(next);
    }
    ranges_.emplace_hint(next, left, right);
    while (ranges_.size() > max_ranges) ranges_.erase(std::prev(ranges_.end()));
    return true;
  }

  // SND.UNA moved: what is now acknowledged cumulatively leaves the board.
  void acknowledge(wire::SeqNumber send_unacknowledged) {
    while (!ranges_.empty() && !(send_unacknowledged < ranges_.begin()->second)) ranges_.erase(ranges_.begin());
    if (!ranges_.empty() && ranges_.begin()->first < send_unacknowledged) {
      const wire::SeqNumber right = ranges_.begin()->second;
      ranges_.erase(ranges_.begin());
      ranges_.emplace(send_unacknowledged, right);
    }
  }

  // The holes from SND.UNA to SND.MAX, in order. Whether a hole is lost
  // depends only on what is SACKed above it, so one walk from the top
  // answers IsLost() for all of them.
  std::vector<Hole> holes(wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max, std::uint32_t mss) const {
    std::vector<Hole> found;
    std::uint64_t sacked_above = 0;
    int ranges_above = 0;
    wire::SeqNumber top = send_max;
    auto lost = [&] {
      return ranges_above >= duplicate_threshold || sacked_above > (duplicate_threshold - 1) * std::uint64_t{mss};
    };
    for (auto it = ranges_.rbegin(); it != ranges_.rend(); ++it) {
      if (it->second < top) found.push_back({it->second, top, lost()});
      sacked_above += static_cast<std::uint32_t>(it->second - it->first);
      ++ranges_above;
      top = it->first;
    }
    if (send_unacknowledged < top) found.push_back({send_unacknowledged, top, lost()});
    std::reverse(found.begin(), found.end());
    return found;
  }

  // IsLost(SND.UNA): the first hole, if it starts there, is lost.
  bool first_unacknowledged_lost(wire::SeqNumber send_unacknowledged, wire::SeqNumber send_max,
                                 std::uint32_t mss) const {
    const std::vector<Hole> all = holes(send_unacknowledged, send_max, mss);
    return !all.empty() && all.front().start == send_unacknowledged && all.front().lost;
  }

 private:
  std::map<wire::SeqNumber, wire::SeqNumber> ranges_;  // left -> right, disjoint and apart
};

}  // namespace utcp::tcp
