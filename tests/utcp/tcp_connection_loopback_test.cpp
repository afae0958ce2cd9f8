// Two TcpConnections joined by a pipe on virtual time: bulk transfers with
// and without loss and reordering, the bytes checked, and both sides closed.
#include "tcp_connection_harness.hpp"

namespace utcp::testing {
namespace {

TcpConfig bulk_config() {
  TcpConfig config;
  config.max_segment_size = 1460;
  config.time_wait = 2s;
  return config;  // window scaling and timestamps on, 1 MiB buffers
}

struct TransferResult {
  bool completed = false;
  std::vector<std::uint8_t> received;
  std::size_t most_in_flight = 0;
};

// The client writes `data` and closes; the server reads to the end of the
// stream and closes; both must reach CLOSED.
TransferResult transfer(Loopback& loopback, const std::vector<std::uint8_t>& data) {
  TransferResult result;
  std::size_t written = 0;
  bool client_closed = false;
  bool server_closed = false;
  std::vector<std::uint8_t> buffer(64 * 1024);
  loopback.connect();
  auto application = [&] {
    TcpConnection& client = *loopback.client;
    if (client.state() == TcpState::established && written < data.size()) {
      auto taken = client.send(std::span(data).subspan(written), loopback.now);
      if (taken) written += *taken;
    }
    if (written == data.size() && !client_closed) {
      client.close(loopback.now);
      client_closed = true;
    }
    result.most_in_flight = std::max(result.most_in_flight, client.info().bytes_in_flight);
    // All that is readable: no segment may come to call this again (the
    // last of the data and the FIN may be in already).
    while (loopback.server && loopback.server->readable() && !server_closed) {
      auto got = loopback.server->receive(buffer, loopback.now);
      if (!got) break;
      result.received.insert(result.received.end(), buffer.begin(), buffer.begin() + *got);
      if (*got == 0) {
        loopback.server->close(loopback.now);
        server_closed = true;
      }
    }
    return loopback.server && loopback.client->finished() && loopback.server->finished();
  };
  result.completed = loopback.run_until(application, 3600s);
  return result;
}

TEST(LoopbackTest, BulkTransferOpensTheWindowPast64KiB) {
  Loopback loopback({bulk_config(), bulk_config()});
  const auto data = pattern(2u << 20, 11);
  const TransferResult result = transfer(loopback, data);
  ASSERT_TRUE(result.completed);
  EXPECT_EQ(result.received, data);
  EXPECT_GT(result.most_in_flight, 65535u);  // only possible with window scaling
  EXPECT_EQ(loopback.client->counters().retransmitted_segments, 0u);
  EXPECT_FALSE(loopback.client->error());
  EXPECT_FALSE(loopback.server->error());
  EXPECT_EQ(loopback.server->counters().bytes_in, data.size());
}

TEST(LoopbackTest, FourMebibytesThroughLossAndReorderingAcrossTheSequenceWrap) {
  Loopback::Options options{bulk_config(), bulk_config()};
  options.loss = 0.02;
  options.reorder = 0.02;
  options.seed = 2024;
  options.client_iss = 0xfff00000;  // 1 MiB before 2^32: the transfer wraps
  options.server_iss = 0xffffffff;
  Loopback loopback(options);
  const auto data = pattern(4u << 20, 12);
  const TransferResult result = transfer(loopback, data);
  ASSERT_TRUE(result.completed);
  EXPECT_EQ(result.received.size(), data.size());
  EXPECT_TRUE(result.received == data);
  EXPECT_GT(loopback.dropped, 0u);
  EXPECT_GT(loopback.reordered, 0u);
  const TcpCounters& client = loopback.client->counters();
  EXPECT_GT(client.retransmitted_segments, 0u);
  EXPECT_GT(client.fast_retransmits, 0u);
  EXPECT_GT(loopback.server->counters().out_of_order_segments, 0u);
  EXPECT_FALSE(loopback.client->error());
  EXPECT_FALSE(loopback.server->error());
}

TEST(LoopbackTest, WithoutOptionsNagleOrDelayedAck) {
  TcpConfig config = plain_config();
  config.nodelay = true;
  config.delayed_ack = false;
  config.time_wait = 1s;
  Loopback::Options options{config, config};
  options.loss = 0.05;
  options.seed = 3;
  Loopback loopback(options);
  const auto data = pattern(300000, 13);
  const TransferResult result = transfer(loopback, data);
  ASSERT_TRUE(result.completed);
  EXPECT_TRUE(result.received == data);
}

TEST(LoopbackTest, SlowReaderClosesTheWindowAndReopensIt) {
  TcpConfig server = bulk_config();
  server.receive_buffer = 8000;
  Loopback loopback({bulk_config(), server});
  loopback.connect();
  const auto data = pattern(100000, 14);
  std::size_t written = 0;
  std::vector<std::uint8_t> received;
  std::vector<std::uint8_t> buffer(1000);
  Instant next_read = loopback.now + 1s;  // the reader starts late: the window closes
  loopback.application_wakeup = next_read;
  bool saw_zero_window = false;
  const bool done = loopback.run_until([&] {
    TcpConnection& client = *loopback.client;
    if (client.state() == TcpState::established && written < data.size()) {
      if (auto taken = client.send(std::span(data).subspan(written), loopback.now)) written += *taken;
    }
    if (client.was_established() && client.info().send_window == 0) saw_zero_window = true;
    // Then it takes 1000 bytes every 20 ms.
    if (loopback.server && loopback.now >= next_read) {
      if (auto got = loopback.server->receive(buffer, loopback.now)) {
        received.insert(received.end(), buffer.begin(), buffer.begin() + *got);
      }
      next_read = loopback.now + 20ms;
      loopback.application_wakeup = next_read;
    }
    return received.size() == data.size();
  });
  ASSERT_TRUE(done);
  EXPECT_EQ(received, data);
  EXPECT_TRUE(saw_zero_window);
  EXPECT_GT(loopback.client->counters().zero_window_probes, 0u);
  EXPECT_FALSE(loopback.client->error());
}

// NewReno's `recover` (RFC 6582) and Nagle's mark (the end of the last
// short segment) are sequence numbers compared with SND.UNA modulo 2^32. Left
// where they were while more than 2 GiB went by in full segments without a
// loss, they read as ahead of SND.UNA: a loss then waited for the
// retransmission timer instead of the third duplicate ACK, and a short
// write for the persist timer instead of going at once.
TEST(LoopbackTest, FastRetransmitAndNagleStillWorkAfterTwoGibibytesWithoutALoss) {
  constexpr std::uint32_t mss = 60000;
  TcpConfig config = bulk_config();
  config.congestion_control = "newreno";
  config.sack = false;
  config.timestamps = false;  // each segment carries the whole MSS
  config.max_segment_size = mss;
  config.send_buffer = config.receive_buffer = 64 * mss;
  bool drop_next = false;
  Loopback::Options options{config, config};
  options.drop = [&](int to, const TcpHeader&, std::span<const std::uint8_t> payload) {
    if (to != 1 || payload.empty() || !drop_next) return false;
    drop_next = false;
    return true;
  };
  Loopback loopback(options);
  loopback.connect();
  ASSERT_TRUE(loopback.run_until([&] { return loopback.server && loopback.server->state() == TcpState::established; }));
  TcpConnection& client = *loopback.client;
  TcpConnection& server = *loopback.server;
  const std::vector<std::uint8_t> segment(mss, 0x5a);
  std::vector<std::uint8_t> sink(64 * mss);
  const auto taken = [](const Result<std::size_t>& result) { return result ? *result : 0; };
  // Writes `bytes` in whole segments (none short) and runs until all is acknowledged.
  const auto move = [&](std::uint64_t bytes) {
    std::uint64_t written = 0;
    return loopback.run_until([&] {
      while (written < bytes && taken(client.send(segment, loopback.now)) == mss) written += mss;
      while (server.readable() && taken(server.receive(sink, loopback.now)) > 0) {
      }
      return written >= bytes && !client.has_unsent() && client.all_acknowledged();
    });
  };
  ASSERT_TRUE(move((1ull << 31) + 64 * mss));
  ASSERT_EQ(client.counters().retransmitted_segments, 0u);
  ASSERT_EQ(client.counters().segments_out, client.counters().bytes_out / mss + 2);  // the SYN, the handshake's ACK

  // A short write goes at once: no short segment is unacknowledged.
  const std::vector<std::uint8_t> small(100, 1);
  ASSERT_EQ(taken(client.send(small, loopback.now)), small.size());
  EXPECT_FALSE(client.has_unsent());
  ASSERT_TRUE(move(0));

  // A lost segment is repaired by fast retransmit, not by the timer.
  drop_next = true;
  ASSERT_TRUE(move(16 * mss));
  EXPECT_EQ(client.counters().fast_retransmits, 1u);
  EXPECT_EQ(client.counters().timeouts, 0u);
}

}  // namespace
}  // namespace utcp::testing
