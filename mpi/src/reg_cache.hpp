// The pin-down cache: user buffers that rendezvous transfers read from or
// into are registered once, by whole pages, and the registration is kept
// for the next transfer that touches the same memory. Regions in use by a
// transfer are pinned and never evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "via/via.hpp"

namespace viastack::mpi {

class RegistrationCache {
 public:
  RegistrationCache(via::Nic& nic, via::Ptag ptag, std::size_t capacity) : nic_(nic), ptag_(ptag), capacity_(capacity) {}
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A handle for a region covering [addr, addr+len), registered for RDMA
  // read; pinned until the matching release().
  via::MemHandle acquire(const void* addr, std::size_t len);
  void release(via::MemHandle handle);

 private:
  struct Entry {
    std::uintptr_t begin, end;
    via::MemHandle handle;
    std::uint64_t last_use;
    int pins;
  };
  void evict_one_unpinned();

  via::Nic& nic_;
  via::Ptag ptag_;
  std::size_t capacity_;
  std::vector<Entry> entries_;
  std::uint64_t clock_ = 0;
};

}  // namespace viastack::mpi
