#include "job.hpp"

#include <fcntl.h>
#include <signal.h>
#include <string.h>  // sigabbrev_np
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>

namespace viarun {
namespace {

constexpr std::chrono::seconds kTerminateGrace{2};  // SIGTERM -> SIGKILL
constexpr std::chrono::seconds kKillGrace{2};       // SIGKILL -> stop waiting
constexpr int kTimeoutStatus = 124;
constexpr int kLaunchFailureStatus = 1;
constexpr size_t kReadChunk = 64 * 1024;
// Bounds draining a rank's pipes when it exits, in case something it started
// keeps writing into them.
constexpr int kMaxDrainReads = 16;

std::string signal_name(int signal_number) {
  const char* abbreviation = ::sigabbrev_np(signal_number);
  return abbreviation ? std::string("SIG") + abbreviation : "unknown signal";
}

int exit_status_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

std::string describe_failure(int rank, int wait_status) {
  std::string who = "rank " + std::to_string(rank);
  if (WIFSIGNALED(wait_status)) {
    int signal_number = WTERMSIG(wait_status);
    return who + " killed by signal " + std::to_string(signal_number) + " (" +
           signal_name(signal_number) + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(wait_status));
}

// With 1024 ranks viarun holds over 2048 pipe ends, more than the usual soft
// limit of open files; ranks get the original limit back.
rlimit raise_open_files_limit() {
  rlimit original{};
  ::getrlimit(RLIMIT_NOFILE, &original);
  rlimit raised{original.rlim_max, original.rlim_max};
  ::setrlimit(RLIMIT_NOFILE, &raised);
  return original;
}

std::string tag_prefix(int rank, bool tag_output) {
  if (!tag_output) return "";
  std::string prefix = "[";  // built step by step: GCC 12 misreports "[" + to_string(...)
  prefix += std::to_string(rank);
  prefix += "] ";
  return prefix;
}

std::string system_error_text() { return std::strerror(errno); }

}  // namespace

Job::Rank::Rank(int index, bool tag_output)
    : index(index),
      streams{
          OutputStream{UniqueFd(), LineForwarder(STDOUT_FILENO, tag_prefix(index, tag_output))},
          OutputStream{UniqueFd(), LineForwarder(STDERR_FILENO, tag_prefix(index, tag_output))}} {}

Job::Job(const LaunchOptions& options, std::string program_path, std::string job_id, JobContact contact,
         SignalWatcher& signals)
    : options_(options),
      program_path_(std::move(program_path)),
      job_id_(std::move(job_id)),
      contact_(std::move(contact)),
      signals_(signals),
      dev_null_(::open("/dev/null", O_RDONLY | O_CLOEXEC)),
      read_buffer_(kReadChunk) {
  if (!dev_null_.is_open()) throw std::system_error(errno, std::generic_category(), "/dev/null");
  if (!options.hosts.empty()) {
    RankIdentity any{0, options.ranks, 0, 1, 1, job_id_, options.provider, contact_.key, contact_.directory};
    launcher_path_ = resolve_program(remote_command(options.launcher, options.hosts[0], any, program_path_,
                                                    options.command).front());
  }
  if (options.hosts.empty()) {
    const CpuTopology topology = this_machine();
    node_cpus_ = topology.cpus();
    bindings_ = plan_bindings(topology, options.ranks, options.bind_to, options.map_by);
  }
  ranks_.reserve(static_cast<size_t>(options.ranks));
  for (int index = 0; index < options.ranks; ++index)
    ranks_.emplace_back(index, options.tag_output);
}

Job::~Job() {
  for (const Rank& rank : ranks_) {
    if (rank.running) ::kill(-rank.pid, SIGKILL);
  }
}

int Job::run() {
  if (options_.timeout) {
    deadline_ =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(options_.timeout->seconds);
  }
  start_ranks();
  while (!finished()) {
    wait_for_events();
    if (deadline_ && Clock::now() >= *deadline_) on_deadline();
  }
  return exit_status_;
}

void Job::start_ranks() {
  const InheritedState inherited{signals_.original_mask(), raise_open_files_limit()};
  for (Rank& rank : ranks_) {
    if (!start_rank(rank, inherited)) {
      begin_ending(kLaunchFailureStatus);
      return;
    }
  }
}

bool Job::start_rank(Rank& rank, const InheritedState& inherited) {
  std::array<UniqueFd, 2> write_ends;
  if (!open_output_pipes(rank, write_ends)) return false;
  // Round-robin over the hosts; local rank and size count the ranks on one host.
  const int hosts = options_.hosts.empty() ? 1 : int(options_.hosts.size());
  const int host = rank.index % hosts;
  const RankIdentity identity{rank.index,
                              options_.ranks,
                              rank.index / hosts,
                              (options_.ranks - host + hosts - 1) / hosts,
                              hosts,
                              job_id_,
                              options_.provider,
                              contact_.key,
                              contact_.directory,
                              node_cpus_};
  const bool remote = !options_.hosts.empty();
  const std::optional<cpu_set_t> cpus = remote ? std::nullopt : bindings_[std::size_t(rank.index)];
  if (options_.report_bindings)
    report("rank " + std::to_string(rank.index) +
           (remote ? " on host " + options_.hosts[std::size_t(host)] + ": placed by the launcher there"
                   : cpus ? " bound to CPUs " + cpu_list(*cpus) : " not bound"));
  const RankLaunch launch{
      remote ? launcher_path_ : program_path_,
      remote ? remote_command(options_.launcher, options_.hosts[size_t(host)], identity, program_path_,
                              options_.command)
             : options_.command,
      rank_environment(identity),
      dev_null_.get(),
      write_ends[0].get(),
      write_ends[1].get(),
      cpus,
  };
  rank.pid = spawn_rank(launch, inherited);
  if (rank.pid < 0) {
    report("cannot start rank " + std::to_string(rank.index) + ": " + system_error_text());
    for (OutputStream& stream : rank.streams) stream.read_end.reset();
    return false;
  }
  rank.running = true;
  return true;
}

// Both ends are close-on-exec, so no rank inherits another rank's pipes; the
// child's dup2 onto 1 and 2 clears the flag only there.
bool Job::open_output_pipes(Rank& rank, std::array<UniqueFd, 2>& write_ends) {
  for (size_t i = 0; i < write_ends.size(); ++i) {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) {
      report("cannot create pipes for rank " + std::to_string(rank.index) + ": " +
             system_error_text());
      return false;
    }
    rank.streams[i].read_end.reset(ends[0]);
    write_ends[i].reset(ends[1]);
    ::fcntl(ends[0], F_SETFL, O_NONBLOCK);
  }
  return true;
}

void Job::wait_for_events() {
  poll_fds_.assign(1, pollfd{signals_.fd(), POLLIN, 0});
  polled_streams_.clear();
  for (Rank& rank : ranks_) {
    for (OutputStream& stream : rank.streams) {
      if (!stream.read_end.is_open()) continue;
      poll_fds_.push_back(pollfd{stream.read_end.get(), POLLIN, 0});
      polled_streams_.push_back(&stream);
    }
  }
  if (::poll(poll_fds_.data(), poll_fds_.size(), poll_timeout_ms()) < 0) {
    if (errno == EINTR) return;
    throw std::system_error(errno, std::generic_category(), "poll");
  }
  // Output first, so that a rank's last lines come before viarun's report of its exit.
  for (size_t i = 1; i < poll_fds_.size(); ++i) {
    if (poll_fds_[i].revents != 0) read_chunk(*polled_streams_[i - 1]);
  }
  if (poll_fds_[0].revents != 0) handle_signals();
}

int Job::poll_timeout_ms() const {
  if (!deadline_) return -1;
  auto remaining = std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - Clock::now());
  return static_cast<int>(
      std::clamp<std::chrono::milliseconds::rep>(remaining.count(), 0, INT_MAX));
}

// Reads one chunk (one per stream per poll round keeps the ranks fair).
// Returns true when data was read and more may follow.
bool Job::read_chunk(OutputStream& stream) {
  ssize_t got = ::read(stream.read_end.get(), read_buffer_.data(), read_buffer_.size());
  if (got > 0) {
    stream.forwarder.feed(std::string_view(read_buffer_.data(), static_cast<size_t>(got)));
    // Where viarun's output has no reader any more, closing the pipe lets the
    // rank meet EPIPE/SIGPIPE just as if it wrote to that reader itself.
    if (stream.forwarder.output_gone()) stream.read_end.reset();
    return stream.read_end.is_open();
  }
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  stream.forwarder.finish();
  stream.read_end.reset();
  return false;
}

void Job::drain(Rank& rank) {
  for (OutputStream& stream : rank.streams) {
    for (int reads = 0; reads < kMaxDrainReads && stream.read_end.is_open(); ++reads) {
      if (!read_chunk(stream)) break;
    }
  }
}

void Job::handle_signals() {
  for (const ReceivedSignal& received : signals_.take_pending()) {
    if (received.number == SIGCHLD) {
      reap_children(received.sender);
    } else {
      on_termination_signal(received.number);
    }
  }
}

// Several ranks may have ended since viarun last looked, on a busy machine;
// the one to blame is the first to fail, so the first to end goes first.
// waitpid(-1) returns them in the order they were started, whoever died
// first. The others come after it in that order: which of them ended first
// is not known, so a failure among them is blamed on the lowest rank.
void Job::reap_children(pid_t first_to_end) {
  int wait_status = 0;
  if (first_to_end > 0 && ::waitpid(first_to_end, &wait_status, WNOHANG) == first_to_end)
    on_rank_exit(first_to_end, wait_status);
  pid_t pid;
  while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0) on_rank_exit(pid, wait_status);
}

void Job::on_rank_exit(pid_t pid, int wait_status) {
  auto found =
      std::find_if(ranks_.begin(), ranks_.end(), [pid](const Rank& r) { return r.pid == pid; });
  if (found == ranks_.end()) return;
  Rank& rank = *found;
  rank.running = false;
  drain(rank);
  if (phase_ != Phase::running) return;  // the job is already ending; not a new failure
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
    if (running_ranks() == 0) begin_ending(0);
    return;
  }
  report(describe_failure(rank.index, wait_status));
  begin_ending(exit_status_of(wait_status));
}

void Job::on_termination_signal(int signal_number) {
  if (phase_ == Phase::running) {
    report("received " + signal_name(signal_number) + "; terminating " +
           std::to_string(running_ranks()) + " ranks");
    begin_ending(128 + signal_number);
  } else if (phase_ == Phase::terminating) {
    escalate_to_sigkill();  // asked twice: skip the grace period
  }
}

void Job::on_deadline() {
  switch (phase_) {
    case Phase::running:
      report("job exceeded --timeout " + options_.timeout->text + " s; killing " +
             std::to_string(running_ranks()) + " ranks");
      begin_ending(kTimeoutStatus);
      break;
    case Phase::terminating:
      escalate_to_sigkill();
      break;
    case Phase::killing:
      abandon();
      break;
    case Phase::abandoned:
      break;
  }
}

// Every path to the end goes through here, even success: the SIGTERM then
// reaches what the ranks left behind, which might otherwise hold the output
// pipes open forever.
void Job::begin_ending(int exit_status) {
  exit_status_ = exit_status;
  signal_all(SIGTERM);
  phase_ = Phase::terminating;
  deadline_ = Clock::now() + kTerminateGrace;
}

void Job::escalate_to_sigkill() {
  signal_all(SIGKILL);
  phase_ = Phase::killing;
  deadline_ = Clock::now() + kKillGrace;
}

// Only a process that escaped its process group or is stuck in the kernel can
// get here; viarun stops waiting for it rather than hang.
void Job::abandon() {
  int unfinished = 0;
  for (Rank& rank : ranks_) {
    bool output_open = false;
    for (OutputStream& stream : rank.streams) {
      if (!stream.read_end.is_open()) continue;
      output_open = true;
      stream.forwarder.finish();
      stream.read_end.reset();
    }
    if (rank.running || output_open) ++unfinished;
  }
  report("giving up on " + std::to_string(unfinished) +
         " ranks whose processes or output outlived SIGKILL");
  phase_ = Phase::abandoned;
  deadline_.reset();
}

// Signals each rank's whole process group, also of ranks already reaped, so
// that their children are reached too. The group id of a reaped rank whose
// group is empty could be reused, but only by a new group leader with a
// recycled pid within the few seconds a job takes to end.
void Job::signal_all(int signal_number) {
  for (const Rank& rank : ranks_) {
    if (rank.pid > 0) ::kill(-rank.pid, signal_number);
  }
}

int Job::running_ranks() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.running; }));
}

bool Job::finished() const {
  if (phase_ == Phase::abandoned) return true;
  if (phase_ == Phase::running || running_ranks() > 0) return false;
  return std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) {
    return rank.streams[0].read_end.is_open() || rank.streams[1].read_end.is_open();
  });
}

}  // namespace viarun
