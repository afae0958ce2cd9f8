// utcp_bench: TCP and UDP between ranks 0 and 1 of a viarun job over the
// user-level stack (utcp over VIA), and with --kernel over the kernel's
// loopback sockets too, size by size in the same run, measured the same way.
// The kernel's receives sleep in recv() until data comes; with --kernel-spin
// they poll (MSG_DONTWAIT) instead, as utcp's waits spin before they sleep,
// so that the kernel pays its system calls but no wake-up.
//
//   viarun -n 2 utcp_bench [--proto tcp|udp] [--mode lat|bw] [--sizes a,b,...]
//                          [--iters N] [--json] [--kernel] [--kernel-spin] [--nodelay]
//                          [--port P]
//
// lat: ping-pong; lat_us = round trip / 2, the median over 5 repetitions.
// bw: rank 0 streams messages of the size to rank 1; bw_MBps = 10^6 bytes/s
// until rank 1 has acknowledged the last, median over 5 repetitions. UDP
// streams with credits (rank 1 acknowledges every window of datagrams, two
// windows may be in flight) so that no queue overflows; a lost datagram ends
// the run with an error, as UDP does not resend.
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <via/bootstrap.hpp>

#include "bench_job.hpp"
#include "utcp/tcp_socket.hpp"
#include "utcp/udp_socket.hpp"
#include "utcp/via_host.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* prog = "utcp_bench";
constexpr int repetitions = 5;
// No call on either side waits longer: a lost datagram or a stuck peer ends
// the run instead of hanging it.
constexpr auto call_timeout = 30s;
// UDP streaming: at most this many IP packets (datagrams or their fragments)
// in flight, below the receive buffers a VIA link posts per peer (at least 32
// unless VIASTACK_UTCP_RECEIVE_BUFFERS says fewer).
constexpr std::size_t udp_packets_in_flight = 16;

struct Options {
  std::string proto = "tcp";
  std::string mode = "lat";
  std::vector<std::size_t> sizes;
  long iters = 0;  // 0: chosen per size
  bool json = false;
  bool kernel = false;
  bool kernel_spin = false;  // the kernel's sockets polled (MSG_DONTWAIT) instead of slept in
  bool nodelay = false;
  std::uint16_t port = 47100;  // utcp's port on both ranks
};

template <class... Pieces>
[[noreturn]] void die(const Pieces&... pieces) {
  std::string message;
  ((message += pieces), ...);
  std::fprintf(stderr, "%s: %s\n", prog, message.c_str());
  std::exit(1);
}

[[noreturn]] void die_errno(const char* what) { die(what, ": ", std::strerror(errno)); }

void check(const std::error_code& error, const char* what) {
  if (error) die(what, ": ", error.message());
}

template <class T>
T check(utcp::Result<T> result, const char* what) {
  if (!result) check(result.error(), what);
  return std::move(result.value());
}

// One rank's end of the connection to the other: a byte stream (TCP) or
// datagrams (UDP), carrying whole messages of a known size.
class Channel {
 public:
  virtual ~Channel() = default;
  virtual void send(std::span<const std::uint8_t> message) = 0;
  // Fills the whole of `message` (TCP: as many receives as it takes; UDP:
  // one datagram, which must be of that size).
  virtual void receive(std::span<std::uint8_t> message) = 0;
  // Returns once nothing that this rank still has to do for the
  // connection (send, acknowledge) is left, so that the other rank finishes
  // while this one waits elsewhere: utcp's TCP acts only while its stack
  // is driven.
  virtual void settle() {}
};

class UtcpTcpChannel final : public Channel {
 public:
  UtcpTcpChannel(utcp::ViaHost& host, utcp::TcpSocket socket) : host_(host), socket_(std::move(socket)) {
    socket_.set_receive_timeout(call_timeout);
    socket_.set_send_timeout(call_timeout);
  }
  void send(std::span<const std::uint8_t> message) override {
    for (std::size_t done = 0; done < message.size();)
      done += check(socket_.send(message.subspan(done)), "utcp TCP send");
  }
  void receive(std::span<std::uint8_t> message) override {
    for (std::size_t done = 0; done < message.size();) {
      const std::size_t got = check(socket_.receive(message.subspan(done)), "utcp TCP receive");
      if (got == 0) die("utcp TCP receive: the other rank closed the connection");
      done += got;
    }
  }
  // Everything sent is acknowledged, and the stack ran long enough for a
  // delayed ACK of what was received to have left.
  void settle() override {
    const Clock::time_point acknowledgements_out = Clock::now() + 2 * host_.stack().config().tcp.delayed_ack_timeout;
    const bool settled = host_.wait_until(
        [&] {
          const std::optional<utcp::TcpInfo> info = socket_.info();
          return (!info || (info->bytes_unsent == 0 && info->bytes_in_flight == 0)) &&
                 Clock::now() >= acknowledgements_out;
        },
        call_timeout);
    if (!settled) die("utcp TCP: the other rank did not acknowledge what was sent");
  }

 private:
  utcp::ViaHost& host_;
  utcp::TcpSocket socket_;
};

class UtcpUdpChannel final : public Channel {
 public:
  explicit UtcpUdpChannel(utcp::UdpSocket socket) : socket_(std::move(socket)) {
    socket_.set_receive_timeout(call_timeout);
  }
  void send(std::span<const std::uint8_t> message) override { check(socket_.send(message), "utcp UDP send"); }
  void receive(std::span<std::uint8_t> message) override {
    const utcp::Received got = check(socket_.receive_from(message), "utcp UDP receive (a datagram lost?)");
    if (got.size != message.size() || got.truncated) die("utcp UDP receive: a datagram of an unexpected size");
  }

 private:
  utcp::UdpSocket socket_;
};

// A kernel socket, TCP or UDP, connected to the other rank over 127.0.0.1.
class KernelChannel final : public Channel {
 public:
  // spin: receives poll with MSG_DONTWAIT, as utcp's waits spin, so that the
  // kernel pays only its system calls and not a sleep and a wake-up.
  KernelChannel(int fd, bool stream, bool spin) : fd_(fd), stream_(stream), spin_(spin) {
    const timeval timeout{std::chrono::duration_cast<std::chrono::seconds>(call_timeout).count(), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  ~KernelChannel() override { ::close(fd_); }
  void send(std::span<const std::uint8_t> message) override {
    if (!stream_) {
      if (::send(fd_, message.data(), message.size(), 0) != static_cast<ssize_t>(message.size()))
        die_errno("kernel UDP send");
      return;
    }
    for (std::size_t done = 0; done < message.size();) {
      const ssize_t sent = ::send(fd_, message.data() + done, message.size() - done, MSG_NOSIGNAL);
      if (sent < 0) die_errno("kernel TCP send");
      done += static_cast<std::size_t>(sent);
    }
  }
  void receive(std::span<std::uint8_t> message) override {
    if (!stream_) {
      const ssize_t got = receive_some(message, MSG_TRUNC);
      if (got < 0) die_errno("kernel UDP receive (a datagram lost?)");
      if (static_cast<std::size_t>(got) != message.size()) die("kernel UDP receive: a datagram of an unexpected size");
      return;
    }
    for (std::size_t done = 0; done < message.size();) {
      const ssize_t got = receive_some(message.subspan(done), 0);
      if (got < 0) die_errno("kernel TCP receive");
      if (got == 0) die("kernel TCP receive: the other rank closed the connection");
      done += static_cast<std::size_t>(got);
    }
  }

 private:
  ssize_t receive_some(std::span<std::uint8_t> into, int flags) {
    if (!spin_) return ::recv(fd_, into.data(), into.size(), flags);
    const Clock::time_point deadline = Clock::now() + call_timeout;
    for (unsigned i = 0;; ++i) {
      const ssize_t got = ::recv(fd_, into.data(), into.size(), flags | MSG_DONTWAIT);
      if (got >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return got;
      if (i % 1024 == 0 && Clock::now() > deadline) {
        errno = ETIMEDOUT;
        return -1;
      }
    }
  }

  int fd_;
  bool stream_;
  bool spin_;
};

// The job's key-value store, as a barrier between the two ranks that also
// passes a value (the kernel sockets' ports).
class Bootstrap {
 public:
  explicit Bootstrap(int rank) : rank_(rank) {
    std::string why;
    bootstrap_ = via::job_bootstrap(why);
    if (!bootstrap_) die("no job bootstrap: ", why);
  }
  // Publishes `value` under `key`, waits for the other rank to do the same
  // and returns its value. Keys carry the rank: some stores ignore the rank
  // a get names.
  std::string exchange(const std::string& key, const std::string& value) {
    std::string peer_value, why;
    if (!bootstrap_->put(key + "." + std::to_string(rank_), value, why) || !bootstrap_->fence(why) ||
        !bootstrap_->get(1 - rank_, key + "." + std::to_string(1 - rank_), peer_value, why))
      die("bootstrap exchange of ", key, ": ", why);
    return peer_value;
  }

 private:
  int rank_;
  std::shared_ptr<via::Bootstrap> bootstrap_;
};

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A kernel socket bound to 127.0.0.1 on an ephemeral port (listening, for
// TCP); returns it and the port.
std::pair<int, std::uint16_t> kernel_bound_socket(bool stream) {
  const int fd = ::socket(AF_INET, (stream ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
  if (fd < 0) die_errno("kernel socket");
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) < 0) die_errno("kernel bind");
  if (stream && ::listen(fd, 1) < 0) die_errno("kernel listen");
  if (!stream) {
    // Room for two credit windows of datagrams with the kernel's overhead on
    // each: the default (212992 bytes) drops some of 16 datagrams of 8 KiB.
    // Past net.core.rmem_max only as root (SO_RCVBUFFORCE).
    const int bytes = 4 << 20;
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0)
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) < 0) die_errno("kernel getsockname");
  return {fd, ntohs(address.sin_port)};
}

void kernel_connect(int fd, std::uint16_t port) {
  const sockaddr_in address = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) die_errno("kernel connect");
}

// The two ranks' channels: utcp's over VIA, and the kernel's over loopback
// (with --kernel). Rank 1 listens (TCP), rank 0 connects; ports go through
// the job's key-value store and a fence.
struct Channels {
  std::unique_ptr<Channel> utcp;
  std::unique_ptr<Channel> kernel;
};

Channels open_channels(utcp::ViaHost& host, const Options& options) {
  const bool tcp = options.proto == "tcp";
  const int rank = host.rank(), peer = 1 - rank;
  const utcp::Endpoint local{{}, options.port}, remote{host.address_of(peer), options.port};
  Bootstrap bootstrap(rank);

  // Before the exchange: whatever the other rank will reach.
  utcp::TcpListener listener(host.stack());
  utcp::UdpSocket udp(host.stack());
  if (tcp && rank == 1) check(listener.listen(local), "utcp listen");
  if (!tcp) check(udp.bind(local), "utcp UDP bind");
  int kernel_fd = -1;
  std::uint16_t kernel_port = 0;
  if (options.kernel && (!tcp || rank == 1)) std::tie(kernel_fd, kernel_port) = kernel_bound_socket(tcp);
  const std::string peer_kernel_port = bootstrap.exchange("utcp_bench.ready", std::to_string(kernel_port));

  Channels channels;
  if (options.kernel) {
    if (!tcp || rank == 0) {
      const auto peer_port = static_cast<std::uint16_t>(std::stoi(peer_kernel_port));
      if (tcp) kernel_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (kernel_fd < 0) die_errno("kernel socket");
      kernel_connect(kernel_fd, peer_port);  // TCP: done before rank 1 accepts, the backlog holds it
    } else {
      const int accepted = ::accept4(kernel_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (accepted < 0) die_errno("kernel accept");
      ::close(kernel_fd);
      kernel_fd = accepted;
    }
    if (tcp && options.nodelay) {
      const int on = 1;
      ::setsockopt(kernel_fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    }
    channels.kernel = std::make_unique<KernelChannel>(kernel_fd, tcp, options.kernel_spin);
  }

  if (!tcp) {
    check(udp.connect(remote), "utcp UDP connect");
    channels.utcp = std::make_unique<UtcpUdpChannel>(std::move(udp));
    return channels;
  }
  utcp::TcpSocket socket(host.stack());
  if (rank == 0) {
    socket.set_send_timeout(call_timeout);
    check(socket.connect(remote), "utcp connect");
  } else {
    listener.set_accept_timeout(call_timeout);
    socket = check(listener.accept(), "utcp accept");
  }
  socket.set_nodelay(options.nodelay);
  channels.utcp = std::make_unique<UtcpTcpChannel>(host, std::move(socket));
  return channels;
}

// Ping-pong: one-way time in µs, the median over the repetitions (rank 0's
// measure; rank 1's return value is not used).
double run_latency(Channel& channel, int rank, std::vector<std::uint8_t>& buffer, std::size_t bytes, long iters) {
  const std::span<std::uint8_t> message(buffer.data(), bytes);
  std::vector<double> times;
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    const long round_trips = std::max(1l, iters / repetitions);
    const Clock::time_point start = Clock::now();
    for (long i = 0; i < round_trips; ++i) {
      if (rank == 0) {
        channel.send(message);
        channel.receive(message);
      } else {
        channel.receive(message);
        channel.send(message);
      }
    }
    const std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
    times.push_back(elapsed.count() / static_cast<double>(round_trips) / 2);
  }
  channel.settle();
  return bench::median(times);
}

// Streaming from rank 0 to rank 1: MB/s, the median over the repetitions.
// Rank 1 acknowledges every `window` messages (one byte); rank 0 may be two
// windows ahead. Window 0 (TCP): one acknowledgement, of the whole repetition.
double run_bandwidth(Channel& channel, int rank, std::vector<std::uint8_t>& buffer, std::size_t bytes, long iters,
                     long window) {
  const std::span<std::uint8_t> message(buffer.data(), bytes);
  std::uint8_t acknowledgement[1] = {0};
  std::vector<double> rates;
  long messages = std::max(1l, iters / repetitions);
  if (window == 0) window = messages;
  messages = std::max(window, messages / window * window);
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    const Clock::time_point start = Clock::now();
    if (rank == 0) {
      long credits = 2 * window, acknowledged = 0;
      for (long sent = 0; sent < messages; ++sent) {
        if (credits == 0) {
          channel.receive(acknowledgement);
          ++acknowledged;
          credits += window;
        }
        channel.send(message);
        --credits;
      }
      for (; acknowledged < messages / window; ++acknowledged) channel.receive(acknowledgement);
    } else {
      for (long received = 1; received <= messages; ++received) {
        channel.receive(message);
        if (received % window == 0) channel.send(acknowledgement);
      }
    }
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    rates.push_back(static_cast<double>(bytes) * static_cast<double>(messages) / elapsed.count() / 1e6);
  }
  channel.settle();
  return bench::median(rates);
}

long default_iters(const std::string& mode, std::size_t bytes) {
  const long budget = mode == "lat" ? 20'000'000 : 1'000'000'000;  // bytes moved per size, roughly
  return std::clamp(static_cast<long>(budget / std::max<std::size_t>(bytes, 1024)), 100l,
                    mode == "lat" ? 10'000l : 100'000l);
}

// UDP's credit window in datagrams: two windows of packets fit in flight.
long udp_window(std::size_t bytes, std::size_t mtu) {
  const std::size_t per_fragment = (mtu - 20) / 8 * 8;  // payload of a fragment, a multiple of 8
  const std::size_t packets = (bytes + 8 + per_fragment - 1) / per_fragment;
  return static_cast<long>(std::max<std::size_t>(1, udp_packets_in_flight / 2 / packets));
}

struct Measurement {
  const char* stack;
  const char* provider;
  const Options& options;
  std::size_t bytes;
  long iters;
  double lat_us;
  double bw_MBps;
};

void print(const Measurement& m) {
  if (m.options.json)
    std::printf("{\"bench\":\"utcp_bench\",\"stack\":\"%s\",\"provider\":\"%s\",\"proto\":\"%s\",\"mode\":\"%s\","
                "\"bytes\":%zu,\"iters\":%ld,\"lat_us\":%.4f,\"bw_MBps\":%.2f}\n",
                m.stack, m.provider, m.options.proto.c_str(), m.options.mode.c_str(), m.bytes, m.iters, m.lat_us,
                m.bw_MBps);
  else
    std::printf("%-7s %-13s %-5s %-5s %10zu %8ld %12.3f %12.1f\n", m.stack, m.provider, m.options.proto.c_str(),
                m.options.mode.c_str(), m.bytes, m.iters, m.lat_us, m.bw_MBps);
  std::fflush(stdout);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) bench::usage_error(prog, argument + " needs a value");
      return argv[++i];
    };
    if (argument == "--proto") {
      options.proto = value();
      if (options.proto != "tcp" && options.proto != "udp") bench::usage_error(prog, "--proto must be tcp or udp");
    } else if (argument == "--mode") {
      options.mode = value();
      if (options.mode != "lat" && options.mode != "bw") bench::usage_error(prog, "--mode must be lat or bw");
    } else if (argument == "--sizes") {
      options.sizes = bench::parse_sizes(prog, value());
    } else if (argument == "--iters") {
      options.iters = bench::parse_count(prog, value());
    } else if (argument == "--port") {
      const long port = bench::parse_count(prog, value());
      if (port > 65535) bench::usage_error(prog, "--port must be 1 to 65535");
      options.port = static_cast<std::uint16_t>(port);
    } else if (argument == "--json") {
      options.json = true;
    } else if (argument == "--kernel") {
      options.kernel = true;
    } else if (argument == "--kernel-spin") {
      options.kernel = options.kernel_spin = true;
    } else if (argument == "--nodelay") {
      options.nodelay = true;
    } else {
      bench::usage_error(prog, std::string("unknown option ") + argument);
    }
  }
  const std::size_t largest = options.proto == "udp" ? utcp::udp_max_payload : std::size_t{1} << 30;
  if (options.sizes.empty())
    for (const std::size_t size : bench::default_sizes())
      if (size <= largest) options.sizes.push_back(size);
  for (const std::size_t size : options.sizes) {
    if (size == 0) bench::usage_error(prog, "sizes start at 1 byte");
    if (size > largest) bench::usage_error(prog, "a UDP datagram holds at most 65507 bytes");
  }
  return options;
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 utcp_bench [--proto tcp|udp] [--mode lat|bw] [--sizes a,b,...]\n"
    "                              [--iters N] [--json] [--kernel] [--kernel-spin] [--nodelay]\n"
    "                              [--port P]\n"
    "  TCP or UDP between ranks 0 and 1 over the user-level stack (utcp over VIA)\n"
    "  --proto tcp|udp  the protocol (default tcp)\n"
    "  --mode lat|bw    ping-pong latency (round trip / 2) or streaming bandwidth (default lat)\n"
    "  --sizes a,b,...  message sizes in bytes, k/M suffixes allowed (UDP: at most 65507)\n"
    "  --iters N        round trips or messages per size (default: by size)\n"
    "  --kernel         also measure the kernel's loopback sockets, size by size\n"
    "  --kernel-spin    the same, the kernel's receives polling (MSG_DONTWAIT)\n"
    "  --nodelay        TCP_NODELAY on both stacks' sockets\n"
    "  --port P         the port the ranks use (1..65535)\n"
    "  --json           one JSON object per line\n"
    "  -h, --help       show this help;  --version  show the library's version\n"
    "environment: VIASTACK_PROVIDER (set by viarun), VIASTACK_UTCP_* and the VIASTACK_*\n"
    "  variables of the library (viarun --info lists them)\n"
    BENCH_EXIT_STATUSES;

int main(int argc, char** argv) {
  bench::start(prog, {kUsage, bench::library_version}, argc, argv);
  const Options options = parse_options(argc, argv);
  const bench::Job job = bench::job_from_env(prog);
  if (job.size != 2) bench::usage_error(prog, "needs exactly 2 ranks (run it as: viarun -n 2 utcp_bench ...)");

  utcp::ViaHost host;
  Channels channels = open_channels(host, options);
  const char* provider = host.nic().provider_name();
  std::vector<std::uint8_t> buffer(*std::max_element(options.sizes.begin(), options.sizes.end()), 0x5a);

  if (job.rank == 0 && !options.json)
    std::printf("%-7s %-13s %-5s %-5s %10s %8s %12s %12s\n", "stack", "provider", "proto", "mode", "bytes", "iters",
                "lat_us", "bw_MBps");
  for (const std::size_t bytes : options.sizes) {
    const long iters = options.iters ? options.iters : default_iters(options.mode, bytes);
    const long window = options.proto == "udp" ? udp_window(bytes, host.link().mtu()) : 0;
    struct Run {
      const char* stack;
      const char* provider;
      Channel* channel;
    };
    for (const Run& run : {Run{"utcp", provider, channels.utcp.get()}, Run{"kernel", options.kernel_spin ? "loopback-spin" : "loopback", channels.kernel.get()}}) {
      if (!run.channel) continue;
      double lat_us, bw_MBps;
      if (options.mode == "lat") {
        lat_us = run_latency(*run.channel, job.rank, buffer, bytes, iters);
        bw_MBps = static_cast<double>(bytes) / lat_us;  // bytes per µs = MB/s
      } else {
        bw_MBps = run_bandwidth(*run.channel, job.rank, buffer, bytes, iters, window);
        lat_us = static_cast<double>(bytes) / bw_MBps;
      }
      if (job.rank == 0) print({run.stack, run.provider, options, bytes, iters, lat_us, bw_MBps});
    }
  }
  // Neither rank leaves while the other may still need its stack.
  Bootstrap(job.rank).exchange("utcp_bench.done", "");
  return 0;
}
