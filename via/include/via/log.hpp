// viastack's log: every message of its libraries (via, mpi, utcp) is one line
//   viastack[via rank 3] warn: tcp: connection with 10.0.0.2:4000: reset by peer
// naming the layer that wrote it, the process's rank (its pid until the job's
// bootstrap knows the rank) and the message's level. Lines go to stderr, one
// write each, or to a hook the program installs.
//
// VIASTACK_LOG=error|warn|info|debug chooses the most detailed level shown
// (default warn); a bad value is a warning and the default. Errors are always
// shown.
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

namespace via::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3 };

// "error", "warn", "info" or "debug".
std::string_view name(Level level);

namespace detail {
// The most detailed level shown, as an int; -1 until VIASTACK_LOG is read.
extern std::atomic<int> threshold;
int read_threshold();
}  // namespace detail

// Whether a message of `level` is shown: one relaxed load once VIASTACK_LOG
// has been read.
inline bool enabled(Level level) {
  if (level == Level::error) return true;
  int threshold = detail::threshold.load(std::memory_order_relaxed);
  if (threshold < 0) threshold = detail::read_threshold();
  return int(level) <= threshold;
}

// The most detailed level shown; set_level overrides VIASTACK_LOG.
Level level();
void set_level(Level level);

// A hook receives every message shown instead of stderr: its level and its
// whole line (prefix included, no newline). It is called one message at a
// time from whichever thread logs; a message logged from inside the hook goes
// to stderr. An empty hook restores stderr.
using Hook = std::function<void(Level level, std::string_view line)>;
void set_hook(Hook hook);

// Writes one message of `layer` ("via", "mpi", "utcp") at `level`, printf's
// format, whether or not the level is shown: use VIA_LOG, which checks first.
void write(Level level, const char* layer, const char* format, ...) __attribute__((format(printf, 3, 4)));

}  // namespace via::log

// VIA_LOG(warn, "via", "tcp: %s refused", peer): the message, when its level
// is shown; otherwise nothing is formatted and no argument evaluated.
#define VIA_LOG(level, layer, ...)                                                \
  do {                                                                            \
    if (::via::log::enabled(::via::log::Level::level))                            \
      ::via::log::write(::via::log::Level::level, layer, __VA_ARGS__);            \
  } while (0)
