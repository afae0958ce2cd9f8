// The stack against the kernel's own ICMP, UDP and TCP, over a TUN device.
//
// Each test runs in a network namespace of its own (unshare(CLONE_NEWNET) on
// the test's thread; the threads it starts inherit it), where it creates the
// device "utcp0", gives the kernel's side 10.9.0.1/24 and the stack
// 10.9.0.2. The kernel's side uses ordinary sockets with timeouts; where both
// sides block (TCP), the kernel's side runs on a thread of its own while the
// test's thread drives the stack. Needs root (CAP_NET_ADMIN and
// CAP_SYS_ADMIN) and /dev/net/tun; skipped with the reason otherwise.
#include "utcp/tun_link.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <linux/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "utcp/tcp_socket.hpp"
#include "utcp/udp_socket.hpp"

namespace utcp {
namespace {

using namespace std::chrono_literals;
using wire::Ipv4Address;
using Bytes = std::vector<std::uint8_t>;

constexpr Ipv4Address kernel_address = Ipv4Address::from_octets(10, 9, 0, 1);
constexpr Ipv4Address utcp_address = Ipv4Address::from_octets(10, 9, 0, 2);
// Every blocking call on either side gives up after this, so that a test
// fails instead of hanging.
constexpr auto call_timeout = 20s;

std::error_code errc(std::errc code) { return std::make_error_code(code); }

// Bytes that differ with the seed and with the position at every scale, so
// that a lost, repeated or misplaced piece of a stream shows.
Bytes pattern(std::size_t size, std::uint32_t seed) {
  Bytes bytes(size);
  for (std::size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<std::uint8_t>(i * 7 + seed * 13 + (i >> 8) + (i >> 16) * 3);
  return bytes;
}

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

// A kernel socket with send and receive timeouts (which bound connect and
// accept too), closed on destruction.
class KernelSocket {
 public:
  KernelSocket(int type, int protocol) : fd_(::socket(AF_INET, type | SOCK_CLOEXEC, protocol)) {
    if (fd_ < 0) throw_errno("kernel socket");
    const timeval timeout{std::chrono::duration_cast<std::chrono::seconds>(call_timeout).count(), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  // Takes over a descriptor accept(2) gave.
  static KernelSocket adopt(int fd) { return KernelSocket(fd); }
  KernelSocket(KernelSocket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  KernelSocket& operator=(KernelSocket&&) = delete;
  ~KernelSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  // Closes now, as close(2) (a RST with SO_LINGER {1, 0}).
  void close() { ::close(std::exchange(fd_, -1)); }

 private:
  explicit KernelSocket(int fd) : fd_(fd) {}
  int fd_;
};

sockaddr_in socket_address(Endpoint endpoint) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(endpoint.port);
  address.sin_addr.s_addr = htonl(endpoint.address.value);
  return address;
}

void kernel_bind(const KernelSocket& socket, Endpoint local) {
  const sockaddr_in address = socket_address(local);
  if (::bind(socket.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) throw_errno("kernel bind");
}

// connect(2); 0 or the errno.
int kernel_connect(const KernelSocket& socket, Endpoint remote) {
  const sockaddr_in address = socket_address(remote);
  return ::connect(socket.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0 ? errno : 0;
}

void kernel_send_all(const KernelSocket& socket, std::span<const std::uint8_t> data) {
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t sent = ::send(socket.fd(), data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (sent < 0) throw_errno("kernel send");
    done += static_cast<std::size_t>(sent);
  }
}

// Receives exactly data.size() bytes; throws at an early end or error.
void kernel_receive_exact(const KernelSocket& socket, std::span<std::uint8_t> data) {
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t got = ::recv(socket.fd(), data.data() + done, data.size() - done, 0);
    if (got < 0) throw_errno("kernel recv");
    if (got == 0) throw std::runtime_error("kernel recv: the stream ended early");
    done += static_cast<std::size_t>(got);
  }
}

// recv(2) of at most one byte: 1, 0 at the end of the stream, or -errno.
int kernel_receive_one(const KernelSocket& socket) {
  std::uint8_t byte;
  const ssize_t got = ::recv(socket.fd(), &byte, 1, 0);
  return got < 0 ? -errno : static_cast<int>(got);
}

void kernel_expect(bool holds, const char* what) {
  if (!holds) throw std::runtime_error(what);
}

// The sizes that cross each TCP connection, each way, in order.
constexpr std::size_t stream_sizes[] = {1, 1024, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024};

// The kernel's half of exchange(): each size goes from the kernel to utcp
// and then back, checked where it lands.
void kernel_exchange(const KernelSocket& socket) {
  for (std::uint32_t round = 0; round < std::size(stream_sizes); ++round) {
    kernel_send_all(socket, pattern(stream_sizes[round], 2 * round));
    Bytes received(stream_sizes[round]);
    kernel_receive_exact(socket, received);
    kernel_expect(received == pattern(stream_sizes[round], 2 * round + 1), "the kernel received other bytes than utcp sent");
  }
}

class TunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to create a network namespace and a TUN device";
    if (::access("/dev/net/tun", F_OK) != 0) GTEST_SKIP() << "/dev/net/tun is missing (no tun module)";
    if (::unshare(CLONE_NEWNET) != 0)
      GTEST_SKIP() << "cannot create a network namespace: " << std::strerror(errno);
    TunHostConfig config;
    config.link.name = "utcp0";
    config.address = utcp_address;
    config.kernel_address = kernel_address;
    host_ = std::make_unique<TunHost>(config);
  }

  Stack& stack() { return host_->stack(); }

  // Drives the stack until the kernel's side (started with std::async) is
  // done, then fails the test with the kernel side's error, if any.
  void finish(std::future<void>& kernel_side) {
    ASSERT_TRUE(host_->wait_until([&] { return kernel_side.wait_for(0s) == std::future_status::ready; }, 2 * call_timeout))
        << "the kernel's side did not finish";
    try {
      kernel_side.get();
    } catch (const std::exception& error) {
      FAIL() << "the kernel's side: " << error.what();
    }
  }

  // Drives the stack until the kernel socket is readable (or has an error).
  void wait_for_kernel(const KernelSocket& socket) {
    ASSERT_TRUE(host_->wait_until(
        [&] {
          pollfd entry{socket.fd(), POLLIN, 0};
          return ::poll(&entry, 1, 0) > 0;
        },
        call_timeout))
        << "nothing came to the kernel's socket";
  }

  void set_timeouts(TcpSocket& socket) {
    socket.set_receive_timeout(call_timeout);
    socket.set_send_timeout(call_timeout);
  }

  void send_all(TcpSocket& socket, std::span<const std::uint8_t> data) {
    for (std::size_t done = 0; done < data.size();) {
      const Result<std::size_t> sent = socket.send(data.subspan(done));
      ASSERT_TRUE(sent) << "utcp send: " << sent.error().message();
      done += *sent;
    }
  }

  void receive_exact(TcpSocket& socket, std::span<std::uint8_t> data) {
    for (std::size_t done = 0; done < data.size();) {
      const Result<std::size_t> got = socket.receive(data.subspan(done));
      ASSERT_TRUE(got) << "utcp receive after " << done << " of " << data.size() << " bytes: " << got.error().message();
      ASSERT_GT(*got, 0u) << "utcp receive: the stream ended after " << done << " of " << data.size() << " bytes";
      done += *got;
    }
  }

  // utcp's half of kernel_exchange().
  void exchange(TcpSocket& socket) {
    for (std::uint32_t round = 0; round < std::size(stream_sizes); ++round) {
      SCOPED_TRACE(testing::Message() << stream_sizes[round] << " bytes");
      Bytes received(stream_sizes[round]);
      ASSERT_NO_FATAL_FAILURE(receive_exact(socket, received));
      ASSERT_TRUE(received == pattern(stream_sizes[round], 2 * round)) << "utcp received other bytes than the kernel sent";
      ASSERT_NO_FATAL_FAILURE(send_all(socket, pattern(stream_sizes[round], 2 * round + 1)));
    }
  }

  // The stack's side of a clean close: no RST went out for it.
  void expect_no_resets() {
    EXPECT_EQ(stack().counters().tcp.resets_out, 0u);
    EXPECT_EQ(host_->link().counters().send_errors, 0u);
  }

  std::unique_ptr<TunHost> host_;
};

TEST_F(TunTest, DeviceHasTheNameAndMtu) {
  EXPECT_EQ(host_->link().name(), "utcp0");
  EXPECT_EQ(host_->link().mtu(), 1500u);
  // What the kernel says (sysfs would show the namespace it was mounted in).
  KernelSocket socket(SOCK_DGRAM, 0);
  ifreq request{};
  std::strcpy(request.ifr_name, "utcp0");
  ASSERT_EQ(::ioctl(socket.fd(), SIOCGIFMTU, &request), 0) << std::strerror(errno);
  EXPECT_EQ(request.ifr_mtu, 1500);
}

// A TunLink made from `config` is refused as an invalid argument whose
// message names `cause`.
void expect_refused_naming(const TunLinkConfig& config, const std::string& cause) {
  try {
    TunLink link(config);
    FAIL() << "a configuration with a bad " << cause << " was taken";
  } catch (const std::system_error& error) {
    EXPECT_EQ(error.code(), errc(std::errc::invalid_argument));
    EXPECT_NE(std::string(error.what()).find(cause), std::string::npos) << error.what();
  }
}

TEST_F(TunTest, BadConfigurationsAreRefusedWithTheCause) {
  TunLinkConfig long_name;
  long_name.name = "a-name-far-too-long";
  EXPECT_THROW(TunLink{long_name}, std::system_error);
  TunLinkConfig small_mtu;
  small_mtu.mtu = 40;
  expect_refused_naming(small_mtu, "MTU");
  TunLinkConfig no_queue;
  no_queue.queue_length = 0;
  expect_refused_naming(no_queue, "queue length");
}

// The kernel's ping (an ICMP datagram socket: the kernel builds the request
// and checks the reply's checksum) gets utcp's echo replies.
TEST_F(TunTest, KernelPingGetsRepliesFromUtcp) {
  std::ofstream("/proc/sys/net/ipv4/ping_group_range") << "0 0";  // root may open ping sockets
  KernelSocket ping(SOCK_DGRAM, IPPROTO_ICMP);
  ASSERT_EQ(kernel_connect(ping, {utcp_address, 0}), 0) << std::strerror(errno);
  for (std::uint16_t sequence = 1; sequence <= 3; ++sequence) {
    Bytes request = pattern(56 + sequence * 1000, sequence);  // the last two fragmented
    request[0] = 8;                                           // echo request; the kernel fills in the rest
    request[1] = 0;
    request[6] = 0;
    request[7] = static_cast<std::uint8_t>(sequence);
    ASSERT_EQ(::send(ping.fd(), request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    ASSERT_NO_FATAL_FAILURE(wait_for_kernel(ping));
    Bytes reply(request.size() + 100);
    ASSERT_EQ(::recv(ping.fd(), reply.data(), reply.size(), 0), static_cast<ssize_t>(request.size()));
    EXPECT_EQ(reply[0], 0) << "not an echo reply";
    EXPECT_EQ(reply[7], sequence);
    EXPECT_TRUE(std::equal(request.begin() + 8, request.end(), reply.begin() + 8)) << "the data came back changed";
  }
  EXPECT_EQ(stack().counters().icmp.echo_requests_in, 3u);
}

TEST_F(TunTest, UtcpPingGetsRepliesFromTheKernel) {
  const Bytes data = pattern(3000, 5);  // fragmented both ways at MTU 1500
  ASSERT_FALSE(stack().send_echo_request(kernel_address, 77, 1, data));
  std::optional<EchoReply> reply;
  ASSERT_TRUE(host_->wait_until([&] { return (reply = stack().take_echo_reply()).has_value(); }, call_timeout));
  EXPECT_EQ(reply->from, kernel_address);
  EXPECT_EQ(reply->identifier, 77);
  EXPECT_EQ(reply->sequence, 1);
  EXPECT_EQ(reply->data, data);
}

// Datagrams from 1 byte to the largest, most of them fragmented, both ways.
constexpr std::size_t datagram_sizes[] = {1, 1472, 1473, 8000, udp_max_payload};

TEST_F(TunTest, UdpFromTheKernelToUtcp) {
  UdpSocket socket(stack());
  ASSERT_FALSE(socket.bind({utcp_address, 5000}));
  socket.set_receive_timeout(call_timeout);
  KernelSocket kernel(SOCK_DGRAM, 0);
  kernel_bind(kernel, {kernel_address, 5001});
  for (std::size_t size : datagram_sizes) {
    const Bytes sent = pattern(size, 1);
    const sockaddr_in to = socket_address({utcp_address, 5000});
    ASSERT_EQ(::sendto(kernel.fd(), sent.data(), sent.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(size));
    Bytes received(udp_max_payload);
    const Result<Received> got = socket.receive_from(received);
    ASSERT_TRUE(got) << size << " bytes: " << got.error().message();
    EXPECT_EQ(got->from, (Endpoint{kernel_address, 5001}));
    received.resize(got->size);
    EXPECT_EQ(received, sent) << size << " bytes";
  }
  EXPECT_EQ(stack().counters().udp.bad_checksum, 0u);
}

// What the kernel sends while utcp is busy waits in the device's queue;
// the kernel dropped past TUN's default 500 packets (2.2 % of a 200 MB
// transfer to utcp under the impairment benchmark, on top of its 1 % loss),
// where a kernel receiver has its socket buffer's megabytes.
TEST_F(TunTest, ABurstWhileUtcpIsBusyWaitsForIt) {
  UdpSocket socket(stack());
  ASSERT_FALSE(socket.bind({utcp_address, 5000}));
  socket.set_nonblocking(true);
  KernelSocket kernel(SOCK_DGRAM, 0);
  kernel_bind(kernel, {kernel_address, 5001});
  constexpr std::size_t burst = 3000;
  const Bytes sent = pattern(64, 1);
  const sockaddr_in to = socket_address({utcp_address, 5000});
  for (std::size_t i = 0; i < burst; ++i)
    ASSERT_EQ(::sendto(kernel.fd(), sent.data(), sent.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to),
                       sizeof to),
              static_cast<ssize_t>(sent.size()));
  std::size_t received = 0;
  Bytes buffer(udp_max_payload);
  while (host_->poll()) {
    while (socket.receive_from(buffer)) ++received;
  }
  EXPECT_EQ(received, burst);
}

TEST_F(TunTest, UdpFromUtcpToTheKernel) {
  UdpSocket socket(stack());
  ASSERT_FALSE(socket.bind({utcp_address, 5000}));
  KernelSocket kernel(SOCK_DGRAM, 0);
  kernel_bind(kernel, {kernel_address, 5001});
  for (std::size_t size : datagram_sizes) {
    const Bytes sent = pattern(size, 2);
    const Result<std::size_t> done = socket.send_to(sent, {kernel_address, 5001});
    ASSERT_TRUE(done) << size << " bytes: " << done.error().message();
    Bytes received(udp_max_payload + 1);
    sockaddr_in from{};
    socklen_t from_length = sizeof from;
    const ssize_t got =
        ::recvfrom(kernel.fd(), received.data(), received.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_length);
    ASSERT_EQ(got, static_cast<ssize_t>(size)) << std::strerror(errno);
    EXPECT_EQ(ntohl(from.sin_addr.s_addr), utcp_address.value);
    EXPECT_EQ(ntohs(from.sin_port), 5000);
    received.resize(size);
    EXPECT_EQ(received, sent) << size << " bytes";
  }
}

// Port unreachable both ways: each side's connected socket hears of the
// other's ICMP error as ECONNREFUSED.
TEST_F(TunTest, UdpToAClosedPortIsRefusedBothWays) {
  KernelSocket kernel(SOCK_DGRAM, 0);
  ASSERT_EQ(kernel_connect(kernel, {utcp_address, 9}), 0);
  ASSERT_EQ(::send(kernel.fd(), "x", 1, 0), 1);
  ASSERT_NO_FATAL_FAILURE(wait_for_kernel(kernel));
  char byte;
  EXPECT_EQ(::recv(kernel.fd(), &byte, 1, 0), -1);
  EXPECT_EQ(errno, ECONNREFUSED);

  UdpSocket socket(stack());
  socket.set_receive_timeout(call_timeout);
  ASSERT_FALSE(socket.connect({kernel_address, 9}));
  ASSERT_TRUE(socket.send(Bytes{1}));
  Bytes buffer(16);
  const Result<Received> got = socket.receive_from(buffer);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), errc(std::errc::connection_refused));
}

// A kernel client connects to a utcp listener; every size crosses both ways;
// the kernel closes first (utcp reads the end, then closes, and the kernel
// reads the end).
TEST_F(TunTest, TcpKernelClientToUtcpServer) {
  TcpListener listener(stack());
  ASSERT_FALSE(listener.listen({utcp_address, 5001}));
  listener.set_accept_timeout(call_timeout);
  std::future<void> kernel_side = std::async(std::launch::async, [] {
    KernelSocket kernel(SOCK_STREAM, 0);
    if (const int error = kernel_connect(kernel, {utcp_address, 5001}))
      throw std::system_error(error, std::generic_category(), "kernel connect");
    kernel_exchange(kernel);
    if (::shutdown(kernel.fd(), SHUT_WR) < 0) throw_errno("kernel shutdown");
    kernel_expect(kernel_receive_one(kernel) == 0, "the kernel did not read the end of utcp's stream");
  });
  Result<TcpSocket> accepted = listener.accept();
  ASSERT_TRUE(accepted) << "accept: " << accepted.error().message();
  TcpSocket& socket = *accepted;
  set_timeouts(socket);
  EXPECT_EQ(socket.remote_endpoint()->address, kernel_address);
  // Linux offers window scaling and timestamps and an MSS of 1460 at MTU 1500.
  const std::optional<TcpInfo> info = socket.info();
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->timestamps);
  EXPECT_GT(info->send_window_scale, 0);
  EXPECT_GE(info->max_segment_size, 1448);
  EXPECT_LE(info->max_segment_size, 1460);
  ASSERT_NO_FATAL_FAILURE(exchange(socket));
  Bytes end(1);
  const Result<std::size_t> got = socket.receive(end);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(*got, 0u) << "utcp did not read the end of the kernel's stream";
  EXPECT_EQ(socket.state(), TcpState::close_wait);
  socket.close();
  ASSERT_NO_FATAL_FAILURE(finish(kernel_side));
  expect_no_resets();
}

// Urgent data as Linux sends it (send with MSG_OOB: URG, and the urgent
// pointer past the urgent byte): utcp reports it (poll's pri,
// TcpInfo::urgent_bytes counting the bytes up to the pointer) and keeps the
// byte in the stream, in order (as Linux's SO_OOBINLINE).
TEST_F(TunTest, UrgentDataFromTheKernelIsReported) {
  TcpListener listener(stack());
  ASSERT_FALSE(listener.listen({utcp_address, 5003}));
  listener.set_accept_timeout(call_timeout);
  std::future<void> kernel_side = std::async(std::launch::async, [] {
    KernelSocket kernel(SOCK_STREAM, 0);
    if (const int error = kernel_connect(kernel, {utcp_address, 5003}))
      throw std::system_error(error, std::generic_category(), "kernel connect");
    const Bytes normal = {'a', 'b', 'c'};
    kernel_send_all(kernel, normal);
    const std::uint8_t urgent = '!';
    if (::send(kernel.fd(), &urgent, 1, MSG_OOB | MSG_NOSIGNAL) != 1) throw_errno("kernel send MSG_OOB");
    kernel_expect(kernel_receive_one(kernel) == 0, "the kernel did not read the end of utcp's stream");
  });
  Result<TcpSocket> accepted = listener.accept();
  ASSERT_TRUE(accepted) << "accept: " << accepted.error().message();
  TcpSocket& socket = *accepted;
  set_timeouts(socket);
  PollEntry entries[] = {{&socket, poll_events::pri}};
  const Result<std::size_t> ready = utcp::poll(stack(), entries, call_timeout);
  ASSERT_TRUE(ready && *ready == 1u) << "no urgent data reported";
  EXPECT_EQ(entries[0].revents, poll_events::pri);
  EXPECT_EQ(socket.info()->urgent_bytes, 4u);
  Bytes received;
  Bytes buffer(16);
  while (received.size() < 4) {
    const Result<std::size_t> got = socket.receive(buffer);
    ASSERT_TRUE(got && *got > 0) << "utcp receive";
    received.insert(received.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(*got));
  }
  EXPECT_EQ(received, (Bytes{'a', 'b', 'c', '!'}));
  EXPECT_EQ(socket.info()->urgent_bytes, 0u);
  socket.close();
  ASSERT_NO_FATAL_FAILURE(finish(kernel_side));
  expect_no_resets();
}

// utcp connects to a kernel listener; every size crosses both ways; utcp
// closes first and ends in TIME-WAIT.
TEST_F(TunTest, TcpUtcpClientToKernelServer) {
  KernelSocket listener(SOCK_STREAM, 0);
  kernel_bind(listener, {kernel_address, 5002});
  ASSERT_EQ(::listen(listener.fd(), 1), 0);
  std::future<void> kernel_side = std::async(std::launch::async, [&listener] {
    const int fd = ::accept(listener.fd(), nullptr, nullptr);
    if (fd < 0) throw_errno("kernel accept");
    KernelSocket kernel = KernelSocket::adopt(fd);
    kernel_exchange(kernel);
    kernel_expect(kernel_receive_one(kernel) == 0, "the kernel did not read the end of utcp's stream");
    // close(2) by the destructor: the kernel's FIN.
  });
  TcpSocket socket(stack());
  set_timeouts(socket);
  const std::error_code connected = socket.connect({kernel_address, 5002});
  ASSERT_FALSE(connected) << "connect: " << connected.message();
  ASSERT_NO_FATAL_FAILURE(exchange(socket));
  ASSERT_FALSE(socket.shutdown(Shutdown::write));
  Bytes end(1);
  const Result<std::size_t> got = socket.receive(end);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(*got, 0u) << "utcp did not read the end of the kernel's stream";
  EXPECT_EQ(socket.state(), TcpState::time_wait);
  ASSERT_NO_FATAL_FAILURE(finish(kernel_side));
  socket.close();
  expect_no_resets();
}

// The kernel aborts (SO_LINGER {1, 0}, close: a RST) two connections: on the
// first utcp is receiving, on the second it sends next. Both calls fail with
// ECONNRESET.
TEST_F(TunTest, TcpKernelResetIsReported) {
  TcpListener listener(stack());
  ASSERT_FALSE(listener.listen({utcp_address, 5003}));
  listener.set_accept_timeout(call_timeout);
  std::future<void> kernel_side = std::async(std::launch::async, [] {
    for (int connection = 0; connection < 2; ++connection) {
      KernelSocket kernel(SOCK_STREAM, 0);
      if (const int error = kernel_connect(kernel, {utcp_address, 5003}))
        throw std::system_error(error, std::generic_category(), "kernel connect");
      // utcp's byte: it has the connection in hand.
      kernel_expect(kernel_receive_one(kernel) == 1, "the kernel did not get utcp's byte");
      const linger abort{1, 0};
      if (::setsockopt(kernel.fd(), SOL_SOCKET, SO_LINGER, &abort, sizeof abort) < 0) throw_errno("SO_LINGER");
      kernel.close();
    }
  });
  const Bytes byte{42};
  for (int connection = 0; connection < 2; ++connection) {
    SCOPED_TRACE(connection == 0 ? "receiving" : "sending");
    Result<TcpSocket> accepted = listener.accept();
    ASSERT_TRUE(accepted) << "accept: " << accepted.error().message();
    TcpSocket& socket = *accepted;
    set_timeouts(socket);
    ASSERT_NO_FATAL_FAILURE(send_all(socket, byte));
    if (connection == 0) {
      Bytes buffer(16);
      const Result<std::size_t> got = socket.receive(buffer);
      ASSERT_FALSE(got) << "received " << *got << " bytes after the kernel's RST";
      EXPECT_EQ(got.error(), errc(std::errc::connection_reset));
    } else {
      ASSERT_TRUE(host_->wait_until([&] { return socket.readable(); }, call_timeout)) << "the RST did not come";
      const Result<std::size_t> sent = socket.send(byte);
      ASSERT_FALSE(sent) << "sent " << *sent << " bytes after the kernel's RST";
      EXPECT_EQ(sent.error(), errc(std::errc::connection_reset));
    }
    EXPECT_EQ(socket.state(), TcpState::closed);
  }
  ASSERT_NO_FATAL_FAILURE(finish(kernel_side));
}

TEST_F(TunTest, TcpConnectToAClosedKernelPortIsRefused) {
  TcpSocket socket(stack());
  set_timeouts(socket);
  EXPECT_EQ(socket.connect({kernel_address, 5004}), errc(std::errc::connection_refused));
}

// The reverse: the kernel's connect to a utcp port without a listener is
// answered with a RST.
TEST_F(TunTest, TcpKernelConnectToAClosedUtcpPortIsRefused) {
  KernelSocket kernel(SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_EQ(kernel_connect(kernel, {utcp_address, 5005}), EINPROGRESS);
  ASSERT_TRUE(host_->wait_until(
      [&] {
        pollfd entry{kernel.fd(), POLLOUT, 0};
        return ::poll(&entry, 1, 0) > 0;
      },
      call_timeout));
  int error = 0;
  socklen_t length = sizeof error;
  ASSERT_EQ(::getsockopt(kernel.fd(), SOL_SOCKET, SO_ERROR, &error, &length), 0);
  EXPECT_EQ(error, ECONNREFUSED);
  EXPECT_EQ(stack().counters().tcp.resets_out, 1u);
}

}  // namespace
}  // namespace utcp
