#include "utcp/via_host.hpp"

#include "host/steady_clock_wait.hpp"

#include <via/config.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

namespace utcp {
ViaHostConfig ViaHostConfig::from_environment() {
  ViaHostConfig config;
  config.size = static_cast<int>(via::config::integer("VIASTACK_SIZE"));
  config.rank = static_cast<int>(via::config::integer("VIASTACK_RANK"));
  config.link.mtu = static_cast<std::size_t>(via::config::integer("VIASTACK_UTCP_MTU"));
  config.link.receive_buffers_per_peer =
      static_cast<std::size_t>(via::config::integer("VIASTACK_UTCP_RECEIVE_BUFFERS"));
  // The table checks the network's form (AddressPlan's rules); its default is AddressPlan's.
  if (const auto network = via::config::text_if_set("VIASTACK_UTCP_NETWORK"))
    config.link.addresses = AddressPlan::parse(*network).value();
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
  stack_->set_clock([] { return std::chrono::steady_clock::now(); });
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
