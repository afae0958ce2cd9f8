#include "utcp/via_link.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "utcp/ipv4.hpp"

namespace utcp {
namespace {

constexpr std::size_t descriptor_stride = (sizeof(VIP_DESCRIPTOR) + VIP_DESCRIPTOR_ALIGNMENT - 1) /
                                          VIP_DESCRIPTOR_ALIGNMENT * VIP_DESCRIPTOR_ALIGNMENT;
constexpr std::uint32_t connect_timeout_ms = 60'000;
constexpr std::uint32_t send_buffer_wait_ms = 1'000;
const via::NetAddress utcp_discriminator{{}, {'u', 't', 'c', 'p'}};

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
    : nic_(nic),
      rank_(rank),
      size_(size),
      config_(config),
      buffer_stride_((config.mtu + 63) / 64 * 64),
      descriptor_count_(static_cast<std::size_t>(size) * config.receive_buffers_per_peer + config.send_buffers),
      vis_(static_cast<std::size_t>(size), nullptr) {
  if (rank < 0 || size < 1 || rank >= size) throw std::invalid_argument("utcp: VIA link: rank outside the job");
  if (config.mtu < 68 || config.mtu > wire::ipv4_max_total_length)  // RFC 791: every host takes 68
    throw std::invalid_argument("utcp: VIA link: MTU must be 68 to 65535");
  if (config.receive_buffers_per_peer == 0 || config.send_buffers == 0)
    throw std::invalid_argument("utcp: VIA link: needs receive and send buffers");
  const int host_bits = 32 - config.addresses.prefix_length;
  if (host_bits < 2 || host_bits > 24 || static_cast<std::uint64_t>(size) > (std::uint64_t{1} << host_bits) - 2)
    throw std::invalid_argument("utcp: VIA link: the job has more ranks than the network has host addresses");

  try {
    check(nic.create_ptag(ptag_), "create a protection tag");
    arena_bytes_ = (descriptor_count_ * (descriptor_stride + buffer_stride_) + 4095) / 4096 * 4096;
    arena_ = static_cast<std::uint8_t*>(std::aligned_alloc(4096, arena_bytes_));
    if (!arena_) throw std::runtime_error("utcp: VIA link: cannot allocate packet buffers");
    std::memset(arena_, 0, arena_bytes_);
    check(nic.register_memory(arena_, arena_bytes_, via::MemAttributes{ptag_, false, false}, arena_handle_),
          "register packet buffers");
    check(nic.create_cq(config.send_buffers, send_cq_), "create the send completion queue");
    check(nic.create_cq(descriptor_count_, receive_cq_), "create the receive completion queue");
    // Receive buffers are indexed by peer rank (our own range stays unused,
    // which keeps the arithmetic plain); the send buffers follow them.
    for (std::size_t i = 0; i < config.send_buffers; ++i)
      free_sends_.push_back(static_cast<std::size_t>(size) * config.receive_buffers_per_peer + i);

    via::ViAttributes attributes;
    attributes.reliability = VIP_SERVICE_UNRELIABLE;
    attributes.ptag = ptag_;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      check(nic.create_vi(attributes, send_cq_, receive_cq_, vis_[peer]), "create a VI");
      for (std::size_t i = 0; i < config.receive_buffers_per_peer; ++i)
        if (!post_receive(*vis_[peer], static_cast<std::size_t>(peer) * config.receive_buffers_per_peer + i))
          throw std::runtime_error("utcp: VIA link: cannot post receive buffers");
      via::NetAddress remote{{}, utcp_discriminator.discriminator};
      std::string name = "rank";
      name += std::to_string(peer);
      check(nic.resolve(name, 0, remote.host), "resolve a peer rank");
      check(vis_[peer]->connect_peer_request(utcp_discriminator, remote, connect_timeout_ms), "connect to a peer");
    }
    for (via::Vi* vi : vis_)
      if (vi) check(vi->connect_peer_wait(), "connect to a peer");
  } catch (...) {
    release();
    throw;
  }
}

ViaLink::~ViaLink() { release(); }

void ViaLink::release() {
  for (via::Vi*& vi : vis_) {
    if (!vi) continue;
    if (vi->state() == via::ViState::connected) vi->disconnect();
    nic_.destroy_vi(vi);
    vi = nullptr;
  }
  if (send_cq_) nic_.destroy_cq(std::exchange(send_cq_, nullptr));
  if (receive_cq_) nic_.destroy_cq(std::exchange(receive_cq_, nullptr));
  if (arena_handle_) nic_.deregister_memory(arena_, std::exchange(arena_handle_, {}));
  std::free(std::exchange(arena_, nullptr));
  if (ptag_) nic_.destroy_ptag(std::exchange(ptag_, 0));
}

std::uint8_t* ViaLink::buffer(std::size_t index) const {
  return arena_ + descriptor_count_ * descriptor_stride + index * buffer_stride_;
}

VIP_DESCRIPTOR* ViaLink::descriptor(std::size_t index) const {
  return reinterpret_cast<VIP_DESCRIPTOR*>(arena_ + index * descriptor_stride);
}

std::size_t ViaLink::index_of(const VIP_DESCRIPTOR* descriptor) const {
  return static_cast<std::size_t>(reinterpret_cast<const std::uint8_t*>(descriptor) - arena_) / descriptor_stride;
}

bool ViaLink::post_receive(via::Vi& vi, std::size_t index) {
  VIP_DESCRIPTOR* d = descriptor(index);
  std::memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->CS.Length = static_cast<VIP_UINT32>(config_.mtu);
  d->DS[0].Local.Data.Address = buffer(index);
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = static_cast<VIP_UINT32>(config_.mtu);
  return vi.post_recv(d, arena_handle_) == via::Result::success;
}

bool ViaLink::reaches(wire::Ipv4Address next_hop) const {
  const std::optional<int> peer = config_.addresses.rank_of(next_hop, size_);
  return peer && vis_[*peer] && vis_[*peer]->state() == via::ViState::connected;
}

void ViaLink::reap_sends() {
  via::Cq::Entry entry;
  while (send_cq_->size() && send_cq_->done(entry) == via::Result::success) {
    VIP_DESCRIPTOR* d;
    if (entry.vi->send_done(d) != via::Result::success) continue;
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) ++counters_.send_errors;
    free_sends_.push_back(index_of(d));
  }
}

bool ViaLink::transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) {
  if (packet.size() > config_.mtu || !reaches(next_hop)) return false;
  via::Vi& vi = *vis_[*config_.addresses.rank_of(next_hop, size_)];
  reap_sends();
  if (free_sends_.empty()) {
    ++counters_.send_buffer_waits;
    nic_.wait(
        [this] {
          reap_sends();
          return !free_sends_.empty();
        },
        send_buffer_wait_ms);
    if (free_sends_.empty()) return false;
  }
  const std::size_t index = free_sends_.back();
  free_sends_.pop_back();
  std::memcpy(buffer(index), packet.data(), packet.size());
  VIP_DESCRIPTOR* d = descriptor(index);
  std::memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->CS.Length = static_cast<VIP_UINT32>(packet.size());
  d->DS[0].Local.Data.Address = buffer(index);
  d->DS[0].Local.Handle = arena_handle_;
  d->DS[0].Local.Length = static_cast<VIP_UINT32>(packet.size());
  if (vi.post_send(d, arena_handle_) != via::Result::success) {
    free_sends_.push_back(index);
    return false;
  }
  return true;
}

std::size_t ViaLink::receive(const PacketSink& deliver, std::size_t budget) {
  std::size_t count = 0;
  via::Cq::Entry entry;
  while (count < budget && receive_cq_->done(entry) == via::Result::success) {
    VIP_DESCRIPTOR* d;
    if (entry.vi->recv_done(d) != via::Result::success) continue;
    const std::size_t index = index_of(d);
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
      ++counters_.receive_errors;
    } else {
      deliver(std::span<const std::uint8_t>(buffer(index), d->CS.Length));
      ++count;
    }
    // A broken VI takes no more receives: its peer is gone.
    if (entry.vi->state() == via::ViState::connected) post_receive(*entry.vi, index);
  }
  reap_sends();
  return count;
}

}  // namespace utcp
