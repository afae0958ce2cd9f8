// A VI's send or receive queue as the engine tracks it. Internal to the
// engine: programs see only the descriptors they posted.
#pragma once

#include <vipl.h>

#include <algorithm>
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
// `published`, and are dequeued by the user at the head. It starts small and
// doubles when a post finds it full, up to `capacity`: a VI costs memory for
// the descriptors it has outstanding, not for the queue depth it may reach
// (a rank of a large job holds a VI per peer it talks to).
class WorkQueue {
 public:
  // capacity, initial: powers of two, initial <= capacity.
  explicit WorkQueue(std::size_t capacity, std::size_t initial = 64)
      : slots_(std::min(initial, capacity)), mask_(slots_.size() - 1), capacity_(capacity) {}
  bool full() const { return tail_ - head_ == capacity_; }
  bool empty() const { return tail_ == head_; }
  std::uint64_t head() const { return head_; }
  std::uint64_t tail() const { return tail_; }
  std::uint64_t published() const { return published_; }
  WorkRequest& at(std::uint64_t index) { return slots_[index & mask_]; }
  // Moves every request when the queue grows: a pointer or reference into it
  // is then stale (keep an index across a push, see index_of).
  // Inline in every post (grow() is the rare part).
  [[gnu::always_inline]] WorkRequest& push(VIP_DESCRIPTOR* desc) {
    if (tail_ - head_ > mask_) grow();  // every slot taken (mask_ + 1 of them)
    WorkRequest& wr = at(tail_++);
    wr = WorkRequest{};
    wr.desc = desc;
    return wr;
  }
  // The index of a request in the queue (between head and tail).
  std::uint64_t index_of(const WorkRequest& wr) const {
    return head_ + ((std::uint64_t(&wr - slots_.data()) - head_) & mask_);
  }
  // Returns the head descriptor if its completion was published, else null.
  VIP_DESCRIPTOR* pop_done() { return head_ == published_ ? nullptr : at(head_++).desc; }
  // Dequeues up to n published descriptors at once.
  void pop_done(std::uint64_t n) { head_ += std::min(n, published_ - head_); }
  // Requests that can still be posted.
  std::uint64_t room() const { return capacity_ - (tail_ - head_); }
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
  // Counts the request at `published` (finished, its completion written out
  // by the caller) as published: publish()'s step for one request.
  void publish_front() { ++published_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t allocated() const { return slots_.size(); }

 private:
  [[gnu::noinline]] void grow() {
    std::vector<WorkRequest> bigger(slots_.size() * 2);
    const std::uint64_t bigger_mask = bigger.size() - 1;
    for (std::uint64_t i = head_; i != tail_; ++i) bigger[i & bigger_mask] = slots_[i & mask_];
    slots_.swap(bigger);
    mask_ = bigger_mask;
  }

  std::vector<WorkRequest> slots_;
  std::uint64_t mask_;
  std::size_t capacity_;
  std::uint64_t head_ = 0, published_ = 0, tail_ = 0;
};

}  // namespace via
