// Finding the program and starting one rank of it.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace viarun {

// The program cannot be run; viarun exits 127.
class ProgramNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Finds `name` the way execvp does: as a path when it contains '/', else in
// $PATH. Returns the path of an executable regular file or throws ProgramNotFound.
std::string resolve_program(const std::string& name);

// 16 random hex digits.
std::string make_job_id();

struct RankIdentity {
  int rank;
  int size;
  int local_rank;  // among the ranks on its host
  int local_size;
  int nodes;  // hosts the job's ranks go round-robin over
  std::string job_id;
  std::string provider;
  std::string job_key;    // the secret that proves membership of the job (hex)
  std::string directory;  // "address:port" of the job's directory
  int node_cpus = 0;      // the CPUs the job may use on this host; 0: not known here
};

// The VIASTACK_* variables of a rank.
std::vector<std::pair<std::string, std::string>> job_variables(const RankIdentity& identity);
// viarun's environment, with the VIASTACK_* variables of this rank set.
std::vector<std::string> rank_environment(const RankIdentity& identity);
// The command line that starts `command` on `host` through the launcher
// template, handing it the rank's variables with env(1).
std::vector<std::string> remote_command(const std::string& launcher_template, const std::string& host,
                                        const RankIdentity& identity, const std::string& program_path,
                                        const std::vector<std::string>& command);

// What a rank's child process restores before exec, so that viarun's own
// settings do not leak into the program.
struct InheritedState {
  sigset_t signal_mask;
  rlimit open_files_limit;
};

struct RankLaunch {
  std::string program_path;
  std::vector<std::string> argv;
  std::vector<std::string> environment;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  std::optional<cpu_set_t> cpus;  // the rank's binding, if any
};

// Forks a process in a new process group (its pid is the group id) and execs
// the program there. Returns the pid, or -1 with errno set when fork fails.
pid_t spawn_rank(const RankLaunch& launch, const InheritedState& inherited);

}  // namespace viarun
