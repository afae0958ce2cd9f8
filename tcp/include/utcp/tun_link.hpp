// A Linux TUN device as a link: the stack's IPv4 packets go to the kernel,
// which routes them as if they came in on a network interface, and the
// kernel's packets for the device's routes come back. With the kernel's side
// of the device given an address (10.9.0.1/24, say) and the stack another one
// in that subnet (10.9.0.2), the stack talks to the kernel's own ICMP, UDP
// and TCP: the interoperability test of the stack.
//
//   utcp::TunHost host({.link = {.name = "utcp0"},
//                       .address = *utcp::wire::Ipv4Address::parse("10.9.0.2"),
//                       .kernel_address = utcp::wire::Ipv4Address::parse("10.9.0.1")});
//   utcp::UdpSocket socket(host.stack());
//
// Creating a device needs CAP_NET_ADMIN; tests make one inside a network
// namespace of their own, where it disappears with the last file descriptor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "utcp/link.hpp"
#include "utcp/pcap.hpp"
#include "utcp/stack.hpp"

namespace utcp {

struct TunLinkConfig {
  // The device's name, at most 15 characters; a "%d" in it lets the kernel
  // number it ("utcp%d": the first free of utcp0, utcp1, ...).
  std::string name = "utcp%d";
  // The device's MTU, set on the device too: the largest packet either side sends.
  std::size_t mtu = 1500;
  // The packets the kernel queues for utcp before it drops (the device's
  // txqueuelen; TUN's default is 500). utcp reads them when it polls: a
  // kernel receiver has its socket buffer to wait in, utcp this queue; 4096
  // full-sized packets are about Linux's largest receive buffer (6 MiB).
  std::size_t queue_length = 4096;
};

struct TunLinkCounters {
  std::uint64_t packets_in = 0;
  std::uint64_t packets_out = 0;
  std::uint64_t receive_errors = 0;  // read() failed other than for want of a packet
  std::uint64_t send_errors = 0;     // write() failed or wrote part of a packet
};

class TunLink final : public Link {
 public:
  // Opens /dev/net/tun and creates the device (IFF_TUN | IFF_NO_PI: bare
  // IPv4 packets), non-blocking, with the MTU set. Throws std::system_error
  // naming the step and the device when a step fails (no /dev/net/tun, no
  // CAP_NET_ADMIN, a name in use by another kind of device, a bad MTU).
  explicit TunLink(const TunLinkConfig& config = {});
  TunLink(const TunLink&) = delete;
  TunLink& operator=(const TunLink&) = delete;
  // Closing the descriptor removes the device.
  ~TunLink() override;

  std::size_t mtu() const override { return mtu_; }
  // Every next hop: the kernel routes what the stack hands it.
  bool reaches(wire::Ipv4Address) const override { return true; }
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) override;
  std::size_t receive(const PacketSink& deliver, std::size_t budget) override;

  // The device's name as the kernel gave it.
  const std::string& name() const { return name_; }
  // The non-blocking descriptor, readable when a packet waits (for poll(2)).
  int fd() const { return fd_; }
  // Sleeps until a packet waits or the timeout passes; whether one waits.
  bool wait_readable(std::chrono::milliseconds timeout) const;
  // Gives the kernel's side of the device an address with the prefix and
  // brings the device up: the kernel then routes the subnet over it. Throws
  // std::system_error as the constructor does.
  void configure_kernel_side(wire::Ipv4Address address, int prefix_length);

  const TunLinkCounters& counters() const { return counters_; }

 private:
  int fd_ = -1;
  std::string name_;
  std::size_t mtu_;
  std::vector<std::uint8_t> buffer_;  // one packet being read
  TunLinkCounters counters_;
};

struct TunHostConfig {
  TunLinkConfig link;
  // The stack's address and its subnet on the device; the stack's other
  // settings come from `stack` (its address and prefix are replaced).
  wire::Ipv4Address address = wire::Ipv4Address::from_octets(10, 9, 0, 2);
  int prefix_length = 24;
  StackConfig stack;
  // When set, the kernel's side of the device gets this address in the same
  // subnet and the device is brought up; otherwise the caller configures it.
  std::optional<wire::Ipv4Address> kernel_address;
  std::optional<std::filesystem::path> trace;  // pcap of every packet on the device
};

// A host on a TUN device: the link, an optional trace, the stack, the steady
// clock, and blocking waits that sleep on the device's descriptor (the
// counterpart of ViaHost).
class TunHost final : public Waiter {
 public:
  explicit TunHost(const TunHostConfig& config = {});
  ~TunHost() override = default;

  Stack& stack() { return *stack_; }
  TunLink& link() { return *link_; }

  // stack().poll(now) with the steady clock's now.
  bool poll();
  // Polls until ready() holds, sleeping on the device between packets, until
  // the timeout (none: forever).
  bool wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) override;

 private:
  // Each destroyed before what it uses: the stack, the links, the device.
  std::unique_ptr<TunLink> link_;
  std::unique_ptr<wire::PcapWriter> trace_writer_;
  std::unique_ptr<TracingLink> tracing_link_;
  std::unique_ptr<Stack> stack_;
};

}  // namespace utcp
