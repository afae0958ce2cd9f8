// The job's mesh: one VI to each peer a rank talks to, made on first use (a
// rank pays only for the peers it talks to), with receive buffers posted
// ahead, sends copied inline or through registered bounce buffers, optional
// credit-based flow control, RDMA reads and writes through a registration
// cache, and completions reaped and receive buffers re-posted off the path
// from a message's arrival to its handler. AM, MPI and utcp's VIA link run on
// it; what a message means is theirs.
//
// Connections: a rank that needs a peer creates its VI, posts its receives and
// sends a client request to the peer's service (the mesh's `service` name as
// discriminator); what it sends meanwhile waits in the peer's backlog. Every
// poll also accepts the requests of peers that want to talk to this rank.
// When two ranks ask each other at once, the lower rank's request wins: the
// lower rank refuses the higher one's, the higher rank withdraws its own and
// accepts on the same VI, so one VI remains per pair.
//
// Flow control (MeshOptions::flow_control): a sender never sends into a peer
// that has no receive posted. Each side starts with `receives_per_peer`
// credits; a handled receive buffer is re-posted and its credit returned
// piggy-backed on the next message to that peer, or in a credit-only message
// once half the window is owed. Without it (for unreliable VIs, where a lost
// frame would lose its credits) the layer above bounds what it sends, and a
// message that finds no receive posted is dropped by the VI, as any loss.
//
// Failures: what cannot be set up is a Result; what goes wrong with a peer
// later (a refused or timed-out connection, a broken VI, a failed transfer)
// goes to MeshClient::on_peer_failed, once per peer, after which sends to it
// are dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "via/posted_queue.hpp"
#include "via/registration_cache.hpp"
#include "via/via.hpp"

namespace via {

class MeshClient {
 public:
  // A message from `peer`; the bytes are the handler's to read and write
  // during the call only. The handler may send, and may poll the mesh again.
  virtual void on_message(int peer, std::span<std::byte> message) = 0;
  // An RDMA read or write posted with this id is complete (ok), or failed.
  virtual void on_rdma_complete(std::uint64_t id, bool ok) = 0;
  // `peer` cannot be reached any more; `why` says what happened.
  virtual void on_peer_failed(int peer, const std::string& why) = 0;
  // `peer` disconnected in order (it finished).
  virtual void on_peer_closed(int /*peer*/) {}
  // The memory of a send_registered() that returned Sent::posted, with this
  // token, is the client's again.
  virtual void on_sent(int /*peer*/, std::uint64_t /*token*/) {}

 protected:
  ~MeshClient() = default;
};

struct MeshOptions {
  // Names the layer's connections (the discriminator), e.g. "mpi": with the
  // rank (4 bytes) it must fit the NIC's MaxDiscriminatorLen (16 bytes here).
  std::string service;
  VIP_RELIABILITY_LEVEL reliability = VIP_SERVICE_RELIABLE_DELIVERY;
  bool flow_control = true;
  bool rdma_read = false;   // peers may read registered memory of ours
  bool rdma_write = false;  // peers may write registered memory of ours
  std::size_t message_bytes = 8192;  // the largest message send() takes
  // With flow control: the credit window. Without: the layer above's bound
  // on messages in flight to us, plus 4 spares (handled receives go back
  // to the VI four at a time).
  std::uint32_t receives_per_peer = 32;
  std::uint32_t send_descriptors = 512;  // shared by every peer: bounce sends and RDMA chunks
  std::uint32_t bounce_buffers = 128;    // shared by every peer
  // Messages waiting for one peer (its connection, credits or a buffer)
  // before send() drops more; 0: no bound (a reliable layer above needs
  // every message to go).
  std::size_t backlog_limit = 0;
  // On reliable-delivery VIs: a message of one frame is handed to
  // on_message where it arrived (in the link: the shm ring), not copied into
  // a receive buffer first, and the link's space is freed after the handler
  // (or when it calls release_held). Meanwhile nothing more is taken from
  // that peer: a handler must not wait for another message of the same peer
  // before it released the one it holds.
  bool consume_in_place = false;
  std::uint32_t connect_timeout_ms = 60000;
  std::size_t registration_entries = 64;        // the registration cache's bound on regions
  std::size_t registration_bytes = 1ull << 30;  // and on the bytes they hold
};

struct MeshFrameHeader;  // mesh_peer.hpp

class Mesh {
 public:
  // now: on its way, the caller's bytes free; posted (send_registered only):
  // on its way from the caller's memory, free at on_sent(token); queued:
  // copied into the peer's backlog; dropped: see send().
  enum class Sent { now, posted, queued, dropped };
  struct Counters {
    std::uint64_t inline_sends = 0;
    std::uint64_t bounce_sends = 0;
    std::uint64_t registered_sends = 0;  // send_registered() posted from the caller's memory
    std::uint64_t queued = 0;         // a send that waited in a backlog
    std::uint64_t dropped = 0;        // a send to a failed peer, or over the backlog limit
    std::uint64_t credit_messages = 0;
    std::uint64_t in_place = 0;  // messages handed to on_message from the link (consume_in_place)
    std::uint64_t receive_errors = 0;  // a frame dropped on arrival (too long or short for an unreliable VI)
    std::uint64_t connects = 0;  // connections this rank asked for
    std::uint64_t accepts = 0;   // connections peers asked for
  };

  // A mesh of `size` ranks on nic (which must outlive it), as rank `rank`.
  // Installs the NIC's error handler (shared by every mesh on the NIC, and
  // removed with the last of them).
  static Result open(Nic& nic, int rank, int size, const MeshOptions& options, MeshClient& client,
                     std::unique_ptr<Mesh>& out);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return int(peers_.size()); }
  Nic& nic() const { return nic_; }
  Ptag ptag() const { return ptag_; }

  // Sends head then body as one message (at most message_bytes) to `peer`,
  // connecting first if needed. Never waits for the peer, only, on the first
  // message to it over tcp, for its address: the job's directory may not
  // have it yet (up to VIASTACK_TCP_RESOLVE_TIMEOUT_MS, then the peer fails). now: on its way (the caller's
  // bytes are free); queued: copied into the peer's backlog; dropped: the
  // peer failed, is this rank, or its backlog is full.
  Sent send(int peer, std::span<const std::byte> head, std::span<const std::byte> body = {});
  // As send(), but a message above 256 bytes leaves from the caller's
  // memory, registered with handle (this mesh's protection tag), when it can
  // go at once: Sent::posted, and the bytes must stay as they are until
  // MeshClient::on_sent(peer, token). Without flow control only (a credit
  // header would need a segment of its own). A handle that does not cover
  // the bytes with this mesh's tag is a protection error: the VI breaks.
  Sent send_registered(int peer, std::span<const std::byte> bytes, MemHandle handle, std::uint64_t token);
  // Sends head then body as one frame straight into the link, now or not at
  // all: true once it is on its way (the caller's bytes are free); false,
  // nothing sent, when it cannot go at once (not connected, a message
  // waits before it, the link is full, or it is longer than
  // max_inline_send). With consume_in_place and without flow control only
  // (else false): the peer takes it where it arrived, never into a receive
  // buffer, so it may be longer than message_bytes.
  bool send_whole(int peer, std::span<const std::byte> head, std::span<const std::byte> body);
  // Whether on_message is handling a message of `peer` held in the link
  // (consume_in_place), not released yet.
  bool held(int peer) const;
  // From inside on_message: frees the held message's space in the link now
  // (nothing if none is held); its bytes are gone with it, so the handler
  // copies first what it still needs. The peer's later messages may then
  // be taken by a nested poll: a handler that may wait for one releases.
  void release_held(int peer);
  // Starts connecting to `peer` ahead of the first message.
  void connect(int peer);
  // Whether a message to `peer` can be sent or queued (it is another rank
  // of the job and has not failed or closed).
  bool reachable(int peer) const;
  bool connected(int peer) const;
  // Messages waiting in `peer`'s backlog.
  std::size_t backlog(int peer) const;
  // The longest message send() writes to `peer` straight from the caller's
  // memory into the link, when the link has room: one frame; 0 unless connected.
  std::size_t max_inline_send(int peer) const;
  // The longest message send_whole can ever send to `peer`: max_inline_send,
  // or 0 where send_whole always refuses (flow control, or a peer not consuming in place).
  std::size_t max_whole_send(int peer) const;
  // The peers this rank is connected or connecting to.
  int peers_in_use() const { return int(connected_.size() + connecting_.size()); }

  // RDMA between `len` bytes at local (registered through the cache for the
  // transfer) and (remote_address, remote_handle) at `peer`. A write is
  // complete once handed to the VI: a later send to `peer` arrives after it.
  void read(int peer, void* local, std::size_t len, std::uint64_t remote_address, MemHandle remote_handle,
            std::uint64_t id);
  void write(int peer, const void* local, std::size_t len, std::uint64_t remote_address, MemHandle remote_handle,
             std::uint64_t id);
  RegistrationCache& registrations() { return *registrations_; }
  // Registers memory that peers read and write with RDMA (as far as the
  // options allow), until deregister_exposed(); the cache forgets what it
  // held of that memory.
  Result register_exposed(void* addr, std::size_t len, MemHandle& out);
  void deregister_exposed(void* addr, std::size_t len, MemHandle handle);

  // Progress: the NIC's, then completions; returns the messages handled,
  // at most max_messages (the peers take turns to come first).
  int poll(std::size_t max_messages = SIZE_MAX);
  // The second half of poll() alone, for a caller inside the NIC's wait
  // (which makes progress itself).
  int handle_completed() { return wait_step(); }
  // Nothing waits to leave: no connection pending, nothing queued, every
  // send queue empty.
  bool idle() const;
  // Polls (spinning, then sleeping in the NIC) until done() holds or the
  // timeout passes; true if done() held.
  template <class Done>
  bool wait_until(Done&& done, std::uint32_t timeout_ms = kInfinite);
  // Waits until everything queued has left, then disconnects from every peer;
  // false (and a warning in the log) when something still waited after
  // MeshOptions::connect_timeout_ms, as a peer that stopped polling leaves
  // it: that is dropped with the connections.
  bool shutdown();
  const Counters& counters() const { return counters_; }

 private:
  struct Queued;
  struct PendingRdma;
  struct Peer;
  struct SendSlot;
  struct FreeBytes {
    void operator()(std::byte* bytes) const;
  };

  Mesh(Nic& nic, int rank, int size, const MeshOptions& options, MeshClient& client);
  Result start();

  // Connections (mesh_connections.cpp).
  Peer& peer(int rank);
  Peer* add_peer(int rank);
  void advance_connects();
  void accept_requests();
  void accept(ConnRequest* request);
  void on_connected(Peer& p);
  void fail_peer(Peer& p, const std::string& why);
  void on_async_error(const AsyncError& error);
  static void tell_meshes(const Nic& nic, const AsyncError& error);
  void deliver_notices();

  // Messages (mesh.cpp).
  VIP_DESCRIPTOR* send_descriptor(std::size_t index);
  VIP_DESCRIPTOR* receive_descriptor(const Peer& p, std::uint32_t slot);
  std::uint32_t receive_slot(const Peer& p, const VIP_DESCRIPTOR* d);
  std::byte* receive_buffer(const Peer& p, std::uint32_t slot);
  std::byte* bounce_buffer(std::uint32_t index);
  bool post_receive(Peer& p, std::uint32_t slot);
  // send_registered of a message above copied_registered_limit_ to a connected peer.
  Sent post_registered(Peer& p, std::span<const std::byte> bytes, MemHandle handle, std::uint64_t token);
  Sent send_waiting(int peer, std::span<const std::byte> head, std::span<const std::byte> body);
  bool try_send(Peer& p, bool credit_only, std::span<const std::byte> head, std::span<const std::byte> body);
  bool send_bounced(Peer& p, const MeshFrameHeader& h, bool needs_credit, std::span<const std::byte> head,
                    std::span<const std::byte> body);
  static void settle_send(Peer& p, const MeshFrameHeader& h, bool needs_credit);
  void rdma(int peer, const PendingRdma& op);
  bool try_rdma(Peer& p, const PendingRdma& op);
  void flush_backlogs();
  int drain(std::size_t max_messages = SIZE_MAX);
  void repost_receives(Peer& p);
  void repost(Peer& p, std::uint32_t slot);
  void reap_sends(Peer& p);
  void reclaim_sends(Peer& p);
  int take_receives(Peer& p, std::size_t max_messages);
  void on_frame_in_place(Peer& p, std::span<const std::byte> frame);
  void on_send_complete(Peer& p, std::size_t index, const VIP_DESCRIPTOR* d);
  void on_receive(Peer& p, std::uint32_t slot, const VIP_DESCRIPTOR* d);
  // One look inside a wait: answers requests after the NIC slept, then drains.
  int wait_step();

  Nic& nic_;
  const NicCounters& nic_counters_;  // read on every wait step: no call for it
  int rank_;
  MeshOptions options_;
  MeshClient& client_;
  std::uint32_t receives_per_peer_;  // with flow control, 4 more than the window: credit-only messages need none
  std::size_t header_bytes_;         // the frame header's, with flow control; else 0
  std::size_t slot_bytes_;
  // send_registered copies a message shorter than this as send() would,
  // with no checks of its own (no header, no credits, not above message_bytes); 0 with flow control.
  std::size_t copied_registered_limit_;
  Ptag ptag_ = 0;
  NetAddress service_;  // where this rank accepts connection requests
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null until first used
  std::vector<Peer*> connected_;   // polled for completions
  std::vector<Peer*> connecting_;  // their backlogs wait for the connection
  std::unique_ptr<std::byte, FreeBytes> arena_;  // send descriptors, then bounce buffers
  MemHandle arena_handle_ = 0;
  std::vector<std::uint32_t> free_send_descriptors_;
  std::vector<std::uint32_t> free_bounces_;
  std::vector<SendSlot> send_slots_;
  std::unique_ptr<RegistrationCache> registrations_;
  // What happened to peers, told to the client by the next poll (not from
  // inside the NIC's progress or a send).
  struct Notice {
    enum Kind { failed, closed, rdma_failed } kind;
    int peer;
    std::uint64_t id;  // rdma_failed
    std::string why;   // failed
  };
  std::vector<Notice> notices_;
  bool backlogged_ = false;
  unsigned polls_ = 0;             // accepting is checked every few polls
  std::size_t first_peer_ = 0;     // where a poll with a bound on messages starts
  std::uint64_t sleeps_seen_ = 0;  // and after the NIC slept
  Counters counters_;
};

template <class Done>
bool Mesh::wait_until(Done&& done, std::uint32_t timeout_ms) {
  poll();
  if (done()) return true;
  return nic_.wait(
             [&] {
               wait_step();
               return done();
             },
             timeout_ms) == Result::success;
}

}  // namespace via
