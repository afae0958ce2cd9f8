// unix_link.cpp: YOUR link for exercise "provider" (see README.md).
//
// The unix provider (unix_provider.cpp) has set a connection up between two
// VIs and hands you its stream: a connected, non-blocking AF_UNIX stream
// socket, fd(). Carry the engine's frames over it, each as a record: a
// RecordPrefix {bytes, kind}, then the FrameHeader and the payload
// (unix_link.hpp says what each function must do; read it first).
//
// As given, it compiles and registers, and every function says it is not
// written yet: the first frame breaks the VI ("unix_link.cpp: try_send is not
// written yet"). The TODOs say what to write. The engine calls it from one
// thread, and no call may block (but close(), briefly).
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "unix_link.hpp"
#include "via/log.hpp"

namespace unix_provider {

namespace {

class StreamLink final : public UnixLink {
 public:
  StreamLink(int fd, std::string peer) : UnixLink(fd), peer_(std::move(peer)) {}

  std::size_t max_payload() const override { return kMaxFramePayload; }

  bool try_send(const via::FrameHeader& header, const iovec* iov, std::size_t iovcnt) override {
    // TODO: write the record: RecordPrefix{sizeof header + header.length,
    // kRecordFrame}, the header, then the payload from iov (sendmsg takes
    // them in one call, MSG_DONTWAIT | MSG_NOSIGNAL). The socket may take
    // only part of it: keep the rest, send it before anything else (here
    // and in peek()), and refuse new frames (return false) until it is out.
    // A socket that takes nothing (EAGAIN) refuses the frame too.
    (void)header, (void)iov, (void)iovcnt;
    return not_written_yet("try_send");
  }

  bool peek(const via::FrameHeader*& header, const std::byte*& payload) override {
    // TODO: recv what the socket has (MSG_DONTWAIT) into a buffer; once a
    // whole record is in, show its frame: header and payload pointing into
    // the buffer until pop(). Records arrive cut anywhere and several at
    // once. Copy the header out if it may be misaligned in the buffer. A
    // close record ends the stream: peer_state() says closed or failed.
    // recv returning 0 is the end of the stream (see peer_state()).
    (void)header, (void)payload;
    return not_written_yet("peek");
  }

  void pop() override {
    // TODO: step past the record peek() showed.
    not_written_yet("pop");
  }

  PeerState peer_state() override {
    // TODO: closed/failed after a close record; dead when the stream ended
    // between records without one; broken (and broken_ saying why) when a
    // send or recv failed or the stream ended inside a record.
    return broken_.empty() ? PeerState::up : PeerState::broken;
  }

  std::string broken_reason() const override { return broken_; }

  void close(bool error) override {
    // TODO: send a close record (kRecordCloseError when `error`) after what
    // is still waiting to be sent; wait for room (poll, POLLOUT) at most
    // about a second. Then shutdown(fd(), SHUT_WR); the socket itself is
    // closed by UnixLink when the link is destroyed.
    (void)error;
    not_written_yet("close");
  }

  // TODO: for the provider's sleep: a whole record is in the buffer; a tail
  // (or a refused frame) waits for room in the socket.
  bool frame_buffered() const override { return false; }
  bool waits_for_room() const override { return false; }

 private:
  // The link breaks, naming what is missing.
  bool not_written_yet(const char* function) {
    if (broken_.empty()) {
      broken_ = std::string("unix_link.cpp: ") + function + " is not written yet";
      VIA_LOG(error, "via", "unix: connection with %s: %s", peer_.c_str(), broken_.c_str());
    }
    return false;
  }

  const std::string peer_;
  std::string broken_;
  // TODO: the receive buffer and where its unread bytes are, whether the
  // stream has ended; the unsent tail of the last record; the peeked frame's
  // header; the link's state (up, closed, failed, dead, broken).
};

}  // namespace

std::unique_ptr<UnixLink> make_unix_link(int fd, std::string peer) {
  return std::make_unique<StreamLink>(fd, std::move(peer));
}

}  // namespace unix_provider
