#include "progress_agent.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <utility>

namespace viastack::mpi {

namespace {

// The library lock: a word in three states, so that taking and giving it
// uncontended is one atomic instruction each, a few times cheaper than a
// pthread mutex's (every MPI call takes it), while a contended taker sleeps
// in the kernel (atomic wait) instead of spinning. The classic three-state
// mutex (Drepper, "Futexes Are Tricky", mutex 3).
class LibraryLock {
 public:
  void lock() {
    int seen = kFree;
    if (state_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire)) return;
    if (seen != kContended) seen = state_.exchange(kContended, std::memory_order_acquire);
    while (seen != kFree) {
      state_.wait(kContended, std::memory_order_relaxed);
      seen = state_.exchange(kContended, std::memory_order_acquire);
    }
  }
  bool try_lock() {
    int seen = kFree;
    return state_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) state_.notify_one();
  }

 private:
  static constexpr int kFree = 0, kLocked = 1, kContended = 2;  // kContended: someone may sleep on it
  std::atomic<int> state_ = kFree;
};

LibraryLock library_lock;
// initial-exec: read on every entry and exit, it is then one load off the
// thread pointer instead of a call to __tls_get_addr (the library's one
// thread-local, well within the static TLS glibc keeps for a library that
// is dlopen'ed).
[[gnu::tls_model("initial-exec")]] thread_local int entry_depth = 0;
std::atomic<bool> threads_share = false;
std::atomic<int> threads_waiting = 0;         // for library_lock, in lock_counted
std::atomic<unsigned> lock_acquisitions = 0;  // by lock_counted

// Takes the lock where other threads share the library, counted, so that a
// thread letting others in (let_other_threads_in) knows someone waits and
// when one has taken it.
void lock_counted() {
  ++threads_waiting;
  library_lock.lock();
  --threads_waiting;
  ++lock_acquisitions;
}

}  // namespace

LibraryEntry::LibraryEntry() {
  if (entry_depth++ > 0) return;
  if (!threads_share.load(std::memory_order_relaxed)) {  // no other thread to make way for
    library_lock.lock();
    return;
  }
  lock_counted();
}

void set_threads_share_library(bool shared) { threads_share = shared; }

bool threads_share_library() { return threads_share; }

void let_other_threads_in() {
  if (entry_depth == 0) return;
  const int depth = std::exchange(entry_depth, 0);
  const unsigned before = lock_acquisitions;
  library_lock.unlock();
  // A woken waiter needs a moment to take the mutex; without this the releasing thread would mostly take it back first.
  constexpr int kMostYields = 1000;
  for (int i = 0; i < kMostYields && threads_waiting > 0 && lock_acquisitions == before; ++i) sched_yield();
  // Counted too: a thread waiting here to take the lock back is a waiter
  // the next thread letting others in must make way for. Uncounted, two
  // threads waiting in MPI at once on one core starved one another: the
  // holder saw nobody waiting and took the lock straight back, every time.
  lock_counted();
  entry_depth = depth;
}

LibraryEntry::~LibraryEntry() {
  if (--entry_depth == 0) library_lock.unlock();
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
    if (!library_lock.try_lock()) continue;
    ++entry_depth;
    const bool handled = poll_();
    --entry_depth;
    library_lock.unlock();
    nap = handled ? kShortestNap : std::min(nap * 2, kLongestNap);
  }
}

}  // namespace viastack::mpi
