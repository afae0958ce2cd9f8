// IPv4 reassembly (RFC 791 §3.2, "Reassembly"; RFC 815): fragments of one
// datagram, identified by source, destination, protocol and identification,
// are collected until they cover it from 0 to the end the last fragment
// gives, or until a timeout. The holes are the gaps between the fragments
// received, kept sorted by offset: the datagram is whole when the bytes
// received equal its length, since fragments never overlap here.
//
// Stricter than RFC 791, as Linux is since 2018 and RFC 5722 asks for IPv6:
// a fragment that partly overlaps one already received discards the whole
// datagram (overlaps are how attacks rewrite headers past a filter); an exact
// duplicate is dropped alone (links such as VIA unreliable VIs duplicate).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "utcp/ipv4.hpp"

namespace utcp {

using Instant = std::chrono::steady_clock::time_point;

struct ReassemblyLimits {
  // RFC 791 suggests 15 s as a lower bound; Linux uses 30 s.
  std::chrono::milliseconds timeout{30'000};
  // The bytes all datagrams being reassembled may hold, each counted by its
  // highest fragment end plus a fixed overhead per datagram and per
  // fragment. At least one largest datagram.
  std::size_t max_bytes = 4u << 20;
  // Datagrams being reassembled at once; a new one past it evicts the oldest.
  std::size_t max_datagrams = 1024;
  // Fragments one datagram may arrive in (a 64 KiB datagram over a 576-byte
  // MTU takes 119); one more discards it.
  std::size_t max_fragments_per_datagram = 128;
};

struct ReassemblyCounters {
  std::uint64_t fragments = 0;    // offered
  std::uint64_t reassembled = 0;  // datagrams completed
  std::uint64_t timeouts = 0;     // datagrams discarded incomplete when their time ran out
  std::uint64_t duplicates = 0;   // fragments dropped as exact copies of ones held
  std::uint64_t overlaps = 0;     // datagrams discarded for a partly overlapping fragment
  std::uint64_t malformed = 0;    // fragments inconsistent with the datagram's end, or empty
  std::uint64_t evicted = 0;      // datagrams discarded, oldest first, to stay within max_bytes or max_datagrams
  std::uint64_t too_many_fragments = 0;  // datagrams discarded past max_fragments_per_datagram
};

class Reassembler {
 public:
  struct Datagram {
    wire::Ipv4Header header;  // the first fragment's, with the fragment fields cleared
    std::vector<std::uint8_t> payload;
  };

  explicit Reassembler(ReassemblyLimits limits = {});

  // Takes one fragment (a packet with more_fragments set or a nonzero offset)
  // that arrived at `now`. Returns the datagram when this fragment completes it.
  std::optional<Datagram> offer(const wire::Ipv4Header& header, std::span<const std::uint8_t> payload, Instant now);
  // Discards the datagrams whose time ran out by `now`; returns how many.
  // For each whose first fragment (offset 0) arrived, calls on_timeout with
  // that fragment's header and payload, for ICMP time exceeded (RFC 1122
  // §3.2.2.4: without the first fragment, none is sent).
  using OnTimeout =
      std::function<void(const wire::Ipv4Header& first_fragment, std::span<const std::uint8_t> payload)>;
  std::size_t expire(Instant now, const OnTimeout& on_timeout = nullptr);
  // When the next datagram times out, if any is being reassembled.
  std::optional<Instant> next_deadline() const;

  std::size_t datagrams_pending() const { return entries_.size(); }
  std::size_t bytes_held() const { return bytes_held_; }
  const ReassemblyCounters& counters() const { return counters_; }

 private:
  struct Key {
    std::uint32_t source, destination;
    std::uint16_t identification;
    std::uint8_t protocol;
    friend auto operator<=>(const Key&, const Key&) = default;
  };
  struct Entry;
  using Entries = std::map<Key, Entry>;
  struct Entry {
    Instant deadline;
    std::list<Entries::iterator>::iterator age;  // its place in age_
    wire::Ipv4Header first_header;  // the first fragment's, once it arrived
    std::optional<std::size_t> total_length;  // known once the last fragment arrived
    std::map<std::size_t, std::size_t> fragments;  // offset -> end, disjoint
    std::size_t bytes_received = 0;
    std::vector<std::uint8_t> data;  // sized to the highest end seen
  };
  // What a datagram counts against max_bytes: its bytes, and a fixed
  // overhead for it and for each fragment (so that 8-byte fragments are not
  // nearly free).
  static constexpr std::size_t entry_overhead = 256;
  static constexpr std::size_t fragment_overhead = 64;
  static std::size_t cost(const Entry& entry) {
    return entry_overhead + entry.fragments.size() * fragment_overhead + entry.data.size();
  }

  void discard(Entries::iterator it);
  // Makes room for `extra` bytes by evicting the oldest datagrams but `keep`.
  void make_room(std::size_t extra, Entries::iterator keep);
  void evict_oldest_but(Entries::iterator keep);

  ReassemblyLimits limits_;
  // Found by key in O(log n); age_ lists them by their first fragment's
  // arrival, which (time moving forward and the timeout fixed) is also the
  // order of their deadlines: eviction and expiry take from its front, so
  // no fragment costs a scan of the datagrams pending.
  Entries entries_;
  std::list<Entries::iterator> age_;
  std::size_t bytes_held_ = 0;
  ReassemblyCounters counters_;
};

}  // namespace utcp
