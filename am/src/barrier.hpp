// am_barrier, on the core: a central barrier. Every rank tells rank 0 it
// arrived (a barrier request, handler kArrive); rank 0 releases them all
// (kRelease). Epochs tell one barrier's messages from the next one's.
#pragma once

#include "core.hpp"

namespace am::detail {

class Barrier final : public Service {
 public:
  explicit Barrier(Core& core) : core_(core) { core.add_service(wire::Kind::barrier, this); }
  Status run();
  // The barrier of am_disable: the peers leave after it, so its requests
  // that come back are not reported.
  Status last() {
    leaving_ = true;
    return run();
  }

  std::uint8_t run_request(Peer& p, const wire::Message& m, HandlerContext& ctx) override;
  void answered(Peer&, const Sent&, const wire::Message&) override {}
  bool returned(Peer& p, const Sent& s, int cause, const char* why, Returned& r) override;

 private:
  static constexpr std::uint16_t kArrive = 0, kRelease = 1;
  Core& core_;
  std::uint32_t epoch_ = 0;
  std::uint32_t released_epoch_ = 0;
  unsigned arrived_[2] = {0, 0};
  bool leaving_ = false;
};

}  // namespace am::detail
