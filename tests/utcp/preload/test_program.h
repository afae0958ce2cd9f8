/* What the preload tests' C programs share: they are built without any of
 * viastack's headers, as the programs a user preloads are. Each program
 * defines `program_name` and sets `rank`. */
#pragma once
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char* const program_name;
static int rank;

/* Prints one line naming the program, its rank and errno, and exits 1. */
static void fail(const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  fprintf(stderr, "%s rank %d: ", program_name, rank);
  vfprintf(stderr, format, arguments);
  fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));
  va_end(arguments);
  exit(1);
}

static void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl O_NONBLOCK");
  if (!(fcntl(fd, F_GETFL) & O_NONBLOCK)) fail("F_GETFL does not show O_NONBLOCK");
}

static struct sockaddr_in address_of(const char* text, int port) {
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (inet_pton(AF_INET, text, &address.sin_addr) != 1) fail("bad address %s", text);
  return address;
}
