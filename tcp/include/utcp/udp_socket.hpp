// UDP sockets (RFC 768) on a Stack, with the BSD calls' meanings and errno
// values: bind, connect, send_to, receive_from, close.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <system_error>

#include "utcp/result.hpp"
#include "utcp/stack.hpp"

namespace utcp {

// The largest UDP payload: 65535 less the IPv4 and UDP headers.
inline constexpr std::size_t udp_max_payload = 65507;

struct Received {
  std::size_t size = 0;     // bytes copied into the buffer
  Endpoint from;
  bool truncated = false;   // the datagram was longer than the buffer; the rest is gone (as recvfrom)
  std::size_t datagram_size = 0;  // the whole datagram's length (what recv's MSG_TRUNC returns)
};

class UdpSocket {
 public:
  // Opens an unbound socket, blocking unless set otherwise.
  explicit UdpSocket(Stack& stack);
  UdpSocket(UdpSocket&& other) noexcept;
  UdpSocket& operator=(UdpSocket&& other) noexcept;
  ~UdpSocket() { close(); }

  // Port 0 picks a free ephemeral port (49152-65535); the address must be
  // 0.0.0.0 or the stack's. EINVAL if bound already, EADDRINUSE,
  // EADDRNOTAVAIL.
  std::error_code bind(Endpoint local);
  // Sets the peer: send() goes there, only its datagrams are received, and
  // an ICMP error about a datagram to it fails the next call (ECONNREFUSED for
  // port unreachable). Binds an ephemeral port first if unbound. EINVAL for
  // port 0, ENETUNREACH outside the link's subnet, EHOSTUNREACH for no such
  // neighbour.
  std::error_code connect(Endpoint remote);

  // Returns the bytes sent. EDESTADDRREQ (send, unconnected), EMSGSIZE (over
  // udp_max_payload), ENETUNREACH, EHOSTUNREACH, ENOBUFS (the link refused a
  // packet), or an error an ICMP message left on a connected socket.
  Result<std::size_t> send(std::span<const std::uint8_t> data);
  Result<std::size_t> send_to(std::span<const std::uint8_t> data, Endpoint to);
  // Takes the oldest datagram. With none: EAGAIN when non-blocking, when the
  // receive timeout passes, or when the stack has no Waiter to block with.
  Result<Received> receive_from(std::span<std::uint8_t> buffer);

  // Frees the port and the queue; later calls fail with EBADF.
  void close();
  bool is_open() const { return stack_ != nullptr; }

  void set_nonblocking(bool nonblocking);
  // SO_REUSEADDR, before bind: sockets that all allow it share a port; a
  // datagram goes to the one connected to its sender, else to the last bound
  // of the unconnected ones (as Linux).
  void set_reuse_address(bool reuse);
  void set_receive_timeout(std::optional<std::chrono::milliseconds> timeout);
  void set_receive_queue_limits(std::size_t datagrams, std::size_t bytes);

  // A datagram waits, or an error does (a call would not block).
  bool readable() const;
  std::optional<Endpoint> local_endpoint() const;
  std::optional<Endpoint> remote_endpoint() const;
  std::size_t queued_datagrams() const;
  // The length of the datagram the next receive takes (FIONREAD's answer), if one waits.
  std::optional<std::size_t> next_datagram_size() const;
  // Datagrams dropped because the receive queue was full.
  std::uint64_t receive_queue_drops() const;

 private:
  Stack::UdpSocketState* state() const;

  Stack* stack_;
  Stack::SocketId id_;
};

}  // namespace utcp
