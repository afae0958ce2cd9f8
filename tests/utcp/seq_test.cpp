#include "utcp/seq.hpp"

#include <gtest/gtest.h>

namespace utcp::wire {
namespace {

TEST(SeqNumber, ComparesAcrossWrapAround) {
  const SeqNumber before_wrap(0xfffffff0);
  const SeqNumber after_wrap = before_wrap + 0x20;
  EXPECT_EQ(after_wrap.value(), 0x10u);
  EXPECT_LT(before_wrap, after_wrap);
  EXPECT_LE(before_wrap, after_wrap);
  EXPECT_GT(after_wrap, before_wrap);
  EXPECT_GE(after_wrap, before_wrap);
  EXPECT_FALSE(after_wrap < before_wrap);
  EXPECT_EQ(after_wrap - before_wrap, 0x20);
  EXPECT_EQ(before_wrap - after_wrap, -0x20);
  EXPECT_EQ(after_wrap - 0x20u, before_wrap);
  EXPECT_LE(after_wrap, after_wrap);
  EXPECT_GE(after_wrap, after_wrap);
  EXPECT_FALSE(after_wrap < after_wrap);
}

TEST(SeqNumber, HalfTheSpaceAheadIsAhead) {
  const SeqNumber zero(0);
  EXPECT_LT(zero, zero + 0x7fffffff);
  EXPECT_GT(zero, zero + 0x80000001);  // more than 2^31 ahead reads as behind
  SeqNumber moving(0xffffffff);
  moving += 1;
  EXPECT_EQ(moving, zero);
}

TEST(SeqNumber, WindowAcrossWrapAround) {
  const SeqNumber start(0xfffffffe);
  EXPECT_TRUE(in_window(start, start, 4));
  EXPECT_TRUE(in_window(SeqNumber(0), start, 4));
  EXPECT_TRUE(in_window(SeqNumber(1), start, 4));
  EXPECT_FALSE(in_window(SeqNumber(2), start, 4));
  EXPECT_FALSE(in_window(start - 1, start, 4));
  EXPECT_FALSE(in_window(start, start, 0));  // a zero window accepts no sequence number
}

}  // namespace
}  // namespace utcp::wire
