// A fixed-capacity byte queue: the send buffer (bytes from SND.UNA on) and
// the receive buffer (in-order bytes the application has not read yet).
// The storage is allocated on first use, so that a connection that never
// carries data costs nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace utcp::tcp {

class ByteRing {
 public:
  explicit ByteRing(std::size_t capacity) : capacity_(capacity) {}

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return size_; }
  std::size_t free() const { return capacity_ - size_; }
  bool empty() const { return size_ == 0; }

  // Appends as much of data as fits; returns the count taken.
  std::size_t push(std::span<const std::uint8_t> data) {
    const std::size_t count = std::min(data.size(), free());
    if (count == 0) return 0;
    if (storage_.empty()) storage_.resize(capacity_);
    const std::size_t tail = (head_ + size_) % capacity_;
    const std::size_t first = std::min(count, capacity_ - tail);
    std::memcpy(storage_.data() + tail, data.data(), first);
    std::memcpy(storage_.data(), data.data() + first, count - first);
    size_ += count;
    return count;
  }

  // Copies out.size() bytes that start `offset` bytes past the front.
  void copy_out(std::size_t offset, std::span<std::uint8_t> out) const {
    if (out.empty()) return;
    const std::size_t start = (head_ + offset) % capacity_;
    const std::size_t first = std::min(out.size(), capacity_ - start);
    std::memcpy(out.data(), storage_.data() + start, first);
    std::memcpy(out.data() + first, storage_.data(), out.size() - first);
  }

  // Drops count bytes from the front.
  void pop(std::size_t count) {
    head_ = (head_ + count) % capacity_;
    size_ -= count;
  }

 private:
  std::size_t capacity_;
  std::vector<std::uint8_t> storage_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace utcp::tcp
