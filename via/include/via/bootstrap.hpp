// How a process learns its place in a job: its rank, the job's size, which
// ranks share its node, and a key-value store with a fence through which
// ranks exchange endpoint addresses. One implementation per process manager:
//
//   viarun     viastack's own launcher (VIASTACK_RANK, VIASTACK_DIRECTORY, ...)
//   pmix       PMIx (Open MPI's mpirun, Slurm's srun --mpi=pmix), via libpmix
//   pmi1       the PMI-1 wire protocol on PMI_FD / PMI_PORT (MPICH's Hydra)
//   pmi2       the PMI-2 wire protocol on PMI_FD (Slurm's srun --mpi=pmi2)
//   singleton  no process manager: rank 0 of 1
//
// The choice is made from the environment the first time a process asks,
// and VIASTACK_BOOTSTRAP=<name> overrides it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace via {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  virtual const char* name() const = 0;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The node each rank runs on, numbered from 0 in order of first rank; ranks
  // on one node can reach each other through shared memory.
  int node_of(int rank) const { return node_of_rank_[std::size_t(rank)]; }
  int node_count() const;
  int local_rank() const;  // among the ranks on this node
  int local_size() const;
  // Unique to the job and usable in file names: scopes shared-memory
  // segments and directory entries.
  const std::string& job_id() const { return job_id_; }

  // The key-value store. put() publishes a value under this rank; fence() is
  // collective over the job and makes every rank's earlier puts visible to
  // all; get() reads the value `rank` published. Keys should be unique within
  // the job. Each returns false with a reason in `error` on failure; a get of
  // a key nobody put fails (after a bounded wait where the store can wait).
  virtual bool put(const std::string& key, const std::string& value, std::string& error) = 0;
  virtual bool fence(std::string& error) = 0;
  virtual bool get(int rank, const std::string& key, std::string& value, std::string& error) = 0;

  // The IPv4 address this process reaches its process manager from, when it
  // knows one: where peers on other nodes can likely reach this one.
  virtual std::string reachable_address() { return {}; }

  // Ends the whole job through the process manager, with its usual report.
  [[noreturn]] virtual void abort(int status, const std::string& message) = 0;

 protected:
  Bootstrap() = default;
  // Called by an implementation once it knows the layout; checks it.
  bool set_layout(int rank, int size, std::vector<int> node_of_rank, std::string job_id, std::string& error);

 private:
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> node_of_rank_{0};
  std::string job_id_;
};

// This process's bootstrap, created on first use; nullptr with the reason in
// `error` when the process manager named by the environment cannot be
// reached. Made anew in a forked child, and when the variables it was made
// from change (tests set up several jobs in one process); holders of an
// earlier one keep it.
std::shared_ptr<Bootstrap> job_bootstrap(std::string& error);

// The CPUs the job may use on this host: VIASTACK_NODE_CPUS (viarun sets its
// own count), else this process's affinity mask, or the host's online CPUs
// when the mask is one CPU (a launcher's binding, one rank a CPU).
int job_cpus_on_this_host();
// The job's ranks on this host (1 without a job).
int job_ranks_on_this_host();
// Whether this host holds more of the job's ranks than those CPUs: a waiting
// rank then takes the core the rank it waits for needs if it spins.
bool job_outnumbers_cpus_on_this_host();
// How long this process's waits poll, yielding the core, before they sleep
// (VIASTACK_YIELD_US, or its default for this host's share of the job).
std::chrono::nanoseconds wait_yield_time();

// Fences for a flag in memory shared between processes, raised by one and
// awaited by another that may sleep: the raiser stores the flag, then looks
// whether the waiter sleeps; the waiter says it sleeps, then looks at the
// flag; each needs its store ordered before its load. The side that rarely
// needs it pays (the shm provider's segment.hpp says why): a waiter on its
// way into a sleep calls fence_before_sleep, a membarrier that fences every
// running thread of the processes registered for it, and a raiser may leave
// its own fence out where it and every waiter answer true to sleeper_fences.
bool sleeper_fences();  // this process is registered (asked once; false where the kernel refuses)
void fence_before_sleep();  // that membarrier where registered, else a full fence

}  // namespace via
