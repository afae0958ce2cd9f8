// Segments that arrived ahead of RCV.NXT, kept sorted by sequence number
// until the hole in front of them fills (RFC 9293 §3.10.7.4: "segments with
// higher beginning sequence numbers SHOULD be held for later processing").
// Every segment held lies inside the receive window, so comparing sequence
// numbers modulo 2^32 orders them consistently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "utcp/seq.hpp"

namespace utcp::tcp {

class OutOfOrderQueue {
 public:
  struct Segment {
    wire::SeqNumber sequence;
    std::vector<std::uint8_t> bytes;
    bool fin = false;
    wire::SeqNumber end() const { return sequence + static_cast<std::uint32_t>(bytes.size()) + (fin ? 1 : 0); }
  };

  bool empty() const { return segments_.empty(); }
  std::size_t size() const { return segments_.size(); }
  std::size_t bytes() const {
    std::size_t total = 0;
    for (const Segment& segment : segments_) total += segment.bytes.size();
    return total;
  }

  // Holds a copy, unless a segment held at the same sequence number already
  // covers it (a retransmission).
  void insert(wire::SeqNumber sequence, std::span<const std::uint8_t> bytes, bool fin) {
    Segment segment{sequence, {bytes.begin(), bytes.end()}, fin};
    auto position = std::lower_bound(segments_.begin(), segments_.end(), sequence,
                                     [](const Segment& held, wire::SeqNumber seq) { return held.sequence < seq; });
    if (position != segments_.end() && position->sequence == sequence && position->end() >= segment.end()) return;
    segments_.insert(position, std::move(segment));
  }

  // Removes and returns the first segment that reaches past `next` while
  // starting at or before it (its bytes before `next` are already
  // delivered); segments wholly before `next` are discarded on the way.
  std::optional<Segment> pop_reachable(wire::SeqNumber next) {
    while (!segments_.empty() && segments_.front().sequence <= next) {
      Segment front = std::move(segments_.front());
      segments_.erase(segments_.begin());
      if (front.end() > next) return front;
    }
    return std::nullopt;
  }

 private:
  std::vector<Segment> segments_;
};

}  // namespace utcp::tcp
