// Small POSIX helpers shared by the launcher's parts.
#pragma once

#include <string_view>
#include <utility>

namespace viarun {

// Owns one file descriptor and closes it when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Writes all of `data` to `fd`, waiting when the descriptor is non-blocking
// and full. Returns false when the reader is gone (EPIPE) or on another error.
bool write_all(int fd, std::string_view data);

// Prints "viarun: <message>" as one line on stderr, in a single write.
void report(std::string_view message);

}  // namespace viarun
