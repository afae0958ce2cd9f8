#include "utcp/tun_link.hpp"

#include "host/steady_clock_wait.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>

namespace utcp {
namespace {

// The longest IPv4 packet, and so the largest MTU.
constexpr std::size_t largest_packet = 65535;
// A bound on the device's queue, so that a typo cannot let the kernel hold
// gigabytes for a stalled program.
constexpr std::size_t largest_queue_length = 1 << 16;

std::string concat(std::initializer_list<std::string_view> pieces) {
  std::string text;
  for (const std::string_view piece : pieces) text += piece;
  return text;
}

[[noreturn]] void fail(int error, std::initializer_list<std::string_view> what) {
  throw std::system_error(error, std::generic_category(), concat(what));
}

ifreq request_for(const std::string& name) {
  ifreq request{};
  std::memcpy(request.ifr_name, name.data(), std::min(name.size(), sizeof request.ifr_name - 1));
  return request;
}

sockaddr ipv4_sockaddr(std::uint32_t address) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(address);
  sockaddr out{};
  std::memcpy(&out, &in, sizeof in);
  return out;
}

// One interface ioctl (SIOCSIFMTU, ...) on the device, through a socket of
// this network namespace; throws naming `what` when it fails.
void interface_ioctl(unsigned long operation, ifreq& request, std::string_view what) {
  const int socket_fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (socket_fd < 0) fail(errno, {"utcp: cannot open a socket to configure TUN device '", request.ifr_name, "'"});
  const int result = ::ioctl(socket_fd, operation, &request);
  const int error = errno;
  ::close(socket_fd);
  if (result < 0) fail(error, {"utcp: cannot ", what, " of TUN device '", request.ifr_name, "'"});
}

}  // namespace

TunLink::TunLink(const TunLinkConfig& config) : mtu_(config.mtu), buffer_(largest_packet) {
  if (config.name.empty() || config.name.size() >= IFNAMSIZ)
    fail(EINVAL, {"utcp: a TUN device name has 1 to 15 characters, not '", config.name, "'"});
  if (config.mtu < 68 || config.mtu > largest_packet)
    fail(EINVAL, {"utcp: a TUN device's MTU is 68 to 65535, not ", std::to_string(config.mtu)});
  if (config.queue_length < 1 || config.queue_length > largest_queue_length)
    fail(EINVAL, {"utcp: a TUN device's queue length is 1 to ", std::to_string(largest_queue_length), ", not ",
                  std::to_string(config.queue_length)});
  fd_ = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(errno, {"utcp: cannot open /dev/net/tun (it needs the tun module and CAP_NET_ADMIN)"});
  try {
    ifreq request = request_for(config.name);
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    if (::ioctl(fd_, TUNSETIFF, &request) < 0) fail(errno, {"utcp: cannot create TUN device '", config.name, "'"});
    name_ = request.ifr_name;
    ifreq mtu_request = request_for(name_);
    mtu_request.ifr_mtu = static_cast<int>(config.mtu);
    interface_ioctl(SIOCSIFMTU, mtu_request, concat({"set the MTU to ", std::to_string(config.mtu)}));
    ifreq queue_request = request_for(name_);
    queue_request.ifr_qlen = static_cast<int>(config.queue_length);
    interface_ioctl(SIOCSIFTXQLEN, queue_request,
                    concat({"set the queue length to ", std::to_string(config.queue_length)}));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TunLink::~TunLink() { ::close(fd_); }

bool TunLink::transmit(wire::Ipv4Address, std::span<const std::uint8_t> packet) {
  if (packet.size() > mtu_) return false;
  ssize_t written;
  do {
    written = ::write(fd_, packet.data(), packet.size());
  } while (written < 0 && errno == EINTR);
  if (written != static_cast<ssize_t>(packet.size())) {
    ++counters_.send_errors;
    return false;
  }
  ++counters_.packets_out;
  return true;
}

std::size_t TunLink::receive(const PacketSink& deliver, std::size_t budget) {
  std::size_t count = 0;
  while (count < budget) {
    const ssize_t size = ::read(fd_, buffer_.data(), buffer_.size());
    if (size < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) ++counters_.receive_errors;
      break;
    }
    ++count;
    ++counters_.packets_in;
    deliver(std::span<const std::uint8_t>(buffer_.data(), static_cast<std::size_t>(size)));
  }
  return count;
}

bool TunLink::wait_readable(std::chrono::milliseconds timeout) const {
  pollfd entry{fd_, POLLIN, 0};
  return ::poll(&entry, 1, static_cast<int>(timeout.count())) > 0 && (entry.revents & POLLIN);
}

void TunLink::configure_kernel_side(wire::Ipv4Address address, int prefix_length) {
  if (prefix_length < 1 || prefix_length > 32)
    fail(EINVAL, {"utcp: a prefix length is 1 to 32, not ", std::to_string(prefix_length)});
  ifreq request = request_for(name_);
  request.ifr_addr = ipv4_sockaddr(address.value);
  interface_ioctl(SIOCSIFADDR, request, concat({"set the address ", address.to_string()}));
  request = request_for(name_);
  request.ifr_netmask = ipv4_sockaddr(~std::uint32_t{0} << (32 - prefix_length));
  interface_ioctl(SIOCSIFNETMASK, request, concat({"set the prefix length ", std::to_string(prefix_length)}));
  request = request_for(name_);
  interface_ioctl(SIOCGIFFLAGS, request, "read the flags");
  request.ifr_flags |= IFF_UP;
  interface_ioctl(SIOCSIFFLAGS, request, "bring up");
}

TunHost::TunHost(const TunHostConfig& config) : link_(std::make_unique<TunLink>(config.link)) {
  if (config.kernel_address) link_->configure_kernel_side(*config.kernel_address, config.prefix_length);
  Link* link = link_.get();
  if (config.trace) {
    trace_writer_ = std::make_unique<wire::PcapWriter>(*config.trace);
    tracing_link_ = std::make_unique<TracingLink>(*link_, *trace_writer_);
    link = tracing_link_.get();
  }
  StackConfig stack_config = config.stack;
  stack_config.address = config.address;
  stack_config.prefix_length = config.prefix_length;
  stack_ = std::make_unique<Stack>(*link, stack_config);
  stack_->set_waiter(this);
  // The time for the first socket call; packets wait for the first poll.
  stack_->set_time(std::chrono::steady_clock::now());
  stack_->set_clock([] { return std::chrono::steady_clock::now(); });
}

bool TunHost::poll() { return host::poll_now(*stack_); }

bool TunHost::wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) {
  return host::wait_on_steady_clock(*stack_, ready, timeout, [&](std::chrono::milliseconds limit) {
    if (limit.count() > 0) link_->wait_readable(limit);
    return false;
  });
}

}  // namespace utcp
