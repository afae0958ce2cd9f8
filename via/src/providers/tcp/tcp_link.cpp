#include "providers/tcp/tcp_link.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "engine/clock.hpp"
#include "providers/tcp/handshake.hpp"
#include "via/config.hpp"
#include "via/copy.hpp"
#include "via/log.hpp"

namespace via::tcp {

namespace {

// Room for many small frames per recv, and at least two of the largest.
constexpr std::size_t kRxBytes = 1280 * 1024;
static_assert(kRxBytes >= 2 * (sizeof(FrameHeader) + kMaxFramePayload + 8));
constexpr std::uint8_t kPadding[8] = {};
constexpr std::size_t kMaxWakeBytes = 256 * 1024;  // the largest SO_RCVLOWAT asked for
// A read into the buffer takes what the frame at its head still lacks and at
// most this much beyond: a large payload behind it is then read mostly
// straight into its destination, not into the buffer and copied from there.
// Reading as much as the buffer holds, streaming 1 MiB on loopback put 29 %
// of the payload bytes through the buffer (the reader, faster than the
// sender, found each header arriving with 64-512 KiB of its payload). As
// much as the smallest frame read directly and the header after it: a
// stream of such frames costs one read each (32 KiB took two, and streaming
// 64 KiB lost 2-3 %).
constexpr std::size_t kReadAhead = padded_frame_bytes(kDirectPayloadMin) + sizeof(FrameHeader);
// A frame up to this long (header, payload, padding) is copied into one piece before it is sent.
constexpr std::size_t kGatheredFrameMax = sizeof(FrameHeader) + 1024;
// A payload whose memory is in more pieces than this goes through the buffer.
constexpr std::size_t kMaxDirectSlices = 64;

std::size_t padding_after(std::size_t payload) { return padded_frame_bytes(payload) - sizeof(FrameHeader) - payload; }

// The slices of `in` (n of them) that come after its first `skip` bytes, into `out` (room for n).
std::size_t slices_after(const iovec* in, std::size_t n, std::size_t skip, iovec* out) {
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (skip >= in[i].iov_len) {
      skip -= in[i].iov_len;
      continue;
    }
    out[m++] = iovec{static_cast<std::byte*>(in[i].iov_base) + skip, in[i].iov_len - skip};
    skip = 0;
  }
  return m;
}

// A connection whose peer stops acknowledging (host down, cable cut) is given
// up after this long: VIASTACK_TCP_TIMEOUT_MS, default 10 s.
unsigned connection_timeout_ms() {
  return unsigned(config::integer("VIASTACK_TCP_TIMEOUT_MS"));
}


void set_int_option(int fd, int level, int name, int value) { setsockopt(fd, level, name, &value, sizeof value); }

// Both ends of the connection on this host: the peer said it runs on this
// kernel, or the connection has the same address at each end, or loopback.
bool same_host(const asio::ip::tcp::socket& socket, std::uint32_t peer_kernel) {
  if (peer_kernel != 0 && peer_kernel == this_kernel()) return true;
  asio::error_code local_error, remote_error;
  const auto local = socket.local_endpoint(local_error).address();
  const auto remote = socket.remote_endpoint(remote_error).address();
  return !local_error && !remote_error && (remote.is_loopback() || remote == local);
}

}  // namespace

std::uint32_t this_kernel() {
  static const std::uint32_t tag = [] {
    std::string boot_id;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
    if (boot_id.empty()) return std::uint32_t{0};
    std::uint32_t hash = 2166136261u;  // FNV-1a
    for (const char c : boot_id) hash = (hash ^ std::uint8_t(c)) * 16777619u;
    return hash == 0 ? 1 : hash;
  }();
  return tag;
}

TcpLink::TcpLink(asio::ip::tcp::socket socket, std::string peer, std::function<void(TcpLink*)> on_destroy,
                 PayloadDestination destination, std::uint32_t peer_kernel)
    : socket_(std::move(socket)),
      peer_(std::move(peer)),
      timeout_ms_(connection_timeout_ms()),
      on_destroy_(std::move(on_destroy)),
      rx_words_(new std::uint64_t[kRxBytes / 8]),
      rx_(reinterpret_cast<std::byte*>(rx_words_.get())),
      destination_(std::move(destination)) {
  const int fd = socket_.native_handle();
  set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  // Within one host the round trip is microseconds, and the kernel's
  // autotuning grows the send buffer to several MiB: the sender then runs so
  // far ahead that its data has left the cache when the receiver reads it
  // (1 MiB streaming, interleaved: 4.3-4.6 GB/s in some runs, 8.6-11.2 in
  // others; with 256 KiB, which Linux doubles, 10.3-10.5 in every run).
  // The same across network namespaces of one kernel (veth pairs between
  // containers), which the peer names in the handshake (wire.hpp): 1 MiB
  // streaming 3.0-4.4 GB/s in 6 interleaved rounds, against 2.2-2.5 autotuned
  // (NPtcp 2.6-3.0); 4 MiB 3.0-7.6 against 2.2-6.3.
  // The receive buffer stays the kernel's: a fixed one made MPI's
  // bidirectional 1 MiB over tcp 0.76x Open MPI's, with every size as before
  // otherwise. Between hosts the kernel decides.
  if (const auto bytes = config::integer("VIASTACK_TCP_LOCAL_SNDBUF"); bytes > 0 && same_host(socket_, peer_kernel)) {
    set_int_option(fd, SOL_SOCKET, SO_SNDBUF, int(bytes));
    VIA_LOG(info, "via", "tcp: connection with %s, on this machine: a send buffer of %lld bytes (VIASTACK_TCP_LOCAL_SNDBUF)",
            peer_.c_str(), static_cast<long long>(bytes));
  }
  // A silent peer is noticed by keepalive probes while the link is idle, and
  // by peer_alive() while the kernel waits for it to acknowledge. Not by
  // TCP_USER_TIMEOUT: Linux counts window probes against it, so it would also
  // end the connection of a peer that is alive and only reads nothing (a rank
  // starved of CPU on an oversubscribed machine), whose kernel answers them.
  const int probe_s = std::max(1, int(timeout_ms_ / 5000));
  set_int_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, probe_s);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, probe_s);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPCNT, 4);
}

// Dead once ours has retransmitted to the peer, or probed its closed window,
// without an answer for the timeout: every check for that long found the
// kernel waiting, and nothing was acknowledged meanwhile. A peer that reads
// nothing answers every window probe at once (the kernel's probe counter
// goes back to zero), so it stays alive however long it does not read; a
// host that is down answers nothing. Keepalive probes (nothing of ours in
// the socket) are the kernel's own to judge. Checked when the engine looks
// at the peer's state (every sleep slice of a wait), from TCP_INFO.
bool TcpLink::peer_alive() {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return true;
  int queued = 0;
  const bool waits_for_answer =
      info.tcpi_retransmits > 0 || (info.tcpi_probes > 0 && ioctl(fd(), SIOCOUTQ, &queued) == 0 && queued > 0);
  if (!waits_for_answer) {
    unanswered_since_ns_ = 0;
    return true;
  }
  const std::uint64_t now = now_ns();
  if (unanswered_since_ns_ == 0) unanswered_since_ns_ = now;
  // Window probes go out ever more rarely (the retransmission timeout, at
  // least 200 ms, doubled per probe, at most 120 s: the kernel's probe timer):
  // a peer that answers them is late only once the answer to the next one is
  // overdue by the timeout, however often this is asked. Not once probes go
  // unanswered (the count of those is reset by any answer).
  constexpr std::uint64_t kMinRtoUs = 200'000, kMaxProbeGapMs = 120'000;
  const std::uint64_t probe_gap_ms =
      info.tcpi_probes > 0 && info.tcpi_probes <= 2
          ? std::min(kMaxProbeGapMs,
                     (std::max<std::uint64_t>(info.tcpi_rto, kMinRtoUs) << std::min<unsigned>(info.tcpi_backoff, 10)) /
                         1000)
          : 0;
  return info.tcpi_last_ack_recv < timeout_ms_ + probe_gap_ms ||
         now - unanswered_since_ns_ < std::uint64_t(timeout_ms_) * 1'000'000;
}

TcpLink::~TcpLink() {
  if (on_destroy_) on_destroy_(this);
}

void TcpLink::break_link(std::string reason) {
  if (state_ != State::up) return;
  state_ = State::broken;
  broken_ = std::move(reason);
  VIA_LOG(warn, "via", "tcp: connection with %s: %s", peer_.c_str(), broken_.c_str());
}

bool TcpLink::try_send(const FrameHeader& header, const iovec* iov, std::size_t iovcnt) {
  if (state_ != State::up || peer_left_) return false;  // the VI learns why from peer_state()
  if (backlog()) {
    flush_backlog();
    if (backlog()) return false;
  }
  iov_scratch_.resize(iovcnt + 2);
  iov_scratch_[0] = {const_cast<FrameHeader*>(&header), sizeof header};
  std::size_t total = sizeof header, n = 1;
  for (std::size_t i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    iov_scratch_[n++] = iov[i];
    total += iov[i].iov_len;
  }
  if (const std::size_t pad = padded_frame_bytes(header.length) - sizeof header - header.length) {
    iov_scratch_[n++] = {const_cast<std::uint8_t*>(kPadding), pad};
    total += pad;
  }
  ssize_t sent;
  if (total <= kGatheredFrameMax) {
    // A small frame is gathered here and leaves by send(): on loopback a
    // 48-byte frame in one piece costs the kernel ~200-300 ns less than
    // sendmsg() of its two pieces (header, payload), of a ~5 us one-way trip.
    alignas(8) std::byte frame[kGatheredFrameMax];
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      copy_memory(frame + at, iov_scratch_[i].iov_base, iov_scratch_[i].iov_len);
      at += iov_scratch_[i].iov_len;
    }
    sent = send(fd(), frame, total, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else {
    msghdr msg{};
    msg.msg_iov = iov_scratch_.data();
    msg.msg_iovlen = n;
    sent = sendmsg(fd(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  refused_for_room_ = sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  if (sent < 0) {
    if (refused_for_room_ || errno == EINTR) return false;
    send_failed(errno);
    return false;
  }
  if (std::size_t(sent) == total) return true;
  // The frame is the link's now: keep its unsent tail.
  tx_.clear();
  tx_sent_ = 0;
  std::size_t skip = std::size_t(sent);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* base = static_cast<const std::byte*>(iov_scratch_[i].iov_base);
    const std::size_t len = iov_scratch_[i].iov_len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    tx_.insert(tx_.end(), base + skip, base + len);
    skip = 0;
  }
  return true;
}

void TcpLink::flush_backlog() {
  while (backlog()) {
    const ssize_t sent = send(fd(), tx_.data() + tx_sent_, tx_.size() - tx_sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) send_failed(errno);
      return;
    }
    tx_sent_ += std::size_t(sent);
  }
}

bool TcpLink::frame_buffered() const {
  if (direct_.active) return direct_frame_complete();
  const std::size_t have = rx_end_ - rx_begin_;
  if (have < sizeof(FrameHeader)) return false;
  const auto* h = reinterpret_cast<const FrameHeader*>(rx_ + rx_begin_);
  return h->length > kMaxFramePayload || have >= padded_frame_bytes(h->length);
}

// A peer that closed in order after its last frames (its close frame, then
// its socket) resets the stream when our late bytes reach it, and our send
// fails: what it sent before it left is read first, and decides. The link
// then ends as closed once the frames before the close are shown, instead of
// broken.
void TcpLink::send_failed(int error) {
  if (error == EPIPE || error == ECONNRESET) {
    // Bounded by the buffer: room for the largest frame is kept free for each read.
    while (!rx_eof_ && !close_frame_buffered() && rx_end_ - rx_begin_ <= kRxBytes - (sizeof(FrameHeader) + kMaxFramePayload + 8)) {
      const std::size_t held = rx_end_ - rx_begin_ + direct_.placed;
      if (read_more() != 0 || rx_end_ - rx_begin_ + direct_.placed == held) break;
    }
    if (close_frame_buffered()) {
      peer_left_ = true;
      return;
    }
  }
  break_link(std::string("sending failed: ") + std::strerror(error));
}

bool TcpLink::close_frame_buffered() const {
  // While a payload is read directly, the buffer holds what follows it: its padding first.
  const std::size_t first = rx_begin_ + (direct_.active ? padding_after(direct_.header.length) : 0);
  for (std::size_t at = first; at + sizeof(FrameHeader) <= rx_end_;) {
    FrameHeader h;  // copied: after a direct payload's padding a header may sit unaligned
    std::memcpy(&h, rx_ + at, sizeof h);
    if (h.type == kFrameLinkClose) return true;
    if (h.length > kMaxFramePayload) return false;
    at += padded_frame_bytes(h.length);
  }
  return false;
}

void TcpLink::receive() {
  if (rx_eof_ || state_ != State::up) return;  // nothing is read after a close frame or a failure
  if (const int error = read_more(); error != 0)
    break_link(std::string("receiving failed: ") + std::strerror(error));
}

int TcpLink::read_more() {
  if (direct_.active && direct_.placed < direct_.header.length) return read_direct_payload();
  return read_into_buffer();
}

bool TcpLink::start_direct_payload() {
  const std::size_t have = rx_end_ - rx_begin_;
  if (!destination_ || direct_.active || have < sizeof(FrameHeader)) return false;
  const auto* h = reinterpret_cast<const FrameHeader*>(rx_ + rx_begin_);
  const std::size_t arrived = have - sizeof(FrameHeader);
  if ((h->type != kFrameSend && h->type != kFrameRdmaWrite && h->type != kFrameReadResponse) ||
      h->length < kDirectPayloadMin ||
      h->length > kMaxFramePayload || arrived >= h->length)
    return false;
  iovec to[kMaxDirectSlices];
  const std::size_t n = destination_(*h, to, kMaxDirectSlices);
  if (n == 0) return false;
  // What arrived of the payload is copied there; the rest is read there.
  const std::byte* from = rx_ + rx_begin_ + sizeof(FrameHeader);
  for (std::size_t i = 0, left = arrived; i < n && left > 0; ++i) {
    const std::size_t take = std::min(left, to[i].iov_len);
    copy_memory(to[i].iov_base, from, take);
    from += take;
    left -= take;
  }
  direct_ = DirectPayload{true, false, *h, arrived};
  rx_begin_ = rx_end_ = 0;
  return true;
}

int TcpLink::read_direct_payload() {
  const std::size_t remaining = direct_.header.length - direct_.placed;
  iovec iov[kMaxDirectSlices + 1];
  std::size_t n = 0;
  if (!direct_.abandoned) {
    iovec whole[kMaxDirectSlices];
    if (const std::size_t m = destination_(direct_.header, whole, kMaxDirectSlices); m > 0) {
      n = slices_after(whole, m, direct_.placed, iov);
      // With the payload's end come its padding and the next frame's header
      // (not more: a large next frame is then read directly from its start).
      iov[n++] = iovec{rx_ + rx_end_, padding_after(direct_.header.length) + sizeof(FrameHeader)};
    } else if (direct_.header.type == kFrameRdmaWrite) {
      // The target was deregistered (or lost its RDMA write right) since
      // the last read. The frame then names no region (handle 0), so that
      // the engine refuses it as a write to memory not registered.
      direct_.abandoned = true;
      direct_.header.rhandle = 0;
    } else {
      // A posted receive stays until it is filled or flushed: only a VI no longer connected lost it.
      break_link("the receive a payload was being read into is gone");
      return 0;
    }
  }
  if (direct_.abandoned) iov[n++] = iovec{rx_ + rx_end_, std::min(remaining, kRxBytes - rx_end_)};  // read, dropped
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  const ssize_t got = recvmsg(fd(), &msg, MSG_DONTWAIT);
  if (got > 0) {
    const std::size_t payload = std::min(std::size_t(got), remaining);
    direct_.placed += payload;
    if (!direct_.abandoned) rx_end_ += std::size_t(got) - payload;
  } else if (got == 0) {
    rx_eof_ = true;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return errno;
  }
  return 0;
}

bool TcpLink::direct_frame_complete() const {
  return direct_.placed == direct_.header.length && rx_end_ - rx_begin_ >= padding_after(direct_.header.length);
}

int TcpLink::read_into_buffer() {
  if (rx_begin_ == rx_end_) {
    rx_begin_ = rx_end_ = 0;
  } else if (kRxBytes - rx_end_ < sizeof(FrameHeader) + kMaxFramePayload + 8) {
    std::memmove(rx_, rx_ + rx_begin_, rx_end_ - rx_begin_);  // make room for the largest frame
    rx_end_ -= rx_begin_;
    rx_begin_ = 0;
  }
  const std::size_t want = std::min(kRxBytes - rx_end_, bytes_missing() + kReadAhead);
  const ssize_t got = recv(fd(), rx_ + rx_end_, want, MSG_DONTWAIT);
  if (got > 0) {
    rx_end_ += std::size_t(got);
  } else if (got == 0) {
    rx_eof_ = true;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return errno;
  }
  return 0;
}

// A sleeping NIC is woken by the socket (SO_RCVLOWAT) only once the rest of
// the frame it is reading has arrived, not for every segment of a large
// frame; the end of the stream or an error wakes it whatever the mark. At
// most kMaxWakeBytes are waited for, so that the reading of a large frame
// begins while its tail is still on the way, and the kernel, which grows the
// receive buffer to hold the mark, is never asked for much.
void TcpLink::wake_when_frame_complete() {
  const int lowat = int(std::min(bytes_missing(), kMaxWakeBytes));
  if (lowat == rcvlowat_) return;
  rcvlowat_ = lowat;
  set_int_option(fd(), SOL_SOCKET, SO_RCVLOWAT, lowat);
}

std::size_t TcpLink::bytes_missing() const {
  const std::size_t have = rx_end_ - rx_begin_;
  if (direct_.active) {
    const std::size_t padding = padding_after(direct_.header.length);
    const std::size_t missing = direct_.header.length - direct_.placed + (have < padding ? padding - have : 0);
    return std::max<std::size_t>(missing, 1);
  }
  if (have > 0 && have < sizeof(FrameHeader)) return sizeof(FrameHeader) - have;
  if (have >= sizeof(FrameHeader)) {
    const auto* h = reinterpret_cast<const FrameHeader*>(rx_ + rx_begin_);
    // An impossible length is the engine's to refuse (peek() shows it): nothing to wait for.
    const std::size_t whole = padded_frame_bytes(h->length);
    if (h->length <= kMaxFramePayload && have < whole) return whole - have;
  }
  return 1;
}

// A frame whose payload was read directly is shown with a null payload: the
// bytes are where the engine said they go. One read, and a second when the
// first brought bytes but no whole frame (a read into the buffer stops
// kReadAhead past the frame at its head, and a large payload whose header it
// brought goes on straight into its destination): a frame that was all in
// the socket is shown by one call.
bool TcpLink::peek(const FrameHeader*& header, const std::byte*& payload) {
  if (backlog()) flush_backlog();
  bool brought_bytes = true;
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A large frame still arriving goes on where it goes once the engine
    // knows where that is (a receive may have been posted since its header came).
    if (!direct_.active) start_direct_payload();
    const std::size_t have = rx_end_ - rx_begin_;
    if (direct_.active) {
      if (direct_frame_complete()) {
        header = &direct_.header;
        payload = nullptr;
        return true;
      }
    } else if (have >= sizeof(FrameHeader)) {
      const auto* h = reinterpret_cast<const FrameHeader*>(rx_ + rx_begin_);
      if (h->type == kFrameLinkClose) {
        if (state_ == State::up) state_ = (h->flags & kFlagError) ? State::failed : State::closed;
        rx_begin_ = rx_end_;  // nothing may follow a close
        return false;
      }
      // An impossible length is shown to the engine, which rejects the frame
      // and breaks the VI; nothing after it is read.
      if (h->length > kMaxFramePayload) {
        VIA_LOG(warn, "via", "tcp: %s sent a frame of %u bytes (limit %zu); closing the connection", peer_.c_str(),
                h->length, kMaxFramePayload);
        header = h;
        payload = nullptr;
        return true;
      }
      if (have >= padded_frame_bytes(h->length)) {
        header = h;
        payload = rx_ + rx_begin_ + sizeof(FrameHeader);
        return true;
      }
    }
    if (attempt == 2 || !brought_bytes) break;
    const std::size_t held = rx_end_ - rx_begin_ + direct_.placed;  // kept by the buffer's compaction
    receive();
    brought_bytes = rx_end_ - rx_begin_ + direct_.placed != held;
  }
  return false;
}

void TcpLink::pop() {
  if (direct_.active) {
    // What follows the payload's padding (at most the next frame's header)
    // moves to the buffer's start, where headers are 8-byte aligned.
    rx_begin_ += padding_after(direct_.header.length);
    std::memmove(rx_, rx_ + rx_begin_, rx_end_ - rx_begin_);
    rx_end_ -= rx_begin_;
    rx_begin_ = 0;
    direct_ = DirectPayload{};
    return;
  }
  const auto* h = reinterpret_cast<const FrameHeader*>(rx_ + rx_begin_);
  rx_begin_ += padded_frame_bytes(h->length);
}

Link::PeerState TcpLink::peer_state() {
  if (state_ == State::up && !rx_eof_ && !peer_alive())
    break_link("the peer acknowledged nothing for " + std::to_string(timeout_ms_) + " ms (VIASTACK_TCP_TIMEOUT_MS)");
  if (state_ == State::up && rx_eof_) {
    if (rx_end_ != rx_begin_ || direct_.active)
      break_link("connection closed in the middle of a frame");
    else
      state_ = State::dead;  // gone without closing: the process died or its host dropped the connection
  }
  switch (state_) {
    case State::up: return PeerState::up;
    case State::closed: return PeerState::closed;
    case State::failed: return PeerState::failed;
    case State::broken: return PeerState::broken;
    case State::dead: return PeerState::dead;
  }
  return PeerState::broken;
}

void TcpLink::close(bool error) {
  if (state_ == State::up) {
    // Everything sent so far, then the close, reach the peer before the stream ends:
    // wait (boundedly) for room to write them.
    const FrameHeader bye = link_close_frame(error);
    const std::uint64_t give_up = now_ns() + 1'000'000'000ull;
    bool queued = false;
    while (now_ns() < give_up && state_ == State::up) {
      if (!queued) queued = try_send(bye, nullptr, 0);
      else flush_backlog();
      if (queued && !backlog()) break;
      pollfd p{fd(), POLLOUT, 0};
      poll(&p, 1, 10);
    }
  }
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  socket_.close(ignored);
  state_ = State::broken;
}

}  // namespace via::tcp
