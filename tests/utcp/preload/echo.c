/* An ordinary socket program, compiled without any of viastack's headers,
 * run by the preload tests under viarun with LD_PRELOAD=libviastack-preload.so.
 *
 *   echo SERVER-ADDRESS MODE BYTES    MODE: blocking, poll, epoll, select or fork
 *
 * Rank 0 (VIASTACK_RANK) serves: it listens on SERVER-ADDRESS:7070 and echoes
 * one client's bytes until the client shuts down its side. Every other rank
 * connects, sends BYTES bytes of a pattern while reading the echo, and checks
 * it byte for byte. In the modes other than blocking both ends are
 * non-blocking and wait in poll, epoll or select on a set that also holds a
 * kernel socket pair (a loopback TCP connection), through which one byte
 * passes while the echo runs: kernel and utcp descriptors in one wait.
 * SERVER-ADDRESS is in utcp's network, which the kernel has no route to, so
 * an echo that works went through utcp. Every mode moves the bytes by turns
 * with read/write, recv/send and readv/writev (two buffers each), the
 * non-blocking modes' server accepts with accept4(SOCK_NONBLOCK) and every
 * other wait is ppoll, pselect or epoll_pwait, and the
 * client reads back TCP_NODELAY, SO_KEEPALIVE, SO_SNDBUF and TCP_INFO and
 * goes on through a dup2 of its socket. fork is blocking, and the client
 * forks first: the child finds the inherited socket unusable (EOPNOTSUPP),
 * closes it and exits, and the parent's connection goes on unharmed.
 *
 * Any failure prints one line and exits 1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_program.h"

enum { kPort = 7070, kChunk = 16384 };
/* The client's SO_RCVBUF, set before connect: the window it offers stays within it. */
static const int kReceiveBuffer = 32768;
enum mode { BLOCKING, POLL, EPOLL, SELECT, FORK };

const char* const program_name = "echo";
static int waits(enum mode mode) { return mode == POLL || mode == EPOLL || mode == SELECT; }
static int kernel_byte_seen;  /* the kernel socket's byte woke a mixed wait */

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + (i >> 11) * 13 + 1); }

/* A kernel TCP connection over loopback: a[0] and a[1] its two ends. */
static void kernel_pair(int ends[2]) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in address = address_of("127.0.0.1", 0);
  socklen_t length = sizeof address;
  if (listener < 0 || bind(listener, (struct sockaddr*)&address, sizeof address) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, (struct sockaddr*)&address, &length) != 0)
    fail("kernel listener on 127.0.0.1");
  ends[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(ends[0], (struct sockaddr*)&address, sizeof address) != 0) fail("kernel connect to 127.0.0.1");
  ends[1] = accept(listener, NULL, NULL);
  if (ends[1] < 0) fail("kernel accept");
  close(listener);
  /* The kernel's: a byte crosses it before utcp starts. */
  char byte = 'k';
  if (write(ends[0], &byte, 1) != 1 || read(ends[1], &byte, 1) != 1 || byte != 'k') fail("kernel loopback byte");
}

/* Waits until fd is ready for `events` (POLLIN/POLLOUT), with the kernel
 * socket `other` in the same wait; returns whether `other` was readable.
 * Every other wait goes through the call's variant with a signal mask
 * (ppoll, pselect, epoll_pwait). */
static int wait_for(enum mode mode, int fd, short events, int other) {
  static unsigned waits_made;
  const int masked = waits_made++ % 2;
  int other_ready = 0;
  if (mode == POLL) {
    struct pollfd fds[2] = {{fd, events, 0}, {other, POLLIN, 0}};
    const struct timespec ten_seconds = {10, 0};
    if ((masked ? ppoll(fds, 2, &ten_seconds, NULL) : poll(fds, 2, 10000)) <= 0) fail("poll timed out or failed");
    other_ready = (fds[1].revents & POLLIN) != 0;
  } else if (mode == SELECT) {
    fd_set readable, writable;
    FD_ZERO(&readable);
    FD_ZERO(&writable);
    FD_SET(other, &readable);
    FD_SET(fd, events == POLLIN ? &readable : &writable);
    struct timeval timeout = {10, 0};
    const struct timespec ten_seconds = {10, 0};
    const int nfds = (fd > other ? fd : other) + 1;
    if ((masked ? pselect(nfds, &readable, &writable, NULL, &ten_seconds, NULL)
                : select(nfds, &readable, &writable, NULL, &timeout)) <= 0)
      fail("select timed out");
    other_ready = FD_ISSET(other, &readable);
  } else {
    const int epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = events == POLLIN ? EPOLLIN : EPOLLOUT, .data.fd = fd};
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) != 0) fail("epoll_ctl on the utcp socket");
    event.events = EPOLLIN;
    event.data.fd = other;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, other, &event) != 0) fail("epoll_ctl on the kernel socket");
    struct epoll_event ready[2];
    const int n = masked ? epoll_pwait(epfd, ready, 2, 10000, NULL) : epoll_wait(epfd, ready, 2, 10000);
    if (n <= 0) fail("epoll_wait timed out or failed");
    for (int i = 0; i < n; ++i) other_ready |= ready[i].data.fd == other;
    close(epfd);
  }
  return other_ready;
}

/* One read or write, by turns through each of the calls that move a
 * stream's bytes (a gathered pair of buffers for readv and writev). */
static ssize_t move_bytes(int fd, void* buffer, size_t length, int writing) {
  static unsigned turn;
  const unsigned call = turn++ % 3;
  if (call == 0) return writing ? write(fd, buffer, length) : read(fd, buffer, length);
  if (call == 1) return writing ? send(fd, buffer, length, MSG_NOSIGNAL) : recv(fd, buffer, length, 0);
  const size_t first = length / 2;
  const struct iovec pieces[2] = {{buffer, first}, {(char*)buffer + first, length - first}};
  return writing ? writev(fd, pieces, 2) : readv(fd, pieces, 2);
}

/* One read or write that may find the socket not ready. */
static ssize_t transfer(enum mode mode, int fd, void* buffer, size_t length, int writing, int kernel[2]) {
  for (;;) {
    const ssize_t n = move_bytes(fd, buffer, length, writing);
    if (n >= 0 || !waits(mode)) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return n;
    if (wait_for(mode, fd, writing ? POLLOUT : POLLIN, kernel[1])) {
      char byte;
      if (read(kernel[1], &byte, 1) != 1 || byte != 'x') fail("the kernel socket's byte in the mixed wait");
      kernel_byte_seen = 1;
      kernel[1] = kernel[0];  /* seen once: from now on wait on the other (idle) end */
    }
  }
}

static void serve(const char* server, enum mode mode, int kernel[2]) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  struct sockaddr_in address = address_of(server, kPort);
  if (listener < 0 || setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
    fail("socket/SO_REUSEADDR");
  int value = 0;
  socklen_t value_length = sizeof value;
  if (getsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &value, &value_length) != 0 || !value)
    fail("SO_REUSEADDR read back");
  if (bind(listener, (struct sockaddr*)&address, sizeof address) != 0) fail("bind %s:%d", server, kPort);
  if (listen(listener, 4) != 0) fail("listen");
  int accepted_on = 0;
  socklen_t length = sizeof accepted_on;
  if (getsockopt(listener, SOL_SOCKET, SO_ACCEPTCONN, &accepted_on, &length) != 0 || !accepted_on)
    fail("SO_ACCEPTCONN");
  if (waits(mode)) {
    set_nonblocking(listener);
    wait_for(mode, listener, POLLIN, kernel[0]);
  }
  struct sockaddr_in peer;
  length = sizeof peer;
  const int connection = waits(mode) ? accept4(listener, (struct sockaddr*)&peer, &length, SOCK_NONBLOCK)
                                      : accept(listener, (struct sockaddr*)&peer, &length);
  if (connection < 0) fail("accept");
  if (length != sizeof peer || peer.sin_family != AF_INET) fail("accept gave no IPv4 peer");
  if (waits(mode)) {
    if (!(fcntl(connection, F_GETFL) & O_NONBLOCK)) fail("accept4's SOCK_NONBLOCK");
    const char byte = 'x';  /* wakes one of the mixed waits below, through the kernel */
    if (write(kernel[0], &byte, 1) != 1) fail("kernel write");
  }
  static char buffer[kChunk];
  size_t echoed = 0;
  for (;;) {
    const ssize_t got = transfer(mode, connection, buffer, sizeof buffer, 0, kernel);
    if (got < 0) fail("read");
    if (got == 0) break;
    for (ssize_t sent = 0; sent < got;) {
      const ssize_t n = transfer(mode, connection, buffer + sent, (size_t)(got - sent), 1, kernel);
      if (n <= 0) fail("write");
      sent += n;
    }
    echoed += (size_t)got;
  }
  if (close(connection) != 0 || close(listener) != 0) fail("close");
  printf("server: echoed %zu bytes\n", echoed);
}

static int connect_to(const char* server, enum mode mode, int kernel[2]) {
  const struct sockaddr_in address = address_of(server, kPort);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail("socket");
    const int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail("TCP_NODELAY");
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kReceiveBuffer, sizeof kReceiveBuffer) != 0) fail("SO_RCVBUF");
    if (waits(mode)) set_nonblocking(fd);
    if (connect(fd, (const struct sockaddr*)&address, sizeof address) == 0) return fd;
    if (errno == EINPROGRESS) {
      wait_for(mode, fd, POLLOUT, kernel[0]);
      int error = 0;
      socklen_t length = sizeof error;
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) fail("SO_ERROR");
      if (error == 0) return fd;
      errno = error;
    }
    if (errno != ECONNREFUSED) fail("connect to %s:%d", server, kPort);
    close(fd);
    struct timespec pause = {0, 50 * 1000 * 1000};  /* the server may not listen yet */
    nanosleep(&pause, NULL);
  }
  fail("connect: refused for 10 s");
  return -1;
}

static void check_socket_calls(int fd, const char* server) {
  struct sockaddr_in local, remote;
  socklen_t length = sizeof local;
  if (getsockname(fd, (struct sockaddr*)&local, &length) != 0 || local.sin_family != AF_INET) fail("getsockname");
  length = sizeof remote;
  if (getpeername(fd, (struct sockaddr*)&remote, &length) != 0) fail("getpeername");
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &remote.sin_addr, text, sizeof text);
  if (strcmp(text, server) != 0 || ntohs(remote.sin_port) != kPort) fail("getpeername: %s", text);
  int value = 0;
  length = sizeof value;
  if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &length) != 0 || !value) fail("TCP_NODELAY read back");
  struct tcp_info info;
  length = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0 || info.tcpi_state != TCP_ESTABLISHED ||
      info.tcpi_snd_mss == 0)
    fail("TCP_INFO: state %d, mss %u", info.tcpi_state, info.tcpi_snd_mss);
  if (info.tcpi_rcv_space == 0 || info.tcpi_rcv_space > (unsigned)kReceiveBuffer)
    fail("TCP_INFO: a window of %u bytes offered with SO_RCVBUF %d", info.tcpi_rcv_space, kReceiveBuffer);
  const int one = 1, send_buffer = 65536;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0) fail("SO_KEEPALIVE");
  length = sizeof value;
  if (getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &value, &length) != 0 || !value) fail("SO_KEEPALIVE read back");
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer) != 0) fail("SO_SNDBUF");
  length = sizeof value;
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &length) != 0 || value != send_buffer)
    fail("SO_SNDBUF read back: %d", value);
  int type = 0;
  length = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) fail("SO_TYPE");
}

/* A forked child cannot use the parent's utcp socket, and its exit (static
 * destructors included) leaves the parent's connection alone. */
static void check_fork(int fd) {
  const pid_t child = fork();
  if (child < 0) fail("fork");
  if (child == 0) {
    const char byte = 0;
    if (write(fd, &byte, 1) != -1 || errno != EOPNOTSUPP) fail("the child wrote to the parent's utcp socket");
    if (close(fd) != 0) fail("the child's close");
    exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("the forked child failed (status %d)", status);
}

static void run_client(const char* server, enum mode mode, size_t bytes, int kernel[2]) {
  int fd = connect_to(server, mode, kernel);
  check_socket_calls(fd, server);
  if (mode == FORK) check_fork(fd);
  /* The echo goes on through a dup of the socket, the first descriptor
   * closed, then dup2'd back to the first number and the dup closed. */
  const int copy = dup(fd);
  if (copy < 0 || close(fd) != 0) fail("dup/close");
  if (dup2(copy, fd) != fd || close(copy) != 0) fail("dup2/close");
  if (waits(mode)) {
    const char byte = 'x';  /* wakes one of the mixed waits below, through the kernel */
    if (write(kernel[0], &byte, 1) != 1) fail("kernel write");
  }
  unsigned char* out = malloc(kChunk);
  unsigned char* in = malloc(kChunk);
  size_t sent = 0, received = 0;
  while (received < bytes) {
    if (sent < bytes && sent - received < 4 * kChunk) {
      const size_t n = bytes - sent < kChunk ? bytes - sent : kChunk;
      for (size_t i = 0; i < n; ++i) out[i] = pattern(sent + i);
      const ssize_t wrote = transfer(mode, fd, out, n, 1, kernel);
      if (wrote <= 0) fail("write");
      sent += (size_t)wrote;
      if (sent == bytes && shutdown(fd, SHUT_WR) != 0) fail("shutdown");
      continue;
    }
    const ssize_t got = transfer(mode, fd, in, kChunk, 0, kernel);
    if (got < 0) fail("read");
    if (got == 0) fail("the echo ended after %zu of %zu bytes", received, bytes);
    for (ssize_t i = 0; i < got; ++i)
      if (in[i] != pattern(received + (size_t)i)) fail("byte %zu of the echo differs", received + (size_t)i);
    received += (size_t)got;
  }
  if (transfer(mode, fd, in, kChunk, 0, kernel) != 0) fail("no end of stream after the echo");
  if (close(fd) != 0) fail("close");
  free(out);
  free(in);
  printf("client: %zu bytes echoed byte-exact\n", bytes);
}

int main(int argc, char** argv) {
  const char* rank_text = getenv("VIASTACK_RANK");
  if (argc != 4 || !rank_text) {
    fprintf(stderr, "usage: echo SERVER-ADDRESS blocking|poll|epoll|select|fork BYTES (under viarun)\n");
    return 2;
  }
  rank = atoi(rank_text);
  const enum mode mode = strcmp(argv[2], "poll") == 0     ? POLL
                         : strcmp(argv[2], "epoll") == 0  ? EPOLL
                         : strcmp(argv[2], "select") == 0 ? SELECT
                         : strcmp(argv[2], "fork") == 0   ? FORK
                                                          : BLOCKING;
  const size_t bytes = strtoull(argv[3], NULL, 10);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int kernel[2];
  kernel_pair(kernel);
  if (rank == 0)
    serve(argv[1], mode, kernel);
  else
    run_client(argv[1], mode, bytes, kernel);
  if (waits(mode) && !kernel_byte_seen) fail("no wait saw the kernel socket's byte");
  close(kernel[0]);
  close(kernel[1]);
  return 0;
}
