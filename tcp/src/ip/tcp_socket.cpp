#include "utcp/tcp_socket.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "utcp/udp_socket.hpp"

namespace utcp {
namespace {

std::error_code error(std::errc code) { return std::make_error_code(code); }

bool opening(TcpState state) { return state == TcpState::syn_sent || state == TcpState::syn_received; }

// Both FINs have been sent and received, or the connection is gone: poll's hup.
bool over_both_ways(TcpState state) {
  return state == TcpState::closed || state == TcpState::closing || state == TcpState::last_ack ||
         state == TcpState::time_wait;
}

// Reads and drops whatever has arrived (after shutdown(read)).
void discard_received(TcpConnection& connection, Instant now) {
  std::uint8_t sink[4096];
  while (connection.readable()) {
    const Result<std::size_t> taken = connection.receive(sink, now);
    if (!taken || *taken == 0) return;
  }
}

}  // namespace

// ---- TcpSocket ----

TcpSocket::TcpSocket(Stack& stack) : stack_(&stack), id_(stack.tcp_open(stack.config().tcp)) {}

TcpSocket::TcpSocket(TcpSocket&& other) noexcept
    : stack_(std::exchange(other.stack_, nullptr)), id_(std::exchange(other.id_, 0)) {}

TcpSocket& TcpSocket::operator=(TcpSocket&& other) noexcept {
  if (this != &other) {
    close();
    stack_ = std::exchange(other.stack_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

TcpSocket::~TcpSocket() { close(); }

Stack::TcpSocketState* TcpSocket::socket_state() const { return stack_ ? stack_->tcp_state(id_) : nullptr; }

std::error_code TcpSocket::bind(Endpoint local) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (socket->local_port != 0 || socket->connection) return error(std::errc::invalid_argument);
  if (const std::error_code failed = stack_->tcp_bind_port(id_, local, socket->local_port)) return failed;
  socket->owns_port = true;
  return {};
}

std::error_code TcpSocket::connect(Endpoint remote) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (const std::error_code failed = stack_->tcp_connect(*socket, id_, remote)) return failed;
  const TcpConnection* connection = stack_->tcp_connection(*socket);
  const auto opened = [connection] { return connection->was_established() || connection->finished(); };
  // Not opened within the send timeout: the connection goes on opening, as Linux's.
  if (socket->nonblocking || !stack_->waiter() || stack_->wait_for(opened, false, socket->send_timeout))
    return error(std::errc::operation_in_progress);
  if (connection->was_established()) return {};
  socket->error_reported = true;
  return connection->error() ? connection->error() : error(std::errc::connection_aborted);
}

Result<std::size_t> TcpSocket::send(std::span<const std::uint8_t> data) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  TcpConnection* connection = stack_->tcp_connection(*socket);
  if (!connection) return error(std::errc::not_connected);
  if (socket->write_shut) return error(std::errc::broken_pipe);
  // The timeout covers the whole call; the stack's clock moves as the waiter polls it.
  const std::optional<Instant> deadline =
      socket->send_timeout ? std::optional(stack_->current_time() + *socket->send_timeout) : std::nullopt;
  const auto room = [connection] { return connection->send_space() > 0 || connection->finished(); };
  std::size_t queued = 0;
  for (;;) {
    const Result<std::size_t> taken = connection->send(data.subspan(queued), stack_->current_time());
    if (!taken) {
      if (queued > 0) return queued;  // the error waits for the next call
      if (taken.error() == connection->error()) socket->error_reported = true;
      return taken.error();
    }
    queued += *taken;
    if (queued == data.size()) {
      // What the windows held back goes on as the ACKs that arrived meanwhile
      // open them, not only once the program next waits: one poll of the
      // stack, no wait (a stream of writes that fit the buffer would
      // otherwise leave the link idle between the windows' fills).
      if (connection->has_unsent() && stack_->waiter()) stack_->waiter()->wait_until([] { return true; }, {});
      return queued;
    }
    std::optional<std::chrono::milliseconds> left;
    if (deadline)
      left = std::max(std::chrono::milliseconds(0),
                      std::chrono::ceil<std::chrono::milliseconds>(*deadline - stack_->current_time()));
    if (const std::error_code not_ready = stack_->wait_for(room, socket->nonblocking, left)) {
      if (queued > 0) return queued;
      return not_ready;
    }
  }
}

Result<std::size_t> TcpSocket::receive(std::span<std::uint8_t> buffer) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  TcpConnection* connection = stack_->tcp_connection(*socket);
  if (!connection) return error(std::errc::not_connected);
  if (socket->read_shut) {
    discard_received(*connection, stack_->current_time());
    return std::size_t{0};
  }
  if (buffer.empty()) return std::size_t{0};
  // A reader that waits lends its buffer: what arrives meanwhile is copied
  // into it at once, not through the receive buffer.
  const bool lends = !connection->readable() && !socket->nonblocking;
  if (lends) connection->lend_read_buffer(buffer);
  const std::error_code not_ready = stack_->wait_for([connection] { return connection->readable(); },
                                                     socket->nonblocking, socket->receive_timeout);
  const std::size_t lent = lends ? connection->take_read_buffer() : 0;
  if (lent > 0) {
    if (lent == buffer.size()) return lent;
    // What came after, into the rest of the buffer (an error or the end of
    // the stream waits for the next call).
    const Result<std::size_t> more = connection->receive(buffer.subspan(lent), stack_->current_time());
    return lent + (more ? *more : 0);
  }
  if (not_ready) return not_ready;
  Result<std::size_t> received = connection->receive(buffer, stack_->current_time());
  if (!received && received.error() == connection->error()) socket->error_reported = true;
  return received;
}

std::error_code TcpSocket::shutdown(Shutdown how) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  TcpConnection* connection = stack_->tcp_connection(*socket);
  if (!connection) return error(std::errc::not_connected);
  if (how != Shutdown::read && !socket->write_shut) {
    connection->shutdown_write(stack_->current_time());
    socket->write_shut = true;
  }
  if (how != Shutdown::write) {
    socket->read_shut = true;
    discard_received(*connection, stack_->current_time());
  }
  return {};
}

void TcpSocket::close() {
  if (!stack_) return;
  stack_->tcp_release(id_, false);
  stack_ = nullptr;
}

void TcpSocket::abort() {
  if (!stack_) return;
  stack_->tcp_release(id_, true);
  stack_ = nullptr;
}

bool TcpSocket::is_open() const { return socket_state() != nullptr; }

void TcpSocket::set_nonblocking(bool nonblocking) {
  if (Stack::TcpSocketState* socket = socket_state()) socket->nonblocking = nonblocking;
}

void TcpSocket::set_nodelay(bool nodelay) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return;
  socket->config.nodelay = nodelay;
  if (TcpConnection* connection = stack_->tcp_connection(*socket)) connection->set_nodelay(nodelay, stack_->current_time());
}

void TcpSocket::set_keepalive(bool keepalive) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return;
  socket->config.keepalive = keepalive;
  if (TcpConnection* connection = stack_->tcp_connection(*socket)) connection->set_keepalive(keepalive, stack_->current_time());
}

std::error_code TcpSocket::set_buffer_sizes(std::size_t send, std::size_t receive) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (send == 0 || receive == 0) return error(std::errc::invalid_argument);
  if (socket->connection) return error(std::errc::already_connected);
  socket->config.send_buffer = send;
  socket->config.receive_buffer = receive;
  return {};
}

std::error_code TcpSocket::set_congestion_control(std::string_view name) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (socket->connection) return error(std::errc::already_connected);
  if (!congestion_controller_known(name)) return error(std::errc::no_such_file_or_directory);
  socket->config.congestion_control = name;
  return {};
}

void TcpSocket::set_congestion_trace(CongestionTrace trace) {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return;
  if (TcpConnection* connection = stack_->tcp_connection(*socket)) connection->set_congestion_trace(trace);
  socket->congestion_trace = std::move(trace);
}

void TcpSocket::set_receive_timeout(std::optional<std::chrono::milliseconds> timeout) {
  if (Stack::TcpSocketState* socket = socket_state()) socket->receive_timeout = timeout;
}

void TcpSocket::set_send_timeout(std::optional<std::chrono::milliseconds> timeout) {
  if (Stack::TcpSocketState* socket = socket_state()) socket->send_timeout = timeout;
}

std::error_code TcpSocket::take_error() {
  Stack::TcpSocketState* socket = socket_state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  const TcpConnection* connection = stack_->tcp_connection(*socket);
  if (!connection || !connection->error() || socket->error_reported) return {};
  socket->error_reported = true;
  return connection->error();
}

bool TcpSocket::readable() const {
  const Stack::TcpSocketState* socket = socket_state();
  if (!socket) return false;
  const TcpConnection* connection = stack_->tcp_connection(*socket);
  return !connection || socket->read_shut || connection->readable();  // ENOTCONN does not block either
}

bool TcpSocket::writable() const {
  const Stack::TcpSocketState* socket = socket_state();
  if (!socket) return false;
  const TcpConnection* connection = stack_->tcp_connection(*socket);
  if (!connection || connection->error() || socket->write_shut) return true;  // send fails at once
  const TcpState now = connection->state();
  if (opening(now)) return false;
  return connection->send_space() > 0 || (now != TcpState::established && now != TcpState::close_wait);
}

std::optional<Endpoint> TcpSocket::local_endpoint() const {
  const Stack::TcpSocketState* socket = socket_state();
  if (!socket || socket->local_port == 0) return std::nullopt;
  return Endpoint{stack_->address(), socket->local_port};
}

std::optional<Endpoint> TcpSocket::remote_endpoint() const {
  const Stack::TcpSocketState* socket = socket_state();
  if (!socket || !socket->connection) return std::nullopt;
  return socket->connection->remote;
}

TcpState TcpSocket::state() const {
  const Stack::TcpSocketState* socket = socket_state();
  const TcpConnection* connection = socket ? stack_->tcp_connection(*socket) : nullptr;
  return connection ? connection->state() : TcpState::closed;
}

std::optional<TcpInfo> TcpSocket::info() const {
  const Stack::TcpSocketState* socket = socket_state();
  const TcpConnection* connection = socket ? stack_->tcp_connection(*socket) : nullptr;
  return connection ? std::optional(connection->info()) : std::nullopt;
}

std::optional<TcpCounters> TcpSocket::counters() const {
  const Stack::TcpSocketState* socket = socket_state();
  const TcpConnection* connection = socket ? stack_->tcp_connection(*socket) : nullptr;
  return connection ? std::optional(connection->counters()) : std::nullopt;
}

// ---- TcpListener ----

TcpListener::TcpListener(Stack& stack) : stack_(&stack), id_(stack.tcp_listener_open(stack.config().tcp)) {}

TcpListener::TcpListener(TcpListener&& other) noexcept
    : stack_(std::exchange(other.stack_, nullptr)), id_(std::exchange(other.id_, 0)) {}

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    close();
    stack_ = std::exchange(other.stack_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

TcpListener::~TcpListener() { close(); }

Stack::TcpListenerState* TcpListener::state() const { return stack_ ? stack_->tcp_listener_state(id_) : nullptr; }

std::error_code TcpListener::listen(Endpoint local, int backlog) {
  Stack::TcpListenerState* listener = state();
  if (!listener) return error(std::errc::bad_file_descriptor);
  if (listener->local_port != 0) return error(std::errc::invalid_argument);
  // The stack's default controller (VIASTACK_UTCP_CC, StackConfig::tcp) is checked here, before any SYN.
  if (!congestion_controller_known(listener->config.congestion_control))
    return error(std::errc::no_such_file_or_directory);
  if (const std::error_code failed = stack_->tcp_bind_port(id_, local, listener->local_port)) return failed;
  listener->backlog = static_cast<std::size_t>(std::max(backlog, 1));
  return {};
}

Result<TcpSocket> TcpListener::accept() {
  Stack::TcpListenerState* listener = state();
  if (!listener) return error(std::errc::bad_file_descriptor);
  if (listener->local_port == 0) return error(std::errc::invalid_argument);
  if (const std::error_code not_ready = stack_->wait_for([this] { return readable(); }, listener->nonblocking,
                                                         listener->accept_timeout))
    return not_ready;
  const Stack::TcpQuad quad = *stack_->tcp_acceptable(*listener);
  listener->queue.erase(std::find(listener->queue.begin(), listener->queue.end(), quad));
  const Stack::SocketId id = stack_->tcp_open(listener->config);
  Stack::TcpSocketState& socket = *stack_->tcp_state(id);
  socket.local_port = quad.local_port;  // shared with the listener, which keeps owning it
  socket.connection = quad;
  return TcpSocket(*stack_, id);
}

void TcpListener::close() {
  if (!stack_) return;
  stack_->tcp_listener_close(id_);
  stack_ = nullptr;
}

bool TcpListener::is_open() const { return state() != nullptr; }

void TcpListener::set_nonblocking(bool nonblocking) {
  if (Stack::TcpListenerState* listener = state()) listener->nonblocking = nonblocking;
}

void TcpListener::set_accept_timeout(std::optional<std::chrono::milliseconds> timeout) {
  if (Stack::TcpListenerState* listener = state()) listener->accept_timeout = timeout;
}

std::error_code TcpListener::set_config(const TcpConfig& config) {
  Stack::TcpListenerState* listener = state();
  if (!listener) return error(std::errc::bad_file_descriptor);
  if (!congestion_controller_known(config.congestion_control)) return error(std::errc::no_such_file_or_directory);
  listener->config = config;
  return {};
}

std::error_code TcpListener::set_congestion_control(std::string_view name) {
  Stack::TcpListenerState* listener = state();
  if (!listener) return error(std::errc::bad_file_descriptor);
  if (listener->local_port != 0) return error(std::errc::invalid_argument);
  if (!congestion_controller_known(name)) return error(std::errc::no_such_file_or_directory);
  listener->config.congestion_control = name;
  return {};
}

bool TcpListener::readable() const {
  const Stack::TcpListenerState* listener = state();
  return listener && listener->local_port != 0 && stack_->tcp_acceptable(*listener).has_value();
}

std::optional<Endpoint> TcpListener::local_endpoint() const {
  const Stack::TcpListenerState* listener = state();
  if (!listener || listener->local_port == 0) return std::nullopt;
  return Endpoint{stack_->address(), listener->local_port};
}

// ---- poll ----

short Stack::tcp_poll_events(const TcpSocket& handle) {
  const TcpSocketState* socket = handle.socket_state();
  if (!socket) return poll_events::err;
  short events = 0;
  if (handle.readable()) events |= poll_events::in;
  if (handle.writable()) events |= poll_events::out;
  const TcpConnection* connection = handle.stack_->tcp_connection(*socket);
  if (connection && connection->urgent_bytes() > 0) events |= poll_events::pri;
  if (connection && connection->error() && !socket->error_reported) events |= poll_events::err;
  if (!connection || over_both_ways(connection->state())) events |= poll_events::hup;
  return events;
}

namespace {

// What a listener or a UDP socket is ready for; a closed one reports an error.
short events_of(const TcpListener* listener) {
  if (!listener) return 0;
  if (!listener->is_open()) return poll_events::err;
  return listener->readable() ? poll_events::in : 0;
}
short events_of(const UdpSocket* socket) {
  if (!socket) return 0;
  if (!socket->is_open()) return poll_events::err;
  return static_cast<short>(poll_events::out | (socket->readable() ? poll_events::in : 0));
}

}  // namespace

Result<std::size_t> poll(Stack& stack, std::span<PollEntry> entries, std::optional<std::chrono::milliseconds> timeout) {
  std::size_t ready = 0;
  const auto look = [&] {
    ready = 0;
    for (PollEntry& entry : entries) {
      const short events = std::visit(
          [&](const auto* socket) -> short {
            if constexpr (std::is_same_v<decltype(socket), const TcpSocket*>)
              return socket ? Stack::tcp_poll_events(*socket) : 0;
            else
              return events_of(socket);
          },
          entry.socket);
      entry.revents = static_cast<short>(events & (entry.events | poll_events::err | poll_events::hup));
      ready += entry.revents != 0;
    }
    return ready > 0;
  };
  // The stack moves only inside calls on it: poll takes in what arrived
  // before it looks, even when something is ready already, or a program that
  // always finds an event (an end of stream) would never let an ACK in.
  Waiter* waiter = stack.waiter();
  if (!waiter) {
    look();
    return ready;
  }
  (void)waiter->wait_until(look, timeout ? std::max(*timeout, std::chrono::milliseconds(0)) : timeout);
  return ready;
}

}  // namespace utcp
