// One rank of a job as an IP host: its NIC, a VIA link to every other rank,
// the stack on it, the clock, and blocking waits that sleep in the NIC.
//
//   utcp::ViaHost host;                       // VIASTACK_RANK/SIZE from viarun
//   utcp::UdpSocket socket(host.stack());
//   socket.bind({{}, 7000});
//   socket.send_to(bytes, {host.address_of(1), 7000});
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include <via/via.hpp>

#include "utcp/pcap.hpp"
#include "utcp/stack.hpp"
#include "utcp/via_link.hpp"

namespace utcp {

struct ViaHostConfig {
  int rank = 0;
  int size = 1;
  ViaLinkConfig link;
  StackConfig stack;  // its address and prefix come from link.addresses
  std::optional<std::filesystem::path> trace;  // pcap of every packet on the link

  // VIASTACK_RANK and VIASTACK_SIZE (set by viarun), VIASTACK_UTCP_MTU
  // (default 9000), VIASTACK_UTCP_RECEIVE_BUFFERS (the link's receive
  // buffers per peer, default 32), VIASTACK_UTCP_NETWORK (default 10.0.0.0/16) and
  // VIASTACK_TRACE. A bad value stops the program with one line naming it
  // (via/config.hpp).
  static ViaHostConfig from_environment();
};

// The pcap file a rank writes for VIASTACK_TRACE=file: the file itself in a
// one-rank job, "<stem>.rank<N><extension>" beside it otherwise, so that
// ranks do not write over each other.
std::filesystem::path trace_file_for_rank(const std::filesystem::path& file, int rank, int size);

class ViaHost final : public Waiter {
 public:
  // Opens this rank's NIC and connects to every other rank.
  explicit ViaHost(const ViaHostConfig& config = ViaHostConfig::from_environment());
  // On a NIC the caller opened (and keeps for other VIs), which must outlive the host.
  ViaHost(via::Nic& nic, const ViaHostConfig& config = ViaHostConfig::from_environment());
  ~ViaHost() override = default;

  Stack& stack() { return *stack_; }
  ViaLink& link() { return *link_; }
  via::Nic& nic() { return *nic_; }
  int rank() const { return config_.rank; }
  int size() const { return config_.size; }
  wire::Ipv4Address address_of(int rank) const { return config_.link.addresses.address_of(rank); }

  // stack().poll(now) with the steady clock's now.
  bool poll();
  // Polls until ready() holds, sleeping in the NIC between packets, until
  // the timeout (none: forever).
  bool wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) override;

 private:
  void start();

  // Declared so that each is destroyed before what it uses: the stack, the
  // links it sends through, the NIC.
  ViaHostConfig config_;
  std::unique_ptr<via::Nic> own_nic_;
  via::Nic* nic_ = nullptr;
  std::unique_ptr<ViaLink> link_;
  std::unique_ptr<wire::PcapWriter> trace_writer_;
  std::unique_ptr<TracingLink> tracing_link_;
  std::unique_ptr<Stack> stack_;
};

}  // namespace utcp
