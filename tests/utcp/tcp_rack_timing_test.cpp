// RACK (RFC 8985) on the stack's clock: a host on real time gives the stack
// its clock, read for each packet a poll takes in, so that the ACK of a
// segment sent early in a batch and read late in it measures the time
// between. Timed by the poll's start instead, its round trip came out as
// zero: RACK's minimum RTT, and the reordering window (a quarter of it) with
// it, fell to nothing, and segments overtaken by a few microseconds were
// retransmitted (tens of thousands a 100 MB transfer through benchmarks/
// impairment.sh, most of them spurious).
#include <set>

#include "peer_harness.hpp"

namespace utcp::testing {
namespace {

using wire::TcpHeader;

std::vector<std::uint8_t> pattern(std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + 3);
  return bytes;
}

class RackTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness.clock_per_packet();
    peer.sack = true;
    socket = open_from_peer(harness, listener, peer, kSegment, false, std::nullopt);
    ASSERT_TRUE(socket);
    first_byte = peer.stack_next;
  }

  static StackConfig newreno() {
    StackConfig config = stack_config();
    config.tcp.congestion_control = "newreno";  // unpaced: a window goes at once
    return config;
  }

  // The peer acknowledges [0, ack) of the stack's data (offsets from its
  // first byte) and SACKs `block`, if any, arriving at the harness's now.
  void acknowledge(std::uint32_t ack, std::optional<std::pair<std::uint32_t, std::uint32_t>> block = std::nullopt) {
    TcpHeader header = segment_to(peer.port, listen_port, peer.send_next, first_byte + ack, flag::ack);
    if (block)
      header.options.sack_blocks[header.options.sack_block_count++] =
          wire::SackBlock{wire::SeqNumber(first_byte + block->first), wire::SeqNumber(first_byte + block->second)};
    harness.inject_tcp(header, {}, peer.address);
  }

  // The offsets of the data segments sent since the last call: new ones and
  // ones sent again.
  struct Sent {
    std::set<std::uint32_t> fresh, again;
  };
  Sent sent() {
    Sent result;
    for (const SegmentOut& segment : harness.take_segments()) {
      if (segment.payload.empty()) continue;
      const std::uint32_t offset = segment.header.sequence.value() - first_byte;
      (offset < highest_sent ? result.again : result.fresh).insert(offset);
      highest_sent = std::max<std::uint32_t>(highest_sent, offset + static_cast<std::uint32_t>(segment.payload.size()));
    }
    return result;
  }

  static constexpr std::uint16_t kSegment = 1000;
  PeerHarness harness{newreno()};
  TcpListener listener = listening(harness.stack());
  PeerConnection peer{harness, 40000};
  std::optional<TcpSocket> socket;
  std::uint32_t first_byte = 0;
  std::uint32_t highest_sent = 0;
};

// The initial window (ten segments) is acknowledged after 2 ms; that ACK
// begins a batch and lets eleven segments go at once. Later in the same
// batch, 0.5 ms on, the last of them is SACKed: it overtook the ten before
// it, which are acknowledged 50 us after. A round trip of 0.5 ms gives a
// reordering window of 125 us: nothing is lost. Timed by the batch's start,
// the round trip was zero and the ten were retransmitted at once.
TEST_F(RackTimingTest, ASegmentSackedLateInTheBatchItWasSentInDoesNotMakeTheOnesBeforeItLost) {
  const auto queued = socket->send(pattern(40 * kSegment));
  ASSERT_TRUE(queued);
  ASSERT_EQ(*queued, 40u * kSegment);
  harness.poll();
  ASSERT_EQ(sent().fresh.size(), 10u);

  const Instant batch_start = harness.now + std::chrono::milliseconds(2);
  harness.now = batch_start;
  acknowledge(10 * kSegment);
  harness.now = batch_start + std::chrono::microseconds(500);
  acknowledge(10 * kSegment, std::pair{20u * kSegment, 21u * kSegment});
  harness.poll_once_at(batch_start);
  const Sent in_the_batch = sent();
  EXPECT_EQ(in_the_batch.again, std::set<std::uint32_t>{});
  // Slow start: the window grew by one segment; the SACK let one more go.
  ASSERT_EQ(in_the_batch.fresh.size(), 12u);

  harness.now = batch_start + std::chrono::microseconds(550);
  acknowledge(21 * kSegment);
  harness.run_for(std::chrono::milliseconds(1));  // past the reordering window; short of a probe timeout
  EXPECT_TRUE(sent().again.empty());
  EXPECT_EQ(socket->counters()->retransmitted_segments, 0u);
}

}  // namespace
}  // namespace utcp::testing
