// IP over VIA, as U-Net carried it: each IPv4 packet is one message on an
// unreliable VI, one VI per peer rank (made on first use), into receive
// buffers posted ahead.
// A rank's address comes from its number (AddressPlan), so routing to a
// neighbour is arithmetic, with no ARP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <via/mesh.hpp>

#include "utcp/address.hpp"
#include "utcp/link.hpp"

namespace utcp {

// Rank r has the address network + r + 1: 10.0.0.1 for rank 0 in the
// default 10.0.0.0/16, 10.0.1.0 for rank 255.
struct AddressPlan {
  wire::Ipv4Address network = wire::Ipv4Address::from_octets(10, 0, 0, 0);
  int prefix_length = 16;

  wire::Ipv4Address address_of(int rank) const;
  // The rank owning address in a job of `size` ranks, if any.
  std::optional<int> rank_of(wire::Ipv4Address address, int size) const;
  // "10.0.0.0/16": a network address with its host bits clear and a prefix of
  // 8 to 30; none for anything else.
  static std::optional<AddressPlan> parse(std::string_view text);
};

struct ViaLinkConfig {
  std::size_t mtu = 9000;  // as U-Net's IP over ATM
  // Each holds one packet: together they bound the packets in flight to a
  // peer. (More lose fewer frames to a receiver that falls behind, iperf3
  // through the preload library under load: 100 to 400 retransmissions per
  // GB with 32, 0 to 2 with 64 or more; but a utcp_bench stream on shm then
  // sent a third of its segments through the mesh's bounce buffers and
  // backlog, a copy more each, against 1 % with 32.)
  std::size_t receive_buffers_per_peer = 32;
  std::size_t send_buffers = 64;
  AddressPlan addresses;
};

class ViaLink final : public Link, private via::MeshClient {
 public:
  // A link to every other rank of the job (rank of size) on nic, which must
  // outlive the link: one unreliable VI per peer, connected when the first
  // packet goes either way (via::Mesh). Throws std::invalid_argument for a
  // bad configuration and std::runtime_error naming the step that failed.
  ViaLink(via::Nic& nic, int rank, int size, const ViaLinkConfig& config);
  ~ViaLink() override;
  ViaLink(const ViaLink&) = delete;
  ViaLink& operator=(const ViaLink&) = delete;

  std::size_t mtu() const override { return config_.mtu; }
  // Whether next_hop is another rank of the job that has not gone away.
  bool reaches(wire::Ipv4Address next_hop) const override;
  // Waits (up to a second, driving the NIC) while the packets waiting for
  // that peer (its connection, or a send buffer) fill its backlog.
  // A packet built in packet_buffer() leaves from it (registered memory,
  // no copy); any other is copied.
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) override;
  // One of send_buffers registered buffers that no send holds.
  std::span<std::uint8_t> packet_buffer() override;
  // What the VI to that peer copies into the link in one frame, straight
  // from the caller's pieces: 0 while the peer is not connected, any send
  // waits to leave, or for send_buffers packets after a gathered one found
  // the link full (transmit() takes those packets).
  std::size_t max_gathered(wire::Ipv4Address next_hop) const override;
  std::size_t receive_packets_per_peer() const override { return config_.receive_buffers_per_peer; }
  bool transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                         std::span<const std::uint8_t> body) override;
  std::size_t receive(const PacketSink& deliver, std::size_t budget) override;

  wire::Ipv4Address address() const { return config_.addresses.address_of(rank_); }
  via::Nic& nic() { return mesh_->nic(); }
  // The peers a VI was made for: those this rank sent to or heard from.
  int peers_in_use() const { return mesh_->peers_in_use(); }
  // receive_errors: packets too long for a receive buffer, dropped.
  const via::Mesh::Counters& counters() const { return mesh_->counters(); }

 private:
  void on_message(int peer, std::span<std::byte> message) override;
  void on_rdma_complete(std::uint64_t, bool) override {}
  // Packets to it are dropped from then on, as on any link; the log says why
  // (a stream that stalls for good otherwise looks like loss).
  void on_peer_failed(int peer, const std::string& why) override;
  // The VI is done with send buffer `token`.
  void on_sent(int, std::uint64_t token) override { free_send_buffers_.push_back(static_cast<std::uint32_t>(token)); }
  // The send buffer packet_buffer() lent, taken off the free list, if the
  // packet was built in it.
  std::optional<std::uint32_t> take_send_buffer(std::span<const std::uint8_t> packet);

  int rank_, size_;
  ViaLinkConfig config_;
  via::Nic& nic_;
  // send_buffers buffers of mtu bytes, registered with the mesh's tag; a
  // packet built in one is sent from it and the buffer is busy until on_sent.
  std::unique_ptr<std::uint8_t[]> send_buffers_;
  via::MemHandle send_buffers_handle_ = 0;  // 0: not registered, packets are copied
  std::vector<std::uint32_t> free_send_buffers_;
  std::unique_ptr<via::Mesh> mesh_;  // after the buffers: gone first, so no send still reads them
  const PacketSink* sink_ = nullptr;  // receive()'s, while it polls
  std::deque<std::vector<std::uint8_t>> waiting_;  // arrived while transmit() waited
  // A gathered packet found the link full: this many more go through transmit().
  std::size_t packets_before_gathering_ = 0;
};

}  // namespace utcp
