// Failures across processes: a peer killed mid-transfer, segments left by a
// killed process, a NIC number already in use. The peer is a forked child.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "support/endpoint.hpp"

using namespace testing_support;
using Clock = std::chrono::steady_clock;

// Holds the NIC a test deliberately never closes: reachable from a global with
// external linkage, so the store stays and leak checkers stay quiet.
via::Nic* never_closed = nullptr;

namespace {

class Failure : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = use_unique_job("failuretest");
  }
  // What viarun does after a job: a killed peer leaves its segment behind.
  void TearDown() override {
    const std::string prefix = "viastack." + job_ + ".";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
      if (entry.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(entry.path());
  }
  std::string segment_path(int nic) const { return "/dev/shm/viastack." + job_ + "." + std::to_string(nic); }
  std::string job_;
};

// Runs body in a child process; the child's exit status is returned by wait_child.
pid_t spawn(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
    }
    _exit(code);
  }
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(Failure, PeerKilledMidTransferBreaksTheViWithoutAHang) {
  Endpoint parent;
  parent.open("shm:0", 1 << 20);
  via::Vi* vi = parent.create_vi();
  for (int i = 0; i < 8; ++i) expect_ok(vi->post_recv(parent.message(std::size_t(i) * 65536, 65536), parent.arena.handle), "recv");
  pid_t child = spawn([]() -> int {
    Endpoint ep;
    ep.open("shm:1", 1 << 20);
    via::Vi* v = ep.create_vi();
    expect_ok(v->connect_peer_request(address(*ep.nic, "rank1", "k"), address(*ep.nic, "rank0", "k"), 10000), "req");
    expect_ok(v->connect_peer_wait(), "connect");
    // Stream 64 KiB messages; the parent drains slowly, so we die with data in flight.
    for (int i = 0;; ++i) {
      expect_ok(v->post_send(ep.message(0, 65536), ep.arena.handle), "send");
      if (i == 5) raise(SIGKILL);
    }
  });
  expect_ok(vi->connect_peer_request(address(*parent.nic, "rank0", "k"), address(*parent.nic, "rank1", "k"), 10000), "req");
  expect_ok(vi->connect_peer_wait(), "connect");
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);
  const auto killed = Clock::now();
  int good = 0, failed = 0;
  VIP_DESCRIPTOR* d;
  while (vi->recv_wait(5000, d) == via::Result::success) {
    if (d->CS.Status & VIP_STATUS_ERROR_MASK)
      ++failed;
    else
      ++good;
  }
  EXPECT_LT(Clock::now() - killed, std::chrono::seconds(3)) << "the dead peer was not noticed in time";
  EXPECT_EQ(vi->state(), via::ViState::error);
  EXPECT_EQ(good + failed, 8);
  EXPECT_LE(good, 6);  // messages already in the ring are still delivered
  EXPECT_GE(failed, 2);
}

TEST_F(Failure, SegmentOfAKilledProcessIsReplacedAndNeverWaitedOn) {
  pid_t child = spawn([] {
    std::unique_ptr<via::Nic> nic;
    expect_ok(via::Nic::open("shm:3", nic), "open");
    raise(SIGKILL);
    return 0;
  });
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);
  struct stat st;
  ASSERT_EQ(stat(segment_path(3).c_str(), &st), 0) << "the killed process should have left its segment";

  // Connecting to the dead NIC times out promptly instead of hanging.
  Endpoint ep;
  ep.open("shm:0", 4096);
  via::Vi* vi = ep.create_vi();
  auto start = Clock::now();
  EXPECT_EQ(vi->connect_request(address(*ep.nic, "rank0", "x"), address(*ep.nic, "rank3", "x"), 300), via::Result::timeout);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));

  // A new owner takes the NIC number over.
  std::unique_ptr<via::Nic> nic;
  EXPECT_EQ(via::Nic::open("shm:3", nic), via::Result::success);
  nic.reset();
  EXPECT_NE(stat(segment_path(3).c_str(), &st), 0) << "closing the NIC removes its segment";
}

TEST_F(Failure, ExitingWithANicOpenRemovesItsSegmentCleanly) {
  pid_t child = spawn([] {
    std::unique_ptr<via::Nic> nic;
    expect_ok(via::Nic::open("shm:6", nic), "open");
    never_closed = nic.release();  // exit() must still clean up, and not crash
    std::exit(3);
    return 0;
  });
  EXPECT_EQ(wait_child(child), 3);
  struct stat st;
  EXPECT_NE(stat(segment_path(6).c_str(), &st), 0);
}

TEST_F(Failure, NicNumberHeldByALiveProcessIsRefused) {
  std::unique_ptr<via::Nic> nic;
  expect_ok(via::Nic::open("shm:2", nic), "open");
  pid_t child = spawn([] {
    std::unique_ptr<via::Nic> other;
    return via::Nic::open("shm:2", other) == via::Result::error_resource ? 0 : 1;
  });
  EXPECT_EQ(wait_child(child), 0);
}

}  // namespace
