// Admissions on their own (issue 21): the bounds on connections still proving
// themselves must let a whole one-host job in at once, and a connection must
// not be cut off for a delay that was the acceptor's, not the peer's.
//
// Driven by hand: the test polls the io_context itself, so nothing here
// depends on how fast the machine is.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <asio.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "providers/tcp/admission.hpp"
#include "providers/tcp/handshake.hpp"

namespace tcp = via::tcp;
using namespace std::chrono_literals;

namespace {

using Admission = tcp::Admissions::Admission;

// Connections from 127.0.0.1 (the kernel completes them before the acceptor
// accepts), all of them open.
std::vector<asio::ip::tcp::socket> connect_many(asio::io_context& io, const asio::ip::tcp::endpoint& target, int count) {
  std::vector<asio::ip::tcp::socket> sockets;
  for (int i = 0; i < count; ++i) {
    sockets.emplace_back(io);
    sockets.back().connect(target);
  }
  return sockets;
}

// Polls until `admitted` holds `count` admissions or nothing more comes in a while.
void take_in(asio::io_context& io, const std::vector<std::shared_ptr<Admission>>& admitted, std::size_t count) {
  auto last_change = std::chrono::steady_clock::now();
  std::size_t seen = 0;
  while (admitted.size() < count && std::chrono::steady_clock::now() - last_change < 2s) {
    io.poll();
    if (admitted.size() != seen) {
      seen = admitted.size();
      last_change = std::chrono::steady_clock::now();
    }
  }
}

class AdmissionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two descriptors per connection, both ends in this process.
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 4096) GTEST_SKIP() << "needs 4096 file descriptors";
    tcp::raise_descriptor_limit();
    acceptor_.open(asio::ip::tcp::v4());
    acceptor_.bind(asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    acceptor_.listen();
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_};
};

// What a per-source bound that ignored the job would have allowed.
std::size_t strangers_per_source() { return tcp::PendingLimits::for_job(tcp::raise_descriptor_limit().rlim_cur, 0).per_source; }

TEST(PendingLimits, LeaveRoomForEveryRankOfTheJobOnTopOfTheStrangersShare) {
  for (rlim_t descriptors : {rlim_t(256), rlim_t(1024), rlim_t(1 << 20)}) {
    const tcp::PendingLimits strangers = tcp::PendingLimits::for_job(descriptors, 0);
    EXPECT_GE(strangers.per_source, 2u);
    EXPECT_LE(strangers.per_source, strangers.total);
    EXPECT_LE(strangers.total, 512u);
    for (std::size_t ranks : {std::size_t(2), std::size_t(256), std::size_t(1024)}) {
      const tcp::PendingLimits job = tcp::PendingLimits::for_job(descriptors, ranks);
      EXPECT_EQ(job.per_source, strangers.per_source + ranks) << descriptors << " descriptors, " << ranks << " ranks";
      EXPECT_EQ(job.total, strangers.total + ranks) << descriptors << " descriptors, " << ranks << " ranks";
    }
  }
}

// A one-host job's ranks all connect from 127.0.0.1, at once, to one rank:
// every one of them is admitted, none evicted to make room for the others.
TEST_F(AdmissionsTest, AOneAddressJobLargerThanTheStrangersShareIsAllAdmitted) {
  const int ranks = int(strangers_per_source()) + 100;
  std::vector<std::shared_ptr<Admission>> admitted;
  tcp::Admissions admissions(acceptor_, std::size_t(ranks), "test: ", [&](const auto& a) { admitted.push_back(a); });
  admissions.start();
  asio::io_context peers;
  auto sockets = connect_many(peers, acceptor_.local_endpoint(), ranks - 1);
  take_in(io_, admitted, std::size_t(ranks - 1));

  ASSERT_EQ(admitted.size(), std::size_t(ranks - 1));
  std::size_t still_open = 0;
  for (auto& a : admitted) still_open += a->conn->socket.is_open();
  EXPECT_EQ(still_open, std::size_t(ranks - 1)) << "per source " << admissions.limits().per_source;
  // Each one proves itself and settles: none was evicted meanwhile.
  std::size_t settled = 0;
  for (auto& a : admitted) settled += admissions.settle(*a);
  EXPECT_EQ(settled, std::size_t(ranks - 1));
}

// Past the job's ranks, a source is bounded again: the oldest go first.
TEST_F(AdmissionsTest, ASourcePastTheJobAndTheStrangersShareLosesItsOldest) {
  constexpr int kRanks = 8, kBeyond = 5;
  std::vector<std::shared_ptr<Admission>> admitted;
  tcp::Admissions admissions(acceptor_, kRanks, "test: ", [&](const auto& a) { admitted.push_back(a); });
  admissions.start();
  const std::size_t per_source = admissions.limits().per_source;
  asio::io_context peers;
  auto sockets = connect_many(peers, acceptor_.local_endpoint(), int(per_source) + kBeyond);
  take_in(io_, admitted, per_source + kBeyond);

  ASSERT_EQ(admitted.size(), per_source + kBeyond);
  for (std::size_t i = 0; i < admitted.size(); ++i)
    EXPECT_EQ(admitted[i]->conn->socket.is_open(), i >= std::size_t(kBeyond)) << "connection " << i;
}

// The acceptor was away (descheduled, busy) past a connection's deadline,
// while the peer proved itself and made its request in time: what the peer
// sent counts first, and the connection settles. (The deadline's timer and
// the peer's bytes are found by the same poll; the request's read only
// completes after the proof's handler ran.)
TEST_F(AdmissionsTest, WhatThePeerSentInTimeCountsWhenTheAcceptorLooksLate) {
  constexpr std::size_t kProof = 4, kRequest = 6;
  std::shared_ptr<Admission> admitted;
  std::optional<bool> settled;
  std::optional<tcp::Admissions> admissions;
  admissions.emplace(acceptor_, 2, "test: ", [&](const std::shared_ptr<Admission>& a) {
    admitted = a;
    tcp::read_exactly(a->conn, kProof, [&, a](const std::string& error) {
      if (!error.empty()) return admissions->refuse(*a, error);
      a->proven = true;
      tcp::read_exactly(a->conn, kRequest, [&, a](const std::string& error) {
        if (!error.empty()) return admissions->refuse(*a, error);
        settled = admissions->settle(*a);
      });
    });
  });
  admissions->start();
  asio::io_context peers;
  auto sockets = connect_many(peers, acceptor_.local_endpoint(), 1);
  for (auto until = std::chrono::steady_clock::now() + 2s; !admitted && std::chrono::steady_clock::now() < until;)
    io_.poll();
  ASSERT_TRUE(admitted);
  // The peer's proof and request, well within its deadline; the acceptor
  // looks again only after the deadline.
  asio::write(sockets[0], asio::buffer(std::string(kProof + kRequest, 'x')));
  std::this_thread::sleep_for(tcp::auth_timeout() + 200ms);
  io_.poll();
  EXPECT_EQ(settled, std::optional<bool>(true));
  EXPECT_TRUE(admitted->conn->socket.is_open());
}

}  // namespace

int main(int argc, char** argv) {
  // Long enough that no deadline passes while a test takes its connections
  // in; short enough to wait out.
  setenv("VIASTACK_TCP_AUTH_TIMEOUT_MS", "2000", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
