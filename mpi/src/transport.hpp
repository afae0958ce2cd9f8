// The byte mover under the MPI protocol: one reliable-delivery VI per peer,
// connected on first use (a rank pays only for the peers it talks to), with
// pre-posted receive buffers and credit-based flow control (a sender never
// sends into a peer that has no receive posted), eager messages copied through
// registered bounce buffers, RDMA reads for rendezvous transfers, and RDMA
// reads and writes on windows. Completions are read from the descriptors of
// each VI's queues, oldest first, rather than through a completion queue, and
// a handled receive buffer is re-posted by the next poll: both keep work off
// the path from a message's arrival to its receive's completion.
//
// Connections: every progress call also accepts the requests of peers that
// want to talk to this rank. A rank that needs a peer creates its VI, posts
// its receives and sends a client request; what it sends meanwhile waits in
// the peer's backlog. When two ranks ask each other at once, the lower rank's
// request wins: the lower rank refuses the higher one's, the higher rank
// withdraws its own and accepts on the same VI, so one VI remains per pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
  // Opens the NIC; connections to peers are made when first used.
  Transport(int rank, int size, std::size_t eager_limit, TransportClient& client);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  std::size_t eager_limit() const { return eager_limit_; }
  // Queues a message for `peer` (header + payload copy); never blocks. False
  // when it waits in the backlog (for the connection, credits, a bounce buffer
  // or a descriptor).
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
  // The peers this rank is connected or connecting to.
  int peers_in_use() const { return int(connected_.size() + connecting_.size()); }

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
  struct FreeBytes {
    void operator()(std::byte* bytes) const { std::free(bytes); }
  };
  // A peer this rank talks to: made on first use, by either side.
  struct Peer {
    explicit Peer(int rank);
    int rank;
    via::Vi* vi = nullptr;
    bool connected = false;
    std::uint64_t connect_deadline_ns = 0;  // until when a connection may take
    std::unique_ptr<std::byte, FreeBytes> receive_block;  // its receive descriptors, then their buffers
    via::MemHandle receive_handle = 0;
    int send_credits = 0;
    int owed_credits = 0;  // receive buffers re-posted since we last told the peer
    bool closed = false;   // the peer disconnected (it finalized)
    via::PostedQueue receives;  // receive slots posted to the VI, oldest first
    via::PostedQueue sends;     // send descriptors posted to the VI, oldest first
    std::vector<int> reposts;   // receive slots of handled data messages, re-posted by the next poll
    std::deque<Queued> backlog;  // waiting for the connection, credits, a bounce buffer or a descriptor
    std::deque<PendingRdma> rdma;  // waiting for the connection or descriptors
  };
  // What a posted send-queue descriptor is doing.
  struct SendSlot {
    int bounce = -1;             // eager: the bounce buffer it sends from
    std::uint64_t rdma_id = 0;   // RDMA: reported when the last chunk completes
    bool reports_rdma = false;
    via::MemHandle local_handle = 0;  // RDMA: released with the report
  };

  // Connections.
  Peer& peer(int rank);
  Peer& add_peer(int rank);
  void start_connect(Peer& p);
  void advance_connects();
  void accept_requests();
  void accept(via::ConnRequest* request);
  void on_connected(Peer& p);
  [[noreturn]] void connect_failed(const Peer& p, const std::string& why);

  VIP_DESCRIPTOR* send_descriptor(std::size_t index);
  VIP_DESCRIPTOR* receive_descriptor(const Peer& p, int slot);
  std::byte* receive_buffer(const Peer& p, int slot);
  std::byte* bounce_buffer(int index);
  static void set_single_segment(VIP_DESCRIPTOR* d, std::byte* buffer, std::uint32_t length, via::MemHandle handle);
  void post_receive(Peer& p, int slot);
  bool try_post(Peer& p, const WireHeader& header, std::span<const std::byte> payload);
  void rdma(int peer, const PendingRdma& op);
  bool try_rdma(Peer& p, const PendingRdma& op);
  void flush_backlogs();
  void drain();
  void repost_receives(Peer& p);
  void reap_sends(Peer& p);
  void take_receives(Peer& p);
  void on_send_complete(Peer& p, std::size_t index, const VIP_DESCRIPTOR* d);
  void on_receive(Peer& p, int slot, const VIP_DESCRIPTOR* d);
  void on_async_error(const via::AsyncError& error);

  TransportClient& client_;
  int rank_;
  std::size_t eager_limit_;
  std::size_t slot_bytes_;
  std::unique_ptr<via::Nic> nic_;
  via::Ptag ptag_ = 0;
  const via::NetAddress service_;  // where this rank accepts connection requests
  std::vector<std::unique_ptr<Peer>> peers_;  // by world rank; null until first used
  std::vector<Peer*> connected_;   // polled for completions
  std::vector<Peer*> connecting_;  // their backlogs wait for the connection
  std::byte* arena_ = nullptr;  // send descriptors and bounce buffers
  std::size_t arena_bytes_ = 0;
  via::MemHandle arena_handle_ = 0;
  std::vector<int> free_send_descriptors_;
  std::vector<int> free_bounces_;
  std::vector<SendSlot> send_slots_;
  std::unique_ptr<RegistrationCache> registrations_;
  bool backlogged_ = false;
  unsigned polls_ = 0;              // accepting is checked every few polls
  std::uint64_t sleeps_seen_ = 0;   // and after the NIC slept
};

template <class Done>
void Transport::wait_until(Done&& done) {
  poll();
  if (done()) return;
  nic_->wait(
      [&] {
        // A rank that sleeps is woken by a peer's connection request too.
        if (nic_->counters().sleeps != sleeps_seen_) {
          sleeps_seen_ = nic_->counters().sleeps;
          accept_requests();
        }
        drain();
        return done();
      },
      via::kInfinite);
}

}  // namespace viastack::mpi
