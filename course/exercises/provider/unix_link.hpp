// unix_link.hpp: what the unix provider asks of the link you write in
// unix_link.cpp (exercise "provider", README.md). Do not change this file.
//
// The provider (unix_provider.cpp, given) sets connections up: each pair of
// connected VIs gets one AF_UNIX stream socket of its own, connected and
// non-blocking, and the provider hands each end to make_unix_link(). From
// then on the link carries the engine's frames over that socket, and the
// engine drives it, from one thread, through via::Link (the engine's
// internal via/src/providers/provider.hpp, shown here as far as you need it):
//
//   bool try_send(const via::FrameHeader& header, const iovec* iov, std::size_t iovcnt)
//       Sends one frame: the 40-byte header, then header.length payload
//       bytes gathered from iov[0..iovcnt). Never blocks. Returns true once
//       the frame is the link's (sent, or its unsent tail kept to be sent
//       later); false when it cannot take the frame now (the socket is full,
//       a tail is still waiting): the engine offers the same frame again
//       later. The iov memory may change once try_send returned.
//   bool peek(const via::FrameHeader*& header, const std::byte*& payload)
//       The oldest frame received and not yet popped: true and pointers to
//       its header and its header->length payload bytes, valid until pop();
//       false when no whole frame is in yet. Never blocks; reads what the
//       socket has (and sends what waits).
//   void pop()
//       Done with the frame peek() showed.
//   std::size_t max_payload() const
//       The largest header.length try_send is given (the engine cuts larger
//       messages into frames of at most this).
//   PeerState peer_state()
//       up; closed or failed: the peer's link called close(false) or
//       close(true) and everything it sent before has been peeked; dead: the
//       stream ended without a close (the peer process died); broken: the
//       stream is unusable (a send or receive failed, the stream ended in
//       the middle of a frame), broken_reason() saying how.
//   void close(bool error)
//       This end is going away: tell the peer (whose peer_state() becomes
//       closed, or failed when `error`) after what was sent already.
//
// On the stream, every frame is a record: a RecordPrefix with the bytes that
// follow it, then those bytes. A frame record is the FrameHeader and its
// payload; a close record carries nothing.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "providers/provider.hpp"

namespace unix_provider {

struct RecordPrefix {
  std::uint32_t bytes;  // what follows the prefix: sizeof(FrameHeader) + payload, or 0 for a close
  std::uint32_t kind;   // RecordKind
};
static_assert(sizeof(RecordPrefix) == 8);

enum RecordKind : std::uint32_t {
  kRecordFrame = 1,       // a FrameHeader and header.length payload bytes
  kRecordClose = 2,       // the peer closed: PeerState::closed
  kRecordCloseError = 3,  // the peer closed because of an error: PeerState::failed
};

// The largest payload of one frame.
inline constexpr std::size_t kMaxFramePayload = 256 * 1024;

// The provider's view of a link: via::Link plus what its sleep needs. It
// owns the socket and closes it when destroyed.
class UnixLink : public via::Link {
 public:
  explicit UnixLink(int fd) : fd_(fd) {}
  ~UnixLink() override {
    if (on_destroy_) on_destroy_();
    ::close(fd_);
  }
  const char* transport() const final { return "unix"; }
  int fd() const { return fd_; }

  // For the provider's sleep, which waits until the socket is readable, or
  // writable when waits_for_room(): a whole frame is already in user space
  // (do not sleep); a frame or a tail waits for room in the socket.
  virtual bool frame_buffered() const = 0;
  virtual bool waits_for_room() const = 0;

  // The provider's, to forget the link when it goes.
  void on_destroy(std::function<void()> forget) { on_destroy_ = std::move(forget); }

 private:
  const int fd_;
  std::function<void()> on_destroy_;
};

// Yours (unix_link.cpp): the link over `fd`, a connected non-blocking
// AF_UNIX stream socket it owns from now on; `peer` names the other end in
// messages.
std::unique_ptr<UnixLink> make_unix_link(int fd, std::string peer);

}  // namespace unix_provider
