#include "signal_watcher.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace viarun {
namespace {

// A termination signal that viarun inherited as ignored (nohup, background
// jobs of non-interactive shells) stays ignored: blocking it for the signalfd
// would otherwise make it deliverable again.
bool inherited_as_ignored(int signal_number) {
  struct sigaction current {};
  ::sigaction(signal_number, nullptr, &current);
  return current.sa_handler == SIG_IGN;
}

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    if (!inherited_as_ignored(signal_number)) sigaddset(&set, signal_number);
  }
  return set;
}

}  // namespace

SignalWatcher::SignalWatcher() {
  sigset_t watched = watched_signals();
  ::sigprocmask(SIG_BLOCK, &watched, &original_mask_);
  fd_.reset(::signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.is_open()) throw std::system_error(errno, std::generic_category(), "signalfd");
}

std::vector<ReceivedSignal> SignalWatcher::take_pending() {
  std::vector<ReceivedSignal> signals;
  signalfd_siginfo info{};
  while (::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    signals.push_back({static_cast<int>(info.ssi_signo), static_cast<pid_t>(info.ssi_pid)});
  }
  return signals;
}

}  // namespace viarun
