// A collective operation as a coroutine (C++20): the algorithm is written as
// a sequence of rounds, each a Batch of sends and receives that it co_awaits,
// with local work (copies, reductions) in between. The same coroutine serves
// the blocking call, which waits for each batch in turn, and the non-blocking
// one, which the progress engine (nonblocking_collectives.hpp) resumes from
// inside any MPI call once the batch it waits for is complete. A collective
// built from others co_awaits them as sub-tasks.
#pragma once

#include <algorithm>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "p2p.hpp"
#include "request.hpp"

namespace viastack::mpi {

class Batch;
class Communicator;

// One collective call on a communicator. Its messages carry tags of their own
// (the algorithm's step tag and the call's sequence number on the
// communicator), so calls outstanding at once never match each other's messages:
// every rank numbers its collective calls on a communicator alike, since MPI
// requires them in the same order everywhere.
class Call {
 public:
  explicit Call(const Communicator& comm);
  // A collective of an intercommunicator's own (intercomm_collectives.hpp), whose messages go between its groups.
  static Call between_groups(const Communicator& inter);
  const Communicator& comm() const { return *comm_; }
  int tag(int step) const { return int((std::uint32_t(step) << kSequenceBits | sequence_) & 0x7fffffffu); }

 private:
  static constexpr int kSequenceBits = 14;
  Call(const Communicator& comm, std::uint32_t sequence)
      : comm_(&comm), sequence_(sequence & ((1u << kSequenceBits) - 1)) {}
  const Communicator* comm_;
  std::uint32_t sequence_;
};

// What one outermost task is doing: the batch it waits for and where to
// resume, or that it finished (with the Error or bad_alloc that ended it, if any).
struct TaskDriver {
  const Batch* waiting_on = nullptr;
  std::coroutine_handle<> resume_point;
  std::exception_ptr error;
  bool finished = false;

  // Resumes the task for as long as what it waits for is complete.
  void advance();
};

class [[nodiscard]] CollectiveTask {
 public:
  struct promise_type;
  using Handle = std::coroutine_handle<promise_type>;

  struct promise_type {
    TaskDriver* driver = nullptr;
    std::coroutine_handle<> continuation;  // the task that awaits this one; none for the outermost
    std::exception_ptr error;

    CollectiveTask get_return_object() { return CollectiveTask(Handle::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(Handle done) noexcept {
        promise_type& p = done.promise();
        if (p.continuation) return p.continuation;
        p.driver->finished = true;
        p.driver->error = p.error;
        return std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
  };

  CollectiveTask(CollectiveTask&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  CollectiveTask& operator=(CollectiveTask&&) = delete;
  ~CollectiveTask() {
    if (handle_) handle_.destroy();
  }

  // As the outermost task: runs until it first waits or finishes.
  void start(TaskDriver& driver) {
    handle_.promise().driver = &driver;
    driver.resume_point = handle_;
    driver.advance();
  }

  // Awaited by another task: runs as part of it, and rethrows what ended it.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(Handle parent) noexcept {
    handle_.promise().driver = parent.promise().driver;
    handle_.promise().continuation = parent;
    return handle_;
  }
  void await_resume() const {
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
  }

 private:
  explicit CollectiveTask(Handle handle) : handle_(handle) {}
  Handle handle_;
};

// The messages of one round of a collective call, awaited together.
class Batch {
 public:
  explicit Batch(const Call& call);
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  // Left non-empty only when an error cut the batch short: pending requests then clean up after themselves.
  ~Batch();
  // Each posts a message of the round; both return the batch, so that a round reads as one expression.
  Batch& send(const void* buf, std::size_t count, const Datatype& type, int dest, int step);
  Batch& recv(void* buf, std::size_t count, const Datatype& type, int source, int step);
  // As recv, for a rank that passes the message on (at most one such per
  // batch): a message longer than buf takes fills buf as far as it goes and,
  // instead of failing the batch, leaves the whole of it (packed) in `whole`,
  // which is left empty otherwise.
  Batch& recv_passing_on(void* buf, std::size_t count, const Datatype& type, int source, int step,
                         std::vector<std::byte>& whole);
  bool complete() const {
    return std::all_of(requests_.begin(), requests_.end(), [](const Request* r) { return r->complete; });
  }

  // co_await batch: waits until every message is complete, retires them, and throws when one did not fit.
  struct Awaiter {
    Batch& batch;
    bool await_ready() const { return batch.complete(); }
    void await_suspend(CollectiveTask::Handle task) const {
      TaskDriver& driver = *task.promise().driver;
      driver.waiting_on = &batch;
      driver.resume_point = task;
    }
    void await_resume() const { batch.retire(); }
  };
  friend Awaiter operator co_await(Batch& batch) { return Awaiter{batch}; }

 private:
  void retire();
  const Call& call_;
  std::vector<Request*> requests_;
  const Request* passing_on_ = nullptr;  // recv_passing_on's
  std::vector<std::byte>* whole_ = nullptr;
};

// Runs a task to its end in the calling thread (a blocking collective), progressing everything else meanwhile.
void run_blocking(CollectiveTask task);

}  // namespace viastack::mpi
