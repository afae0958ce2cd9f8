// The engine's choice of way for large RDMA reads (engine/read_path.hpp) as
// a program sees it: over shm with CMA, reads from VIASTACK_ADAPTIVE_READ_MIN
// (its default, 64 KiB) go both ways, through the rings and by single copy,
// and every one arrives whole. Apart from engine_test, whose lowered
// single-copy threshold leaves no size to choose for.
#include <gtest/gtest.h>

#include "support/endpoint.hpp"

using namespace testing_support;

namespace {

TEST(ReadChoice, LargeReadsGoBothWaysAndArriveWhole) {
  use_unique_job("readchoice");
  setenv("VIASTACK_SHM_CMA", "1", 1);
  // A read through the rings is never taken back here (the target polls
  // beside its reader, but a sanitizer build may be slow to): each read
  // goes one way only.
  setenv("VIASTACK_READ_TAKEOVER_US", "1000000", 1);
  constexpr std::size_t kSize = 256 * 1024, kReads = 80;
  Endpoint a, b;
  a.open("shm:0", kSize);
  b.open("shm:1", kSize);
  via::Vi* va = a.create_vi();
  via::Vi* vb = b.create_vi();
  auto [ra, rb] = connect_peers(a, "rank0", va, b, "rank1", vb, "d");
  ASSERT_EQ(ra, via::Result::success);
  ASSERT_EQ(rb, via::Result::success);
  const via::NicCounters before = a.nic->counters();
  for (std::size_t i = 0; i < kReads; ++i) {
    b.fill(0, kSize, 500 + i);
    std::memset(a.arena.data(), 0, kSize);
    VIP_DESCRIPTOR* posted = a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data()), b.arena.handle, 0, kSize);
    expect_ok(va->post_send(posted, a.arena.handle), "post read");
    VIP_DESCRIPTOR* d = nullptr;
    ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return va->send_done(d) == via::Result::success; }))
        << "read " << i;
    ASSERT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ)) << "read " << i;
    ASSERT_EQ(a.mismatch(0, kSize, 500 + i), -1) << "read " << i;
    a.arena.release(d);
  }
  // The first read goes through the rings, the second by single copy; then
  // the faster way, and the other for 4 reads in every 64: 5 or 75 of the
  // 80 single copy, or between where the faster way changed (one read of
  // slack for a sample lost to nothing but a race).
  const std::uint64_t direct = a.nic->counters().direct_reads - before.direct_reads;
  EXPECT_GE(direct, 4u);
  EXPECT_LE(direct, kReads - 4);
  EXPECT_EQ(a.nic->counters().reads_taken_over - before.reads_taken_over, 0u);
}

}  // namespace
