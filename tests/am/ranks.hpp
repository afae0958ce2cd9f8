// Runs a body as the ranks of a small job, each a forked child with the
// environment viarun would give it, so that one test can check what every
// rank saw (and kill one of them). The parent never enables AM itself.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/endpoint.hpp"
#include "support/job_directory.hpp"

namespace am_test {

// Exit status of each rank (128 + signal if killed); a rank still running
// after `timeout_s` is killed and reported as 124.
inline std::vector<int> run_ranks(int n, const std::function<int(int rank)>& body, int timeout_s = 60) {
  const std::string job = testing_support::use_unique_job("amtest");
  // Ranks publish their segments (and, on tcp, their addresses) in a job
  // directory served from this process, as under viarun.
  testing_support::use_job_directory();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("VIASTACK_RANK", std::to_string(r).c_str(), 1);
      setenv("VIASTACK_SIZE", std::to_string(n).c_str(), 1);
      int code = 99;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(n, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      if (status[r] != -1) continue;
      int ws = 0;
      if (waitpid(pids[r], &ws, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        --left;
      }
    }
    if (left && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r)
        if (status[r] == -1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          status[r] = 124;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // What viarun does after a job: segments of killed ranks go.
  std::filesystem::remove_all("/dev/shm/viastack." + job);
  return status;
}

}  // namespace am_test
