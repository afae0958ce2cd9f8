// The tcp provider: NICs anywhere a TCP connection reaches. Each NIC listens
// on one port; each VI connection is its own TCP stream, which first proves it
// belongs to the job (wire.hpp), then carries a connection request and, once
// accepted, the engine's frames (tcp_link.hpp). Connection set-up runs on
// Asio's asynchronous operations, advanced from the caller's progress calls;
// the data path reads and writes the sockets directly without blocking.
// Sleeping is epoll_wait on every socket of the NIC.
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <random>

#include "providers/tcp/admission.hpp"
#include "providers/tcp/handshake.hpp"
#include "providers/tcp/tcp_link.hpp"
#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"

namespace via::tcp {

namespace {

constexpr std::uint32_t kMaxVi = 1024;
constexpr std::size_t kMaxHeldRequests = 1024;
// A stream that could not be opened, or was closed before it was answered
// (the peer not listening yet, or evicting it to make room: admission.hpp),
// is opened again after a delay that doubles up to the last, until the VI's
// connect timeout.
constexpr std::chrono::milliseconds kFirstRetryDelay{2}, kLastRetryDelay{500};

std::vector<std::uint8_t> host_bytes(const asio::ip::tcp::endpoint& e) {
  const auto ip = e.address().to_v4().to_bytes();
  return {ip[0], ip[1], ip[2], ip[3], std::uint8_t(e.port() >> 8), std::uint8_t(e.port())};
}

std::optional<asio::ip::tcp::endpoint> endpoint_of(const std::vector<std::uint8_t>& host) {
  if (host.size() != kHostBytes) return std::nullopt;
  const asio::ip::address_v4 ip(asio::ip::address_v4::bytes_type{host[0], host[1], host[2], host[3]});
  return asio::ip::tcp::endpoint(ip, std::uint16_t(host[4] << 8 | host[5]));
}

std::optional<std::uint32_t> parse_number(std::string_view s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  return std::uint32_t(std::stoul(std::string(s)));
}

ViAttributes attributes_of(const ConnectRequest& r) {
  return ViAttributes{r.reliability, r.max_transfer, 0, r.rdma_write, r.rdma_read};
}
ViAttributes attributes_of(const ConnectResponse& r) {
  return ViAttributes{r.reliability, r.max_transfer, 0, r.rdma_write, r.rdma_read};
}

// Whether a connection's socket is still open at the other end (nothing to
// read yet, or data waiting: both mean open).
bool still_open(asio::ip::tcp::socket& s) {
  char byte;
  const ssize_t got = recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

// An accepted connection that proved itself and asked for a VI.
struct Incoming {
  std::shared_ptr<Handshake> conn;
  ConnectRequest request;
};

// A connection this NIC opens for one of its VIs.
struct Outgoing {
  enum class Phase { connecting, waiting_to_retry, answered, failed };
  Phase phase = Phase::connecting;
  asio::ip::tcp::endpoint target;
  ConnectRequest request;
  std::shared_ptr<Handshake> conn;
  ConnectResponse response;
  Result failure = Result::no_match;
  std::chrono::milliseconds retry_delay = kFirstRetryDelay;
  std::uint64_t attempt = 0;  // handlers of an abandoned attempt find a newer number here
};

class TcpProvider final : public Provider {
 public:
  TcpProvider(std::uint32_t nic, std::shared_ptr<Bootstrap> bootstrap, const asio::ip::tcp::endpoint& listen)
      : nic_(nic), bootstrap_(std::move(bootstrap)), acceptor_(io_),
        admissions_(acceptor_, std::size_t(bootstrap_->size()), "tcp: ", [this](const auto& a) { prove(a); }),
        regions_(std::make_unique<RegionTable>()), epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {
    acceptor_.open(listen.protocol());
    acceptor_.bind(listen);
    acceptor_.listen();
    host_ = host_bytes(acceptor_.local_endpoint());
    watch(acceptor_.native_handle(), EPOLLIN);
    admissions_.start();
  }

  ~TcpProvider() override {
    answer_everyone_on_the_way_out();
    ::close(epoll_fd_);
  }

  // Tells the job where this NIC listens and settles the job key: given by
  // the launcher (VIASTACK_JOB_KEY), or made by rank 0 and handed to all
  // through the process manager's store. Collective under process managers
  // whose store needs a fence.
  bool publish(std::string& error) {
    std::optional<JobKey> key;
    if (config::text_if_set("VIASTACK_JOB_KEY")) {
      if (!(key = job_key_from_environment(error))) return false;
    } else if (bootstrap_->rank() == 0 && !bootstrap_->put(kJobKeyName, key_to_hex(random_key()), error)) {
      return false;
    }
    if (!bootstrap_->put(address_key(nic_), describe_endpoint(*endpoint_of(host_)), error) || !bootstrap_->fence(error))
      return false;
    if (!key) {
      std::string hex;
      if (!bootstrap_->get(0, kJobKeyName, hex, error)) return false;
      if (!(key = key_from_hex(hex))) {
        error = "the job key rank 0 published is malformed";
        return false;
      }
    }
    key_ = *key;
    return true;
  }

  const char* name() const override { return "tcp"; }
  const std::vector<std::uint8_t>& host_address() const override { return host_; }
  std::uint32_t nic_number() const override { return nic_; }

  Result resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const override {
    char hostname[256] = {};
    gethostname(hostname, sizeof hostname - 1);
    std::optional<std::uint32_t> nic;
    if (name.substr(0, 4) == "rank")
      nic = parse_number(name.substr(4));
    else if (name == "localhost" || name == hostname)
      nic = index;
    else
      nic = parse_number(name);
    std::string error;
    if (nic) {
      std::string text;
      auto endpoint = bootstrap_->get(int(*nic), address_key(*nic), text, error) ? parse_endpoint(text) : std::nullopt;
      if (!endpoint) {
        if (error.empty()) error = "'" + text + "' is not an address";
        VIA_LOG(error, "via", "tcp: cannot look up NIC %u: %s", *nic, error.c_str());
        return Result::error_nameservice;
      }
      host = host_bytes(*endpoint);
      return Result::success;
    }
    // "host:port", the address of a NIC outside any directory.
    const std::string text(name);
    if (auto endpoint = parse_endpoint(text)) {
      host = host_bytes(*endpoint);
      return Result::success;
    }
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return Result::error_nameservice;
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    asio::error_code ec;
    auto results = resolver.resolve(asio::ip::tcp::v4(), text.substr(0, colon), text.substr(colon + 1), ec);
    if (ec || results.empty()) return Result::error_nameservice;
    host = host_bytes(results.begin()->endpoint());
    return Result::success;
  }

  std::string describe_address(const std::vector<std::uint8_t>& host) const override {
    auto endpoint = endpoint_of(host);
    return endpoint ? "tcp:" + describe_endpoint(*endpoint) : "tcp:<malformed address>";
  }

  void fill_attributes(VIP_NIC_ATTRIBUTES& a) const override {
    std::snprintf(a.Name, sizeof a.Name, "viastack-tcp:%u", nic_);
    a.HardwareVersion = 1;
    a.ProviderVersion = kWireVersion;
    a.MaxDiscriminatorLen = kMaxDiscriminator;
    a.NativeMTU = kMaxFramePayload;
  }

  RegionTable& regions() override { return *regions_; }
  std::uint32_t max_vis() const override { return kMaxVi; }

  Result add_vi(ViImpl& vi) override {
    for (std::uint32_t i = 0; i < kMaxVi; ++i) {
      if (slot_used_[i]) continue;
      slot_used_[i] = true;
      vi.provider_slot = i;
      return Result::success;
    }
    return Result::error_resource;
  }
  void remove_vi(ViImpl& vi) override {
    pending_.erase(vi.provider_slot);
    slot_used_[vi.provider_slot] = false;
  }
  void publish_vi_attributes(ViImpl&) override {}  // RDMA is checked where it lands, in the engine
  void reset_vi(ViImpl& vi) override { pending_.erase(vi.provider_slot); }

  // ---- connection set-up ----

  Result connect(ViImpl& vi, const NetAddress& local, const NetAddress& remote, ConnectMode mode) override {
    auto target = endpoint_of(remote.host);
    if (!target || remote.discriminator.size() > kMaxDiscriminator ||
        local.discriminator.size() > kMaxDiscriminator || (!local.host.empty() && local.host != host_))
      return Result::invalid_parameter;
    Pending& p = pending_[vi.provider_slot];
    p = Pending{mode, NetAddress{host_, local.discriminator}, remote, vi.attributes()};
    // Peer to peer, only the side whose address orders first opens the
    // stream; the other waits for it, so a pair never makes two.
    const bool opens = mode == ConnectMode::client ||
                       std::tie(host_, local.discriminator) < std::tie(remote.host, remote.discriminator);
    if (!opens) {
      answer_held_peer(p);
      return Result::success;
    }
    p.out = std::make_shared<Outgoing>();
    p.out->target = *target;
    ConnectRequest& r = p.out->request;
    r.mode = mode == ConnectMode::client ? tcp::ConnectMode::client : tcp::ConnectMode::peer;
    r.reliability = vi.attributes().reliability;
    r.rdma_write = vi.attributes().rdma_write;
    r.rdma_read = vi.attributes().rdma_read;
    r.max_transfer = vi.attributes().max_transfer;
    r.host_kernel = this_kernel();
    std::copy(host_.begin(), host_.end(), r.from_host.begin());
    r.local_disc = local.discriminator;
    r.target_disc = remote.discriminator;
    start(p.out);
    // The streams opened so far move on while the application asks for more
    // connections (it may ask for all before it waits for any): the peer's
    // deadline for a stream (admission.hpp) runs from its accept, not from
    // when this rank next waits.
    progress_control();
    return Result::success;
  }

  Result poll_connect(ViImpl& vi) override {
    if (vi.state() == ViState::connected) return Result::success;
    auto it = pending_.find(vi.provider_slot);
    if (it == pending_.end()) return Result::invalid_state;
    progress_control();
    Pending& p = it->second;
    if (!p.out) return finish_peer(vi, it);
    Outgoing& o = *p.out;
    switch (o.phase) {
      case Outgoing::Phase::connecting:
      case Outgoing::Phase::waiting_to_retry: return Result::not_done;
      case Outgoing::Phase::failed: {
        const Result r = o.failure;
        pending_.erase(it);
        return r;
      }
      case Outgoing::Phase::answered: break;
    }
    const ConnectResponse response = o.response;
    std::shared_ptr<Handshake> conn = std::move(o.conn);
    pending_.erase(it);
    switch (response.status) {
      case ConnectStatus::accepted:
        vi.attach(make_link(*conn, vi, response.host_kernel), attributes_of(response));
        return Result::success;
      case ConnectStatus::rejected: return Result::reject;
      case ConnectStatus::reliability_mismatch: return Result::invalid_reliability_level;
    }
    return Result::no_match;
  }

  bool cancel_connect(ViImpl& vi) override {
    auto it = pending_.find(vi.provider_slot);
    if (it == pending_.end()) return vi.state() != ViState::connected;
    if (it->second.out) abandon(*it->second.out);
    if (it->second.outcome == Result::success) return false;  // the peer has its connection: poll_connect finishes it
    pending_.erase(it);
    return true;
  }

  std::unique_ptr<ConnRequestImpl> take_request(const NetAddress& local) override {
    if (!local.host.empty() && local.host != host_) return nullptr;
    for (auto it = held_connects_.begin(); it != held_connects_.end();) {
      if (!still_open(it->conn->socket)) {
        it = held_connects_.erase(it);
        continue;
      }
      if (it->request.target_disc != local.discriminator) {
        ++it;
        continue;
      }
      auto request = std::make_unique<ConnRequestImpl>();
      request->local = NetAddress{host_, local.discriminator};
      request->remote = NetAddress{std::vector<std::uint8_t>(it->request.from_host.begin(), it->request.from_host.end()),
                                   it->request.local_disc};
      request->remote_attrs = attributes_of(it->request);
      request->provider_cookie = ++last_cookie_;
      accepted_[last_cookie_] = std::move(*it);
      held_connects_.erase(it);
      return request;
    }
    return nullptr;
  }

  Result accept(const ConnRequestImpl& request, ViImpl& vi) override {
    auto it = accepted_.find(request.provider_cookie);
    if (it == accepted_.end()) return Result::invalid_parameter;
    Incoming in = std::move(it->second);
    accepted_.erase(it);
    if (!answer(*in.conn, ConnectStatus::accepted, vi.attributes())) return Result::timeout;  // the client gave up
    vi.attach(make_link(*in.conn, vi, in.request.host_kernel), attributes_of(in.request));
    return Result::success;
  }

  void reject(const ConnRequestImpl& request) override {
    auto it = accepted_.find(request.provider_cookie);
    if (it == accepted_.end()) return;
    answer(*it->second.conn, ConnectStatus::rejected, ViAttributes{});
    accepted_.erase(it);
  }

  void progress_control() override {
    if (io_.stopped()) io_.restart();
    io_.poll();
  }

  // ---- sleeping ----

  std::uint32_t arm_sleep() override { return 0; }

  void sleep(std::uint32_t, std::chrono::nanoseconds max) override {
    const int fd = sleep_fd();
    if (fd < 0) return;
    epoll_event ready[16];
    // Rounded up to whole milliseconds, the unit epoll_wait counts in; zero only checks.
    const int ms = int((max.count() + 999'999) / 1'000'000);
    epoll_wait(fd, ready, 16, ms);
  }

  // The epoll set of the links, each watched for what would move it on.
  int sleep_fd() override {
    for (TcpLink* link : links_) {
      if (link->frame_buffered()) return -1;
      link->wake_when_frame_complete();
      const std::uint32_t events = EPOLLIN | (link->waits_for_room() ? EPOLLOUT : 0u);
      if (events != link->epoll_events) {
        watch(link->fd(), events);
        link->epoll_events = events;
      }
    }
    return epoll_fd_;
  }

  void disarm_sleep() override {}

 private:
  struct Pending {
    ConnectMode mode;
    NetAddress local, remote;
    ViAttributes attrs;  // the VI's, which cannot change while it waits
    std::shared_ptr<Outgoing> out = nullptr;  // null: waiting for the peer's stream
    // Waiting for the peer's stream: what it was answered once it came, and
    // the stream itself if accepted, for the VI's next poll to take on.
    Result outcome = Result::not_done;
    std::optional<Incoming> matched = std::nullopt;
  };

  // NIC n's entry in the job's store (the bootstrap scopes it by job).
  static std::string address_key(std::uint32_t nic) { return "tcp." + std::to_string(nic); }
  static constexpr const char* kJobKeyName = "tcp.job-key";

  void watch(int fd, std::uint32_t events) {
    epoll_event e{};
    e.events = events;
    e.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &e) != 0) epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
  }
  void unwatch(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

  // The link for `vi`, which it belongs to and asks where large payloads go;
  // the peer runs on `peer_kernel`.
  std::unique_ptr<Link> make_link(Handshake& conn, ViImpl& vi, std::uint32_t peer_kernel) {
    auto link = std::make_unique<TcpLink>(
        std::move(conn.socket), conn.peer,
        [this](TcpLink* gone) { links_.erase(std::find(links_.begin(), links_.end(), gone)); },
        [&vi](const FrameHeader& h, iovec* out, std::size_t max_out) { return vi.payload_destination(h, out, max_out); },
        peer_kernel);
    link->epoll_events = EPOLLIN;
    watch(link->fd(), EPOLLIN);
    links_.push_back(link.get());
    return link;
  }

  // Writes a connect response on a connection that is otherwise idle.
  bool answer(Handshake& conn, ConnectStatus status, const ViAttributes& attrs) {
    ConnectResponse r{status, attrs.reliability, attrs.rdma_write, attrs.rdma_read, attrs.max_transfer, this_kernel()};
    asio::error_code ec;
    asio::write(conn.socket, asio::buffer(encode(r)), ec);
    return !ec;
  }

  // A NIC on its way out answers every request that reached it and still
  // waits for an answer: accepted, then closed in order at once (what a
  // mesh's shutdown does on shm), so that the requester hears that this NIC
  // left instead of waiting out its connect timeout and calling it failed
  // (MPI's last wake-up for a rank that finished by itself). First the
  // handshakes move on as far as what has arrived allows: streams the kernel
  // has queued are accepted and challenged, proofs that came are checked. A
  // request whose proof is still in flight is answered all the same: it can
  // only learn that we left. A stream whose hello has not come cannot be
  // answered (its client does not know yet who we are): it is reset, as before.
  void answer_everyone_on_the_way_out() {
    constexpr int kMaxRounds = 64;  // a flood of newcomers does not hold the close
    if (io_.stopped()) io_.restart();
    for (int round = 0; round < kMaxRounds && io_.poll() > 0; ++round) {
    }
    for (const auto& a : admissions_.pending())
      if (a->conn->challenge_sent) say_leaving(*a->conn, ViAttributes{});
    for (auto* held : {&held_connects_, &held_peers_})
      for (Incoming& in : *held) say_leaving(*in.conn, attributes_of(in.request));
    for (auto& [cookie, in] : accepted_) say_leaving(*in.conn, attributes_of(in.request));
  }

  // Without blocking: the few bytes fit in any socket's buffer that is not
  // full, and one that is full belongs to a client that reads nothing.
  void say_leaving(Handshake& conn, const ViAttributes& attrs) {
    std::vector<std::uint8_t> bytes = encode(
        ConnectResponse{ConnectStatus::accepted, attrs.reliability, attrs.rdma_write, attrs.rdma_read, attrs.max_transfer});
    const FrameHeader bye = link_close_frame(false);
    const auto* bye_bytes = reinterpret_cast<const std::uint8_t*>(&bye);
    bytes.insert(bytes.end(), bye_bytes, bye_bytes + sizeof bye);
    bytes.resize(ConnectResponse::kBytes + padded_frame_bytes(0));
    const int fd = conn.socket.native_handle();
    (void)::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
  }

  // ---- the side that opens a stream ----

  void start(const std::shared_ptr<Outgoing>& o) {
    o->phase = Outgoing::Phase::connecting;
    const std::uint64_t attempt = ++o->attempt;
    o->conn = std::make_shared<Handshake>(asio::ip::tcp::socket(io_));
    o->conn->peer = describe_endpoint(o->target);
    o->conn->socket.async_connect(o->target, [this, o, attempt](const asio::error_code& ec) {
      if (attempt != o->attempt) return;
      if (out_of_descriptors(ec))
        admissions_.log().warn("cannot connect to " + o->conn->peer + ": " + describe_descriptor_shortage(ec));
      if (ec) return retry_later(o);  // not listening yet, or gone: the VI's timeout decides
      watch(o->conn->socket.native_handle(), EPOLLIN);
      // The proof and request follow the hello at once; Nagle would hold them
      // until the peer's delayed acknowledgement (40 ms on loopback).
      asio::error_code ignored;
      o->conn->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      // A stream that fails before the answer (the peer evicted it) is opened
      // again; only what the peer says can make the request fail.
      auto failed = [this, o](const std::string& error) {
        return o->conn->stream_failed ? retry_later(o) : fail(*o, error);
      };
      run_client_handshake(o->conn, key_, Purpose::vi, encode(o->request), [o, attempt, failed](const std::string& error) {
        if (attempt != o->attempt) return;
        if (!error.empty()) return failed(error);
        read_exactly(o->conn, ConnectResponse::kBytes, [o, attempt, failed](const std::string& error) {
          if (attempt != o->attempt) return;
          std::string why = error;
          auto response = why.empty() ? decode_response(o->conn->buffer, why) : std::nullopt;
          if (!response) return failed(why);
          o->response = *response;
          o->phase = Outgoing::Phase::answered;
        });
      });
    });
  }

  // From whichever progress call runs the timer; abandon() makes it a no-op.
  void retry_later(const std::shared_ptr<Outgoing>& o) {
    o->phase = Outgoing::Phase::waiting_to_retry;
    asio::error_code ignored;
    o->conn->socket.close(ignored);
    // Half to all of the delay, so that streams evicted together come back apart.
    const auto delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(
        o->retry_delay.count() * 500, o->retry_delay.count() * 1000)(jitter_));
    o->retry_delay = std::min(o->retry_delay * 2, kLastRetryDelay);
    auto timer = std::make_shared<asio::steady_timer>(io_, delay);
    timer->async_wait([this, o, timer, attempt = o->attempt](const asio::error_code& ec) {
      if (!ec && attempt == o->attempt) start(o);
    });
  }

  void fail(Outgoing& o, const std::string& error) {
    VIA_LOG(error, "via", "tcp: connecting to %s: %s", o.conn->peer.c_str(), error.c_str());
    o.phase = Outgoing::Phase::failed;
    o.failure = Result::no_match;
    asio::error_code ignored;
    o.conn->socket.close(ignored);
  }

  void abandon(Outgoing& o) {
    ++o.attempt;
    if (o.conn) {
      asio::error_code ignored;
      o.conn->socket.close(ignored);
    }
  }

  // ---- the side that waits for a peer's stream ----

  // A peer's stream is answered as soon as both it and the VI that asked for
  // that peer are there, from whichever call finds the second (connect(), or
  // any progress call that reads the stream's request), not when the program
  // next polls that VI: a rank that waits for its peers one by one would keep
  // the others' streams waiting for its loop to reach them, and hundreds of
  // ranks doing so chain the waits past the connect timeout.

  static bool asked_for(const Pending& p, const ConnectRequest& r) {
    return !p.out && p.outcome == Result::not_done &&
           std::equal(r.from_host.begin(), r.from_host.end(), p.remote.host.begin(), p.remote.host.end()) &&
           r.local_disc == p.remote.discriminator && r.target_disc == p.local.discriminator;
  }

  // A VI began to wait: the peer's stream may have come first.
  void answer_held_peer(Pending& p) {
    for (auto it = held_peers_.begin(); it != held_peers_.end();) {
      if (!still_open(it->conn->socket)) {
        it = held_peers_.erase(it);
        continue;
      }
      if (!asked_for(p, it->request)) {
        ++it;
        continue;
      }
      Incoming in = std::move(*it);
      held_peers_.erase(it);
      return answer_peer(p, std::move(in));
    }
  }

  void answer_peer(Pending& p, Incoming in) {
    if (in.request.reliability != p.attrs.reliability) {
      answer(*in.conn, ConnectStatus::reliability_mismatch, p.attrs);
      p.outcome = Result::invalid_reliability_level;
      return;
    }
    if (!answer(*in.conn, ConnectStatus::accepted, p.attrs)) {
      p.outcome = Result::no_match;
      return;
    }
    // The peer may send at once; until the VI takes the stream on, its bytes
    // wait in the socket without waking the NIC from every sleep.
    unwatch(in.conn->socket.native_handle());
    p.outcome = Result::success;
    p.matched = std::move(in);
  }

  Result finish_peer(ViImpl& vi, std::map<std::uint32_t, Pending>::iterator it) {
    const Result outcome = it->second.outcome;
    if (outcome == Result::not_done) return outcome;
    std::optional<Incoming> matched = std::move(it->second.matched);
    pending_.erase(it);
    if (outcome == Result::success)
      vi.attach(make_link(*matched->conn, vi, matched->request.host_kernel), attributes_of(matched->request));
    return outcome;
  }

  // ---- incoming streams ----

  // Nothing but the handshake is read from a new stream until it proved
  // itself, and it has auth_timeout() to prove itself and ask for a VI.
  void prove(const std::shared_ptr<Admissions::Admission>& a) {
    const std::shared_ptr<Handshake>& conn = a->conn;
    watch(conn->socket.native_handle(), EPOLLIN);
    run_server_handshake(conn, key_, [this, a](const std::string& error) {
      if (!error.empty()) return admissions_.refuse(*a, error);
      if (a->conn->purpose != Purpose::vi) return admissions_.refuse(*a, "not a VI connection");
      a->proven = true;
      read_exactly(a->conn, ConnectRequest::kBytes, [this, a](const std::string& error) {
        std::string why = error;
        auto request = why.empty() ? decode_request(a->conn->buffer, why) : std::nullopt;
        if (!request) return admissions_.refuse(*a, why);
        if (!admissions_.settle(*a)) return;  // evicted or timed out meanwhile
        if (request->mode == tcp::ConnectMode::peer)
          for (auto& [slot, p] : pending_)
            if (asked_for(p, *request)) return answer_peer(p, Incoming{a->conn, std::move(*request)});
        auto& held = request->mode == tcp::ConnectMode::client ? held_connects_ : held_peers_;
        if (held.size() >= kMaxHeldRequests) held.pop_front();
        held.push_back(Incoming{a->conn, std::move(*request)});
      });
    });
  }

  const std::uint32_t nic_;
  const std::shared_ptr<Bootstrap> bootstrap_;
  JobKey key_{};  // settled by publish()
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  Admissions admissions_;
  std::unique_ptr<RegionTable> regions_;
  const int epoll_fd_;
  std::vector<std::uint8_t> host_;
  std::vector<bool> slot_used_ = std::vector<bool>(kMaxVi);
  std::map<std::uint32_t, Pending> pending_;  // by VI slot
  std::deque<Incoming> held_connects_, held_peers_;
  std::map<std::uint64_t, Incoming> accepted_;  // requests handed out by take_request
  std::uint64_t last_cookie_ = 0;
  std::vector<TcpLink*> links_;
  std::minstd_rand jitter_{std::random_device{}()};
};

// Where peers can reach this NIC: where we were told; else the address that
// reaches the process manager; else, in a job spanning nodes, the first
// IPv4 address of an interface that is up; else loopback.
asio::ip::address_v4 listen_address(Bootstrap& job) {
  asio::error_code ec;
  if (const auto address = config::text_if_set("VIASTACK_TCP_ADDRESS")) return asio::ip::make_address_v4(*address);
  if (auto reachable = job.reachable_address(); !reachable.empty()) {
    auto ip = asio::ip::make_address_v4(reachable, ec);
    if (!ec) return ip;
  }
  if (job.node_count() > 1) {
    ifaddrs* list = nullptr;
    std::optional<asio::ip::address_v4> found;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
          continue;
        found = asio::ip::address_v4(ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
      }
      freeifaddrs(list);
    }
    if (found) return *found;
  }
  return asio::ip::address_v4::loopback();
}

}  // namespace

Result open_tcp_provider(std::string_view device, const std::shared_ptr<Bootstrap>& job,
                         std::unique_ptr<Provider>& out) {
  std::optional<std::uint32_t> nic = std::uint32_t(job->rank());
  if (auto colon = device.find(':'); colon != std::string_view::npos) nic = parse_number(device.substr(colon + 1));
  if (!nic) {
    VIA_LOG(error, "via", "bad device name '%.*s' (expected tcp:N)", int(device.size()), device.data());
    return Result::invalid_parameter;
  }
  std::string error;
  const auto listen = listen_address(*job);
  const auto port = std::uint16_t(config::integer("VIASTACK_TCP_PORT"));
  try {
    auto provider = std::make_unique<TcpProvider>(*nic, job, asio::ip::tcp::endpoint(listen, port));
    if (!provider->publish(error)) {
      VIA_LOG(error, "via", "tcp: %s", error.c_str());
      return Result::error_resource;
    }
    out = std::move(provider);
  } catch (const std::system_error& e) {
    VIA_LOG(error, "via", "tcp: cannot listen on %s:%u: %s", listen.to_string().c_str(), port, e.what());
    return Result::error_resource;
  }
  return Result::success;
}

}  // namespace via::tcp
