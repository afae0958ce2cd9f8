#include "progress_agent.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <utility>

namespace viastack::mpi {

namespace {

std::mutex library_mutex;
thread_local int entry_depth = 0;
std::atomic<bool> threads_share = false;
std::atomic<int> threads_waiting = 0;         // for library_mutex, in LibraryEntry
std::atomic<unsigned> lock_acquisitions = 0;  // by LibraryEntry

}  // namespace

LibraryEntry::LibraryEntry() {
  if (entry_depth++ > 0) return;
  if (!threads_share.load(std::memory_order_relaxed)) {  // no other thread to make way for
    library_mutex.lock();
    return;
  }
  ++threads_waiting;
  library_mutex.lock();
  --threads_waiting;
  ++lock_acquisitions;
}

void set_threads_share_library(bool shared) { threads_share = shared; }

bool threads_share_library() { return threads_share; }

void let_other_threads_in() {
  if (entry_depth == 0) return;
  const int depth = std::exchange(entry_depth, 0);
  const unsigned before = lock_acquisitions;
  library_mutex.unlock();
  // A woken waiter needs a moment to take the mutex; without this the releasing thread would mostly take it back first.
  constexpr int kMostYields = 1000;
  for (int i = 0; i < kMostYields && threads_waiting > 0 && lock_acquisitions == before; ++i) sched_yield();
  library_mutex.lock();
  entry_depth = depth;
}

LibraryEntry::~LibraryEntry() {
  if (--entry_depth == 0) library_mutex.unlock();
}

ProgressAgent::ProgressAgent(std::function<bool()> poll) : poll_(std::move(poll)), thread_([this] { run(); }) {}

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
    if (!library_mutex.try_lock()) continue;
    ++entry_depth;
    const bool handled = poll_();
    --entry_depth;
    library_mutex.unlock();
    nap = handled ? kShortestNap : std::min(nap * 2, kLongestNap);
  }
}

}  // namespace viastack::mpi
