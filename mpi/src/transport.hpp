// The byte mover under the MPI protocol: one reliable-delivery VI per peer,
// connected peer to peer at start-up, with pre-posted receive buffers and
// credit-based flow control (a sender never sends into a peer that has no
// receive posted), eager messages copied through registered bounce buffers,
// RDMA reads for rendezvous transfers, and RDMA reads and writes on windows.
// Completions are read from the descriptors of each VI's queues, oldest first,
// rather than through a completion queue, and a handled receive buffer is
// re-posted by the next poll: both keep work off the path from a message's
// arrival to its receive's completion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "reg_cache.hpp"
#include "via/posted_queue.hpp"
#include "via/via.hpp"

namespace viastack::mpi {

enum class WireType : std::uint8_t {
  eager,   // header + the whole message
  rts,     // ready to send: the receiver reads the message from (address, handle)
  fin,     // the receiver has read the message of `token`
  credit,  // only returns credits
  // A window update (window.cpp), applied by the target when it arrives: `size`
  // payload bytes combined by op `tag` (a Builtin) as elements of kind `handle`
  // (a Basic) into the window of `context`, `address` bytes from its base.
  accumulate,
};

struct WireHeader {
  WireType type;
  std::uint8_t reserved = 0;
  std::uint16_t credits = 0;  // receive buffers the sender has re-posted for the destination
  std::uint32_t context = 0;
  std::int32_t source = 0;  // the sender's rank in the communicator
  std::int32_t tag = 0;
  std::uint64_t size = 0;   // message bytes
  std::uint64_t token = 0;  // rts / fin: names the sender's request
  std::uint64_t address = 0;
  std::uint32_t handle = 0;
  std::uint32_t reserved2 = 0;
};
static_assert(sizeof(WireHeader) == 48);

class TransportClient {
 public:
  virtual void on_message(int peer, const WireHeader& header, std::span<const std::byte> payload) = 0;
  virtual void on_rdma_complete(std::uint64_t id) = 0;

 protected:
  ~TransportClient() = default;
};

class Transport {
 public:
  // Opens the NIC and connects to every other rank of the job.
  Transport(int rank, int size, std::size_t eager_limit, TransportClient& client);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  std::size_t eager_limit() const { return eager_limit_; }
  // Queues a message for `peer` (header + payload copy); never blocks. False
  // when it waits in the backlog (for credits, a bounce buffer or a descriptor).
  bool send(int peer, WireHeader header, std::span<const std::byte> payload);
  // Reads len bytes at (remote_address, remote_handle) of `peer` into local;
  // on_rdma_complete(id) follows once they are here.
  void read(int peer, void* local, std::size_t len, std::uint64_t remote_address, via::MemHandle remote_handle,
            std::uint64_t id);
  // Writes len bytes from local to (remote_address, remote_handle) of `peer`;
  // on_rdma_complete(id) follows once they are handed to the VI (a later send
  // to `peer` arrives after them), and local may be reused.
  void write(int peer, const void* local, std::size_t len, std::uint64_t remote_address, via::MemHandle remote_handle,
             std::uint64_t id);
  RegistrationCache& registrations() { return *registrations_; }
  // Registers memory that peers read and write with RDMA (a window), until deregister_window().
  via::MemHandle register_window(void* addr, std::size_t len);
  void deregister_window(void* addr, via::MemHandle handle);

  // Progress: the engine's, then every completion.
  void poll();
  // Blocks (spinning, then sleeping) until done() holds.
  template <class Done>
  void wait_until(Done&& done);
  // Waits until everything queued has left, then disconnects from every peer.
  void shutdown();

 private:
  struct Queued {
    WireHeader header;
    std::vector<std::byte> payload;
  };
  struct PendingRdma {
    bool write;
    void* local;
    std::size_t len;
    std::uint64_t remote_address;
    via::MemHandle remote_handle;
    std::uint64_t id;
  };
  struct Peer {
    Peer();
    via::Vi* vi = nullptr;
    int send_credits = 0;
    int owed_credits = 0;  // receive buffers re-posted since we last told the peer
    bool closed = false;   // the peer disconnected (it finalized)
    via::PostedQueue receives;  // receive slots posted to the VI, oldest first
    via::PostedQueue sends;     // send descriptors posted to the VI, oldest first
    std::vector<int> reposts;   // receive slots of handled data messages, re-posted by the next poll
    std::deque<Queued> backlog;  // waiting for credits, a bounce buffer or a descriptor
    std::deque<PendingRdma> rdma;  // waiting for descriptors
  };
  // What a posted send-queue descriptor is doing.
  struct SendSlot {
    int bounce = -1;             // eager: the bounce buffer it sends from
    std::uint64_t rdma_id = 0;   // RDMA: reported when the last chunk completes
    bool reports_rdma = false;
    via::MemHandle local_handle = 0;  // RDMA: released with the report
  };

  void connect_all(int rank, int size);
  VIP_DESCRIPTOR* descriptor(std::size_t index);
  std::byte* receive_buffer(int peer, int slot);
  std::byte* bounce_buffer(int index);
  void set_single_segment(VIP_DESCRIPTOR* d, std::byte* buffer, std::uint32_t length) const;
  void post_receive(int peer, int slot);
  bool try_post(int peer, const WireHeader& header, std::span<const std::byte> payload);
  void rdma(int peer, const PendingRdma& op);
  bool try_rdma(int peer, const PendingRdma& op);
  void flush_backlogs();
  void drain();
  void repost_receives(int peer);
  void reap_sends(int peer);
  void take_receives(int peer);
  void on_send_complete(int peer, std::size_t index, const VIP_DESCRIPTOR* d);
  void on_receive(int peer, int slot, const VIP_DESCRIPTOR* d);
  void on_async_error(const via::AsyncError& error);

  TransportClient& client_;
  int rank_;
  std::size_t eager_limit_;
  std::size_t slot_bytes_;
  std::unique_ptr<via::Nic> nic_;
  via::Ptag ptag_ = 0;
  std::vector<Peer> peers_;  // by world rank; peers_[rank_] is unused
  std::byte* arena_ = nullptr;  // descriptors, receive buffers, bounce buffers
  std::size_t arena_bytes_ = 0;
  via::MemHandle arena_handle_ = 0;
  std::size_t receive_descriptors_ = 0;  // first send descriptor index
  std::vector<int> free_send_descriptors_;
  std::vector<int> free_bounces_;
  std::vector<SendSlot> send_slots_;
  std::unique_ptr<RegistrationCache> registrations_;
  bool backlogged_ = false;
};

template <class Done>
void Transport::wait_until(Done&& done) {
  poll();
  if (done()) return;
  nic_->wait(
      [&] {
        drain();
        return done();
      },
      via::kInfinite);
}

}  // namespace viastack::mpi
