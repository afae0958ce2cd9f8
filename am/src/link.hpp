// AM's connection to the other ranks of the job: a via::Mesh (one VI per
// peer, made when the first message goes either way) without the mesh's
// credits, since AM's own window (SendWindow) is its flow control: a peer
// sends at most `depth` requests and `depth` answers before it hears from
// us, and the mesh keeps that many receives posted per peer, plus spares
// (kLateReposts). The layer above writes a message into a buffer of the link
// (kept for retransmission) and sends it. On unreliable VIs a small one is
// copied out by the VI, a larger one leaves from the buffer itself
// (registered), which is then busy until the NIC is done with it. Reliable
// VIs never retransmit: every message is copied out as it is sent (into the
// link, or a bounce buffer or the backlog when the link is full), no buffer
// is ever busy, and no handler waits for one while the peer's messages wait
// behind it. What arrives is handed to the LinkClient as it is taken from
// the NIC; on reliable VIs where it arrived (Mesh consume_in_place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "am/am.hpp"
#include "errors.hpp"
#include "wire.hpp"
#include "via/bootstrap.hpp"
#include "via/mesh.hpp"

namespace am::detail {

// The layer above hears of frames, RDMA completions (the tag is the RDMA's
// id) and lost peers straight from the mesh, with no call in between.
using LinkClient = via::MeshClient;

class Link final {
 public:
  // Buffers of a message to a peer: per request slot (kept until the request
  // is answered, for retransmission), per reply slot (the cached reply), and
  // kAckBuffers for messages of acknowledgements alone.
  static constexpr std::uint32_t kAckBuffers = 4;
  // Mesh::send_registered copies a message of up to this many bytes as it
  // sends it (its fastest way, one piece straight into the link), and posts
  // a larger one from the buffer.
  static constexpr std::uint32_t kCopiedRegistered = 256;

  Link(std::uint16_t depth, Reliability reliability, LinkClient& client)
      : depth_(depth), reliability_(reliability), client_(client) {}
  ~Link();
  // Set-up: open() joins the job, opens the NIC and the mesh;
  // register_segment() opens the segment to the peers' RDMA. Errors set
  // am's last error (detail::error) and say which step failed.
  Status open();
  Status register_segment(std::byte* segment, std::size_t bytes);

  int rank() const { return rank_; }
  int size() const { return size_; }
  via::MemHandle segment_handle() const { return segment_handle_; }
  // The peers the mesh made a VI for.
  int peers_in_use() const { return mesh_->peers_in_use(); }

  // Where each rank's segment is, and the depth it runs with: published by
  // every rank once (collective: a fence of the job's key-value store), and
  // read for a peer when first needed, so that set-up connects nobody.
  struct PeerSegment {
    std::uint64_t base = 0, bytes = 0;
    via::MemHandle handle = 0;
    std::uint64_t depth = 0;
  };
  Status publish_segment(std::uint16_t depth);
  bool lookup_segment(int peer, PeerSegment& out, std::string& why);

  std::uint32_t request_buffer(int peer, std::uint16_t slot) const { return first_buffer(peer) + slot; }
  std::uint32_t reply_buffer(int peer, std::uint16_t slot) const { return first_buffer(peer) + depth_ + slot; }
  std::uint32_t ack_buffer(int peer, std::uint32_t i) const { return first_buffer(peer) + 2u * depth_ + i; }
  // Buffer i (one of `peer`'s, from the calls above). A peer's buffers are
  // made (and registered) when first asked for. The peer is passed, not
  // found from i: a division on the path of every message.
  [[gnu::always_inline]] std::byte* buffer(int peer, std::uint32_t i) const {
    std::byte* block = buffers_[std::size_t(peer)].get();
    if (!block) [[unlikely]]
      block = make_buffers(peer);
    return block + std::size_t(i - first_buffer(peer)) * kBufBytes;
  }
  // Whether the NIC still holds buffer i's last send: it is rewritten only
  // once that is done (a send to a dead peer is flushed, so it ends).
  bool busy(std::uint32_t i) const { return posted_[i] != 0; }
  // Sends `length` bytes of buffer i to `peer` (not this rank): on its way
  // (now, or posted from the buffer, busy until on_sent), queued (for the
  // connection, or a send buffer), or dropped (the peer is lost).
  using Sent = via::Mesh::Sent;
  [[gnu::always_inline]] Sent send(int peer, std::uint32_t i, std::uint32_t length) {
    if (reliability_ == Reliability::reliable && length > kCopiedRegistered)
      return send_apart(peer, i, length, nullptr, 0);
    const Sent sent = mesh_->send_registered(peer, std::span(buffer(peer, i), length), handles_[std::size_t(peer)], i);
    if (sent == Sent::posted) posted_[i] = 1;
    return sent;
  }
  // The same on a reliable VI for a message whose last `bytes` are not in
  // buffer i but at `payload`: the first `length` - `bytes` from the buffer,
  // then those, copied as they go (now, queued or dropped; never posted).
  [[gnu::always_inline]] Sent send_apart(int peer, std::uint32_t i, std::uint32_t length, const void* payload,
                                         std::size_t bytes) {
    return mesh_->send(peer, std::span(buffer(peer, i), length - bytes),
                       std::span(static_cast<const std::byte*>(payload), bytes));
  }
  // The same, now or not at all (Mesh::send_whole), for a message that may
  // be longer than a buffer (a whole store): false, nothing sent, when it
  // cannot go at once. Reliable VIs only (they consume in place).
  bool send_whole(int peer, std::uint32_t i, std::uint32_t length, const void* payload, std::size_t bytes) {
    return mesh_->send_whole(peer, std::span(buffer(peer, i), length - bytes),
                             std::span(static_cast<const std::byte*>(payload), bytes));
  }
  // The longest message send_whole can send to `peer` (0 until connected, or where it never can).
  std::size_t max_whole(int peer) const { return mesh_->max_whole_send(peer); }
  // The client's on_sent(peer, token): buffer `token` is free again.
  void sent(std::uint64_t token) { posted_[std::size_t(token)] = 0; }
  // The end of the hold on the message of `peer` being handled, if it is
  // held in the link (reliable VIs consume messages in place): the peer's
  // next messages may then come, its bytes are gone (Mesh::release_held).
  void release_held(int peer) { mesh_->release_held(peer); }
  // Messages and RDMA to `peer` still waiting to be handed to its VI.
  std::size_t waiting(int peer) const { return mesh_->backlog(peer); }
  // Nothing waits to leave (connections, queued messages, sends with the NIC).
  bool idle() const { return mesh_->idle(); }

  // Progress: the NIC's, then what it completed (LinkClient calls);
  // handle_completed() is the second half alone, for a caller inside wait().
  int poll() { return mesh_->poll(); }
  int handle_completed() { return mesh_->handle_completed(); }
  template <class Done>
  via::Result wait(Done&& done, std::uint32_t timeout_ms) {
    return nic_->wait(std::forward<Done>(done), timeout_ms);
  }

  // RDMA of `bytes` between local memory and (remote, remote_handle) of the
  // peer; on_rdma_done(tag, ok) when it completes. A message sent after it
  // arrives after its data.
  void rdma(int peer, bool write, std::byte* local, std::uint64_t remote, via::MemHandle remote_handle,
            std::uint32_t bytes, std::uint32_t tag);

 private:
  static constexpr std::size_t kBufBytes = (wire::kMaxMessage + 63) / 64 * 64;

  // Out of line: buffer() stays small where it is inlined, on the path of every message.
  std::byte* make_buffers(int peer) const;
  std::uint32_t per_peer() const { return 2u * depth_ + kAckBuffers; }
  std::uint32_t first_buffer(int peer) const { return per_peer() * std::uint32_t(peer); }

  int rank_ = 0, size_ = 0;
  std::uint16_t depth_;
  Reliability reliability_;
  LinkClient& client_;
  std::shared_ptr<via::Bootstrap> job_;
  std::string segment_key_;  // this enable's key: a process may enable AM more than once
  std::unique_ptr<via::Nic> nic_;
  std::unique_ptr<via::Mesh> mesh_;
  std::byte* segment_ = nullptr;
  std::size_t segment_bytes_ = 0;
  via::MemHandle segment_handle_ = 0;
  mutable std::vector<std::unique_ptr<std::byte[]>> buffers_;  // per peer, once used
  mutable std::vector<via::MemHandle> handles_;                 // their registrations (0: none)
  std::vector<std::uint8_t> posted_;                            // per buffer: the NIC holds its send
};

}  // namespace am::detail
