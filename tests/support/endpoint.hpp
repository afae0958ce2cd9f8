// Test support: a NIC with one registered arena holding descriptors and
// buffers, and helpers to build descriptors and drive progress.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "via/via.hpp"

namespace testing_support {

// Sets VIASTACK_JOB to a name no other test process or test uses, so that
// tests opening NICs "shm:0", "shm:1", ... never meet each other's segments.
inline std::string use_unique_job(const char* prefix) {
  static int counter = 0;
  std::string job = prefix;
  job += '-';
  job += std::to_string(getpid());
  job += '-';
  job += std::to_string(counter++);
  setenv("VIASTACK_JOB", job.c_str(), 1);
  return job;
}

inline void expect_ok(via::Result r, const char* what) {
  if (r != via::Result::success) throw std::runtime_error(std::string(what) + ": " + via::describe(r));
}

// A fill pattern that differs per message and per byte.
inline std::uint8_t pattern(std::uint64_t seed, std::uint64_t i) { return std::uint8_t((seed * 131 + i * 7 + (i >> 8)) & 0xFF); }

// Registered memory: kDescSlots descriptor slots, then the data buffers. A
// slot handed out stays taken until release(): a posted descriptor must not
// be rewritten for other work before its completion is reaped.
struct Arena {
  static constexpr std::size_t kDescSlot = 1024;  // room for a descriptor with 60 segments
  // Enough for a test that fills a peer's 256-cell ring and posts more behind it.
  static constexpr std::size_t kDescSlots = 512;

  std::byte* base = nullptr;
  std::size_t bytes = 0;
  via::MemHandle handle = 0;

  Arena() = default;
  Arena(const Arena&) = delete;
  ~Arena() { std::free(base); }
  void allocate(std::size_t data_bytes) {
    bytes = kDescSlot * kDescSlots + data_bytes;
    base = static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    std::memset(base, 0, bytes);
    free_slots_.clear();
    for (std::size_t slot = kDescSlots; slot-- > 0;) free_slots_.push_back(slot);  // slot 0 is taken first
    slot_taken_.assign(kDescSlots, false);
  }
  // A zeroed descriptor slot; throws when every slot is taken.
  VIP_DESCRIPTOR* take_desc() {
    if (free_slots_.empty())
      throw std::runtime_error("test endpoint: all " + std::to_string(kDescSlots) +
                               " descriptor slots are taken; release() each descriptor once its completion is reaped");
    const std::size_t slot = free_slots_.back();
    free_slots_.pop_back();
    slot_taken_[slot] = true;
    auto* d = reinterpret_cast<VIP_DESCRIPTOR*>(base + slot * kDescSlot);
    std::memset(d, 0, kDescSlot);
    return d;
  }
  // Gives a descriptor's slot back; throws for anything take_desc() did not hand out.
  void release(const VIP_DESCRIPTOR* d) {
    const auto at = reinterpret_cast<std::uintptr_t>(d) - reinterpret_cast<std::uintptr_t>(base);
    const std::size_t slot = at / kDescSlot;
    if (at % kDescSlot != 0 || slot >= kDescSlots || !slot_taken_[slot])
      throw std::runtime_error("test endpoint: release() of a descriptor that is not a taken slot");
    slot_taken_[slot] = false;
    free_slots_.push_back(slot);
  }
  std::byte* data(std::size_t offset = 0) { return base + kDescSlot * kDescSlots + offset; }
  std::size_t data_bytes() const { return bytes - kDescSlot * kDescSlots; }

 private:
  std::vector<std::size_t> free_slots_;
  std::vector<bool> slot_taken_;
};

// Segment i of a descriptor with room for more than the two that VIP_DESCRIPTOR declares.
inline VIP_DATA_SEGMENT& segment(VIP_DESCRIPTOR* d, unsigned i) {
  auto* first = reinterpret_cast<std::byte*>(d) + sizeof(VIP_CONTROL_SEGMENT);
  return reinterpret_cast<VIP_DESCRIPTOR_SEGMENT*>(first + i * sizeof(VIP_DESCRIPTOR_SEGMENT))->Local;
}

struct Endpoint {
  std::unique_ptr<via::Nic> nic;
  via::Ptag ptag = 0;
  Arena arena;

  // Opens `device` and registers an arena with `data_bytes` of buffers.
  void open(const std::string& device, std::size_t data_bytes, bool rdma_write = true, bool rdma_read = true) {
    expect_ok(via::Nic::open(device, nic), "open NIC");
    expect_ok(nic->create_ptag(ptag), "create ptag");
    arena.allocate(data_bytes);
    expect_ok(nic->register_memory(arena.base, arena.bytes, via::MemAttributes{ptag, rdma_write, rdma_read}, arena.handle),
              "register arena");
  }

  via::Vi* create_vi(VIP_RELIABILITY_LEVEL level = VIP_SERVICE_RELIABLE_DELIVERY, via::Cq* scq = nullptr,
                     via::Cq* rcq = nullptr) {
    via::Vi* vi;
    via::ViAttributes attrs;
    attrs.reliability = level;
    attrs.ptag = ptag;
    attrs.rdma_write = true;
    attrs.rdma_read = level != VIP_SERVICE_UNRELIABLE;
    expect_ok(nic->create_vi(attrs, scq, rcq, vi), "create VI");
    return vi;
  }

  // A send/receive descriptor over [offset, offset+len) of the arena's data, split into `segments` pieces.
  VIP_DESCRIPTOR* message(std::size_t offset, std::size_t len, unsigned segments = 1) {
    VIP_DESCRIPTOR* d = arena.take_desc();
    d->CS.SegCount = std::uint16_t(segments);
    d->CS.Length = std::uint32_t(len);
    std::size_t left = len;
    for (unsigned i = 0; i < segments; ++i) {
      std::size_t piece = i + 1 == segments ? left : len / segments;
      VIP_DATA_SEGMENT& seg = segment(d, i);
      seg.Data.Address = arena.data(offset);
      seg.Handle = arena.handle;
      seg.Length = std::uint32_t(piece);
      offset += piece;
      left -= piece;
    }
    return d;
  }

  // An RDMA descriptor: remote (address, handle), local [offset, offset+len).
  VIP_DESCRIPTOR* rdma(unsigned op, std::uint64_t remote_addr, via::MemHandle remote_handle, std::size_t offset,
                       std::size_t len) {
    VIP_DESCRIPTOR* d = arena.take_desc();
    d->CS.Control = std::uint16_t(op);
    d->CS.SegCount = 2;
    d->CS.Length = std::uint32_t(len);
    d->DS[0].Remote.Data.AddressBits = remote_addr;
    d->DS[0].Remote.Handle = remote_handle;
    d->DS[1].Local.Data.Address = arena.data(offset);
    d->DS[1].Local.Handle = arena.handle;
    d->DS[1].Local.Length = std::uint32_t(len);
    return d;
  }

  // Gives back the slot of a descriptor whose completion has been reaped (or
  // that was never posted); message() and rdma() take the free ones.
  void release(const VIP_DESCRIPTOR* d) { arena.release(d); }

  void fill(std::size_t offset, std::size_t len, std::uint64_t seed) {
    for (std::size_t i = 0; i < len; ++i) arena.data(offset)[i] = std::byte(pattern(seed, i));
  }
  // Index of the first byte that differs from the pattern, or -1.
  long mismatch(std::size_t offset, std::size_t len, std::uint64_t seed) {
    for (std::size_t i = 0; i < len; ++i)
      if (arena.data(offset)[i] != std::byte(pattern(seed, i))) return long(i);
    return -1;
  }
};

// Drives progress on every NIC until done() holds; false on timeout.
inline bool pump(std::initializer_list<via::Nic*> nics, const std::function<bool()>& done, int timeout_ms = 5000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned i = 0;; ++i) {
    for (via::Nic* n : nics) n->progress();
    if (done()) return true;
    if ((i & 1023) == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

inline via::NetAddress address(via::Nic& nic, const std::string& name, std::string disc) {
  via::NetAddress a;
  expect_ok(nic.resolve(name, 0, a.host), "resolve");
  a.discriminator.assign(disc.begin(), disc.end());
  return a;
}

// Connects vx (on x, whose NIC is named xname) and vy (on y, named yname) peer
// to peer with discriminator `disc`, driving both NICs; each side's outcome.
inline std::pair<via::Result, via::Result> connect_peers(Endpoint& x, const std::string& xname, via::Vi* vx,
                                                         Endpoint& y, const std::string& yname, via::Vi* vy,
                                                         const std::string& disc, std::uint32_t timeout_ms = 5000) {
  expect_ok(vx->connect_peer_request(address(*x.nic, xname, disc), address(*x.nic, yname, disc), timeout_ms), "request");
  expect_ok(vy->connect_peer_request(address(*y.nic, yname, disc), address(*y.nic, xname, disc), timeout_ms), "request");
  via::Result rx = via::Result::not_done, ry = via::Result::not_done;
  pump({x.nic.get(), y.nic.get()}, [&] {
    if (rx == via::Result::not_done) rx = vx->connect_peer_done();
    if (ry == via::Result::not_done) ry = vy->connect_peer_done();
    return rx != via::Result::not_done && ry != via::Result::not_done;
  }, int(timeout_ms) + 1000);
  return {rx, ry};
}

}  // namespace testing_support
