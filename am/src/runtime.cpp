#include "runtime.hpp"

namespace am::detail {

std::unique_ptr<Runtime> Runtime::instance_;

Status Runtime::enable(const Config& config) {
  if (instance_) return error(Status::bad_arg, "am_enable: already enabled");
  // Installed first: peers' first requests may arrive while enable waits at the fence.
  instance_.reset(new Runtime(config));
  const Status s = instance_->core_.start();
  if (s != Status::ok) instance_.reset();
  return s;
}

Status Runtime::disable() {
  if (!instance_) return error(Status::not_init, "am_disable: AM is not enabled");
  const Status s = instance_->barrier_.last();
  instance_->core_.drain();
  instance_.reset();
  return s;
}

}  // namespace am::detail
