// Messages a rank sends itself: copied into a queue as they are sent, and
// handled by the next poll as a frame from a peer would be.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

namespace am::detail {

class Loopback {
 public:
  void send(const std::byte* data, std::size_t length) { queue_.emplace_back(data, data + length); }
  bool empty() const { return queue_.empty(); }
  // Calls handle(data, length) for each message queued so far, in order
  // (handlers may queue more, for the next run); returns how many.
  template <class Handle>
  int run(Handle&& handle) {
    int handled = 0;
    for (std::size_t n = queue_.size(); n > 0 && !queue_.empty(); --n) {
      std::vector<std::byte> msg = std::move(queue_.front());
      queue_.pop_front();
      handle(msg.data(), msg.size());
      ++handled;
    }
    return handled;
  }

 private:
  std::deque<std::vector<std::byte>> queue_;
};

}  // namespace am::detail
