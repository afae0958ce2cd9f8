// The connection to a PMI server shared by the PMI-1 and PMI-2 clients: the
// socket PMI_FD names, or a TCP connection to PMI_PORT. Every read is bounded
// by a timeout (VIASTACK_PMI_TIMEOUT seconds, 300 by default: a fence waits
// for the slowest rank), so a server that stops answering ends in an error,
// not a hang; a server that is gone is noticed at once.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "bootstrap/bootstrap_impl.hpp"
#include "bootstrap/pmi_wire.hpp"
#include "via/config.hpp"

namespace via::bootstrap::pmi {

class Channel {
 public:
  // The socket PMI_FD names; it is not handed on to programs this one execs.
  static std::unique_ptr<Channel> from_fd(const std::string& text, std::string& error) {
    const auto fd = parse_count(text);
    struct stat st {};
    if (!fd || fstat(*fd, &st) != 0) {
      error = "PMI_FD=" + text + " is not an open file descriptor";
      if (fd) {
        error += " (";
        error += std::strerror(errno);
        error += ')';
      }
      error += ": the process manager's connection is missing";
      return nullptr;
    }
    if (!S_ISSOCK(st.st_mode)) {
      error = "PMI_FD=" + text + " is not a socket, so not a connection to a process manager";
      return nullptr;
    }
    fcntl(*fd, F_SETFD, FD_CLOEXEC);
    return std::unique_ptr<Channel>(new Channel(*fd));
  }

  // A TCP connection to PMI_PORT ("host:port").
  static std::unique_ptr<Channel> connect(const std::string& host_port, std::string& error) {
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      error = "PMI_PORT='" + host_port + "' is not host:port";
      return nullptr;
    }
    const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      error = "PMI_PORT='" + host_port + "': " + gai_strerror(rc);
      return nullptr;
    }
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, freeaddrinfo);
    std::string why = "no address";
    for (const addrinfo* a = found; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      // Linux bounds connect() by the send timeout.
      const timeval limit{long(timeout().count() / 1000), 0};
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return std::unique_ptr<Channel>(new Channel(fd));
      why = std::strerror(errno);
      ::close(fd);
    }
    error = "cannot reach the process manager at PMI_PORT=" + host_port + ": " + why;
    return nullptr;
  }

  ~Channel() { ::close(fd_); }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  static std::chrono::milliseconds timeout() {
    return std::chrono::seconds(config::integer("VIASTACK_PMI_TIMEOUT"));
  }

  bool send(std::string_view bytes, std::string& error) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error = "cannot write to the process manager: ";
        error += std::strerror(errno);
        return false;
      }
      bytes.remove_prefix(std::size_t(n));
    }
    return true;
  }

  // One line, without its '\n'.
  bool read_line(std::string& line, std::string& error) {
    const auto deadline = Clock::now() + timeout();
    std::size_t newline;
    while ((newline = buffer_.find('\n')) == std::string::npos) {
      if (buffer_.size() >= kMaxLine) {
        error = "the process manager sent a line longer than " + std::to_string(kMaxLine) + " bytes";
        return false;
      }
      if (!fill(deadline, error)) return false;
    }
    line = buffer_.substr(0, newline);
    buffer_.erase(0, newline + 1);
    return true;
  }

  bool read_exact(std::size_t n, std::string& out, std::string& error) {
    const auto deadline = Clock::now() + timeout();
    while (buffer_.size() < n)
      if (!fill(deadline, error)) return false;
    out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return true;
  }

  // After an abort: gives the process manager up to `limit` to end this
  // process, as it does when it ends the job.
  void wait_for_close(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) == 0) return;
      char chunk[256];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n == 0 || (n < 0 && errno != EINTR)) return;
    }
  }

  // The IPv4 address of a TCP connection's local end; empty for a local socket.
  std::string local_address() const {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    char text[INET_ADDRSTRLEN] = "";
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0 || address.ss_family != AF_INET)
      return {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr, text, sizeof text);
    return text;
  }

 private:
  using Clock = std::chrono::steady_clock;
  explicit Channel(int fd) : fd_(fd) {}

  bool fill(Clock::time_point deadline, std::string& error) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&p, 1, int(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        error = "no answer from the process manager in " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout()).count()) +
                " s (VIASTACK_PMI_TIMEOUT)";
        return false;
      }
      char chunk[4096];
      const ssize_t n = ready < 0 ? -1 : ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n == 0 ? "the process manager closed the connection"
                       : std::string("cannot read from the process manager: ") + std::strerror(errno);
        return false;
      }
      buffer_.append(chunk, std::size_t(n));
      return true;
    }
  }

  int fd_;
  std::string buffer_;
};

}  // namespace via::bootstrap::pmi
