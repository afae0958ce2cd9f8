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

}  // namespace
}  // namespace utcp::testing
