#include "via/registration_cache.hpp"

#include <algorithm>

namespace via {

namespace {
constexpr std::uintptr_t kPage = 4096;
}

RegistrationCache::~RegistrationCache() {
  for (const Entry& e : entries_) nic_.deregister_memory(reinterpret_cast<const void*>(e.begin), e.handle);
}

Result RegistrationCache::acquire(const void* addr, std::size_t len, MemHandle& out) {
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  // A region covers at least the byte at addr; one that wraps past the top
  // of memory names nothing.
  const std::uintptr_t end = begin + std::max<std::size_t>(len, 1);
  if (end < begin || end > UINTPTR_MAX - kPage) return Result::invalid_parameter;
  ++clock_;
  for (Entry& e : entries_) {
    if (e.begin <= begin && end <= e.end) {
      e.last_use = clock_;
      ++e.pins;
      out = e.handle;
      return Result::success;
    }
  }
  Entry e{begin & ~(kPage - 1), (end + kPage - 1) & ~(kPage - 1), 0, clock_, 1};
  const Result r = nic_.register_memory(reinterpret_cast<const void*>(e.begin), e.end - e.begin,
                                        MemAttributes{ptag_, false, true}, e.handle);
  if (r != Result::success) return r;  // and what the cache held stays
  // Room for it is made once it exists (it is pinned, so it stays).
  make_room(1, e.end - e.begin);
  entries_.push_back(e);
  bytes_ += e.end - e.begin;
  out = e.handle;
  return Result::success;
}

void RegistrationCache::release(MemHandle handle) {
  for (Entry& e : entries_)
    if (e.handle == handle) {
      --e.pins;
      return;
    }
}

void RegistrationCache::invalidate(const void* addr, std::size_t len) {
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t end = begin + len;
  for (std::size_t i = 0; i < entries_.size();) {
    const Entry& e = entries_[i];
    if (e.pins == 0 && e.begin < end && begin < e.end)
      forget(i);  // the last entry moved to i
    else
      ++i;
  }
}

void RegistrationCache::make_room(std::size_t entries, std::size_t bytes) {
  while (!entries_.empty() && (entries_.size() + entries > max_entries_ || bytes_ + bytes > max_bytes_)) {
    std::size_t victim = entries_.size();
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].pins == 0 && (victim == entries_.size() || entries_[i].last_use < entries_[victim].last_use))
        victim = i;
    if (victim == entries_.size()) return;  // everything is in use: grow past the bounds
    forget(victim);
  }
}

// Order does not matter: the last entry takes the forgotten one's place.
void RegistrationCache::forget(std::size_t i) {
  nic_.deregister_memory(reinterpret_cast<const void*>(entries_[i].begin), entries_[i].handle);
  bytes_ -= entries_[i].end - entries_[i].begin;
  entries_[i] = entries_.back();
  entries_.pop_back();
}

}  // namespace via
