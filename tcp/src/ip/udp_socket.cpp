#include "utcp/udp_socket.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace utcp {
namespace {

std::error_code error(std::errc code) { return std::make_error_code(code); }

}  // namespace

UdpSocket::UdpSocket(Stack& stack) : stack_(&stack), id_(stack.udp_open()) {}

UdpSocket::UdpSocket(UdpSocket&& other) noexcept
    : stack_(std::exchange(other.stack_, nullptr)), id_(std::exchange(other.id_, 0)) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& other) noexcept {
  if (this != &other) {
    close();
    stack_ = std::exchange(other.stack_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

Stack::UdpSocketState* UdpSocket::state() const { return stack_ ? stack_->udp_state(id_) : nullptr; }

void UdpSocket::close() {
  if (!stack_) return;
  stack_->udp_close(id_);
  stack_ = nullptr;
}

std::error_code UdpSocket::bind(Endpoint local) {
  Stack::UdpSocketState* socket = state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  return stack_->udp_bind(*socket, id_, local);
}

std::error_code UdpSocket::connect(Endpoint remote) {
  Stack::UdpSocketState* socket = state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (remote.port == 0) return error(std::errc::invalid_argument);
  if (const std::error_code unroutable = stack_->route(remote.address)) return unroutable;
  if (socket->local_port == 0)
    if (const std::error_code failed = stack_->udp_bind(*socket, id_, {})) return failed;
  socket->remote = remote;
  socket->pending_error.clear();
  return {};
}

Result<std::size_t> UdpSocket::send(std::span<const std::uint8_t> data) {
  const Stack::UdpSocketState* socket = state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (!socket->remote) return error(std::errc::destination_address_required);
  return send_to(data, *socket->remote);
}

Result<std::size_t> UdpSocket::send_to(std::span<const std::uint8_t> data, Endpoint to) {
  Stack::UdpSocketState* socket = state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (socket->pending_error) return std::exchange(socket->pending_error, {});
  if (to.port == 0) return error(std::errc::invalid_argument);
  if (const std::error_code failed = stack_->udp_send(*socket, id_, data, to)) return failed;
  return data.size();
}

Result<Received> UdpSocket::receive_from(std::span<std::uint8_t> buffer) {
  Stack::UdpSocketState* socket = state();
  if (!socket) return error(std::errc::bad_file_descriptor);
  if (const std::error_code not_ready =
          stack_->wait_for([this] { return readable(); }, socket->nonblocking, socket->receive_timeout))
    return not_ready;
  if (socket->pending_error) return std::exchange(socket->pending_error, {});
  Stack::QueuedDatagram datagram = std::move(socket->queue.front());
  socket->queue.pop_front();
  socket->queued_bytes -= datagram.payload.size();
  Received received;
  received.size = std::min(buffer.size(), datagram.payload.size());
  received.from = datagram.from;
  received.truncated = received.size < datagram.payload.size();
  received.datagram_size = datagram.payload.size();
  if (received.size != 0) std::memcpy(buffer.data(), datagram.payload.data(), received.size);
  return received;
}

void UdpSocket::set_nonblocking(bool nonblocking) {
  if (Stack::UdpSocketState* socket = state()) socket->nonblocking = nonblocking;
}

void UdpSocket::set_reuse_address(bool reuse) {
  if (Stack::UdpSocketState* socket = state()) socket->reuse_address = reuse;
}

void UdpSocket::set_receive_timeout(std::optional<std::chrono::milliseconds> timeout) {
  if (Stack::UdpSocketState* socket = state()) socket->receive_timeout = timeout;
}

void UdpSocket::set_receive_queue_limits(std::size_t datagrams, std::size_t bytes) {
  if (Stack::UdpSocketState* socket = state()) {
    socket->queue_datagrams_limit = datagrams;
    socket->queue_bytes_limit = bytes;
  }
}

bool UdpSocket::readable() const {
  const Stack::UdpSocketState* socket = state();
  return socket && (!socket->queue.empty() || socket->pending_error);
}

std::optional<Endpoint> UdpSocket::local_endpoint() const {
  const Stack::UdpSocketState* socket = state();
  if (!socket || socket->local_port == 0) return std::nullopt;
  return Endpoint{stack_->address(), socket->local_port};
}

std::optional<Endpoint> UdpSocket::remote_endpoint() const {
  const Stack::UdpSocketState* socket = state();
  return socket ? socket->remote : std::nullopt;
}

std::size_t UdpSocket::queued_datagrams() const {
  const Stack::UdpSocketState* socket = state();
  return socket ? socket->queue.size() : 0;
}

std::optional<std::size_t> UdpSocket::next_datagram_size() const {
  const Stack::UdpSocketState* socket = state();
  if (!socket || socket->queue.empty()) return std::nullopt;
  return socket->queue.front().payload.size();
}

std::uint64_t UdpSocket::receive_queue_drops() const {
  const Stack::UdpSocketState* socket = state();
  return socket ? socket->drops : 0;
}

}  // namespace utcp
