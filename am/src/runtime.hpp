// The one AM runtime of a process: the core (core.hpp) and the services
// built on it, store/get (bulk.hpp) and the barrier (barrier.hpp). Both APIs
// (am.h, am/am.hpp) are thin layers over it.
#pragma once

#include <memory>

#include "barrier.hpp"
#include "bulk.hpp"
#include "core.hpp"

namespace am::detail {

class Runtime {
 public:
  static Runtime* get() { return instance_.get(); }
  static Status enable(const Config& config);
  // Collective: a barrier, the last answers, then the connections close.
  static Status disable();

  Core& core() { return core_; }
  Bulk& bulk() { return bulk_; }
  Barrier& barrier() { return barrier_; }

 private:
  explicit Runtime(const Config& config) : core_(config), bulk_(core_), barrier_(core_) {}

  static std::unique_ptr<Runtime> instance_;

  Core core_;
  Bulk bulk_;
  Barrier barrier_;
};

}  // namespace am::detail
