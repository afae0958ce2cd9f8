// The progress engine of the non-blocking collectives: the tasks started by
// MPI_I… calls, each resumed from inside whatever MPI call polls or waits
// once the batch of messages it waits for is complete.
#pragma once

#include <memory>
#include <vector>

#include "collective_task.hpp"
#include "p2p.hpp"

namespace viastack::mpi {

class NonblockingCollectives final : public ProgressClient {
 public:
  explicit NonblockingCollectives(P2P& p2p) : p2p_(p2p) {}
  NonblockingCollectives(const NonblockingCollectives&) = delete;
  NonblockingCollectives& operator=(const NonblockingCollectives&) = delete;

  // Starts the task and returns its request, complete when the task ends.
  // `arguments` owns what the task's arguments point into (counts,
  // displacements) until then. An error before the task first waits is thrown here.
  Request* start(const Communicator& comm, CollectiveTask task, std::shared_ptr<const void> arguments);

  // Makes `into` (an MPIX_*_init request) the request of the operation `started` was made for, and deletes `started`.
  void hand_over(Request* started, Request& into);

  void progress() override;

 private:
  struct Operation {
    CollectiveTask task;
    std::shared_ptr<const void> arguments;
    Request* request = nullptr;
    TaskDriver driver;
  };
  P2P& p2p_;  // asks progress() in its polls and waits while running_ holds operations
  std::vector<std::unique_ptr<Operation>> running_;
  bool progressing_ = false;  // a user op's function that calls MPI must not resume tasks inside a task
};

// A collective call's task run to its end (request: nullptr, the blocking
// call), or started with its request stored in *request (MPI_I…); arguments
// as NonblockingCollectives::start's.
void launch(const Communicator& comm, CollectiveTask task, MPI_Request* request,
            std::shared_ptr<const void> arguments = {});

}  // namespace viastack::mpi
