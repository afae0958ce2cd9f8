// For programs that poll descriptors rather than a completion queue
// (VipSendDone/VipRecvDone style): the descriptors posted to one work queue of
// a VI, oldest first. A work queue completes in posting order, so the oldest
// descriptor's status tells whether anything is done.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace via {

class PostedQueue {
 public:
  // Holds up to `capacity` entries: the caller's own names for its descriptors.
  explicit PostedQueue(std::uint32_t capacity)
      : ring_(std::bit_ceil(capacity)), mask_(std::uint32_t(ring_.size() - 1)) {}
  bool empty() const { return head_ == tail_; }
  std::uint32_t front() const { return ring_[head_ & mask_]; }
  void push(std::uint32_t entry) { ring_[tail_++ & mask_] = entry; }
  void pop() { ++head_; }

 private:
  std::vector<std::uint32_t> ring_;
  std::uint32_t mask_;
  std::uint32_t head_ = 0, tail_ = 0;
};

}  // namespace via
