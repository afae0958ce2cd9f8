// TCP sockets on a Stack, with the BSD calls' meanings and errno values:
// TcpSocket (connect, send, receive, shutdown, close) and TcpListener
// (listen, accept), and poll() over many sockets of either protocol.
//
//   utcp::TcpListener listener(stack);
//   listener.listen({{}, 5001});
//   utcp::Result<utcp::TcpSocket> peer = listener.accept();   // blocks, polling the stack
//   peer->send(bytes);
//
// A blocking call drives the stack through its Waiter until it can go on;
// without a Waiter every call behaves as non-blocking.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <variant>

#include "utcp/result.hpp"
#include "utcp/stack.hpp"
#include "utcp/tcp_connection.hpp"

namespace utcp {

class UdpSocket;

enum class Shutdown { read, write, both };

class TcpSocket {
 public:
  // An unconnected socket with the stack's default TcpConfig.
  explicit TcpSocket(Stack& stack);
  TcpSocket(TcpSocket&& other) noexcept;
  TcpSocket& operator=(TcpSocket&& other) noexcept;
  // close(): the connection goes on closing inside the stack.
  ~TcpSocket();

  // Port 0: an ephemeral port. EINVAL if bound or connected, EADDRINUSE,
  // EADDRNOTAVAIL.
  std::error_code bind(Endpoint local);
  // Opens the connection (binding an ephemeral port first if unbound).
  // Blocking: returns once established, or ECONNREFUSED, ETIMEDOUT,
  // ENETUNREACH, EHOSTUNREACH. Non-blocking: EINPROGRESS, then poll for
  // writable and read the outcome from take_error(). EISCONN, EALREADY.
  std::error_code connect(Endpoint remote);

  // Blocking: returns once all of data is queued (or an error, or the send
  // timeout with what was queued so far; EAGAIN if nothing was). Non-blocking:
  // what fits, EAGAIN if nothing does. EPIPE after shutdown(write), ENOTCONN
  // before connect, the connection's error after a reset or timeout.
  Result<std::size_t> send(std::span<const std::uint8_t> data);
  // Blocking: waits for at least one byte. 0 at the end of the stream.
  // EAGAIN (non-blocking, or the receive timeout), ENOTCONN, ECONNRESET, ...
  Result<std::size_t> receive(std::span<std::uint8_t> buffer);
  // read: later receives return 0 (received data is discarded); write: FIN
  // after the queued data. ENOTCONN if not connected.
  std::error_code shutdown(Shutdown how);
  // Releases the socket; the connection finishes closing in the stack (FIN,
  // TIME-WAIT), or is reset if received data was left unread. Later calls
  // fail with EBADF.
  void close();
  // Sends a RST and releases the socket (SO_LINGER with a zero timeout).
  void abort();

  bool is_open() const;
  void set_nonblocking(bool nonblocking);
  void set_nodelay(bool nodelay);
  void set_keepalive(bool keepalive);
  // SO_SNDBUF and SO_RCVBUF for the connection connect() opens (the receive
  // buffer is also the largest window offered). EISCONN once connecting or
  // connected, EINVAL for 0.
  std::error_code set_buffer_sizes(std::size_t send, std::size_t receive);
  // The congestion controller by its registered name (TCP_CONGESTION), before
  // connect: ENOENT for a name no controller has (the socket keeps its
  // own), EISCONN once connecting, EBADF once closed.
  std::error_code set_congestion_control(std::string_view name);
  // Reports cwnd, ssthresh and the phase of the connection (before connect:
  // of the connection to come), as TcpConnection::set_congestion_trace.
  void set_congestion_trace(CongestionTrace trace);
  void set_receive_timeout(std::optional<std::chrono::milliseconds> timeout);
  void set_send_timeout(std::optional<std::chrono::milliseconds> timeout);
  // SO_ERROR: the pending error (a failed non-blocking connect, a reset),
  // cleared by reading it.
  std::error_code take_error();

  bool readable() const;  // receive would not block
  bool writable() const;  // send would take something (or fail at once)
  std::optional<Endpoint> local_endpoint() const;
  std::optional<Endpoint> remote_endpoint() const;
  TcpState state() const;
  std::optional<TcpInfo> info() const;
  std::optional<TcpCounters> counters() const;

 private:
  friend class TcpListener;
  friend class Stack;
  TcpSocket(Stack& stack, std::uint32_t id) : stack_(&stack), id_(id) {}
  Stack::TcpSocketState* socket_state() const;

  Stack* stack_;
  std::uint32_t id_;
};

class TcpListener {
 public:
  explicit TcpListener(Stack& stack);
  TcpListener(TcpListener&& other) noexcept;
  TcpListener& operator=(TcpListener&& other) noexcept;
  ~TcpListener();

  // Binds and listens: SYNs to the port become connections, up to `backlog`
  // of them waiting (established or not) for accept; SYNs beyond it are
  // dropped (the peer retries). EADDRINUSE, EADDRNOTAVAIL, EINVAL if already
  // listening. Port 0: an ephemeral port (see local_endpoint()).
  std::error_code listen(Endpoint local, int backlog = 128);
  // The next established connection. Blocking unless set otherwise (EAGAIN
  // then, or on the accept timeout).
  Result<TcpSocket> accept();
  // Stops listening: connections not yet accepted are reset.
  void close();

  bool is_open() const;
  void set_nonblocking(bool nonblocking);
  void set_accept_timeout(std::optional<std::chrono::milliseconds> timeout);
  // Defaults for the connections it accepts. ENOENT (and nothing changed)
  // if config.congestion_control names no controller.
  std::error_code set_config(const TcpConfig& config);
  // The congestion controller of the connections it accepts, by name:
  // ENOENT for a name no controller has, EINVAL once listening.
  std::error_code set_congestion_control(std::string_view name);
  bool readable() const;  // accept would not block
  std::optional<Endpoint> local_endpoint() const;

 private:
  Stack::TcpListenerState* state() const;

  Stack* stack_;
  std::uint32_t id_;
};

// poll(2) over sockets of one stack.
namespace poll_events {
inline constexpr short in = 0x1;    // readable / acceptable
inline constexpr short pri = 0x2;   // urgent data to read (TcpInfo::urgent_bytes)
inline constexpr short out = 0x4;   // writable (a connect finished)
inline constexpr short err = 0x8;   // an error is pending (always reported)
inline constexpr short hup = 0x10;  // the connection is over both ways (always reported)
}  // namespace poll_events

struct PollEntry {
  std::variant<TcpSocket*, TcpListener*, UdpSocket*> socket;
  short events = 0;
  short revents = 0;  // set by poll
};

// Drives the stack once through its Waiter (taking in what arrived), then
// fills each entry's revents and returns how many entries have any; blocks,
// driving the stack, until one does or the timeout passes (0: one pass;
// none: forever). Without a Waiter it only looks.
Result<std::size_t> poll(Stack& stack, std::span<PollEntry> entries, std::optional<std::chrono::milliseconds> timeout);

}  // namespace utcp
