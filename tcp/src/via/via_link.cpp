#include "utcp/via_link.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>
#include <utility>

#include "utcp/ipv4.hpp"
#include "via/log.hpp"

namespace utcp {
namespace {

constexpr std::uint32_t send_buffer_wait_ms = 1'000;

void check(via::Result result, const char* step) {
  if (result == via::Result::success) return;
  std::string message = "utcp: VIA link: ";
  message += step;
  message += ": ";
  message += via::describe(result);
  throw std::runtime_error(message);
}

}  // namespace

wire::Ipv4Address AddressPlan::address_of(int rank) const {
  return {network.value + static_cast<std::uint32_t>(rank) + 1};
}

std::optional<int> AddressPlan::rank_of(wire::Ipv4Address address, int size) const {
  const std::uint32_t host = address.value - network.value;  // wraps for addresses below the network
  if (host == 0 || host > static_cast<std::uint32_t>(size)) return std::nullopt;
  return static_cast<int>(host - 1);
}

std::optional<AddressPlan> AddressPlan::parse(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto network = wire::Ipv4Address::parse(text.substr(0, slash));
  const std::string_view prefix_text = text.substr(slash + 1);
  int prefix = 0;
  const auto [end, error] = std::from_chars(prefix_text.data(), prefix_text.data() + prefix_text.size(), prefix);
  if (!network || error != std::errc() || end != prefix_text.data() + prefix_text.size() || prefix < 8 || prefix > 30)
    return std::nullopt;
  const std::uint32_t host_bits = ~(~std::uint32_t{0} << (32 - prefix));
  if (network->value & host_bits) return std::nullopt;
  return AddressPlan{*network, prefix};
}

ViaLink::ViaLink(via::Nic& nic, int rank, int size, const ViaLinkConfig& config)
    : rank_(rank), size_(size), config_(config), nic_(nic) {
  if (rank < 0 || size < 1 || rank >= size) throw std::invalid_argument("utcp: VIA link: rank outside the job");
  if (config.mtu < 68 || config.mtu > wire::ipv4_max_total_length)  // RFC 791: every host takes 68
    throw std::invalid_argument("utcp: VIA link: MTU must be 68 to 65535");
  if (config.receive_buffers_per_peer == 0 || config.send_buffers == 0)
    throw std::invalid_argument("utcp: VIA link: needs receive and send buffers");
  const int host_bits = 32 - config.addresses.prefix_length;
  if (host_bits < 2 || host_bits > 24 || static_cast<std::uint64_t>(size) > (std::uint64_t{1} << host_bits) - 2)
    throw std::invalid_argument("utcp: VIA link: the job has more ranks than the network has host addresses");

  via::MeshOptions options;
  options.service = "utcp";
  options.reliability = VIP_SERVICE_UNRELIABLE;
  // Loss is IP's to handle: a credit lost with a dropped frame would stall the peer for good.
  options.flow_control = false;
  options.message_bytes = config.mtu;
  options.receives_per_peer = static_cast<std::uint32_t>(config.receive_buffers_per_peer);
  options.send_descriptors = static_cast<std::uint32_t>(config.send_buffers);
  options.bounce_buffers = static_cast<std::uint32_t>(config.send_buffers);
  options.backlog_limit = config.receive_buffers_per_peer;
  check(via::Mesh::open(nic, rank, size, options, *this, mesh_), "open the mesh");

  const std::size_t pool_bytes = config.send_buffers * config.mtu;
  send_buffers_ = std::make_unique_for_overwrite<std::uint8_t[]>(pool_bytes);
  // Unregistered (the NIC's table is full), packets are built elsewhere and copied.
  if (nic.register_memory(send_buffers_.get(), pool_bytes, via::MemAttributes{mesh_->ptag(), false, false},
                          send_buffers_handle_) != via::Result::success) {
    send_buffers_handle_ = 0;
    return;
  }
  for (std::size_t i = config.send_buffers; i > 0; --i) free_send_buffers_.push_back(static_cast<std::uint32_t>(i - 1));
}

ViaLink::~ViaLink() {
  mesh_.reset();  // its VIs first: nothing may still send from the buffers
  if (send_buffers_handle_) nic_.deregister_memory(send_buffers_.get(), send_buffers_handle_);
}

std::span<std::uint8_t> ViaLink::packet_buffer() {
  if (free_send_buffers_.empty()) return {};
  return {send_buffers_.get() + std::size_t{free_send_buffers_.back()} * config_.mtu, config_.mtu};
}

std::optional<std::uint32_t> ViaLink::take_send_buffer(std::span<const std::uint8_t> packet) {
  if (free_send_buffers_.empty()) return std::nullopt;
  const std::uint32_t lent = free_send_buffers_.back();  // what packet_buffer() gave
  if (packet.data() != send_buffers_.get() + std::size_t{lent} * config_.mtu) return std::nullopt;
  free_send_buffers_.pop_back();
  return lent;
}

bool ViaLink::reaches(wire::Ipv4Address next_hop) const {
  const std::optional<int> peer = config_.addresses.rank_of(next_hop, size_);
  return peer && mesh_->reachable(*peer);
}

bool ViaLink::transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) {
  if (packets_before_gathering_ > 0) --packets_before_gathering_;
  // Taken first: a send that completes while this one waits returns its buffer to the list.
  const std::optional<std::uint32_t> buffer = take_send_buffer(packet);
  const auto send = [&] {
    const std::optional<int> peer = config_.addresses.rank_of(next_hop, size_);
    if (packet.size() > config_.mtu || !peer || !mesh_->reachable(*peer)) return via::Mesh::Sent::dropped;
    if (mesh_->backlog(*peer) >= config_.receive_buffers_per_peer) {
      // What arrives meanwhile waits for the next receive(): the stack may be
      // inside one now, handling the packet this one answers.
      const PacketSink* sink = std::exchange(sink_, nullptr);
      mesh_->wait_until([&] { return mesh_->backlog(*peer) < config_.receive_buffers_per_peer; },
                        send_buffer_wait_ms);
      sink_ = sink;
    }
    if (!buffer) return mesh_->send(*peer, std::as_bytes(packet));
    return mesh_->send_registered(*peer, std::as_bytes(packet), send_buffers_handle_, *buffer);
  };
  const via::Mesh::Sent sent = send();
  // Posted from the buffer: it is the VI's until on_sent. Copied or dropped: free now.
  if (buffer && sent != via::Mesh::Sent::posted) free_send_buffers_.push_back(*buffer);
  return sent != via::Mesh::Sent::dropped;
}

std::size_t ViaLink::max_gathered(wire::Ipv4Address next_hop) const {
  const std::optional<int> peer = config_.addresses.rank_of(next_hop, size_);
  // Only while no send waits in a VI's queue: an inline send cannot pass
  // one, and the mesh would copy the packet into a bounce buffer instead.
  if (!peer || packets_before_gathering_ > 0 || !mesh_->idle()) return 0;
  return std::min(config_.mtu, mesh_->max_inline_send(*peer));
}

bool ViaLink::transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                                std::span<const std::uint8_t> body) {
  const std::optional<int> peer = config_.addresses.rank_of(next_hop, size_);
  if (head.size() + body.size() > config_.mtu || !peer || !mesh_->reachable(*peer)) return false;
  const std::uint64_t inline_before = mesh_->counters().inline_sends;
  const via::Mesh::Sent sent = mesh_->send(*peer, std::as_bytes(head), std::as_bytes(body));
  // The link had no room: the mesh copied the packet into a bounce buffer
  // or its backlog. The next send_buffers packets are built in the
  // registered buffers again, which wait for room without a copy: a link
  // that was full once is likely to be full again soon, and each gathered
  // packet that finds it so costs a copy.
  if (mesh_->counters().inline_sends == inline_before) packets_before_gathering_ = config_.send_buffers;
  return sent != via::Mesh::Sent::dropped;
}

void ViaLink::on_peer_failed(int peer, const std::string& why) {
  VIA_LOG(warn, "utcp", "the link to rank %d failed (%s): packets to %s are dropped from now on", peer, why.c_str(),
          config_.addresses.address_of(peer).to_string().c_str());
}

void ViaLink::on_message(int, std::span<std::byte> message) {
  const std::span packet(reinterpret_cast<const std::uint8_t*>(message.data()), message.size());
  if (sink_)
    (*sink_)(packet);
  else
    waiting_.emplace_back(packet.begin(), packet.end());
}

std::size_t ViaLink::receive(const PacketSink& deliver, std::size_t budget) {
  std::size_t count = 0;
  for (; count < budget && !waiting_.empty(); ++count) {
    const std::vector<std::uint8_t> packet = std::move(waiting_.front());
    waiting_.pop_front();
    deliver(packet);
  }
  if (count == budget) return count;
  sink_ = &deliver;
  count += static_cast<std::size_t>(mesh_->poll(budget - count));
  sink_ = nullptr;
  return count;
}

}  // namespace utcp
