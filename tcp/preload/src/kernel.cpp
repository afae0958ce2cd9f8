#include "kernel.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace viastack::preload::kernel {
namespace {

template <typename Function>
void resolve(Function*& out, const char* name, bool required = true) {
  out = reinterpret_cast<Function*>(dlsym(RTLD_NEXT, name));
  if (!out && required) {
    // Nothing else can stand in for the C library's own call.
    std::fprintf(stderr, "viastack-preload: the C library has no %s\n", name);
    std::abort();
  }
}

Calls load() {
  Calls c{};
  resolve(c.socket, "socket");
  resolve(c.bind, "bind");
  resolve(c.listen, "listen");
  resolve(c.accept, "accept");
  resolve(c.accept4, "accept4");
  resolve(c.connect, "connect");
  resolve(c.send, "send");
  resolve(c.sendto, "sendto");
  resolve(c.sendmsg, "sendmsg");
  resolve(c.recv, "recv");
  resolve(c.recvfrom, "recvfrom");
  resolve(c.recvmsg, "recvmsg");
  resolve(c.read, "read");
  resolve(c.write, "write");
  resolve(c.readv, "readv");
  resolve(c.writev, "writev");
  resolve(c.read_chk, "__read_chk");
  resolve(c.recv_chk, "__recv_chk");
  resolve(c.recvfrom_chk, "__recvfrom_chk");
  resolve(c.close, "close");
  resolve(c.shutdown, "shutdown");
  resolve(c.setsockopt, "setsockopt");
  resolve(c.getsockopt, "getsockopt");
  resolve(c.getsockname, "getsockname");
  resolve(c.getpeername, "getpeername");
  resolve(c.fcntl, "fcntl");
  resolve(c.fcntl64, "fcntl64", false);  // glibc 2.28 and later
  if (!c.fcntl64) c.fcntl64 = c.fcntl;
  resolve(c.ioctl, "ioctl");
  resolve(c.poll, "poll");
  resolve(c.ppoll, "ppoll");
  resolve(c.select, "select");
  resolve(c.pselect, "pselect");
  resolve(c.epoll_ctl, "epoll_ctl");
  resolve(c.epoll_wait, "epoll_wait");
  resolve(c.epoll_pwait, "epoll_pwait");
  resolve(c.dup, "dup");
  resolve(c.dup2, "dup2");
  resolve(c.dup3, "dup3");
  return c;
}

}  // namespace

const Calls& calls() {
  static const Calls resolved = load();
  return resolved;
}

}  // namespace viastack::preload::kernel
