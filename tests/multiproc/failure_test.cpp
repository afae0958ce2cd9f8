// Failures across processes: a peer killed mid-transfer (on every provider),
// segments left by a killed process, a NIC number already in use. The peer is
// a forked child.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <via/bootstrap.hpp>

#include "support/endpoint.hpp"
#include "support/job_directory.hpp"

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
    std::filesystem::remove_all("/dev/shm/viastack." + job_);
  }
  std::string segment_path(int nic) const { return "/dev/shm/viastack." + job_ + "/nic." + std::to_string(nic); }
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

// On every provider: a peer that dies mid-transfer breaks the survivor's VI,
// flushing its descriptors, within a bounded time.
class PeerFailure : public Failure, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    Failure::SetUp();
    if (tcp()) use_job_directory();
  }
  bool tcp() const { return std::string(GetParam()) == "tcp"; }
  std::string nic(int n) const { return std::string(GetParam()) + ":" + std::to_string(n); }
};

TEST_P(PeerFailure, PeerKilledMidTransferBreaksTheViWithoutAHang) {
  Endpoint parent;
  parent.open(nic(0), 1 << 20);
  via::Vi* vi = parent.create_vi();
  for (int i = 0; i < 8; ++i) expect_ok(vi->post_recv(parent.message(std::size_t(i) * 65536, 65536), parent.arena.handle), "recv");
  pid_t child = spawn([this]() -> int {
    Endpoint ep;
    ep.open(nic(1), 1 << 20);
    via::Vi* v = ep.create_vi();
    expect_ok(v->post_recv(ep.message(0, 64), ep.arena.handle), "recv");
    expect_ok(v->connect_peer_request(address(*ep.nic, "rank1", "k"), address(*ep.nic, "rank0", "k"), 10000), "req");
    expect_ok(v->connect_peer_wait(), "connect");
    // Not before the parent's side of the connection is made too: a peer
    // that is gone before then is no connection to break, only one that
    // cannot be made (no_match).
    VIP_DESCRIPTOR* go;
    expect_ok(v->recv_wait(10000, go), "go");
    // Stream 64 KiB messages; the parent drains slowly, so we die with data in flight.
    for (int i = 0;; ++i) {
      expect_ok(v->post_send(ep.message(0, 65536), ep.arena.handle), "send");
      if (i == 5) raise(SIGKILL);
    }
  });
  expect_ok(vi->connect_peer_request(address(*parent.nic, "rank0", "k"), address(*parent.nic, "rank1", "k"), 10000), "req");
  expect_ok(vi->connect_peer_wait(), "connect");
  expect_ok(vi->post_send(parent.message(8 * 65536, 64), parent.arena.handle), "go");
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
  EXPECT_LE(good, 6);  // messages already in the ring (or the socket) are still delivered
  EXPECT_GE(failed, 2);
}

// A peer that disconnects and exits at once (as ranks do at the end of a
// job) is an orderly disconnect, never a death: regression for a check that
// read "not closed", then found the process gone in between.
TEST_P(PeerFailure, APeerThatDisconnectsAndExitsIsAnOrderlyDisconnect) {
  for (int round = 0; round < 20; ++round) {
    // Fresh NIC numbers each round: a tcp directory entry outlives its NIC.
    const std::string me = "rank" + std::to_string(2 * round), peer = "rank" + std::to_string(2 * round + 1);
    Endpoint parent;
    parent.open(nic(2 * round), 1 << 16);
    std::vector<via::AsyncError> errors;
    parent.nic->set_error_handler([&](const via::AsyncError& e) { errors.push_back(e); });
    via::Vi* vi = parent.create_vi();
    expect_ok(vi->post_recv(parent.message(0, 64), parent.arena.handle), "recv");
    pid_t child = spawn([&]() -> int {
      Endpoint ep;
      ep.open(nic(2 * round + 1), 1 << 16);
      via::Vi* v = ep.create_vi();
      expect_ok(v->post_recv(ep.message(0, 64), ep.arena.handle), "recv");
      expect_ok(v->connect_peer_request(address(*ep.nic, peer, "k"), address(*ep.nic, me, "k"), 10000), "req");
      expect_ok(v->connect_peer_wait(), "connect");
      VIP_DESCRIPTOR* d = nullptr;
      expect_ok(v->recv_wait(10000, d), "the parent's hello");  // both ends are connected now
      expect_ok(v->disconnect(), "disconnect");
      _exit(0);  // at once, without closing the NIC
    });
    expect_ok(vi->connect_peer_request(address(*parent.nic, me, "k"), address(*parent.nic, peer, "k"), 10000), "req");
    expect_ok(vi->connect_peer_wait(), "connect");
    expect_ok(vi->post_send(parent.message(1024, 8), parent.arena.handle), "hello");
    VIP_DESCRIPTOR* d = nullptr;
    vi->recv_wait(5000, d);
    EXPECT_EQ(wait_child(child), 0);
    ASSERT_EQ(errors.size(), 1u) << "round " << round;
    EXPECT_TRUE(errors[0].orderly) << "round " << round << ": " << errors[0].cause;
  }
}

// A wait for a peer that has died, while another peer keeps sending: the
// live peer's messages are work found while waiting, which starts the wait's
// spin and yield phases again and again, so the wait never sleeps (where a
// sleep's slices would look at peers). The dead peer must still be noticed
// on time, with the live peer still sending. (Over tcp the kernel closes a
// dead peer's connection, which a poll sees at once; on shm only the look
// at the peers' processes tells.)
TEST_P(PeerFailure, ADeadPeerIsNoticedWhileAnotherKeepsTheWaitBusy) {
  // The live peer sends one message every kInterval, into kLiveMessages
  // receives: the time the dead peer must be noticed in (100 ms at least).
  constexpr int kLiveMessages = 500;  // with the other 3 descriptors, within the arena's 512
  constexpr auto kInterval = std::chrono::microseconds(200);
  // Every wait here yields for a second before it sleeps, so that the live
  // peer's messages keep the wait from sleeping however late they come.
  // The phase is read once a process: ctest runs each test in one of its own.
  ASSERT_EQ(setenv("VIASTACK_YIELD_US", "1000000", 1), 0);
  ASSERT_EQ(via::wait_yield_time(), std::chrono::seconds(1)) << "run in a process of its own, as ctest does";
  Endpoint parent;
  parent.open(nic(0), 1 << 16);
  via::Vi* to_dead = parent.create_vi();
  via::Vi* to_live = parent.create_vi();
  expect_ok(to_dead->post_recv(parent.message(0, 64), parent.arena.handle), "recv from the peer that dies");
  for (int i = 0; i < kLiveMessages; ++i)
    expect_ok(to_live->post_recv(parent.message(64 + std::size_t(i) * 64, 64), parent.arena.handle), "recv");
  int cue[2];
  ASSERT_EQ(pipe(cue), 0);
  // Each child: connects as `me` to rank0 on discriminator `disc`, and waits for the parent's hello.
  auto connect_child = [this](Endpoint& ep, int n, const char* disc) {
    ep.open(nic(n), 1 << 16);
    via::Vi* v = ep.create_vi();
    expect_ok(v->post_recv(ep.message(0, 64), ep.arena.handle), "recv");
    const std::string me = "rank" + std::to_string(n);
    expect_ok(v->connect_peer_request(address(*ep.nic, me, disc), address(*ep.nic, "rank0", disc), 10000), "req");
    expect_ok(v->connect_peer_wait(), "connect");
    VIP_DESCRIPTOR* hello;
    expect_ok(v->recv_wait(10000, hello), "hello");
    return v;
  };
  // However the test ends, no child outlives it and no pipe end stays open.
  struct Children {
    pid_t dying = -1, live = -1;
    int cue_write;
    ~Children() {
      close(cue_write);  // the dying child's read ends
      for (pid_t pid : {dying, live})
        if (pid > 0) {
          kill(pid, SIGKILL);
          wait_child(pid);
        }
    }
  } children{-1, -1, cue[1]};
  children.dying = spawn([&]() -> int {
    close(cue[1]);
    Endpoint ep;
    connect_child(ep, 1, "dead");
    char go;
    if (read(cue[0], &go, 1) != 1) return 1;
    _exit(0);  // without closing anything, as a killed rank
  });
  children.live = spawn([&]() -> int {
    close(cue[0]);
    close(cue[1]);
    Endpoint ep;
    via::Vi* v = connect_child(ep, 2, "live");
    for (int i = 0; i < 10 * kLiveMessages; ++i) {
      VIP_DESCRIPTOR* d = ep.message(64, 64);
      if (v->post_send(d, ep.arena.handle) != via::Result::success || v->send_wait(10000, d) != via::Result::success)
        return 2;
      ep.release(d);
      std::this_thread::sleep_for(kInterval);
    }
    return 0;
  });
  close(cue[0]);
  for (auto [vi, peer, disc] : {std::tuple{to_dead, "rank1", "dead"}, std::tuple{to_live, "rank2", "live"}}) {
    expect_ok(vi->connect_peer_request(address(*parent.nic, "rank0", disc), address(*parent.nic, peer, disc), 10000),
              "req");
    expect_ok(vi->connect_peer_wait(), "connect");
  }
  expect_ok(to_live->post_send(parent.message(1 << 15, 8), parent.arena.handle), "hello, live peer");
  expect_ok(to_dead->post_send(parent.message(1 << 15, 8), parent.arena.handle), "hello, peer that dies");
  // The live peer is sending before the other dies.
  VIP_DESCRIPTOR* d;
  ASSERT_EQ(to_live->recv_wait(10000, d), via::Result::success) << "the live peer's first message";
  int received = 1;
  ASSERT_EQ(write(children.cue_write, "x", 1), 1);
  EXPECT_EQ(wait_child(children.dying), 0);
  children.dying = -1;
  const auto died = Clock::now();
  const std::uint64_t sleeps = parent.nic->counters().sleeps;
  ASSERT_EQ(to_dead->recv_wait(5000, d), via::Result::success) << "the dead peer was not noticed";
  EXPECT_EQ(parent.nic->counters().sleeps, sleeps) << "the wait slept: the case this test is for did not happen";
  const auto noticed = Clock::now();
  EXPECT_TRUE(d->CS.Status & VIP_STATUS_ERROR_MASK);
  EXPECT_EQ(to_dead->state(), via::ViState::error);
  EXPECT_LT(noticed - died, std::chrono::seconds(1)) << "the dead peer was noticed late";
  // The live peer kept the wait busy all along: it is still sending, into receives left over.
  int status = 0;
  const pid_t ended = waitpid(children.live, &status, WNOHANG);
  if (ended == children.live) children.live = -1;
  EXPECT_EQ(ended, 0) << "the live peer stopped before the dead one was noticed";
  while (to_live->recv_done(d) == via::Result::success) ++received;
  EXPECT_LT(received, kLiveMessages) << "the live peer's messages ran out (" << kLiveMessages << " of them, one every "
                                     << kInterval.count() << " us) before the dead one was noticed";
  EXPECT_EQ(to_live->state(), via::ViState::connected);
}

INSTANTIATE_TEST_SUITE_P(Providers, PeerFailure, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

TEST_F(Failure, SegmentOfAKilledProcessIsReplacedAndNeverWaitedOn) {
  // Opened first: a job with a live NIC is no dead job for another process's first NIC to remove.
  Endpoint ep;
  ep.open("shm:0", 4096);
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

// NIC shm:1 in a child, connected to `a` (NIC shm:0) on discriminator
// `disc`; the child exits without closing (as a killed rank would) when
// end() is called, and not before: a dead or zombie peer cannot be connected to.
class PeerThatDiesOnCue {
 public:
  PeerThatDiesOnCue(Endpoint& a, via::Vi* va, const std::string& disc) {
    if (pipe(cue_) != 0) throw std::runtime_error("pipe");
    child_ = spawn([&]() -> int {
      Endpoint b;
      b.open("shm:1", 4096);
      via::Vi* vb = b.create_vi();
      expect_ok(vb->connect_peer_request(address(*b.nic, "rank1", disc), address(*b.nic, "rank0", disc), 5000), "req");
      expect_ok(vb->connect_peer_wait(), "connect");
      char go;
      if (read(cue_[0], &go, 1) != 1) return 1;
      _exit(0);
    });
    expect_ok(va->connect_peer_request(address(*a.nic, "rank0", disc), address(*a.nic, "rank1", disc), 5000), "req");
    expect_ok(va->connect_peer_wait(), "connect");
  }
  ~PeerThatDiesOnCue() {
    close(cue_[0]);
    close(cue_[1]);
  }
  void end() const { EXPECT_EQ(write(cue_[1], "x", 1), 1); }
  int reap() const { return wait_child(child_); }

 private:
  int cue_[2];
  pid_t child_;
};

TEST_F(Failure, ReachingForADeadPeerAgainLeavesLiveLinksIntact) {
  Endpoint a;
  a.open("shm:0", 4096);
  via::Vi* va = a.create_vi();
  PeerThatDiesOnCue peer(a, va, "d");
  peer.end();
  EXPECT_EQ(peer.reap(), 0);
  // Another VI tries the dead NIC (a lazy connect, a retry); the first VI's link must survive it.
  via::Vi* again = a.create_vi();
  expect_ok(again->connect_peer_request(address(*a.nic, "rank0", "e"), address(*a.nic, "rank1", "e"), 50), "req");
  expect_ok(va->post_recv(a.message(0, 64), a.arena.handle), "post recv");
  VIP_DESCRIPTOR* d;
  EXPECT_EQ(va->recv_wait(2000, d), via::Result::success);  // flushed when the dead peer is noticed
  EXPECT_EQ(va->state(), via::ViState::error);
}

// A peer that exited but that nobody reaped yet (a zombie: its pid still
// answers kill(pid, 0)) is dead: its links break without waiting for the reap.
TEST_F(Failure, AZombiePeerCountsAsDead) {
  Endpoint a;
  a.open("shm:0", 4096);
  via::Vi* va = a.create_vi();
  PeerThatDiesOnCue peer(a, va, "z");
  expect_ok(va->post_recv(a.message(0, 64), a.arena.handle), "post recv");
  peer.end();
  VIP_DESCRIPTOR* d;
  EXPECT_EQ(va->recv_wait(3000, d), via::Result::success);  // flushed once the zombie is seen
  EXPECT_EQ(va->state(), via::ViState::error);
  EXPECT_EQ(peer.reap(), 0);
}

TEST_F(Failure, ANicClosedAndOpenedAgainIsReachable) {
  Endpoint y;
  y.open("shm:1", 4096);
  for (int round = 0; round < 2; ++round) {
    Endpoint x;
    x.open("shm:0", 4096);
    via::Vi* vx = x.create_vi();
    via::Vi* vy = y.create_vi();
    auto [rx, ry] = connect_peers(x, "rank0", vx, y, "rank1", vy, "q", 2000);
    EXPECT_EQ(rx, via::Result::success) << "round " << round;
    EXPECT_EQ(ry, via::Result::success) << "round " << round;
    // Data reaches the new incarnation, not the old one.
    expect_ok(vx->post_recv(x.message(0, 8), x.arena.handle), "recv");
    y.fill(0, 8, 40 + round);
    expect_ok(vy->post_send(y.message(0, 8), y.arena.handle), "send");
    EXPECT_TRUE(pump({x.nic.get(), y.nic.get()}, [&] {
      VIP_DESCRIPTOR* d;
      return vx->recv_done(d) == via::Result::success;
    }));
    EXPECT_EQ(x.mismatch(0, 8, 40 + round), -1);
  }
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
