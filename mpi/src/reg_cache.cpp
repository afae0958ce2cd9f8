#include "reg_cache.hpp"

#include <algorithm>
#include <string>

#include "errors.hpp"

namespace viastack::mpi {

namespace {
constexpr std::uintptr_t kPage = 4096;
}

RegistrationCache::~RegistrationCache() {
  for (const Entry& e : entries_) nic_.deregister_memory(reinterpret_cast<const void*>(e.begin), e.handle);
}

via::MemHandle RegistrationCache::acquire(const void* addr, std::size_t len) {
  const auto begin = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t end = begin + len;
  ++clock_;
  for (Entry& e : entries_) {
    if (e.begin <= begin && end <= e.end) {
      e.last_use = clock_;
      ++e.pins;
      return e.handle;
    }
  }
  if (entries_.size() >= capacity_) evict_one_unpinned();
  Entry e{begin & ~(kPage - 1), (end + kPage - 1) & ~(kPage - 1), 0, clock_, 1};
  via::Result r = nic_.register_memory(reinterpret_cast<const void*>(e.begin), e.end - e.begin,
                                       via::MemAttributes{ptag_, false, true}, e.handle);
  if (r != via::Result::success) {
    std::string why = "registering a message buffer failed: ";
    why += via::describe(r);
    fail(MPI_ERR_NO_MEM, why);
  }
  entries_.push_back(e);
  return e.handle;
}

void RegistrationCache::release(via::MemHandle handle) {
  for (Entry& e : entries_)
    if (e.handle == handle) {
      --e.pins;
      return;
    }
}

void RegistrationCache::evict_one_unpinned() {
  auto victim = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->pins == 0 && (victim == entries_.end() || it->last_use < victim->last_use)) victim = it;
  if (victim == entries_.end()) return;  // everything is in use: grow past the capacity
  nic_.deregister_memory(reinterpret_cast<const void*>(victim->begin), victim->handle);
  entries_.erase(victim);
}

}  // namespace viastack::mpi
