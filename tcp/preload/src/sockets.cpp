#include "sockets.hpp"

#include "kernel.hpp"

#include <utcp/tcp_socket.hpp>
#include <utcp/udp_socket.hpp>
#include <utcp/via_host.hpp>
#include <via/config.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <system_error>
#include <vector>

namespace viastack::preload {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Descriptors at or above this stay the kernel's (a table entry per descriptor).
constexpr int kMaxFd = 65536;
// A blocking wait lets other threads' calls in at least this often.
constexpr milliseconds kLongestSlice{50};
// A wait on kernel and utcp descriptors together sleeps in the kernel this
// long at a time, then looks at utcp again (utcp has no descriptor to sleep on).
constexpr int kMixedSliceMs = 1;
// At exit, how long closed connections may take to deliver what they hold.
constexpr milliseconds kDefaultLinger{2000};

// One utcp socket; dup'd descriptors share it. A stream socket has a stream
// or a listener, a datagram socket its datagram socket.
struct Socket {
  std::optional<utcp::TcpSocket> stream;      // before listen(): bound or connected
  std::optional<utcp::TcpListener> listener;  // after listen()
  std::optional<utcp::UdpSocket> datagram;    // SOCK_DGRAM
  std::error_code pending_error;              // taken from utcp by poll, reported by SO_ERROR or the next call
  bool nonblocking = false;
  bool nodelay = false;
  bool keepalive = false;
  bool reuse_address = false;
  bool abort_on_close = false;  // SO_LINGER with a zero timeout
  int receive_buffer = 0;
  int send_buffer = 0;
  std::optional<milliseconds> receive_timeout;
  std::optional<milliseconds> send_timeout;
  int references = 1;
};

std::array<std::atomic<Socket*>, kMaxFd> table{};
// SO_RCVBUF and SO_SNDBUF as a program set them on a kernel socket (before
// bind or connect made it utcp's; the kernel reports them doubled); 0: unset.
std::array<std::atomic<int>, kMaxFd> requested_receive_buffer{};
std::array<std::atomic<int>, kMaxFd> requested_send_buffer{};

Socket* socket_at(int fd) {
  if (fd < 0 || fd >= kMaxFd) return nullptr;
  return table[fd].load(std::memory_order_acquire);
}

int fail(int error) {
  errno = error;
  return -1;
}

int fail(const std::error_code& error) { return fail(error.value()); }

// ---- The process's stack ----------------------------------------------------

struct Network {
  bool enabled = false;  // inside a viarun rank
  utcp::AddressPlan plan;
  int rank = 0;
  int size = 1;
  bool any_goes_to_utcp = true;  // a bind to 0.0.0.0

  bool contains(std::uint32_t address) const {  // host byte order
    const std::uint32_t mask = ~std::uint32_t{0} << (32 - plan.prefix_length);
    return (address & mask) == (plan.network.value & mask);
  }
};

const Network& network() {
  static const Network value = [] {
    Network n;
    const char* rank = std::getenv("VIASTACK_RANK");
    const char* size = std::getenv("VIASTACK_SIZE");
    if (!rank || !size) return n;
    n.rank = static_cast<int>(via::config::integer("VIASTACK_RANK"));
    n.size = static_cast<int>(via::config::integer("VIASTACK_SIZE"));
    if (const auto text = via::config::text_if_set("VIASTACK_UTCP_NETWORK")) {
      const auto plan = utcp::AddressPlan::parse(*text);
      if (!plan) {
        std::fprintf(stderr, "viastack-preload: VIASTACK_UTCP_NETWORK=%s is no network (10.0.0.0/16)\n",
                     text->c_str());
        return n;
      }
      n.plan = *plan;
    }
    if (const char* any = std::getenv("VIASTACK_PRELOAD_ANY")) {
      if (std::strcmp(any, "kernel") == 0) {
        n.any_goes_to_utcp = false;
      } else if (std::strcmp(any, "utcp") != 0) {
        std::fprintf(stderr, "viastack-preload: VIASTACK_PRELOAD_ANY=%s: utcp or kernel\n", any);
        std::exit(2);
      }
    }
    n.enabled = true;
    return n;
  }();
  return value;
}

// Everything below is used under this lock: the stack and its NIC serve one
// thread at a time. Threads queueing for it are counted so that a blocking
// wait gives it up for them.
std::mutex stack_mutex;
std::atomic<int> lock_queue{0};
std::unique_ptr<utcp::ViaHost> host;
bool host_failed = false;
// After fork the NIC and the connections are the parent's: the child leaves
// them alone (see README.md).
bool forked_child = false;
// Closed connections still delivering what they hold: kept here (write side
// shut) until the peer has it all, so that exit can wait for them.
std::vector<std::unique_ptr<utcp::TcpSocket>> closing;

class StackLock {
 public:
  StackLock() {
    lock_queue.fetch_add(1, std::memory_order_relaxed);
    lock_ = std::unique_lock(stack_mutex);
    lock_queue.fetch_sub(1, std::memory_order_relaxed);
  }
  // Lets a queued thread in, then takes the lock back.
  void yield() {
    lock_.unlock();
    lock_queue.fetch_add(1, std::memory_order_relaxed);
    lock_.lock();
    lock_queue.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

void linger_at_exit();

utcp::ViaHost* the_host() {
  if (host || host_failed || forked_child) return host.get();
  try {
    host = std::make_unique<utcp::ViaHost>();
    // Registered after the NIC opened, so it runs before the exit handlers
    // of what the NIC brought up (OpenSSL's, for the tcp provider).
    std::atexit(linger_at_exit);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "viastack-preload: utcp could not start: %s\n", error.what());
    host_failed = true;
  }
  return host.get();
}

bool connection_done(const utcp::TcpSocket& socket) {
  const utcp::TcpState state = socket.state();
  return state == utcp::TcpState::closed || state == utcp::TcpState::time_wait ||
         state == utcp::TcpState::fin_wait_2;
}

// Closes for good the closing connections that delivered everything (or
// received data after close, which the kernel answers with a reset too).
void sweep_closing() {
  std::erase_if(closing, [](std::unique_ptr<utcp::TcpSocket>& socket) {
    const std::optional<utcp::TcpInfo> info = socket->info();
    if (!connection_done(*socket) && !(info && info->bytes_readable > 0)) return false;
    socket->close();
    return true;
  });
}

void poll_stack() {
  host->poll();
  if (!closing.empty()) sweep_closing();
}

// Drives the stack until ready() or the deadline (none: forever); false on
// the deadline. Other threads' calls get the lock between slices.
bool drive_until(StackLock& lock, const std::function<bool()>& ready, std::optional<Clock::time_point> deadline) {
  for (;;) {
    poll_stack();
    if (ready()) return true;
    const Clock::time_point now = Clock::now();
    if (deadline && now >= *deadline) return false;
    milliseconds slice = kLongestSlice;
    if (deadline) slice = std::min(slice, std::chrono::ceil<milliseconds>(*deadline - now));
    if (host->wait_until([&] { return ready() || lock_queue.load(std::memory_order_relaxed) > 0; }, slice) &&
        ready())
      return true;
    if (lock_queue.load(std::memory_order_relaxed) > 0) lock.yield();
  }
}

std::optional<Clock::time_point> deadline_after(std::optional<milliseconds> timeout) {
  if (!timeout) return std::nullopt;
  return Clock::now() + *timeout;
}

// At exit: the connections the program did not close are closed, and the
// stack runs until every closed one has delivered what it holds, or the
// linger time (VIASTACK_PRELOAD_LINGER_MS) passes. The kernel does this after
// a process ends; utcp ends with the process.
void linger_at_exit() {
  if (forked_child || !host) return;
  StackLock lock;
  for (int fd = 0; fd < kMaxFd; ++fd) {
    Socket* socket = table[fd].exchange(nullptr);
    if (!socket || --socket->references > 0) continue;
    if (socket->stream && socket->stream->state() != utcp::TcpState::closed) {
      (void)socket->stream->shutdown(utcp::Shutdown::write);
      closing.push_back(std::make_unique<utcp::TcpSocket>(std::move(*socket->stream)));
    }
    delete socket;
  }
  milliseconds linger = kDefaultLinger;
  if (const char* text = std::getenv("VIASTACK_PRELOAD_LINGER_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || ms < 0 || ms > 600000)
      std::fprintf(stderr, "viastack-preload: VIASTACK_PRELOAD_LINGER_MS=%s is not 0-600000 ms; %lld used\n", text,
                   static_cast<long long>(linger.count()));
    else
      linger = milliseconds(ms);
  }
  (void)drive_until(lock, [] { return closing.empty(); }, Clock::now() + linger);
  closing.clear();
  host.reset();
}

// fork: the child must not take a lock another thread held, and must not use
// the NIC, whose rings it shares with the parent.
void before_fork() { stack_mutex.lock(); }
void after_fork_parent() { stack_mutex.unlock(); }
// What a forked child holds of the parent's and must neither use nor destroy
// (a destructor would send through the rings the parent uses), kept reachable
// from here so that a leak checker does not count it at the child's exit.
struct ParentsStack {
  utcp::ViaHost* host = nullptr;
  std::vector<utcp::TcpSocket*> closing;
  std::vector<Socket*> sockets;  // closed in the child
};
ParentsStack* parents_stack = nullptr;

void after_fork_child() {
  forked_child = true;
  parents_stack = new ParentsStack;
  parents_stack->host = host.release();
  for (std::unique_ptr<utcp::TcpSocket>& socket : closing) parents_stack->closing.push_back(socket.release());
  closing.clear();
  stack_mutex.unlock();
}
[[maybe_unused]] const int atfork_registered = pthread_atfork(before_fork, after_fork_parent, after_fork_child);

// ---- Addresses --------------------------------------------------------------

std::optional<utcp::Endpoint> endpoint_of(const sockaddr* address, socklen_t length) {
  if (!address || length < static_cast<socklen_t>(sizeof(sockaddr_in)) || address->sa_family != AF_INET)
    return std::nullopt;
  sockaddr_in in;
  std::memcpy(&in, address, sizeof in);
  return utcp::Endpoint{{ntohl(in.sin_addr.s_addr)}, ntohs(in.sin_port)};
}

// Copies as much of the address as fits, and tells its full length (as the kernel).
void fill_address(const utcp::Endpoint& endpoint, sockaddr* address, socklen_t* length) {
  if (!address || !length) return;
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(endpoint.port);
  in.sin_addr.s_addr = htonl(endpoint.address.value);
  std::memcpy(address, &in, std::min<std::size_t>(*length, sizeof in));
  *length = sizeof in;
}

// ---- Becoming a utcp socket -----------------------------------------------

std::optional<milliseconds> timeout_option(int fd, int name) {
  timeval value{};
  socklen_t length = sizeof value;
  if (kernel::calls().getsockopt(fd, SOL_SOCKET, name, &value, &length) != 0) return std::nullopt;
  const milliseconds timeout = std::chrono::seconds(value.tv_sec) + milliseconds(value.tv_usec / 1000);
  if (timeout.count() == 0) return std::nullopt;
  return timeout;
}

bool flag_option(int fd, int level, int name) {
  int value = 0;
  socklen_t length = sizeof value;
  return kernel::calls().getsockopt(fd, level, name, &value, &length) == 0 && value != 0;
}

// The type (SOCK_STREAM or SOCK_DGRAM) of fd if it is a kernel AF_INET
// socket of that type not yet bound: the sockets that may still become utcp's.
std::optional<int> adoptable_type(int fd) {
  if (fd < 0 || fd >= kMaxFd) return std::nullopt;
  int domain = 0, type = 0;
  socklen_t length = sizeof domain;
  if (kernel::calls().getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 || domain != AF_INET)
    return std::nullopt;
  length = sizeof type;
  if (kernel::calls().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 ||
      (type != SOCK_STREAM && type != SOCK_DGRAM))
    return std::nullopt;
  sockaddr_in local{};
  length = sizeof local;
  if (kernel::calls().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 || local.sin_port != 0)
    return std::nullopt;
  return type;
}

// Replaces the kernel socket at fd with a utcp socket under the same number:
// an eventfd holds the number (close-on-exec, see README.md), and the options
// the program set on the kernel socket carry over. Null (errno set) if utcp
// cannot start.
Socket* adopt(int fd, int type) {
  utcp::ViaHost* via_host = the_host();
  if (!via_host) {
    errno = ENETDOWN;
    return nullptr;
  }
  auto socket = std::make_unique<Socket>();
  const int flags = kernel::calls().fcntl(fd, F_GETFL);
  socket->nonblocking = flags >= 0 && (flags & O_NONBLOCK);
  socket->nodelay = flag_option(fd, IPPROTO_TCP, TCP_NODELAY);
  socket->keepalive = flag_option(fd, SOL_SOCKET, SO_KEEPALIVE);
  socket->reuse_address = flag_option(fd, SOL_SOCKET, SO_REUSEADDR);
  socket->receive_timeout = timeout_option(fd, SO_RCVTIMEO);
  socket->send_timeout = timeout_option(fd, SO_SNDTIMEO);
  const utcp::TcpConfig& defaults = via_host->stack().config().tcp;
  const int receive_buffer = requested_receive_buffer[fd].exchange(0);
  const int send_buffer = requested_send_buffer[fd].exchange(0);
  socket->receive_buffer = receive_buffer > 0 ? receive_buffer : static_cast<int>(defaults.receive_buffer);
  socket->send_buffer = send_buffer > 0 ? send_buffer : static_cast<int>(defaults.send_buffer);
  if (type == SOCK_DGRAM) {
    socket->datagram.emplace(via_host->stack());
    socket->datagram->set_nonblocking(true);  // blocking calls wait here, in slices
    socket->datagram->set_reuse_address(socket->reuse_address || flag_option(fd, SOL_SOCKET, SO_REUSEPORT));
    if (receive_buffer > 0)
      socket->datagram->set_receive_queue_limits(via_host->stack().config().udp_receive_queue_datagrams,
                                                 static_cast<std::size_t>(receive_buffer));
  } else {
    socket->stream.emplace(via_host->stack());
    socket->stream->set_nonblocking(true);
    socket->stream->set_nodelay(socket->nodelay);
    socket->stream->set_keepalive(socket->keepalive);
    (void)socket->stream->set_buffer_sizes(static_cast<std::size_t>(socket->send_buffer),
                                           static_cast<std::size_t>(socket->receive_buffer));
  }

  const int placeholder = eventfd(0, EFD_CLOEXEC);
  if (placeholder < 0) return nullptr;
  const int moved = kernel::calls().dup3(placeholder, fd, O_CLOEXEC);
  const int saved_errno = errno;
  kernel::calls().close(placeholder);
  if (moved < 0) {
    errno = saved_errno;
    return nullptr;
  }
  Socket* adopted = socket.release();
  table[fd].store(adopted, std::memory_order_release);
  return adopted;
}

// A descriptor number for a new utcp socket (accept).
int new_descriptor(Socket* socket, int flags) {
  const int fd = eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return -1;
  if (fd >= kMaxFd) {
    kernel::calls().close(fd);
    return fail(EMFILE);
  }
  socket->nonblocking = flags & SOCK_NONBLOCK;
  table[fd].store(socket, std::memory_order_release);
  return fd;
}

// Drops one descriptor's reference; the last one closes the socket.
void release(Socket* socket) {
  if (--socket->references > 0) return;
  if (forked_child) {  // the parent's connection: left as it is
    parents_stack->sockets.push_back(socket);
    return;
  }
  if (socket->listener) socket->listener->close();
  if (socket->stream) {
    utcp::TcpSocket& stream = *socket->stream;
    const std::optional<utcp::TcpInfo> info = stream.info();
    if (socket->abort_on_close) {
      stream.abort();
    } else if (!info || info->bytes_readable > 0 || connection_done(stream)) {
      stream.close();  // unread data: a reset, as the kernel's close
    } else {
      (void)stream.shutdown(utcp::Shutdown::write);
      closing.push_back(std::make_unique<utcp::TcpSocket>(std::move(stream)));
    }
  }
  delete socket;
}

// The socket's readiness as poll's bits. An error is taken from utcp once and
// kept for SO_ERROR or the next call.
short events_of(Socket& socket) {
  if (socket.listener) return socket.listener->readable() ? POLLIN : 0;
  // A datagram socket can always send (a datagram the link refuses is lost, as UDP's).
  if (socket.datagram) {
    short events = POLLOUT | POLLWRNORM;
    // Readable with no datagram waiting: an ICMP error waits for the next call.
    if (socket.datagram->readable())
      events |= socket.datagram->next_datagram_size() ? POLLIN | POLLRDNORM : POLLIN | POLLERR;
    return events;
  }
  utcp::TcpSocket& stream = *socket.stream;
  if (!socket.pending_error) socket.pending_error = stream.take_error();
  short events = 0;
  if (socket.pending_error) events |= POLLERR;
  if (stream.readable()) events |= POLLIN;
  if (stream.writable()) events |= POLLOUT;
  switch (stream.state()) {
    case utcp::TcpState::closed:
    case utcp::TcpState::closing:
    case utcp::TcpState::last_ack:
    case utcp::TcpState::time_wait:
      events |= POLLHUP;
      break;
    case utcp::TcpState::close_wait:
      events |= POLLRDHUP;
      break;
    default:
      break;
  }
  if (events & POLLIN) events |= POLLRDNORM;
  if (events & POLLOUT) events |= POLLWRNORM;
  return events;
}

// A pending error taken by poll, reported once.
std::error_code take_pending_error(Socket& socket) {
  std::error_code error = std::exchange(socket.pending_error, {});
  if (!error && socket.stream) error = socket.stream->take_error();
  return error;
}

// Runs a call on a utcp socket under the lock: fd's socket, or EBADF.
template <typename Call>
auto with_socket(int fd, Call&& call) -> decltype(call(std::declval<StackLock&>(), std::declval<Socket&>())) {
  StackLock lock;
  Socket* socket = socket_at(fd);
  if (!socket) return fail(EBADF);
  if (forked_child) return fail(EOPNOTSUPP);
  try {
    return call(lock, *socket);
  } catch (const std::bad_alloc&) {
    return fail(ENOMEM);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "viastack-preload: utcp failed: %s\n", error.what());
    return fail(EIO);
  }
}

// A wait of a blocking call: true once ready() holds; false with errno set
// (EAGAIN on the timeout, EBADF if another thread closed fd meanwhile).
bool wait_for(StackLock& lock, int fd, Socket& socket, const std::function<bool()>& ready,
              std::optional<milliseconds> timeout) {
  const bool became_ready = drive_until(
      lock, [&] { return socket_at(fd) != &socket || ready(); }, deadline_after(timeout));
  if (socket_at(fd) != &socket) return fail(EBADF), false;
  if (!became_ready) return fail(EAGAIN), false;
  return true;
}

}  // namespace

// ---- The calls --------------------------------------------------------------

bool is_utcp(int fd) { return socket_at(fd) != nullptr; }

void note_kernel_option(int fd, int level, int name, const void* value, socklen_t length) {
  int size = 0;
  if (fd < 0 || fd >= kMaxFd || level != SOL_SOCKET || (name != SO_RCVBUF && name != SO_SNDBUF) || !value ||
      length < static_cast<socklen_t>(sizeof size))
    return;
  std::memcpy(&size, value, sizeof size);
  (name == SO_RCVBUF ? requested_receive_buffer : requested_send_buffer)[fd].store(std::max(size, 2048));
}

void forget_stale(int fd) {
  if (fd < 0 || fd >= kMaxFd) return;
  requested_receive_buffer[fd].store(0);
  requested_send_buffer[fd].store(0);
  if (!socket_at(fd)) return;
  StackLock lock;
  if (Socket* stale = table[fd].exchange(nullptr)) release(stale);
}

std::optional<int> bind(int fd, const sockaddr* address, socklen_t length) {
  const std::optional<utcp::Endpoint> local = endpoint_of(address, length);
  if (!socket_at(fd)) {
    const Network& net = network();
    if (!net.enabled || !local) return std::nullopt;
    const bool any = local->address.value == INADDR_ANY;
    if (any ? !net.any_goes_to_utcp : !net.contains(local->address.value)) return std::nullopt;
    StackLock lock;
    const std::optional<int> type = forked_child ? std::nullopt : adoptable_type(fd);
    if (!type) return std::nullopt;
    if (!adopt(fd, *type)) return -1;
  }
  if (!local) return fail(address && address->sa_family != AF_INET ? EAFNOSUPPORT : EINVAL);
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    const std::error_code error = socket.datagram ? socket.datagram->bind(*local)
                                  : socket.stream ? socket.stream->bind(*local)
                                                  : std::make_error_code(std::errc::invalid_argument);
    return error ? fail(error) : 0;
  });
}

std::optional<int> connect(int fd, const sockaddr* address, socklen_t length) {
  const Network& net = network();
  const std::optional<utcp::Endpoint> remote = endpoint_of(address, length);
  if (!socket_at(fd)) {
    if (!net.enabled || !remote || !net.contains(remote->address.value)) return std::nullopt;
    StackLock lock;
    const std::optional<int> type = forked_child ? std::nullopt : adoptable_type(fd);
    if (!type) return std::nullopt;
    if (!adopt(fd, *type)) return -1;
  }
  if (!remote) return fail(address && address->sa_family != AF_INET ? EAFNOSUPPORT : EINVAL);
  return with_socket(fd, [&](StackLock& lock, Socket& socket) -> int {
    if (socket.datagram) {
      const std::error_code error = socket.datagram->connect(*remote);
      return error ? fail(error) : 0;
    }
    if (!socket.stream) return fail(EISCONN);
    utcp::TcpSocket& stream = *socket.stream;
    const std::error_code error = stream.connect(*remote);
    if (error != std::errc::operation_in_progress) return error ? fail(error) : 0;
    if (socket.nonblocking) return fail(EINPROGRESS);
    if (!wait_for(lock, fd, socket, [&] { return (events_of(socket) & (POLLOUT | POLLERR | POLLHUP)) != 0; },
                  socket.send_timeout))
      return errno == EAGAIN ? fail(ETIMEDOUT) : -1;
    if (const std::error_code outcome = take_pending_error(socket)) return fail(outcome);
    return stream.state() == utcp::TcpState::established || stream.state() == utcp::TcpState::close_wait
               ? 0
               : fail(ECONNREFUSED);
  });
}

std::optional<int> adopt_by_destination(int fd, const sockaddr* address, socklen_t length) {
  const Network& net = network();
  const std::optional<utcp::Endpoint> remote = endpoint_of(address, length);
  if (!net.enabled || !remote || !net.contains(remote->address.value)) return std::nullopt;
  StackLock lock;
  if (socket_at(fd)) return 0;  // another thread was first
  if (forked_child || adoptable_type(fd) != SOCK_DGRAM) return std::nullopt;
  return adopt(fd, SOCK_DGRAM) ? 0 : -1;
}

int listen(int fd, int backlog) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    if (socket.datagram) return fail(EOPNOTSUPP);
    if (socket.listener) return 0;  // the kernel lets a listener change its backlog
    if (socket.stream->state() != utcp::TcpState::closed) return fail(EINVAL);
    // utcp listens on a port of its own: the bound socket gives its port to the listener.
    const utcp::Endpoint local = socket.stream->local_endpoint().value_or(utcp::Endpoint{});
    utcp::Stack& stack = host->stack();
    socket.stream->close();
    socket.stream.reset();
    socket.listener.emplace(stack);
    utcp::TcpConfig config = stack.config().tcp;
    config.nodelay = socket.nodelay;
    config.keepalive = socket.keepalive;
    config.receive_buffer = static_cast<std::size_t>(socket.receive_buffer);
    config.send_buffer = static_cast<std::size_t>(socket.send_buffer);
    socket.listener->set_config(config);
    socket.listener->set_nonblocking(true);
    if (const std::error_code error = socket.listener->listen(local, std::clamp(backlog, 1, 4096))) {
      socket.listener.reset();
      socket.stream.emplace(stack);
      socket.stream->set_nonblocking(true);
      return fail(error);
    }
    return 0;
  });
}

int accept(int fd, sockaddr* address, socklen_t* length, int flags) {
  if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) return fail(EINVAL);
  return with_socket(fd, [&](StackLock& lock, Socket& socket) -> int {
    if (socket.datagram) return fail(EOPNOTSUPP);
    if (!socket.listener) return fail(EINVAL);
    for (;;) {
      utcp::Result<utcp::TcpSocket> accepted = socket.listener->accept();
      if (accepted) {
        auto peer = std::make_unique<Socket>();
        peer->stream.emplace(std::move(accepted.value()));
        peer->stream->set_nonblocking(true);
        peer->nodelay = socket.nodelay;
        peer->keepalive = socket.keepalive;
        peer->receive_buffer = socket.receive_buffer;
        peer->send_buffer = socket.send_buffer;
        const std::optional<utcp::Endpoint> remote = peer->stream->remote_endpoint();
        const int peer_fd = new_descriptor(peer.get(), flags);
        if (peer_fd < 0) return -1;
        (void)peer.release();
        if (remote) fill_address(*remote, address, length);
        return peer_fd;
      }
      if (accepted.error() != std::errc::resource_unavailable_try_again) return fail(accepted.error());
      if (socket.nonblocking) return fail(EAGAIN);
      if (!wait_for(lock, fd, socket, [&] { return socket.listener->readable(); }, socket.receive_timeout))
        return -1;
    }
  });
}

namespace {

// How long a blocking datagram send waits for a link that refuses packets
// before it reports ENOBUFS (the kernel's UDP may too).
constexpr milliseconds kLongestDatagramWait{1000};

// A datagram's bytes in one piece: its one buffer, or its buffers gathered in scratch.
std::span<const std::uint8_t> gathered(std::span<const iovec> data, std::vector<std::uint8_t>& scratch) {
  if (data.size() == 1) return {static_cast<const std::uint8_t*>(data[0].iov_base), data[0].iov_len};
  scratch.clear();
  for (const iovec& buffer : data) {
    const auto* bytes = static_cast<const std::uint8_t*>(buffer.iov_base);
    scratch.insert(scratch.end(), bytes, bytes + buffer.iov_len);
  }
  return scratch;
}

ssize_t send_datagram(StackLock& lock, int fd, Socket& socket, std::span<const iovec> data, int flags,
                      const sockaddr* to, socklen_t to_length) {
  std::optional<utcp::Endpoint> destination;
  if (to) {
    destination = endpoint_of(to, to_length);
    if (!destination) return fail(to->sa_family != AF_INET ? EAFNOSUPPORT : EINVAL);
  }
  thread_local std::vector<std::uint8_t> scratch;
  const std::span<const std::uint8_t> bytes = gathered(data, scratch);
  const bool nonblocking = socket.nonblocking || (flags & MSG_DONTWAIT);
  const Clock::time_point deadline = Clock::now() + std::min(socket.send_timeout.value_or(kLongestDatagramWait),
                                                             kLongestDatagramWait);
  for (;;) {
    const utcp::Result<std::size_t> sent =
        destination ? socket.datagram->send_to(bytes, *destination) : socket.datagram->send(bytes);
    if (sent) return static_cast<ssize_t>(*sent);
    // The link refused the packet for now: a blocking socket lets the stack
    // drain it and tries again, as the kernel's waits for its send buffer.
    if (sent.error() != std::errc::no_buffer_space || nonblocking || Clock::now() >= deadline)
      return fail(sent.error());
    if (!wait_for(lock, fd, socket, [] { return true; }, std::nullopt)) return -1;
  }
}

ssize_t receive_datagram(StackLock& lock, int fd, Socket& socket, std::span<const iovec> buffers, int flags,
                         sockaddr* from, socklen_t* from_length, int* message_flags) {
  if (!socket.datagram->readable()) {
    if (socket.nonblocking || (flags & MSG_DONTWAIT)) return fail(EAGAIN);
    if (!wait_for(lock, fd, socket, [&] { return socket.datagram->readable(); }, socket.receive_timeout)) return -1;
  }
  thread_local std::vector<std::uint8_t> scratch;
  std::span<std::uint8_t> into;
  if (buffers.size() == 1) {
    into = {static_cast<std::uint8_t*>(buffers[0].iov_base), buffers[0].iov_len};
  } else {
    std::size_t total = 0;
    for (const iovec& buffer : buffers) total += buffer.iov_len;
    scratch.resize(std::min(total, utcp::udp_max_payload));
    into = scratch;
  }
  const utcp::Result<utcp::Received> got = socket.datagram->receive_from(into);
  if (!got) return fail(got.error());
  if (buffers.size() != 1) {
    std::size_t offset = 0;
    for (const iovec& buffer : buffers) {
      const std::size_t n = std::min(buffer.iov_len, got->size - offset);
      if (n != 0) std::memcpy(buffer.iov_base, scratch.data() + offset, n);
      offset += n;
    }
  }
  fill_address(got->from, from, from_length);
  if (message_flags) *message_flags = got->truncated ? MSG_TRUNC : 0;
  // MSG_TRUNC asks for the datagram's real length, as Linux's UDP answers it.
  return static_cast<ssize_t>((flags & MSG_TRUNC) ? got->datagram_size : got->size);
}

}  // namespace

ssize_t send(int fd, std::span<const iovec> data, int flags, const sockaddr* to, socklen_t to_length) {
  return with_socket(fd, [&](StackLock& lock, Socket& socket) -> ssize_t {
    if (socket.datagram) return send_datagram(lock, fd, socket, data, flags, to, to_length);
    if (!socket.stream) return fail(ENOTCONN);
    if (const std::error_code error = std::exchange(socket.pending_error, {})) return fail(error);
    utcp::TcpSocket& stream = *socket.stream;
    const bool nonblocking = socket.nonblocking || (flags & MSG_DONTWAIT);
    std::size_t sent = 0;
    for (const iovec& buffer : data) {
      std::span<const std::uint8_t> rest(static_cast<const std::uint8_t*>(buffer.iov_base), buffer.iov_len);
      while (!rest.empty()) {
        const utcp::Result<std::size_t> n = stream.send(rest);
        if (n) {
          rest = rest.subspan(*n);
          sent += *n;
          continue;
        }
        if (n.error() != std::errc::resource_unavailable_try_again) {
          if (sent > 0) return static_cast<ssize_t>(sent);
          // The kernel's SIGPIPE, unless the program asked for none.
          if (n.error() == std::errc::broken_pipe && !(flags & MSG_NOSIGNAL)) raise(SIGPIPE);
          return fail(n.error());
        }
        if (nonblocking) return sent > 0 ? static_cast<ssize_t>(sent) : fail(EAGAIN);
        if (!wait_for(lock, fd, socket, [&] { return (events_of(socket) & (POLLOUT | POLLERR | POLLHUP)) != 0; },
                      socket.send_timeout))
          return sent > 0 ? static_cast<ssize_t>(sent) : -1;
      }
    }
    return static_cast<ssize_t>(sent);
  });
}

ssize_t receive(int fd, std::span<const iovec> buffers, int flags, sockaddr* from, socklen_t* from_length,
                int* message_flags) {
  if (flags & (MSG_PEEK | MSG_OOB)) return fail(EOPNOTSUPP);
  return with_socket(fd, [&](StackLock& lock, Socket& socket) -> ssize_t {
    if (socket.datagram) return receive_datagram(lock, fd, socket, buffers, flags, from, from_length, message_flags);
    // A stream socket gives no source address (as the kernel's TCP) and no flags.
    if (from_length) *from_length = 0;
    if (message_flags) *message_flags = 0;
    if (!socket.stream) return fail(ENOTCONN);
    if (const std::error_code error = std::exchange(socket.pending_error, {})) return fail(error);
    utcp::TcpSocket& stream = *socket.stream;
    const bool nonblocking = socket.nonblocking || (flags & MSG_DONTWAIT);
    std::size_t got = 0;
    for (const iovec& buffer : buffers) {
      std::span<std::uint8_t> rest(static_cast<std::uint8_t*>(buffer.iov_base), buffer.iov_len);
      while (!rest.empty()) {
        const utcp::Result<std::size_t> n = stream.receive(rest);
        if (n && *n == 0) return static_cast<ssize_t>(got);  // the end of the stream
        if (n) {
          rest = rest.subspan(*n);
          got += *n;
          continue;
        }
        if (n.error() != std::errc::resource_unavailable_try_again) return got > 0 ? static_cast<ssize_t>(got) : fail(n.error());
        // Like the kernel: what is here, unless MSG_WAITALL asks for all of it.
        if (got > 0 && !(flags & MSG_WAITALL)) return static_cast<ssize_t>(got);
        if (nonblocking) return got > 0 ? static_cast<ssize_t>(got) : fail(EAGAIN);
        if (!wait_for(lock, fd, socket, [&] { return (events_of(socket) & (POLLIN | POLLERR | POLLHUP)) != 0; },
                      socket.receive_timeout))
          return got > 0 ? static_cast<ssize_t>(got) : -1;
      }
    }
    return static_cast<ssize_t>(got);
  });
}

int close(int fd) {
  {
    StackLock lock;
    Socket* socket = fd >= 0 && fd < kMaxFd ? table[fd].exchange(nullptr) : nullptr;
    if (socket) release(socket);
  }
  return kernel::calls().close(fd);
}

int shutdown(int fd, int how) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    // A datagram socket has no connection to end; Linux accepts it on a connected one.
    if (socket.datagram) return socket.datagram->remote_endpoint() ? 0 : fail(ENOTCONN);
    if (!socket.stream) return fail(ENOTCONN);
    utcp::Shutdown which;
    switch (how) {
      case SHUT_RD: which = utcp::Shutdown::read; break;
      case SHUT_WR: which = utcp::Shutdown::write; break;
      case SHUT_RDWR: which = utcp::Shutdown::both; break;
      default: return fail(EINVAL);
    }
    const std::error_code error = socket.stream->shutdown(which);
    return error ? fail(error) : 0;
  });
}

namespace {

template <typename T>
bool read_option(const void* value, socklen_t length, T& out) {
  if (!value || length < static_cast<socklen_t>(sizeof(T))) return false;
  std::memcpy(&out, value, sizeof(T));
  return true;
}

template <typename T>
int write_option(const T& in, void* value, socklen_t* length) {
  if (!value || !length) return fail(EFAULT);
  std::memcpy(value, &in, std::min<std::size_t>(*length, sizeof(T)));
  *length = static_cast<socklen_t>(std::min<std::size_t>(*length, sizeof(T)));
  return 0;
}

std::optional<milliseconds> to_timeout(const timeval& value) {
  const milliseconds timeout = std::chrono::seconds(value.tv_sec) + milliseconds(value.tv_usec / 1000);
  if (value.tv_sec == 0 && value.tv_usec == 0) return std::nullopt;
  return std::max(timeout, milliseconds(1));
}

timeval to_timeval(std::optional<milliseconds> timeout) {
  if (!timeout) return {};
  return {static_cast<time_t>(timeout->count() / 1000), static_cast<suseconds_t>(timeout->count() % 1000 * 1000)};
}

// Linux's TCP_INFO state numbers (TCP_ESTABLISHED = 1, ...).
std::uint8_t linux_state(utcp::TcpState state) {
  switch (state) {
    case utcp::TcpState::established: return TCP_ESTABLISHED;
    case utcp::TcpState::syn_sent: return TCP_SYN_SENT;
    case utcp::TcpState::syn_received: return TCP_SYN_RECV;
    case utcp::TcpState::fin_wait_1: return TCP_FIN_WAIT1;
    case utcp::TcpState::fin_wait_2: return TCP_FIN_WAIT2;
    case utcp::TcpState::time_wait: return TCP_TIME_WAIT;
    case utcp::TcpState::closed: return TCP_CLOSE;
    case utcp::TcpState::close_wait: return TCP_CLOSE_WAIT;
    case utcp::TcpState::last_ack: return TCP_LAST_ACK;
    case utcp::TcpState::closing: return TCP_CLOSING;
  }
  return TCP_CLOSE;
}

// The fields of struct tcp_info that utcp knows; the rest are 0.
tcp_info tcp_info_of(const Socket& socket) {
  tcp_info out{};
  if (socket.listener) {
    out.tcpi_state = TCP_LISTEN;
    return out;
  }
  const std::optional<utcp::TcpInfo> info = socket.stream->info();
  if (!info) {
    out.tcpi_state = TCP_CLOSE;
    return out;
  }
  const std::uint32_t mss = std::max<std::uint32_t>(info->max_segment_size, 1);
  out.tcpi_state = linux_state(info->state);
  if (info->timestamps) out.tcpi_options |= TCPI_OPT_TIMESTAMPS;
  if (info->send_window_scale || info->receive_window_scale) out.tcpi_options |= TCPI_OPT_WSCALE;
  out.tcpi_snd_wscale = info->send_window_scale & 0xf;
  out.tcpi_rcv_wscale = info->receive_window_scale & 0xf;
  out.tcpi_rto = static_cast<std::uint32_t>(std::chrono::microseconds(info->rto).count());
  out.tcpi_snd_mss = info->max_segment_size;
  out.tcpi_rcv_mss = info->max_segment_size;
  out.tcpi_unacked = static_cast<std::uint32_t>((info->bytes_in_flight + mss - 1) / mss);
  out.tcpi_rtt = static_cast<std::uint32_t>(info->smoothed_rtt.count());
  out.tcpi_rttvar = static_cast<std::uint32_t>(info->rtt_variance.count());
  out.tcpi_snd_ssthresh = info->slow_start_threshold / mss;
  out.tcpi_snd_cwnd = info->congestion_window / mss;
  out.tcpi_advmss = info->max_segment_size;
  out.tcpi_rcv_space = info->receive_window;
  if (const std::optional<utcp::TcpCounters> counters = socket.stream->counters())
    out.tcpi_total_retrans = static_cast<std::uint32_t>(counters->retransmitted_segments);
  return out;
}

}  // namespace

int setsockopt(int fd, int level, int name, const void* value, socklen_t length) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    int flag = 0;
    if (level == SOL_SOCKET) {
      switch (name) {
        case SO_REUSEADDR:
        case SO_REUSEPORT:  // utcp refuses no port for TIME-WAIT: nothing to allow
          if (!read_option(value, length, flag)) return fail(EINVAL);
          if (name == SO_REUSEADDR) socket.reuse_address = flag != 0;
          // Datagram sockets that allow it share a port (iperf3's UDP server binds its port twice).
          if (socket.datagram && flag != 0) socket.datagram->set_reuse_address(true);
          return 0;
        case SO_KEEPALIVE:
          if (!read_option(value, length, flag)) return fail(EINVAL);
          socket.keepalive = flag != 0;
          if (socket.stream) socket.stream->set_keepalive(socket.keepalive);
          return 0;
        case SO_RCVBUF:
        case SO_SNDBUF: {
          // Reported back as set (the kernel doubles it); utcp applies it to
          // the connection connect() opens, and to those a listener accepts
          // from listen() on. An open connection keeps its buffers.
          if (!read_option(value, length, flag)) return fail(EINVAL);
          (name == SO_RCVBUF ? socket.receive_buffer : socket.send_buffer) = std::max(flag, 2048);
          if (socket.datagram && name == SO_RCVBUF)
            socket.datagram->set_receive_queue_limits(host->stack().config().udp_receive_queue_datagrams,
                                                      static_cast<std::size_t>(socket.receive_buffer));
          if (socket.stream)
            (void)socket.stream->set_buffer_sizes(static_cast<std::size_t>(socket.send_buffer),
                                                  static_cast<std::size_t>(socket.receive_buffer));
          return 0;
        }
        case SO_RCVTIMEO:
        case SO_SNDTIMEO: {
          timeval timeout{};
          if (!read_option(value, length, timeout) || timeout.tv_sec < 0 || timeout.tv_usec < 0 ||
              timeout.tv_usec >= 1000000)
            return fail(EINVAL);
          (name == SO_RCVTIMEO ? socket.receive_timeout : socket.send_timeout) = to_timeout(timeout);
          return 0;
        }
        case SO_LINGER: {
          linger value_linger{};
          if (!read_option(value, length, value_linger)) return fail(EINVAL);
          socket.abort_on_close = value_linger.l_onoff && value_linger.l_linger == 0;
          return 0;
        }
        default:
          return fail(ENOPROTOOPT);
      }
    }
    if (level == IPPROTO_TCP && socket.datagram) return fail(EOPNOTSUPP);  // as Linux's UDP
    if (level == IPPROTO_TCP && name == TCP_NODELAY) {
      if (!read_option(value, length, flag)) return fail(EINVAL);
      socket.nodelay = flag != 0;
      if (socket.stream) socket.stream->set_nodelay(socket.nodelay);
      return 0;
    }
    if (level == IPPROTO_IP && name == IP_TOS) return 0;  // no queues to order: accepted, without effect
    return fail(ENOPROTOOPT);
  });
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* length) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    if (level == SOL_SOCKET) {
      switch (name) {
        case SO_ERROR: return write_option(take_pending_error(socket).value(), value, length);
        case SO_TYPE: return write_option(int{socket.datagram ? SOCK_DGRAM : SOCK_STREAM}, value, length);
        case SO_DOMAIN: return write_option(int{AF_INET}, value, length);
        case SO_PROTOCOL: return write_option(int{socket.datagram ? IPPROTO_UDP : IPPROTO_TCP}, value, length);
        case SO_ACCEPTCONN: return write_option(int{socket.listener.has_value()}, value, length);
        case SO_REUSEADDR: return write_option(int{socket.reuse_address}, value, length);
        case SO_KEEPALIVE: return write_option(int{socket.keepalive}, value, length);
        case SO_RCVBUF: return write_option(socket.receive_buffer, value, length);
        case SO_SNDBUF: return write_option(socket.send_buffer, value, length);
        case SO_RCVTIMEO: return write_option(to_timeval(socket.receive_timeout), value, length);
        case SO_SNDTIMEO: return write_option(to_timeval(socket.send_timeout), value, length);
        case SO_LINGER: return write_option(linger{socket.abort_on_close, 0}, value, length);
        default: return fail(ENOPROTOOPT);
      }
    }
    if (level == IPPROTO_TCP && socket.datagram) return fail(EOPNOTSUPP);
    if (level == IPPROTO_TCP) {
      switch (name) {
        case TCP_NODELAY: return write_option(int{socket.nodelay}, value, length);
        case TCP_MAXSEG: {
          const std::optional<utcp::TcpInfo> info = socket.stream ? socket.stream->info() : std::nullopt;
          const int mss = info ? info->max_segment_size : static_cast<int>(host->link().mtu() - 40);
          return write_option(mss, value, length);
        }
        case TCP_INFO: return write_option(tcp_info_of(socket), value, length);
        default: return fail(ENOPROTOOPT);
      }
    }
    return fail(ENOPROTOOPT);
  });
}

int getsockname(int fd, sockaddr* address, socklen_t* length) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    if (!address || !length) return fail(EFAULT);
    const std::optional<utcp::Endpoint> local = socket.listener   ? socket.listener->local_endpoint()
                                                : socket.datagram ? socket.datagram->local_endpoint()
                                                                  : socket.stream->local_endpoint();
    fill_address(local.value_or(utcp::Endpoint{}), address, length);
    return 0;
  });
}

int getpeername(int fd, sockaddr* address, socklen_t* length) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    if (!address || !length) return fail(EFAULT);
    const std::optional<utcp::Endpoint> remote = socket.datagram ? socket.datagram->remote_endpoint()
                                                 : socket.stream ? socket.stream->remote_endpoint()
                                                                 : std::nullopt;
    if (!remote) return fail(ENOTCONN);
    fill_address(*remote, address, length);
    return 0;
  });
}

int fcntl(int fd, int command, long argument) {
  switch (command) {
    case F_GETFL:
      return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
        return O_RDWR | (socket.nonblocking ? O_NONBLOCK : 0);
      });
    case F_SETFL:
      return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
        socket.nonblocking = argument & O_NONBLOCK;
        return 0;
      });
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      const int copy = kernel::calls().fcntl(fd, F_DUPFD_CLOEXEC, argument);
      if (copy < 0) return -1;
      StackLock lock;
      Socket* socket = socket_at(fd);
      if (!socket || copy >= kMaxFd) {
        kernel::calls().close(copy);
        return fail(socket ? EMFILE : EBADF);
      }
      ++socket->references;
      table[copy].store(socket, std::memory_order_release);
      return copy;
    }
    default:
      return kernel::calls().fcntl(fd, command, argument);  // F_GETFD, F_SETFD, ...: the descriptor's own
  }
}

int ioctl(int fd, unsigned long request, void* argument) {
  return with_socket(fd, [&](StackLock&, Socket& socket) -> int {
    if (!argument) return fail(EFAULT);
    if (request == FIONBIO) {
      int on = 0;
      std::memcpy(&on, argument, sizeof on);
      socket.nonblocking = on != 0;
      return 0;
    }
    if (request == FIONREAD && socket.datagram) {  // the next datagram's length, as Linux's UDP
      const int next = static_cast<int>(socket.datagram->next_datagram_size().value_or(0));
      std::memcpy(argument, &next, sizeof next);
      return 0;
    }
    if (request == FIONREAD) {
      const std::optional<utcp::TcpInfo> info = socket.stream ? socket.stream->info() : std::nullopt;
      const int readable = info ? static_cast<int>(std::min<std::size_t>(info->bytes_readable, INT32_MAX)) : 0;
      std::memcpy(argument, &readable, sizeof readable);
      return 0;
    }
    return fail(ENOTTY);
  });
}

int duplicate(int fd, int target, int flags) {
  if (target == fd) {
    if (flags) return fail(EINVAL);  // dup3's rule; dup2 of itself is a no-op
    return socket_at(fd) || kernel::calls().fcntl(fd, F_GETFD) >= 0 ? fd : -1;
  }
  StackLock lock;
  Socket* source = socket_at(fd);
  int copy;
  if (target < 0) {
    copy = kernel::calls().fcntl(fd, F_DUPFD_CLOEXEC, 0);
  } else {
    // utcp sockets' descriptors stay close-on-exec (README.md).
    copy = kernel::calls().dup3(fd, target, source ? O_CLOEXEC : flags);
  }
  if (copy < 0) return -1;
  if (copy >= kMaxFd) {
    if (source) {
      kernel::calls().close(copy);
      return fail(EMFILE);
    }
    return copy;
  }
  if (Socket* replaced = table[copy].exchange(nullptr)) release(replaced);
  if (source) {
    ++source->references;
    table[copy].store(source, std::memory_order_release);
  }
  return copy;
}

// ---- poll -------------------------------------------------------------------

namespace {

// Fills the utcp entries' revents (under the lock); how many are ready.
int look_at_utcp(pollfd* fds, nfds_t count) {
  int ready = 0;
  for (nfds_t i = 0; i < count; ++i) {
    Socket* socket = socket_at(fds[i].fd);
    if (!socket) continue;
    if (forked_child) {
      fds[i].revents = POLLNVAL;
    } else {
      fds[i].revents = static_cast<short>(events_of(*socket) & (fds[i].events | POLLERR | POLLHUP));
    }
    ready += fds[i].revents != 0;
  }
  return ready;
}

// Polls the kernel's entries of fds (the utcp ones hidden from the kernel by
// a negative number); how many are ready, or -1.
int look_at_kernel(pollfd* fds, const std::vector<nfds_t>& kernel_entries,
                   std::vector<pollfd>& scratch, int timeout_ms) {
  scratch.clear();
  for (nfds_t i : kernel_entries) scratch.push_back(fds[i]);
  const int ready = kernel::calls().poll(scratch.data(), scratch.size(), timeout_ms);
  if (ready < 0) return -1;
  for (std::size_t k = 0; k < kernel_entries.size(); ++k) fds[kernel_entries[k]].revents = scratch[k].revents;
  return ready;
}

int remaining_ms(std::optional<Clock::time_point> deadline) {
  if (!deadline) return -1;
  return static_cast<int>(std::max<long>(0, std::chrono::ceil<milliseconds>(*deadline - Clock::now()).count()));
}

}  // namespace

int poll(pollfd* fds, nfds_t count, int timeout_ms) {
  std::vector<nfds_t> kernel_entries;
  for (nfds_t i = 0; i < count; ++i) {
    fds[i].revents = 0;
    if (fds[i].fd >= 0 && !socket_at(fds[i].fd)) kernel_entries.push_back(i);
  }
  std::vector<pollfd> scratch;
  const std::optional<Clock::time_point> deadline =
      timeout_ms < 0 ? std::nullopt : std::optional(Clock::now() + milliseconds(timeout_ms));
  for (;;) {
    int utcp_ready = 0;
    {
      StackLock lock;
      if (host && !forked_child) {
        if (kernel_entries.empty()) {
          // Only utcp's: sleep in the NIC until one is ready.
          const auto ready = [&] { return look_at_utcp(fds, count) > 0; };
          (void)drive_until(lock, ready, deadline);
        } else {
          poll_stack();
        }
      }
      utcp_ready = look_at_utcp(fds, count);
    }
    if (kernel_entries.empty()) return utcp_ready;
    const int wait = utcp_ready > 0 ? 0 : std::min(remaining_ms(deadline) < 0 ? kMixedSliceMs : remaining_ms(deadline), kMixedSliceMs);
    const int kernel_ready = look_at_kernel(fds, kernel_entries, scratch, wait);
    if (kernel_ready < 0) return -1;
    if (utcp_ready + kernel_ready > 0 || (deadline && Clock::now() >= *deadline)) return utcp_ready + kernel_ready;
  }
}

// ---- epoll ------------------------------------------------------------------

namespace {

// An epoll set's utcp members, and whether it has kernel members too (then a
// wait alternates between the two).
struct EpollSet {
  std::map<int, epoll_event> utcp;
  std::set<int> kernel;
};
std::mutex epoll_mutex;  // apart from the stack's: the kernel's epoll calls never wait for utcp
std::map<int, EpollSet> epoll_sets;
std::atomic<int> epoll_sets_with_utcp{0};
std::atomic<bool> epoll_sets_exist{false};

void count_utcp_set(const EpollSet& set, bool had_utcp) {
  if (had_utcp != !set.utcp.empty()) epoll_sets_with_utcp.fetch_add(set.utcp.empty() ? -1 : 1);
}

}  // namespace

int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  if (!socket_at(fd)) {
    const int result = kernel::calls().epoll_ctl(epfd, op, fd, event);
    if (result == 0) {
      std::lock_guard lock(epoll_mutex);
      epoll_sets_exist.store(true, std::memory_order_relaxed);
      if (op == EPOLL_CTL_ADD) epoll_sets[epfd].kernel.insert(fd);
      if (op == EPOLL_CTL_DEL)
        if (auto it = epoll_sets.find(epfd); it != epoll_sets.end()) it->second.kernel.erase(fd);
    }
    return result;
  }
  if (kernel::calls().fcntl(epfd, F_GETFD) < 0) return -1;
  if (epfd == fd) return fail(EINVAL);
  std::lock_guard lock(epoll_mutex);
  epoll_sets_exist.store(true, std::memory_order_relaxed);
  EpollSet& set = epoll_sets[epfd];
  const bool had_utcp = !set.utcp.empty();
  const auto member = set.utcp.find(fd);
  switch (op) {
    case EPOLL_CTL_ADD:
      if (!event) return fail(EFAULT);
      if (member != set.utcp.end()) return fail(EEXIST);
      set.utcp.emplace(fd, *event);
      break;
    case EPOLL_CTL_MOD:
      if (!event) return fail(EFAULT);
      if (member == set.utcp.end()) return fail(ENOENT);
      member->second = *event;
      break;
    case EPOLL_CTL_DEL:
      if (member == set.utcp.end()) return fail(ENOENT);
      set.utcp.erase(member);
      break;
    default:
      return fail(EINVAL);
  }
  count_utcp_set(set, had_utcp);
  return 0;
}

bool epoll_has_utcp(int epfd) {
  if (epoll_sets_with_utcp.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(epoll_mutex);
  const auto it = epoll_sets.find(epfd);
  return it != epoll_sets.end() && !it->second.utcp.empty();
}

// A closed descriptor leaves every epoll set (the kernel does this for its own).
void forget_in_epoll_sets(int fd) {
  if (!epoll_sets_exist.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(epoll_mutex);
  epoll_sets.erase(fd);  // fd was an epoll set itself
  for (auto& [epfd, set] : epoll_sets) {
    const bool had_utcp = !set.utcp.empty();
    set.utcp.erase(fd);
    set.kernel.erase(fd);
    count_utcp_set(set, had_utcp);
  }
}

int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms) {
  if (max_events <= 0) return fail(EINVAL);
  const std::optional<Clock::time_point> deadline =
      timeout_ms < 0 ? std::nullopt : std::optional(Clock::now() + milliseconds(timeout_ms));
  for (;;) {
    // A snapshot of the set: the stack's lock is not taken under epoll_mutex.
    std::vector<std::pair<int, epoll_event>> members;
    bool has_kernel;
    {
      std::lock_guard lock(epoll_mutex);
      const EpollSet& set = epoll_sets[epfd];
      members.assign(set.utcp.begin(), set.utcp.end());
      has_kernel = !set.kernel.empty();
    }
    int ready = 0;
    std::vector<int> fired_once;  // EPOLLONESHOT members that fired
    {
      StackLock lock;
      const auto look = [&] {
        ready = 0;
        fired_once.clear();
        for (const auto& [fd, registered] : members) {
          if (ready == max_events) break;
          Socket* socket = socket_at(fd);
          if (!socket || forked_child || !(registered.events & ~(EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE)))
            continue;
          const std::uint32_t now =
              static_cast<std::uint32_t>(events_of(*socket)) & (registered.events | EPOLLERR | EPOLLHUP);
          if (!now) continue;
          events[ready].events = now;
          events[ready].data = registered.data;
          ++ready;
          if (registered.events & EPOLLONESHOT) fired_once.push_back(fd);
        }
        return ready > 0;
      };
      if (host && !forked_child) {
        if (!has_kernel)
          (void)drive_until(lock, look, deadline);
        else
          poll_stack();
      }
      look();
    }
    if (!fired_once.empty()) {
      std::lock_guard lock(epoll_mutex);
      for (int fd : fired_once)
        if (auto it = epoll_sets[epfd].utcp.find(fd); it != epoll_sets[epfd].utcp.end()) it->second.events = 0;
    }
    if (!has_kernel) return ready;
    const int wait = ready > 0 ? 0 : std::min(remaining_ms(deadline) < 0 ? kMixedSliceMs : remaining_ms(deadline), kMixedSliceMs);
    int kernel_ready = 0;
    if (ready < max_events) {
      kernel_ready = kernel::calls().epoll_wait(epfd, events + ready, max_events - ready, wait);
      if (kernel_ready < 0) return ready > 0 ? ready : -1;
    }
    if (ready + kernel_ready > 0 || (deadline && Clock::now() >= *deadline)) return ready + kernel_ready;
  }
}

}  // namespace viastack::preload
