// Black-box tests of viarun: each test runs build/bin/viarun with
// viarun_test_rank as the rank program and checks its output and status.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_line.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::string kViarun = VIARUN_PATH;
const std::string kRankProgram = VIARUN_TEST_RANK_PATH;
// A test whose viarun runs longer than this has failed; viarun is then killed.
constexpr auto kHardLimit = 20s;

struct RunResult {
  int exit_code = -1;  // -1 when viarun did not exit normally
  std::string out;
  std::string err;
  double seconds = 0;
};

// viarun's environment: the test's own, without VIASTACK_* variables, with
// `extra` ("NAME=value") added or replacing.
std::vector<std::string> viarun_environment(const std::vector<std::string>& extra) {
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::set<std::string> replaced;
  for (const std::string& entry : extra) replaced.insert(name_of(entry));
  std::vector<std::string> environment;
  for (char** entry = environ; *entry; ++entry) {
    std::string name = name_of(*entry);
    if (!name.starts_with("VIASTACK_") && !replaced.contains(name))
      environment.emplace_back(*entry);
  }
  environment.insert(environment.end(), extra.begin(), extra.end());
  return environment;
}

std::vector<char*> null_terminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// viarun running in the background with its stdout and stderr captured. Its
// stdin is a pipe that stays open and holds data, which ranks must not see.
class ViarunProcess {
 public:
  explicit ViarunProcess(std::vector<std::string> args,
                         const std::vector<std::string>& extra_env = {}) {
    args.insert(args.begin(), kViarun);
    std::vector<std::string> environment = viarun_environment(extra_env);
    std::vector<char*> argv = null_terminated(args);
    std::vector<char*> envp = null_terminated(environment);
    int in[2], out[2], err[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    // Filled before viarun starts: written later, a viarun that already exited
    // (--help, a missing program) would leave the test to die of SIGPIPE.
    const char kStdinData[] = "stdin data that ranks must not see\n";
    EXPECT_GT(::write(in[1], kStdinData, sizeof kStdinData - 1), 0);
    started_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::close_range(3, ~0U, 0);  // nothing the test runner leaked reaches viarun
      ::execve(kViarun.c_str(), argv.data(), envp.data());
      ::_exit(99);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    stdin_write_ = in[1];
    out_fd_ = out[0];
    err_fd_ = err[0];
  }

  ~ViarunProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : {stdin_write_, out_fd_, err_fd_}) {
      if (fd >= 0) ::close(fd);
    }
  }

  ViarunProcess(const ViarunProcess&) = delete;
  ViarunProcess& operator=(const ViarunProcess&) = delete;

  void send_signal(int signal_number) { ::kill(pid_, signal_number); }
  pid_t pid() const { return pid_; }
  const std::string& stdout_so_far() const { return result_.out; }

  // Reads output until `text` appears on stdout; false if it did not in time.
  bool wait_for_stdout(const std::string& text, std::chrono::milliseconds limit) {
    auto deadline = Clock::now() + limit;
    return pump_until([&] { return result_.out.find(text) != std::string::npos; }, deadline);
  }

  // Reads all output and waits for viarun to exit (killing it after kHardLimit).
  RunResult wait() {
    bool ended = pump_until([&] { return out_fd_ < 0 && err_fd_ < 0; }, started_ + kHardLimit);
    if (!ended) {
      ADD_FAILURE() << "viarun ran longer than the hard limit; killing it";
      ::kill(pid_, SIGKILL);
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    result_.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result_;
  }

 private:
  bool pump_until(const std::function<bool()>& done, Clock::time_point deadline) {
    while (!done()) {
      auto remaining =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (remaining <= 0ms) return false;
      pollfd fds[] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
      if (::poll(fds, 2, static_cast<int>(remaining.count())) <= 0) continue;
      if (fds[0].revents) read_into(out_fd_, result_.out);
      if (fds[1].revents) read_into(err_fd_, result_.err);
    }
    return true;
  }

  static void read_into(int& fd, std::string& sink) {
    char buffer[65536];
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      sink.append(buffer, static_cast<size_t>(got));
    } else {
      ::close(fd);
      fd = -1;  // poll() ignores negative descriptors
    }
  }

  pid_t pid_ = -1;
  int stdin_write_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  Clock::time_point started_;
  RunResult result_;
};

RunResult run_viarun(const std::vector<std::string>& args,
                     const std::vector<std::string>& extra_env = {}) {
  return ViarunProcess(args, extra_env).wait();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// "a=1 b=2" -> {a: 1, b: 2}
std::map<std::string, std::string> parse_fields(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::istringstream stream(line);
  for (std::string field; stream >> field;) {
    size_t equals = field.find('=');
    fields[field.substr(0, equals)] = field.substr(equals + 1);
  }
  return fields;
}

// The env lines of a run, by rank.
std::map<int, std::map<std::string, std::string>> env_by_rank(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> ranks;
  for (const std::string& line : split_lines(out)) {
    auto fields = parse_fields(line);
    ranks[std::stoi(fields.at("rank"))] = fields;
  }
  return ranks;
}

std::string job_id_of(const RunResult& result) {
  for (const std::string& line : split_lines(result.out)) {
    if (line.starts_with("job=")) return line.substr(4);
  }
  return "";
}

// What is left of a job's folder of segments (its own name, if it is left empty).
std::vector<std::string> shm_segments_of_job(const std::string& job_id) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename();
    if (name == "viastack." + job_id) names.push_back(name);
  }
  return names;
}

// The state letter of /proc/PID/stat ('R', 'S', 'T' stopped, 'Z' zombie...),
// or 0 when there is no such process.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  std::string contents((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t state = contents.rfind(')') + 2;
  return state < contents.size() ? contents[state] : 0;
}

// Dead, or a zombie nobody reaps (as under a container's minimal init).
bool process_is_gone(pid_t pid) {
  char state = process_state(pid);
  return state == 0 || state == 'Z';
}

bool wait_for_state(pid_t pid, char state, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (process_state(pid) != state) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(Viarun, GivesEveryRankItsEnvironment) {
  RunResult result = run_viarun({"-n", "4", kRankProgram, "env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  auto ranks = env_by_rank(result.out);
  ASSERT_EQ(ranks.size(), 4u) << result.out;
  const std::string job = ranks[0]["job"];
  EXPECT_EQ(job.size(), 16u);
  EXPECT_EQ(job.find_first_not_of("0123456789abcdef"), std::string::npos) << job;
  for (int rank = 0; rank < 4; ++rank) {
    auto& fields = ranks[rank];
    EXPECT_EQ(fields["size"], "4");
    EXPECT_EQ(fields["local_rank"], std::to_string(rank));
    EXPECT_EQ(fields["local_size"], "4");
    EXPECT_EQ(fields["job"], job);
    EXPECT_EQ(fields["provider"], "shm");
    EXPECT_EQ(fields["launcher"], "viarun");
    // The job's secret and the directory where the ranks' NICs meet.
    EXPECT_EQ(fields["key"], ranks[0]["key"]);
    EXPECT_EQ(fields["key"].size(), 64u);
    EXPECT_EQ(fields["directory"].rfind("127.0.0.1:", 0), 0u) << fields["directory"];
  }
}

TEST(Viarun, HostsAreFilledRoundRobinThroughTheLauncherTemplate) {
  // A launcher that only marks which host it was asked for.
  RunResult result = run_viarun({"-n", "5", "--hosts", "alpha,beta", "--launcher", "env VIARUN_TEST_HOST={host}",
                                 "--listen-address", "127.0.0.1", kRankProgram, "env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto ranks = env_by_rank(result.out);
  ASSERT_EQ(ranks.size(), 5u) << result.out;
  for (int rank = 0; rank < 5; ++rank) {
    auto& fields = ranks[rank];
    EXPECT_EQ(fields["host"], rank % 2 == 0 ? "alpha" : "beta");
    EXPECT_EQ(fields["local_rank"], std::to_string(rank / 2));
    EXPECT_EQ(fields["local_size"], rank % 2 == 0 ? "3" : "2");
    EXPECT_EQ(fields["size"], "5");
    EXPECT_EQ(fields["key"], ranks[0]["key"]);
  }
}

TEST(Viarun, ALauncherTemplateWithoutHostIsRefused) {
  RunResult result = run_viarun({"-n", "2", "--hosts", "a", "--launcher", "ssh", kRankProgram, "env"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("{host}"), std::string::npos) << result.err;
}

// Regression: the directory's thread once took SIGCHLD away from viarun's
// signalfd, and jobs whose ranks had exited lasted until the timeout.
TEST(Viarun, ShortJobsEndAsSoonAsTheirRanksExit) {
  for (int i = 0; i < 10; ++i) {
    RunResult result = run_viarun({"-n", "2", kRankProgram, "env"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_LT(result.seconds, 2.0);
  }
}

TEST(Viarun, JobIdsDifferBetweenRuns) {
  RunResult first = run_viarun({"-n", "1", kRankProgram, "env"});
  RunResult second = run_viarun({"-n", "1", kRankProgram, "env"});
  ASSERT_EQ(first.exit_code, 0);
  ASSERT_EQ(second.exit_code, 0);
  EXPECT_NE(env_by_rank(first.out)[0]["job"], env_by_rank(second.out)[0]["job"]);
}

TEST(Viarun, ProviderComesFromOptionOrEnvironment) {
  RunResult by_option = run_viarun({"-n", "1", "--provider", "tcp", kRankProgram, "env"});
  ASSERT_EQ(by_option.exit_code, 0) << by_option.err;
  EXPECT_EQ(env_by_rank(by_option.out)[0]["provider"], "tcp");

  RunResult inherited = run_viarun({"-n", "1", kRankProgram, "env"}, {"VIASTACK_PROVIDER=tcp"});
  ASSERT_EQ(inherited.exit_code, 0) << inherited.err;
  EXPECT_EQ(env_by_rank(inherited.out)[0]["provider"], "tcp");
}

TEST(Viarun, PassesArgumentsAfterTheProgramUntouched) {
  RunResult result =
      run_viarun({"-n", "1", "--", kRankProgram, "args", "-n", "5", "--tag-output", "--"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "-n\n5\n--tag-output\n--\n");
}

TEST(Viarun, FindsTheProgramInPath) {
  std::filesystem::path program(kRankProgram);
  RunResult result = run_viarun({"-n", "2", program.filename(), "env"},
                                {"PATH=/nonexistent:" + program.parent_path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(env_by_rank(result.out).size(), 2u);
}

TEST(Viarun, FailingRankEndsTheJobWithItsStatus) {
  RunResult result = run_viarun({"-n", "4", kRankProgram, "exit-on", "2", "3"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_LT(result.seconds, 3.0);
  EXPECT_NE(result.err.find("viarun: rank 2 exited with status 3\n"), std::string::npos)
      << result.err;
}

TEST(Viarun, RankKilledBySignalGives128PlusTheSignal) {
  RunResult result = run_viarun({"-n", "3", kRankProgram, "kill-on", "1"});
  EXPECT_EQ(result.exit_code, 137);
  EXPECT_LT(result.seconds, 3.0);
  EXPECT_NE(result.err.find("viarun: rank 1 killed by signal 9 (SIGKILL)\n"), std::string::npos)
      << result.err;
}

// Ranks of an "on-signal" job that each printed their pid, by rank.
std::map<int, pid_t> rank_pids(ViarunProcess& viarun, int ranks) {
  std::map<int, pid_t> pids;
  for (int rank = 0; rank < ranks; ++rank) {
    if (!viarun.wait_for_stdout("rank=" + std::to_string(rank) + " pid=", 5000ms)) break;
  }
  for (const std::string& line : split_lines(viarun.stdout_so_far())) {
    auto fields = parse_fields(line);
    pids[std::stoi(fields.at("rank"))] = std::stoi(fields.at("pid"));
  }
  return pids;
}

// Two ranks end while viarun cannot reap them (stopped here, as on a busy
// machine): viarun must name the one that died first, by its real cause, and
// end with its status, whatever order it then finds them in.
TEST(Viarun, NamesTheFirstRankToDieWhenSeveralEndedBeforeItReaped) {
  struct Ending {
    int rank;
    int signal_to_rank;  // SIGUSR1: the rank kills itself with SIGKILL; SIGUSR2: it exits 1
  };
  struct Case {
    Ending first, second;
    int status;
    std::string report;
  };
  const Case cases[] = {
      {{2, SIGUSR1}, {0, SIGUSR2}, 128 + SIGKILL, "viarun: rank 2 killed by signal 9 (SIGKILL)\n"},
      {{0, SIGUSR2}, {2, SIGUSR1}, 1, "viarun: rank 0 exited with status 1\n"},
      {{3, SIGUSR2}, {1, SIGUSR1}, 1, "viarun: rank 3 exited with status 1\n"},
  };
  for (int round = 0; round < 4; ++round) {
    for (const Case& c : cases) {
      SCOPED_TRACE("round " + std::to_string(round) + ": first rank " + std::to_string(c.first.rank));
      ViarunProcess viarun({"-n", "4", kRankProgram, "on-signal"});
      std::map<int, pid_t> pids = rank_pids(viarun, 4);
      ASSERT_EQ(pids.size(), 4u) << viarun.stdout_so_far();
      viarun.send_signal(SIGSTOP);
      ASSERT_TRUE(wait_for_state(viarun.pid(), 'T', 2000ms));
      for (const Ending& ending : {c.first, c.second}) {
        ::kill(pids[ending.rank], ending.signal_to_rank);
        ASSERT_TRUE(wait_for_state(pids[ending.rank], 'Z', 2000ms)) << "rank " << ending.rank;
      }
      viarun.send_signal(SIGCONT);
      RunResult result = viarun.wait();
      EXPECT_EQ(result.exit_code, c.status) << result.err;
      EXPECT_EQ(result.err, c.report);
    }
  }
}

TEST(Viarun, TimeoutEndsTheJobWith124) {
  RunResult result = run_viarun({"--timeout", "1", "-n", "2", kRankProgram, "sleep"});
  EXPECT_EQ(result.exit_code, 124);
  EXPECT_GE(result.seconds, 0.9);
  EXPECT_LT(result.seconds, 4.0);
  EXPECT_NE(result.err.find("viarun: job exceeded --timeout 1 s; killing 2 ranks\n"),
            std::string::npos)
      << result.err;
}

TEST(Viarun, TimeoutComesFromTheEnvironmentToo) {
  RunResult result = run_viarun({"-n", "1", kRankProgram, "sleep"}, {"VIASTACK_TIMEOUT=0.3"});
  EXPECT_EQ(result.exit_code, 124);
  EXPECT_LT(result.seconds, 3.0);
}

TEST(Viarun, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  RunResult result = run_viarun({"--timeout", "1", "-n", "2", kRankProgram, "ignore-term"});
  EXPECT_EQ(result.exit_code, 124);
  EXPECT_EQ(split_lines(result.out).size(), 2u) << result.out;
  EXPECT_GE(result.seconds, 2.9);  // 1 s timeout + 2 s grace
  EXPECT_LT(result.seconds, 6.0);
}

TEST(Viarun, SigintEndsTheJobWith130) {
  ViarunProcess viarun({"-n", "3", kRankProgram, "sleep"});
  ASSERT_TRUE(viarun.wait_for_stdout("ready\nready\nready\n", 5000ms));
  viarun.send_signal(SIGINT);
  RunResult result = viarun.wait();
  EXPECT_EQ(result.exit_code, 130);
  EXPECT_LT(result.seconds, 6.0);
  EXPECT_NE(result.err.find("viarun: received SIGINT; terminating 3 ranks\n"), std::string::npos)
      << result.err;
}

TEST(Viarun, LinesOfRanksNeverInterleave) {
  constexpr int kRanks = 4, kLines = 2000, kLength = 300;
  RunResult result = run_viarun({"-n", std::to_string(kRanks), kRankProgram, "lines",
                                 std::to_string(kLines), std::to_string(kLength)});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = split_lines(result.out);
  ASSERT_EQ(lines.size(), size_t{kRanks * kLines});
  std::vector<int> next_index(kRanks, 0);
  for (const std::string& line : lines) {
    int rank = -1, index = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "rank %d line %d ", &rank, &index), 2) << line;
    ASSERT_TRUE(rank >= 0 && rank < kRanks) << line;
    ASSERT_EQ(index, next_index[rank]++) << "lines of rank " << rank << " out of order";
    ASSERT_EQ(line + "\n", viarun_test::test_line(rank, index, kLength));
  }
}

TEST(Viarun, TagOutputPrefixesEveryLine) {
  RunResult result = run_viarun({"--tag-output", "-n", "3", kRankProgram, "lines", "50", "100"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = split_lines(result.out);
  ASSERT_EQ(lines.size(), 150u);
  for (const std::string& line : lines) {
    int tag = -1, rank = -1, index = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "[%d] rank %d line %d ", &tag, &rank, &index), 3) << line;
    EXPECT_EQ(tag, rank);
    EXPECT_EQ(line.substr(line.find(' ') + 1) + "\n", viarun_test::test_line(rank, index, 100));
  }
}

TEST(Viarun, StderrStaysOnStderrAndIsTaggedToo) {
  RunResult result = run_viarun({"--tag-output", "-n", "2", kRankProgram, "out-and-err"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::string r = std::to_string(rank);
    EXPECT_NE(result.out.find("[" + r + "] out " + r + "\n"), std::string::npos) << result.out;
    EXPECT_NE(result.err.find("[" + r + "] err " + r + "\n"), std::string::npos) << result.err;
  }
  EXPECT_EQ(result.out.find("err"), std::string::npos);
  EXPECT_EQ(result.err.find("out"), std::string::npos);
}

TEST(Viarun, TrailingPartialLineIsFlushed) {
  RunResult exact = run_viarun({"-n", "1", kRankProgram, "partial"});
  EXPECT_EQ(exact.exit_code, 0);
  EXPECT_EQ(exact.out, "tail 0");

  RunResult tagged = run_viarun({"--tag-output", "-n", "1", kRankProgram, "partial"});
  EXPECT_EQ(tagged.exit_code, 0);
  EXPECT_EQ(tagged.out, "[0] tail 0\n");
}

TEST(Viarun, RanksReadAnEmptyStdin) {
  RunResult result = run_viarun({"-n", "2", kRankProgram, "stdin"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "stdin-bytes=0\nstdin-bytes=0\n");
}

TEST(Viarun, NoPipesLeakIntoRanks) {
  RunResult result = run_viarun({"-n", "3", kRankProgram, "fds"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "pipes=0\npipes=0\npipes=0\n");
}

TEST(Viarun, BadUsageExits2) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
  };
  const std::vector<Case> cases = {
      {{}, {}},
      {{"-n"}, {}},
      {{"-n", "2"}, {}},
      {{kRankProgram, "env"}, {}},
      {{"-n", "0", kRankProgram, "env"}, {}},
      {{"-n", "1025", kRankProgram, "env"}, {}},
      {{"-n", "two", kRankProgram, "env"}, {}},
      {{"-n", "2", "--provider", "ib", kRankProgram, "env"}, {}},
      {{"-n", "2", "--timeout", "0", kRankProgram, "env"}, {}},
      {{"-n", "2", "--timeout", "-1", kRankProgram, "env"}, {}},
      {{"-n", "2", "--timeout", "soon", kRankProgram, "env"}, {}},
      {{"-n", "2", "--bogus", kRankProgram, "env"}, {}},
      {{"-n", "2", "--tag-output=yes", kRankProgram, "env"}, {}},
      {{"-n", "2", kRankProgram, "env"}, {"VIASTACK_PROVIDER=ib"}},
      {{"-n", "2", kRankProgram, "env"}, {"VIASTACK_TIMEOUT=never"}},
  };
  for (const Case& bad : cases) {
    std::string joined;
    for (const std::string& arg : bad.args) joined += arg + " ";
    SCOPED_TRACE("viarun " + joined);
    RunResult result = run_viarun(bad.args, bad.env);
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_TRUE(result.err.starts_with("viarun: ")) << result.err;
    EXPECT_NE(result.err.find("usage: viarun -n N"), std::string::npos) << result.err;
    EXPECT_EQ(result.out, "");
  }
}

TEST(Viarun, HelpGoesToStdout) {
  RunResult result = run_viarun({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(result.out.starts_with("usage: viarun -n N")) << result.out;
}

// A bad VIASTACK_* value stops the job before any rank starts, naming the
// variable, its value and what is expected (issue 21, defect 10), even one
// only the ranks read.
TEST(Viarun, ABadVariableStopsTheJobBeforeAnyRankStarts) {
  for (const std::string bad : {"VIASTACK_SPIN_US=-1", "VIASTACK_TCP_PORT=-1", "VIASTACK_SHM_CMA=no"}) {
    SCOPED_TRACE(bad);
    RunResult result = run_viarun({"-n", "2", kRankProgram, "env"}, {bad});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_TRUE(result.err.starts_with("viarun: " + bad + ": expected ")) << result.err;
    EXPECT_EQ(result.out, "");
  }
}

// --info: one line per VIASTACK_* variable, the name first, then its
// default, its current value and its meaning; --help says so.
TEST(Viarun, InfoListsTheVariablesWithDefaultAndCurrentValue) {
  RunResult result = run_viarun({"--info"}, {"VIASTACK_SPIN_US=7"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::map<std::string, std::vector<std::string>> fields_of;
  for (const std::string& line : split_lines(result.out)) {
    if (!line.starts_with("VIASTACK_")) continue;
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string word; fields.size() < 4 && words >> word;) fields.push_back(word);
    EXPECT_EQ(fields.size(), 4u) << line;
    EXPECT_FALSE(fields_of.contains(fields[0])) << "listed twice: " << line;
    fields_of[fields[0]] = fields;
  }
  for (const char* name : {"VIASTACK_PROVIDER", "VIASTACK_TIMEOUT", "VIASTACK_PMI_TIMEOUT", "VIASTACK_LAUNCHER",
                           "VIASTACK_AM_DEPTH", "VIASTACK_MPI_EAGER_LIMIT", "VIASTACK_UTCP_MTU"})
    EXPECT_TRUE(fields_of.contains(name)) << name << " missing from:\n" << result.out;
  ASSERT_TRUE(fields_of.contains("VIASTACK_SPIN_US")) << result.out;
  EXPECT_EQ(fields_of["VIASTACK_SPIN_US"][1], "20");
  EXPECT_EQ(fields_of["VIASTACK_SPIN_US"][2], "7");
  EXPECT_EQ(fields_of["VIASTACK_YIELD_US"][2], "unset");

  RunResult help = run_viarun({"--help"});
  EXPECT_NE(help.out.find("--info"), std::string::npos) << help.out;
}

TEST(Viarun, MissingProgramExits127) {
  for (std::string program : {"no-such-program-for-viarun", "/nonexistent/dir/program"}) {
    RunResult result = run_viarun({"-n", "2", program});
    EXPECT_EQ(result.exit_code, 127) << program;
    EXPECT_NE(result.err.find(program), std::string::npos) << result.err;
  }
}

TEST(Viarun, NonExecutableProgramExits127) {
  std::string path = "/tmp/viarun_test_not_executable." + std::to_string(::getpid());
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  RunResult file = run_viarun({"-n", "1", path});
  std::filesystem::remove(path);
  EXPECT_EQ(file.exit_code, 127);
  EXPECT_NE(file.err.find(path), std::string::npos) << file.err;

  RunResult directory = run_viarun({"-n", "1", "/tmp"});
  EXPECT_EQ(directory.exit_code, 127);
}

class ViarunShm : public ::testing::Test {
 protected:
  // A segment of some other job, which viarun must leave alone.
  const std::string other_job_segment =
      "/dev/shm/viastack.0000000000000000.viarun-test-" + std::to_string(::getpid());
  void SetUp() override { std::ofstream(other_job_segment) << "other job\n"; }
  void TearDown() override {
    EXPECT_TRUE(std::filesystem::exists(other_job_segment));
    std::filesystem::remove(other_job_segment);
  }
};

TEST_F(ViarunShm, RemovesTheJobsSegmentsAfterSuccess) {
  RunResult result = run_viarun({"-n", "3", kRankProgram, "shm-file"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string job = job_id_of(result);
  ASSERT_EQ(job.size(), 16u) << result.out;
  EXPECT_EQ(shm_segments_of_job(job), std::vector<std::string>{});
}

TEST_F(ViarunShm, RemovesTheJobsSegmentsAfterFailure) {
  RunResult result = run_viarun({"-n", "3", kRankProgram, "shm-file", "1"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("viarun: rank 1 exited with status 1\n"), std::string::npos)
      << result.err;
  std::string job = job_id_of(result);
  ASSERT_EQ(job.size(), 16u) << result.out;
  EXPECT_EQ(shm_segments_of_job(job), std::vector<std::string>{});
}

TEST(Viarun, KillsWhatRanksLeaveBehind) {
  RunResult result = run_viarun({"-n", "2", kRankProgram, "grandchild"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_LT(result.seconds, 3.0);  // the grandchildren hold the pipes open until killed
  std::vector<std::string> lines = split_lines(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  for (const std::string& line : lines) {
    pid_t grandchild = std::stoi(parse_fields(line).at("grandchild"));
    auto deadline = Clock::now() + 2s;
    while (!process_is_gone(grandchild) && Clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(process_is_gone(grandchild)) << "grandchild " << grandchild << " survived";
  }
}

TEST(Viarun, SixteenRanksStartAndFinishQuickly) {
  RunResult result = run_viarun({"-n", "16", kRankProgram, "env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_LT(result.seconds, 5.0);
  auto ranks = env_by_rank(result.out);
  ASSERT_EQ(ranks.size(), 16u);
  EXPECT_EQ(ranks.begin()->first, 0);
  EXPECT_EQ(ranks.rbegin()->first, 15);
}

}  // namespace

// ---- where ranks run ----

// Each rank's "Cpus_allowed_list" (e.g. "0-1,4"), by rank, from --tag-output lines.
std::map<int, std::string> allowed_cpus_by_rank(const std::string& out) {
  std::map<int, std::string> cpus;
  for (const std::string& line : split_lines(out)) {
    const auto tab = line.find('\t');
    if (!line.starts_with("[") || tab == std::string::npos) continue;
    cpus[std::stoi(line.substr(1))] = line.substr(tab + 1);
  }
  return cpus;
}

const std::vector<std::string> kShowCpus = {"--tag-output", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status"};

std::vector<std::string> with_show_cpus(std::vector<std::string> args) {
  args.insert(args.end(), kShowCpus.begin(), kShowCpus.end());
  return args;
}

// The CPUs viarun may use here: as many as this test process may.
int usable_cpus() {
  cpu_set_t mine;
  return sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 1;
}

TEST(Viarun, BindToCoreGivesEachRankACoreOfItsOwn) {
  if (usable_cpus() < 2) GTEST_SKIP() << "needs 2 CPUs";
  RunResult result = run_viarun(with_show_cpus({"-n", "2", "--bind-to", "core", "--report-bindings"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto cpus = allowed_cpus_by_rank(result.out);
  ASSERT_EQ(cpus.size(), 2u) << result.out;
  EXPECT_NE(cpus.at(0), cpus.at(1)) << "two ranks on one core";
  EXPECT_NE(result.err.find("viarun: rank 0 bound to CPUs " + cpus.at(0)), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("viarun: rank 1 bound to CPUs " + cpus.at(1)), std::string::npos) << result.err;
}

// As mpirun: bound while every rank has a core, unbound when they must share.
TEST(Viarun, BindsByDefaultOnlyWhenEveryRankHasACore) {
  if (usable_cpus() < 2) GTEST_SKIP() << "needs 2 CPUs";
  RunResult fits = run_viarun(with_show_cpus({"-n", "2"}));
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  const auto bound = allowed_cpus_by_rank(fits.out);
  ASSERT_EQ(bound.size(), 2u) << fits.out;
  EXPECT_NE(bound.at(0), bound.at(1));
  RunResult crowded = run_viarun(with_show_cpus({"-n", std::to_string(2 * usable_cpus() + 1)}));
  ASSERT_EQ(crowded.exit_code, 0) << crowded.err;
  for (const auto& [rank, cpus] : allowed_cpus_by_rank(crowded.out))
    EXPECT_EQ(cpus, allowed_cpus_by_rank(run_viarun(with_show_cpus({"-n", "1", "--bind-to", "none"})).out).at(0))
        << "rank " << rank << " was bound though the ranks outnumber the cores";
}

// Oversubscribed ranks are told so, and wait without spinning (via's engine
// reads VIASTACK_NODE_CPUS); a bad binding request is a usage error.
TEST(Viarun, TellsTheRanksHowManyCpusTheJobHas) {
  RunResult result = run_viarun({"-n", "1", "--", "sh", "-c", "echo cpus=$VIASTACK_NODE_CPUS"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "cpus=" + std::to_string(usable_cpus()) + "\n");
}

TEST(Viarun, BadBindingsAreUsageErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-n", "2", "--bind-to", "thread", "true"},
        std::vector<std::string>{"-n", "2", "--map-by", "node", "true"},
        std::vector<std::string>{"-n", std::to_string(usable_cpus() + 1), "--bind-to", "core", "true"},
        std::vector<std::string>{"-n", "2", "--hosts", "a", "--launcher", "env H={host}", "--bind-to", "core", "true"}}) {
    RunResult result = run_viarun(args);
    EXPECT_EQ(result.exit_code, 2) << args[2] << " " << args[3];
    EXPECT_NE(result.err.find("usage: viarun -n N"), std::string::npos) << result.err;
  }
}
