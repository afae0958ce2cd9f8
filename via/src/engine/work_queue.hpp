// A VI's send or receive queue as the engine tracks it. Internal to the
// engine: programs see only the descriptors they posted.
#pragma once

#include <vipl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace via {

// One posted descriptor as the engine tracks it.
struct WorkRequest {
  VIP_DESCRIPTOR* desc = nullptr;
  std::uint32_t status = 0;  // completion bits, written to desc->CS.Status when published
  std::uint32_t length = 0;  // bytes transferred, written to desc->CS.Length for receives
  std::uint64_t total = 0;   // bytes the operation moves
  std::uint64_t progress = 0;  // bytes sent (send side) or received (receive side)
  bool finished = false;
};

// A work queue: descriptors are posted at the tail, complete in order at
// `published`, and are dequeued by the user at the head.
class WorkQueue {
 public:
  // capacity: a power of two.
  explicit WorkQueue(std::size_t capacity) : slots_(capacity), mask_(capacity - 1) {}
  bool full() const { return tail_ - head_ == slots_.size(); }
  bool empty() const { return tail_ == head_; }
  std::uint64_t head() const { return head_; }
  std::uint64_t tail() const { return tail_; }
  std::uint64_t published() const { return published_; }
  WorkRequest& at(std::uint64_t index) { return slots_[index & mask_]; }
  WorkRequest& push(VIP_DESCRIPTOR* desc) {
    WorkRequest& wr = at(tail_++);
    wr = WorkRequest{};
    wr.desc = desc;
    return wr;
  }
  // Returns the head descriptor if its completion was published, else null.
  VIP_DESCRIPTOR* pop_done() { return head_ == published_ ? nullptr : at(head_++).desc; }
  // Writes out the finished requests at the front of the unpublished part, in
  // order; calls `on_publish` for each.
  template <class F>
  void publish(F&& on_publish) {
    while (published_ != tail_) {
      WorkRequest& wr = at(published_);
      if (!wr.finished) break;
      on_publish(wr);
      ++published_;
    }
  }
  std::size_t capacity() const { return slots_.size(); }

 private:
  std::vector<WorkRequest> slots_;
  std::uint64_t mask_;
  std::uint64_t head_ = 0, published_ = 0, tail_ = 0;
};

}  // namespace via
