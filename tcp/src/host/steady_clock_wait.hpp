// The blocking wait of a host that runs its stack on the steady clock
// (ViaHost over VIA, TunHost over a TUN device): the stack itself reads no
// clock, so this is where real time enters it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include "utcp/stack.hpp"

namespace utcp::host {

// stack.poll(now) with the steady clock's now.
bool poll_now(Stack& stack);

// Polls the stack until ready() holds or the timeout passes (none: never).
// Between polls, sleep(limit) waits for the link, at most `limit` (the
// stack's next timer, the deadline, or 50 ms, whichever comes first); it may
// poll the stack and ask ready() itself meanwhile, and returns whether
// ready() held then: once true, ready() is not asked again.
bool wait_on_steady_clock(Stack& stack, const std::function<bool()>& ready,
                          std::optional<std::chrono::milliseconds> timeout,
                          const std::function<bool(std::chrono::milliseconds limit)>& sleep);

}  // namespace utcp::host
