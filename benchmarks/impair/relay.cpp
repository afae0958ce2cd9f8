// impair_relay: forwards IPv4 packets between two TUN devices, each in a
// network namespace of its own, impairing both directions alike (loss, delay,
// reordering, duplication, corruption; impairment.hpp), for lack of netem.
//
//   impair_relay --left-netns A --left-address 10.77.1.1/16
//                --right-netns B --right-address 10.77.2.1/16
//                --loss 1 --delay-ms 1 --reorder 1 --duplicate 0.5 --corrupt 0.1 --seed 1 --pcap relay.pcap
//
// Each side gets a device "impair0" in its namespace with the kernel's side
// at the address given (so the kernel routes the prefix through it); what one
// side's kernel sends there comes out of the other's device. Runs until
// SIGINT or SIGTERM, then prints its counters as one JSON line. The pcap
// (--pcap) holds every packet as it came in, before impairment: what each
// stack sent, headers only (--snap bytes).
#include "impairment.hpp"

#include "utcp/pcap.hpp"
#include "utcp/tun_link.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace impair {
namespace {

constexpr const char* usage =
    "usage: impair_relay --left-netns NAME --left-address A.B.C.D/N --right-netns NAME --right-address A.B.C.D/N\n"
    "                    [--loss PCT] [--delay-ms MS] [--reorder PCT] [--duplicate PCT] [--corrupt PCT]\n"
    "                    [--limit PACKETS] [--seed N] [--pcap FILE] [--snap BYTES] [--txqueuelen N]\n";

struct Side {
  std::string netns;
  utcp::wire::Ipv4Address address;
  int prefix_length = 0;
};

struct Options {
  Side left, right;
  ImpairmentSettings settings;
  std::uint64_t seed = 1;
  std::optional<std::string> pcap;
  std::uint32_t snap = 128;
  int txqueuelen = 10000;
};

[[noreturn]] void bad_usage(const std::string& what) {
  std::fprintf(stderr, "impair_relay: %s\n%s", what.c_str(), usage);
  std::exit(2);
}

template <class Number>
Number parse_number(std::string_view option, std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size())
    bad_usage(std::string(option) + " takes a number, not '" + std::string(text) + "'");
  return value;
}

void parse_address(std::string_view option, std::string_view text, Side& side) {
  const std::size_t slash = text.find('/');
  const auto address = utcp::wire::Ipv4Address::parse(text.substr(0, slash));
  if (!address || slash == std::string_view::npos)
    bad_usage(std::string(option) + " takes A.B.C.D/N, not '" + std::string(text) + "'");
  side.address = *address;
  side.prefix_length = parse_number<int>(option, text.substr(slash + 1));
  if (side.prefix_length < 1 || side.prefix_length > 32) bad_usage(std::string(option) + ": a prefix is 1 to 32");
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view option = argv[i];
    if (option == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) bad_usage(std::string(option) + " needs a value");
    const std::string_view value = argv[++i];
    if (option == "--left-netns") options.left.netns = value;
    else if (option == "--right-netns") options.right.netns = value;
    else if (option == "--left-address") parse_address(option, value, options.left);
    else if (option == "--right-address") parse_address(option, value, options.right);
    else if (option == "--loss") options.settings.loss = parse_number<double>(option, value) / 100;
    else if (option == "--reorder") options.settings.reorder = parse_number<double>(option, value) / 100;
    else if (option == "--duplicate") options.settings.duplicate = parse_number<double>(option, value) / 100;
    else if (option == "--corrupt") options.settings.corrupt = parse_number<double>(option, value) / 100;
    else if (option == "--delay-ms")
      options.settings.delay = std::chrono::microseconds(static_cast<std::int64_t>(parse_number<double>(option, value) * 1000));
    else if (option == "--limit") options.settings.limit = parse_number<std::size_t>(option, value);
    else if (option == "--seed") options.seed = parse_number<std::uint64_t>(option, value);
    else if (option == "--pcap") options.pcap = std::string(value);
    else if (option == "--snap") options.snap = parse_number<std::uint32_t>(option, value);
    else if (option == "--txqueuelen") options.txqueuelen = parse_number<int>(option, value);
    else bad_usage("unknown option " + std::string(option));
  }
  if (options.left.netns.empty() || options.right.netns.empty() || options.left.prefix_length == 0 ||
      options.right.prefix_length == 0)
    bad_usage("both sides need a namespace and an address");
  if (const std::string problem = options.settings.check(); !problem.empty()) bad_usage(problem);
  if (options.snap < 68) bad_usage("--snap is at least 68 bytes (an IPv4 and a TCP header)");
  if (options.txqueuelen < 1) bad_usage("--txqueuelen is at least 1");
  return options;
}

void enter_netns(const std::string& name) {
  const std::string path = name.find('/') == std::string::npos ? "/var/run/netns/" + name : name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "impair_relay: cannot open " + path);
  const int result = ::setns(fd, CLONE_NEWNET);
  const int error = errno;
  ::close(fd);
  if (result < 0) throw std::system_error(error, std::generic_category(), "impair_relay: cannot enter " + path);
}

// A TUN device made inside the side's namespace, its kernel side configured.
std::unique_ptr<utcp::TunLink> open_side(const Side& side, int txqueuelen) {
  enter_netns(side.netns);
  // The kernel drops what does not fit the device's queue while the relay is
  // busy, a loss neither side's settings asked for.
  auto link = std::make_unique<utcp::TunLink>(
      utcp::TunLinkConfig{.name = "impair0", .mtu = 1500, .queue_length = static_cast<std::size_t>(txqueuelen)});
  link->configure_kernel_side(side.address, side.prefix_length);
  return link;
}

std::chrono::microseconds since_epoch() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
}

void print_counters(const char* direction, const ImpairmentCounters& counters, const utcp::TunLinkCounters& out) {
  std::printf(
      "{\"bench\":\"impair_relay\",\"direction\":\"%s\",\"packets_in\":%llu,\"lost\":%llu,\"over_limit\":%llu,"
      "\"duplicated\":%llu,\"reordered\":%llu,\"corrupted\":%llu,\"packets_out\":%llu,\"write_errors\":%llu}\n",
      direction, static_cast<unsigned long long>(counters.packets_in), static_cast<unsigned long long>(counters.lost),
      static_cast<unsigned long long>(counters.over_limit), static_cast<unsigned long long>(counters.duplicated),
      static_cast<unsigned long long>(counters.reordered), static_cast<unsigned long long>(counters.corrupted),
      static_cast<unsigned long long>(counters.packets_out), static_cast<unsigned long long>(out.send_errors));
}

int run(const Options& options) {
  // Signals arrive on a descriptor, beside the devices, so a stop never
  // interrupts a packet half handled.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &stop_signals, nullptr) < 0) throw std::system_error(errno, std::generic_category(), "sigprocmask");
  const int signal_fd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (signal_fd < 0) throw std::system_error(errno, std::generic_category(), "signalfd");

  std::unique_ptr<utcp::TunLink> left = open_side(options.left, options.txqueuelen);
  std::unique_ptr<utcp::TunLink> right = open_side(options.right, options.txqueuelen);
  std::unique_ptr<utcp::wire::PcapWriter> pcap;
  if (options.pcap) pcap = std::make_unique<utcp::wire::PcapWriter>(*options.pcap, options.snap);

  // Distinct seeds: the directions' decisions are independent of each other.
  ImpairedDirection left_to_right(options.settings, options.seed);
  ImpairedDirection right_to_left(options.settings, options.seed ^ 0x9e3779b97f4a7c15ull);

  constexpr std::size_t read_budget = 64;
  for (;;) {
    Clock::time_point now = Clock::now();
    std::optional<Clock::time_point> next;
    for (const ImpairedDirection* direction : {&left_to_right, &right_to_left}) {
      const auto release = direction->next_release();
      if (release && (!next || *release < *next)) next = release;
    }
    timespec timeout{};
    if (next && *next > now) {
      const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(*next - now);
      timeout.tv_sec = static_cast<time_t>(wait.count() / 1'000'000'000);
      timeout.tv_nsec = static_cast<long>(wait.count() % 1'000'000'000);
    }
    pollfd entries[] = {{left->fd(), POLLIN, 0}, {right->fd(), POLLIN, 0}, {signal_fd, POLLIN, 0}};
    // Nothing waiting: sleep until a packet or a signal comes.
    if (::ppoll(entries, std::size(entries), next ? &timeout : nullptr, nullptr) < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "ppoll");
    if (entries[2].revents & POLLIN) break;

    now = Clock::now();
    const auto take_in = [&](utcp::TunLink& from, ImpairedDirection& direction) {
      from.receive(
          [&](std::span<const std::uint8_t> packet) {
            if (pcap) pcap->write(since_epoch(), packet);
            direction.accept(packet, now);
          },
          read_budget);
    };
    take_in(*left, left_to_right);
    take_in(*right, right_to_left);
    now = Clock::now();
    left_to_right.release_due(now, [&](std::span<const std::uint8_t> packet) { right->transmit({}, packet); });
    right_to_left.release_due(now, [&](std::span<const std::uint8_t> packet) { left->transmit({}, packet); });
  }
  if (pcap) pcap->flush();
  print_counters("left_to_right", left_to_right.counters(), right->counters());
  print_counters("right_to_left", right_to_left.counters(), left->counters());
  ::close(signal_fd);
  return 0;
}

}  // namespace
}  // namespace impair

int main(int argc, char** argv) {
  const impair::Options options = impair::parse_options(argc, argv);
  try {
    return impair::run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
