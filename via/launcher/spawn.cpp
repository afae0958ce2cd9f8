#include "spawn.hpp"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

extern char** environ;

namespace viarun {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string search_path() {
  if (const char* path = std::getenv("PATH")) return path;
  return "/bin:/usr/bin";  // glibc's execvp default
}

std::vector<char*> null_terminated(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the forked child: only system calls from here on.
[[noreturn]] void exec_in_child(const RankLaunch& launch, const InheritedState& inherited,
                                char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  ::dup2(launch.stdin_fd, STDIN_FILENO);
  ::dup2(launch.stdout_fd, STDOUT_FILENO);
  ::dup2(launch.stderr_fd, STDERR_FILENO);
  ::signal(SIGPIPE, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &inherited.signal_mask, nullptr);
  ::setrlimit(RLIMIT_NOFILE, &inherited.open_files_limit);
  if (launch.cpus) ::sched_setaffinity(0, sizeof *launch.cpus, &*launch.cpus);
  ::execve(launch.program_path.c_str(), argv, envp);

  const char* reason = std::strerror(errno);
  std::array<std::string_view, 5> parts{"viarun: cannot execute ", launch.program_path, ": ",
                                        reason, "\n"};
  for (std::string_view part : parts) {
    if (::write(STDERR_FILENO, part.data(), part.size()) < 0) break;
  }
  ::_exit(127);
}

}  // namespace

std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return name;
    struct stat info {};
    bool exists = ::stat(name.c_str(), &info) == 0;
    throw ProgramNotFound(name + (exists ? ": not an executable file" : ": no such file"));
  }
  const std::string path = search_path();
  std::string_view directories = path;
  while (true) {
    size_t colon = directories.find(':');
    std::string directory(directories.substr(0, colon));
    std::string candidate = (directory.empty() ? std::string(".") : directory) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    directories.remove_prefix(colon + 1);
  }
  throw ProgramNotFound(name + ": command not found in PATH");
}

std::string make_job_id() {
  std::array<unsigned char, 8> random_bytes{};
  size_t filled = 0;
  while (filled < random_bytes.size()) {
    ssize_t got = ::getrandom(random_bytes.data() + filled, random_bytes.size() - filled, 0);
    if (got < 0 && errno != EINTR) throw std::runtime_error("getrandom failed");
    if (got > 0) filled += static_cast<size_t>(got);
  }
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string id;
  for (unsigned char byte : random_bytes) {
    id += kHexDigits[byte >> 4];
    id += kHexDigits[byte & 0xf];
  }
  return id;
}

std::vector<std::pair<std::string, std::string>> job_variables(const RankIdentity& identity) {
  std::vector<std::pair<std::string, std::string>> variables = {
      {"VIASTACK_RANK", std::to_string(identity.rank)},
      {"VIASTACK_SIZE", std::to_string(identity.size)},
      {"VIASTACK_LOCAL_RANK", std::to_string(identity.local_rank)},
      {"VIASTACK_LOCAL_SIZE", std::to_string(identity.local_size)},
      {"VIASTACK_NODES", std::to_string(identity.nodes)},
      {"VIASTACK_JOB", identity.job_id},
      {"VIASTACK_PROVIDER", identity.provider},
      {"VIASTACK_LAUNCHER", "viarun"},
      {"VIASTACK_JOB_KEY", identity.job_key},
      {"VIASTACK_DIRECTORY", identity.directory},
  };
  if (identity.node_cpus > 0) variables.emplace_back("VIASTACK_NODE_CPUS", std::to_string(identity.node_cpus));
  return variables;
}

std::vector<std::string> rank_environment(const RankIdentity& identity) {
  const auto variables = job_variables(identity);
  auto is_job_variable = [&](std::string_view entry) {
    for (const auto& [name, value] : variables) {
      if (entry.starts_with(name) && entry.size() > name.size() && entry[name.size()] == '=') {
        return true;
      }
    }
    return false;
  };

  std::vector<std::string> environment;
  for (char** entry = environ; *entry; ++entry) {
    if (!is_job_variable(*entry)) environment.emplace_back(*entry);
  }
  for (const auto& [name, value] : variables) environment.push_back(name + "=" + value);
  return environment;
}

std::vector<std::string> remote_command(const std::string& launcher_template, const std::string& host,
                                        const RankIdentity& identity, const std::string& program_path,
                                        const std::vector<std::string>& command) {
  std::vector<std::string> argv;
  std::string_view rest = launcher_template;
  while (!rest.empty()) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    std::string word(rest.substr(0, rest.find(' ')));
    rest.remove_prefix(word.size());
    for (size_t at; (at = word.find("{host}")) != std::string::npos;) word.replace(at, 6, host);
    argv.push_back(std::move(word));
  }
  argv.push_back("env");
  for (const auto& [name, value] : job_variables(identity)) argv.push_back(name + "=" + value);
  argv.push_back(program_path);
  argv.insert(argv.end(), command.begin() + 1, command.end());
  return argv;
}

pid_t spawn_rank(const RankLaunch& launch, const InheritedState& inherited) {
  // Built before fork so that the child does not allocate.
  std::vector<char*> argv = null_terminated(launch.argv);
  std::vector<char*> envp = null_terminated(launch.environment);
  pid_t pid = ::fork();
  if (pid == 0) exec_in_child(launch, inherited, argv.data(), envp.data());
  // Also set from the parent, so the group exists before viarun may signal it.
  if (pid > 0) ::setpgid(pid, pid);
  return pid;
}

}  // namespace viarun
