// A bounded byte queue: the send buffer (bytes from SND.UNA on) and the
// receive buffer (in-order bytes the application has not read yet). The
// storage grows on demand, doubling from 1 KiB up to the capacity, so that
// a connection commits what it holds, not its configured buffer (which 400
// idle connections once paid 1 MiB each way for); release() gives it back
// once the queue is empty and will stay so (TIME-WAIT, CLOSED) or has been
// for a while (the connection's idle-buffers timer).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <via/copy.hpp>

namespace utcp::tcp {

class ByteRing {
 public:
  explicit ByteRing(std::size_t capacity) : capacity_(capacity) {}

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return size_; }
  std::size_t free() const { return capacity_ - size_; }
  bool empty() const { return size_ == 0; }
  std::size_t allocated() const { return storage_.size(); }

  // Appends as much of data as fits; returns the count taken.
  std::size_t push(std::span<const std::uint8_t> data) {
    const std::size_t count = std::min(data.size(), free());
    if (count == 0) return 0;
    reserve(size_ + count);
    const std::size_t tail = (head_ + size_) % storage_.size();
    const std::size_t first = std::min(count, storage_.size() - tail);
    via::copy_memory(storage_.data() + tail, data.data(), first);
    via::copy_memory(storage_.data(), data.data() + first, count - first);
    size_ += count;
    return count;
  }

  // Copies out.size() bytes that start `offset` bytes past the front.
  void copy_out(std::size_t offset, std::span<std::uint8_t> out) const {
    if (out.empty()) return;
    const std::size_t start = (head_ + offset) % storage_.size();
    const std::size_t first = std::min(out.size(), storage_.size() - start);
    via::copy_memory(out.data(), storage_.data() + start, first);
    via::copy_memory(out.data() + first, storage_.data(), out.size() - first);
  }

  // The `length` bytes that start `offset` bytes past the front, read in
  // place when they do not wrap around the storage's end (nearly always), or
  // copied into scratch when they do. Valid until the ring changes.
  std::span<const std::uint8_t> view(std::size_t offset, std::size_t length, std::vector<std::uint8_t>& scratch) const {
    if (length == 0) return {};
    const std::size_t start = (head_ + offset) % storage_.size();
    if (start + length <= storage_.size()) return std::span(storage_).subspan(start, length);
    scratch.resize(length);
    copy_out(offset, scratch);
    return scratch;
  }

  // Drops count bytes from the front.
  void pop(std::size_t count) {
    size_ -= count;
    head_ = size_ == 0 ? 0 : (head_ + count) % storage_.size();
  }

  // Frees the storage if nothing is queued.
  void release() {
    if (size_ == 0) std::vector<std::uint8_t>().swap(storage_);
  }

 private:
  static constexpr std::size_t first_allocation = 1024;

  // Storage for `needed` bytes: the next power of two from 1 KiB that holds
  // them, at most the capacity; the queued bytes move to the front.
  void reserve(std::size_t needed) {
    if (needed <= storage_.size()) return;
    std::size_t grown = std::max(storage_.size() * 2, first_allocation);
    while (grown < needed) grown *= 2;
    std::vector<std::uint8_t> bigger(std::min(grown, capacity_));
    copy_out(0, std::span(bigger).first(size_));
    storage_.swap(bigger);
    head_ = 0;
  }

  std::size_t capacity_;
  std::vector<std::uint8_t> storage_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace utcp::tcp
