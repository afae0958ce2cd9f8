#include "utcp/reassembly.hpp"

#include <algorithm>
#include <cstring>

namespace utcp {

Reassembler::Reassembler(ReassemblyLimits limits) : limits_(limits) {
  // Smaller would make the largest datagram impossible to reassemble.
  limits_.max_bytes = std::max(limits_.max_bytes, wire::ipv4_max_total_length + entry_overhead +
                                                      limits_.max_fragments_per_datagram * fragment_overhead);
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
    entry.age = age_.insert(age_.end(), it);
    if (entries_.size() > std::max<std::size_t>(limits_.max_datagrams, 1)) evict_oldest_but(it);
    make_room(entry_overhead, it);
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
  if (entry.fragments.size() >= limits_.max_fragments_per_datagram) {
    ++counters_.too_many_fragments;
    discard(it);
    return std::nullopt;
  }

  if (!header.more_fragments) entry.total_length = end;
  const std::size_t growth = fragment_overhead + (end > entry.data.size() ? end - entry.data.size() : 0);
  make_room(growth, it);
  bytes_held_ += growth;
  entry.data.resize(std::max(end, entry.data.size()));
  std::memcpy(entry.data.data() + offset, payload.data(), payload.size());
  entry.fragments.emplace(offset, end);
  entry.bytes_received += payload.size();
  if (offset == 0) entry.first_header = header;

  if (!entry.total_length || entry.bytes_received != *entry.total_length) return std::nullopt;
  Datagram datagram{entry.first_header, std::move(entry.data)};
  datagram.header.more_fragments = false;
  datagram.header.fragment_offset = 0;
  ++counters_.reassembled;
  entry.data.clear();  // moved out: discard counts the rest
  bytes_held_ -= datagram.payload.size();
  discard(it);
  return datagram;
}

std::size_t Reassembler::expire(Instant now, const OnTimeout& on_timeout) {
  std::size_t expired = 0;
  while (!age_.empty() && age_.front()->second.deadline <= now) {
    ++counters_.timeouts;
    const Entry& entry = age_.front()->second;
    if (on_timeout && !entry.fragments.empty() && entry.fragments.begin()->first == 0)
      on_timeout(entry.first_header, std::span(entry.data).first(entry.fragments.begin()->second));
    discard(age_.front());
    ++expired;
  }
  return expired;
}

std::optional<Instant> Reassembler::next_deadline() const {
  if (age_.empty()) return std::nullopt;
  return age_.front()->second.deadline;
}

void Reassembler::discard(Entries::iterator it) {
  bytes_held_ -= cost(it->second);
  age_.erase(it->second.age);
  entries_.erase(it);
}

void Reassembler::evict_oldest_but(Entries::iterator keep) {
  for (const Entries::iterator oldest : age_) {
    if (oldest == keep) continue;  // at most one step: keep is one datagram
    ++counters_.evicted;
    discard(oldest);
    return;
  }
}

void Reassembler::make_room(std::size_t extra, Entries::iterator keep) {
  while (bytes_held_ + extra > limits_.max_bytes && age_.size() > 1) evict_oldest_but(keep);
}

}  // namespace utcp
