// The unexpected queue's matching, without processes: per-sender order,
// wildcards, the earliest arrival for MPI_ANY_SOURCE, and that a sender's
// backlog is not in the way of another sender's messages.
#include "unexpected_queue.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>

namespace viastack::mpi {
namespace {

constexpr std::uint32_t kContext = 4, kOtherContext = 5;

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
  UnexpectedQueue q;
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
  UnexpectedQueue q;
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
  UnexpectedQueue q;
  add(q, 1, 5, "other-context", kOtherContext);
  add(q, 1, 6, "tag6");
  add(q, 1, 5, "tag5");
  EXPECT_EQ(take(q, 1, 5), "tag5");
  EXPECT_EQ(take(q, 1, MPI_ANY_TAG), "tag6");
  EXPECT_EQ(take(q, 1, MPI_ANY_TAG), "");
  EXPECT_EQ(take(q, 1, MPI_ANY_TAG, kOtherContext), "other-context");
}

TEST(UnexpectedQueue, ASourceNeverSeenMatchesNothing) {
  UnexpectedQueue q;
  add(q, 1, 0, "x");
  EXPECT_FALSE(q.find(9, 0, kContext));
  EXPECT_FALSE(q.find(1, 0, kOtherContext));
  EXPECT_TRUE(q.find(1, 0, kContext));
}

TEST(UnexpectedQueue, ABacklogOfOneSenderIsNotInTheWayOfAnother) {
  UnexpectedQueue q;
  for (int i = 0; i < 100000; ++i) add(q, 2, 0, "backlog");
  add(q, 1, 0, "wanted");
  const auto at = q.find(1, 0, kContext);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->entry, at->list->begin());  // the head of sender 1's own messages
  EXPECT_EQ(text_of(*at->entry), "wanted");
}

TEST(UnexpectedQueue, ARecycledEntryComesBackEmptyWithItsNewContents) {
  UnexpectedQueue q;
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
  UnexpectedQueue q;
  add(q, 1, 0, "a");
  add(q, 2, 0, "b");
  q.find(2, 0, kContext)->entry->token = 42;
  const auto at = q.find_if([](const Incoming& in) { return in.token == 42; });
  ASSERT_TRUE(at);
  EXPECT_EQ(text_of(q.take(*at)), "b");
  EXPECT_FALSE(q.find_if([](const Incoming& in) { return in.token == 42; }));
  EXPECT_EQ(take(q, MPI_ANY_SOURCE, 0), "a");
}

}  // namespace
}  // namespace viastack::mpi
