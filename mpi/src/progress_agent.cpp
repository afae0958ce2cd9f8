#include "progress_agent.hpp"

#include <algorithm>

namespace viastack::mpi {

namespace {

std::mutex library_mutex;
thread_local int entry_depth = 0;

}  // namespace

LibraryEntry::LibraryEntry() {
  if (entry_depth++ == 0) library_mutex.lock();
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
