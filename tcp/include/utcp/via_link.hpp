// IP over VIA, as U-Net carried it: each IPv4 packet is one message on an
// unreliable VI, one VI per peer rank, into receive buffers posted ahead.
// A rank's address comes from its number (AddressPlan), so routing to a
// neighbour is arithmetic, with no ARP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <via/via.hpp>

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
  std::size_t receive_buffers_per_peer = 32;
  std::size_t send_buffers = 64;
  AddressPlan addresses;
};

class ViaLink final : public Link {
 public:
  // Connects one unreliable VI to every other rank of the job (rank of size)
  // on nic, which must outlive the link. Throws std::runtime_error naming
  // the step that failed. Waits until every peer has done the same.
  ViaLink(via::Nic& nic, int rank, int size, const ViaLinkConfig& config);
  ~ViaLink() override;
  ViaLink(const ViaLink&) = delete;
  ViaLink& operator=(const ViaLink&) = delete;

  std::size_t mtu() const override { return config_.mtu; }
  bool reaches(wire::Ipv4Address next_hop) const override;
  // Waits (up to a second, driving the NIC) for a free send buffer when all
  // are in flight.
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet) override;
  std::size_t receive(const PacketSink& deliver, std::size_t budget) override;

  wire::Ipv4Address address() const { return config_.addresses.address_of(rank_); }
  via::Nic& nic() { return nic_; }

  struct Counters {
    std::uint64_t receive_errors = 0;  // a receive completed with an error (too long, or its VI broke)
    std::uint64_t send_errors = 0;     // a send completed with an error
    std::uint64_t send_buffer_waits = 0;  // transmit found every send buffer in flight
  };
  const Counters& counters() const { return counters_; }

 private:
  std::uint8_t* buffer(std::size_t index) const;
  VIP_DESCRIPTOR* descriptor(std::size_t index) const;
  std::size_t index_of(const VIP_DESCRIPTOR* descriptor) const;
  bool post_receive(via::Vi& vi, std::size_t index);
  void reap_sends();
  void release();  // frees what the constructor got, so far as it got

  via::Nic& nic_;
  int rank_, size_;
  ViaLinkConfig config_;
  std::size_t buffer_stride_;
  std::size_t descriptor_count_;
  std::uint8_t* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
  via::MemHandle arena_handle_{};
  via::Ptag ptag_ = 0;
  via::Cq* send_cq_ = nullptr;
  via::Cq* receive_cq_ = nullptr;
  std::vector<via::Vi*> vis_;  // by rank; null for ourselves
  std::vector<std::size_t> free_sends_;
  Counters counters_;
};

}  // namespace utcp
