/* An ordinary UDP program, compiled without any of viastack's headers, run
 * by the preload tests under viarun with LD_PRELOAD=libviastack-preload.so.
 *
 *   udp_echo SERVER-ADDRESS MODE COUNT    MODE: blocking or poll
 *
 * Rank 0 (VIASTACK_RANK) binds SERVER-ADDRESS:7071 and sends every datagram
 * back to where it came from, until one says "stop". Rank 1 sends COUNT
 * numbered datagrams of sizes from 1 byte to UDP's largest (those above the
 * link's MTU go as IP fragments), the first half with sendto from a socket
 * it never bound (utcp takes it at that call), the second half after
 * connect with send and a gathering sendmsg; it checks each echo byte for
 * byte, its source address, FIONREAD's length beforehand, and once a
 * truncated receive (MSG_TRUNC in msg_flags, and the whole length when
 * MSG_TRUNC is asked for). UDP may lose a datagram: a reply that does not
 * come within 200 ms is asked for again, and echoes of earlier numbers are
 * skipped. In poll mode the sockets are non-blocking and wait in poll.
 * SERVER-ADDRESS is in utcp's network, which the kernel has no route to.
 *
 * Any failure prints one line and exits 1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "test_program.h"

enum { kPort = 7071, kLargest = 65507, kTries = 25, kReplyWaitMs = 200 };
static const size_t kSizes[] = {1, 8, 100, 1400, 1473, 4000, 8972, 30000, kLargest};
enum { kSizeCount = sizeof kSizes / sizeof kSizes[0] };

const char* const program_name = "udp_echo";
static int use_poll;
static unsigned char request[kLargest], reply[kLargest];

static void check_type(int fd) {
  int type = 0, protocol = 0;
  socklen_t length = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_DGRAM) fail("SO_TYPE is %d", type);
  length = sizeof protocol;
  if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &length) != 0 || protocol != IPPROTO_UDP)
    fail("SO_PROTOCOL is %d", protocol);
}

/* Waits until fd is readable, at most timeout_ms; 0 when it is not. */
static int readable_within(int fd, int timeout_ms) {
  struct pollfd entry = {fd, POLLIN, 0};
  const int ready = poll(&entry, 1, timeout_ms);
  if (ready < 0) fail("poll");
  if (ready > 0 && !(entry.revents & POLLIN)) fail("poll: revents 0x%x", entry.revents);
  return ready > 0;
}

static void serve(const char* server) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in address = address_of(server, kPort);
  if (fd < 0 || bind(fd, (struct sockaddr*)&address, sizeof address) != 0) fail("bind %s:%d", server, kPort);
  check_type(fd);
  struct sockaddr_in local;
  socklen_t length = sizeof local;
  if (getsockname(fd, (struct sockaddr*)&local, &length) != 0 || local.sin_addr.s_addr != address.sin_addr.s_addr ||
      ntohs(local.sin_port) != kPort)
    fail("getsockname does not give %s:%d", server, kPort);
  if (use_poll) set_nonblocking(fd);
  for (;;) {
    if (use_poll) (void)readable_within(fd, -1);
    struct sockaddr_in from;
    socklen_t from_length = sizeof from;
    const ssize_t got = recvfrom(fd, reply, sizeof reply, 0, (struct sockaddr*)&from, &from_length);
    if (got < 0) fail("recvfrom");
    if (from_length != sizeof from || from.sin_family != AF_INET) fail("recvfrom gave no IPv4 source");
    if (got == 4 && memcmp(reply, "stop", 4) == 0) break;
    if (sendto(fd, reply, (size_t)got, 0, (struct sockaddr*)&from, from_length) != got) fail("sendto the echo");
  }
  close(fd);
  printf("udp_echo server: done\n");
}

/* A datagram starts with its number (a datagram shorter than 4 bytes with its low byte). */
static void fill(unsigned char* bytes, size_t size, uint32_t number) {
  for (size_t i = 0; i < size; ++i) bytes[i] = (unsigned char)(number * 31 + i * 7 + (i >> 8));
  if (size >= 4) memcpy(bytes, &number, 4);
  else bytes[0] = (unsigned char)number;
}

/* Whether an echo of `size` bytes is datagram `number`'s (not an earlier one's, asked for twice). */
static int carries(const unsigned char* bytes, size_t got, size_t size, uint32_t number) {
  if (got != size) return 0;
  if (size < 4) return bytes[0] == (unsigned char)number;
  uint32_t carried;
  memcpy(&carried, bytes, 4);
  return carried == number;
}

static void send_request(int fd, const struct sockaddr_in* server, int connected, uint32_t number, size_t size) {
  ssize_t sent;
  if (!connected) {
    sent = sendto(fd, request, size, 0, (const struct sockaddr*)server, sizeof *server);
  } else if (number % 2 == 0) {
    sent = send(fd, request, size, 0);
  } else {  /* gathered from three pieces */
    const size_t a = size / 3, b = size / 3;
    struct iovec pieces[3] = {{request, a}, {request + a, b}, {request + a + b, size - a - b}};
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = pieces;
    message.msg_iovlen = 3;
    sent = sendmsg(fd, &message, 0);
  }
  if (sent != (ssize_t)size) fail("sending datagram %u of %zu bytes returned %zd", number, size, sent);
}

/* Takes echoes until the one numbered `number` arrives; 0 if none did within the wait. */
static int receive_echo(int fd, const struct sockaddr_in* server, uint32_t number, size_t size) {
  for (;;) {
    if (!readable_within(fd, kReplyWaitMs)) return 0;
    int waiting = -1;
    if (ioctl(fd, FIONREAD, &waiting) != 0) fail("FIONREAD");
    struct sockaddr_in from;
    socklen_t from_length = sizeof from;
    const ssize_t got = recvfrom(fd, reply, sizeof reply, 0, (struct sockaddr*)&from, &from_length);
    if (got < 0) fail("recvfrom the echo of %u", number);
    if (waiting != got) fail("FIONREAD said %d, the datagram has %zd bytes", waiting, got);
    if (from_length != sizeof from || from.sin_addr.s_addr != server->sin_addr.s_addr || from.sin_port != server->sin_port)
      fail("an echo came from elsewhere");
    if (!carries(reply, (size_t)got, size, number)) continue;  /* an earlier one's echo */
    if (memcmp(reply, request, size) != 0) fail("the echo of datagram %u (%zu bytes) differs", number, size);
    return 1;
  }
}

static void exchange(int fd, const struct sockaddr_in* server, int connected, uint32_t number, size_t size) {
  fill(request, size, number);
  for (int attempt = 0; attempt < kTries; ++attempt) {
    send_request(fd, server, connected, number, size);
    if (receive_echo(fd, server, number, size)) return;
  }
  fail("no echo of datagram %u (%zu bytes) after %d tries", number, size, kTries);
}

/* A datagram longer than the buffer: the rest is gone, and the flags say so. */
static void check_truncation(int fd, const struct sockaddr_in* server) {
  const uint32_t number = 0x7fffffff;
  const size_t size = 1000;
  fill(request, size, number);
  for (int attempt = 0; attempt < kTries; ++attempt) {
    send_request(fd, server, 1, 0, size);
    while (readable_within(fd, kReplyWaitMs)) {
      unsigned char small[100];
      struct iovec piece = {small, sizeof small};
      struct msghdr message;
      memset(&message, 0, sizeof message);
      message.msg_iov = &piece;
      message.msg_iovlen = 1;
      const ssize_t got = recvmsg(fd, &message, MSG_TRUNC);
      if (got < 0) fail("recvmsg");
      if (!carries(small, (size_t)got, (size_t)got, number)) continue;  /* an earlier one's echo */
      if (got != (ssize_t)size || !(message.msg_flags & MSG_TRUNC) || memcmp(small, request, sizeof small) != 0)
        fail("a truncated datagram: recvmsg returned %zd, flags 0x%x", got, message.msg_flags);
      return;
    }
  }
  fail("no echo for the truncation check");
}

static void run_client(const char* server_text, uint32_t count) {
  const struct sockaddr_in server = address_of(server_text, kPort);
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) fail("socket");
  if (use_poll) set_nonblocking(fd);
  uint32_t number = 1;
  /* The server may not be bound yet: its stack answers "port unreachable",
   * which a later call may report; the first exchange is tried until it works. */
  for (int attempt = 0;; ++attempt) {
    fill(request, 8, number);
    const ssize_t sent = sendto(fd, request, 8, 0, (const struct sockaddr*)&server, sizeof server);
    if (sent == 8 && receive_echo(fd, &server, number, 8)) break;
    if (sent != 8 && errno != ECONNREFUSED) fail("the first sendto");
    if (attempt == 100) fail("the server did not answer");
  }
  check_type(fd);
  struct sockaddr_in local;
  socklen_t length = sizeof local;
  if (getsockname(fd, (struct sockaddr*)&local, &length) != 0 || ntohs(local.sin_port) == 0 ||
      (ntohl(local.sin_addr.s_addr) >> 24) != 10)
    fail("getsockname after sendto: not a utcp address and port");
  for (++number; number <= count / 2; ++number) exchange(fd, &server, 0, number, kSizes[number % kSizeCount]);
  if (connect(fd, (const struct sockaddr*)&server, sizeof server) != 0) fail("connect");
  struct sockaddr_in peer;
  length = sizeof peer;
  if (getpeername(fd, (struct sockaddr*)&peer, &length) != 0 || peer.sin_port != server.sin_port) fail("getpeername");
  for (; number <= count; ++number) exchange(fd, &server, 1, number, kSizes[number % kSizeCount]);
  check_truncation(fd, &server);
  for (int i = 0; i < 3; ++i) (void)send(fd, "stop", 4, 0);  /* UDP: three, in case one is lost */
  close(fd);
  printf("udp_echo client: %u datagrams of up to %d bytes echoed and checked\n", count, kLargest);
}

int main(int argc, char** argv) {
  const char* rank_text = getenv("VIASTACK_RANK");
  if (argc != 4 || !rank_text) {
    fprintf(stderr, "usage: viarun -n 2 -- udp_echo SERVER-ADDRESS blocking|poll COUNT\n");
    return 2;
  }
  rank = atoi(rank_text);
  if (strcmp(argv[2], "poll") == 0) use_poll = 1;
  else if (strcmp(argv[2], "blocking") != 0) fail("unknown mode %s", argv[2]);
  if (rank == 0) serve(argv[1]);
  else if (rank == 1) run_client(argv[1], (uint32_t)strtoul(argv[3], NULL, 10));
  return 0;
}
