#include "utcp/via_host.hpp"

#include "host/steady_clock_wait.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace utcp {
namespace {

// The integer in the variable `name`, or `fallback` when it is unset.
long integer_from_environment(const char* name, long fallback, long low, long high) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  long value = 0;
  const std::string_view view(text);
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc() || end != view.data() + view.size() || value < low || value > high) {
    std::string message = "utcp: bad ";
    message += name;
    message += " '";
    message += text;
    message += "': expected ";
    message += std::to_string(low);
    message += " to ";
    message += std::to_string(high);
    throw std::invalid_argument(message);
  }
  return value;
}

}  // namespace

ViaHostConfig ViaHostConfig::from_environment() {
  ViaHostConfig config;
  config.size = static_cast<int>(integer_from_environment("VIASTACK_SIZE", 1, 1, 1 << 20));
  config.rank = static_cast<int>(integer_from_environment("VIASTACK_RANK", 0, 0, config.size - 1));
  config.link.mtu = static_cast<std::size_t>(
      integer_from_environment("VIASTACK_UTCP_MTU", static_cast<long>(config.link.mtu), 68, 65535));
  if (const char* network = std::getenv("VIASTACK_UTCP_NETWORK"); network && *network) {
    const auto plan = AddressPlan::parse(network);
    if (!plan) {
      std::string message = "utcp: bad VIASTACK_UTCP_NETWORK '";
      message += network;
      message += "': expected a network such as 10.0.0.0/16 (prefix 8 to 30)";
      throw std::invalid_argument(message);
    }
    config.link.addresses = *plan;
  }
  config.trace = wire::trace_file_from_environment();
  return config;
}

std::filesystem::path trace_file_for_rank(const std::filesystem::path& file, int rank, int size) {
  if (size <= 1) return file;
  std::filesystem::path name = file.stem();
  name += ".rank";
  name += std::to_string(rank);
  name += file.extension();
  return file.parent_path() / name;
}

ViaHost::ViaHost(const ViaHostConfig& config) : config_(config) {
  std::unique_ptr<via::Nic> nic;
  if (const via::Result opened = via::Nic::open("", nic); opened != via::Result::success) {
    std::string message = "utcp: cannot open the NIC: ";
    message += via::describe(opened);
    throw std::runtime_error(message);
  }
  own_nic_ = std::move(nic);
  nic_ = own_nic_.get();
  start();
}

ViaHost::ViaHost(via::Nic& nic, const ViaHostConfig& config) : config_(config), nic_(&nic) { start(); }

void ViaHost::start() {
  link_ = std::make_unique<ViaLink>(*nic_, config_.rank, config_.size, config_.link);
  Link* link = link_.get();
  if (config_.trace) {
    trace_writer_ = std::make_unique<wire::PcapWriter>(trace_file_for_rank(*config_.trace, config_.rank, config_.size));
    tracing_link_ = std::make_unique<TracingLink>(*link_, *trace_writer_);
    link = tracing_link_.get();
  }
  StackConfig stack_config = config_.stack;
  stack_config.address = link_->address();
  stack_config.prefix_length = config_.link.addresses.prefix_length;
  stack_ = std::make_unique<Stack>(*link, stack_config);
  stack_->set_waiter(this);
  // The time for the first socket call; packets wait for the first poll, when
  // the program's sockets exist.
  stack_->set_time(std::chrono::steady_clock::now());
}

bool ViaHost::poll() { return host::poll_now(*stack_); }

bool ViaHost::wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) {
  return host::wait_on_steady_clock(*stack_, ready, timeout, [&](std::chrono::milliseconds limit) {
    // The NIC sleeps until a frame comes; ready() may consume what it finds
    // (a completion), so it is asked inside and not again after.
    bool became_ready = false;
    nic_->wait(
        [&] {
          const bool moved = poll();
          became_ready = ready();
          return moved || became_ready;
        },
        static_cast<std::uint32_t>(std::max<long>(limit.count(), 1)));
    return became_ready;
  });
}

}  // namespace utcp
