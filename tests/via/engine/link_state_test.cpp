// What the engine reads of a link's peer: a peer that sends its last frames
// and then closes or exits must have those frames taken before the close is
// acted on, however the two interleave with the engine's look.
#include <gtest/gtest.h>

#include "providers/provider.hpp"

namespace {

using PeerState = via::Link::PeerState;

// A link whose peer sends one last frame and then goes (closes, fails or
// exits) at the moment the engine first asks for its state: the interleaving
// in which a look for frames made before that question finds none.
class PeerGoingAwayLink final : public via::Link {
 public:
  explicit PeerGoingAwayLink(PeerState gone) : gone_(gone) {}
  const char* transport() const override { return "going away"; }
  std::size_t max_payload() const override { return 1024; }
  bool try_send(const via::FrameHeader&, const iovec*, std::size_t) override { return false; }
  bool peek(const via::FrameHeader*& header, const std::byte*& payload) override {
    if (!frame_waiting_) return false;
    header = &last_frame_;
    payload = nullptr;
    return true;
  }
  void pop() override { frame_waiting_ = false; }
  PeerState peer_state() override {
    if (!peer_went_) {
      peer_went_ = true;
      frame_waiting_ = true;  // the peer's last frame lands, and then it goes
    }
    return gone_;
  }
  void close(bool) override {}

 private:
  PeerState gone_;
  bool peer_went_ = false, frame_waiting_ = false;
  via::FrameHeader last_frame_{};
};

TEST(LinkPeerState, AFrameSentJustBeforeThePeerWentIsTakenBeforeItsGoing) {
  for (PeerState gone : {PeerState::closed, PeerState::failed, PeerState::dead, PeerState::broken}) {
    PeerGoingAwayLink link(gone);
    EXPECT_EQ(link.peer_state_after_frames(), PeerState::up) << "the last frame is still to be taken";
    const via::FrameHeader* header;
    const std::byte* payload;
    ASSERT_TRUE(link.peek(header, payload));
    link.pop();
    EXPECT_EQ(link.peer_state_after_frames(), gone) << "every frame taken";
  }
}

TEST(LinkPeerState, APeerThatIsUpIsUp) {
  PeerGoingAwayLink link(PeerState::up);
  EXPECT_EQ(link.peer_state_after_frames(), PeerState::up);
}

}  // namespace
