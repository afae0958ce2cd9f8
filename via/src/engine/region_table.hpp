// The registered-memory table of a NIC. It lives in memory the provider
// supplies (the shm provider puts it in the NIC's shared segment, so that a
// peer doing single-copy RDMA can check a region before touching it).
#pragma once

#include <atomic>
#include <cstdint>

#include "via/via.hpp"

namespace via {

struct RegionEntry {
  // The handle this entry currently answers to; 0 when free. Written last on
  // registration and first on deregistration.
  std::atomic<std::uint32_t> handle;
  // Odd while the attributes of a live entry change (a sequence lock).
  std::atomic<std::uint32_t> version;
  std::uint32_t ptag;
  std::uint64_t addr;
  std::uint64_t len;
  std::uint32_t rdma_write;
  std::uint32_t rdma_read;
};

// A handle is (generation << 16) | index; index 0 is never used, so 0 is no handle.
struct RegionTable {
  static constexpr std::uint32_t kMaxRegions = 16384;
  std::uint32_t generation[kMaxRegions];
  RegionEntry entries[kMaxRegions];

  static std::uint32_t index_of(MemHandle h) { return h & 0xFFFFu; }

  // Whether [addr, addr+len) lies in [base, base+size), without overflow.
  static bool within(std::uint64_t base, std::uint64_t size, std::uint64_t addr, std::uint64_t len) {
    return addr >= base && len <= size && addr - base <= size - len;
  }

  enum Access : unsigned { kLocal = 0, kRdmaWrite = 1, kRdmaRead = 2 };

  // Whether [addr, addr+len) lies in live region h registered with ptag and,
  // for RDMA, enabled for it. Entries may change under a concurrent reader (a
  // peer process checks our table): the handle and version are read before
  // and after the fields, deregistration clears the handle first and an
  // attribute change makes the version odd, so a torn read never passes.
  [[gnu::always_inline]] bool covers(MemHandle h, std::uint64_t addr, std::uint64_t len, Ptag ptag,
                                    unsigned access = kLocal) const {
    const std::uint32_t i = index_of(h);
    if (i == 0 || i >= kMaxRegions) return false;
    const RegionEntry& e = entries[i];
    const std::uint32_t version = e.version.load(std::memory_order_acquire);
    if ((version & 1) || e.handle.load(std::memory_order_acquire) != h) return false;
    const bool ok = e.ptag == ptag && within(e.addr, e.len, addr, len) &&
                    (!(access & kRdmaWrite) || e.rdma_write) && (!(access & kRdmaRead) || e.rdma_read);
    std::atomic_thread_fence(std::memory_order_acquire);
    return ok && e.handle.load(std::memory_order_relaxed) == h && e.version.load(std::memory_order_relaxed) == version;
  }

  // Copies a live entry out; false if the handle is not live.
  bool lookup(MemHandle h, RegionEntry& out) const {
    const std::uint32_t i = index_of(h);
    if (i == 0 || i >= kMaxRegions) return false;
    const RegionEntry& e = entries[i];
    const std::uint32_t version = e.version.load(std::memory_order_acquire);
    if ((version & 1) || e.handle.load(std::memory_order_acquire) != h) return false;
    out.ptag = e.ptag;
    out.addr = e.addr;
    out.len = e.len;
    out.rdma_write = e.rdma_write;
    out.rdma_read = e.rdma_read;
    std::atomic_thread_fence(std::memory_order_acquire);
    return e.handle.load(std::memory_order_relaxed) == h && e.version.load(std::memory_order_relaxed) == version;
  }
};

}  // namespace via
