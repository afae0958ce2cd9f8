// The log (via/log.hpp): the prefix, the level from VIASTACK_LOG, and one
// message at a time to the hook or stderr.
#include "via/log.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "log/rank.hpp"
#include "via/config.hpp"

namespace via::log {

namespace detail {
std::atomic<int> threshold{-1};
}  // namespace detail

namespace {

constexpr std::array<std::string_view, 4> kNames = {"error", "warn", "info", "debug"};

struct State {
  std::mutex lock;  // one message at a time, to the hook or to stderr
  Hook hook;
};
// On the heap and never destroyed: libraries log from exit handlers and
// static destructors that may run after this file's statics would be gone.
State& state = *new State;

// The rank with the pid that set it, so that a forked child does not pass
// for its parent; 0 until a bootstrap sets it.
std::atomic<std::uint64_t> rank_of_pid{0};

// Set while this thread runs the hook: a message the hook logs goes to stderr.
thread_local bool in_hook = false;

void write_to_stderr(std::string line) {
  line += '\n';
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is closed or full: nowhere left to say so
    done += std::size_t(n);
  }
}

void deliver(Level level, std::string line) {
  if (in_hook) return write_to_stderr(std::move(line));
  std::lock_guard guard(state.lock);
  if (state.hook) {
    in_hook = true;
    try {
      state.hook(level, line);
      in_hook = false;
      return;
    } catch (...) {
      // Callers log from destructors and C code: the line goes to stderr instead.
      in_hook = false;
    }
  }
  write_to_stderr(std::move(line));
}

std::string prefix(Level level, const char* layer) {
  const auto pid = std::uint32_t(getpid());
  const std::uint64_t known = rank_of_pid.load(std::memory_order_relaxed);
  const bool ranked = known != 0 && std::uint32_t(known >> 32) == pid;
  char text[128];
  std::snprintf(text, sizeof text, "viastack[%s %s %u] %s: ", layer, ranked ? "rank" : "pid",
                ranked ? std::uint32_t(known) : pid, kNames[std::size_t(level)].data());
  return text;
}

}  // namespace

namespace detail {

int read_threshold() {
  // Read with the lenient reader: the check of the whole environment reports
  // through this log, and so may be what asks.
  static const int from_environment = [] {
    const std::string word = config::lenient_text("VIASTACK_LOG");
    for (std::size_t i = 0; i < kNames.size(); ++i)
      if (kNames[i] == word) return int(i);
    return int(Level::warn);  // not reached: the reader gives a declared word
  }();
  int unset = -1;
  threshold.compare_exchange_strong(unset, from_environment, std::memory_order_relaxed);  // set_level wins
  return threshold.load(std::memory_order_relaxed);
}

}  // namespace detail

std::string_view name(Level level) { return kNames[std::size_t(level)]; }

Level level() {
  const int threshold = detail::threshold.load(std::memory_order_relaxed);
  return Level(threshold < 0 ? detail::read_threshold() : threshold);
}

void set_level(Level level) { detail::threshold.store(int(level), std::memory_order_relaxed); }

void set_hook(Hook hook) {
  std::lock_guard guard(state.lock);
  state.hook = std::move(hook);
}

void set_rank(int rank) {
  rank_of_pid.store(std::uint64_t(std::uint32_t(getpid())) << 32 | std::uint32_t(rank), std::memory_order_relaxed);
}

void write(Level level, const char* layer, const char* format, ...) {
  std::string line = prefix(level, layer);
  const std::size_t start = line.size();
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  char text[512];
  const int length = std::vsnprintf(text, sizeof text, format, args);
  if (length < 0) {
    line += "(a message that could not be formatted: ";
    line += format;
    line += ")";
  } else if (std::size_t(length) < sizeof text) {
    line.append(text, std::size_t(length));
  } else {
    line.resize(start + std::size_t(length) + 1);
    std::vsnprintf(line.data() + start, std::size_t(length) + 1, format, again);
    line.resize(start + std::size_t(length));
  }
  va_end(again);
  va_end(args);
  deliver(level, std::move(line));
}

}  // namespace via::log
