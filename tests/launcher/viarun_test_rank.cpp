// A rank program for testing viarun. Usage: viarun_test_rank MODE [ARGS...]
//   env                 print the VIASTACK_* variables (and VIARUN_TEST_HOST) on one line
//   args ARGS...        print each argument on its own line
//   exit-on RANK CODE   rank RANK exits with CODE, the others sleep forever
//   kill-on RANK        rank RANK raises SIGKILL, the others sleep forever
//   sleep               print "ready", then sleep forever
//   on-signal           print "rank=R pid=P", then wait: SIGUSR1 makes the
//                       rank kill itself with SIGKILL, SIGUSR2 exit with 1
//   ignore-term         ignore SIGTERM, then sleep forever
//   lines COUNT LENGTH  print COUNT test lines of LENGTH bytes as fast as possible
//   out-and-err         print "out R" on stdout and "err R" on stderr
//   partial             print "tail R" without a newline
//   stdin               print how many bytes stdin gave before end of file
//   fds                 print how many pipes are open beyond stdin, stdout, stderr
//   shm-file [FAIL]     create /dev/shm/viastack.<job>/nic.<rank> and print the job id;
//                       with FAIL, that rank exits 1 once every rank's file
//                       exists and the others sleep forever
//   grandchild          leave a child sleeping forever (holding stdout), print
//                       its pid and exit 0
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_line.hpp"

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

int my_rank() { return std::atoi(env("VIASTACK_RANK").c_str()); }
int job_size() { return std::atoi(env("VIASTACK_SIZE").c_str()); }

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

int print_env() {
  std::cout << "rank=" << env("VIASTACK_RANK") << " size=" << env("VIASTACK_SIZE")
            << " local_rank=" << env("VIASTACK_LOCAL_RANK")
            << " local_size=" << env("VIASTACK_LOCAL_SIZE") << " job=" << env("VIASTACK_JOB")
            << " provider=" << env("VIASTACK_PROVIDER") << " launcher=" << env("VIASTACK_LAUNCHER")
            << " key=" << env("VIASTACK_JOB_KEY") << " directory=" << env("VIASTACK_DIRECTORY")
            << " host=" << env("VIARUN_TEST_HOST") << std::endl;
  return 0;
}

// Signals from the test decide how and when the rank ends.
int end_on_signal() {
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGUSR1);
  sigaddset(&wanted, SIGUSR2);
  ::sigprocmask(SIG_BLOCK, &wanted, nullptr);
  std::cout << "rank=" << my_rank() << " pid=" << ::getpid() << std::endl;
  int received = 0;
  ::sigwait(&wanted, &received);
  if (received == SIGUSR1) std::raise(SIGKILL);
  return 1;
}

int print_lines(int count, int length) {
  // stdio's buffer splits the long lines across writes, as real programs do.
  for (int index = 0; index < count; ++index) {
    std::string line = viarun_test::test_line(my_rank(), index, length);
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}

int count_stdin_bytes() {
  size_t total = 0;
  char buffer[4096];
  ssize_t got;
  while ((got = ::read(STDIN_FILENO, buffer, sizeof buffer)) > 0) total += static_cast<size_t>(got);
  std::cout << "stdin-bytes=" << total << std::endl;
  return 0;
}

int count_inherited_pipes() {
  int pipes = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::atoi(entry.path().filename().c_str());
    std::error_code error;
    auto target = std::filesystem::read_symlink(entry.path(), error);
    if (fd > 2 && !error && target.string().starts_with("pipe:")) ++pipes;
  }
  std::cout << "pipes=" << pipes << std::endl;
  return 0;
}

std::string shm_file(int rank) {
  return "/dev/shm/viastack." + env("VIASTACK_JOB") + "/nic." + std::to_string(rank);
}

void wait_for_every_shm_file() {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int rank = 0; rank < job_size() && std::chrono::steady_clock::now() < give_up;) {
    if (std::filesystem::exists(shm_file(rank))) {
      ++rank;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

int create_shm_file(std::optional<int> failing_rank) {
  std::ofstream(shm_file(my_rank())) << "segment\n";
  std::cout << "job=" << env("VIASTACK_JOB") << std::endl;
  if (!failing_rank) return 0;
  if (my_rank() != *failing_rank) sleep_forever();
  wait_for_every_shm_file();
  return 1;
}

int leave_grandchild() {
  pid_t child = ::fork();
  if (child == 0) sleep_forever();
  std::cout << "grandchild=" << child << std::endl;
  return 0;
}

int run(const std::string& mode, const std::vector<std::string>& args) {
  auto arg = [&](size_t i) { return std::atoi(args.at(i).c_str()); };
  if (mode == "env") return print_env();
  if (mode == "args") {
    for (const std::string& a : args) std::cout << a << '\n';
    return 0;
  }
  if (mode == "exit-on") {
    if (my_rank() == arg(0)) return arg(1);
    sleep_forever();
  }
  if (mode == "kill-on") {
    if (my_rank() == arg(0)) std::raise(SIGKILL);
    sleep_forever();
  }
  if (mode == "sleep") {
    std::cout << "ready" << std::endl;
    sleep_forever();
  }
  if (mode == "on-signal") return end_on_signal();
  if (mode == "ignore-term") {
    std::signal(SIGTERM, SIG_IGN);
    std::cout << "ignoring SIGTERM" << std::endl;
    sleep_forever();
  }
  if (mode == "lines") return print_lines(arg(0), arg(1));
  if (mode == "out-and-err") {
    std::cout << "out " << my_rank() << std::endl;
    std::cerr << "err " << my_rank() << std::endl;
    return 0;
  }
  if (mode == "partial") {
    std::cout << "tail " << my_rank() << std::flush;
    return 0;
  }
  if (mode == "stdin") return count_stdin_bytes();
  if (mode == "fds") return count_inherited_pipes();
  if (mode == "shm-file")
    return create_shm_file(args.empty() ? std::nullopt : std::optional(arg(0)));
  if (mode == "grandchild") return leave_grandchild();
  std::cerr << "viarun_test_rank: unknown mode '" << mode << "'\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: viarun_test_rank MODE [ARGS...]\n";
    return 64;
  }
  return run(argv[1], std::vector<std::string>(argv + 2, argv + argc));
}
