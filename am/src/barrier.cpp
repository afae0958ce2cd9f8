#include "barrier.hpp"

#include <algorithm>

namespace am::detail {

Status Barrier::run() {
  const std::uint32_t epoch = ++epoch_;
  const Word args[4] = {epoch, 0, 0, 0};
  auto unreachable = [&] { return error(Status::unreachable, "am_barrier: a rank is unreachable"); };
  if (core_.my_proc() == 0) {
    const unsigned others = unsigned(core_.procs() - 1);
    core_.block_until([&] { return arrived_[epoch & 1] >= others || core_.any_failed(); });
    if (arrived_[epoch & 1] < others) return unreachable();
    arrived_[epoch & 1] -= others;
    for (int r = 1; r < core_.procs(); ++r)
      if (core_.send_request(core_.peer(r), wire::Kind::barrier, kRelease, args, 1, nullptr, 0, Sent{}) != Status::ok)
        return unreachable();
    return Status::ok;
  }
  Peer& root = core_.peer(0);
  if (core_.send_request(root, wire::Kind::barrier, kArrive, args, 1, nullptr, 0, Sent{}) != Status::ok)
    return unreachable();
  core_.block_until([&] { return released_epoch_ >= epoch || root.failed; });
  return released_epoch_ >= epoch ? Status::ok : unreachable();
}

std::uint8_t Barrier::run_request(Peer&, const wire::Message& m, HandlerContext&) {
  if (m.header.handler == kArrive)
    ++arrived_[m.args[0] & 1];
  else
    released_epoch_ = std::max(released_epoch_, std::uint32_t(m.args[0]));
  return 0;
}

bool Barrier::returned(Peer&, const Sent&, int, const char*, Returned& r) {
  if (leaving_) return false;  // peers leaving after the last barrier
  r.op = AM_OP_BARRIER;
  return true;
}

}  // namespace am::detail
