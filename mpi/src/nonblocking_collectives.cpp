#include "nonblocking_collectives.hpp"

#include <new>

#include "comm.hpp"
#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

Call::Call(const Communicator& comm)
    : comm_(&comm), sequence_(comm.next_collective_sequence() & ((1u << kSequenceBits) - 1)) {}

void TaskDriver::advance() {
  while (!finished && (!waiting_on || waiting_on->complete())) {
    waiting_on = nullptr;
    resume_point.resume();
  }
}

Batch::Batch(const Call& call) : call_(call) {}

Batch::~Batch() {
  for (Request* r : requests_) {
    if (r->complete)
      delete r;
    else
      r->detached = true;
  }
}

Batch& Batch::send(const void* buf, std::size_t count, const Datatype& type, int dest, int step) {
  const Communicator& comm = call_.comm();
  P2P& p2p = runtime().p2p();
  // An eager message is complete once queued: nothing to wait for.
  if (p2p.try_send_eager(buf, count, type, dest, call_.tag(step), comm, comm.collective_context())) return *this;
  requests_.push_back(p2p.isend(buf, count, type, dest, call_.tag(step), comm, comm.collective_context(),
                                SendMode::standard));
  return *this;
}

Batch& Batch::recv(void* buf, std::size_t count, const Datatype& type, int source, int step) {
  const Communicator& comm = call_.comm();
  requests_.push_back(runtime().p2p().irecv(buf, count, type, source, call_.tag(step), comm, comm.collective_context()));
  return *this;
}

Batch& Batch::recv_passing_on(void* buf, std::size_t count, const Datatype& type, int source, int step,
                              std::vector<std::byte>& whole) {
  const Communicator& comm = call_.comm();
  auto* r = new Request(Request::Type::recv, &comm);
  r->keep_whole = true;
  runtime().p2p().post_recv(*r, buf, count, type, source, call_.tag(step), comm.collective_context());
  requests_.push_back(r);
  passing_on_ = r;
  whole_ = &whole;
  return *this;
}

void Batch::retire() {
  for (Request* r : requests_) {
    int error = r->error;
    if (r == passing_on_ && error == MPI_ERR_TRUNCATE) {
      *whole_ = std::move(r->staging);
      error = MPI_SUCCESS;
    }
    delete r;
    if (error != MPI_SUCCESS) {
      requests_.clear();
      fail(error, "a message of a collective operation did not fit (the ranks disagree on counts or types)");
    }
  }
  requests_.clear();
}

void run_blocking(CollectiveTask task) {
  TaskDriver driver;
  task.start(driver);
  P2P& p2p = runtime().p2p();
  while (!driver.finished) {
    p2p.wait_until([&] { return driver.waiting_on->complete(); });
    driver.advance();
  }
  if (driver.error) std::rethrow_exception(driver.error);
}

namespace {

int error_class_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.error_class;
  } catch (const std::bad_alloc&) {
    return MPI_ERR_NO_MEM;
  }
}

}  // namespace

Request* NonblockingCollectives::start(const Communicator& comm, CollectiveTask task,
                                       std::shared_ptr<const void> arguments) {
  auto op = std::make_unique<Operation>(Operation{std::move(task), std::move(arguments), nullptr, {}});
  op->task.start(op->driver);
  if (op->driver.error) std::rethrow_exception(op->driver.error);
  auto* request = new Request(Request::Type::collective, &comm);
  request->complete = op->driver.finished;
  op->request = request;
  if (!op->driver.finished) {
    running_.push_back(std::move(op));
    p2p_.set_progress_client(this);
  }
  return request;
}

void launch(const Communicator& comm, CollectiveTask task, MPI_Request* request,
            std::shared_ptr<const void> arguments) {
  if (request)
    *request = runtime().nonblocking_collectives().start(comm, std::move(task), std::move(arguments));
  else
    run_blocking(std::move(task));
}

void NonblockingCollectives::hand_over(Request* started, Request& into) {
  into.complete = started->complete;
  into.error = started->error;
  for (const std::unique_ptr<Operation>& op : running_)
    if (op->request == started) op->request = &into;
  delete started;
}

void NonblockingCollectives::progress() {
  if (progressing_ || running_.empty()) return;
  progressing_ = true;
  for (std::size_t i = 0; i < running_.size();) {
    Operation& op = *running_[i];
    op.driver.advance();
    if (!op.driver.finished) {
      ++i;
      continue;
    }
    if (op.driver.error) op.request->error = error_class_of(op.driver.error);
    op.request->complete = true;
    running_.erase(running_.begin() + std::ptrdiff_t(i));
  }
  progressing_ = false;
  if (running_.empty()) p2p_.set_progress_client(nullptr);  // polls and waits need not ask until the next start
}

}  // namespace viastack::mpi
