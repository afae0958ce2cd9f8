// unix_provider.cpp: the connection set-up of the "unix" provider, given
// (exercise "provider", README.md). Do not change this file.
//
// Each NIC listens on an abstract AF_UNIX stream socket named after the job
// and its number, "\0viastack-unix.<job>.<nic>"; a NIC's host address is its
// number (4 bytes, little-endian), as on shm. Each VI connection is a stream
// of its own: the side that opens it writes a ConnectRequest, the other
// answers with a ConnectResponse, and once accepted the stream is the link's
// (unix_link.hpp), which carries the engine's frames. Peer to peer, only the
// side whose address orders first opens the stream. A stream that cannot be
// opened yet (the NIC is not there, its backlog is full) is opened again
// after a delay, until the VI's connect timeout, which the engine keeps.
//
// Only processes of the same user are served (SO_PEERCRED); any of them
// that knows the job's name may connect, unlike tcp's job-key handshake.
//
// The provider registers itself as "unix" when its library loads:
// VIASTACK_PROVIDER_PLUGIN=libprovider_unix.so VIASTACK_PROVIDER=unix.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "engine/engine.hpp"
#include "engine/region_table.hpp"
#include "unix_link.hpp"
#include "via/bootstrap.hpp"
#include "via/log.hpp"

namespace unix_provider {

namespace {

using via::ConnRequestImpl;
using via::NetAddress;
using via::Result;
using via::ViAttributes;
using via::ViImpl;

constexpr std::uint32_t kMaxVi = 1024;
constexpr std::size_t kMaxDiscriminator = 16;
constexpr std::size_t kMaxHeldRequests = 1024;
constexpr std::uint32_t kMagic = 0x56554e58;  // "VUNX"
constexpr std::uint64_t kFirstRetryNs = 1'000'000, kLastRetryNs = 200'000'000;

std::uint64_t now_ns() {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::vector<std::uint8_t> host_of(std::uint32_t nic) {
  return {std::uint8_t(nic), std::uint8_t(nic >> 8), std::uint8_t(nic >> 16), std::uint8_t(nic >> 24)};
}

std::optional<std::uint32_t> nic_of(const std::vector<std::uint8_t>& host) {
  if (host.size() != 4) return std::nullopt;
  return std::uint32_t(host[0]) | std::uint32_t(host[1]) << 8 | std::uint32_t(host[2]) << 16 |
         std::uint32_t(host[3]) << 24;
}

std::optional<std::uint32_t> parse_number(std::string_view s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  return std::uint32_t(std::stoul(std::string(s)));
}

// The abstract socket name of NIC `nic` of `job`; false when it does not fit.
bool socket_address(const std::string& job, std::uint32_t nic, sockaddr_un& address, socklen_t& length) {
  const std::string name = "viastack-unix." + job + "." + std::to_string(nic);
  if (name.size() + 1 > sizeof address.sun_path) return false;
  address = {};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());  // sun_path[0] == 0: the abstract namespace
  length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return true;
}

// The first bytes of a stream, from the side that opened it.
struct ConnectRequest {
  std::uint32_t magic;
  std::uint8_t peer_mode;  // 1: peer to peer, 0: client
  std::uint8_t reliability, rdma_write, rdma_read;
  std::uint32_t max_transfer;
  std::uint32_t from_nic;
  std::uint8_t local_disc_len, target_disc_len;
  std::uint8_t local_disc[kMaxDiscriminator], target_disc[kMaxDiscriminator];
  std::uint8_t unused[2];
};
static_assert(sizeof(ConnectRequest) == 52);

enum ConnectStatus : std::uint8_t { kAccepted = 1, kRejected = 2, kReliabilityMismatch = 3 };

// The answer, from the other side.
struct ConnectResponse {
  std::uint32_t magic;
  std::uint8_t status;  // ConnectStatus
  std::uint8_t reliability, rdma_write, rdma_read;
  std::uint32_t max_transfer;
};
static_assert(sizeof(ConnectResponse) == 12);

std::vector<std::uint8_t> local_disc(const ConnectRequest& r) {
  return {r.local_disc, r.local_disc + r.local_disc_len};
}
std::vector<std::uint8_t> target_disc(const ConnectRequest& r) {
  return {r.target_disc, r.target_disc + r.target_disc_len};
}
ViAttributes attributes_of(const ConnectRequest& r) {
  return ViAttributes{VIP_RELIABILITY_LEVEL(r.reliability), r.max_transfer, 0, r.rdma_write != 0, r.rdma_read != 0};
}
ViAttributes attributes_of(const ConnectResponse& r) {
  return ViAttributes{VIP_RELIABILITY_LEVEL(r.reliability), r.max_transfer, 0, r.rdma_write != 0, r.rdma_read != 0};
}

// Reads what is there of a fixed-size message into `buffer`, without
// blocking; nullopt while incomplete; false in `open` once the stream ended
// or failed.
template <typename Message>
std::optional<Message> read_message(int fd, std::vector<std::byte>& buffer, bool& open) {
  while (buffer.size() < sizeof(Message)) {
    std::byte chunk[sizeof(Message)];
    const ssize_t got = recv(fd, chunk, sizeof(Message) - buffer.size(), MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) open = false;
    if (got <= 0) return std::nullopt;
    buffer.insert(buffer.end(), chunk, chunk + got);
  }
  Message m;
  std::memcpy(&m, buffer.data(), sizeof m);
  if (m.magic != kMagic) open = false;
  return open ? std::optional<Message>(m) : std::nullopt;
}

// Writes a small message whole on a stream that has room for it (a new one).
template <typename Message>
bool write_message(int fd, const Message& m) {
  return send(fd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) == ssize_t(sizeof m);
}

// Whether the other end of a stream is still there (nothing to read, or data waiting).
bool still_open(int fd) {
  char byte;
  const ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

// A socket, closed when the object goes unless released.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// A stream opened to this NIC: its request, once it has arrived whole.
struct Incoming {
  Socket socket;
  std::vector<std::byte> buffer;
  ConnectRequest request{};
};

// A stream this NIC opens for one of its VIs.
struct Outgoing {
  enum class Phase { waiting_to_retry, requested, answered };
  Phase phase = Phase::waiting_to_retry;
  std::uint32_t target_nic = 0;
  ConnectRequest request{};
  Socket socket;
  std::vector<std::byte> buffer;
  ConnectResponse response{};
  std::uint64_t next_attempt_ns = 0;
  std::uint64_t retry_ns = kFirstRetryNs;
};

class UnixProvider final : public via::Provider {
 public:
  UnixProvider(std::string job, std::uint32_t nic, Socket listener)
      : job_(std::move(job)), nic_(nic), host_(host_of(nic)), listener_(std::move(listener)) {}

  const char* name() const override { return "unix"; }
  const std::vector<std::uint8_t>& host_address() const override { return host_; }
  std::uint32_t nic_number() const override { return nic_; }

  // "rankN" or "N": NIC N of the job; "localhost": NIC `index`.
  Result resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const override {
    std::optional<std::uint32_t> nic = name == "localhost"             ? std::optional<std::uint32_t>(index)
                                       : name.substr(0, 4) == "rank" ? parse_number(name.substr(4))
                                                                       : parse_number(name);
    if (!nic) return Result::error_nameservice;
    host = host_of(*nic);
    return Result::success;
  }

  std::string describe_address(const std::vector<std::uint8_t>& host) const override {
    const auto nic = nic_of(host);
    return nic ? "unix:" + std::to_string(*nic) : "unix:<malformed address>";
  }

  void fill_attributes(VIP_NIC_ATTRIBUTES& a) const override {
    std::snprintf(a.Name, sizeof a.Name, "viastack-unix:%u", nic_);
    a.HardwareVersion = 1;
    a.ProviderVersion = 1;
    a.MaxDiscriminatorLen = kMaxDiscriminator;
    a.NativeMTU = kMaxFramePayload;
  }

  via::RegionTable& regions() override { return *regions_; }
  std::uint32_t max_vis() const override { return kMaxVi; }

  Result add_vi(ViImpl& vi) override {
    const auto free = std::find(slot_used_.begin(), slot_used_.end(), false);
    if (free == slot_used_.end()) return Result::error_resource;
    *free = true;
    vi.provider_slot = std::uint32_t(free - slot_used_.begin());
    return Result::success;
  }
  void remove_vi(ViImpl& vi) override {
    pending_.erase(vi.provider_slot);
    slot_used_[vi.provider_slot] = false;
  }
  void publish_vi_attributes(ViImpl&) override {}  // RDMA is checked where it lands, in the engine
  void reset_vi(ViImpl& vi) override { pending_.erase(vi.provider_slot); }

  // ---- connection set-up ----

  Result connect(ViImpl& vi, const NetAddress& local, const NetAddress& remote, ConnectMode mode) override {
    const auto target = nic_of(remote.host);
    if (!target || remote.discriminator.size() > kMaxDiscriminator ||
        local.discriminator.size() > kMaxDiscriminator || (!local.host.empty() && local.host != host_))
      return Result::invalid_parameter;
    Pending& p = pending_[vi.provider_slot];
    p = Pending{NetAddress{host_, local.discriminator}, remote, nullptr};
    const bool opens = mode == ConnectMode::client ||
                       std::tie(host_, local.discriminator) < std::tie(remote.host, remote.discriminator);
    if (!opens) return Result::success;
    p.out = std::make_unique<Outgoing>();
    p.out->target_nic = *target;
    ConnectRequest& r = p.out->request;
    r.magic = kMagic;
    r.peer_mode = mode == ConnectMode::peer;
    r.reliability = std::uint8_t(vi.attributes().reliability);
    r.rdma_write = vi.attributes().rdma_write;
    r.rdma_read = vi.attributes().rdma_read;
    r.max_transfer = vi.attributes().max_transfer;
    r.from_nic = nic_;
    r.local_disc_len = std::uint8_t(local.discriminator.size());
    r.target_disc_len = std::uint8_t(remote.discriminator.size());
    std::copy(local.discriminator.begin(), local.discriminator.end(), r.local_disc);
    std::copy(remote.discriminator.begin(), remote.discriminator.end(), r.target_disc);
    try_open(*p.out);
    return Result::success;
  }

  Result poll_connect(ViImpl& vi) override {
    if (vi.state() == via::ViState::connected) return Result::success;
    const auto it = pending_.find(vi.provider_slot);
    if (it == pending_.end()) return Result::invalid_state;
    progress_control();
    Pending& p = it->second;
    if (!p.out) return poll_peer(vi, p);
    if (p.out->phase != Outgoing::Phase::answered) return Result::not_done;
    const ConnectResponse response = p.out->response;
    const std::uint32_t target = p.out->target_nic;
    Socket socket = std::move(p.out->socket);
    pending_.erase(it);
    switch (response.status) {
      case kAccepted:
        vi.attach(make_link(std::move(socket), "unix:" + std::to_string(target)), attributes_of(response));
        return Result::success;
      case kRejected: return Result::reject;
      case kReliabilityMismatch: return Result::invalid_reliability_level;
    }
    return Result::no_match;
  }

  bool cancel_connect(ViImpl& vi) override {
    const auto it = pending_.find(vi.provider_slot);
    if (it == pending_.end()) return vi.state() != via::ViState::connected;
    pending_.erase(it);  // closes its stream: the other side forgets the request
    return true;
  }

  std::unique_ptr<ConnRequestImpl> take_request(const NetAddress& local) override {
    if (!local.host.empty() && local.host != host_) return nullptr;
    for (auto it = held_connects_.begin(); it != held_connects_.end();) {
      if (!still_open(it->socket.fd())) {
        it = held_connects_.erase(it);
        continue;
      }
      if (target_disc(it->request) != local.discriminator) {
        ++it;
        continue;
      }
      auto request = std::make_unique<ConnRequestImpl>();
      request->local = NetAddress{host_, local.discriminator};
      request->remote = NetAddress{host_of(it->request.from_nic), local_disc(it->request)};
      request->remote_attrs = attributes_of(it->request);
      request->provider_cookie = ++last_cookie_;
      accepted_[last_cookie_] = std::move(*it);
      held_connects_.erase(it);
      return request;
    }
    return nullptr;
  }

  Result accept(const ConnRequestImpl& request, ViImpl& vi) override {
    const auto it = accepted_.find(request.provider_cookie);
    if (it == accepted_.end()) return Result::invalid_parameter;
    Incoming in = std::move(it->second);
    accepted_.erase(it);
    if (!answer(in.socket.fd(), kAccepted, vi.attributes())) return Result::timeout;  // the client gave up
    vi.attach(make_link(std::move(in.socket), "unix:" + std::to_string(in.request.from_nic)),
              attributes_of(in.request));
    return Result::success;
  }

  void reject(const ConnRequestImpl& request) override {
    const auto it = accepted_.find(request.provider_cookie);
    if (it == accepted_.end()) return;
    answer(it->second.socket.fd(), kRejected, ViAttributes{});
    accepted_.erase(it);
  }

  void progress_control() override {
    accept_streams();
    read_requests();
    const std::uint64_t now = now_ns();
    for (auto& [slot, p] : pending_) {
      if (!p.out) continue;
      Outgoing& o = *p.out;
      if (o.phase == Outgoing::Phase::waiting_to_retry && now >= o.next_attempt_ns) try_open(o);
      if (o.phase != Outgoing::Phase::requested) continue;
      bool open = true;
      if (const auto response = read_message<ConnectResponse>(o.socket.fd(), o.buffer, open)) {
        o.response = *response;
        o.phase = Outgoing::Phase::answered;
      } else if (!open) {
        retry_later(o);  // the NIC went away before it answered: it may come back
      }
    }
  }

  // ---- sleeping: poll() on every socket of the NIC ----

  std::uint32_t arm_sleep() override { return 0; }
  void disarm_sleep() override {}

  void sleep(std::uint32_t, std::chrono::nanoseconds max) override {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    for (UnixLink* link : links_) {
      if (link->frame_buffered()) return;
      fds.push_back({link->fd(), short(POLLIN | (link->waits_for_room() ? POLLOUT : 0)), 0});
    }
    for (const Incoming& in : reading_) fds.push_back({in.socket.fd(), POLLIN, 0});
    std::uint64_t max_ns = std::uint64_t(max.count());
    const std::uint64_t now = now_ns();
    for (const auto& [slot, p] : pending_) {
      if (!p.out) continue;
      if (p.out->phase == Outgoing::Phase::requested) fds.push_back({p.out->socket.fd(), POLLIN, 0});
      if (p.out->phase == Outgoing::Phase::waiting_to_retry)
        max_ns = std::min(max_ns, p.out->next_attempt_ns > now ? p.out->next_attempt_ns - now : 0);
    }
    // Rounded up to whole milliseconds, the unit poll counts in.
    poll(fds.data(), fds.size(), int((max_ns + 999'999) / 1'000'000));
  }

 private:
  struct Pending {
    NetAddress local, remote;
    std::unique_ptr<Outgoing> out;  // null: waiting for the peer's stream
  };

  std::unique_ptr<via::Link> make_link(Socket socket, std::string peer) {
    std::unique_ptr<UnixLink> link = make_unix_link(socket.release(), std::move(peer));
    UnixLink* raw = link.get();
    links_.push_back(raw);
    link->on_destroy([this, raw] { links_.erase(std::find(links_.begin(), links_.end(), raw)); });
    return link;
  }

  static bool answer(int fd, ConnectStatus status, const ViAttributes& attrs) {
    const ConnectResponse r{kMagic, status, std::uint8_t(attrs.reliability), attrs.rdma_write, attrs.rdma_read,
                            attrs.max_transfer};
    return write_message(fd, r);
  }

  // Opens the stream and sends the request, or schedules the next attempt.
  void try_open(Outgoing& o) {
    sockaddr_un address;
    socklen_t length;
    Socket s(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.fd() >= 0 && socket_address(job_, o.target_nic, address, length) &&
        ::connect(s.fd(), reinterpret_cast<sockaddr*>(&address), length) == 0 && write_message(s.fd(), o.request)) {
      o.socket = std::move(s);
      o.buffer.clear();
      o.phase = Outgoing::Phase::requested;
      return;
    }
    retry_later(o);
  }

  void retry_later(Outgoing& o) {
    o.socket = Socket();
    o.phase = Outgoing::Phase::waiting_to_retry;
    o.next_attempt_ns = now_ns() + o.retry_ns;
    o.retry_ns = std::min(o.retry_ns * 2, kLastRetryNs);
  }

  // The waiting side of a peer-to-peer connection: the opener's request, once it came.
  Result poll_peer(ViImpl& vi, Pending& p) {
    for (auto it = held_peers_.begin(); it != held_peers_.end();) {
      const ConnectRequest& r = it->request;
      if (!still_open(it->socket.fd())) {
        it = held_peers_.erase(it);
        continue;
      }
      if (host_of(r.from_nic) != p.remote.host || local_disc(r) != p.remote.discriminator ||
          target_disc(r) != p.local.discriminator) {
        ++it;
        continue;
      }
      Incoming in = std::move(*it);
      held_peers_.erase(it);
      pending_.erase(vi.provider_slot);
      if (in.request.reliability != vi.attributes().reliability) {
        answer(in.socket.fd(), kReliabilityMismatch, vi.attributes());
        return Result::invalid_reliability_level;
      }
      if (!answer(in.socket.fd(), kAccepted, vi.attributes())) return Result::no_match;
      vi.attach(make_link(std::move(in.socket), "unix:" + std::to_string(in.request.from_nic)),
                attributes_of(in.request));
      return Result::success;
    }
    return Result::not_done;
  }

  // New streams, from processes of this user only.
  void accept_streams() {
    for (;;) {
      Socket s(accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (s.fd() < 0) return;
      ucred peer{};
      socklen_t length = sizeof peer;
      if (getsockopt(s.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 || peer.uid != getuid()) {
        VIA_LOG(warn, "via", "unix: refused a stream from uid %u (only this user's processes are served)",
                unsigned(peer.uid));
        continue;
      }
      reading_.push_back(Incoming{std::move(s), {}, {}});
    }
  }

  void read_requests() {
    for (auto it = reading_.begin(); it != reading_.end();) {
      bool open = true;
      const auto request = read_message<ConnectRequest>(it->socket.fd(), it->buffer, open);
      if (!request && open) {
        ++it;
        continue;
      }
      if (request && request->local_disc_len <= kMaxDiscriminator && request->target_disc_len <= kMaxDiscriminator) {
        it->request = *request;
        auto& held = request->peer_mode ? held_peers_ : held_connects_;
        if (held.size() >= kMaxHeldRequests) held.pop_front();
        held.push_back(std::move(*it));
      }
      it = reading_.erase(it);
    }
  }

  const std::string job_;
  const std::uint32_t nic_;
  const std::vector<std::uint8_t> host_;
  const Socket listener_;
  std::unique_ptr<via::RegionTable> regions_ = std::make_unique<via::RegionTable>();
  std::vector<bool> slot_used_ = std::vector<bool>(kMaxVi);
  std::map<std::uint32_t, Pending> pending_;  // by VI slot
  std::deque<Incoming> reading_;              // streams whose request is not in yet
  std::deque<Incoming> held_connects_, held_peers_;
  std::map<std::uint64_t, Incoming> accepted_;  // requests handed out by take_request
  std::uint64_t last_cookie_ = 0;
  std::vector<UnixLink*> links_;
};

Result open_unix_provider(std::string_view device, const std::shared_ptr<via::Bootstrap>& job,
                          std::unique_ptr<via::Provider>& out) {
  std::optional<std::uint32_t> nic = std::uint32_t(job->rank());
  if (const auto colon = device.find(':'); colon != std::string_view::npos) nic = parse_number(device.substr(colon + 1));
  if (!nic) {
    VIA_LOG(error, "via", "bad device name '%.*s' (expected unix:N)", int(device.size()), device.data());
    return Result::invalid_parameter;
  }
  sockaddr_un address;
  socklen_t length;
  if (!socket_address(job->job_id(), *nic, address, length)) {
    VIA_LOG(error, "via", "unix: the job's name '%s' is too long for a socket name", job->job_id().c_str());
    return Result::error_resource;
  }
  Socket listener(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (listener.fd() < 0 || bind(listener.fd(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listener.fd(), 128) != 0) {
    VIA_LOG(error, "via", "unix: cannot listen as NIC %u of job %s: %s", *nic, job->job_id().c_str(),
            std::strerror(errno));
    return Result::error_resource;
  }
  out = std::make_unique<UnixProvider>(job->job_id(), *nic, std::move(listener));
  return Result::success;
}

const bool registered = via::register_provider("unix", open_unix_provider);

}  // namespace

}  // namespace unix_provider
