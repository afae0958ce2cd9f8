// The shm link's rings, between two links in this process over memory of the
// test's own: which frames travel inside their cell and which through the data ring.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "providers/shm/shm_link.hpp"

namespace {

namespace shm = via::shm;

// One VI slot's rings (what a peer's segment holds for us), in aligned memory of the test's.
struct TestRing {
  explicit TestRing(shm::RingGeometry g) : geometry(g) {
    memory = static_cast<std::byte*>(std::aligned_alloc(shm::kCellBytes, g.slot_bytes()));
    std::memset(memory, 0, g.slot_bytes());
    auto* cells = reinterpret_cast<shm::Cell*>(memory + sizeof(shm::ViSlot));
    ring = shm::Ring{reinterpret_cast<shm::ViSlot*>(memory), cells, reinterpret_cast<std::byte*>(cells + g.cells), g};
    shm::reset_rings(ring);
  }
  ~TestRing() { std::free(memory); }
  bool in_cells(const std::byte* p) const {
    return p >= reinterpret_cast<const std::byte*>(ring.cells) && p < ring.data;
  }
  shm::RingGeometry geometry;
  std::byte* memory;
  shm::Ring ring;
};

// The sender writes into `to`; the receiver reads it. Each link's peer
// segment is only woken (nobody sleeps), so a zeroed header serves.
class ShmLinkPair : public ::testing::Test {
 protected:
  ShmLinkPair()
      : to_(kGeometry),
        back_(kGeometry),
        self_(quiet_segment()),
        sender_(*self_, back_.ring, quiet_segment(), to_.ring, false),
        receiver_(*self_, to_.ring, quiet_segment(), back_.ring, false) {}

  static std::shared_ptr<shm::Segment> quiet_segment() {
    auto* s = static_cast<shm::Segment*>(std::aligned_alloc(alignof(shm::Segment), sizeof(shm::Segment)));
    std::memset(static_cast<void*>(s), 0, sizeof(shm::Segment));
    return std::shared_ptr<shm::Segment>(s, [](shm::Segment* p) { std::free(p); });
  }

  // Sends a frame of `bytes` payload and returns where the receiver finds it.
  const std::byte* send_and_peek(std::size_t bytes) {
    std::vector<std::byte> payload(bytes);
    for (std::size_t i = 0; i < bytes; ++i) payload[i] = std::byte(i * 7 + 1);
    const via::FrameHeader h{via::kFrameSend, via::kFlagLast, 0, std::uint32_t(bytes), bytes, 0, 0, 0, 0};
    const iovec iov{payload.data(), bytes};
    EXPECT_TRUE(sender_.try_send(h, &iov, 1));
    const via::FrameHeader* got = nullptr;
    const std::byte* at = nullptr;
    EXPECT_TRUE(receiver_.peek(got, at));
    EXPECT_EQ(got->length, bytes);
    EXPECT_EQ(std::memcmp(at, payload.data(), bytes), 0);
    return at;
  }

  // Sends a frame of `head` header bytes and a body of `body` bytes, as two
  // pieces (as MPI sends a message); false if the ring had no room. A frame
  // that is not its message's last keeps the full form.
  bool send_pieces(std::size_t head, std::size_t body, unsigned seed, bool last = true) {
    std::vector<std::byte> bytes(head + body);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 13 + seed);
    const via::FrameHeader h{via::kFrameSend, std::uint8_t(last ? via::kFlagLast : 0), 0, std::uint32_t(bytes.size()), bytes.size(), 0, 0, 0, 0};
    const iovec iov[2] = {{bytes.data(), head}, {bytes.data() + head, body}};
    return sender_.try_send(h, iov, 2);
  }
  // The oldest frame not yet popped: where it is, after checking its bytes.
  const std::byte* peek_pieces(std::size_t head, std::size_t body, unsigned seed) {
    const via::FrameHeader* got = nullptr;
    const std::byte* at = nullptr;
    EXPECT_TRUE(receiver_.peek(got, at));
    if (!at) return nullptr;
    EXPECT_EQ(got->length, head + body);
    for (std::size_t i = 0; i < head + body; ++i)
      if (at[i] != std::byte(i * 13 + seed)) {
        ADD_FAILURE() << "byte " << i << " of a frame of " << head << " + " << body;
        break;
      }
    return at;
  }

  static constexpr shm::RingGeometry kGeometry{32, 16 * 1024};
  TestRing to_, back_;
  std::shared_ptr<shm::Segment> self_;
  shm::ShmLink sender_, receiver_;
};

// An eager MPI message of up to 216 bytes (the mesh's 8-byte frame header and
// MPI's 16-byte eager header in front of it) rides in its cell: no data-ring
// bytes to write, read and hand back, the path of the smallest messages.
TEST_F(ShmLinkPair, AnEagerMpiMessageOf216BytesTravelsInItsCell) {
  constexpr std::size_t kMpiFrame = 8 + 16 + 216;
  const std::byte* at = send_and_peek(kMpiFrame);
  EXPECT_TRUE(to_.in_cells(at));
  receiver_.pop();
  EXPECT_EQ(to_.ring->data_consumed.load(), 0u);
  EXPECT_EQ(to_.ring->cells_consumed.load(), 1u);
}

// A whole message in one send frame takes the compact cell: its header folded
// into the cell's first 16 bytes, as the receiver gets it back whole, and an
// 8-byte MPI message (mesh header, MPI's 16-byte eager header, the data)
// within the cell's first cache line.
TEST_F(ShmLinkPair, AWholeMessageTravelsInACompactCellAndItsHeaderComesBackWhole) {
  for (const std::size_t bytes : {std::size_t(8 + 16 + 8), std::size_t(shm::kCompactBytes)}) {
    SCOPED_TRACE(bytes);
    std::vector<std::byte> payload(bytes, std::byte{0x5A});
    const via::FrameHeader h{via::kFrameSend, via::kFlagLast | via::kFlagImmediate, 0xBEEF, std::uint32_t(bytes),
                             bytes, 0, 0, 0, 0xC0FFEE};
    const iovec iov{payload.data(), bytes};
    ASSERT_TRUE(sender_.try_send(h, &iov, 1));
    const via::FrameHeader* got = nullptr;
    const std::byte* at = nullptr;
    ASSERT_TRUE(receiver_.peek(got, at));
    EXPECT_EQ(std::memcmp(got, &h, sizeof h), 0);
    EXPECT_EQ(std::memcmp(at, payload.data(), bytes), 0);
    const auto* cell = reinterpret_cast<const std::byte*>(&to_.ring.cells[std::size_t(to_.ring->cells_consumed.load())]);
    EXPECT_EQ(at - cell, 16);
    receiver_.pop();
    EXPECT_EQ(to_.ring->data_consumed.load(), 0u);
  }
}

// Any other frame keeps its header whole in the full form: a fragment, an
// RDMA write naming its target, a message without its last flag.
TEST_F(ShmLinkPair, OtherFramesKeepTheFullForm) {
  std::vector<std::byte> payload(100, std::byte{1});
  const iovec iov{payload.data(), payload.size()};
  const via::FrameHeader frames[] = {
      {via::kFrameSend, via::kFlagLast, 3, 100, 300, 200, 0, 0, 0},
      {via::kFrameSend, 0, 4, 100, 300, 0, 0, 0, 0},
      {via::kFrameRdmaWrite, via::kFlagLast, 0, 100, 100, 0, 0x1000, 7, 0},
      {via::kFrameSend, via::kFlagLast | via::kFlagNoData, 0, 100, 100, 0, 0, 0, 0},
  };
  for (const via::FrameHeader& h : frames) {
    ASSERT_TRUE(sender_.try_send(h, &iov, 1));
    const via::FrameHeader* got = nullptr;
    const std::byte* at = nullptr;
    ASSERT_TRUE(receiver_.peek(got, at));
    EXPECT_EQ(std::memcmp(got, &h, sizeof h), 0) << "frame type " << int(h.type) << " flags " << int(h.flags);
    EXPECT_EQ(std::memcmp(at, payload.data(), payload.size()), 0);
    receiver_.pop();
  }
}

// A compact cell claiming more bytes than it holds (a peer writing what it
// likes) is handed to the engine as malformed, never read past the cell.
TEST_F(ShmLinkPair, ACompactCellLongerThanItsPayloadIsMalformed) {
  shm::Cell& cell = to_.ring.cells[0];
  cell.form = shm::kCompactForm | (255u << 16);
  cell.seq.store(1, std::memory_order_release);
  const via::FrameHeader* got = nullptr;
  const std::byte* at = nullptr;
  ASSERT_TRUE(receiver_.peek(got, at));
  EXPECT_EQ(got->type, 0);
}

// The word of a VI's shared single-copy reads outlives its connections: read
// numbers go on from where the slot's last connection left them, so that an
// offer of that connection still in its target's ring never names a read
// offered now.
TEST_F(ShmLinkPair, ANewConnectionKeepsTheSlotsReadNumbers) {
  const std::uint64_t word = via::read_claim_word(41, via::kClaimTaken);
  to_.ring->read_claim.store(word);
  const std::uint64_t ring_word = via::ring_claim_word(45, via::kClaimServing, 8192);
  to_.ring->ring_read_claims[5].store(ring_word);
  shm::reset_rings(to_.ring);
  EXPECT_EQ(to_.ring->read_claim.load(), word);
  EXPECT_EQ(to_.ring->ring_read_claims[5].load(), ring_word);
}

// Once the reader closed, its slot may serve another connection: the target
// no longer sees the word, and so serves no offer it finds afterwards.
TEST_F(ShmLinkPair, AClosedPeersOffersAreNotServed) {
  EXPECT_EQ(receiver_.peer_read_claim(), &back_.ring->read_claim);
  EXPECT_EQ(receiver_.peer_ring_read_claims().data(), &back_.ring->ring_read_claims[0]);
  sender_.close(false);
  EXPECT_EQ(receiver_.peer_read_claim(), nullptr);
  EXPECT_TRUE(receiver_.peer_ring_read_claims().empty());
}

// A frame the link says it has room for is taken, whatever room the data
// ring's tail leaves: a target commits a part of a read in its word
// (frame.hpp: kFlagWithdrawable) before it sends the part, and a committed
// part must go. Data ring of 16 KiB: payloads of 6000 bytes fit twice, and
// then once more for each one popped, at the ring's start or after the tail.
TEST_F(ShmLinkPair, AFrameThereIsRoomForIsTaken) {
  constexpr std::size_t kBytes = 6000;
  unsigned sent = 0, popped = 0;
  for (int round = 0; round < 12; ++round) {
    while (sender_.has_room_for(kBytes)) {
      ASSERT_TRUE(send_pieces(0, kBytes, sent)) << "frame " << sent;
      ++sent;
    }
    EXPECT_FALSE(send_pieces(0, kBytes, 0)) << "the link had said there was no room";
    ASSERT_NE(peek_pieces(0, kBytes, popped++), nullptr);
    receiver_.pop();
  }
  EXPECT_GE(sent, 13u);
}

// The promise counts the tail a payload skips: two of 6000 bytes in the
// 16 KiB data ring, the first taken back; 8000 more would fit the bytes
// free (10384) but not contiguously (4384 left at the tail, 6000 at the start).
TEST_F(ShmLinkPair, TheRoomPromisedCountsTheTailAPayloadSkips) {
  ASSERT_TRUE(send_pieces(0, 6000, 1));
  ASSERT_TRUE(send_pieces(0, 6000, 2));
  ASSERT_NE(peek_pieces(0, 6000, 1), nullptr);
  receiver_.pop();
  EXPECT_FALSE(sender_.has_room_for(8000));
  EXPECT_TRUE(sender_.has_room_for(4000));
}

// A frame larger than a cell holds goes through the data ring, whose bytes
// the receiver hands back when it pops the frame.
TEST_F(ShmLinkPair, ALargerFrameGoesThroughTheDataRing) {
  const std::byte* at = send_and_peek(shm::kCompactBytes + 1);
  EXPECT_FALSE(to_.in_cells(at));
  receiver_.pop();
  EXPECT_EQ(to_.ring->data_consumed.load(), shm::kCompactBytes + 1);
  EXPECT_TRUE(to_.in_cells(send_and_peek(shm::kCompactBytes)));
}

// Frames of every size up to the largest (half the data ring), with the
// receiver behind by up to all the ring holds, keep flowing through the
// ring's wrap, wherever in the ring the frame before ended: whenever the ring
// is empty again, the next frame fits.
TEST_F(ShmLinkPair, FramesOfEverySizeKeepFlowingThroughTheWrap) {
  const std::size_t max_frame = kGeometry.max_frame_payload();
  constexpr std::size_t kHeaders = 56;
  std::vector<std::pair<std::size_t, unsigned>> in_flight;  // body, seed
  std::uint32_t x = 12345;
  for (unsigned seed = 1; seed <= 4000; ++seed) {
    x = x * 1664525u + 1013904223u;
    // Every other frame of the largest sizes, the rest of any size the data ring takes.
    const std::size_t frame = (x >> 31) ? max_frame - (x >> 8) % 64 : shm::kInlineBytes + 1 + (x >> 8) % (max_frame - shm::kInlineBytes);
    const std::size_t body = frame - kHeaders;
    while (!send_pieces(kHeaders, body, seed)) {
      ASSERT_FALSE(in_flight.empty()) << "a frame of " << frame << " bytes does not fit an empty ring";
      ASSERT_NE(peek_pieces(kHeaders, in_flight.front().first, in_flight.front().second), nullptr);
      receiver_.pop();
      in_flight.erase(in_flight.begin());
    }
    in_flight.emplace_back(body, seed);
  }
  for (const auto& [body, s] : in_flight) {
    ASSERT_NE(peek_pieces(kHeaders, body, s), nullptr);
    receiver_.pop();
  }
}

// Frames that fit their cell, sent in bursts (every send after the first of
// a burst fetches the cell after next for writing; after each burst the
// sender takes a frame coming back, as in a ping-pong, and the next burst's
// first send fetches nothing), with the receiver taking a few at a time and
// behind by up to the whole ring, arrive whole and in order, compact and full
// forms alike.
TEST_F(ShmLinkPair, InCellFramesSentInBurstsArriveWholeAndInOrder) {
  constexpr std::size_t kHead = 16;
  std::vector<std::pair<std::size_t, unsigned>> in_flight;  // body, seed
  std::uint32_t x = 777;
  auto take = [&](std::size_t n) {
    for (; n && !in_flight.empty(); --n) {
      ASSERT_NE(peek_pieces(kHead, in_flight.front().first, in_flight.front().second), nullptr);
      receiver_.pop();
      in_flight.erase(in_flight.begin());
    }
  };
  unsigned seed = 0;
  for (int burst = 0; burst < 400; ++burst) {
    x = x * 1664525u + 1013904223u;
    for (std::size_t n = 1 + (x >> 8) % (2 * kGeometry.cells); n; --n) {
      x = x * 1664525u + 1013904223u;
      // Compact (a whole message) or full (a message's first frame), in the cell.
      const bool last = burst % 2;
      const std::size_t body = (x >> 8) % ((last ? shm::kCompactBytes : shm::kInlineBytes) - kHead + 1);
      ++seed;
      while (!send_pieces(kHead, body, seed, last)) {
        ASSERT_EQ(in_flight.size(), kGeometry.cells) << "refused with room in the ring";
        ASSERT_NO_FATAL_FAILURE(take(1 + (x >> 20) % 8));
      }
      in_flight.emplace_back(body, seed);
    }
    ASSERT_NO_FATAL_FAILURE(take((x >> 12) % (kGeometry.cells + 1)));
    // A frame back, taken by the sender.
    const std::byte answer[8] = {};
    const iovec iov{const_cast<std::byte*>(answer), sizeof answer};
    ASSERT_TRUE(receiver_.try_send(via::FrameHeader{via::kFrameSend, via::kFlagLast, 0, 8, 8, 0, 0, 0, 0}, &iov, 1));
    const via::FrameHeader* got = nullptr;
    const std::byte* at = nullptr;
    ASSERT_TRUE(sender_.peek(got, at));
    EXPECT_EQ(got->length, 8u);
    sender_.pop();
  }
  ASSERT_NO_FATAL_FAILURE(take(in_flight.size()));
  EXPECT_TRUE(in_flight.empty());
}

}  // namespace
