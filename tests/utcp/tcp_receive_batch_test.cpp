// utcp as a receiver of segments that its link delivers in batches, packet
// by packet on virtual time. A stack that falls behind finds many segments
// queued on its device at each poll; it acknowledges them as Linux does
// with GRO and SACK compression (tcp_comp_sack_nr): the ACKs that may wait
// share one at the end of the batch, while the first three duplicate ACKs
// for a hole still go at once (the sender's DupThresh), and so does every
// duplicate ACK to a peer without SACK, which counts them. Before, each
// segment out of order got its own ACK: under 1 % loss ~90 % of a fast
// transfer arrives out of order, so the receiver wrote an ACK per segment,
// each a system call and a forwarding hop (issue 23's impairment benchmark).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "peer_harness.hpp"

namespace utcp::testing {
namespace {

class ReceiveBatchTest : public ::testing::Test {
 protected:
  // The peer announces `mss` and sends segments of that size.
  void open(bool sack, std::uint16_t mss = 1460) {
    peer.sack = sack;
    segment_size = mss;
    socket = open_from_peer(harness, listener, peer, mss, false);
    ASSERT_TRUE(socket);
    harness.take_segments();
  }

  // The peer's segment number `index` of the stream, queued on the link.
  void queue_segment(std::uint32_t index) {
    const std::vector<std::uint8_t> payload(segment_size, static_cast<std::uint8_t>(index));
    peer.send_data(stream_at(index), payload);
  }

  std::vector<SegmentOut> acks() {
    std::vector<SegmentOut> acks;
    for (SegmentOut& segment : harness.take_segments())
      if (segment.header.flags == flag::ack && segment.payload.empty()) acks.push_back(std::move(segment));
    return acks;
  }

  std::uint32_t stream_at(std::uint32_t index) const { return peer_iss + 1 + index * segment_size; }

  PeerHarness harness;
  TcpListener listener = listening(harness.stack());
  PeerConnection peer{harness, 40000};
  std::optional<TcpSocket> socket;
  std::uint16_t segment_size = 0;
};

TEST_F(ReceiveBatchTest, OutOfOrderSegmentsReadInOneBatchShareAnAckAfterTheFirstThree) {
  open(true);
  for (std::uint32_t index = 1; index <= 20; ++index) queue_segment(index);  // segment 0 lost
  harness.poll();
  const std::vector<SegmentOut> sent = acks();
  ASSERT_EQ(sent.size(), 4u);  // three duplicate ACKs at once, one for the rest of the batch
  for (const SegmentOut& ack : sent) EXPECT_EQ(ack.header.acknowledgment.value(), stream_at(0));
  const auto blocks = sent.back().header.options.sack();
  ASSERT_FALSE(blocks.empty());
  EXPECT_EQ(blocks[0].left.value(), stream_at(1));
  EXPECT_EQ(blocks[0].right.value(), stream_at(21));
  // The hole fills: one ACK covers it all.
  queue_segment(0);
  harness.poll();
  const std::vector<SegmentOut> after = acks();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].header.acknowledgment.value(), stream_at(21));
}

TEST_F(ReceiveBatchTest, ANewHoleGetsItsThreeDuplicateAcksAtOnceAgain) {
  open(true);
  for (std::uint32_t index = 1; index <= 10; ++index) queue_segment(index);
  harness.poll();
  EXPECT_EQ(acks().size(), 4u);
  // Segment 0 comes, 11 is lost: the hole at 11 is new.
  queue_segment(0);
  for (std::uint32_t index = 12; index <= 20; ++index) queue_segment(index);
  harness.poll();
  const std::vector<SegmentOut> sent = acks();
  ASSERT_EQ(sent.size(), 4u);
  for (const SegmentOut& ack : sent) EXPECT_EQ(ack.header.acknowledgment.value(), stream_at(11));
}

TEST_F(ReceiveBatchTest, WithoutSackEveryOutOfOrderSegmentGetsItsDuplicateAck) {
  open(false);
  for (std::uint32_t index = 1; index <= 20; ++index) queue_segment(index);
  harness.poll();
  EXPECT_EQ(acks().size(), 20u);
}

TEST_F(ReceiveBatchTest, InOrderSegmentsReadInOneBatchShareAnAck) {
  open(true);
  for (std::uint32_t index = 0; index < 20; ++index) queue_segment(index);
  harness.poll();
  const std::vector<SegmentOut> sent = acks();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].header.acknowledgment.value(), stream_at(20));
}

// A batch acknowledges at least every 44 segments (Linux's tcp_comp_sack_nr),
// as GRO's 64 KiB do: a long batch is no single stretch ACK. (Small
// segments: 100 fit in the first window, which the SYN-ACK leaves unscaled.)
TEST_F(ReceiveBatchTest, ALongBatchIsAcknowledgedAtLeastEvery44Segments) {
  open(true, 500);
  for (std::uint32_t index = 0; index < 100; ++index) queue_segment(index);
  harness.poll();
  const std::vector<SegmentOut> sent = acks();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].header.acknowledgment.value(), stream_at(45));
  EXPECT_EQ(sent[1].header.acknowledgment.value(), stream_at(90));
  EXPECT_EQ(sent[2].header.acknowledgment.value(), stream_at(100));
}

TEST_F(ReceiveBatchTest, SegmentsPolledOneByOneGetAnAckEverySecondSegment) {
  open(true);
  for (std::uint32_t index = 0; index < 20; ++index) {
    queue_segment(index);
    harness.poll();
  }
  EXPECT_EQ(acks().size(), 10u);
}

}  // namespace
}  // namespace utcp::testing
