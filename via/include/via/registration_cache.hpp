// The pin-down cache: memory that RDMA transfers read from or write into is
// registered once, by whole pages, and the registration kept for the next
// transfer that touches the same memory. A region in use by a transfer is
// pinned and never evicted; the rest is evicted least recently used first
// once the cache holds more regions or bytes than its bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "via/via.hpp"

namespace via {

class RegistrationCache {
 public:
  // Registers with protection tag `ptag`; holds at most `max_entries`
  // regions and `max_bytes` bytes that no transfer uses.
  RegistrationCache(Nic& nic, Ptag ptag, std::size_t max_entries, std::size_t max_bytes)
      : nic_(nic), ptag_(ptag), max_entries_(max_entries), max_bytes_(max_bytes) {}
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A handle for a region covering [addr, addr+len) (at least the byte at
  // addr), registered for this rank's RDMA from and into it and for peers'
  // RDMA reads (a rendezvous receiver reads the sender's buffer); pinned
  // until the matching release(). invalid_parameter for a range that wraps
  // past the top of memory; the NIC's error when it cannot register (the
  // cache keeps what it held).
  Result acquire(const void* addr, std::size_t len, MemHandle& out);
  void release(MemHandle handle);
  // Forgets every unpinned region overlapping [addr, addr+len): call before
  // that memory is freed or registered otherwise.
  void invalidate(const void* addr, std::size_t len);

  std::size_t regions() const { return entries_.size(); }
  std::size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::uintptr_t begin, end;
    MemHandle handle;
    std::uint64_t last_use;
    int pins;
  };
  // Evicts unpinned regions, oldest first, until `entries` more regions and
  // `bytes` more bytes fit in the bounds (or nothing unpinned is left).
  void make_room(std::size_t entries, std::size_t bytes);
  void forget(std::size_t index);

  Nic& nic_;
  Ptag ptag_;
  std::size_t max_entries_, max_bytes_;
  std::vector<Entry> entries_;
  std::size_t bytes_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace via
