// impair_endpoint: one end of a bulk TCP transfer, on the kernel's TCP or on
// utcp over a TUN device of its own, for the impairment benchmark
// (benchmarks/impairment.sh).
//
//   impair_endpoint --stack kernel --role receive --local 10.77.1.1 --port 5001 --bytes 100M
//   impair_endpoint --stack utcp --utcp-address 10.77.3.2/16 --kernel-address 10.77.3.1/24
//                   --role send --peer 10.77.1.1 --port 5001 --bytes 100M
//
// The sender sends a pattern that differs at every position, then shuts
// down its side and waits for the receiver's; the receiver checks every
// byte against the pattern as it arrives. Each prints one JSON line:
// bytes, whether they were exact, seconds from the connection to the end
// of the stream, goodput, the CPU time the process used (user and system:
// a goodput on a busy machine says little alone, the CPU a byte costs
// more); with utcp, its connection's counters too. Exit
// status: 0 when all bytes arrived exact, 1 otherwise, 2 for a bad command
// line.
#include "utcp/tcp_socket.hpp"
#include "utcp/tun_link.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace impair {
namespace {

using namespace std::chrono_literals;
using utcp::wire::Ipv4Address;

constexpr const char* usage =
    "usage: impair_endpoint --stack kernel|utcp --role send|receive --port N --bytes N[K|M|G]\n"
    "                       [--local A.B.C.D] (receive: the address to listen on)\n"
    "                       [--peer A.B.C.D] (send: the receiver)\n"
    "                       [--utcp-address A.B.C.D/N --kernel-address A.B.C.D/N] (utcp: its TUN device)\n"
    "                       [--trace FILE] (utcp: pcap of its device) [--cwnd-trace FILE] (utcp: CSV of cwnd)\n"
    "                       [--receive-buffer N[K|M]] (utcp: its receive buffer, the largest window; default utcp's)\n"
    "                       [--device-queue PACKETS] (utcp: its TUN device's queue; default utcp's)\n"
    "                       [--label TEXT] [--timeout-s N]\n";

struct Options {
  bool utcp = false;
  bool send = false;
  std::uint16_t port = 0;
  std::uint64_t bytes = 0;
  Ipv4Address local{}, peer{};
  // utcp has no routes: its subnet must hold the peer, while the kernel's
  // side of its device routes only a part of it there (the rest goes to the relay).
  Ipv4Address utcp_address = Ipv4Address::from_octets(10, 77, 3, 2);
  int utcp_prefix = 16;
  Ipv4Address kernel_address = Ipv4Address::from_octets(10, 77, 3, 1);
  int kernel_prefix = 24;
  std::optional<std::string> trace;
  std::optional<std::string> cwnd_trace;
  std::optional<std::size_t> receive_buffer;
  std::optional<std::size_t> device_queue;
  std::string label;
  std::chrono::seconds timeout = 120s;  // no progress for this long: give up
};

[[noreturn]] void bad_usage(const std::string& what) {
  std::fprintf(stderr, "impair_endpoint: %s\n%s", what.c_str(), usage);
  std::exit(2);
}

std::uint64_t parse_count(std::string_view option, std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  const std::uint64_t scale = suffix.empty() ? 1 : suffix == "K" ? 1ull << 10 : suffix == "M" ? 1ull << 20 : suffix == "G" ? 1ull << 30 : 0;
  if (error != std::errc{} || scale == 0) bad_usage(std::string(option) + " takes a number, not '" + std::string(text) + "'");
  return value * scale;
}

Ipv4Address parse_address(std::string_view option, std::string_view text) {
  const auto address = Ipv4Address::parse(text);
  if (!address) bad_usage(std::string(option) + " takes A.B.C.D, not '" + std::string(text) + "'");
  return *address;
}

void parse_prefixed(std::string_view option, std::string_view text, Ipv4Address& address, int& prefix_length) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) bad_usage(std::string(option) + " takes A.B.C.D/N");
  address = parse_address(option, text.substr(0, slash));
  const std::uint64_t length = parse_count(option, text.substr(slash + 1));
  if (length < 1 || length > 32) bad_usage(std::string(option) + ": a prefix is 1 to 32");
  prefix_length = static_cast<int>(length);
}

Options parse_options(int argc, char** argv) {
  Options options;
  bool have_stack = false, have_role = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view option = argv[i];
    if (option == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) bad_usage(std::string(option) + " needs a value");
    const std::string_view value = argv[++i];
    if (option == "--stack") {
      if (value != "kernel" && value != "utcp") bad_usage("--stack is kernel or utcp");
      options.utcp = value == "utcp";
      have_stack = true;
    } else if (option == "--role") {
      if (value != "send" && value != "receive") bad_usage("--role is send or receive");
      options.send = value == "send";
      have_role = true;
    } else if (option == "--port") {
      const std::uint64_t port = parse_count(option, value);
      if (port == 0 || port > 65535) bad_usage("--port is 1 to 65535");
      options.port = static_cast<std::uint16_t>(port);
    } else if (option == "--bytes") options.bytes = parse_count(option, value);
    else if (option == "--local") options.local = parse_address(option, value);
    else if (option == "--peer") options.peer = parse_address(option, value);
    else if (option == "--kernel-address") parse_prefixed(option, value, options.kernel_address, options.kernel_prefix);
    else if (option == "--utcp-address") parse_prefixed(option, value, options.utcp_address, options.utcp_prefix);
    else if (option == "--trace") options.trace = std::string(value);
    else if (option == "--cwnd-trace") options.cwnd_trace = std::string(value);
    else if (option == "--receive-buffer") options.receive_buffer = parse_count(option, value);
    else if (option == "--device-queue") options.device_queue = parse_count(option, value);
    else if (option == "--label") options.label = value;
    else if (option == "--timeout-s") options.timeout = std::chrono::seconds(parse_count(option, value));
    else bad_usage("unknown option " + std::string(option));
  }
  if (!have_stack || !have_role || options.port == 0 || options.bytes == 0)
    bad_usage("--stack, --role, --port and --bytes are required");
  if (options.send && options.peer.value == 0) bad_usage("a sender needs --peer");
  return options;
}

// The stream's byte at `position`: it differs with the position at every
// scale, so a lost, repeated or misplaced piece shows.
std::uint8_t pattern_byte(std::uint64_t position) {
  return static_cast<std::uint8_t>(position * 7 + (position >> 8) + (position >> 16) * 3 + (position >> 24) * 5);
}

// Within each 256-byte block of the stream the pattern is first + 7 * i
// (the terms of the higher bits change only between blocks): visit(offset,
// length, first) for each block of buffer, whose loops the compiler
// vectorizes. Byte by byte, checking took a receiver more CPU than
// receiving (a third of utcp's in a profile), for either stack.
template <typename Visit>
void for_each_pattern_block(std::size_t size, std::uint64_t from, Visit visit) {
  for (std::size_t offset = 0; offset < size;) {
    const std::uint64_t position = from + offset;
    const std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(size - offset, 256 - position % 256));
    visit(offset, length, pattern_byte(position));
    offset += length;
  }
}

void fill_pattern(std::span<std::uint8_t> buffer, std::uint64_t from) {
  for_each_pattern_block(buffer.size(), from, [&](std::size_t offset, std::size_t length, std::uint8_t first) {
    for (std::size_t i = 0; i < length; ++i) buffer[offset + i] = static_cast<std::uint8_t>(first + 7 * i);
  });
}

// The bytes of buffer that differ from the pattern at `from`.
std::uint64_t pattern_mismatches(std::span<const std::uint8_t> buffer, std::uint64_t from) {
  std::uint64_t mismatches = 0;
  for_each_pattern_block(buffer.size(), from, [&](std::size_t offset, std::size_t length, std::uint8_t first) {
    std::uint16_t in_block = 0;  // at most 256: narrow lanes, no widening per byte
    for (std::size_t i = 0; i < length; ++i)
      in_block = static_cast<std::uint16_t>(in_block + (buffer[offset + i] != static_cast<std::uint8_t>(first + 7 * i)));
    mismatches += in_block;
  });
  return mismatches;
}

// The calls a transfer needs, on either stack; errors as exceptions.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual std::size_t send(std::span<const std::uint8_t> data) = 0;
  virtual std::size_t receive(std::span<std::uint8_t> buffer) = 0;  // 0: the end of the stream
  virtual void shutdown_write() = 0;
  // After the transfer: lets the closing handshake finish; the stack's counters as JSON fields.
  virtual void finish() {}
  virtual std::string counters_json() const { return {}; }
};

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

sockaddr_in socket_address(Ipv4Address address, std::uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  in.sin_addr.s_addr = htonl(address.value);
  return in;
}

class KernelStream final : public Stream {
 public:
  KernelStream(const Options& options) {
    const timeval timeout{options.timeout.count(), 0};
    const auto make_socket = [&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) throw_errno("socket");
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
      return fd;
    };
    if (options.send) {
      fd_ = make_socket();
      // The receiver may not listen yet (utcp's comes up with its device): retry a refusal for a while.
      const sockaddr_in peer = socket_address(options.peer, options.port);
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      while (::connect(fd_, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) < 0) {
        if (errno != ECONNREFUSED || std::chrono::steady_clock::now() > give_up) throw_errno("connect");
        ::close(fd_);
        fd_ = make_socket();
        std::this_thread::sleep_for(50ms);
      }
    } else {
      const int listener = make_socket();
      const int yes = 1;
      ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      const sockaddr_in local = socket_address(options.local, options.port);
      if (::bind(listener, reinterpret_cast<const sockaddr*>(&local), sizeof local) < 0 || ::listen(listener, 1) < 0)
        throw_errno("bind/listen");
      fd_ = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd_ < 0) throw_errno("accept");
      ::close(listener);
    }
  }
  ~KernelStream() override { ::close(fd_); }
  std::size_t send(std::span<const std::uint8_t> data) override {
    const ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0) throw_errno("send");
    return static_cast<std::size_t>(sent);
  }
  std::size_t receive(std::span<std::uint8_t> buffer) override {
    const ssize_t got = ::recv(fd_, buffer.data(), buffer.size(), 0);
    if (got < 0) throw_errno("recv");
    return static_cast<std::size_t>(got);
  }
  void shutdown_write() override {
    if (::shutdown(fd_, SHUT_WR) < 0) throw_errno("shutdown");
  }

 private:
  int fd_ = -1;
};

class UtcpStream final : public Stream {
 public:
  UtcpStream(const Options& options) : host_(host_config(options)), socket_(host_.stack()) {
    host_.link().configure_kernel_side(options.kernel_address, options.kernel_prefix);
    if (options.send) {
      check(socket_.connect({options.peer, options.port}), "utcp connect");
    } else {
      utcp::TcpListener listener(host_.stack());
      check(listener.listen({options.utcp_address, options.port}), "utcp listen");
      listener.set_accept_timeout(options.timeout);
      utcp::Result<utcp::TcpSocket> accepted = listener.accept();
      if (!accepted) check(accepted.error(), "utcp accept");
      socket_ = std::move(*accepted);
    }
    socket_.set_receive_timeout(options.timeout);
    socket_.set_send_timeout(options.timeout);
    if (options.cwnd_trace) {
      utcp::Result<utcp::CongestionTrace> trace = utcp::csv_congestion_trace(*options.cwnd_trace);
      if (!trace) check(trace.error(), "utcp cwnd trace");
      socket_.set_congestion_trace(std::move(*trace));
    }
  }
  std::size_t send(std::span<const std::uint8_t> data) override { return value(socket_.send(data), "utcp send"); }
  std::size_t receive(std::span<std::uint8_t> buffer) override { return value(socket_.receive(buffer), "utcp receive"); }
  void shutdown_write() override { check(socket_.shutdown(utcp::Shutdown::write), "utcp shutdown"); }
  void finish() override {
    counters_ = socket_.counters();
    info_ = socket_.info();
    // Until the peer has our FIN (LAST-ACK ends) or a while has passed: the
    // kernel's peer waits for it, and utcp moves only while polled.
    host_.wait_until([&] { return socket_.state() == utcp::TcpState::closed || socket_.state() == utcp::TcpState::time_wait; }, 5s);
  }
  std::string counters_json() const override {
    if (!counters_ || !info_) return {};
    char text[320];
    std::snprintf(text, sizeof text,
                  ",\"utcp_cc\":\"%s\",\"utcp_sack\":%s,\"utcp_retransmitted_segments\":%llu,\"utcp_timeouts\":%llu,"
                  "\"utcp_fast_retransmits\":%llu,\"utcp_reductions_undone\":%llu,\"utcp_out_of_order_segments\":%llu",
                  info_->congestion_control.c_str(), info_->sack ? "true" : "false",
                  static_cast<unsigned long long>(counters_->retransmitted_segments),
                  static_cast<unsigned long long>(counters_->timeouts),
                  static_cast<unsigned long long>(counters_->fast_retransmits),
                  static_cast<unsigned long long>(counters_->reductions_undone),
                  static_cast<unsigned long long>(counters_->out_of_order_segments));
    return text;
  }

 private:
  static utcp::TunHostConfig host_config(const Options& options) {
    utcp::TunHostConfig config;
    config.address = options.utcp_address;
    config.prefix_length = options.utcp_prefix;
    config.trace = options.trace;
    if (options.receive_buffer) config.stack.tcp.receive_buffer = *options.receive_buffer;
    if (options.device_queue) config.link.queue_length = *options.device_queue;
    return config;
  }
  static void check(std::error_code error, const char* what) {
    if (error) throw std::system_error(error, what);
  }
  static std::size_t value(const utcp::Result<std::size_t>& result, const char* what) {
    if (!result) check(result.error(), what);
    return *result;
  }
  utcp::TunHost host_;
  utcp::TcpSocket socket_;
  std::optional<utcp::TcpCounters> counters_;
  std::optional<utcp::TcpInfo> info_;
};

struct Outcome {
  std::uint64_t bytes = 0;
  std::uint64_t mismatches = 0;
  double seconds = 0;
};

Outcome send_all(Stream& stream, std::uint64_t total) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::uint8_t> chunk(256 * 1024);
  Outcome outcome;
  while (outcome.bytes < total) {
    const std::size_t size = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), total - outcome.bytes));
    fill_pattern(std::span(chunk).first(size), outcome.bytes);
    for (std::size_t done = 0; done < size;) done += stream.send(std::span(chunk).subspan(done, size - done));
    outcome.bytes += size;
  }
  stream.shutdown_write();
  // The receiver closes after the last byte: its end of stream means all arrived.
  std::uint8_t byte;
  if (stream.receive({&byte, 1}) != 0) ++outcome.mismatches;
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

Outcome receive_all(Stream& stream) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::uint8_t> buffer(256 * 1024);
  Outcome outcome;
  for (;;) {
    const std::size_t got = stream.receive(buffer);
    if (got == 0) break;
    outcome.mismatches += pattern_mismatches(std::span(buffer).first(got), outcome.bytes);
    outcome.bytes += got;
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stream.shutdown_write();
  return outcome;
}

// The CPU seconds this process has used, in user space and in the kernel
// (which, for utcp, includes B's forwarding of what it writes to its device).
std::pair<double, double> cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

int run(const Options& options) {
  std::unique_ptr<Stream> stream;
  if (options.utcp) stream = std::make_unique<UtcpStream>(options);
  else stream = std::make_unique<KernelStream>(options);
  const Outcome outcome = options.send ? send_all(*stream, options.bytes) : receive_all(*stream);
  stream->finish();
  const bool exact = outcome.bytes == options.bytes && outcome.mismatches == 0;
  const auto [user_seconds, system_seconds] = cpu_seconds();
  std::printf(
      "{\"bench\":\"impair_endpoint\",\"label\":\"%s\",\"stack\":\"%s\",\"role\":\"%s\",\"bytes\":%llu,"
      "\"expected_bytes\":%llu,\"exact\":%s,\"seconds\":%.3f,\"goodput_Mbps\":%.2f,\"cpu_user_s\":%.3f,"
      "\"cpu_system_s\":%.3f%s}\n",
      options.label.c_str(), options.utcp ? "utcp" : "kernel", options.send ? "send" : "receive",
      static_cast<unsigned long long>(outcome.bytes), static_cast<unsigned long long>(options.bytes),
      exact ? "true" : "false", outcome.seconds, outcome.seconds > 0 ? outcome.bytes * 8 / outcome.seconds / 1e6 : 0.0,
      user_seconds, system_seconds,
      stream->counters_json().c_str());
  return exact ? 0 : 1;
}

}  // namespace
}  // namespace impair

int main(int argc, char** argv) {
  const impair::Options options = impair::parse_options(argc, argv);
  try {
    return impair::run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "impair_endpoint: %s\n", error.what());
    return 1;
  }
}
