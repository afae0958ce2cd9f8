// What idle and TIME-WAIT connections commit, measured by counting the bytes
// of every live allocation the program makes through operator new (this
// binary replaces it): the send and receive buffers are vectors, and a
// vector's bytes are written (committed) when it is sized. Issue 23: each
// connection committed 1 MiB per direction at its first byte and kept it
// through TIME-WAIT (400 idle connections: 413 MB).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <vector>

#include "utcp/link.hpp"
#include "utcp/stack.hpp"
#include "utcp/tcp_socket.hpp"

namespace {

std::size_t live_bytes = 0;

// Each block carries its size in front, so that delete can subtract it.
constexpr std::size_t prefix = alignof(std::max_align_t);

void* counted_new(std::size_t size) {
  void* block = std::malloc(size + prefix);
  if (!block) throw std::bad_alloc();
  *static_cast<std::size_t*>(block) = size;
  live_bytes += size;
  return static_cast<char*>(block) + prefix;
}

void counted_delete(void* pointer) noexcept {
  if (!pointer) return;
  void* block = static_cast<char*>(pointer) - prefix;
  live_bytes -= *static_cast<std::size_t*>(block);
  std::free(block);
}

}  // namespace

void* operator new(std::size_t size) { return counted_new(size); }
void* operator new[](std::size_t size) { return counted_new(size); }
void operator delete(void* pointer) noexcept { counted_delete(pointer); }
void operator delete[](void* pointer) noexcept { counted_delete(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { counted_delete(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { counted_delete(pointer); }

namespace {

using namespace std::chrono_literals;
using utcp::wire::Ipv4Address;

constexpr Ipv4Address client_address = Ipv4Address::from_octets(10, 0, 0, 1);
constexpr Ipv4Address server_address = Ipv4Address::from_octets(10, 0, 0, 2);
constexpr std::size_t connections = 400;

utcp::StackConfig config_for(Ipv4Address address) {
  utcp::StackConfig config;
  config.address = address;
  config.tcp_secret = 3;
  return config;  // 1 MiB send and receive buffers, the defaults
}

class TwoStacks {
 public:
  TwoStacks() {
    auto [client_end, server_end] = utcp::MemoryLink::make_pair();
    client_link_ = std::move(client_end);
    server_link_ = std::move(server_end);
    client_.emplace(*client_link_, config_for(client_address));
    server_.emplace(*server_link_, config_for(server_address));
  }
  utcp::Stack& client() { return *client_; }
  utcp::Stack& server() { return *server_; }

  // Both stacks run until nothing moves, then time moves on by `step`.
  void settle(std::chrono::milliseconds step = 0ms) {
    while (client_->poll(now_) | server_->poll(now_)) {
    }
    now_ += step;
    while (client_->poll(now_) | server_->poll(now_)) {
    }
  }

 private:
  std::unique_ptr<utcp::MemoryLink> client_link_, server_link_;
  std::optional<utcp::Stack> client_, server_;
  utcp::Instant now_ = utcp::Instant{} + std::chrono::hours(1);
};

TEST(TcpMemory, IdleConnectionsCommitLittleAndTimeWaitHoldsOnlyTheState) {
  TwoStacks stacks;
  utcp::TcpListener listener(stacks.server());
  ASSERT_FALSE(listener.listen({{}, 80}, 1024));
  listener.set_nonblocking(true);
  std::vector<utcp::TcpSocket> clients, servers;
  clients.reserve(connections);
  servers.reserve(connections);
  const std::uint8_t request = 'q', reply = 'r';
  std::uint8_t buffer[16];
  const std::size_t before = live_bytes;
  for (std::size_t i = 0; i < connections; ++i) {
    clients.emplace_back(stacks.client());
    utcp::TcpSocket& client = clients.back();
    client.set_nonblocking(true);
    (void)client.connect({server_address, 80});
    stacks.settle();
    auto accepted = listener.accept();
    ASSERT_TRUE(accepted);
    servers.push_back(std::move(*accepted));
    utcp::TcpSocket& server = servers.back();
    server.set_nonblocking(true);
    // One byte each way: every buffer has been used once.
    ASSERT_EQ(client.send({&request, 1}).value(), 1u);
    stacks.settle();
    ASSERT_EQ(server.receive(buffer).value(), 1u);
    ASSERT_EQ(server.send({&reply, 1}).value(), 1u);
    stacks.settle();
    ASSERT_EQ(client.receive(buffer).value(), 1u);
    // Both ends of one connection, with the listener's share: a few KiB,
    // not megabytes (stop at the first connection that is far off).
    ASSERT_LT((live_bytes - before) / (i + 1), 16u << 10) << "after " << i + 1 << " connections";
  }
  stacks.settle(1s);  // delayed ACKs go out; the connections are idle
  const std::size_t idle = (live_bytes - before) / connections;
  std::printf("idle: %zu bytes per connection, both ends\n", idle);
  EXPECT_LT(idle, 16u << 10);

  // The client closes first and keeps TIME-WAIT (60 s); the server's side
  // is gone once its FIN is acknowledged.
  for (utcp::TcpSocket& client : clients) client.close();
  stacks.settle();
  for (utcp::TcpSocket& server : servers) server.close();
  stacks.settle(1s);
  clients.clear();
  servers.clear();
  const std::size_t time_wait = (live_bytes - before) / connections;
  std::printf("TIME-WAIT: %zu bytes per connection\n", time_wait);
  EXPECT_LT(time_wait, 2048u);
  // TIME-WAIT over: nothing is left but the hash tables' bucket arrays.
  stacks.settle(61s);
  EXPECT_LT((live_bytes - before) / connections, 128u);
}

// Buffers grow to what a burst needs and shrink once the connection is idle
// (issue 23's "shrink when idle"): a connection that moved 4 MiB each way
// keeps its grown buffers (a megabyte and more) while it is busy, gives them
// back within seconds of going quiet, and grows them again for the next burst.
TEST(TcpMemory, BuffersGrownByABurstShrinkOnceIdle) {
  TwoStacks stacks;
  utcp::TcpListener listener(stacks.server());
  ASSERT_FALSE(listener.listen({{}, 80}));
  listener.set_nonblocking(true);
  utcp::TcpSocket client(stacks.client());
  client.set_nonblocking(true);
  (void)client.connect({server_address, 80});
  stacks.settle();
  auto accepted = listener.accept();
  ASSERT_TRUE(accepted);
  utcp::TcpSocket server = std::move(*accepted);
  server.set_nonblocking(true);
  const std::vector<std::uint8_t> data(4u << 20, 0x5a);
  std::vector<std::uint8_t> buffer(64u << 10);
  // `from` writes 4 MiB, `to` reads only when the writer is stopped: both buffers fill.
  const auto burst = [&](utcp::TcpSocket& from, utcp::TcpSocket& to) {
    std::size_t sent = 0, received = 0;
    while (received < data.size()) {
      const auto n = sent < data.size() ? from.send(std::span(data).subspan(sent)) : utcp::Result<std::size_t>(0);
      if (n) sent += *n;
      stacks.settle(10ms);  // delayed ACKs and the like go out
      if (!n || *n == 0)
        while (const auto got = to.receive(buffer)) received += *got;
    }
  };
  const std::size_t before = live_bytes;
  burst(client, server);
  burst(server, client);
  const std::size_t busy = live_bytes - before;
  std::printf("after the bursts: %zu bytes, both ends\n", busy);
  EXPECT_GT(busy, 1u << 20);
  stacks.settle(100ms);  // the last (delayed) ACKs
  stacks.settle(2s);     // quiet
  const std::size_t idle = live_bytes - before;
  std::printf("idle: %zu bytes, both ends\n", idle);
  EXPECT_LT(idle, 64u << 10);
  burst(client, server);
  EXPECT_GT(live_bytes - before, 1u << 20);
}

}  // namespace
