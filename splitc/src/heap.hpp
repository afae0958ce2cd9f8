// First-fit allocator over a range of the AM segment. Deterministic: the
// same calls on every rank give the same offsets, which the symmetric heap
// relies on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>

namespace splitc::detail {

class Heap {
 public:
  static constexpr std::size_t kAlign = 64;

  void reset(std::byte* base, std::size_t bytes) {
    base_ = base;
    free_.clear();
    used_.clear();
    if (bytes) free_[0] = bytes;
  }

  // nullptr when no free range is large enough.
  void* allocate(std::size_t bytes) {
    bytes = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const std::size_t offset = it->first, rest = it->second - bytes;
      free_.erase(it);
      if (rest) free_[offset + bytes] = rest;
      used_[offset] = bytes;
      return base_ + offset;
    }
    return nullptr;
  }

  // False if p did not come from allocate().
  bool release(void* p) {
    const auto used = used_.find(std::size_t(reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base_)));
    if (used == used_.end()) return false;
    std::size_t offset = used->first, bytes = used->second;
    used_.erase(used);
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + bytes) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return true;
      }
    }
    free_[offset] = bytes;
    return true;
  }

 private:
  std::byte* base_ = nullptr;
  std::map<std::size_t, std::size_t> free_;  // offset -> bytes
  std::map<std::size_t, std::size_t> used_;
};

}  // namespace splitc::detail
