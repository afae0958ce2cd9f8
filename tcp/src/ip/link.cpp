#include "utcp/link.hpp"

namespace utcp {

namespace {

std::vector<std::uint8_t> joined(std::span<const std::uint8_t> head, std::span<const std::uint8_t> body) {
  std::vector<std::uint8_t> packet(head.begin(), head.end());
  packet.insert(packet.end(), body.begin(), body.end());
  return packet;
}

}  // namespace

bool Link::transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                             std::span<const std::uint8_t> body) {
  return transmit(next_hop, joined(head, body));
}

std::pair<std::unique_ptr<MemoryLink>, std::unique_ptr<MemoryLink>> MemoryLink::make_pair(std::size_t mtu) {
  auto wire = std::make_shared<Wire>();
  return {std::unique_ptr<MemoryLink>(new MemoryLink(wire, 0, mtu)),
          std::unique_ptr<MemoryLink>(new MemoryLink(wire, 1, mtu))};
}

bool MemoryLink::transmit(wire::Ipv4Address, std::span<const std::uint8_t> packet) {
  if (packet.size() > mtu_) return false;
  wire_->queues[1 - side_].emplace_back(packet.begin(), packet.end());
  return true;
}

std::size_t MemoryLink::receive(const PacketSink& deliver, std::size_t budget) {
  std::size_t count = 0;
  while (count < budget && !inbox().empty()) {
    const std::vector<std::uint8_t> packet = std::move(inbox().front());
    inbox().pop_front();
    deliver(packet);
    ++count;
  }
  return count;
}

std::vector<std::vector<std::uint8_t>> MemoryLink::take_all() {
  std::vector<std::vector<std::uint8_t>> packets(std::make_move_iterator(inbox().begin()),
                                                 std::make_move_iterator(inbox().end()));
  inbox().clear();
  return packets;
}

TracingLink::TracingLink(Link& inner, wire::PcapWriter& writer, Clock clock)
    : inner_(inner), writer_(writer), clock_(std::move(clock)) {}

bool TracingLink::transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) {
  if (!inner_.transmit(next_hop, packet)) return false;
  writer_.write(clock_(), packet);
  return true;
}

bool TracingLink::transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                                    std::span<const std::uint8_t> body) {
  if (!inner_.transmit_gathered(next_hop, head, body)) return false;
  writer_.write(clock_(), joined(head, body));
  return true;
}

std::size_t TracingLink::receive(const PacketSink& deliver, std::size_t budget) {
  return inner_.receive(
      [this, &deliver](std::span<const std::uint8_t> packet) {
        writer_.write(clock_(), packet);
        deliver(packet);
      },
      budget);
}

std::chrono::microseconds TracingLink::system_time() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
}

}  // namespace utcp
