// utcp's side of the interposed calls: which descriptors are utcp sockets,
// the rank's stack (brought up at the first socket that needs it), and the
// BSD calls on utcp sockets with the kernel's meanings and errno values.
// The interposers (interpose.cpp) ask is_utcp() first and call the kernel
// for everything else; a call here returns what the C call returns, with
// errno set on failure.
#pragma once

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <optional>
#include <span>

namespace viastack::preload {

// Lock-free: the kernel's descriptors never wait for utcp.
bool is_utcp(int fd);
// The kernel gave out fd: whatever this library knew under that number is gone.
void forget_stale(int fd);
// A setsockopt the kernel took on one of its sockets: SO_RCVBUF and SO_SNDBUF
// carry over if the socket becomes utcp's.
void note_kernel_option(int fd, int level, int name, const void* value, socklen_t length);

// bind and connect decide: an AF_INET stream or datagram socket whose
// address is in utcp's network becomes a utcp socket (same descriptor
// number); none: the call is the kernel's.
std::optional<int> bind(int fd, const sockaddr* address, socklen_t length);
std::optional<int> connect(int fd, const sockaddr* address, socklen_t length);
// sendto and sendmsg on an unbound datagram socket decide the same way by the
// destination: 0 when fd is utcp's now, -1 (errno set) when utcp cannot
// start, none: the kernel's.
std::optional<int> adopt_by_destination(int fd, const sockaddr* address, socklen_t length);

int listen(int fd, int backlog);
int accept(int fd, sockaddr* address, socklen_t* length, int flags);
// `to` is a datagram's destination (null: the connected peer); a stream
// socket ignores it, as Linux's TCP.
ssize_t send(int fd, std::span<const iovec> data, int flags, const sockaddr* to = nullptr, socklen_t to_length = 0);
// `from` gets a datagram's source (a stream socket's length becomes 0, as the
// kernel's); `message_flags` (if given) MSG_TRUNC for a truncated datagram.
ssize_t receive(int fd, std::span<const iovec> buffers, int flags, sockaddr* from = nullptr,
                socklen_t* from_length = nullptr, int* message_flags = nullptr);
int close(int fd);
int shutdown(int fd, int how);
int setsockopt(int fd, int level, int name, const void* value, socklen_t length);
int getsockopt(int fd, int level, int name, void* value, socklen_t* length);
int getsockname(int fd, sockaddr* address, socklen_t* length);
int getpeername(int fd, sockaddr* address, socklen_t* length);
int fcntl(int fd, int command, long argument);
int ioctl(int fd, unsigned long request, void* argument);
// dup (target -1: the lowest free number), dup2 and dup3 of a utcp socket,
// and dup2/dup3 over one.
int duplicate(int fd, int target, int flags);

// poll over any mix of kernel and utcp descriptors (timeout in ms, -1: none).
int poll(pollfd* fds, nfds_t count, int timeout_ms);
// epoll: utcp descriptors are kept here, the kernel's in the kernel's set.
int epoll_ctl(int epfd, int op, int fd, epoll_event* event);
// Whether the epoll set holds utcp descriptors (epoll_wait must come here).
bool epoll_has_utcp(int epfd);
// A closed descriptor leaves the epoll sets (and an epoll set closed is forgotten).
void forget_in_epoll_sets(int fd);
int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms);

}  // namespace viastack::preload
