// Test helpers for TcpConnection on virtual time: a fixture that plays the
// peer with crafted segments and captures what the connection sends, and a
// loopback that joins two connections through a pipe that may lose and
// reorder segments, driven by a seeded random generator.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "utcp/tcp_connection.hpp"

namespace utcp::testing {

using namespace std::chrono_literals;
using wire::SeqNumber;
using wire::TcpHeader;
namespace flag = wire::tcp_flags;

struct SentSegment {
  TcpHeader header;
  std::vector<std::uint8_t> payload;
};

inline std::vector<std::uint8_t> pattern(std::size_t size, std::uint32_t seed = 1) {
  std::vector<std::uint8_t> bytes(size);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return bytes;
}

// Small and plain: MSS 1000, no options beyond MSS, windows below 64 KiB;
// NewReno, whose windows the tests work out (the default is BBR).
inline TcpConfig plain_config() {
  TcpConfig config;
  config.congestion_control = "newreno";
  config.max_segment_size = 1000;
  config.window_scaling = false;
  config.timestamps = false;
  config.receive_buffer = 64000;
  config.send_buffer = 1u << 20;
  return config;
}

// One connection under test; the test plays the peer (ports 2000 → 1000).
class ConnectionTest : public ::testing::Test {
 protected:
  static constexpr std::uint32_t iss = 100;        // ours
  static constexpr std::uint32_t peer_iss = 5000;  // the peer's
  static constexpr TcpConnection::Ports ports{1000, 2000};

  Instant now = Instant{} + std::chrono::hours(1);
  TcpConfig config = plain_config();
  std::deque<SentSegment> sent;
  std::unique_ptr<TcpConnection> connection;

  TcpConnection::Transmit capture() {
    return [this](const TcpHeader& header, std::span<const std::uint8_t> payload) {
      sent.push_back({header, {payload.begin(), payload.end()}});
    };
  }

  // The next segment sent (a failure if there is none).
  SentSegment next_sent() {
    if (sent.empty()) {
      ADD_FAILURE() << "no segment was sent";
      return {};
    }
    SentSegment segment = std::move(sent.front());
    sent.pop_front();
    return segment;
  }

  // A segment from the peer.
  static TcpHeader from_peer(std::uint32_t sequence, std::uint32_t ack, std::uint8_t flags,
                             std::uint16_t window = 60000) {
    TcpHeader header;
    header.source_port = ports.remote;
    header.destination_port = ports.local;
    header.sequence = SeqNumber(sequence);
    header.acknowledgment = SeqNumber(ack);
    header.flags = flags;
    header.window = window;
    return header;
  }

  void feed(const TcpHeader& header, std::span<const std::uint8_t> payload = {}) {
    connection->on_segment({header, payload}, now);
  }

  // Runs every timer due up to now + duration, then sets the clock there.
  void run_for(std::chrono::nanoseconds duration) {
    const Instant until = now + duration;
    while (connection->next_timer() && *connection->next_timer() <= until) {
      now = std::max(now, *connection->next_timer());
      connection->on_timer(now);
    }
    now = until;
  }

  // Active open to ESTABLISHED: our SYN, the peer's SYN-ACK, our ACK.
  void open_active(std::uint16_t peer_window = 60000, std::optional<std::uint16_t> peer_mss = 1000) {
    connection = TcpConnection::connect(ports, config, SeqNumber(iss), now, capture());
    next_sent();  // SYN
    TcpHeader syn_ack = from_peer(peer_iss, iss + 1, flag::syn | flag::ack, peer_window);
    syn_ack.options.max_segment_size = peer_mss;
    feed(syn_ack);
    ASSERT_EQ(connection->state(), TcpState::established);
    next_sent();  // ACK
  }

  void send(std::span<const std::uint8_t> data) {
    auto taken = connection->send(data, now);
    ASSERT_TRUE(taken.has_value());
    ASSERT_EQ(*taken, data.size());
  }

  std::vector<std::uint8_t> receive_all() {
    std::vector<std::uint8_t> out(1u << 20);
    auto got = connection->receive(out, now);
    if (!got) return {};
    out.resize(*got);
    return out;
  }
};

// Two connections joined by a pipe: each segment takes `delay`; with
// `loss` it is dropped, with `reorder` held back a little longer so that
// later ones overtake it. The client connects; the server is created from
// the client's SYN, as a listener would.
class Loopback {
 public:
  struct Options {
    TcpConfig client;
    TcpConfig server;
    double loss = 0;
    double reorder = 0;
    std::chrono::microseconds delay = 500us;
    // Bytes per second each direction carries (payload and 40 bytes of
    // headers per segment), queued without bound: a bottleneck. 0: none.
    double bandwidth = 0;
    std::uint32_t seed = 1;
    std::uint32_t client_iss = 1;
    std::uint32_t server_iss = 1000000;
    // Decides a loss deliberately: true drops the segment (to is 1 for the
    // server, 0 for the client), before the random loss is drawn.
    std::function<bool(int to, const TcpHeader& header, std::span<const std::uint8_t> payload)> drop = nullptr;
  };

  explicit Loopback(Options options) : options_(std::move(options)), random_(options_.seed) {}

  void connect() { client = TcpConnection::connect({40000, 80}, options_.client, SeqNumber(options_.client_iss), now, pipe_to(1)); }

  // Both sides open actively at once (simultaneous open).
  void connect_both() {
    client = TcpConnection::connect({40000, 80}, options_.client, SeqNumber(options_.client_iss), now, pipe_to(1));
    server = TcpConnection::connect({80, 40000}, options_.server, SeqNumber(options_.server_iss), now, pipe_to(0));
  }

  // Delivers the next packet or runs the next timer; false when nothing is left to happen.
  bool step() {
    std::optional<Instant> next;
    auto consider = [&next](std::optional<Instant> at) {
      if (at && (!next || *at < *next)) next = at;
    };
    if (!in_flight_.empty()) consider(in_flight_.front().arrival);
    consider(application_wakeup);
    if (client) consider(client->next_timer());
    if (server) consider(server->next_timer());
    if (!next) return false;
    now = std::max(now, *next);
    if (!in_flight_.empty() && in_flight_.front().arrival <= now) {
      Packet packet = std::move(in_flight_.front());
      in_flight_.pop_front();
      deliver(packet);
    } else {
      if (application_wakeup && *application_wakeup <= now) application_wakeup.reset();
      if (client && client->next_timer() && *client->next_timer() <= now) client->on_timer(now);
      if (server && server->next_timer() && *server->next_timer() <= now) server->on_timer(now);
    }
    return true;
  }

  // Steps until done() holds or virtual time passes the limit; returns done().
  template <class Done>
  bool run_until(Done done, std::chrono::seconds limit = 600s) {
    const Instant end = now + limit;
    while (!done() && now < end && step()) {
    }
    return done();
  }

  Instant now = Instant{} + std::chrono::hours(1);
  // When the test's application wants to run next, if not sooner (run_until
  // calls it after every step).
  std::optional<Instant> application_wakeup;
  std::unique_ptr<TcpConnection> client;
  std::unique_ptr<TcpConnection> server;
  std::uint64_t dropped = 0;
  std::uint64_t reordered = 0;

 private:
  struct Packet {
    Instant arrival;
    int to;
    TcpHeader header;
    std::vector<std::uint8_t> payload;
  };

  TcpConnection::Transmit pipe_to(int to) {
    return [this, to](const TcpHeader& header, std::span<const std::uint8_t> payload) {
      if ((options_.drop && options_.drop(to, header, payload)) || chance(options_.loss)) {
        ++dropped;
        return;
      }
      Instant departure = now;
      if (options_.bandwidth > 0) {
        Instant& free_at = link_free_at_[to];
        const std::chrono::duration<double> serialization((payload.size() + 40) / options_.bandwidth);
        free_at = std::max(free_at, now) + std::chrono::duration_cast<Instant::duration>(serialization);
        departure = free_at;
      }
      Instant arrival = departure + options_.delay;
      if (chance(options_.reorder)) {
        ++reordered;
        arrival += options_.delay * (1 + random_() % 4);
      }
      Packet packet{arrival, to, header, {payload.begin(), payload.end()}};
      auto position = std::upper_bound(in_flight_.begin(), in_flight_.end(), arrival,
                                       [](Instant at, const Packet& held) { return at < held.arrival; });
      in_flight_.insert(position, std::move(packet));
    };
  }

  bool chance(double probability) { return probability > 0 && random_() % 1000000 < probability * 1000000; }

  void deliver(const Packet& packet) {
    const wire::TcpSegment segment{packet.header, packet.payload};
    if (packet.to == 0) {
      if (client) client->on_segment(segment, now);
      return;
    }
    if (server) {
      server->on_segment(segment, now);
    } else if (packet.header.flags == flag::syn) {
      server = TcpConnection::accept({80, 40000}, options_.server, segment, SeqNumber(options_.server_iss), now,
                                     pipe_to(0));
    }
  }

  Options options_;
  std::mt19937 random_;
  std::deque<Packet> in_flight_;
  std::array<Instant, 2> link_free_at_{};  // when each direction's bottleneck is free again
};

}  // namespace utcp::testing
