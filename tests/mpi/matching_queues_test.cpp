// The matching queues, without processes: per-sender order, wildcards, the
// earliest arrival for MPI_ANY_SOURCE (unexpected messages), the earliest
// posted of named and wildcard receives (posted receives), and that one
// sender's backlog is not in the way of another sender's.
#include "posted_queue.hpp"
#include "unexpected_queue.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <deque>
#include <string>

namespace viastack::mpi {

// A request gives its Fortran index back when it goes (fortran_handles.cpp,
// not linked here); none of these ever gets one.
void release_fortran_index(HandleKind, int) {}

namespace {

constexpr std::uint32_t kContext = 4, kOtherContext = 5;
constexpr int kRanks = 4;

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

void add(UnexpectedQueue& q, int source, int tag, const std::string& text, std::uint32_t context = kContext) {
  Incoming& in = q.append(source, bytes_of(text));
  in.context = context;
  in.tag = tag;
  in.size = text.size();
}

std::string text_of(const Incoming& in) { return std::string(reinterpret_cast<const char*>(in.data.data()), in.size); }

// Takes the message a receive of (source, tag) matches; "" when none does.
std::string take(UnexpectedQueue& q, int source, int tag, std::uint32_t context = kContext) {
  const auto at = q.find(source, tag, context);
  return at ? text_of(q.take(*at)) : "";
}

TEST(UnexpectedQueue, EachSendersMessagesInTheirOrder) {
  UnexpectedQueue q(kRanks);
  EXPECT_TRUE(q.empty());
  add(q, 1, 7, "a1");
  add(q, 2, 7, "b1");
  add(q, 1, 7, "a2");
  add(q, 2, 7, "b2");
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(take(q, 2, 7), "b1");
  EXPECT_EQ(take(q, 1, 7), "a1");
  EXPECT_EQ(take(q, 2, 7), "b2");
  EXPECT_EQ(take(q, 1, 7), "a2");
  EXPECT_EQ(take(q, 1, 7), "");
  EXPECT_TRUE(q.empty());
}

TEST(UnexpectedQueue, AnySourceTakesTheEarliestArrivalThatMatches) {
  UnexpectedQueue q(kRanks);
  add(q, 3, 1, "c-tag1");
  add(q, 1, 2, "a-tag2");
  add(q, 2, 2, "b-tag2");
  add(q, 3, 2, "c-tag2");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 2), "a-tag2");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 2), "b-tag2");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, MPI_ANY_TAG), "c-tag1");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, MPI_ANY_TAG), "c-tag2");
  EXPECT_TRUE(q.empty());
}

TEST(UnexpectedQueue, ATagOrContextThatDiffersIsPassedOver) {
  UnexpectedQueue q(kRanks);
  add(q, 1, 5, "other-context", kOtherContext);
  add(q, 1, 6, "tag6");
  add(q, 1, 5, "tag5");
  EXPECT_EQ(take(q, 1, 5), "tag5");
  EXPECT_EQ(take(q, 1, MPI_ANY_TAG), "tag6");
  EXPECT_EQ(take(q, 1, MPI_ANY_TAG), "");
  EXPECT_EQ(take(q, 1, MPI_ANY_TAG, kOtherContext), "other-context");
}

TEST(UnexpectedQueue, ASourceNeverSeenMatchesNothing) {
  UnexpectedQueue q(kRanks);
  add(q, 1, 0, "x");
  EXPECT_FALSE(q.find(2, 0, kContext));
  EXPECT_FALSE(q.find(9, 0, kContext));
  EXPECT_FALSE(q.find(1, 0, kOtherContext));
  EXPECT_TRUE(q.find(1, 0, kContext));
}

TEST(UnexpectedQueue, ABacklogOfOneSenderIsNotInTheWayOfAnother) {
  UnexpectedQueue q(kRanks);
  for (int i = 0; i < 100000; ++i) add(q, 2, 0, "backlog");
  add(q, 1, 0, "wanted");
  const auto at = q.find(1, 0, kContext);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->entry, at->sender->messages.begin());  // the head of sender 1's own messages
  EXPECT_EQ(text_of(*at->entry), "wanted");
}

TEST(UnexpectedQueue, ARecycledEntryComesBackEmptyWithItsNewContents) {
  UnexpectedQueue q(kRanks);
  add(q, 1, 3, "a long first message");
  Incoming& first = *q.find(1, 3, kContext)->entry;
  first.rendezvous = true;
  first.token = 99;
  q.recycle(*q.find(1, 3, kContext));
  EXPECT_TRUE(q.empty());
  add(q, 2, 4, "short");
  const auto at = q.find(MPI_ANY_SOURCE, MPI_ANY_TAG, kContext);
  ASSERT_TRUE(at);
  EXPECT_EQ(text_of(*at->entry), "short");
  EXPECT_EQ(at->entry->source, 2);
  EXPECT_FALSE(at->entry->rendezvous);
  EXPECT_EQ(at->entry->token, 0u);
}

TEST(UnexpectedQueue, FindIfLooksAtEverySender) {
  UnexpectedQueue q(kRanks);
  add(q, 1, 0, "a");
  add(q, 2, 0, "b");
  q.find(2, 0, kContext)->entry->token = 42;
  const auto at = q.find_if([](const Incoming& in) { return in.token == 42; });
  ASSERT_TRUE(at);
  EXPECT_EQ(text_of(q.take(*at)), "b");
  EXPECT_FALSE(q.find_if([](const Incoming& in) { return in.token == 42; }));
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 0), "a");
}

TEST(UnexpectedQueue, ASourcePastTheRanksIsKeptWhileItHasMessages) {
  UnexpectedQueue q(kRanks);
  add(q, 100, 0, "intercommunicator rank 100");
  add(q, -7, 0, "off the wire");
  add(q, 1, 0, "rank 1");
  EXPECT_EQ(take(q, 100, 0), "intercommunicator rank 100");
  EXPECT_EQ(take(q, 100, 0), "");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 0), "off the wire");  // it arrived before rank 1's
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 0), "rank 1");
  EXPECT_TRUE(q.empty());
  add(q, 100, 0, "again");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, MPI_ANY_TAG), "again");
}

TEST(UnexpectedQueue, SendersThatEmptyInAnyOrderLeaveTheOthersFound) {
  UnexpectedQueue q(kRanks);
  for (int r = 0; r < kRanks; ++r) add(q, r, 0, "m" + std::to_string(r));
  EXPECT_EQ(take(q, 1, 0), "m1");
  EXPECT_EQ(take(q, 3, 0), "m3");
  add(q, 1, 0, "m1b");
  EXPECT_EQ(take(q, 0, 0), "m0");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 0), "m2");
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 0), "m1b");
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, MPI_ANY_TAG), "");
}

// ---- posted receives

struct Receive {
  Request request{Request::Type::recv, nullptr};
  Receive(int source, int tag, std::uint32_t context = kContext) {
    request.source = source;
    request.tag = tag;
    request.context = context;
  }
};

TEST(PostedQueue, AMessageTakesTheEarliestPostedOfNamedAndWildcardReceives) {
  PostedQueue q(kRanks);
  Receive wild1(MPI_ANY_SOURCE, 5), named1(1, 5), wild_any_tag(MPI_ANY_SOURCE, MPI_ANY_TAG), named2(1, 5);
  for (Receive* r : {&wild1, &named1, &wild_any_tag, &named2}) q.append(r->request);
  EXPECT_EQ(q.match(kContext, 1, 5), &wild1.request);
  EXPECT_EQ(q.match(kContext, 1, 5), &named1.request);
  EXPECT_EQ(q.match(kContext, 1, 5), &wild_any_tag.request);
  EXPECT_EQ(q.match(kContext, 1, 5), &named2.request);
  EXPECT_EQ(q.match(kContext, 1, 5), nullptr);
}

TEST(PostedQueue, TagsContextsAndSendersThatDifferArePassedOver) {
  PostedQueue q(kRanks);
  Receive other_context(2, 5, kOtherContext), other_tag(2, 6), other_sender(3, 5), wanted(2, 5);
  for (Receive* r : {&other_context, &other_tag, &other_sender, &wanted}) q.append(r->request);
  EXPECT_EQ(q.match(kContext, 2, 5), &wanted.request);
  EXPECT_EQ(q.match(kContext, 2, 5), nullptr);
  EXPECT_EQ(q.match(kOtherContext, 2, 5), &other_context.request);
}

TEST(PostedQueue, ASourceOffTheWireMatchesOnlyWildcards) {
  PostedQueue q(kRanks);
  Receive named(1, 0), wild(MPI_ANY_SOURCE, 0);
  q.append(named.request);
  q.append(wild.request);
  EXPECT_EQ(q.match(kContext, -7, 0), &wild.request);
  EXPECT_EQ(q.match(kContext, 1 << 30, 0), nullptr);
  EXPECT_EQ(q.match(kContext, 1, 0), &named.request);
}

TEST(PostedQueue, HoldsAReceiveUntilMatchedOrRemoved) {
  PostedQueue q(kRanks);
  Receive first(1, 0), middle(1, 0), last(1, 0), never(1, 0), wild(MPI_ANY_SOURCE, 0), far(40, 0);
  for (Receive* r : {&first, &middle, &last, &wild, &far}) q.append(r->request);
  for (Receive* r : {&first, &middle, &last, &wild, &far}) EXPECT_TRUE(q.holds(r->request));
  EXPECT_FALSE(q.holds(never.request));
  q.remove(middle.request);  // cancelled in the middle of its sender's queue
  EXPECT_FALSE(q.holds(middle.request));
  EXPECT_EQ(q.match(kContext, 1, 0), &first.request);
  EXPECT_FALSE(q.holds(first.request));
  EXPECT_EQ(q.match(kContext, 1, 0), &last.request);
  // A rank past MPI_COMM_WORLD's (an intercommunicator's): the wildcard was posted before its named receive.
  EXPECT_EQ(q.match(kContext, 40, 0), &wild.request);
  EXPECT_EQ(q.match(kContext, 40, 0), &far.request);
  EXPECT_EQ(q.match(kContext, 1, 0), nullptr);
}

TEST(PostedQueue, ASendersDeepQueueIsNotInTheWayOfAnother) {
  PostedQueue q(kRanks);
  std::deque<Receive> deep;  // requests do not move
  for (int i = 0; i < 100000; ++i) q.append(deep.emplace_back(2, 0).request);
  Receive wanted(1, 0);
  q.append(wanted.request);
  EXPECT_EQ(q.match(kContext, 1, 0), &wanted.request);
  EXPECT_EQ(q.match(kContext, 2, 0), &deep.front().request);
}

}  // namespace
}  // namespace viastack::mpi
