// Links: what carries the stack's IPv4 packets to its neighbours. A link
// moves whole packets and knows nothing of IP beyond the next hop's address;
// the stack above it routes, fragments and reassembles. Implementations: an
// in-memory pair (here, for tests), VIA unreliable VIs (via_link.hpp), and a
// decorator that writes every packet to a pcap file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "utcp/address.hpp"
#include "utcp/pcap.hpp"

namespace utcp {

using PacketSink = std::function<void(std::span<const std::uint8_t>)>;

class Link {
 public:
  virtual ~Link() = default;
  // The largest IPv4 packet the link carries, header included.
  virtual std::size_t mtu() const = 0;
  // Whether a packet for this neighbour can leave on the link.
  virtual bool reaches(wire::Ipv4Address next_hop) const = 0;
  // Hands one IPv4 packet of at most mtu() bytes to the link, for the
  // neighbour next_hop. False if it could not leave (no such neighbour, the
  // neighbour is gone, no room): the caller counts the drop.
  virtual bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) = 0;
  // A buffer of mtu() bytes, the link's own, to build the next packet in; a
  // packet built there and given to transmit() leaves from it without a
  // copy. Valid until that transmit(). Empty when the link has none to lend
  // (the default, or all in flight): the caller builds the packet elsewhere.
  virtual std::span<std::uint8_t> packet_buffer() { return {}; }
  // The longest packet for next_hop that transmit_gathered() would copy
  // straight from its two pieces into the link now, with no copy before
  // (0, the default: none; the caller builds whole packets).
  virtual std::size_t max_gathered(wire::Ipv4Address) const { return 0; }
  // As transmit(), for the packet `head` then `body`, which may lie apart:
  // a segment's headers and its payload where the connection keeps it. The
  // default joins them and transmits the whole.
  virtual bool transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                                 std::span<const std::uint8_t> body);
  // Passes each packet that has arrived, at most `budget` of them, to
  // deliver; the bytes are valid only during that call. Returns how many.
  virtual std::size_t receive(const PacketSink& deliver, std::size_t budget) = 0;
  // How many packets from one neighbour the link holds before it drops what
  // comes next (a VIA link's receive buffers per peer, with no flow control
  // beneath them): the window TCP offers stays within them. 0, the default:
  // no such bound.
  virtual std::size_t receive_packets_per_peer() const { return 0; }
};

// One end of an in-memory wire: what one end transmits, the other receives,
// in order, whatever the next hop. For tests: a stack on one end, and the
// test (or a second stack) on the other.
class MemoryLink final : public Link {
 public:
  static std::pair<std::unique_ptr<MemoryLink>, std::unique_ptr<MemoryLink>> make_pair(std::size_t mtu = 9000);

  std::size_t mtu() const override { return mtu_; }
  bool reaches(wire::Ipv4Address) const override { return true; }
  // Refuses a packet longer than the MTU, as a real link would.
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) override;
  std::size_t receive(const PacketSink& deliver, std::size_t budget) override;

  // Packets waiting at this end, and taking them out whole (for tests that
  // look at, reorder or drop what the other end sent).
  std::size_t pending() const { return inbox().size(); }
  std::vector<std::vector<std::uint8_t>> take_all();

 private:
  struct Wire {
    std::deque<std::vector<std::uint8_t>> queues[2];
  };
  MemoryLink(std::shared_ptr<Wire> wire, int side, std::size_t mtu) : wire_(std::move(wire)), side_(side), mtu_(mtu) {}
  std::deque<std::vector<std::uint8_t>>& inbox() const { return wire_->queues[side_]; }

  std::shared_ptr<Wire> wire_;
  int side_;
  std::size_t mtu_;
};

// Writes every packet that crosses the inner link, both ways, to a pcap
// file (VIASTACK_TRACE). The clock gives each record's time since the Unix
// epoch; by default the system clock, a virtual one in tests.
class TracingLink final : public Link {
 public:
  using Clock = std::function<std::chrono::microseconds()>;
  TracingLink(Link& inner, wire::PcapWriter& writer, Clock clock = system_time);

  std::size_t mtu() const override { return inner_.mtu(); }
  bool reaches(wire::Ipv4Address next_hop) const override { return inner_.reaches(next_hop); }
  std::span<std::uint8_t> packet_buffer() override { return inner_.packet_buffer(); }
  std::size_t max_gathered(wire::Ipv4Address next_hop) const override { return inner_.max_gathered(next_hop); }
  std::size_t receive_packets_per_peer() const override { return inner_.receive_packets_per_peer(); }
  // Records the packets that left; one the inner link refused is not on the wire.
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) override;
  bool transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                         std::span<const std::uint8_t> body) override;
  std::size_t receive(const PacketSink& deliver, std::size_t budget) override;

  static std::chrono::microseconds system_time();

 private:
  Link& inner_;
  wire::PcapWriter& writer_;
  Clock clock_;
};

}  // namespace utcp
