#include "host/steady_clock_wait.hpp"

#include <algorithm>

namespace utcp::host {
namespace {

constexpr std::chrono::milliseconds longest_sleep{50};

}  // namespace

bool poll_now(Stack& stack) { return stack.poll(std::chrono::steady_clock::now()); }

bool wait_on_steady_clock(Stack& stack, const std::function<bool()>& ready,
                          std::optional<std::chrono::milliseconds> timeout,
                          const std::function<bool(std::chrono::milliseconds limit)>& sleep) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
  for (;;) {
    poll_now(stack);
    if (ready()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    Clock::time_point wake = std::min(deadline, now + longest_sleep);
    if (const std::optional<Instant> at = stack.poll_at()) wake = std::min(wake, *at);
    const auto limit = std::chrono::ceil<std::chrono::milliseconds>(std::max(wake - now, Clock::duration::zero()));
    if (sleep(limit)) return true;
  }
}

}  // namespace utcp::host
