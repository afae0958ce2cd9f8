// AM's connection to the other ranks of the job over VIA: everything AM does
// with the NIC is here. One VI per peer with pre-posted receive buffers, a
// registered arena of descriptors and message buffers, the segment open to
// the peers' RDMA, and RDMA descriptors. The layer above writes a message
// into a buffer of the link and sends it; it takes the frames that arrived
// from a peer in order, and hands each back when it is done with it.
//
// Credits are the layer above's (its SendWindow): a peer sends at most
// `depth` requests and `depth` answers before it hears from us, and the link
// keeps that many receives posted per peer, plus spares (kLateReposts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "am/am.hpp"
#include "errors.hpp"
#include "via/posted_queue.hpp"
#include "via/via.hpp"

namespace am::detail {

class Link {
 public:
  // Buffers of a message to a peer: per request slot (kept until the request
  // is answered, for retransmission), per reply slot (the cached reply), and
  // kAckBuffers for messages of acknowledgements alone.
  static constexpr std::uint32_t kAckBuffers = 4;

  // One frame that arrived from a peer, until release().
  struct Frame {
    std::uint32_t buffer;
    std::byte* data;
    std::size_t length;
    bool ok;  // false: a receive flushed by a broken VI, or failed: no data
  };

  // Set-up, in three steps: open() joins the job and opens the NIC;
  // register_segment() opens the segment to the peers' RDMA; connect()
  // registers the message buffers, creates a VI to every other rank, posts
  // its receives and connects. Errors set am's last error (detail::error)
  // and say which step failed.
  Link(std::uint16_t depth, Reliability reliability) : depth_(depth), reliability_(reliability) {}
  ~Link();
  Status open();
  Status register_segment(std::byte* segment, std::size_t bytes);
  Status connect();

  int rank() const { return rank_; }
  int size() const { return size_; }
  via::MemHandle segment_handle() const { return segment_handle_; }

  std::uint32_t request_buffer(int peer, std::uint16_t slot) const { return first_buffer(peer) + slot; }
  std::uint32_t reply_buffer(int peer, std::uint16_t slot) const { return first_buffer(peer) + depth_ + slot; }
  std::uint32_t ack_buffer(int peer, std::uint32_t i) const { return first_buffer(peer) + 2u * depth_ + i; }
  std::byte* buffer(std::uint32_t i) const;
  // Whether the NIC still holds buffer i's last send: it is rewritten only
  // once that is done (a send to a dead peer may never finish).
  bool busy(std::uint32_t i) const { return posted_[i]; }
  // Sends `length` bytes of buffer i to `peer` (not this rank); false if the
  // VI refused it (broken).
  bool send(int peer, std::uint32_t i, std::uint32_t length);
  // Sends still with the NIC, of every peer.
  unsigned sends_in_flight() const { return posted_sends_; }

  // The NIC's progress, and its wait for `done` (at most timeout_ms).
  void progress() { nic_->progress(); }
  template <class Done>
  via::Result wait(Done&& done, std::uint32_t timeout_ms) {
    return nic_->wait(std::forward<Done>(done), timeout_ms);
  }

  // Retires peer's completed sends; an RDMA's runs the rdma_done callback.
  void reap_sends(int peer);
  // The oldest frame from `peer` if it arrived: true. Frames come in order;
  // each is taken before the layer above handles it, which may poll again.
  bool next_frame(int peer, Frame& f);
  // Done with a frame: its receive is posted again, now or by
  // repost_next(), off the path from one message to the next. Both return
  // false if the VI refused the receive (broken).
  bool release(int peer, const Frame& f);
  bool has_reposts(int peer) const { return !channels_[peer]->reposts.empty(); }
  bool repost_next(int peer);
  // Whether a VI broke since the last call (the NIC's asynchronous error),
  // and whether peer's is broken.
  bool take_vi_error() { return std::exchange(vi_error_, false); }
  bool broken(int peer) const;

  // RDMA of `bytes` between local memory (registered: `local_handle`) and
  // the peer's segment, in one descriptor, which must be free (rdma_free);
  // rdma_done(tag, ok) when it completes. False if the VI refused it (broken).
  bool rdma_free() const { return !rdma_free_.empty(); }
  bool rdma(int peer, bool write, std::byte* local, via::MemHandle local_handle, std::uint64_t remote,
            via::MemHandle remote_handle, std::uint32_t bytes, std::uint32_t tag);
  void set_rdma_done(std::function<void(std::uint32_t tag, bool ok)> fn) { rdma_done_ = std::move(fn); }
  // Registers local memory for RDMA; false if the NIC refused it.
  bool register_memory(void* at, std::size_t bytes, via::MemHandle& handle);
  void deregister_memory(void* at, via::MemHandle handle);

 private:
  struct Channel {
    Channel(std::uint32_t max_sends, std::uint32_t max_receives) : sends(max_sends), receives(max_receives) {
      reposts.reserve(max_receives);
    }
    via::Vi* vi = nullptr;  // null for this rank itself
    via::PostedQueue sends, receives;
    std::vector<std::uint32_t> reposts;  // released receives, posted again by repost_next
  };
  std::uint32_t per_peer() const;
  std::uint32_t first_buffer(int peer) const { return per_peer() * std::uint32_t(peer); }
  VIP_DESCRIPTOR* desc(std::uint32_t i) const;
  bool post_recv(Channel& c, std::uint32_t i);
  bool repost(Channel& c, std::uint32_t i);
  bool take_send(Channel& c, std::uint32_t& i);
  void on_send_complete(std::uint32_t i, VIP_DESCRIPTOR* d);

  int rank_ = 0, size_ = 0;
  std::uint16_t depth_;
  Reliability reliability_;
  std::unique_ptr<via::Nic> nic_;
  via::Ptag ptag_ = 0;
  std::byte* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
  via::MemHandle arena_handle_ = 0;
  std::byte* descs_ = nullptr;
  std::byte* buffers_ = nullptr;
  std::byte* segment_ = nullptr;
  via::MemHandle segment_handle_ = 0;
  std::vector<std::uint8_t> posted_;      // per descriptor: with the NIC
  std::vector<std::uint32_t> rdma_free_;  // free RDMA descriptor indices
  std::vector<std::uint32_t> rdma_tag_;   // the tag of each RDMA descriptor (by index - first rdma)
  std::uint32_t first_rdma_ = 0;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::function<void(std::uint32_t, bool)> rdma_done_;
  unsigned posted_sends_ = 0;
  unsigned dispatching_ = 0;  // frames taken and not yet released (handlers may poll)
  bool vi_error_ = false;
};

}  // namespace am::detail
