#include "utcp/reassembly.hpp"

#include <algorithm>
#include <cstring>

namespace utcp {

Reassembler::Reassembler(ReassemblyLimits limits) : limits_(limits) {
  // Smaller would make the largest datagram impossible to reassemble.
  limits_.max_bytes = std::max(limits_.max_bytes, wire::ipv4_max_total_length + entry_overhead);
}

std::optional<Reassembler::Datagram> Reassembler::offer(const wire::Ipv4Header& header,
                                                         std::span<const std::uint8_t> payload, Instant now) {
  ++counters_.fragments;
  const std::size_t offset = header.fragment_offset;
  const std::size_t end = offset + payload.size();
  if (payload.empty()) {
    ++counters_.malformed;
    return std::nullopt;
  }
  const Key key{header.source.value, header.destination.value, header.identification, header.protocol};
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& entry = it->second;
  if (inserted) {
    entry.deadline = now + limits_.timeout;
    entry.arrival = arrivals_++;
    make_room(entry_overhead, key);
    bytes_held_ += entry_overhead;
  }

  // Every fragment must agree with the end the last fragment gives.
  const bool consistent = header.more_fragments
                              ? !entry.total_length || end <= *entry.total_length
                              : (!entry.total_length || *entry.total_length == end) && end >= entry.data.size();
  if (!consistent) {
    ++counters_.malformed;
    discard(it);
    return std::nullopt;
  }

  // The fragment must fill part of a hole, unless it is an exact copy.
  const auto next = entry.fragments.lower_bound(offset);
  if (next != entry.fragments.end() && next->first == offset && next->second == end) {
    ++counters_.duplicates;
    return std::nullopt;
  }
  const bool overlaps_next = next != entry.fragments.end() && next->first < end;
  const bool overlaps_previous = next != entry.fragments.begin() && std::prev(next)->second > offset;
  if (overlaps_next || overlaps_previous) {
    ++counters_.overlaps;
    discard(it);
    return std::nullopt;
  }

  if (!header.more_fragments) entry.total_length = end;
  if (end > entry.data.size()) {
    const std::size_t growth = end - entry.data.size();
    make_room(growth, key);
    bytes_held_ += growth;
    entry.data.resize(end);
  }
  std::memcpy(entry.data.data() + offset, payload.data(), payload.size());
  entry.fragments.emplace(offset, end);
  entry.bytes_received += payload.size();
  if (offset == 0) entry.first_header = header;

  if (!entry.total_length || entry.bytes_received != *entry.total_length) return std::nullopt;
  Datagram datagram{entry.first_header, std::move(entry.data)};
  datagram.header.more_fragments = false;
  datagram.header.fragment_offset = 0;
  ++counters_.reassembled;
  bytes_held_ -= entry_overhead + datagram.payload.size();
  entries_.erase(it);
  return datagram;
}

std::size_t Reassembler::expire(Instant now) {
  std::size_t expired = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const auto current = it++;
    if (current->second.deadline > now) continue;
    ++counters_.timeouts;
    discard(current);
    ++expired;
  }
  return expired;
}

std::optional<Instant> Reassembler::next_deadline() const {
  std::optional<Instant> earliest;
  for (const auto& [key, entry] : entries_)
    if (!earliest || entry.deadline < *earliest) earliest = entry.deadline;
  return earliest;
}

void Reassembler::discard(std::map<Key, Entry>::iterator it) {
  bytes_held_ -= cost(it->second);
  entries_.erase(it);
}

void Reassembler::make_room(std::size_t extra, const Key& keep) {
  while (bytes_held_ + extra > limits_.max_bytes) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (!(it->first == keep) && (oldest == entries_.end() || it->second.arrival < oldest->second.arrival))
        oldest = it;
    if (oldest == entries_.end()) return;
    ++counters_.evicted;
    discard(oldest);
  }
}

}  // namespace utcp
