// One end of a tcp connection between two VIs: the engine's frames on one
// stream, each a FrameHeader, its payload and padding to 8 bytes (so every
// header in the receive buffer is aligned). Progress is the caller's: peek()
// reads what the kernel has, try_send() writes without blocking and keeps
// the unsent tail of a frame for the next call.
#pragma once

#include <asio.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "providers/provider.hpp"

namespace via::tcp {

// A frame type of the link itself, never shown to the engine: the peer is
// closing (flags: kFlagError when because of an error).
inline constexpr std::uint8_t kFrameLinkClose = 0xC0;
// 512 KiB: on loopback a 1 MiB message in 512 KiB frames streams 1.5-2x
// faster than in 128 KiB ones (fewer, longer sendmsg calls, the cost the
// sender pays per byte); 1 and 2 MiB frames measured slower again.
inline constexpr std::size_t kMaxFramePayload = 512 * 1024;

constexpr std::size_t padded_frame_bytes(std::size_t payload) { return sizeof(FrameHeader) + ((payload + 7) & ~std::size_t(7)); }
// A send, RDMA write or RDMA read response payload at least this long whose end has not arrived
// is read from the socket straight into the memory it goes to, when the
// engine already knows where that is (ViImpl::payload_destination), instead
// of into the link's buffer and then copied. Measured on loopback, 2 cores,
// against the copy (streaming, interleaved rounds): 16 and 32 KiB gained
// nothing (0.94x, 0.99x), 64 KiB 1.07x with buffers in cache and 1.1-1.45x
// with cold ones.
inline constexpr std::size_t kDirectPayloadMin = 64 * 1024;

// Where the engine would put the payload of the frame with header h (see
// ViImpl::payload_destination): the number of slices written to `out`.
using PayloadDestination = std::function<std::size_t(const FrameHeader& h, iovec* out, std::size_t max_out)>;

// This kernel, as connect requests and responses name it (wire.hpp's
// host_kernel): a hash of its boot id, which every network namespace and
// container on the machine shares. Two ends with the same one share the
// machine's memory and caches, whatever addresses they talk through (veth
// pairs between containers). 0 when the boot id cannot be read: not known.
std::uint32_t this_kernel();

// The frame that closes a link in order (with `error`, because of an error).
inline FrameHeader link_close_frame(bool error) {
  return FrameHeader{kFrameLinkClose, std::uint8_t(error ? kFlagError : 0), 0, 0, 0, 0, 0, 0, 0};
}

class TcpLink final : public Link {
 public:
  // `on_destroy` lets the provider forget the link.
  // `destination` (may be empty: every payload goes through the buffer) names where large payloads go.
  // `peer_kernel`: the kernel the peer said it runs on (0: not known).
  TcpLink(asio::ip::tcp::socket socket, std::string peer, std::function<void(TcpLink*)> on_destroy,
          PayloadDestination destination = {}, std::uint32_t peer_kernel = 0);
  ~TcpLink() override;
  const char* transport() const override { return "tcp"; }
  std::size_t max_payload() const override { return kMaxFramePayload; }
  bool try_send(const FrameHeader& header, const iovec* iov, std::size_t iovcnt) override;
  bool peek(const FrameHeader*& header, const std::byte*& payload) override;
  void pop() override;
  PeerState peer_state() override;
  std::string broken_reason() const override { return broken_; }
  void close(bool error) override;

  int fd() { return socket_.native_handle(); }
  // For the provider's sleep: a frame is waiting in user space / the link
  // needs room in the socket (for the unsent tail of a frame, or for a frame
  // the socket refused whole, which the engine offers again).
  bool frame_buffered() const;
  bool backlog() const { return tx_sent_ < tx_.size(); }
  bool waits_for_room() const { return backlog() || refused_for_room_; }
  // Before the provider sleeps: have the socket wake it only once the rest of
  // the frame being read is there.
  void wake_when_frame_complete();
  std::uint32_t epoll_events = 0;  // what the provider's epoll set watches for this link

 private:
  enum class State { up, closed, failed, broken, dead };
  void receive();
  // Reads what the socket holds: the rest of a payload being read directly,
  // then the buffer; 0, or the errno of a failed read.
  int read_more();
  // Reads what the socket holds into the buffer; 0, or the errno of a failed read.
  int read_into_buffer();
  // Starts reading the payload of the incomplete frame at the head of the
  // buffer into the memory it goes to, if it is large and the engine knows
  // where; whether it did.
  bool start_direct_payload();
  // Reads more of the direct payload (and what follows it into the buffer); 0 or errno.
  int read_direct_payload();
  // The frame being read directly, once its payload and padding are all there.
  bool direct_frame_complete() const;
  // Bytes still to come before the frame at the head is complete (at least 1).
  std::size_t bytes_missing() const;
  void flush_backlog();
  void send_failed(int error);
  // Whether the peer's close frame is among the frames received but not yet shown.
  bool close_frame_buffered() const;
  void break_link(std::string reason);
  bool peer_alive() override;

  asio::ip::tcp::socket socket_;
  const std::string peer_;
  const unsigned timeout_ms_;  // VIASTACK_TCP_TIMEOUT_MS
  std::uint64_t unanswered_since_ns_ = 0;  // when peer_alive() first saw the kernel wait for an answer
  std::function<void(TcpLink*)> on_destroy_;
  State state_ = State::up;
  std::string broken_;
  // Received bytes [rx_begin_, rx_end_) of an 8-byte aligned buffer.
  std::unique_ptr<std::uint64_t[]> rx_words_;
  std::byte* rx_;
  std::size_t rx_begin_ = 0, rx_end_ = 0;
  bool rx_eof_ = false;
  int rcvlowat_ = 1;  // SO_RCVLOWAT of the socket
  // The unsent tail of the last frame.
  std::vector<std::byte> tx_;
  std::size_t tx_sent_ = 0;
  bool refused_for_room_ = false;  // the last frame offered found the socket full
  bool peer_left_ = false;  // a send failed after the peer's close frame came: nothing more is sent
  std::vector<iovec> iov_scratch_;
  // A payload being read straight into the memory `destination_` names. Its
  // header has left the buffer, which holds only what follows the payload
  // (padding first). Before each read the destination is asked again, so a
  // target deregistered meanwhile gets no more bytes: the rest is read and
  // dropped ("abandoned"), and the engine refuses the frame.
  PayloadDestination destination_;
  struct DirectPayload {
    bool active = false;
    bool abandoned = false;
    FrameHeader header{};
    std::size_t placed = 0;  // payload bytes read so far
  } direct_;
};

}  // namespace via::tcp
