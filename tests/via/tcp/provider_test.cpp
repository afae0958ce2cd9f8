// The tcp provider against strangers and bad peers (issue 3, "Nobody else
// gets in" and "Bad input"). A raw POSIX socket plays the other end: it may
// speak garbage, prove the wrong key, say nothing, or run the real handshake
// with the job's key and then send malformed requests and frames. Each time
// the NIC must refuse, log why, break at most the one VI involved, never touch
// memory outside registered regions, and go on serving.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/frame.hpp"
#include "providers/provider.hpp"
#include "providers/tcp/admission.hpp"
#include "providers/tcp/tcp_link.hpp"
#include "providers/tcp/wire.hpp"
#include "support/endpoint.hpp"
#include "support/job_directory.hpp"
#include "via/config.hpp"

using namespace testing_support;
using namespace std::chrono_literals;
namespace tcp = via::tcp;

namespace {

using Bytes = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string local_name(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  std::string s = ip;
  s += ':';
  s += std::to_string(ntohs(a.sin_port));
  return s;
}

// A plain TCP connection to a NIC's listening address (IPv4 and port, network
// order, as host_address() gives them). Blocking, with 5 s time limits.
class RawPeer {
 public:
  explicit RawPeer(const std::vector<std::uint8_t>& host) {
    if (host.size() != tcp::kHostBytes) throw std::runtime_error("not a tcp NIC address");
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, host.data(), 4);
    std::memcpy(&a.sin_port, host.data() + 4, 2);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      std::string why = "connect: ";
      why += std::strerror(errno);
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error(why);
    }
    timeval limit{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    name_ = local_name(fd_);
  }
  ~RawPeer() { ::close(fd_); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // "127.0.0.1:port": how the NIC names this connection in its logs.
  const std::string& name() const { return name_; }
  int fd() const { return fd_; }

  bool send_all(const Bytes& bytes) {
    for (std::size_t at = 0; at < bytes.size();) {
      const ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += std::size_t(n);
    }
    return true;
  }

  // Exactly n bytes, or nothing (closed, reset or timed out).
  std::optional<Bytes> recv_exact(std::size_t n) {
    Bytes out(n);
    for (std::size_t at = 0; at < n;) {
      const ssize_t got = ::recv(fd_, out.data() + at, n - at, 0);
      if (got <= 0) return std::nullopt;
      at += std::size_t(got);
    }
    return out;
  }

  // Reads and drops bytes until `received` (counted as they come) reaches
  // `expected`, or the connection ends.
  void read_and_drop(std::size_t expected, std::size_t& received) {
    while (received < expected) {
      const std::optional<Bytes> bytes = recv_exact(std::min<std::size_t>(expected - received, 4096));
      if (!bytes) return;
      received += bytes->size();
    }
  }

  // The client's side of the job-key handshake, proving `key`. Returns whether
  // the server proved it knows `key` too; throws if the exchange itself fails.
  bool handshake(const tcp::JobKey& key, tcp::Purpose purpose = tcp::Purpose::vi) {
    const tcp::Nonce mine = tcp::random_nonce();
    if (!send_all(tcp::encode(tcp::Hello{purpose, mine}))) throw std::runtime_error("sending hello failed");
    auto bytes = recv_exact(tcp::Challenge::kBytes);
    if (!bytes) throw std::runtime_error("no challenge from the NIC");
    std::string error;
    auto challenge = tcp::decode_challenge(*bytes, error);
    if (!challenge) throw std::runtime_error("bad challenge: " + error);
    const bool server_proved = tcp::proof_matches(
        challenge->proof, tcp::make_proof(key, tcp::Role::server, purpose, mine, challenge->nonce));
    const tcp::ProofMac proof = tcp::make_proof(key, tcp::Role::client, purpose, mine, challenge->nonce);
    if (!send_all(Bytes(proof.begin(), proof.end()))) throw std::runtime_error("sending proof failed");
    return server_proved;
  }

  // Everything the NIC sends until it closes the connection; false if it is
  // still open after `limit`. A reset counts as closed.
  bool wait_closed(std::chrono::milliseconds limit, Bytes* received = nullptr) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, int(left)) <= 0) continue;
      std::uint8_t buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno == ECONNRESET)) return true;
      if (got > 0 && received) received->insert(received->end(), buffer, buffer + got);
    }
  }

  void shutdown_send() { ::shutdown(fd_, SHUT_WR); }

  // Whether the NIC has closed the connection, without reading what it sent.
  bool closed_now() const {
    char byte;
    const ssize_t got = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

 private:
  int fd_ = -1;
  std::string name_;
};

// One frame as a peer's TcpLink writes it: header, payload, zero padding to 8.
Bytes frame(const via::FrameHeader& h, const Bytes& payload = {}) {
  Bytes out(tcp::padded_frame_bytes(payload.size()), 0);
  std::memcpy(out.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(out.data() + sizeof h, payload.data(), payload.size());
  return out;
}

via::FrameHeader header_of(const Bytes& bytes) {
  via::FrameHeader h{};
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}

Bytes patterned(std::size_t n, std::uint64_t seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = pattern(seed, i);
  return b;
}

// Drives every NIC, including connection set-up and the checks for closed or
// broken connections (the NIC's wait does those), until done() holds.
bool drive(std::initializer_list<via::Nic*> nics, const std::function<bool()>& done, int timeout_ms = 5000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned i = 0;; ++i) {
    for (via::Nic* n : nics) n->progress();
    if (i % 32 == 0)
      for (via::Nic* n : nics) n->wait([] { return false; }, 0);
    if (done()) return true;
    if (i % 64 == 0 && Clock::now() > deadline) return false;
  }
}

// Stderr of this process from construction to take(); stops capturing on
// destruction too, so that a failed assertion leaves the next test alone.
class StderrCapture {
 public:
  StderrCapture() { testing::internal::CaptureStderr(); }
  ~StderrCapture() {
    if (!taken_) take();
  }
  std::string take() {
    taken_ = true;
    return testing::internal::GetCapturedStderr();
  }

 private:
  bool taken_ = false;
};

std::size_t count_lines(const std::string& log, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
  return n;
}

std::uint32_t status_err(const VIP_DESCRIPTOR* d) { return d->CS.Status & VIP_STATUS_ERROR_MASK; }

class TcpProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    use_job_directory();
    std::string error;
    auto k = tcp::job_key_from_environment(error);
    ASSERT_TRUE(k) << error;
    key = *k;
  }

  // The request a client VI sends to reach discriminator `target` on a NIC.
  static tcp::ConnectRequest client_request(const std::string& target) {
    tcp::ConnectRequest r;
    r.mode = tcp::ConnectMode::client;
    r.reliability = VIP_SERVICE_RELIABLE_DELIVERY;
    r.rdma_write = true;
    r.rdma_read = true;
    r.from_host = {127, 0, 0, 1, 0, 9};
    r.local_disc = text("raw");
    r.target_disc = text(target);
    return r;
  }

  // A raw client accepted on `server` (opened here as tcp:1, with the link
  // timeout `timeout`) whose socket then drops everything that arrives (a
  // socket filter): its kernel acknowledges nothing, as a host that is down.
  std::unique_ptr<RawPeer> silenced_raw_client(Endpoint& server, via::Vi*& vi, std::chrono::milliseconds timeout) {
    setenv("VIASTACK_TCP_TIMEOUT_MS", std::to_string(timeout.count()).c_str(), 1);
    server.open("tcp:1", 4096);
    std::unique_ptr<RawPeer> peer = accepted_raw_client(server, vi);
    unsetenv("VIASTACK_TCP_TIMEOUT_MS");
    if (!peer) return nullptr;
    sock_filter drop_all{BPF_RET | BPF_K, 0, 0, 0};
    sock_fprog program{1, &drop_all};
    EXPECT_EQ(setsockopt(peer->fd(), SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program), 0);
    return peer;
  }

  // A raw client that proved the job key and asked for "srv" on `server`,
  // which accepted it onto a new VI (returned in `vi`).
  std::unique_ptr<RawPeer> accepted_raw_client(Endpoint& server, via::Vi*& vi) {
    vi = server.create_vi();
    std::unique_ptr<RawPeer> peer;
    std::optional<tcp::ConnectResponse> response;
    std::string client_error;
    std::thread client([&] {
      try {
        peer = std::make_unique<RawPeer>(server.nic->host_address());
        if (!peer->handshake(key)) throw std::runtime_error("the NIC did not prove the job key");
        if (!peer->send_all(tcp::encode(client_request("srv")))) throw std::runtime_error("sending request failed");
        auto bytes = peer->recv_exact(tcp::ConnectResponse::kBytes);
        if (!bytes) throw std::runtime_error("no connect response");
        response = tcp::decode_response(*bytes, client_error);
      } catch (const std::exception& e) {
        client_error = e.what();
      }
    });
    via::ConnRequest* request = nullptr;
    const via::Result waited = server.nic->connect_wait(via::NetAddress{server.nic->host_address(), text("srv")},
                                                       5000, request);
    via::Result accepted = via::Result::not_done;
    if (waited == via::Result::success) {
      EXPECT_EQ(request->remote.discriminator, text("raw"));
      EXPECT_EQ(request->remote.host, Bytes({127, 0, 0, 1, 0, 9}));
      accepted = server.nic->connect_accept(request, *vi);
    }
    client.join();
    EXPECT_EQ(waited, via::Result::success);
    EXPECT_EQ(accepted, via::Result::success);
    EXPECT_EQ(client_error, "");
    if (!response) return nullptr;
    EXPECT_EQ(response->status, tcp::ConnectStatus::accepted);
    EXPECT_EQ(vi->state(), via::ViState::connected);
    return peer;
  }

  tcp::JobKey key{};
};

// ---- nobody else gets in ----

struct IntruderOutcome {
  std::string name;   // its address, as the NIC logs it
  bool closed = false;
  std::chrono::milliseconds took{0};
  std::string error;  // what went wrong in the intruder itself
};

// Runs `act` on a fresh raw connection to `host` in its own thread, then waits for the NIC to close it.
std::thread intruder(const std::vector<std::uint8_t>& host, IntruderOutcome& out, std::atomic<int>& finished,
                     std::function<void(RawPeer&)> act) {
  return std::thread([&host, &out, &finished, act = std::move(act)] {
    try {
      RawPeer peer(host);
      out.name = peer.name();
      const auto start = Clock::now();
      act(peer);
      out.closed = peer.wait_closed(5s);
      out.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    ++finished;
  });
}

TEST_F(TcpProviderTest, IntrudersAreRefusedAndLoggedWhileTheJobStreamsIntact) {
  Endpoint a, b;
  constexpr std::size_t kSlot = 8192, kWindow = 64;
  a.open("tcp:0", kSlot * kWindow);
  b.open("tcp:1", kSlot * kWindow);
  std::vector<std::string> job_errors;
  for (Endpoint* e : {&a, &b}) e->nic->set_error_handler([&](const via::AsyncError& err) { job_errors.push_back(err.cause); });
  via::Vi* va = a.create_vi();
  via::Vi* vb = b.create_vi();
  ASSERT_EQ(connect_peers(a, "rank0", va, b, "rank1", vb, "stream"),
            std::make_pair(via::Result::success, via::Result::success));

  StderrCapture stderr_log;
  const std::vector<std::uint8_t> target = b.nic->host_address();  // the receiving NIC
  IntruderOutcome garbage, wrong_key, silent;
  bool wrong_key_server_proved = true;
  std::atomic<int> finished{0};
  std::vector<std::thread> intruders;
  intruders.push_back(intruder(target, garbage, finished, [](RawPeer& p) {
    Bytes junk = text("GET / HTTP/1.1\r\nHost: viastack\r\n\r\n");
    for (int i = 0; i < 200; ++i) junk.push_back(std::uint8_t(i * 37 + 11));
    p.send_all(junk);
  }));
  intruders.push_back(intruder(target, wrong_key, finished, [&](RawPeer& p) {
    wrong_key_server_proved = p.handshake(tcp::random_key());
  }));
  intruders.push_back(intruder(target, silent, finished, [](RawPeer&) {}));

  // Meanwhile a streams messages of varying sizes to b; every byte is checked.
  constexpr std::uint64_t kMessages = 3000;
  auto size_of = [](std::uint64_t i) { return std::size_t(1 + (i * 997) % kSlot); };
  std::uint64_t posted = 0, sent = 0, sends_done = 0, received = 0, corrupt = 0, send_errors = 0;
  auto post_receives = [&] {
    while (posted < kMessages && posted - received < kWindow) {
      expect_ok(vb->post_recv(b.message(std::size_t(posted % kWindow) * kSlot, kSlot), b.arena.handle), "post recv");
      ++posted;
    }
  };
  post_receives();
  const bool streamed = drive({a.nic.get(), b.nic.get()}, [&] {
    VIP_DESCRIPTOR* d;
    // Never more sends in flight than receives posted: a reliable VI breaks otherwise.
    while (sent < posted && sent - received < kWindow && sent - sends_done < kWindow) {
      a.fill(std::size_t(sent % kWindow) * kSlot, size_of(sent), sent);
      expect_ok(va->post_send(a.message(std::size_t(sent % kWindow) * kSlot, size_of(sent)), a.arena.handle), "send");
      ++sent;
    }
    while (va->send_done(d) == via::Result::success) {
      send_errors += status_err(d) != 0;
      a.release(d);
      ++sends_done;
    }
    while (vb->recv_done(d) == via::Result::success) {
      const std::size_t offset = std::size_t(received % kWindow) * kSlot;
      if (status_err(d) != 0 || d->CS.Length != size_of(received) || b.mismatch(offset, size_of(received), received) != -1)
        ++corrupt;
      b.release(d);
      ++received;
    }
    post_receives();
    return received == kMessages && sends_done == kMessages && finished == 3;
  }, 20000);
  for (std::thread& t : intruders) t.join();
  const std::string log = stderr_log.take();

  EXPECT_TRUE(streamed);
  EXPECT_EQ(received, kMessages);
  EXPECT_EQ(corrupt, 0u);
  EXPECT_EQ(send_errors, 0u);
  EXPECT_EQ(va->state(), via::ViState::connected);
  EXPECT_EQ(vb->state(), via::ViState::connected);
  EXPECT_TRUE(job_errors.empty()) << job_errors.front();

  for (const IntruderOutcome* o : {&garbage, &wrong_key, &silent}) {
    EXPECT_EQ(o->error, "") << o->name;
    EXPECT_TRUE(o->closed) << o->name << " was not disconnected";
  }
  EXPECT_FALSE(wrong_key_server_proved) << "the NIC's proof matched a key it does not have";
  // The silent one is cut off at the auth deadline (300 ms, from main()), not before.
  EXPECT_GE(silent.took, 290ms);
  EXPECT_LT(silent.took, 2000ms);

  EXPECT_EQ(count_lines(log, "] warn: tcp: refused a connection from "), 3u) << log;
  auto refused = [](const IntruderOutcome& o, const char* cause) {
    std::string line = "] warn: tcp: refused a connection from ";
    line += o.name;
    line += ": ";
    line += cause;
    line += '\n';
    return line;
  };
  EXPECT_NE(log.find(refused(garbage, "not a viastack peer (bad magic)")), std::string::npos) << log;
  EXPECT_NE(log.find(refused(wrong_key, "wrong job key")), std::string::npos) << log;
  EXPECT_NE(log.find(refused(silent, "it did not prove it belongs to the job in time")), std::string::npos) << log;

  // The NICs still make new connections.
  via::Vi* va2 = a.create_vi();
  via::Vi* vb2 = b.create_vi();
  ASSERT_EQ(connect_peers(a, "rank0", va2, b, "rank1", vb2, "after"),
            std::make_pair(via::Result::success, via::Result::success));
  a.fill(0, 1000, 4242);
  expect_ok(vb2->post_recv(b.message(0, 1000), b.arena.handle), "post recv");
  expect_ok(va2->post_send(a.message(0, 1000), a.arena.handle), "send");
  VIP_DESCRIPTOR* d = nullptr;
  ASSERT_TRUE(drive({a.nic.get(), b.nic.get()}, [&] { return vb2->recv_done(d) == via::Result::success; }));
  EXPECT_EQ(status_err(d), 0u);
  EXPECT_EQ(b.mismatch(0, 1000, 4242), -1);
}

TEST_F(TcpProviderTest, MalformedConnectRequestAfterTheRightProofIsRefused) {
  Endpoint b;
  b.open("tcp:1", 4096);
  StderrCapture stderr_log;
  std::string client_name, client_error;
  bool server_proved = false, closed = false;
  std::thread client([&] {
    try {
      RawPeer peer(b.nic->host_address());
      client_name = peer.name();
      server_proved = peer.handshake(key);
      Bytes request = tcp::encode(client_request("srv"));
      request[0] = 7;  // no such connect mode
      peer.send_all(request);
      closed = peer.wait_closed(3s);
    } catch (const std::exception& e) {
      client_error = e.what();
    }
  });
  via::ConnRequest* request = nullptr;
  const via::NetAddress srv{b.nic->host_address(), text("srv")};
  EXPECT_EQ(b.nic->connect_wait(srv, 700, request), via::Result::timeout);
  client.join();
  EXPECT_EQ(via::impl(*b.nic).provider().take_request(srv), nullptr) << "a refused request is held for the server";
  const std::string log = stderr_log.take();
  EXPECT_EQ(client_error, "");
  EXPECT_TRUE(server_proved);
  EXPECT_TRUE(closed) << "the NIC kept the connection open";
  std::string line = "] warn: tcp: refused a connection from ";
  line += client_name;
  line += ": malformed connect request\n";
  EXPECT_NE(log.find(line), std::string::npos) << log;

  // A well-formed request on a new connection is still heard.
  via::Vi* vi = nullptr;
  EXPECT_NE(accepted_raw_client(b, vi), nullptr);
}

TEST_F(TcpProviderTest, ProvenButSilentConnectionsAreToldApartFromUnprovenOnes) {
  Endpoint b;
  b.open("tcp:1", 4096);
  StderrCapture stderr_log;
  std::atomic<bool> closed{false};  // the client thread sets it while this one drives the NIC
  std::string name, client_error;
  std::thread client([&] {
    try {
      RawPeer peer(b.nic->host_address());
      name = peer.name();
      if (!peer.handshake(key)) throw std::runtime_error("the NIC did not prove the job key");
      closed = peer.wait_closed(3s);  // and never sends its request
    } catch (const std::exception& e) {
      client_error = e.what();
    }
  });
  drive({b.nic.get()}, [&] { return closed.load(); }, 3000);
  client.join();
  EXPECT_EQ(client_error, "");
  EXPECT_TRUE(closed);
  std::string line = "] warn: tcp: refused a connection from ";
  line += name;
  line += ": it proved it belongs to the job but sent no request in time\n";
  const std::string log = stderr_log.take();
  EXPECT_NE(log.find(line), std::string::npos) << log;
}

TEST_F(TcpProviderTest, StrangersCannotPileUpConnectionsTheOldestMakeRoom) {
  Endpoint b;
  b.open("tcp:1", 4096);
  // The NIC raised the descriptor limit when it opened; its bounds follow
  // from it and from the job's size.
  const std::size_t per_source =
      tcp::PendingLimits::for_job(tcp::raise_descriptor_limit().rlim_cur, std::size_t(via::config::integer("VIASTACK_SIZE")))
          .per_source;
  StderrCapture stderr_log;
  constexpr std::size_t kBeyond = 16;  // strangers beyond what one address may have proving themselves
  std::vector<std::unique_ptr<RawPeer>> strangers;
  for (std::size_t i = 0; i < per_source + kBeyond; ++i)
    strangers.push_back(std::make_unique<RawPeer>(b.nic->host_address()));
  // The NIC takes them in as it polls, in the order they came; each one past
  // the bound evicts the oldest, long before the silent ones' auth timeout.
  auto closed_so_far = [&] {
    return std::size_t(std::count_if(strangers.begin(), strangers.end(), [](auto& s) { return s->closed_now(); }));
  };
  EXPECT_TRUE(drive({b.nic.get()}, [&] { return closed_so_far() >= kBeyond; }, 250));
  std::vector<std::size_t> closed;
  for (std::size_t i = 0; i < strangers.size(); ++i)
    if (strangers[i]->closed_now()) closed.push_back(i);
  std::vector<std::size_t> oldest(kBeyond);
  std::iota(oldest.begin(), oldest.end(), 0);
  EXPECT_EQ(closed, oldest);
  // A member of the job gets in while the rest are still there.
  via::Vi* vi = nullptr;
  EXPECT_NE(accepted_raw_client(b, vi), nullptr);
  b.nic.reset();  // says what it did not log line by line
  const std::string log = stderr_log.take();
  const std::size_t in_full = count_lines(log, ": evicted to make room: " + std::to_string(per_source) +
                                                   " connections from its address were still proving themselves\n");
  EXPECT_EQ(in_full, std::size_t(tcp::RefusalLog::kInFull)) << log;
  EXPECT_NE(log.find("] warn: tcp: refused or evicted "), std::string::npos) << log;
}

// A rank asks for its connections one after another (mp_mesh asks for all
// its peers, looking each one up, before it waits for any): the streams it
// opened earlier move on meanwhile, so that the peer, whose deadline runs
// from its accept, sees them prove themselves without this rank waiting.
TEST_F(TcpProviderTest, StreamsOpenedEarlierProveThemselvesWhileTheRankAsksForMore) {
  Endpoint a, b;
  a.open("tcp:0", 4096);
  b.open("tcp:1", 4096);
  const bool a_opens = a.nic->host_address() < b.nic->host_address();
  Endpoint& opener = a_opens ? a : b;
  Endpoint& waiter = a_opens ? b : a;
  const std::string opener_name = a_opens ? "rank0" : "rank1", waiter_name = a_opens ? "rank1" : "rank0";
  via::Vi* waiting = waiter.create_vi();
  expect_ok(waiting->connect_peer_request(address(*waiter.nic, waiter_name, "first"),
                                          address(*waiter.nic, opener_name, "first"), 5000),
            "request");
  via::Vi* first = opener.create_vi();
  expect_ok(first->connect_peer_request(address(*opener.nic, opener_name, "first"),
                                        address(*opener.nic, waiter_name, "first"), 5000),
            "request");
  // The opener only asks for more connections (to discriminators nobody
  // waits for); the waiter polls in between. A few requests suffice: the
  // stream needs the opener to look at it three times (connected, then the
  // challenge came), the waiter twice.
  via::Result outcome = via::Result::not_done;
  for (int i = 0; i < 20 && outcome == via::Result::not_done; ++i) {
    for (int polls = 0; polls < 10 && outcome == via::Result::not_done; ++polls) outcome = waiting->connect_peer_done();
    const std::string disc = "more" + std::to_string(i);
    expect_ok(opener.create_vi()->connect_peer_request(address(*opener.nic, opener_name, disc),
                                                       address(*opener.nic, waiter_name, disc), 5000),
              "request");
  }
  EXPECT_EQ(outcome, via::Result::success);
}

// A rank that waits for many peers waits on one VI at a time (mp_mesh in rank
// order, MPI's and AM's set-up): the peer's stream toward another of its VIs
// must be answered from whatever progress call the rank makes, or the peer
// waits for this rank's loop to reach it, and at scale past its timeout.
enum class WaiterDrives { another_vi, only_the_nic };

class TcpPeerAnswerTest : public TcpProviderTest, public ::testing::WithParamInterface<WaiterDrives> {
 protected:
  void SetUp() override {
    TcpProviderTest::SetUp();
    a.open("tcp:0", 4096);
    b.open("tcp:1", 4096);
    const bool a_opens = a.nic->host_address() < b.nic->host_address();
    opener = a_opens ? &a : &b;
    waiter = a_opens ? &b : &a;
    opener_name = a_opens ? "rank0" : "rank1";
    waiter_name = a_opens ? "rank1" : "rank0";
  }

  // One step of the waiter, never looking at the VI the opener asked for.
  void drive_waiter(via::Vi* other) {
    if (GetParam() == WaiterDrives::another_vi)
      EXPECT_EQ(other->connect_peer_done(), via::Result::not_done);
    else
      waiter->nic->wait([] { return false; }, 0);
  }

  Endpoint a, b;
  Endpoint *opener = nullptr, *waiter = nullptr;
  std::string opener_name, waiter_name;
};

TEST_P(TcpPeerAnswerTest, APeersRequestIsAnsweredWithoutPollingTheViItMatches) {
  via::Vi* asked = waiter->create_vi();
  via::Vi* other = waiter->create_vi();
  expect_ok(asked->connect_peer_request(address(*waiter->nic, waiter_name, "asked"),
                                        address(*waiter->nic, opener_name, "asked"), 10000),
            "request");
  expect_ok(other->connect_peer_request(address(*waiter->nic, waiter_name, "other"),
                                        address(*waiter->nic, opener_name, "other"), 10000),
            "request");
  via::Vi* opening = opener->create_vi();
  expect_ok(opening->connect_peer_request(address(*opener->nic, opener_name, "asked"),
                                          address(*opener->nic, waiter_name, "asked"), 10000),
            "request");
  via::Result opened = via::Result::not_done;
  const bool answered = drive({opener->nic.get()}, [&] {
    drive_waiter(other);
    opened = opening->connect_peer_done();
    return opened != via::Result::not_done;
  });
  ASSERT_TRUE(answered) << "the opener's request was not answered while the waiter polled elsewhere";
  ASSERT_EQ(opened, via::Result::success);
  EXPECT_EQ(asked->connect_peer_done(), via::Result::success);  // the match was made: the VI only learns of it

  // The connection carries data both ways, including what the opener sent
  // before the waiter looked at its VI.
  VIP_DESCRIPTOR* recv = waiter->message(0, 64);
  expect_ok(asked->post_recv(recv, waiter->arena.handle), "post recv");
  opener->fill(0, 64, 7);
  VIP_DESCRIPTOR* send = opener->message(0, 64);
  expect_ok(opening->post_send(send, opener->arena.handle), "post send");
  VIP_DESCRIPTOR* done = nullptr;
  ASSERT_TRUE(drive({opener->nic.get(), waiter->nic.get()},
                    [&] { return asked->recv_done(done) == via::Result::success; }));
  EXPECT_EQ(status_err(done), 0u);
  EXPECT_EQ(waiter->mismatch(0, 64, 7), -1);
  EXPECT_EQ(other->disconnect(), via::Result::success);
}

// A request that cannot be taken is refused from any progress call as well,
// with the reason, and the waiting VI hears the same.
TEST_P(TcpPeerAnswerTest, AMismatchedPeerRequestIsRefusedWithoutPollingTheViItMatches) {
  via::Vi* asked = waiter->create_vi(VIP_SERVICE_RELIABLE_DELIVERY);
  via::Vi* other = waiter->create_vi();
  expect_ok(asked->connect_peer_request(address(*waiter->nic, waiter_name, "asked"),
                                        address(*waiter->nic, opener_name, "asked"), 10000),
            "request");
  expect_ok(other->connect_peer_request(address(*waiter->nic, waiter_name, "other"),
                                        address(*waiter->nic, opener_name, "other"), 10000),
            "request");
  via::Vi* opening = opener->create_vi(VIP_SERVICE_UNRELIABLE);
  expect_ok(opening->connect_peer_request(address(*opener->nic, opener_name, "asked"),
                                          address(*opener->nic, waiter_name, "asked"), 10000),
            "request");
  via::Result opened = via::Result::not_done;
  ASSERT_TRUE(drive({opener->nic.get()}, [&] {
    drive_waiter(other);
    opened = opening->connect_peer_done();
    return opened != via::Result::not_done;
  }));
  EXPECT_EQ(opened, via::Result::invalid_reliability_level);
  EXPECT_EQ(asked->connect_peer_done(), via::Result::invalid_reliability_level);
  EXPECT_EQ(asked->state(), via::ViState::idle);
  EXPECT_EQ(other->disconnect(), via::Result::success);
}

INSTANTIATE_TEST_SUITE_P(WaiterPolls, TcpPeerAnswerTest,
                         ::testing::Values(WaiterDrives::another_vi, WaiterDrives::only_the_nic),
                         [](const auto& info) {
                           return std::string(info.param == WaiterDrives::another_vi ? "AnotherVi" : "OnlyTheNic");
                         });

// ---- bad frames on an accepted connection ----

// Memory on the server NIC: a region registered for RDMA write and read,
// between two unregistered guard areas that nothing may touch.
struct GuardedRegion {
  static constexpr std::size_t kGuard = 4096, kRegion = 4096;
  static constexpr std::uint8_t kGuardByte = 0xA5, kRegionByte = 0x3C;
  std::unique_ptr<std::uint64_t[]> words{new std::uint64_t[(2 * kGuard + kRegion) / 8]};
  std::uint8_t* base = reinterpret_cast<std::uint8_t*>(words.get());
  std::uint8_t* region = base + kGuard;
  via::MemHandle handle = 0;

  explicit GuardedRegion(Endpoint& e) {
    std::memset(base, kGuardByte, kGuard);
    std::memset(region, kRegionByte, kRegion);
    std::memset(region + kRegion, kGuardByte, kGuard);
    expect_ok(e.nic->register_memory(region, kRegion, via::MemAttributes{e.ptag, true, true}, handle), "register region");
  }
  std::uint64_t address(std::ptrdiff_t offset_from_region) const { return std::uintptr_t(region + offset_from_region); }
  // The first byte that changed, or -1.
  long first_change() const {
    for (std::size_t i = 0; i < 2 * kGuard + kRegion; ++i) {
      const bool in_region = i >= kGuard && i < kGuard + kRegion;
      if (base[i] != (in_region ? kRegionByte : kGuardByte)) return long(i);
    }
    return -1;
  }
};

struct BadFrame {
  const char* name;
  // The bytes the misbehaving peer sends.
  Bytes (*bytes)(const GuardedRegion& target);
  bool then_close;           // the peer ends its stream after them
  VIP_ERROR_CODE code;       // what the error handler hears
  const char* cause;         // ... and words in its cause
  const char* logged;        // words the provider logs on stderr ("" for none)
  bool peer_told;            // the NIC sends a link close frame flagged as an error
};

constexpr via::FrameHeader send_header(std::uint32_t length) {
  return via::FrameHeader{via::kFrameSend, via::kFlagLast, 0, length, length, 0, 0, 0, 0};
}

constexpr via::FrameHeader rdma_write_header(std::uint64_t raddr, via::MemHandle handle, std::uint32_t length) {
  return via::FrameHeader{via::kFrameRdmaWrite, via::kFlagLast, 0, length, length, 0, raddr, handle, 0};
}

const BadFrame kBadFrames[] = {
    {"OversizedLength",
     [](const GuardedRegion&) { return frame(send_header(std::uint32_t(tcp::kMaxFramePayload + 1))); },  // header only
     false, VIP_ERROR_CATASTROPHIC, "malformed frame", "sent a frame of 524289 bytes (limit 524288)", true},
    {"LengthNearFourGigabytes",
     [](const GuardedRegion&) { return frame(send_header(0xFFFFFFF8u)); }, false, VIP_ERROR_CATASTROPHIC,
     "malformed frame", "sent a frame of 4294967288 bytes", true},
    {"UnknownFrameType",
     [](const GuardedRegion&) {
       via::FrameHeader h = send_header(8);
       h.type = 0x7E;
       return frame(h, Bytes(8, 1));
     },
     false, VIP_ERROR_CATASTROPHIC, "malformed frame", "", true},
    {"TypeZero",
     [](const GuardedRegion&) {
       via::FrameHeader h = send_header(0);
       h.type = 0;
       return frame(h);
     },
     false, VIP_ERROR_CATASTROPHIC, "malformed frame", "", true},
    {"TruncatedFrameThenClose",
     [](const GuardedRegion&) {
       Bytes b = frame(send_header(1000), patterned(1000, 5));
       b.resize(sizeof(via::FrameHeader) + 100);
       return b;
     },
     true, VIP_ERROR_CONN_LOST, "connection closed in the middle of a frame",
     "connection closed in the middle of a frame", false},
    {"TruncatedHeaderThenClose", [](const GuardedRegion&) { return Bytes(17, 0x01); }, true, VIP_ERROR_CONN_LOST,
     "connection closed in the middle of a frame", "connection closed in the middle of a frame", false},
    {"GarbageBytes",
     [](const GuardedRegion&) {
       Bytes b = text("GET / HTTP/1.1\r\nHost: viastack\r\nAccept: */*\r\n\r\n");
       for (int i = 0; i < 64; ++i) b.push_back(std::uint8_t(i * 73 + 5));
       return b;
     },
     false, VIP_ERROR_CATASTROPHIC, "malformed frame", "sent a frame of", true},
    {"FragmentBeyondItsMessage",
     [](const GuardedRegion&) {
       via::FrameHeader h = send_header(64);
       h.offset = 32;  // [32, 96) of a 64-byte message
       return frame(h, Bytes(64, 2));
     },
     false, VIP_ERROR_CATASTROPHIC, "malformed frame", "", true},
    {"RdmaWriteOutsideAnyRegion",
     [](const GuardedRegion& t) { return frame(rdma_write_header(t.address(-1024), t.handle, 64), Bytes(64, 0xEE)); },
     false, VIP_ERROR_RDMAW_PROT, "not registered for RDMA write", "", true},
    {"RdmaWriteAcrossTheRegionsEnd",
     [](const GuardedRegion& t) {
       return frame(rdma_write_header(t.address(GuardedRegion::kRegion - 32), t.handle, 64), Bytes(64, 0xEE));
     },
     false, VIP_ERROR_RDMAW_PROT, "not registered for RDMA write", "", true},
    {"RdmaWriteWithAWrongHandle",
     [](const GuardedRegion& t) {
       return frame(rdma_write_header(t.address(0), t.handle + 0x10000, 64), Bytes(64, 0xEE));  // another generation
     },
     false, VIP_ERROR_RDMAW_PROT, "not registered for RDMA write", "", true},
    {"RdmaWriteWhoseOffsetWrapsTheAddress",
     [](const GuardedRegion& t) {
       via::FrameHeader h = rdma_write_header(t.address(0), t.handle, 64);
       h.total = ~std::uint64_t(0);
       h.offset = t.address(-2048) - t.address(0);  // modulo 2^64: raddr + offset lands in the low guard
       return frame(h, Bytes(64, 0xEE));
     },
     false, VIP_ERROR_RDMAW_PROT, "not registered for RDMA write", "", true},
};

void PrintTo(const BadFrame& bad, std::ostream* os) { *os << bad.name; }

class TcpBadFrameTest : public TcpProviderTest, public ::testing::WithParamInterface<BadFrame> {};

TEST_P(TcpBadFrameTest, BreaksOnlyThatViAndTouchesNothing) {
  const BadFrame& bad = GetParam();
  Endpoint b;
  b.open("tcp:1", 1 << 16);
  GuardedRegion target(b);
  std::vector<via::AsyncError> errors;
  b.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });

  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  std::memset(b.arena.data(), 0x77, 3 * 1024);
  std::vector<VIP_DESCRIPTOR*> receives;
  for (std::size_t i = 0; i < 3; ++i) {
    receives.push_back(b.message(i * 1024, 1024));
    expect_ok(vi->post_recv(receives.back(), b.arena.handle), "post recv");
  }

  StderrCapture stderr_log;
  ASSERT_TRUE(peer->send_all(bad.bytes(target)));
  if (bad.then_close) peer->shutdown_send();
  std::vector<VIP_DESCRIPTOR*> completed;
  const bool failed = drive({b.nic.get()}, [&] {
    VIP_DESCRIPTOR* d;
    while (vi->recv_done(d) == via::Result::success) completed.push_back(d);
    return vi->state() == via::ViState::error && completed.size() == receives.size();
  });
  const std::string log = stderr_log.take();

  EXPECT_TRUE(failed) << "state " << int(vi->state()) << ", " << completed.size() << " receives completed";
  EXPECT_EQ(vi->state(), via::ViState::error);
  ASSERT_EQ(errors.size(), 1u) << log;
  EXPECT_EQ(errors[0].vi, vi);
  EXPECT_EQ(errors[0].code, bad.code);
  EXPECT_NE(errors[0].cause.find(bad.cause), std::string::npos) << errors[0].cause;
  EXPECT_FALSE(errors[0].orderly);
  EXPECT_NE(log.find(bad.logged), std::string::npos) << log;
  ASSERT_EQ(completed, receives);  // in order, each exactly once
  for (VIP_DESCRIPTOR* d : completed) EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE |
                                                                           VIP_STATUS_DESC_FLUSHED_ERROR));
  for (std::size_t i = 0; i < 3 * 1024; ++i) ASSERT_EQ(std::to_integer<int>(b.arena.data()[i]), 0x77) << "byte " << i;
  EXPECT_EQ(target.first_change(), -1);

  // The NIC drops the connection, telling the peer why when the stream still allows it.
  Bytes after;
  EXPECT_TRUE(peer->wait_closed(3s, &after));
  if (bad.peer_told) {
    ASSERT_GE(after.size(), sizeof(via::FrameHeader));
    const via::FrameHeader bye = header_of(after);
    EXPECT_EQ(bye.type, tcp::kFrameLinkClose);
    EXPECT_TRUE(bye.flags & via::kFlagError);
  }

  // The NIC goes on: a fresh connection carries a message and an RDMA write, intact.
  via::Vi* fresh = nullptr;
  std::unique_ptr<RawPeer> good = accepted_raw_client(b, fresh);
  ASSERT_NE(good, nullptr);
  VIP_DESCRIPTOR* recv = b.message(4096, 1024);
  expect_ok(fresh->post_recv(recv, b.arena.handle), "post recv");
  Bytes stream = frame(send_header(300), patterned(300, 9));
  const Bytes write = frame(rdma_write_header(target.address(100), target.handle, 50), patterned(50, 10));
  stream.insert(stream.end(), write.begin(), write.end());
  ASSERT_TRUE(good->send_all(stream));
  VIP_DESCRIPTOR* d = nullptr;
  ASSERT_TRUE(drive({b.nic.get()}, [&] {
    VIP_DESCRIPTOR* got = nullptr;
    if (!d && fresh->recv_done(got) == via::Result::success) d = got;
    return d && std::memcmp(target.region + 100, patterned(50, 10).data(), 50) == 0;
  }));
  EXPECT_EQ(d, recv);
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE));
  EXPECT_EQ(d->CS.Length, 300u);
  EXPECT_EQ(b.mismatch(4096, 300, 9), -1);
  EXPECT_EQ(fresh->state(), via::ViState::connected);
  EXPECT_EQ(errors.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Frames, TcpBadFrameTest, ::testing::ValuesIn(kBadFrames),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(TcpProviderTest, RdmaReadRequestOutsideRegisteredMemoryIsRefusedWithoutAByte) {
  Endpoint b;
  b.open("tcp:1", 1 << 16);
  GuardedRegion target(b);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  // A read of the guard area below the region, then one of the region itself.
  const via::FrameHeader refused{via::kFrameReadRequest, 0, 0, 0, 64, 0, target.address(-256), target.handle, 0};
  const via::FrameHeader allowed{via::kFrameReadRequest, 0, 0, 0, 64, 0, target.address(64), target.handle, 0};
  Bytes requests = frame(refused);
  const Bytes second = frame(allowed);
  requests.insert(requests.end(), second.begin(), second.end());
  ASSERT_TRUE(peer->send_all(requests));
  Bytes got;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    // The refusal: a header alone; then the 64 bytes of the region.
    if (auto r = peer->recv_exact(sizeof(via::FrameHeader) + tcp::padded_frame_bytes(64))) got = *r;
    done = true;
  });
  drive({b.nic.get()}, [&] { return done.load(); });
  reader.join();
  ASSERT_EQ(got.size(), sizeof(via::FrameHeader) + tcp::padded_frame_bytes(64));
  const via::FrameHeader no = header_of(got);
  EXPECT_EQ(no.type, via::kFrameReadResponse);
  EXPECT_EQ(no.flags, via::kFlagLast | via::kFlagError);
  EXPECT_EQ(no.length, 0u);
  EXPECT_EQ(no.imm, std::uint32_t(VIP_STATUS_RDMA_PROT_ERROR));
  const via::FrameHeader yes = header_of(Bytes(got.begin() + sizeof(via::FrameHeader), got.end()));
  EXPECT_EQ(yes.type, via::kFrameReadResponse);
  EXPECT_EQ(yes.flags, via::kFlagLast);
  EXPECT_EQ(yes.length, 64u);
  EXPECT_EQ(Bytes(got.begin() + 2 * sizeof(via::FrameHeader), got.end()), Bytes(64, GuardedRegion::kRegionByte));
  EXPECT_EQ(vi->state(), via::ViState::connected) << "the target of a refused read keeps its VI";
}

// A link close ends the stream: a frame the peer sends after it (read by a
// later recv than the close) is never delivered; the VI ends as disconnected.
TEST_F(TcpProviderTest, NothingAfterALinkCloseIsDelivered) {
  Endpoint b;
  b.open("tcp:1", 4096);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  std::memset(b.arena.data(), 0x77, 64);
  expect_ok(vi->post_recv(b.message(0, 64), b.arena.handle), "post recv");
  ASSERT_TRUE(peer->send_all(frame(via::FrameHeader{tcp::kFrameLinkClose, 0, 0, 0, 0, 0, 0, 0, 0})));
  std::this_thread::sleep_for(20ms);
  b.nic->progress();  // reads the close
  ASSERT_TRUE(peer->send_all(frame(send_header(8), Bytes(8, 0x42))));
  std::this_thread::sleep_for(20ms);
  for (int i = 0; i < 10; ++i) b.nic->progress();
  VIP_DESCRIPTOR* d = nullptr;
  drive({b.nic.get()}, [&] { return vi->recv_done(d) == via::Result::success; });
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_DESC_FLUSHED_ERROR));
  EXPECT_EQ(std::to_integer<int>(b.arena.data()[0]), 0x77);
  EXPECT_EQ(vi->state(), via::ViState::error);
}

// A frame as large as the link allows arrives whole in one receive.
TEST_F(TcpProviderTest, AFrameOfTheLargestPayloadIsDelivered) {
  constexpr std::size_t kLargest = 512 * 1024;
  Endpoint b;
  b.open("tcp:1", kLargest);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  expect_ok(vi->post_recv(b.message(0, kLargest), b.arena.handle), "post recv");
  std::thread sender([&] { EXPECT_TRUE(peer->send_all(frame(send_header(kLargest), patterned(kLargest, 9)))); });
  VIP_DESCRIPTOR* d = nullptr;
  const bool received = drive({b.nic.get()}, [&] { return vi->recv_done(d) == via::Result::success; });
  sender.join();
  ASSERT_TRUE(received);
  EXPECT_EQ(status_err(d), 0u);
  EXPECT_EQ(d->CS.Length, kLargest);
  EXPECT_EQ(b.mismatch(0, kLargest, 9), -1);
  EXPECT_EQ(vi->state(), via::ViState::connected);
}

// Writes `bytes` in pieces of `piece` bytes with `pause` between them, the
// way a slow or congested stream hands them to the reader.
bool send_slowly(RawPeer& peer, const Bytes& bytes, std::size_t piece, std::chrono::microseconds pause) {
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    const auto from = bytes.begin() + long(at);
    if (!peer.send_all(Bytes(from, from + long(std::min(piece, bytes.size() - at))))) return false;
    std::this_thread::sleep_for(pause);
  }
  return true;
}

// A message of several of the largest frames, every frame reaching the NIC
// in many small pieces while it sleeps, lands byte-exact across the receive
// descriptor's segments and nowhere else; and the sleeping NIC is woken a few
// times per frame, not once per piece (the socket's SO_RCVLOWAT asks for the
// rest of the frame being read).
TEST_F(TcpProviderTest, ALargeMessageArrivingInManySmallPiecesLandsByteExactAndWakesTheNicPerFrame) {
  constexpr std::size_t kFrame = tcp::kMaxFramePayload, kFrames = 8, kMessage = kFrames * kFrame, kTail = 4096;
  constexpr std::size_t kPiece = 16 * 1024;
  Endpoint b;
  b.open("tcp:1", kMessage + kTail);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  std::memset(b.arena.data(kMessage), 0x77, kTail);
  VIP_DESCRIPTOR* posted = b.message(0, kMessage, 3);
  expect_ok(vi->post_recv(posted, b.arena.handle), "post recv");

  const Bytes message = patterned(kMessage, 21);
  Bytes stream;
  for (std::size_t k = 0; k < kFrames; ++k) {
    const via::FrameHeader h{via::kFrameSend, std::uint8_t(k + 1 == kFrames ? via::kFlagLast : 0), 7,
                             std::uint32_t(kFrame), kMessage, k * kFrame, 0, 0, 0};
    const Bytes f = frame(h, Bytes(message.begin() + long(k * kFrame), message.begin() + long((k + 1) * kFrame)));
    stream.insert(stream.end(), f.begin(), f.end());
  }
  // Pauses longer than the NIC's spin and yield phases, so that it sleeps between pieces.
  std::thread sender([&] { EXPECT_TRUE(send_slowly(*peer, stream, kPiece, 2ms)); });
  const std::uint64_t sleeps_before = b.nic->counters().sleeps;
  VIP_DESCRIPTOR* d = nullptr;
  const via::Result waited = b.nic->wait([&] { return vi->recv_done(d) == via::Result::success; }, 30000);
  const std::uint64_t sleeps = b.nic->counters().sleeps - sleeps_before;
  sender.join();
  ASSERT_EQ(waited, via::Result::success);
  EXPECT_EQ(d, posted);
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE));
  EXPECT_EQ(d->CS.Length, kMessage);
  EXPECT_EQ(b.mismatch(0, kMessage, 21), -1);
  for (std::size_t i = 0; i < kTail; ++i) ASSERT_EQ(std::to_integer<int>(b.arena.data(kMessage)[i]), 0x77) << i;
  EXPECT_EQ(vi->state(), via::ViState::connected);
  const std::size_t pieces = (stream.size() + kPiece - 1) / kPiece;
  RecordProperty("sleeps", int(sleeps));
  EXPECT_LE(sleeps, 8 * kFrames) << "the NIC woke for " << pieces << " pieces";
}

// A peer that dies in the middle of a large frame, while the NIC sleeps
// waiting for the rest of it, wakes the NIC at once: the VI breaks with the
// defined error instead of waiting for bytes that never come.
TEST_F(TcpProviderTest, APeerDyingInTheMiddleOfALargeFrameWakesTheSleepingNic) {
  Endpoint b;
  b.open("tcp:1", tcp::kMaxFramePayload);
  std::vector<via::AsyncError> errors;
  b.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  expect_ok(vi->post_recv(b.message(0, tcp::kMaxFramePayload), b.arena.handle), "post recv");
  Bytes part = frame(send_header(std::uint32_t(tcp::kMaxFramePayload)), patterned(tcp::kMaxFramePayload, 41));
  part.resize(part.size() / 3);
  std::atomic<std::int64_t> closed_at_ns{0};
  std::thread dying([&] {
    EXPECT_TRUE(peer->send_all(part));
    std::this_thread::sleep_for(300ms);  // the NIC is asleep by now, waiting for the rest
    closed_at_ns = Clock::now().time_since_epoch().count();
    peer.reset();
  });
  const via::Result waited = b.nic->wait([&] { return vi->state() == via::ViState::error; }, 5000);
  const auto woke = Clock::now();
  dying.join();
  ASSERT_EQ(waited, via::Result::success);
  EXPECT_GT(b.nic->counters().sleeps, 0u);
  EXPECT_LT(woke - Clock::time_point(Clock::duration(closed_at_ns.load())), 100ms);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, VIP_ERROR_CONN_LOST);
  EXPECT_NE(errors[0].cause.find("connection closed in the middle of a frame"), std::string::npos) << errors[0].cause;
}

// ---- large payloads read straight into the memory they go to ----

// Whether the first `n` bytes at `at` hold pattern `seed` (the part of a
// payload that has arrived so far).
bool landed(const std::uint8_t* at, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; ++i)
    if (at[i] != pattern(seed, i)) return false;
  return true;
}

// When the receive is posted: before the frame's header arrives, or only
// after the NIC has read the header and part of the payload.
enum class PostReceive { before_header, after_header };

class TcpDirectPayloadTest : public TcpProviderTest, public ::testing::WithParamInterface<PostReceive> {};

// A large frame's payload lands in the posted receive buffer while the rest
// is still on its way (the link reads it from the socket into the buffer, not
// into its own and then copies it), across many progress calls, and the
// message completes byte-exact with nothing written past it. A receive posted
// after the header came takes the rest of the payload the same way.
TEST_P(TcpDirectPayloadTest, ALargePayloadLandsInThePostedBufferAsItArrives) {
  constexpr std::size_t kPayload = 256 * 1024, kFirst = 96 * 1024, kTail = 4096;
  Endpoint b;
  b.open("tcp:1", kPayload + kTail);
  std::vector<via::AsyncError> errors;
  b.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  std::memset(b.arena.data(), 0x77, kPayload + kTail);
  VIP_DESCRIPTOR* posted = b.message(0, kPayload, 3);
  if (GetParam() == PostReceive::before_header) expect_ok(vi->post_recv(posted, b.arena.handle), "post recv");

  const Bytes whole = frame(send_header(std::uint32_t(kPayload)), patterned(kPayload, 51));
  const std::size_t first = sizeof(via::FrameHeader) + kFirst;
  ASSERT_TRUE(peer->send_all(Bytes(whole.begin(), whole.begin() + long(first))));
  const auto* buffer = reinterpret_cast<const std::uint8_t*>(b.arena.data());
  if (GetParam() == PostReceive::after_header) {
    // The header and part of the payload are read; nothing has anywhere to go yet.
    drive({b.nic.get()}, [] { return false; }, 200);
    EXPECT_EQ(vi->state(), via::ViState::connected);
    EXPECT_EQ(buffer[0], 0x77);
    expect_ok(vi->post_recv(posted, b.arena.handle), "post recv");
  }
  EXPECT_TRUE(drive({b.nic.get()}, [&] { return landed(buffer, kFirst, 51); }, 2000))
      << "the first " << kFirst << " bytes of the payload did not reach the posted buffer before the rest was sent";
  VIP_DESCRIPTOR* d = nullptr;
  EXPECT_NE(vi->recv_done(d), via::Result::success) << "the message completed before its payload was all there";

  std::thread sender([&] { EXPECT_TRUE(send_slowly(*peer, Bytes(whole.begin() + long(first), whole.end()), 8192, 100us)); });
  const bool received = drive({b.nic.get()}, [&] { return vi->recv_done(d) == via::Result::success; });
  sender.join();
  ASSERT_TRUE(received);
  EXPECT_EQ(d, posted);
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE));
  EXPECT_EQ(d->CS.Length, kPayload);
  EXPECT_EQ(b.mismatch(0, kPayload, 51), -1);
  for (std::size_t i = 0; i < kTail; ++i) ASSERT_EQ(std::to_integer<int>(b.arena.data(kPayload)[i]), 0x77) << i;

  // The stream goes on after the directly read frame: a small message, then a large one.
  VIP_DESCRIPTOR* small = b.message(0, 100);
  VIP_DESCRIPTOR* large = b.message(4096, kPayload - 4096);
  expect_ok(vi->post_recv(small, b.arena.handle), "post recv");
  expect_ok(vi->post_recv(large, b.arena.handle), "post recv");
  Bytes next = frame(send_header(100), patterned(100, 52));
  const Bytes second = frame(send_header(std::uint32_t(kPayload - 4096)), patterned(kPayload - 4096, 53));
  next.insert(next.end(), second.begin(), second.end());
  std::thread sender2([&] { EXPECT_TRUE(send_slowly(*peer, next, 32 * 1024, 100us)); });
  std::vector<VIP_DESCRIPTOR*> done;
  const bool both = drive({b.nic.get()}, [&] {
    while (vi->recv_done(d) == via::Result::success) done.push_back(d);
    return done.size() == 2;
  });
  sender2.join();
  ASSERT_TRUE(both);
  EXPECT_EQ(done, (std::vector<VIP_DESCRIPTOR*>{small, large}));
  EXPECT_EQ(b.mismatch(0, 100, 52), -1);
  EXPECT_EQ(b.mismatch(4096, kPayload - 4096, 53), -1);
  EXPECT_EQ(vi->state(), via::ViState::connected);
  EXPECT_TRUE(errors.empty());
}

INSTANTIATE_TEST_SUITE_P(Receive, TcpDirectPayloadTest,
                         ::testing::Values(PostReceive::before_header, PostReceive::after_header),
                         [](const auto& info) {
                           return std::string(info.param == PostReceive::before_header ? "PostedBeforeTheHeader"
                                                                                       : "PostedAfterTheHeader");
                         });

// A large frame whose header and whole payload are already in the socket
// when the link reads its header goes, but for a bounded head, straight into
// the memory the engine names: the link shows it as read directly (no
// payload pointer), every byte is there, each frame is shown by one call, and
// the frame after it is read as usual. (Reading as much as its buffer held,
// the link took the whole frame into the buffer, to be copied from there.)
// So do a send's and an RDMA read's response (which went through the buffer
// too, before). A unix socket plays the stream, as in tcp_fuzz.
TEST(TcpLinkTest, AFrameWhollyInTheSocketIsReadStraightIntoItsDestination) {
  constexpr std::size_t kPayload = 256 * 1024;
  for (const std::uint8_t type : {via::kFrameSend, via::kFrameReadResponse}) {
    SCOPED_TRACE("frame type " + std::to_string(type));
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    const int room = 4 << 20;
    setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    via::FrameHeader head = send_header(std::uint32_t(kPayload));
    head.type = type;
    Bytes stream = frame(head, patterned(kPayload, 61));
    const Bytes after = frame(send_header(100), patterned(100, 62));
    stream.insert(stream.end(), after.begin(), after.end());
    ASSERT_EQ(::send(fds[1], stream.data(), stream.size(), MSG_DONTWAIT | MSG_NOSIGNAL), ssize_t(stream.size()));

    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    asio::error_code ec;
    socket.assign(asio::ip::tcp::v4(), fds[0], ec);
    ASSERT_FALSE(ec);
    Bytes destination(kPayload + 8, 0x77);
    tcp::TcpLink link(std::move(socket), "test", nullptr, [&](const via::FrameHeader& h, iovec* out, std::size_t) {
      if (h.length != kPayload) return std::size_t(0);
      out[0] = iovec{destination.data(), kPayload};
      return std::size_t(1);
    });
    const via::FrameHeader* h = nullptr;
    const std::byte* payload = nullptr;
    ASSERT_TRUE(link.peek(h, payload)) << "a frame all in the socket was not shown by one call";
    EXPECT_EQ(h->type, type);
    EXPECT_EQ(h->length, kPayload);
    EXPECT_EQ(payload, nullptr) << "the payload went through the link's buffer";
    EXPECT_TRUE(std::equal(destination.begin(), destination.begin() + long(kPayload), stream.begin() + sizeof *h));
    EXPECT_EQ(destination[kPayload], 0x77);
    link.pop();
    ASSERT_TRUE(link.peek(h, payload));
    ASSERT_EQ(h->length, 100u);
    ASSERT_NE(payload, nullptr);
    EXPECT_EQ(Bytes(reinterpret_cast<const std::uint8_t*>(payload), reinterpret_cast<const std::uint8_t*>(payload) + 100),
              patterned(100, 62));
    link.pop();
    ::close(fds[1]);
  }
}

// A connection whose two ends are on this host gets a send buffer of
// VIASTACK_TCP_LOCAL_SNDBUF (256 KiB; Linux reports twice what was set, up to
// twice net.core.wmem_max), not
// the kernel's autotuned one, which grows to several MiB and lets a sender
// run so far ahead that its data leaves the cache before it is read; its
// receive buffer stays the kernel's to size.
TEST(TcpLinkTest, AConnectionWithinTheHostGetsTheLocalSendBufferSize) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  asio::ip::tcp::socket client(io), server(io);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  int kernels_rcvbuf = 0;
  socklen_t size = sizeof kernels_rcvbuf;
  ASSERT_EQ(getsockopt(client.native_handle(), SOL_SOCKET, SO_RCVBUF, &kernels_rcvbuf, &size), 0);
  tcp::TcpLink link(std::move(client), "test", nullptr, [](const via::FrameHeader&, iovec*, std::size_t) {
    return std::size_t(0);
  });
  // Linux caps what is set at net.core.wmem_max (212992 unless raised).
  int wmem_max = 256 * 1024;
  std::ifstream("/proc/sys/net/core/wmem_max") >> wmem_max;
  int value = 0;
  ASSERT_EQ(getsockopt(link.fd(), SOL_SOCKET, SO_SNDBUF, &value, &size), 0);
  EXPECT_EQ(value, 2 * std::min(256 * 1024, wmem_max));
  ASSERT_EQ(getsockopt(link.fd(), SOL_SOCKET, SO_RCVBUF, &value, &size), 0);
  EXPECT_EQ(value, kernels_rcvbuf) << "the receive buffer was set";
}

// Memory on the server NIC registered for RDMA write, with a guard area after it.
struct RdmaTarget {
  static constexpr std::size_t kBytes = 256 * 1024, kGuard = 4096;
  std::unique_ptr<std::uint64_t[]> words{new std::uint64_t[(kBytes + kGuard) / 8]};
  std::uint8_t* bytes = reinterpret_cast<std::uint8_t*>(words.get());
  via::MemHandle handle = 0;
  explicit RdmaTarget(Endpoint& e) {
    std::memset(bytes, 0x3C, kBytes + kGuard);
    expect_ok(e.nic->register_memory(bytes, kBytes, via::MemAttributes{e.ptag, true, false}, handle), "register target");
  }
};

// A large RDMA write lands in its target while the rest is on its way. Its
// target deregistered in the middle of the payload: not a byte more lands,
// the rest of the frame is read and dropped, and the VI breaks with the
// error of a write to memory that is not registered.
TEST_F(TcpProviderTest, AnRdmaWriteTargetDeregisteredInTheMiddleOfThePayloadGetsNoMoreBytes) {
  constexpr std::size_t kFirst = 96 * 1024;
  Endpoint b;
  b.open("tcp:1", 4096);
  RdmaTarget target(b);
  std::vector<via::AsyncError> errors;
  b.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);

  const Bytes whole = frame(rdma_write_header(std::uintptr_t(target.bytes), target.handle, RdmaTarget::kBytes),
                            patterned(RdmaTarget::kBytes, 61));
  const std::size_t first = sizeof(via::FrameHeader) + kFirst;
  ASSERT_TRUE(peer->send_all(Bytes(whole.begin(), whole.begin() + long(first))));
  EXPECT_TRUE(drive({b.nic.get()}, [&] { return landed(target.bytes, kFirst, 61); }, 2000))
      << "the first " << kFirst << " bytes of the write did not reach the target before the rest was sent";
  expect_ok(b.nic->deregister_memory(target.bytes, target.handle), "deregister target");
  std::memset(target.bytes, 0x55, RdmaTarget::kBytes);

  StderrCapture stderr_log;
  std::thread sender([&] { send_slowly(*peer, Bytes(whole.begin() + long(first), whole.end()), 16 * 1024, 100us); });
  const bool broke = drive({b.nic.get()}, [&] { return vi->state() == via::ViState::error; });
  sender.join();
  stderr_log.take();
  ASSERT_TRUE(broke);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, VIP_ERROR_RDMAW_PROT);
  EXPECT_NE(errors[0].cause.find("not registered for RDMA write"), std::string::npos) << errors[0].cause;
  for (std::size_t i = 0; i < RdmaTarget::kBytes; ++i) ASSERT_EQ(target.bytes[i], 0x55) << "byte " << i;
  for (std::size_t i = 0; i < RdmaTarget::kGuard; ++i) ASSERT_EQ(target.bytes[RdmaTarget::kBytes + i], 0x3C) << i;
}

// A peer that dies in the middle of a large payload being read into the
// posted buffer: the VI breaks with the defined error, the receive completes
// flushed, and nothing lands past the part that arrived.
TEST_F(TcpProviderTest, APeerDyingInTheMiddleOfAPayloadReadIntoThePostedBufferBreaksTheVi) {
  constexpr std::size_t kPayload = 256 * 1024, kFirst = 96 * 1024;
  Endpoint b;
  b.open("tcp:1", kPayload);
  std::vector<via::AsyncError> errors;
  b.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  std::memset(b.arena.data(), 0x77, kPayload);
  VIP_DESCRIPTOR* posted = b.message(0, kPayload);
  expect_ok(vi->post_recv(posted, b.arena.handle), "post recv");
  const Bytes whole = frame(send_header(std::uint32_t(kPayload)), patterned(kPayload, 71));
  ASSERT_TRUE(peer->send_all(Bytes(whole.begin(), whole.begin() + long(sizeof(via::FrameHeader) + kFirst))));
  const auto* buffer = reinterpret_cast<const std::uint8_t*>(b.arena.data());
  EXPECT_TRUE(drive({b.nic.get()}, [&] { return landed(buffer, kFirst, 71); }, 2000));
  peer.reset();
  StderrCapture stderr_log;
  VIP_DESCRIPTOR* d = nullptr;
  const bool broke = drive({b.nic.get()}, [&] {
    if (!d) vi->recv_done(d);
    return vi->state() == via::ViState::error && d;
  });
  stderr_log.take();
  ASSERT_TRUE(broke);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, VIP_ERROR_CONN_LOST);
  EXPECT_NE(errors[0].cause.find("connection closed in the middle of a frame"), std::string::npos) << errors[0].cause;
  EXPECT_EQ(d, posted);
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_DESC_FLUSHED_ERROR));
  for (std::size_t i = kFirst; i < kPayload; ++i) ASSERT_EQ(buffer[i], 0x77) << "byte " << i;
}

// A large hostile frame, arriving in small pieces: the VI breaks with the
// defined error and not a byte lands in memory, neither in the receive
// buffer it is too long for nor past the RDMA region it starts in.
struct LargeHostileFrame {
  const char* name;
  Bytes (*bytes)(const GuardedRegion& target);
  VIP_ERROR_CODE code;
  const char* cause;
};

const LargeHostileFrame kLargeHostileFrames[] = {
    {"SendLongerThanThePostedReceive",
     [](const GuardedRegion&) {
       // The first of eight largest frames of a 4 MiB message, for a 1 KiB receive.
       const via::FrameHeader h{via::kFrameSend, 0, 0, std::uint32_t(tcp::kMaxFramePayload),
                                8 * tcp::kMaxFramePayload, 0, 0, 0, 0};
       return frame(h, patterned(tcp::kMaxFramePayload, 31));
     },
     VIP_ERROR_RECVQ_EMPTY, "longer than the posted receive descriptor"},
    {"RdmaWriteRunningPastTheRegion",
     [](const GuardedRegion& t) {
       return frame(rdma_write_header(t.address(0), t.handle, std::uint32_t(tcp::kMaxFramePayload)),
                    patterned(tcp::kMaxFramePayload, 32));
     },
     VIP_ERROR_RDMAW_PROT, "not registered for RDMA write"},
};

void PrintTo(const LargeHostileFrame& bad, std::ostream* os) { *os << bad.name; }

class TcpLargeHostileFrameTest : public TcpProviderTest, public ::testing::WithParamInterface<LargeHostileFrame> {};

TEST_P(TcpLargeHostileFrameTest, BreaksTheViWithoutWritingAByte) {
  const LargeHostileFrame& bad = GetParam();
  constexpr std::size_t kArena = 1 << 20;
  Endpoint b;
  b.open("tcp:1", kArena);
  GuardedRegion target(b);
  std::vector<via::AsyncError> errors;
  b.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  std::memset(b.arena.data(), 0x77, kArena);
  VIP_DESCRIPTOR* posted = b.message(0, 1024);
  expect_ok(vi->post_recv(posted, b.arena.handle), "post recv");

  StderrCapture stderr_log;
  std::thread sender([&] { send_slowly(*peer, bad.bytes(target), 16 * 1024, 200us); });
  VIP_DESCRIPTOR* d = nullptr;
  const bool broke = drive({b.nic.get()}, [&] {
    if (!d) vi->recv_done(d);
    return vi->state() == via::ViState::error && d;
  }, 10000);
  peer->shutdown_send();
  sender.join();
  stderr_log.take();

  ASSERT_TRUE(broke) << "state " << int(vi->state());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, bad.code);
  EXPECT_NE(errors[0].cause.find(bad.cause), std::string::npos) << errors[0].cause;
  EXPECT_EQ(d, posted);
  EXPECT_NE(status_err(d), 0u);
  for (std::size_t i = 0; i < kArena; ++i) ASSERT_EQ(std::to_integer<int>(b.arena.data()[i]), 0x77) << "byte " << i;
  EXPECT_EQ(target.first_change(), -1);
}

INSTANTIATE_TEST_SUITE_P(Frames, TcpLargeHostileFrameTest, ::testing::ValuesIn(kLargeHostileFrames),
                         [](const auto& info) { return std::string(info.param.name); });

// The NIC's end of the connection whose other end is `peer_fd` (this process holds both).
int socket_connected_to(int peer_fd) {
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  getsockname(peer_fd, reinterpret_cast<sockaddr*>(&peer), &len);
  for (int fd = 3; fd < 4096; ++fd) {
    sockaddr_in other{};
    socklen_t other_len = sizeof other;
    if (fd == peer_fd || getpeername(fd, reinterpret_cast<sockaddr*>(&other), &other_len) != 0) continue;
    if (other.sin_family == AF_INET && other.sin_port == peer.sin_port && other.sin_addr.s_addr == peer.sin_addr.s_addr)
      return fd;
  }
  return -1;
}

// A NIC waiting for a send whose frame the socket had no room for at all
// must wake when room appears, not when its sleep slice ends (which doubles
// up to a second while the wait goes on).
TEST_F(TcpProviderTest, ASendTheSocketHadNoRoomForLeavesAsSoonAsThePeerReads) {
  Endpoint b;
  b.open("tcp:1", 4096);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  // A small send buffer on the NIC's socket, so that header-only frames fill it soon.
  const int nic_fd = socket_connected_to(peer->fd());
  ASSERT_GE(nic_fd, 0);
  const int small = 4096;
  ASSERT_EQ(setsockopt(nic_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);

  // Empty sends (a frame header each) while the peer reads nothing, until
  // kOutstanding of them wait: the socket is full. A frame this small is
  // taken whole or refused whole, so the one in front waits in the send queue.
  constexpr int kOutstanding = 256;
  int posted = 0, completed = 0;
  const auto give_up = Clock::now() + 10s;
  while (posted - completed < kOutstanding) {
    ASSERT_LT(Clock::now(), give_up) << "the socket never filled up: " << posted << " posted, " << completed << " sent";
    expect_ok(vi->post_send(b.message(0, 0), b.arena.handle), "post send");
    ++posted;
    b.nic->progress();
    VIP_DESCRIPTOR* d = nullptr;
    while (vi->send_done(d) == via::Result::success) {
      ASSERT_EQ(status_err(d), 0u);
      b.release(d);
      ++completed;
    }
  }

  // The peer starts reading while the NIC sleeps in the wait below.
  std::atomic<std::int64_t> reading_since_ns{0};
  const std::size_t expected = std::size_t(posted) * tcp::padded_frame_bytes(0);
  std::size_t received = 0;
  std::thread reader([&] {
    std::this_thread::sleep_for(400ms);
    reading_since_ns = Clock::now().time_since_epoch().count();
    peer->read_and_drop(expected, received);
  });
  // One wait for all of them, so that its sleep slices grow as they do in a long wait.
  const via::Result waited = b.nic->wait(
      [&] {
        VIP_DESCRIPTOR* d = nullptr;
        while (vi->send_done(d) == via::Result::success) {
          b.release(d);
          ++completed;
        }
        return completed == posted;
      },
      5000);
  const auto all_sent = Clock::now();
  reader.join();
  ASSERT_EQ(waited, via::Result::success);
  EXPECT_EQ(received, expected);
  const auto woke_after = all_sent - Clock::time_point(Clock::duration(reading_since_ns.load()));
  EXPECT_LT(woke_after, 100ms) << "the NIC slept on after the peer made room (negative: the sends were out before)";
}

// A peer that is alive but reads nothing for several times the connection
// timeout (a rank starved of CPU on an oversubscribed machine, or busy
// computing) keeps its connection: its kernel still acknowledges, with a
// closed window. Linux counts such window probes against TCP_USER_TIMEOUT,
// which ended these links with ETIMEDOUT in a 256-rank all-to-all.
TEST_F(TcpProviderTest, APeerThatReadsNothingForLongerThanTheTimeoutKeepsItsConnection) {
  constexpr auto kTimeout = 400ms;
  setenv("VIASTACK_TCP_TIMEOUT_MS", std::to_string(kTimeout.count()).c_str(), 1);
  Endpoint b;
  b.open("tcp:1", 4096);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  unsetenv("VIASTACK_TCP_TIMEOUT_MS");
  ASSERT_NE(peer, nullptr);
  // A small send buffer on the NIC's socket: the sends wait soon after the peer's window closed.
  const int small = 4096;
  const int nic_fd = socket_connected_to(peer->fd());
  ASSERT_GE(nic_fd, 0);
  ASSERT_EQ(setsockopt(nic_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);

  constexpr int kOutstanding = 64;
  constexpr std::size_t kBytes = 4096;
  int posted = 0, completed = 0, failed = 0;
  auto reap = [&] {
    VIP_DESCRIPTOR* d = nullptr;
    while (vi->send_done(d) == via::Result::success) {
      failed += status_err(d) != 0;
      b.release(d);
      ++completed;
    }
  };
  const auto give_up = Clock::now() + 10s;
  while (posted - completed < kOutstanding) {
    ASSERT_LT(Clock::now(), give_up) << "the window never closed: " << posted << " posted, " << completed << " sent";
    expect_ok(vi->post_send(b.message(0, kBytes), b.arena.handle), "post send");
    ++posted;
    b.nic->progress();
    reap();
  }
  // The peer reads nothing for six times the timeout while the NIC waits on
  // it (its waits check the links' liveness).
  b.nic->wait([] { return false; }, std::uint32_t((6 * kTimeout).count()));
  reap();
  ASSERT_EQ(vi->state(), via::ViState::connected) << "a peer that reads nothing yet was declared dead";

  const std::size_t expected = std::size_t(posted) * tcp::padded_frame_bytes(kBytes);
  std::size_t received = 0;
  std::thread reader([&] {
    peer->read_and_drop(expected, received);
  });
  const via::Result waited = b.nic->wait(
      [&] {
        reap();
        return completed == posted;
      },
      5000);
  reader.join();
  EXPECT_EQ(waited, via::Result::success);
  EXPECT_EQ(received, expected);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(vi->state(), via::ViState::connected);
}

// A peer whose host stops answering is still found dead within about the
// timeout.
TEST_F(TcpProviderTest, APeerThatAcknowledgesNothingIsFoundDeadWithinTheTimeout) {
  constexpr auto kTimeout = 400ms;
  Endpoint b;
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = silenced_raw_client(b, vi, kTimeout);
  ASSERT_NE(peer, nullptr);

  expect_ok(vi->post_send(b.message(0, 64), b.arena.handle), "post send");
  const auto start = Clock::now();
  b.nic->wait([&] { return vi->state() == via::ViState::error; }, 20000);
  EXPECT_EQ(vi->state(), via::ViState::error) << "a peer that answers nothing was never found dead";
  EXPECT_LT(Clock::now() - start, 10 * kTimeout);
}

// An idle link whose peer misses a keepalive probe (lost on a loaded
// machine) is the kernel's keepalive to judge, over its several probes: the
// link's own check counts only retransmissions and window probes, which wait
// on data of ours. Here the peer drops everything for a while longer than
// the timeout, past the first probe, then answers again.
TEST_F(TcpProviderTest, AnIdleLinkWhosePeerMissesAKeepaliveProbeStaysUp) {
  constexpr auto kTimeout = 400ms;
  Endpoint b;
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = silenced_raw_client(b, vi, kTimeout);
  ASSERT_NE(peer, nullptr);
  b.nic->wait([] { return false; }, 2000);  // keepalive's first probe goes after 1 s of silence
  int unused = 0;
  ASSERT_EQ(setsockopt(peer->fd(), SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused), 0);
  b.nic->wait([] { return false; }, 1500);
  EXPECT_EQ(vi->state(), via::ViState::connected) << "an idle link was ended over one lost keepalive probe";
}

// With the NIC's default error handler, the reason a VI broke reaches stderr.
TEST_F(TcpProviderTest, DefaultErrorHandlerLogsWhyTheViBroke) {
  Endpoint b;
  b.open("tcp:1", 4096);
  via::Vi* vi = nullptr;
  std::unique_ptr<RawPeer> peer = accepted_raw_client(b, vi);
  ASSERT_NE(peer, nullptr);
  StderrCapture stderr_log;
  via::FrameHeader h = send_header(0);
  h.type = 0x55;
  ASSERT_TRUE(peer->send_all(frame(h)));
  EXPECT_TRUE(drive({b.nic.get()}, [&] { return vi->state() == via::ViState::error; }));
  const std::string log = stderr_log.take();
  const std::string line = "] error: asynchronous VIA error VIP_ERROR_CATASTROPHIC: malformed frame from the peer\n";
  EXPECT_NE(log.find(line), std::string::npos) << log;
}

}  // namespace

int main(int argc, char** argv) {
  // Short enough that the silent intruder is cut off quickly; set before any NIC is opened.
  setenv("VIASTACK_TCP_AUTH_TIMEOUT_MS", "300", 1);
  setenv("VIASTACK_SPIN_US", "5", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
