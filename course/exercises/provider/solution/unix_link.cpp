// unix_link.cpp, the reference solution of exercise "provider": the engine's
// frames over one AF_UNIX stream socket, each a record (unix_link.hpp).
//
// Sending: one sendmsg of the prefix, the header and the payload; what the
// socket does not take is copied and sent before anything else. Receiving:
// recv into a buffer as large as a few records, frames shown in place (the
// header copied out, so it is aligned wherever the record starts).
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "unix_link.hpp"
#include "via/log.hpp"

namespace unix_provider {

namespace {

// Room for many small records per recv, and at least two of the largest.
constexpr std::size_t kReceiveBytes = 4 * (sizeof(RecordPrefix) + sizeof(via::FrameHeader) + kMaxFramePayload);

class StreamLink final : public UnixLink {
 public:
  StreamLink(int fd, std::string peer) : UnixLink(fd), peer_(std::move(peer)), rx_(kReceiveBytes) {}

  std::size_t max_payload() const override { return kMaxFramePayload; }

  bool try_send(const via::FrameHeader& header, const iovec* iov, std::size_t iovcnt) override {
    const RecordPrefix prefix{std::uint32_t(sizeof header + header.length), kRecordFrame};
    return send_record(prefix, &header, iov, iovcnt);
  }

  bool peek(const via::FrameHeader*& header, const std::byte*& payload) override {
    flush_tail();
    if (!record_buffered()) receive();
    if (!record_buffered()) return false;
    RecordPrefix prefix;
    std::memcpy(&prefix, rx_.data() + rx_begin_, sizeof prefix);
    if (prefix.kind == kRecordClose || prefix.kind == kRecordCloseError) {
      state_ = prefix.kind == kRecordCloseError ? State::failed : State::closed;
      rx_begin_ = rx_end_;  // nothing may follow a close
      return false;
    }
    if (prefix.kind != kRecordFrame || prefix.bytes < sizeof current_) {
      break_link("a malformed record (kind " + std::to_string(prefix.kind) + ", " + std::to_string(prefix.bytes) +
                 " bytes)");
      return false;
    }
    std::memcpy(&current_, rx_.data() + rx_begin_ + sizeof prefix, sizeof current_);
    if (sizeof current_ + current_.length != prefix.bytes) {
      break_link("a frame of " + std::to_string(current_.length) + " bytes in a record of " +
                 std::to_string(prefix.bytes));
      return false;
    }
    header = &current_;
    payload = rx_.data() + rx_begin_ + sizeof prefix + sizeof current_;
    return true;
  }

  void pop() override {
    RecordPrefix prefix;
    std::memcpy(&prefix, rx_.data() + rx_begin_, sizeof prefix);
    rx_begin_ += sizeof prefix + prefix.bytes;
  }

  PeerState peer_state() override {
    if (state_ == State::up && rx_eof_ && !record_buffered()) {
      if (rx_end_ != rx_begin_)
        break_link("the stream ended in the middle of a record");
      else
        state_ = State::dead;  // gone without a close: the process died
    }
    switch (state_) {
      case State::up: return PeerState::up;
      case State::closed: return PeerState::closed;
      case State::failed: return PeerState::failed;
      case State::dead: return PeerState::dead;
      case State::broken: return PeerState::broken;
    }
    return PeerState::broken;
  }

  std::string broken_reason() const override { return broken_; }

  void close(bool error) override {
    closing_ = true;
    if (state_ == State::up) {
      // What was sent, then the close, must reach the peer: wait (boundedly) for room.
      const RecordPrefix bye{0, error ? kRecordCloseError : kRecordClose};
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      bool queued = false;
      while (state_ == State::up && std::chrono::steady_clock::now() < give_up) {
        if (!queued) queued = send_record(bye, nullptr, nullptr, 0);
        else flush_tail();
        if (queued && !tail_waiting()) break;
        pollfd p{fd(), POLLOUT, 0};
        poll(&p, 1, 10);
      }
    }
    shutdown(fd(), SHUT_WR);
    state_ = State::broken;
  }

  bool frame_buffered() const override { return record_buffered(); }
  bool waits_for_room() const override { return tail_waiting() || refused_for_room_; }

 private:
  enum class State { up, closed, failed, dead, broken };

  bool tail_waiting() const { return tx_sent_ < tx_.size(); }

  // A whole record is in [rx_begin_, rx_end_).
  bool record_buffered() const {
    const std::size_t have = rx_end_ - rx_begin_;
    if (have < sizeof(RecordPrefix)) return false;
    RecordPrefix prefix;
    std::memcpy(&prefix, rx_.data() + rx_begin_, sizeof prefix);
    return have >= sizeof prefix + prefix.bytes;
  }

  void break_link(std::string reason) {
    if (state_ != State::up) return;
    state_ = State::broken;
    broken_ = std::move(reason);
    // A peer gone while this end closes is no news.
    if (!closing_) VIA_LOG(warn, "via", "unix: connection with %s: %s", peer_.c_str(), broken_.c_str());
  }

  // The prefix, then (for a frame) the header and the payload, in one sendmsg.
  bool send_record(const RecordPrefix& prefix, const via::FrameHeader* header, const iovec* iov, std::size_t iovcnt) {
    if (state_ != State::up) return false;  // the engine learns why from peer_state()
    flush_tail();
    if (tail_waiting()) return false;
    iov_.clear();
    iov_.push_back({const_cast<RecordPrefix*>(&prefix), sizeof prefix});
    if (header) iov_.push_back({const_cast<via::FrameHeader*>(header), sizeof *header});
    for (std::size_t i = 0; i < iovcnt; ++i)
      if (iov[i].iov_len) iov_.push_back(iov[i]);
    const std::size_t total = sizeof prefix + prefix.bytes;
    msghdr message{};
    message.msg_iov = iov_.data();
    message.msg_iovlen = iov_.size();
    const ssize_t sent = sendmsg(fd(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    refused_for_room_ = sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (sent < 0) {
      if (!refused_for_room_ && errno != EINTR) break_link(std::string("sending failed: ") + std::strerror(errno));
      return false;
    }
    if (std::size_t(sent) == total) return true;
    // The record is the link's now: keep its unsent tail.
    tx_.clear();
    tx_sent_ = 0;
    std::size_t skip = std::size_t(sent);
    for (const iovec& part : iov_) {
      const auto* base = static_cast<const std::byte*>(part.iov_base);
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      tx_.insert(tx_.end(), base + skip, base + part.iov_len);
      skip = 0;
    }
    return true;
  }

  void flush_tail() {
    while (tail_waiting()) {
      const ssize_t sent = send(fd(), tx_.data() + tx_sent_, tx_.size() - tx_sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          break_link(std::string("sending failed: ") + std::strerror(errno));
        return;
      }
      tx_sent_ += std::size_t(sent);
    }
  }

  void receive() {
    if (rx_eof_ || state_ != State::up) return;  // nothing is read after a close or a failure
    if (rx_begin_ == rx_end_) {
      rx_begin_ = rx_end_ = 0;
    } else if (rx_.size() - rx_end_ < sizeof(RecordPrefix) + sizeof(via::FrameHeader) + kMaxFramePayload) {
      std::memmove(rx_.data(), rx_.data() + rx_begin_, rx_end_ - rx_begin_);  // room for the largest record
      rx_end_ -= rx_begin_;
      rx_begin_ = 0;
    }
    if (rx_end_ - rx_begin_ >= sizeof(RecordPrefix)) {
      RecordPrefix prefix;
      std::memcpy(&prefix, rx_.data() + rx_begin_, sizeof prefix);
      if (prefix.bytes > sizeof(via::FrameHeader) + kMaxFramePayload) {  // it would never fit the buffer
        break_link("a record of " + std::to_string(prefix.bytes) + " bytes");
        return;
      }
    }
    const ssize_t got = recv(fd(), rx_.data() + rx_end_, rx_.size() - rx_end_, MSG_DONTWAIT);
    if (got > 0)
      rx_end_ += std::size_t(got);
    else if (got == 0)
      rx_eof_ = true;
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      break_link(std::string("receiving failed: ") + std::strerror(errno));
  }

  const std::string peer_;
  State state_ = State::up;
  std::string broken_;
  // Received bytes [rx_begin_, rx_end_).
  std::vector<std::byte> rx_;
  std::size_t rx_begin_ = 0, rx_end_ = 0;
  bool rx_eof_ = false;
  via::FrameHeader current_{};  // the peeked frame's header
  // The unsent tail of the last record.
  std::vector<std::byte> tx_;
  std::size_t tx_sent_ = 0;
  bool refused_for_room_ = false;  // the last record offered found the socket full
  bool closing_ = false;
  std::vector<iovec> iov_;
};

}  // namespace

std::unique_ptr<UnixLink> make_unix_link(int fd, std::string peer) {
  return std::make_unique<StreamLink>(fd, std::move(peer));
}

}  // namespace unix_provider
