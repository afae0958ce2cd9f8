#include "progress_agent.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <utility>

namespace viastack::mpi {

void LibraryLock::lock_contended(int seen) {
  if (seen != kContended) seen = state_.exchange(kContended, std::memory_order_acquire);
  while (seen != kFree) {
    state_.wait(kContended, std::memory_order_relaxed);
    seen = state_.exchange(kContended, std::memory_order_acquire);
  }
}

namespace library_entry {

LibraryLock lock;
thread_local constinit int depth = 0;
thread_local constinit bool holding = false;
std::atomic<bool> locking = false;
std::atomic<bool> threads_share = false;

void start_locking() {
  if (locking.exchange(true)) return;
  // Inside a call that began without the lock (the one starting an agent):
  // taken now, before the other thread exists, and given at the call's end.
  if (depth > 0 && !holding) {
    lock.lock();
    holding = true;
  }
}

}  // namespace library_entry

namespace {

std::atomic<int> threads_waiting = 0;         // for the library lock, in lock_counted
std::atomic<unsigned> lock_acquisitions = 0;  // by lock_counted

}  // namespace

// Counted, so that a thread letting others in (let_other_threads_in) knows
// someone waits and when one has taken it.
void library_entry::lock_counted() {
  ++threads_waiting;
  lock.lock();
  --threads_waiting;
  ++lock_acquisitions;
}

void set_threads_share_library(bool shared) {
  library_entry::threads_share = shared;
  if (shared) library_entry::start_locking();
}

void let_other_threads_in() {
  using library_entry::depth;
  if (depth == 0 || !library_entry::holding) return;
  const int held_depth = std::exchange(depth, 0);
  const unsigned before = lock_acquisitions;
  library_entry::lock.unlock();
  // A woken waiter needs a moment to take the mutex; without this the releasing thread would mostly take it back first.
  constexpr int kMostYields = 1000;
  for (int i = 0; i < kMostYields && threads_waiting > 0 && lock_acquisitions == before; ++i) sched_yield();
  // Counted too: a thread waiting here to take the lock back is a waiter
  // the next thread letting others in must make way for. Uncounted, two
  // threads waiting in MPI at once on one core starved one another: the
  // holder saw nobody waiting and took the lock straight back, every time.
  library_entry::lock_counted();
  depth = held_depth;
}

// The calls of the application's threads take the lock before the agent's thread exists.
ProgressAgent::ProgressAgent(std::function<bool()> poll)
    : poll_((library_entry::start_locking(), std::move(poll))), thread_([this] { run(); }) {}

ProgressAgent::~ProgressAgent() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_requested_.notify_one();
  thread_.join();
}

void ProgressAgent::run() {
  std::unique_lock lock(mutex_);
  std::chrono::microseconds nap = kShortestNap;
  while (!stop_requested_.wait_for(lock, nap, [&] { return stop_; })) {
    // Held by an application thread: it is inside MPI and progresses itself.
    if (!library_entry::lock.try_lock()) continue;
    ++library_entry::depth;
    const bool handled = poll_();
    --library_entry::depth;
    library_entry::lock.unlock();
    nap = handled ? kShortestNap : std::min(nap * 2, kLongestNap);
  }
}

}  // namespace viastack::mpi
