// Progress while the application computes: passive-target one-sided
// communication must complete while the target process is outside MPI (in a
// computation, or asleep). Over shm a Put or Get is single-copy from the
// origin and needs nobody at the target, but a lock request, an accumulate or
// a fetch-and-op needs the target's CPU, and over tcp every RDMA frame does:
// the VIA engine has no hidden thread. So while a process has a window shared
// with other processes, an agent thread polls the transport on its behalf.
//
// The engine is single-threaded (one thread at a time on a NIC), so the
// library has one lock: once a second thread may enter the library (an
// agent, or MPI_THREAD_MULTIPLE) every MPI call holds it (guarded() takes
// it), and the agent polls only when it can take it without waiting. An application thread
// inside MPI makes progress itself; the agent covers the time outside.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace viastack::mpi {

// The library lock: a word in three states, so that taking and giving it
// uncontended is one atomic instruction each, a few times cheaper than a
// pthread mutex's (every MPI call takes it), while a contended taker sleeps
// in the kernel (atomic wait) instead of spinning. The classic three-state
// mutex (Drepper, "Futexes Are Tricky", mutex 3). The uncontended ways are
// inline: every MPI call takes and gives it.
class LibraryLock {
 public:
  void lock() {
    int seen = kFree;
    if (!state_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire)) lock_contended(seen);
  }
  bool try_lock() {
    int seen = kFree;
    return state_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) state_.notify_one();
  }

 private:
  void lock_contended(int seen);
  static constexpr int kFree = 0, kLocked = 1, kContended = 2;  // kContended: someone may sleep on it
  std::atomic<int> state_ = kFree;
};

namespace library_entry {
extern LibraryLock lock;
// Calls of this thread into the library under way: the lock is taken by the outermost.
// initial-exec: read on every entry and exit, it is then one load off the
// thread pointer instead of a call to __tls_get_addr (the library's one
// thread-local, well within the static TLS glibc keeps for a library that
// is dlopen'ed); constinit: no TLS wrapper call either.
[[gnu::tls_model("initial-exec")]] extern thread_local constinit int depth;
// Whether this thread's outermost call under way holds the lock.
[[gnu::tls_model("initial-exec")]] extern thread_local constinit bool holding;
// Whether calls take the lock at all: only once another thread may enter the
// library (MPI_THREAD_MULTIPLE, or a progress agent); until then a call does
// without its two atomic instructions (a single thread, or threads the
// application serialises, have nobody to keep out). Never off again.
extern std::atomic<bool> locking;
extern std::atomic<bool> threads_share;
// Takes the lock where other threads share the library (progress_agent.cpp).
void lock_counted();
// From now on calls take the lock; a call under way on this thread takes it now.
void start_locking();
}  // namespace library_entry

// The library lock, held for the duration of an MPI call; calls made from
// inside a call (an error handler's) are nested, not locked again.
class LibraryEntry {
 public:
  LibraryEntry() {
    if (library_entry::depth++ > 0 || !library_entry::locking.load(std::memory_order_relaxed)) return;
    if (!library_entry::threads_share.load(std::memory_order_relaxed))  // no other thread to make way for
      library_entry::lock.lock();
    else
      library_entry::lock_counted();
    library_entry::holding = true;
  }
  ~LibraryEntry() {
    if (--library_entry::depth == 0 && library_entry::holding) {
      library_entry::holding = false;
      library_entry::lock.unlock();
    }
  }
  LibraryEntry(const LibraryEntry&) = delete;
  LibraryEntry& operator=(const LibraryEntry&) = delete;
};

// MPI_THREAD_MULTIPLE: application threads share the library lock, and a call
// that waits (P2P::wait_until) lets the others in now and then, so that a
// thread blocked in MPI_Recv does not keep out the thread whose send it waits for.
void set_threads_share_library(bool shared);
inline bool threads_share_library() { return library_entry::threads_share.load(std::memory_order_relaxed); }
// With the lock held: gives it up until a thread waiting for it has had its
// turn (or a moment has passed), then takes it back.
void let_other_threads_in();

class ProgressAgent {
 public:
  // poll() runs under the library lock and says whether it handled anything.
  explicit ProgressAgent(std::function<bool()> poll);
  // May be called with the library lock held: the agent never waits for it.
  ~ProgressAgent();
  ProgressAgent(const ProgressAgent&) = delete;
  ProgressAgent& operator=(const ProgressAgent&) = delete;

  // How long the agent sleeps between polls: the shortest after a poll that
  // handled something, doubling to the longest while nothing comes. A lock
  // request to a target that sleeps outside MPI waits at most the longest.
  static constexpr std::chrono::microseconds kShortestNap{50};
  static constexpr std::chrono::microseconds kLongestNap{2000};

 private:
  void run();

  std::function<bool()> poll_;
  std::mutex mutex_;  // guards stop_
  std::condition_variable stop_requested_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is set
};

}  // namespace viastack::mpi
