// One viarun job: starts the ranks, forwards their output, watches them, and
// ends the job when they are done, one fails, the timeout expires or viarun
// is told to stop.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "line_forwarder.hpp"
#include "options.hpp"
#include "posix_io.hpp"
#include "signal_watcher.hpp"
#include "spawn.hpp"

namespace viarun {

// How the ranks of a job find each other: the job's secret key and the
// address of its directory (see via/src/bootstrap/directory.hpp).
struct JobContact {
  std::string key;
  std::string directory;
};

class Job {
 public:
  Job(const LaunchOptions& options, std::string program_path, std::string job_id, JobContact contact,
      SignalWatcher& signals);
  // Last resort when run() was left by an exception: no rank outlives viarun.
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the job to its end; returns viarun's exit status.
  int run();

 private:
  using Clock = std::chrono::steady_clock;

  // running -> terminating (SIGTERM sent) -> killing (SIGKILL sent) -> abandoned
  enum class Phase { running, terminating, killing, abandoned };

  struct OutputStream {
    UniqueFd read_end;  // closed at end of stream
    LineForwarder forwarder;
  };

  struct Rank {
    Rank(int index, bool tag_output);
    int index;
    pid_t pid = -1;  // also its process group id; -1 when it was never started
    bool running = false;
    std::array<OutputStream, 2> streams;  // the rank's stdout, stderr
  };

  void start_ranks();
  bool start_rank(Rank& rank, const InheritedState& inherited);
  bool open_output_pipes(Rank& rank, std::array<UniqueFd, 2>& write_ends);

  void wait_for_events();
  int poll_timeout_ms() const;
  bool read_chunk(OutputStream& stream);
  void drain(Rank& rank);

  void handle_signals();
  void reap_children(pid_t first_to_end);
  void on_rank_exit(pid_t pid, int wait_status);
  void on_termination_signal(int signal_number);
  void on_deadline();

  void begin_ending(int exit_status);
  void escalate_to_sigkill();
  void abandon();
  void signal_all(int signal_number);
  int running_ranks() const;
  bool finished() const;

  const LaunchOptions& options_;
  std::string program_path_;
  std::string job_id_;
  JobContact contact_;
  std::string launcher_path_;  // with --hosts: the launcher command's program
  int node_cpus_ = 0;  // without --hosts: the CPUs viarun may use
  std::vector<std::optional<cpu_set_t>> bindings_;  // without --hosts: each rank's CPUs, if bound
  SignalWatcher& signals_;
  UniqueFd dev_null_;
  std::vector<Rank> ranks_;
  Phase phase_ = Phase::running;
  int exit_status_ = 0;
  std::optional<Clock::time_point> deadline_;  // when the current phase runs out
  std::vector<pollfd> poll_fds_;
  std::vector<OutputStream*> polled_streams_;  // parallel to poll_fds_[1..]
  std::vector<char> read_buffer_;
};

}  // namespace viarun
