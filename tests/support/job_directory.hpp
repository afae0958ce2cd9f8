// Test support for the tcp provider: a job key and a job directory for this
// process, as viarun gives its ranks, so that tcp NICs opened here (or in
// forked children) find each other by rank. Needs Asio (link the test
// against `test_support_tcp`).
//
// The directory runs in a process of its own, not a thread of this one:
// tests fork ranks, and a child forked while another thread holds a lock
// (in the allocator, in OpenSSL) can block on it forever.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "bootstrap/directory.hpp"

namespace testing_support {

inline void use_job_directory() {
  static const std::string key_hex = via::tcp::key_to_hex(via::tcp::random_key());
  static const std::string address = [] {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe for the job directory");
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork for the job directory");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // goes when the test process goes
      if (getppid() != parent) _exit(0);
      close(fds[0]);
      via::tcp::DirectoryServer server(*via::tcp::key_from_hex(key_hex), asio::ip::address_v4::loopback(), 1);
      const std::string where = server.address() + "\n";
      if (write(fds[1], where.data(), where.size()) != ssize_t(where.size())) _exit(1);
      close(fds[1]);
      for (;;) pause();
    }
    close(fds[1]);
    std::string where;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') where += c;
    close(fds[0]);
    if (where.empty()) throw std::runtime_error("the job directory did not start");
    return where;
  }();
  setenv("VIASTACK_JOB_KEY", key_hex.c_str(), 1);
  setenv("VIASTACK_DIRECTORY", address.c_str(), 1);
}

}  // namespace testing_support
