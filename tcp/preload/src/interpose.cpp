// The C library's socket calls as this library exports them: a call on a
// utcp socket (or one that makes a socket utcp's: bind, connect) goes to
// sockets.cpp; every other call goes to the kernel untouched.
#include "kernel.hpp"
#include "sockets.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <cstdarg>
#include <vector>

namespace preload = viastack::preload;
using viastack::preload::kernel::calls;

namespace {

iovec one_buffer(const void* data, size_t length) { return {const_cast<void*>(data), length}; }

bool any_utcp(const pollfd* fds, nfds_t count) {
  for (nfds_t i = 0; i < count; ++i)
    if (preload::is_utcp(fds[i].fd)) return true;
  return false;
}

int to_ms(const timespec* timeout) {
  if (!timeout) return -1;
  return static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000);
}

// Runs a wait with the signal mask of ppoll/pselect/epoll_pwait in force.
template <typename Wait>
int with_mask(const sigset_t* mask, Wait&& wait) {
  sigset_t saved;
  if (mask) pthread_sigmask(SIG_SETMASK, mask, &saved);
  const int result = wait();
  const int saved_errno = errno;
  if (mask) pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = saved_errno;
  return result;
}

// select over utcp descriptors: as poll, the sets rewritten with what is ready.
int select_through_poll(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, int timeout_ms) {
  if (nfds < 0 || nfds > FD_SETSIZE) {
    errno = EINVAL;
    return -1;
  }
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    if (readfds && FD_ISSET(fd, readfds)) events |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) events |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) events |= POLLPRI;
    if (events) fds.push_back({fd, events, 0});
  }
  const int result = preload::poll(fds.data(), fds.size(), timeout_ms);
  if (result < 0) return -1;
  for (const pollfd& entry : fds)
    if (entry.revents & POLLNVAL) {
      errno = EBADF;
      return -1;
    }
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int ready = 0;
  for (const pollfd& entry : fds) {
    // As the kernel's select: an error or a hang-up makes a descriptor readable and writable.
    if (readfds && (entry.events & POLLIN) && (entry.revents & (POLLIN | POLLERR | POLLHUP))) {
      FD_SET(entry.fd, readfds);
      ++ready;
    }
    if (writefds && (entry.events & POLLOUT) && (entry.revents & (POLLOUT | POLLERR | POLLHUP))) {
      FD_SET(entry.fd, writefds);
      ++ready;
    }
    if (exceptfds && (entry.events & POLLPRI) && (entry.revents & POLLPRI)) {
      FD_SET(entry.fd, exceptfds);
      ++ready;
    }
  }
  return ready;
}

bool sets_hold_utcp(int nfds, const fd_set* readfds, const fd_set* writefds, const fd_set* exceptfds) {
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd) {
    if ((readfds && FD_ISSET(fd, readfds)) || (writefds && FD_ISSET(fd, writefds)) ||
        (exceptfds && FD_ISSET(fd, exceptfds)))
      if (preload::is_utcp(fd)) return true;
  }
  return false;
}

}  // namespace

extern "C" {

#define VIASTACK_EXPORT __attribute__((visibility("default")))

VIASTACK_EXPORT int socket(int domain, int type, int protocol) {
  const int fd = calls().socket(domain, type, protocol);
  if (fd >= 0) preload::forget_stale(fd);
  return fd;
}

VIASTACK_EXPORT int bind(int fd, const sockaddr* address, socklen_t length) {
  if (const std::optional<int> result = preload::bind(fd, address, length)) return *result;
  return calls().bind(fd, address, length);
}

VIASTACK_EXPORT int connect(int fd, const sockaddr* address, socklen_t length) {
  if (const std::optional<int> result = preload::connect(fd, address, length)) return *result;
  return calls().connect(fd, address, length);
}

VIASTACK_EXPORT int listen(int fd, int backlog) {
  return preload::is_utcp(fd) ? preload::listen(fd, backlog) : calls().listen(fd, backlog);
}

VIASTACK_EXPORT int accept4(int fd, sockaddr* address, socklen_t* length, int flags) {
  if (preload::is_utcp(fd)) return preload::accept(fd, address, length, flags);
  const int accepted = calls().accept4(fd, address, length, flags);
  if (accepted >= 0) preload::forget_stale(accepted);
  return accepted;
}

VIASTACK_EXPORT int accept(int fd, sockaddr* address, socklen_t* length) {
  if (preload::is_utcp(fd)) return preload::accept(fd, address, length, 0);
  const int accepted = calls().accept(fd, address, length);
  if (accepted >= 0) preload::forget_stale(accepted);
  return accepted;
}

VIASTACK_EXPORT ssize_t send(int fd, const void* data, size_t length, int flags) {
  if (!preload::is_utcp(fd)) return calls().send(fd, data, length, flags);
  const iovec buffer = one_buffer(data, length);
  return preload::send(fd, {&buffer, 1}, flags);
}

// A stream socket ignores the address (as Linux's TCP); an unbound datagram
// socket whose destination is in utcp's network becomes utcp's here.
VIASTACK_EXPORT ssize_t sendto(int fd, const void* data, size_t length, int flags, const sockaddr* address,
                               socklen_t address_length) {
  if (!preload::is_utcp(fd)) {
    const std::optional<int> adopted = preload::adopt_by_destination(fd, address, address_length);
    if (!adopted) return calls().sendto(fd, data, length, flags, address, address_length);
    if (*adopted < 0) return -1;
  }
  const iovec buffer = one_buffer(data, length);
  return preload::send(fd, {&buffer, 1}, flags, address, address_length);
}

VIASTACK_EXPORT ssize_t sendmsg(int fd, const msghdr* message, int flags) {
  const auto* address = static_cast<const sockaddr*>(message->msg_name);
  if (!preload::is_utcp(fd)) {
    const std::optional<int> adopted = preload::adopt_by_destination(fd, address, message->msg_namelen);
    if (!adopted) return calls().sendmsg(fd, message, flags);
    if (*adopted < 0) return -1;
  }
  if (message->msg_controllen > 0) {
    errno = EOPNOTSUPP;  // no ancillary data on utcp
    return -1;
  }
  return preload::send(fd, {message->msg_iov, message->msg_iovlen}, flags, address, message->msg_namelen);
}

VIASTACK_EXPORT ssize_t write(int fd, const void* data, size_t length) {
  if (!preload::is_utcp(fd)) return calls().write(fd, data, length);
  const iovec buffer = one_buffer(data, length);
  return preload::send(fd, {&buffer, 1}, 0);
}

VIASTACK_EXPORT ssize_t writev(int fd, const iovec* buffers, int count) {
  if (!preload::is_utcp(fd)) return calls().writev(fd, buffers, count);
  if (count < 0 || count > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return preload::send(fd, {buffers, static_cast<size_t>(count)}, 0);
}

VIASTACK_EXPORT ssize_t recv(int fd, void* buffer, size_t length, int flags) {
  if (!preload::is_utcp(fd)) return calls().recv(fd, buffer, length, flags);
  const iovec one = one_buffer(buffer, length);
  return preload::receive(fd, {&one, 1}, flags);
}

VIASTACK_EXPORT ssize_t recvfrom(int fd, void* buffer, size_t length, int flags, sockaddr* address,
                                 socklen_t* address_length) {
  if (!preload::is_utcp(fd)) return calls().recvfrom(fd, buffer, length, flags, address, address_length);
  const iovec one = one_buffer(buffer, length);
  return preload::receive(fd, {&one, 1}, flags, address, address_length);
}

VIASTACK_EXPORT ssize_t recvmsg(int fd, msghdr* message, int flags) {
  if (!preload::is_utcp(fd)) return calls().recvmsg(fd, message, flags);
  socklen_t name_length = message->msg_name ? message->msg_namelen : 0;
  int message_flags = 0;
  const ssize_t got = preload::receive(fd, {message->msg_iov, message->msg_iovlen}, flags,
                                       static_cast<sockaddr*>(message->msg_name), &name_length, &message_flags);
  if (got >= 0) {
    message->msg_namelen = name_length;
    message->msg_controllen = 0;
    message->msg_flags = message_flags;
  }
  return got;
}

VIASTACK_EXPORT ssize_t read(int fd, void* buffer, size_t length) {
  if (!preload::is_utcp(fd)) return calls().read(fd, buffer, length);
  const iovec one = one_buffer(buffer, length);
  return preload::receive(fd, {&one, 1}, 0);
}

VIASTACK_EXPORT ssize_t readv(int fd, const iovec* buffers, int count) {
  if (!preload::is_utcp(fd)) return calls().readv(fd, buffers, count);
  if (count < 0 || count > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return preload::receive(fd, {buffers, static_cast<size_t>(count)}, 0);
}

// _FORTIFY_SOURCE's checked forms, which Debian's programs call.
VIASTACK_EXPORT ssize_t __read_chk(int fd, void* buffer, size_t length, size_t buffer_length) {
  if (!preload::is_utcp(fd)) return calls().read_chk(fd, buffer, length, buffer_length);
  if (length > buffer_length) return calls().read_chk(fd, buffer, length, buffer_length);  // its abort
  return read(fd, buffer, length);
}

VIASTACK_EXPORT ssize_t __recv_chk(int fd, void* buffer, size_t length, size_t buffer_length, int flags) {
  if (!preload::is_utcp(fd) || length > buffer_length)
    return calls().recv_chk(fd, buffer, length, buffer_length, flags);
  return recv(fd, buffer, length, flags);
}

VIASTACK_EXPORT ssize_t __recvfrom_chk(int fd, void* buffer, size_t length, size_t buffer_length, int flags,
                                       sockaddr* address, socklen_t* address_length) {
  if (!preload::is_utcp(fd) || length > buffer_length)
    return calls().recvfrom_chk(fd, buffer, length, buffer_length, flags, address, address_length);
  return recvfrom(fd, buffer, length, flags, address, address_length);
}

VIASTACK_EXPORT int close(int fd) {
  preload::forget_in_epoll_sets(fd);
  return preload::is_utcp(fd) ? preload::close(fd) : calls().close(fd);
}

VIASTACK_EXPORT int shutdown(int fd, int how) {
  return preload::is_utcp(fd) ? preload::shutdown(fd, how) : calls().shutdown(fd, how);
}

VIASTACK_EXPORT int setsockopt(int fd, int level, int name, const void* value, socklen_t length) {
  if (preload::is_utcp(fd)) return preload::setsockopt(fd, level, name, value, length);
  const int result = calls().setsockopt(fd, level, name, value, length);
  if (result == 0) preload::note_kernel_option(fd, level, name, value, length);
  return result;
}

VIASTACK_EXPORT int getsockopt(int fd, int level, int name, void* value, socklen_t* length) {
  return preload::is_utcp(fd) ? preload::getsockopt(fd, level, name, value, length)
                              : calls().getsockopt(fd, level, name, value, length);
}

VIASTACK_EXPORT int getsockname(int fd, sockaddr* address, socklen_t* length) {
  return preload::is_utcp(fd) ? preload::getsockname(fd, address, length) : calls().getsockname(fd, address, length);
}

VIASTACK_EXPORT int getpeername(int fd, sockaddr* address, socklen_t* length) {
  return preload::is_utcp(fd) ? preload::getpeername(fd, address, length) : calls().getpeername(fd, address, length);
}

// fcntl's third argument is an int or a pointer: taken as a word, passed on as one.
VIASTACK_EXPORT int fcntl(int fd, int command, ...) {
  va_list arguments;
  va_start(arguments, command);
  const long argument = va_arg(arguments, long);
  va_end(arguments);
  return preload::is_utcp(fd) ? preload::fcntl(fd, command, argument) : calls().fcntl(fd, command, argument);
}

VIASTACK_EXPORT int fcntl64(int fd, int command, ...) {
  va_list arguments;
  va_start(arguments, command);
  const long argument = va_arg(arguments, long);
  va_end(arguments);
  return preload::is_utcp(fd) ? preload::fcntl(fd, command, argument) : calls().fcntl64(fd, command, argument);
}

VIASTACK_EXPORT int ioctl(int fd, unsigned long request, ...) {
  va_list arguments;
  va_start(arguments, request);
  void* argument = va_arg(arguments, void*);
  va_end(arguments);
  return preload::is_utcp(fd) ? preload::ioctl(fd, request, argument) : calls().ioctl(fd, request, argument);
}

VIASTACK_EXPORT int dup(int fd) { return preload::is_utcp(fd) ? preload::duplicate(fd, -1, 0) : calls().dup(fd); }

VIASTACK_EXPORT int dup2(int fd, int target) {
  if (!preload::is_utcp(fd) && !preload::is_utcp(target)) return calls().dup2(fd, target);
  return preload::duplicate(fd, target, 0);
}

VIASTACK_EXPORT int dup3(int fd, int target, int flags) {
  if (!preload::is_utcp(fd) && !preload::is_utcp(target)) return calls().dup3(fd, target, flags);
  if (fd == target) {
    errno = EINVAL;
    return -1;
  }
  return preload::duplicate(fd, target, flags);
}

VIASTACK_EXPORT int poll(pollfd* fds, nfds_t count, int timeout_ms) {
  if (!any_utcp(fds, count)) return calls().poll(fds, count, timeout_ms);
  return preload::poll(fds, count, timeout_ms);
}

VIASTACK_EXPORT int __poll_chk(pollfd* fds, nfds_t count, int timeout_ms, size_t) { return poll(fds, count, timeout_ms); }

VIASTACK_EXPORT int ppoll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  if (!any_utcp(fds, count)) return calls().ppoll(fds, count, timeout, mask);
  return with_mask(mask, [&] { return preload::poll(fds, count, to_ms(timeout)); });
}

VIASTACK_EXPORT int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (!sets_hold_utcp(nfds, readfds, writefds, exceptfds)) return calls().select(nfds, readfds, writefds, exceptfds, timeout);
  const int timeout_ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
  const int ready = select_through_poll(nfds, readfds, writefds, exceptfds, timeout_ms);
  if (ready == 0 && timeout) *timeout = {};  // Linux leaves the time not slept; none is left
  return ready;
}

VIASTACK_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const timespec* timeout,
                            const sigset_t* mask) {
  if (!sets_hold_utcp(nfds, readfds, writefds, exceptfds))
    return calls().pselect(nfds, readfds, writefds, exceptfds, timeout, mask);
  return with_mask(mask, [&] { return select_through_poll(nfds, readfds, writefds, exceptfds, to_ms(timeout)); });
}

VIASTACK_EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  return preload::epoll_ctl(epfd, op, fd, event);
}

VIASTACK_EXPORT int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms) {
  if (!preload::epoll_has_utcp(epfd)) return calls().epoll_wait(epfd, events, max_events, timeout_ms);
  return preload::epoll_wait(epfd, events, max_events, timeout_ms);
}

VIASTACK_EXPORT int epoll_pwait(int epfd, epoll_event* events, int max_events, int timeout_ms, const sigset_t* mask) {
  if (!preload::epoll_has_utcp(epfd)) return calls().epoll_pwait(epfd, events, max_events, timeout_ms, mask);
  return with_mask(mask, [&] { return preload::epoll_wait(epfd, events, max_events, timeout_ms); });
}

}  // extern "C"
