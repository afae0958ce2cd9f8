// What the engine tells a person: asynchronous errors by their VIPL name with
// addresses in hex, and VIASTACK_FAULTS saying when it can inject nothing.
// Over every provider, two NICs in one process; the log is read through its hook.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "support/endpoint.hpp"
#include "support/job_directory.hpp"
#include "via/log.hpp"

using namespace testing_support;

namespace {

class Diagnostics : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    use_unique_job("diagtest");
    if (std::string(GetParam()) == "tcp") use_job_directory();
    via::log::set_hook([this](via::log::Level, std::string_view line) { lines.emplace_back(line); });
  }
  void TearDown() override {
    via::log::set_hook(nullptr);
    unsetenv("VIASTACK_FAULTS");
  }
  std::string nic(int n) const { return std::string(GetParam()) + ":" + std::to_string(n); }
  void open_both() {
    a.open(nic(0), 1 << 20);
    b.open(nic(1), 1 << 20);
  }
  void connect(via::Vi* va, via::Vi* vb, const std::string& disc) {
    ASSERT_EQ(connect_peers(a, "rank0", va, b, "rank1", vb, disc),
              std::make_pair(via::Result::success, via::Result::success));
  }
  int lines_with(const std::string& text) const {
    int n = 0;
    for (const std::string& line : lines) n += line.find(text) != std::string::npos;
    return n;
  }
  std::string all_lines() const {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
  }

  Endpoint a, b;
  std::vector<std::string> lines;
};

TEST_P(Diagnostics, AnAsynchronousErrorIsLoggedByItsVipName) {
  open_both();
  via::Vi* va = a.create_vi();
  via::Vi* vb = b.create_vi();
  connect(va, vb, "recvq");
  // No receive posted at b: on a reliable VI the message breaks the connection.
  expect_ok(va->post_send(a.message(0, 64), a.arena.handle), "send");
  ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return vb->state() == via::ViState::error; }));
  EXPECT_EQ(lines_with("VIP_ERROR_RECVQ_EMPTY"), 1) << all_lines();
  EXPECT_EQ(lines_with("code 2"), 0) << all_lines();
  EXPECT_EQ(via::error_name(VIP_ERROR_RECVQ_EMPTY), std::string("VIP_ERROR_RECVQ_EMPTY"));
  EXPECT_EQ(via::error_name(VIP_ERROR_CATASTROPHIC), std::string("VIP_ERROR_CATASTROPHIC"));
}

TEST_P(Diagnostics, AnRdmaProtectionErrorNamesTheTargetInHex) {
  // b's arena is registered without RDMA write: a write into it is refused.
  a.open(nic(0), 1 << 20);
  b.open(nic(1), 1 << 20, /*rdma_write=*/false);
  via::Vi* va = a.create_vi();
  via::Vi* vb = b.create_vi();
  connect(va, vb, "rdmaw");
  const std::uint64_t target = reinterpret_cast<std::uintptr_t>(b.arena.data(4096));
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAWRITE, target, b.arena.handle, 0, 512), a.arena.handle), "write");
  ASSERT_TRUE(pump({a.nic.get(), b.nic.get()},
                   [&] { return va->state() == via::ViState::error || vb->state() == via::ViState::error; }));
  pump({a.nic.get(), b.nic.get()}, [&] { return lines_with("VIP_ERROR_RDMAW_PROT") > 0; }, 2000);
  char hex[64];
  std::snprintf(hex, sizeof hex, "0x%" PRIx64, target);
  EXPECT_EQ(lines_with("VIP_ERROR_RDMAW_PROT"), 1) << all_lines();
  EXPECT_EQ(lines_with(hex), 1) << "no line names " << hex << ":\n" << all_lines();
  EXPECT_EQ(lines_with(std::to_string(target)), 0) << all_lines();
}

constexpr const char* kNoFaultsLine = "no fault will be injected";

TEST_P(Diagnostics, FaultsOnReliableVisSayOnceThatNoneWillBeInjected) {
  setenv("VIASTACK_FAULTS", "drop=0.5,seed=3", 1);
  open_both();
  via::Vi* va1 = a.create_vi(VIP_SERVICE_RELIABLE_DELIVERY);
  via::Vi* vb1 = b.create_vi(VIP_SERVICE_RELIABLE_DELIVERY);
  via::Vi* va2 = a.create_vi(VIP_SERVICE_RELIABLE_RECEPTION);
  via::Vi* vb2 = b.create_vi(VIP_SERVICE_RELIABLE_RECEPTION);
  connect(va1, vb1, "one");
  connect(va2, vb2, "two");
  EXPECT_EQ(lines_with(kNoFaultsLine), 1) << all_lines();
  EXPECT_EQ(lines_with("VIASTACK_AM_RELIABILITY=unreliable"), 1) << all_lines();
  EXPECT_EQ(lines_with(" warn: "), 1) << "shown at the default level:\n" << all_lines();
}

TEST_P(Diagnostics, FaultsWithAnUnreliableViSayNothing) {
  setenv("VIASTACK_FAULTS", "drop=0.5,seed=3", 1);
  open_both();
  via::Vi* va = a.create_vi(VIP_SERVICE_UNRELIABLE);
  via::Vi* vb = b.create_vi(VIP_SERVICE_UNRELIABLE);
  connect(va, vb, "lossy");
  EXPECT_EQ(lines_with(kNoFaultsLine), 0) << all_lines();
}

TEST_P(Diagnostics, NoFaultsSetSaysNothing) {
  open_both();
  via::Vi* va = a.create_vi();
  via::Vi* vb = b.create_vi();
  connect(va, vb, "plain");
  EXPECT_EQ(lines_with(kNoFaultsLine), 0) << all_lines();
}

INSTANTIATE_TEST_SUITE_P(Providers, Diagnostics, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
