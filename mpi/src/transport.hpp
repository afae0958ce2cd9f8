// The byte mover under the MPI protocol: via::Mesh (one reliable-delivery
// VI per peer, connected on first use, with credit-based flow control, eager
// messages copied inline or through bounce buffers, RDMA through a
// registration cache) carrying MPI's wire header in front of each message.
// A peer lost is the job lost (MPI's default error handler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "via/mesh.hpp"

namespace viastack::mpi {

enum class WireType : std::uint8_t {
  eager,   // header + the whole message
  rts,     // ready to send: the receiver reads the message from (address, handle)
  fin,     // the receiver has read the message of `token`
  // A window update (window.cpp), applied by the target when it arrives: `size`
  // payload bytes combined by op `tag` (a Builtin) as elements of kind `handle`
  // (a Basic) into the window of `context`, `address` bytes from its base.
  accumulate,
  // A one-sided control message (window.cpp): a lock request or grant, a
  // flush, a fetching accumulate or its answer, ...; `rma` says which.
  rma,
  cancel_send,   // the sender takes back the rendezvous message of `token` unless it was matched
  cancel_reply,  // the receiver's answer: size 1 when it was taken back
};

struct WireHeader {
  WireType type;
  std::uint8_t rma = 0;  // WireType::rma: what it asks (window.hpp's RmaKind)
  std::uint8_t reserved[2] = {};
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

// What an eager message, the commonest, carries instead: what matching needs,
// its size being the payload's. 16 bytes where the full header takes 48, so
// that on shm an 8-byte message with the mesh's header fits the ring cell's
// first cache line (via/src/providers/shm/segment.hpp). Told from a
// WireHeader by its first byte, the type.
struct EagerHeader {
  WireType type = WireType::eager;
  std::uint8_t reserved[3] = {};
  std::uint32_t context = 0;
  std::int32_t source = 0;
  std::int32_t tag = 0;
};
static_assert(sizeof(EagerHeader) == 16);

class TransportClient {
 public:
  virtual void on_message(int peer, const WireHeader& header, std::span<const std::byte> payload) = 0;
  virtual void on_rdma_complete(std::uint64_t id) = 0;

 protected:
  ~TransportClient() = default;
};

class Transport final : private via::MeshClient {
 public:
  // Opens the NIC; connections to peers are made when first used.
  Transport(int rank, int size, std::size_t eager_limit, TransportClient& client);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  std::size_t eager_limit() const { return eager_limit_; }
  // Queues a message for `peer` (header + payload copy); never blocks. False
  // when it waits in the backlog (for the connection, credits, a bounce buffer
  // or a descriptor). An eager message goes with an EagerHeader.
  bool send(int peer, const WireHeader& header, std::span<const std::byte> payload) {
    if (header.type == WireType::eager) {
      const EagerHeader eager{WireType::eager, {}, header.context, header.source, header.tag};
      return mesh_->send(peer, std::as_bytes(std::span(&eager, 1)), payload) == via::Mesh::Sent::now;
    }
    return mesh_->send(peer, std::as_bytes(std::span(&header, 1)), payload) == via::Mesh::Sent::now;
  }
  // Reads len bytes at (remote_address, remote_handle) of `peer` into local;
  // on_rdma_complete(id) follows once they are here.
  void read(int peer, void* local, std::size_t len, std::uint64_t remote_address, via::MemHandle remote_handle,
            std::uint64_t id) {
    mesh_->read(peer, local, len, remote_address, remote_handle, id);
  }
  // Writes len bytes from local to (remote_address, remote_handle) of `peer`;
  // on_rdma_complete(id) follows once they are handed to the VI (a later send
  // to `peer` arrives after them), and local may be reused.
  void write(int peer, const void* local, std::size_t len, std::uint64_t remote_address, via::MemHandle remote_handle,
             std::uint64_t id) {
    mesh_->write(peer, local, len, remote_address, remote_handle, id);
  }
  // A registration for a rendezvous buffer, pinned until release_buffer().
  via::MemHandle acquire_buffer(const void* addr, std::size_t len);
  void release_buffer(via::MemHandle handle) { mesh_->registrations().release(handle); }
  // Registers memory that peers read and write with RDMA (a window), until deregister_window().
  via::MemHandle register_window(void* addr, std::size_t len);
  void deregister_window(void* addr, std::size_t len, via::MemHandle handle) {
    mesh_->deregister_exposed(addr, len, handle);
  }
  // The peers this rank is connected or connecting to.
  int peers_in_use() const { return mesh_->peers_in_use(); }

  void poll() { mesh_->poll(); }
  void yield_when_idle() { nic_->yield_when_idle(); }
  // Blocks (spinning, then sleeping) until done() holds.
  template <class Done>
  void wait_until(Done&& done) {
    mesh_->wait_until(std::forward<Done>(done));
  }
  // The same for at most timeout_ms; false when done() did not hold by then.
  template <class Done>
  bool wait_until(Done&& done, std::uint32_t timeout_ms) {
    return mesh_->wait_until(std::forward<Done>(done), timeout_ms);
  }
  // Waits until everything queued has left, then disconnects from every peer.
  void shutdown() { mesh_->shutdown(); }

 private:
  void on_message(int peer, std::span<std::byte> message) override;
  void on_rdma_complete(std::uint64_t id, bool ok) override;
  void on_peer_failed(int peer, const std::string& why) override;

  TransportClient& client_;
  std::size_t eager_limit_;
  std::unique_ptr<via::Nic> nic_;
  std::unique_ptr<via::Mesh> mesh_;
};

}  // namespace viastack::mpi
