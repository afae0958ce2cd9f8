// Receives SIGCHLD and the termination signals through a signalfd, so that the
// job's event loop sees them as one more readable descriptor in poll().
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <vector>

#include "posix_io.hpp"

namespace viarun {

struct ReceivedSignal {
  int number;
  // Who sent it; for SIGCHLD, the first child to end since the last
  // take_pending(): the kernel keeps the details of a pending SIGCHLD and
  // drops those of the children that end after it.
  pid_t sender;
};

class SignalWatcher {
 public:
  // Blocks the signals it watches, for the rest of viarun's life; the mask
  // before that, which ranks get back, is original_mask().
  SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  int fd() const { return fd_.get(); }
  const sigset_t& original_mask() const { return original_mask_; }
  // The signals that arrived since the last call, oldest first.
  std::vector<ReceivedSignal> take_pending();

 private:
  sigset_t original_mask_;
  UniqueFd fd_;
};

}  // namespace viarun
