// The VIA engine, driven from one process holding two NICs, over every
// provider: shm with single-copy (CMA) transfers enabled and disabled, and
// tcp over loopback, so that every data path sees the same suite.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "support/endpoint.hpp"
#include "support/job_directory.hpp"
#include "engine/copy.hpp"
#include "engine/engine.hpp"
#include "via/bootstrap.hpp"

using namespace testing_support;

namespace {

// Built with a sanitizer (GCC's macros, or clang's __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
constexpr bool kUnderSanitizer = __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||
                                 __has_feature(memory_sanitizer);
#else
constexpr bool kUnderSanitizer = false;
#endif

// Sizes on both sides of every threshold: shm's 200-byte inline payload and
// 240-byte compact cell, the 64 KiB frame payload, the 256 KiB data ring,
// the direct threshold (set to 16 KiB for this process in main()).
const std::vector<std::size_t> kSizes = {0,     1,     8,     200,    201,    240,      241,           4096, 16383,
                                         16384, 65536, 65537, 262144, 300001, 1u << 20, (3u << 20) + 5};
constexpr std::size_t kArena = 8u << 20;
// VIASTACK_READ_TAKEOVER_US in these tests (main): far longer than a target
// polled beside its reader ever leaves a request unanswered.
constexpr std::uint64_t kReadTakeoverUs = 100'000;

struct Transport {
  const char* name;
  const char* provider;
  bool cma;
  // For the mixed provider: how many nodes the job of 16 ranks spans (rank 0
  // and rank 1 share a node only when it is 1).
  int nodes = 0;
};

// Failure messages name the provider, not the parameter's bytes.
void PrintTo(const Transport& t, std::ostream* os) { *os << t.name; }

class Engine : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    use_unique_job("enginetest");
    setenv("VIASTACK_SHM_CMA", GetParam().cma ? "1" : "0", 1);
    if (GetParam().nodes) {
      setenv("VIASTACK_SIZE", "16", 1);
      setenv("VIASTACK_NODES", std::to_string(GetParam().nodes).c_str(), 1);
    } else {
      unsetenv("VIASTACK_SIZE");
      unsetenv("VIASTACK_NODES");
    }
    if (tcp() || GetParam().nodes) use_job_directory();
    a.open(nic(0), kArena);
    b.open(nic(1), kArena);
  }

  bool cma() const { return GetParam().cma; }
  // Whether NIC 0 reaches NIC 1 over tcp.
  bool tcp() const { return std::string(GetParam().provider) == "tcp" || GetParam().nodes > 1; }
  std::string nic(int n) const { return std::string(GetParam().provider) + ":" + std::to_string(n); }
  // The name of a NIC that does not exist (on tcp: a port nobody listens on).
  std::string absent_nic() const { return tcp() ? "127.0.0.1:9" : "rank9"; }

  // Connects a new VI on each side, peer to peer.
  std::pair<via::Vi*, via::Vi*> connect(VIP_RELIABILITY_LEVEL level = VIP_SERVICE_RELIABLE_DELIVERY,
                                        via::Cq* a_cq = nullptr, via::Cq* b_cq = nullptr, std::string disc = "d") {
    via::Vi* va = a.create_vi(level, a_cq, a_cq);
    via::Vi* vb = b.create_vi(level, b_cq, b_cq);
    auto [ra, rb] = connect_peers(a, "rank0", va, b, "rank1", vb, disc);
    EXPECT_EQ(ra, via::Result::success);
    EXPECT_EQ(rb, via::Result::success);
    return {va, vb};
  }

  VIP_DESCRIPTOR* wait_done(via::Vi* vi, bool recv, int timeout_ms = 5000) {
    VIP_DESCRIPTOR* d = nullptr;
    pump({a.nic.get(), b.nic.get()},
         [&] { return (recv ? vi->recv_done(d) : vi->send_done(d)) == via::Result::success; }, timeout_ms);
    return d;
  }

  void expect_connected_after_the_peer_sent_and_closed(via::Vi* sender, via::Vi* receiver,
                                                       const std::function<via::Result()>& poll_receiver);

  Endpoint a, b;
};

std::uint32_t status_op(const VIP_DESCRIPTOR* d) { return d->CS.Status & VIP_STATUS_OP_MASK; }
std::uint32_t status_err(const VIP_DESCRIPTOR* d) { return d->CS.Status & VIP_STATUS_ERROR_MASK; }

TEST_P(Engine, SendReceiveEverySize) {
  auto [va, vb] = connect();
  std::uint64_t seed = 1;
  for (std::size_t size : kSizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::memset(b.arena.data(), 0xEE, size + 16);
    a.fill(0, size, seed);
    const auto direct_before = b.nic->counters().direct_reads;
    expect_ok(vb->post_recv(b.message(0, size + 16), b.arena.handle), "post recv");
    expect_ok(va->post_send(a.message(0, size), a.arena.handle), "post send");
    VIP_DESCRIPTOR* r = wait_done(vb, true);
    VIP_DESCRIPTOR* s = wait_done(va, false);
    ASSERT_NE(r, nullptr);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(status_err(r), 0u);
    EXPECT_EQ(status_err(s), 0u);
    EXPECT_TRUE(r->CS.Status & VIP_STATUS_DONE);
    EXPECT_EQ(status_op(r), std::uint32_t(VIP_STATUS_OP_RECEIVE));
    EXPECT_EQ(status_op(s), std::uint32_t(VIP_STATUS_OP_SEND));
    EXPECT_EQ(r->CS.Length, size);
    EXPECT_EQ(b.mismatch(0, size, seed), -1);
    EXPECT_EQ(std::to_integer<int>(b.arena.data()[size]), 0xEE) << "wrote past the message";
    EXPECT_EQ(b.nic->counters().direct_reads - direct_before, cma() && size >= 16384 ? 1u : 0u);
    ++seed;
  }
}

// A VI's receive queue starts small and grows as receives are posted; a
// message arriving into the oldest receive keeps arriving there when the
// queue moves under it.
TEST_P(Engine, ReceivesPostedWhileAMessageArrivesGrowTheQueueUnderIt) {
  auto [va, vb] = connect();
  const std::size_t size = 4u << 20, small = 64;
  a.fill(0, size, 11);
  expect_ok(vb->post_recv(b.message(0, size), b.arena.handle), "post the large receive");
  expect_ok(va->post_send(a.message(0, size), a.arena.handle), "post the large send");
  // Until its first bytes are in: the receive is being filled.
  VIP_DESCRIPTOR* early = nullptr;
  pump({a.nic.get(), b.nic.get()}, [&] { return b.mismatch(0, small, 11) == -1; }, 5000);
  if (vb->recv_done(early) == via::Result::success) GTEST_SKIP() << "the whole message was in before a part of it could be seen (CMA, or a fast link)";
  // Half one at a time, half in batches as the mesh re-posts them: the queue
  // grows (past 64) inside a batch.
  for (std::size_t i = 0; i < 50; ++i)
    expect_ok(vb->post_recv(b.message(size + i * small, small), b.arena.handle), "post a small receive");
  for (std::size_t i = 50; i < 100; i += 10) {
    VIP_DESCRIPTOR* batch[10];
    for (std::size_t k = 0; k < 10; ++k) batch[k] = b.message(size + (i + k) * small, small);
    EXPECT_EQ(via::impl(*vb).repost_recvs(batch, 10), 10u);
  }
  VIP_DESCRIPTOR* r = wait_done(vb, true);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(status_err(r), 0u);
  EXPECT_EQ(r->CS.Length, size);
  EXPECT_EQ(b.mismatch(0, size, 11), -1);
  // The small receives follow, in order.
  a.fill(0, small, 12);
  expect_ok(va->post_send(a.message(0, small), a.arena.handle), "post a small send");
  VIP_DESCRIPTOR* next = wait_done(vb, true);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->DS[0].Local.Data.Address, b.arena.data(size));
  EXPECT_EQ(b.mismatch(size, small, 12), -1);
}

TEST_P(Engine, GatherThreeSegmentsScatterIntoTwo) {
  auto [va, vb] = connect();
  const std::size_t size = 100000;
  a.fill(0, size, 7);
  VIP_DESCRIPTOR* recv = b.message(0, size, 2);
  recv->DS[0].Local.Length = 1000;  // uneven pieces
  recv->DS[1].Local.Data.Address = b.arena.data(1000);
  recv->DS[1].Local.Length = size - 1000;
  expect_ok(vb->post_recv(recv, b.arena.handle), "post recv");
  VIP_DESCRIPTOR* send = a.message(0, size, 3);
  send->CS.Control = VIP_CONTROL_IMMEDIATE;
  send->CS.ImmediateData = 0xC0FFEE;
  expect_ok(va->post_send(send, a.arena.handle), "post send");
  VIP_DESCRIPTOR* r = wait_done(vb, true);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_IMMEDIATE));
  EXPECT_EQ(r->CS.ImmediateData, 0xC0FFEEu);
  EXPECT_EQ(b.mismatch(0, size, 7), -1);
}

TEST_P(Engine, ManySendsArriveInOrder) {
  auto [va, vb] = connect();
  constexpr int kMessages = 3000, kPosted = 200;
  int received = 0, posted = 0, sent = 0;
  auto post_recvs = [&] {
    while (posted - received < kPosted && posted < kMessages) {
      expect_ok(vb->post_recv(b.message(std::size_t(posted % kPosted) * 64, 64), b.arena.handle), "recv");
      ++posted;
    }
  };
  post_recvs();
  bool ok = pump({a.nic.get(), b.nic.get()}, [&] {
    // Never more sends in flight than receives posted: reliable VIs break otherwise.
    VIP_DESCRIPTOR* d;
    while (sent < posted && sent - received < kPosted) {
      std::uint32_t* p = reinterpret_cast<std::uint32_t*>(a.arena.data(std::size_t(sent % kPosted) * 64));
      *p = std::uint32_t(sent);
      if (va->post_send(a.message(std::size_t(sent % kPosted) * 64, 4 + sent % 60), a.arena.handle) !=
          via::Result::success)
        break;
      ++sent;
    }
    while (va->send_done(d) == via::Result::success) {
      EXPECT_EQ(status_err(d), 0u);
      a.release(d);
    }
    while (vb->recv_done(d) == via::Result::success) {
      EXPECT_EQ(status_err(d), 0u);
      EXPECT_EQ(*reinterpret_cast<std::uint32_t*>(d->DS[0].Local.Data.Address), std::uint32_t(received));
      EXPECT_EQ(d->CS.Length, 4u + received % 60);
      b.release(d);
      ++received;
    }
    post_recvs();
    return received == kMessages;
  }, 20000);
  EXPECT_TRUE(ok);
  EXPECT_EQ(received, kMessages);
}

// On shared memory a connection's data rings are in both processes' page
// tables once the link has carried 64 KiB of payload through them: the rest
// of the first pass takes no page faults (it took one per page of the data
// ring on each side: ~100 here, where both NICs map each other's segment in
// one process).
TEST_P(Engine, TheFirstMessagesThroughTheRingsTakeNoPageFaults) {
  if (tcp()) GTEST_SKIP() << "shared-memory rings only";
  if (kUnderSanitizer) GTEST_SKIP() << "a sanitizer's shadow memory faults in as the rings are first touched";
  {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    const bool populates = madvise(page, 4096, MADV_POPULATE_WRITE) == 0;
    munmap(page, 4096);
    if (!populates) GTEST_SKIP() << "this kernel does not populate mappings (MADV_POPULATE_WRITE, Linux 5.14)";
  }
  auto [va, vb] = connect();
  constexpr std::size_t kBytes = 1024;
  std::memset(a.arena.data(0), 1, kBytes);
  std::memset(b.arena.data(0), 0, kBytes);
  auto faults_sending = [&](int messages, std::size_t bytes) -> long {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    for (int i = 0; i < messages; ++i) {
      expect_ok(vb->post_recv(b.message(0, kBytes), b.arena.handle), "recv");
      expect_ok(va->post_send(a.message(0, bytes), a.arena.handle), "send");
      VIP_DESCRIPTOR* r = wait_done(vb, true);
      VIP_DESCRIPTOR* d = wait_done(va, false);
      if (!r || !d || status_err(r) != 0) {
        ADD_FAILURE() << "message " << i << " did not arrive whole";
        return -1;
      }
      b.release(r);
      a.release(d);
    }
    getrusage(RUSAGE_SELF, &after);
    return after.ru_minflt - before.ru_minflt;
  };
  // First what faults in as it is used: descriptors, completion queues, the
  // links' own state, and every cell (8-byte messages once round the ring);
  // then 64 KiB of payload, after which the link maps its data ring in.
  faults_sending(300, 8);
  faults_sending(64, kBytes);
  const long faults = faults_sending(600, kBytes);  // twice round a 256 KiB data ring
  EXPECT_GE(faults, 0);
  EXPECT_LT(faults, 24) << "minor page faults while 600 messages of " << kBytes
                        << " bytes went through the rings";
}

// Receives posted on one VI keep their descriptors while hundreds of others
// come and go on another VI of the same NIC (the test helper once handed a
// still-posted descriptor's slot out again after 256 others).
TEST_P(Engine, PostedReceivesKeepTheirDescriptorsWhileAnotherViChurns) {
  auto [idle_a, idle_b] = connect(VIP_SERVICE_RELIABLE_DELIVERY, nullptr, nullptr, "idle");
  auto [busy_a, busy_b] = connect(VIP_SERVICE_RELIABLE_DELIVERY, nullptr, nullptr, "busy");
  constexpr int kIdleReceives = 8, kBusyMessages = 300;
  constexpr std::size_t kSlot = 64, kBusyArea = 1u << 20;
  for (int i = 0; i < kIdleReceives; ++i)
    expect_ok(idle_b->post_recv(b.message(std::size_t(i) * kSlot, kSlot), b.arena.handle), "post idle recv");
  for (int i = 0; i < kBusyMessages; ++i) {
    expect_ok(busy_b->post_recv(b.message(kBusyArea, kSlot), b.arena.handle), "post busy recv");
    expect_ok(busy_a->post_send(a.message(kBusyArea, 8), a.arena.handle), "busy send");
    VIP_DESCRIPTOR* r = wait_done(busy_b, true);
    VIP_DESCRIPTOR* s = wait_done(busy_a, false);
    ASSERT_NE(r, nullptr) << "busy message " << i;
    ASSERT_NE(s, nullptr) << "busy message " << i;
    ASSERT_EQ(status_err(r) | status_err(s), 0u) << "busy message " << i;
    b.release(r);
    a.release(s);
  }
  for (int i = 0; i < kIdleReceives; ++i) {
    SCOPED_TRACE("idle message " + std::to_string(i));
    const std::size_t offset = std::size_t(i) * kSlot;
    a.fill(offset, kSlot, 100 + std::uint64_t(i));
    expect_ok(idle_a->post_send(a.message(offset, kSlot), a.arena.handle), "idle send");
    VIP_DESCRIPTOR* r = wait_done(idle_b, true);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(status_err(r), 0u);
    EXPECT_EQ(r->DS[0].Local.Data.Address, b.arena.data(offset));
    EXPECT_EQ(b.mismatch(offset, kSlot, 100 + std::uint64_t(i)), -1);
    ASSERT_NE(wait_done(idle_a, false), nullptr);
  }
}

TEST_P(Engine, InlineSendsArriveGatheredAndInOrderBehindPostedWork) {
  auto [va, vb] = connect();
  for (int i = 0; i < 4; ++i) expect_ok(vb->post_recv(b.message(std::size_t(i) * 512, 512), b.arena.handle), "recv");
  // Memory that was never registered: an inline send copies it at once.
  char head[] = "head:";
  std::vector<char> tail(256 - 5, 'x');
  const iovec full[2] = {{head, 5}, {tail.data(), tail.size()}};
  expect_ok(va->send_inline(full, 2), "inline send of two pieces");
  head[0] = 'H';  // free on return
  // A posted send not yet out (its payload is large) keeps a later inline send behind it.
  a.fill(0, 400, 3);
  expect_ok(va->post_send(a.message(0, 400), a.arena.handle), "post send");
  const iovec one{head, 5};
  bool reaped = false;
  if (va->send_inline(&one, 1) == via::Result::not_done) {
    ASSERT_NE(wait_done(va, false), nullptr);
    reaped = true;
    expect_ok(va->send_inline(&one, 1), "inline send once the queue is clear");
  }
  VIP_DESCRIPTOR* r0 = wait_done(vb, true);
  VIP_DESCRIPTOR* r1 = wait_done(vb, true);
  VIP_DESCRIPTOR* r2 = wait_done(vb, true);
  ASSERT_TRUE(r0 && r1 && r2);
  EXPECT_EQ(r0->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE));
  EXPECT_EQ(r0->CS.Length, 256u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b.arena.data(0)), 5), "head:");
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b.arena.data(5)), tail.size()), std::string(tail.size(), 'x'));
  EXPECT_EQ(r1->CS.Length, 400u);
  EXPECT_EQ(b.mismatch(512, 400, 3), -1) << "the posted send arrived second";
  EXPECT_EQ(r2->CS.Length, 5u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b.arena.data(1024)), 5), "Head:");
  // An empty piece may have a null base (a message with no payload).
  const iovec with_empty[2] = {{head, 5}, {nullptr, 0}};
  expect_ok(va->send_inline(with_empty, 2), "inline send with an empty piece");
  VIP_DESCRIPTOR* r3 = wait_done(vb, true);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->CS.Length, 5u);
  if (!reaped) {
    ASSERT_NE(wait_done(va, false), nullptr);
  }
  VIP_DESCRIPTOR* d;
  EXPECT_EQ(va->send_done(d), via::Result::not_done) << "only the posted send completes";
}

// An inline send takes a whole frame of the link: a mid-size message leaves
// from the caller's (unregistered) memory straight into the link, with no
// bounce buffer or descriptor between.
TEST_P(Engine, InlineSendCarriesOneFrameOfTheLink) {
  auto [va, vb] = connect();
  const std::size_t limit = va->max_inline_send();
  ASSERT_GE(limit, 32u * 1024) << "one frame of shm or tcp";
  ASSERT_LE(limit, va->attributes().max_transfer);
  for (const std::size_t size : {std::size_t(4096), std::size_t(16 * 1024 + 56), limit}) {
    SCOPED_TRACE("size " + std::to_string(size));
    expect_ok(vb->post_recv(b.message(0, size), b.arena.handle), "recv");
    std::vector<unsigned char> message(size);
    for (std::size_t i = 0; i < size; ++i) message[i] = static_cast<unsigned char>(i * 7 + size);
    const iovec whole{message.data(), size};
    via::Result sent;
    pump({a.nic.get(), b.nic.get()}, [&] { return (sent = va->send_inline(&whole, 1)) != via::Result::not_done; }, 5000);
    expect_ok(sent, "inline send");
    VIP_DESCRIPTOR* r = wait_done(vb, true);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE));
    EXPECT_EQ(r->CS.Length, size);
    EXPECT_EQ(std::memcmp(b.arena.data(0), message.data(), size), 0);
  }
  VIP_DESCRIPTOR* d;
  EXPECT_EQ(va->send_done(d), via::Result::not_done) << "no descriptor, no completion";
}

TEST_P(Engine, InlineSendRefusesWhatItCannotCarry) {
  char byte = 1;
  const iovec one{&byte, 1};
  via::Vi* idle = a.create_vi(VIP_SERVICE_RELIABLE_DELIVERY, nullptr, nullptr);
  EXPECT_EQ(idle->send_inline(&one, 1), via::Result::invalid_state) << "not connected";
  EXPECT_EQ(idle->max_inline_send(), 0u) << "not connected";
  auto [va, vb] = connect();
  std::vector<char> big(va->max_inline_send() + 1);
  const iovec too_long{big.data(), big.size()};
  EXPECT_EQ(va->send_inline(&too_long, 1), via::Result::invalid_parameter);
  auto [ra, rb] = connect(VIP_SERVICE_RELIABLE_RECEPTION, nullptr, nullptr, "r");
  EXPECT_EQ(ra->send_inline(&one, 1), via::Result::invalid_reliability_level);
  // A broken VI refuses too; the caller's descriptor path reports the failure.
  expect_ok(va->send_inline(&one, 1), "send with no receive posted");
  pump({a.nic.get(), b.nic.get()}, [&] { return vb->state() == via::ViState::error; }, 5000);
  EXPECT_EQ(vb->state(), via::ViState::error) << "a reliable VI breaks on a message with no receive";
  pump({a.nic.get(), b.nic.get()}, [&] { return va->state() == via::ViState::error; }, 5000);
  EXPECT_EQ(va->send_inline(&one, 1), via::Result::invalid_state);
}

TEST_P(Engine, RdmaWriteEverySizeWithAndWithoutImmediate) {
  auto [va, vb] = connect();
  std::uint64_t seed = 100;
  for (bool immediate : {false, true}) {
    for (std::size_t size : kSizes) {
      if (size == 0) continue;
      SCOPED_TRACE("size " + std::to_string(size) + (immediate ? " with immediate" : ""));
      std::memset(b.arena.data(), 0, size + 16);
      a.fill(0, size, seed);
      if (immediate) expect_ok(vb->post_recv(b.message(kArena - 64, 0), b.arena.handle), "post recv");
      VIP_DESCRIPTOR* w = a.rdma(VIP_CONTROL_OP_RDMAWRITE | (immediate ? VIP_CONTROL_IMMEDIATE : 0),
                                 std::uintptr_t(b.arena.data(8)), b.arena.handle, 0, size);
      w->CS.ImmediateData = std::uint32_t(seed);
      expect_ok(va->post_send(w, a.arena.handle), "post write");
      VIP_DESCRIPTOR* s = wait_done(va, false);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE));
      if (immediate) {
        VIP_DESCRIPTOR* r = wait_done(vb, true);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->CS.Status,
                  std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE));
        EXPECT_EQ(r->CS.ImmediateData, std::uint32_t(seed));
        EXPECT_EQ(r->CS.Length, size);
      } else {
        // Without immediate data the target takes no part: make sure the bytes got there.
        pump({a.nic.get(), b.nic.get()}, [&] { return b.mismatch(8, size, seed) == -1; });
      }
      EXPECT_EQ(b.mismatch(8, size, seed), -1);
      EXPECT_EQ(std::to_integer<int>(b.arena.data()[7]), 0) << "wrote before the target";
      EXPECT_EQ(std::to_integer<int>(b.arena.data()[8 + size]), 0) << "wrote past the target";
      ++seed;
    }
  }
}

TEST_P(Engine, RdmaWriteWithImmediateWhenThePeersRingIsFull) {
  auto [va, vb] = connect();
  // The peer does not poll while 256 small sends fill every cell of its ring.
  for (int i = 0; i < 256; ++i) expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "post recv");
  for (int i = 0; i < 256; ++i) expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "post send");
  a.fill(4096, 32768, 21);
  VIP_DESCRIPTOR* w = a.rdma(VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, std::uintptr_t(b.arena.data(65536)),
                             b.arena.handle, 4096, 32768);
  w->CS.ImmediateData = 0xABCD;
  expect_ok(va->post_send(w, a.arena.handle), "post write");
  bool written = false, immediate = false;
  int sends = 0;
  EXPECT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] {
    VIP_DESCRIPTOR* d;
    while (va->send_done(d) == via::Result::success) {
      EXPECT_EQ(status_err(d), 0u);
      ++sends;
      written |= d == w;
    }
    while (vb->recv_done(d) == via::Result::success) {
      if (d->CS.Status & VIP_STATUS_IMMEDIATE) {
        immediate = true;
        EXPECT_EQ(d->CS.ImmediateData, 0xABCDu);
      } else {
        b.release(d);
        expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "repost");
      }
    }
    return written && immediate;
  }));
  EXPECT_EQ(sends, 257);
  EXPECT_EQ(b.mismatch(65536, 32768, 21), -1);
}

TEST_P(Engine, RdmaReadEverySize) {
  auto [va, vb] = connect();
  std::uint64_t seed = 500;
  for (std::size_t size : kSizes) {
    if (size == 0) continue;
    SCOPED_TRACE("size " + std::to_string(size));
    b.fill(16, size, seed);
    std::memset(a.arena.data(), 0, size + 1);
    const auto direct_before = a.nic->counters().direct_reads;
    expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data(16)), b.arena.handle, 0, size),
                            a.arena.handle),
              "post read");
    VIP_DESCRIPTOR* s = wait_done(va, false);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ));
    EXPECT_EQ(a.mismatch(0, size, seed), -1);
    EXPECT_EQ(std::to_integer<int>(a.arena.data()[size]), 0);
    // Below the read threshold (here VIASTACK_DIRECT_THRESHOLD's 16 KiB, the
    // lower of the two) the data comes through the rings, as a send's does.
    EXPECT_EQ(a.nic->counters().direct_reads - direct_before, cma() && size >= 16384 ? 1u : 0u);
    ++seed;
  }
}

// A read served through the rings whose target's engine does not take it up
// (its process computing elsewhere) is copied by the reader once
// VIASTACK_READ_TAKEOVER_US has passed; the request, when the target does
// look, is passed over, and the next read goes through the rings again.
TEST_P(Engine, ARingReadItsTargetDoesNotTakeUpIsCopiedByTheReader) {
  if (!cma()) GTEST_SKIP() << "the reader takes a read over by single copy, which needs CMA";
  auto [va, vb] = connect();
  const std::size_t size = 8192;  // below the read threshold (16 KiB here): through the rings
  b.fill(64, size, 31);
  std::memset(a.arena.data(), 0, size);
  const via::NicCounters before = a.nic->counters();
  const auto start = std::chrono::steady_clock::now();
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data(64)), b.arena.handle, 0, size),
                          a.arena.handle),
            "post read");
  VIP_DESCRIPTOR* d = nullptr;
  pump({a.nic.get()}, [&] { return va->send_done(d) == via::Result::success; }, 10000);  // the target never polls
  ASSERT_NE(d, nullptr) << "the reader did not take the read over";
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(kReadTakeoverUs / 1000));
  EXPECT_EQ(a.mismatch(0, size, 31), -1);
  EXPECT_EQ(a.nic->counters().reads_taken_over - before.reads_taken_over, 1u);
  EXPECT_EQ(a.nic->counters().direct_reads - before.direct_reads, 1u);
  // The target now finds the request: it must not answer it (a response with
  // no read outstanding would break the reader's VI).
  for (int i = 0; i < 1000; ++i) b.nic->progress();
  for (std::uint64_t seed = 40; seed < 44; ++seed) {
    b.fill(64, size, seed);
    std::memset(a.arena.data(), 0, size);
    expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data(64)), b.arena.handle, 0, size),
                            a.arena.handle),
              "post read");
    d = wait_done(va, false);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ));
    EXPECT_EQ(a.mismatch(0, size, seed), -1);
  }
  EXPECT_EQ(a.nic->counters().reads_taken_over - before.reads_taken_over, 1u) << "the target served these";
  EXPECT_EQ(va->state(), via::ViState::connected);
  EXPECT_EQ(vb->state(), via::ViState::connected);
}

// Several reads in flight, the target polling only now and then: each is
// served through the rings or taken over, never both, and each arrives whole.
TEST_P(Engine, RingReadsTakenOverOrServedArriveWholeAndInOrder) {
  if (!cma()) GTEST_SKIP() << "taking a read over needs CMA";
  auto [va, vb] = connect();
  constexpr std::size_t kSize = 12288, kReads = 12;
  for (std::size_t i = 0; i < kReads; ++i) b.fill(i * kSize, kSize, 100 + i);
  std::memset(a.arena.data(), 0, kReads * kSize);
  const via::NicCounters before = a.nic->counters();
  // A read posted every 40 ms, the target polled every 150: some requests wait
  // past the takeover time (100 ms), others are taken up before it.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::size_t posted = 0, done = 0;
  auto next_target_poll = start;
  while (done < kReads && Clock::now() - start < std::chrono::seconds(20)) {
    const auto now = Clock::now();
    if (posted < kReads && now - start >= posted * std::chrono::milliseconds(40)) {
      expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data(posted * kSize)),
                                     b.arena.handle, posted * kSize, kSize),
                              a.arena.handle),
                "post read");
      ++posted;
    }
    a.nic->progress();
    if (now >= next_target_poll) {
      b.nic->progress();
      next_target_poll = now + std::chrono::milliseconds(150);
    }
    VIP_DESCRIPTOR* d = nullptr;
    while (done < kReads && va->send_done(d) == via::Result::success) {
      EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ)) << "read " << done;
      ++done;
    }
  }
  ASSERT_EQ(done, kReads);
  for (std::size_t i = 0; i < kReads; ++i) EXPECT_EQ(a.mismatch(i * kSize, kSize, 100 + i), -1) << "read " << i;
  const via::NicCounters& after = a.nic->counters();
  EXPECT_EQ(after.reads_taken_over - before.reads_taken_over, after.direct_reads - before.direct_reads);
  // Posted at 0, 40, 80, ... ms and served at 0, 150, 300, ...: the first
  // is served, the one of 40 ms waits past 100 ms, the one of 120 ms does not.
  EXPECT_GT(after.reads_taken_over - before.reads_taken_over, 0u);
  EXPECT_LT(after.reads_taken_over - before.reads_taken_over, kReads);
  for (int i = 0; i < 1000; ++i) {
    a.nic->progress();
    b.nic->progress();
  }
  EXPECT_EQ(va->state(), via::ViState::connected);
  EXPECT_EQ(vb->state(), via::ViState::connected);
}

// A single-copy read offers its last half to the target's engine
// (VIASTACK_DIRECT_READ_SHARE): a target that polls while the reader copies
// the first half writes the second itself.
TEST_P(Engine, ATargetThatPollsWritesItsShareOfASingleCopyRead) {
  if (!cma()) GTEST_SKIP() << "single-copy reads need CMA";
  auto [va, vb] = connect();
  const std::size_t size = 4u << 20;
  // Written before the target's thread starts and never again: the ring that
  // orders later writes before the target's reads is mapped twice in this
  // process, once by each NIC, which ThreadSanitizer cannot see through.
  constexpr std::uint64_t kSeed = 900;
  b.fill(kArena / 2, size, kSeed);
  std::atomic<std::uint64_t> shares_written{0};
  std::atomic<bool> stop{false};
  std::thread target([&, nic = b.nic.get()] {
    while (!stop.load(std::memory_order_relaxed)) {
      nic->progress();
      shares_written.store(nic->counters().shared_read_writes, std::memory_order_relaxed);
    }
  });
  // The target thread may not run while a read lasts: try until it did.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int round = 1; shares_written.load() == 0 && std::chrono::steady_clock::now() < deadline; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::memset(a.arena.data(), 0, size);
    expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data(kArena / 2)), b.arena.handle,
                                   0, size),
                            a.arena.handle),
              "post read");
    VIP_DESCRIPTOR* d = nullptr;
    ASSERT_TRUE(pump({a.nic.get()}, [&] { return va->send_done(d) == via::Result::success; }));
    ASSERT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ));
    ASSERT_EQ(a.mismatch(0, size, kSeed), -1);
  }
  stop = true;
  target.join();
  EXPECT_GT(b.nic->counters().shared_read_writes, 0u) << "the target never wrote its share in 20 s of reads";
}

// The reader takes back an offer nobody claimed while it copied its own part;
// a target that looks only afterwards must not write into memory the
// program has got back.
TEST_P(Engine, AnOfferTheReaderTookBackIsNeverWritten) {
  if (!cma()) GTEST_SKIP() << "single-copy reads need CMA";
  auto [va, vb] = connect();
  const std::size_t size = 1u << 20;
  b.fill(0, size, 31);
  std::memset(a.arena.data(), 0, size);
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data()), b.arena.handle, 0, size),
                          a.arena.handle),
            "post read");
  VIP_DESCRIPTOR* d = nullptr;
  ASSERT_TRUE(pump({a.nic.get()}, [&] { return va->send_done(d) == via::Result::success; }));
  EXPECT_EQ(d->CS.Status, std::uint32_t(VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ));
  EXPECT_EQ(a.mismatch(0, size, 31), -1);
  std::memset(a.arena.data(), 0xAB, size);  // the program's again
  for (int i = 0; i < 1000; ++i) b.nic->progress();  // the target finds the offer now
  EXPECT_EQ(b.nic->counters().shared_read_writes, 0u);
  std::vector<std::byte> expected(size, std::byte{0xAB});
  EXPECT_EQ(std::memcmp(a.arena.data(), expected.data(), size), 0);
}

TEST_P(Engine, FencedSendWaitsForEarlierRdmaReads) {
  auto [va, vb] = connect();
  const std::size_t size = 200000;
  b.fill(0, size, 11);
  expect_ok(vb->post_recv(b.message(kArena / 2, 64), b.arena.handle), "post recv");
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(b.arena.data()), b.arena.handle, 0, size),
                          a.arena.handle),
            "post read");
  VIP_DESCRIPTOR* fenced = a.message(size, 8);
  fenced->CS.Control = VIP_CONTROL_QFENCE;
  expect_ok(va->post_send(fenced, a.arena.handle), "post fenced send");
  if (!cma()) {
    // Through the rings the read is still in flight: the target serves it, but
    // the fenced send must not reach it yet.
    for (int i = 0; i < 1000; ++i) b.nic->progress();
    VIP_DESCRIPTOR* r = nullptr;
    EXPECT_EQ(vb->recv_done(r), via::Result::not_done);
  }
  ASSERT_NE(wait_done(vb, true), nullptr);
  EXPECT_EQ(a.mismatch(0, size, 11), -1);
}

TEST_P(Engine, NotifyHandlersMayDisconnectTheirVi) {
  auto [va, vb] = connect();
  expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "post recv");
  expect_ok(vb->post_recv(b.message(64, 64), b.arena.handle), "post recv");
  VIP_DESCRIPTOR* notified = nullptr;
  vb->set_recv_notify([&, vb = vb](VIP_DESCRIPTOR* d) {
    notified = d;
    EXPECT_EQ(vb->disconnect(), via::Result::success);
  });
  expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "send");
  expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "send");  // arrives in the same poll
  EXPECT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return notified != nullptr; }));
  EXPECT_EQ(status_err(notified), 0u);
  EXPECT_EQ(vb->state(), via::ViState::idle);
}

// ---- protection ----

TEST_P(Engine, SendSegmentOutsideItsRegionFailsAndTouchesNothing) {
  auto [va, vb] = connect();
  std::memset(b.arena.data(), 0x5A, 256);
  expect_ok(vb->post_recv(b.message(0, 256), b.arena.handle), "post recv");
  VIP_DESCRIPTOR* send = a.message(0, 64);
  send->DS[0].Local.Data.Address = a.arena.base + a.arena.bytes - 10;  // runs past the region's end
  expect_ok(va->post_send(send, a.arena.handle), "post send");
  VIP_DESCRIPTOR* s = wait_done(va, false);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(status_err(s), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(std::to_integer<int>(b.arena.data()[i]), 0x5A);
  // Later descriptors on the broken VI complete flushed.
  expect_ok(va->post_recv(a.message(0, 8), a.arena.handle), "post recv after error");
  VIP_DESCRIPTOR* r = nullptr;
  EXPECT_EQ(va->recv_done(r), via::Result::success);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(status_err(r), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  // The peer learns that the connection broke, and flushes its receive.
  VIP_DESCRIPTOR* flushed = wait_done(vb, true);
  ASSERT_NE(flushed, nullptr);
  EXPECT_EQ(status_err(flushed), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  EXPECT_EQ(vb->state(), via::ViState::error);
}

TEST_P(Engine, SegmentRegisteredUnderAnotherTagIsRefused) {
  auto [va, vb] = connect();
  via::Ptag other;
  expect_ok(a.nic->create_ptag(other), "ptag");
  std::vector<std::byte> foreign(4096);
  via::MemHandle fh;
  expect_ok(a.nic->register_memory(foreign.data(), foreign.size(), via::MemAttributes{other, true, true}, fh), "reg");
  VIP_DESCRIPTOR* send = a.message(0, 64);
  send->DS[0].Local.Data.Address = foreign.data();
  send->DS[0].Local.Handle = fh;
  expect_ok(va->post_send(send, a.arena.handle), "post send");
  VIP_DESCRIPTOR* s = wait_done(va, false);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(status_err(s), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
}

TEST_P(Engine, RdmaWriteToMemoryWithoutRdmaWriteEnabledIsRefused) {
  auto [va, vb] = connect();
  std::vector<std::byte> target(4096, std::byte{0x33});
  via::MemHandle th;
  expect_ok(b.nic->register_memory(target.data(), target.size(), via::MemAttributes{b.ptag, false, true}, th), "reg");
  a.fill(0, 1000, 9);
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAWRITE, std::uintptr_t(target.data()), th, 0, 1000), a.arena.handle),
            "post write");
  // With single copy the initiator checks and fails the descriptor itself; through the
  // rings the target refuses and breaks the connection. Either way no byte lands.
  pump({a.nic.get(), b.nic.get()}, [&] { return va->state() == via::ViState::error && vb->state() == via::ViState::error; });
  EXPECT_EQ(va->state(), via::ViState::error);
  EXPECT_EQ(vb->state(), via::ViState::error);
  for (std::byte x : target) ASSERT_EQ(std::to_integer<int>(x), 0x33);
  VIP_DESCRIPTOR* s = nullptr;
  ASSERT_EQ(va->send_done(s), via::Result::success);
  if (cma()) {
    EXPECT_EQ(status_err(s), std::uint32_t(VIP_STATUS_RDMA_PROT_ERROR));
  }
}

TEST_P(Engine, RdmaReadFromMemoryWithoutRdmaReadEnabledIsRefused) {
  auto [va, vb] = connect();
  std::vector<std::byte> source(4096, std::byte{0x44});
  via::MemHandle sh;
  expect_ok(b.nic->register_memory(source.data(), source.size(), via::MemAttributes{b.ptag, true, false}, sh), "reg");
  std::memset(a.arena.data(), 0, 100);
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(source.data()), sh, 0, 100), a.arena.handle),
            "post read");
  VIP_DESCRIPTOR* s = wait_done(va, false);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(status_err(s), std::uint32_t(VIP_STATUS_RDMA_PROT_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
  EXPECT_EQ(std::to_integer<int>(a.arena.data()[0]), 0);
}

TEST_P(Engine, RdmaReadStopsWhenTheSourceIsDeregisteredMidway) {
  if (cma()) GTEST_SKIP() << "a single-copy read completes before the target could deregister";
  if (tcp()) GTEST_SKIP() << "loopback TCP buffers take the whole read before the target could deregister";
  auto [va, vb] = connect();
  auto source = std::make_unique<std::vector<std::byte>>(2u << 20, std::byte{0x66});
  via::MemHandle sh;
  expect_ok(b.nic->register_memory(source->data(), source->size(), via::MemAttributes{b.ptag, false, true}, sh), "reg");
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAREAD, std::uintptr_t(source->data()), sh, 0, source->size()),
                          a.arena.handle),
            "post read");
  a.nic->progress();  // the request goes out
  for (int i = 0; i < 100; ++i) b.nic->progress();  // the target sends what fits in the ring
  expect_ok(b.nic->deregister_memory(source->data(), sh), "dereg");
  source.reset();  // freed: the rest of the read must not touch it
  VIP_DESCRIPTOR* s = wait_done(va, false);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(status_err(s), std::uint32_t(VIP_STATUS_RDMA_PROT_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
}

TEST_P(Engine, RdmaWithAStaleHandleIsRefused) {
  auto [va, vb] = connect();
  std::vector<std::byte> target(4096, std::byte{0x21});
  via::MemHandle th;
  expect_ok(b.nic->register_memory(target.data(), target.size(), via::MemAttributes{b.ptag, true, true}, th), "reg");
  expect_ok(b.nic->deregister_memory(target.data(), th), "dereg");
  expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAWRITE, std::uintptr_t(target.data()), th, 0, 64), a.arena.handle),
            "post write");
  pump({a.nic.get(), b.nic.get()}, [&] { return va->state() == via::ViState::error; });
  EXPECT_EQ(va->state(), via::ViState::error);
  for (std::byte x : target) ASSERT_EQ(std::to_integer<int>(x), 0x21);
}

// A VI remembers the regions its last posts were checked against (a post
// usually names them again); deregistering a region or changing its tag must
// take it out of that memory, or a later post would pass on a dead handle.
TEST_P(Engine, APostNamingADataRegionDeregisteredAfterAnEarlierPostIsRefused) {
  auto [va, vb] = connect();
  std::vector<std::byte> buffer(4096, std::byte{0x17});
  via::MemHandle bh;
  expect_ok(a.nic->register_memory(buffer.data(), buffer.size(), via::MemAttributes{a.ptag, false, false}, bh), "reg");
  auto send_from_buffer = [&, va = va] {
    VIP_DESCRIPTOR* send = a.message(0, 64);
    send->DS[0].Local.Data.Address = buffer.data();
    send->DS[0].Local.Handle = bh;
    expect_ok(va->post_send(send, a.arena.handle), "post send");
    return wait_done(va, false);
  };
  expect_ok(vb->post_recv(b.message(0, 256), b.arena.handle), "post recv");
  VIP_DESCRIPTOR* first = send_from_buffer();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(status_err(first), 0u);
  expect_ok(a.nic->deregister_memory(buffer.data(), bh), "dereg");
  VIP_DESCRIPTOR* second = send_from_buffer();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(status_err(second), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
}

TEST_P(Engine, APostNamingADataRegionMovedToAnotherTagAfterAnEarlierPostIsRefused) {
  auto [va, vb] = connect();
  via::Ptag other;
  expect_ok(a.nic->create_ptag(other), "ptag");
  std::vector<std::byte> buffer(4096);
  via::MemHandle bh;
  expect_ok(a.nic->register_memory(buffer.data(), buffer.size(), via::MemAttributes{a.ptag, false, false}, bh), "reg");
  auto post_recv_into_buffer = [&, va = va] {
    VIP_DESCRIPTOR* recv = a.message(0, 64);
    recv->DS[0].Local.Data.Address = buffer.data();
    recv->DS[0].Local.Handle = bh;
    expect_ok(va->post_recv(recv, a.arena.handle), "post recv");
  };
  post_recv_into_buffer();
  EXPECT_EQ(va->state(), via::ViState::connected);
  expect_ok(a.nic->set_memory_attributes(buffer.data(), bh, via::MemAttributes{other, false, false}), "set attrs");
  post_recv_into_buffer();
  EXPECT_EQ(va->state(), via::ViState::error);
  VIP_DESCRIPTOR* flushed = wait_done(va, true);
  ASSERT_NE(flushed, nullptr);
  EXPECT_EQ(status_err(flushed), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  VIP_DESCRIPTOR* refused = wait_done(va, true);
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(status_err(refused), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
}

TEST_P(Engine, APostWhoseDescriptorRegionWasDeregisteredAfterAnEarlierPostIsRefused) {
  auto [va, vb] = connect();
  // Descriptors in a region of their own, apart from the arena holding the data.
  std::vector<VIP_DESCRIPTOR> descs(4);
  const std::size_t region_bytes = descs.size() * sizeof(VIP_DESCRIPTOR);
  via::MemHandle dh;
  expect_ok(a.nic->register_memory(descs.data(), region_bytes, via::MemAttributes{a.ptag, false, false}, dh), "reg");
  auto base = reinterpret_cast<std::uintptr_t>(descs.data());
  auto* desc = reinterpret_cast<VIP_DESCRIPTOR*>((base + VIP_DESCRIPTOR_ALIGNMENT - 1) &
                                                 ~std::uintptr_t(VIP_DESCRIPTOR_ALIGNMENT - 1));
  auto post_recv_with_own_descriptor = [&, va = va](int i) {
    desc[i] = *a.message(0, 64);
    return va->post_recv(&desc[i], dh);
  };
  expect_ok(post_recv_with_own_descriptor(0), "post recv");
  EXPECT_EQ(va->state(), via::ViState::connected);
  VIP_DESCRIPTOR* d = nullptr;
  expect_ok(a.nic->deregister_memory(descs.data(), dh), "dereg");
  EXPECT_EQ(post_recv_with_own_descriptor(1), via::Result::invalid_parameter);
  // Refused before it was queued: nothing completes, the VI stays usable.
  EXPECT_EQ(va->state(), via::ViState::connected);
  EXPECT_EQ(va->recv_done(d), via::Result::not_done);
}

// A post of one segment from the remembered regions takes a shorter way
// (ViImpl::post_small_send, remembered_single_segment): it must refuse what
// the full checks refuse, at the edges of the remembered regions too.
TEST_P(Engine, AOneSegmentSendRunningPastTheEndOfTheRegionTheLastSendPassedInIsRefused) {
  auto [va, vb] = connect();
  std::vector<std::byte> buffer(4096, std::byte{0x17});
  via::MemHandle bh;
  expect_ok(a.nic->register_memory(buffer.data(), buffer.size(), via::MemAttributes{a.ptag, false, false}, bh), "reg");
  auto send_from = [&, va = va](std::size_t offset) {
    VIP_DESCRIPTOR* send = a.message(0, 64);
    send->DS[0].Local.Data.Address = buffer.data() + offset;
    send->DS[0].Local.Handle = bh;
    expect_ok(va->post_send(send, a.arena.handle), "post send");
    return wait_done(va, false);
  };
  expect_ok(vb->post_recv(b.message(0, 256), b.arena.handle), "post recv");
  VIP_DESCRIPTOR* first = send_from(0);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(status_err(first), 0u);
  VIP_DESCRIPTOR* second = send_from(buffer.size() - 8);  // 8 bytes in the region, 56 past it
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(status_err(second), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
}

TEST_P(Engine, AOneSegmentSendFromARegionOfAnotherTagAfterAnAcceptedSendIsRefused) {
  auto [va, vb] = connect();
  via::Ptag other;
  expect_ok(a.nic->create_ptag(other), "ptag");
  std::vector<std::byte> foreign(4096);
  via::MemHandle fh;
  expect_ok(a.nic->register_memory(foreign.data(), foreign.size(), via::MemAttributes{other, false, false}, fh), "reg");
  expect_ok(vb->post_recv(b.message(0, 256), b.arena.handle), "post recv");
  expect_ok(va->post_send(a.message(0, 64), a.arena.handle), "post send from the arena");
  VIP_DESCRIPTOR* first = wait_done(va, false);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(status_err(first), 0u);
  VIP_DESCRIPTOR* send = a.message(0, 64);
  send->DS[0].Local.Data.Address = foreign.data();
  send->DS[0].Local.Handle = fh;
  expect_ok(va->post_send(send, a.arena.handle), "post send from the other tag's region");
  VIP_DESCRIPTOR* second = wait_done(va, false);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(status_err(second), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
  EXPECT_EQ(va->state(), via::ViState::error);
}

// The region ends inside the third descriptor: its control segment is
// registered, its data segment is not.
TEST_P(Engine, AOneSegmentDescriptorWhoseSegmentLiesPastTheRememberedDescriptorRegionIsRefused) {
  auto [va, vb] = connect();
  std::vector<VIP_DESCRIPTOR> descs(4);
  auto base = reinterpret_cast<std::uintptr_t>(descs.data());
  auto* desc = reinterpret_cast<VIP_DESCRIPTOR*>((base + VIP_DESCRIPTOR_ALIGNMENT - 1) &
                                                 ~std::uintptr_t(VIP_DESCRIPTOR_ALIGNMENT - 1));
  via::MemHandle dh;
  expect_ok(a.nic->register_memory(desc, 2 * sizeof(VIP_DESCRIPTOR) + sizeof(VIP_CONTROL_SEGMENT),
                                   via::MemAttributes{a.ptag, false, false}, dh),
            "reg");
  for (int i = 0; i < 3; ++i) desc[i] = *a.message(std::size_t(i) * 64, 64);
  expect_ok(va->post_recv(&desc[0], dh), "post recv");
  EXPECT_EQ(va->post_recv(&desc[2], dh), via::Result::invalid_parameter);
  expect_ok(vb->post_recv(b.message(0, 256), b.arena.handle), "post recv");
  expect_ok(va->post_send(&desc[1], dh), "post send");
  VIP_DESCRIPTOR* sent = wait_done(va, false);
  ASSERT_EQ(sent, &desc[1]);
  EXPECT_EQ(status_err(sent), 0u);
  EXPECT_EQ(va->post_send(&desc[2], dh), via::Result::invalid_parameter);
  EXPECT_EQ(va->state(), via::ViState::connected);
}

TEST_P(Engine, AReceivePostedAfterTheViMovedToAnotherTagIsCheckedUnderTheNewTag) {
  via::Vi* vi = a.create_vi();  // idle: receives may be posted, attributes changed
  expect_ok(vi->post_recv(a.message(0, 64), a.arena.handle), "post recv under the arena's tag");
  via::Ptag other;
  expect_ok(a.nic->create_ptag(other), "ptag");
  via::ViAttributes attrs = vi->attributes();
  attrs.ptag = other;
  expect_ok(vi->set_attributes(attrs), "set attributes");
  // The descriptor in the arena is no longer under the VI's tag.
  EXPECT_EQ(vi->post_recv(a.message(0, 64), a.arena.handle), via::Result::invalid_parameter);
  // A descriptor under the new tag whose data is still in the arena is refused for its data.
  std::vector<VIP_DESCRIPTOR> descs(2);
  via::MemHandle dh;
  expect_ok(a.nic->register_memory(descs.data(), descs.size() * sizeof(VIP_DESCRIPTOR),
                                   via::MemAttributes{other, false, false}, dh),
            "reg");
  auto base = reinterpret_cast<std::uintptr_t>(descs.data());
  auto* desc = reinterpret_cast<VIP_DESCRIPTOR*>((base + VIP_DESCRIPTOR_ALIGNMENT - 1) &
                                                 ~std::uintptr_t(VIP_DESCRIPTOR_ALIGNMENT - 1));
  *desc = *a.message(0, 64);
  expect_ok(vi->post_recv(desc, dh), "post recv");
  EXPECT_EQ(vi->state(), via::ViState::error);
  VIP_DESCRIPTOR* d = nullptr;
  ASSERT_EQ(vi->recv_done(d), via::Result::success);
  EXPECT_EQ(status_err(d), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  ASSERT_EQ(vi->recv_done(d), via::Result::success);
  EXPECT_EQ(d, desc);
  EXPECT_EQ(status_err(d), std::uint32_t(VIP_STATUS_PROTECTION_ERROR));
}

// ---- receive-side errors, by reliability level ----

TEST_P(Engine, MessageLongerThanTheReceiveOnUnreliableViIsALengthError) {
  auto [va, vb] = connect(VIP_SERVICE_UNRELIABLE);
  expect_ok(vb->post_recv(b.message(0, 10), b.arena.handle), "post recv");
  expect_ok(vb->post_recv(b.message(100, 100), b.arena.handle), "post recv");
  a.fill(0, 100000, 3);
  expect_ok(va->post_send(a.message(0, 100000), a.arena.handle), "too long");
  expect_ok(va->post_send(a.message(0, 50), a.arena.handle), "fits");
  VIP_DESCRIPTOR* r1 = wait_done(vb, true);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(status_err(r1), std::uint32_t(VIP_STATUS_LENGTH_ERROR));
  VIP_DESCRIPTOR* r2 = wait_done(vb, true);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(status_err(r2), 0u);
  EXPECT_EQ(r2->CS.Length, 50u);
  EXPECT_EQ(b.mismatch(100, 50, 3), -1);
  EXPECT_EQ(vb->state(), via::ViState::connected);
}

// The mesh's re-post (ViImpl::repost_recv) queues a descriptor post_recv
// accepted before without checking it again: its capacity is still the sum of
// its segments, no more and no less, and the messages land in them.
TEST_P(Engine, AReceivePostedAgainTakesMessagesUpToItsSegmentsAndNoMore) {
  auto [va, vb] = connect(VIP_SERVICE_UNRELIABLE);
  const std::size_t capacity = 300;
  VIP_DESCRIPTOR* recv = b.message(0, capacity, 2);
  expect_ok(vb->post_recv(recv, b.arena.handle), "post recv");
  a.fill(0, capacity, 21);
  expect_ok(va->post_send(a.message(0, 40), a.arena.handle), "first send");
  VIP_DESCRIPTOR* r = wait_done(vb, true);
  ASSERT_EQ(r, recv);
  EXPECT_EQ(status_err(r), 0u);
  EXPECT_EQ(b.mismatch(0, 40, 21), -1);

  // One byte more than its segments hold: a length error, the VI stays up.
  expect_ok(via::impl(*vb).repost_recv(recv), "post again");
  expect_ok(va->post_send(a.message(0, capacity + 1), a.arena.handle), "too long");
  r = wait_done(vb, true);
  ASSERT_EQ(r, recv);
  EXPECT_EQ(status_err(r), std::uint32_t(VIP_STATUS_LENGTH_ERROR));
  EXPECT_EQ(vb->state(), via::ViState::connected);

  // Exactly what they hold, across both segments.
  std::memset(b.arena.data(), 0, capacity);
  expect_ok(via::impl(*vb).repost_recv(recv), "post again");
  expect_ok(va->post_send(a.message(0, capacity), a.arena.handle), "fits");
  r = wait_done(vb, true);
  ASSERT_EQ(r, recv);
  EXPECT_EQ(status_err(r), 0u);
  EXPECT_EQ(r->CS.Length, capacity);
  EXPECT_EQ(b.mismatch(0, capacity, 21), -1);
}

// The mesh's batch: completions it saw leave the queue together
// (retire_recvs), and their descriptors go back together (repost_recvs),
// each taking messages up to the sum of its segments, in order.
TEST_P(Engine, ReceivesPostedAgainInABatchTakeMessagesInOrderUpToTheirSegments) {
  auto [va, vb] = connect(VIP_SERVICE_UNRELIABLE);
  VIP_DESCRIPTOR* recvs[3] = {b.message(0, 300, 2), b.message(1000, 100), b.message(2000, 100)};
  for (VIP_DESCRIPTOR* d : recvs) expect_ok(vb->post_recv(d, b.arena.handle), "post recv");
  a.fill(0, 301, 31);
  for (int i = 0; i < 3; ++i) expect_ok(va->post_send(a.message(0, 10), a.arena.handle), "first sends");
  ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return recvs[2]->CS.Status & VIP_STATUS_DONE; }));
  via::impl(*vb).retire_recvs(3);
  VIP_DESCRIPTOR* left = nullptr;
  EXPECT_EQ(vb->recv_done(left), via::Result::not_done) << "the three left the queue";

  EXPECT_EQ(via::impl(*vb).repost_recvs(recvs, 3), 3u);
  std::memset(b.arena.data(), 0, 300);
  expect_ok(va->post_send(a.message(0, 300), a.arena.handle), "fills the first's two segments");
  expect_ok(va->post_send(a.message(0, 101), a.arena.handle), "one byte too long for the second");
  expect_ok(va->post_send(a.message(0, 100), a.arena.handle), "fits the third");
  for (int i = 0; i < 3; ++i) {
    VIP_DESCRIPTOR* r = wait_done(vb, true);
    ASSERT_EQ(r, recvs[i]) << i;
    EXPECT_EQ(status_err(r), i == 1 ? std::uint32_t(VIP_STATUS_LENGTH_ERROR) : 0u) << i;
  }
  EXPECT_EQ(recvs[0]->CS.Length, 300u);
  EXPECT_EQ(b.mismatch(0, 300, 31), -1);
  EXPECT_EQ(recvs[2]->CS.Length, 100u);
  EXPECT_EQ(b.mismatch(2000, 100, 31), -1);
  EXPECT_EQ(vb->state(), via::ViState::connected);
}

TEST_P(Engine, MessageLongerThanTheReceiveOnReliableViBreaksIt) {
  auto [va, vb] = connect(VIP_SERVICE_RELIABLE_DELIVERY);
  expect_ok(vb->post_recv(b.message(0, 10), b.arena.handle), "post recv");
  expect_ok(va->post_send(a.message(0, 11), a.arena.handle), "too long");
  VIP_DESCRIPTOR* r = wait_done(vb, true);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(status_err(r), std::uint32_t(VIP_STATUS_LENGTH_ERROR));
  EXPECT_EQ(vb->state(), via::ViState::error);
  pump({a.nic.get(), b.nic.get()}, [&] { return va->state() == via::ViState::error; });
  EXPECT_EQ(va->state(), via::ViState::error);
}

TEST_P(Engine, NoReceivePostedDropsOnUnreliableAndBreaksReliable) {
  {
    auto [va, vb] = connect(VIP_SERVICE_UNRELIABLE, nullptr, nullptr, "u");
    // A small message and one large enough for the single-copy path: both
    // dropped, both sends complete (a dropped direct send still releases its buffer).
    expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "send");
    expect_ok(va->post_send(a.message(0, 100000), a.arena.handle), "send");
    pump({a.nic.get(), b.nic.get()}, [&] { return b.nic->counters().dropped_no_receive == 2; });
    EXPECT_EQ(b.nic->counters().dropped_no_receive, 2u);
    EXPECT_NE(wait_done(va, false), nullptr);
    EXPECT_NE(wait_done(va, false), nullptr);
    EXPECT_EQ(vb->state(), via::ViState::connected);
    // The connection still works.
    expect_ok(vb->post_recv(b.message(0, 100000), b.arena.handle), "recv");
    a.fill(0, 100000, 5);
    expect_ok(va->post_send(a.message(0, 100000), a.arena.handle), "send");
    ASSERT_NE(wait_done(vb, true), nullptr);
    EXPECT_EQ(b.mismatch(0, 100000, 5), -1);
  }
  {
    auto [va, vb] = connect(VIP_SERVICE_RELIABLE_DELIVERY, nullptr, nullptr, "r");
    expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "send");
    pump({a.nic.get(), b.nic.get()}, [&] { return vb->state() == via::ViState::error && va->state() == via::ViState::error; });
    EXPECT_EQ(vb->state(), via::ViState::error);
    EXPECT_EQ(va->state(), via::ViState::error);
  }
}

TEST_P(Engine, ReliableReceptionCompletesTheSendOnlyOnceTheDataIsPlaced) {
  auto [va, vb] = connect(VIP_SERVICE_RELIABLE_RECEPTION);
  expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "post recv");
  expect_ok(va->post_send(a.message(0, 64), a.arena.handle), "post send");
  VIP_DESCRIPTOR* s = nullptr;
  for (int i = 0; i < 1000; ++i) a.nic->progress();  // only the sender moves
  EXPECT_EQ(va->send_done(s), via::Result::not_done);
  s = wait_done(va, false);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(status_err(s), 0u);
  VIP_DESCRIPTOR* r = nullptr;
  EXPECT_EQ(vb->recv_done(r), via::Result::success);
}

TEST_P(Engine, ReliableDeliveryCompletesTheSendOnHandOff) {
  auto [va, vb] = connect(VIP_SERVICE_RELIABLE_DELIVERY);
  expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "post recv");
  expect_ok(va->post_send(a.message(0, 64), a.arena.handle), "post send");
  VIP_DESCRIPTOR* s = nullptr;
  EXPECT_EQ(va->send_done(s), via::Result::success);
}

// ---- completion queues, disconnect, connection set-up ----

TEST_P(Engine, OneCompletionQueueServesManyVis) {
  via::Cq* cq;
  expect_ok(b.nic->create_cq(64, cq), "cq");
  std::vector<std::pair<via::Vi*, via::Vi*>> pairs;
  for (char tag : {'0', '1', '2', '3'}) pairs.push_back(connect(VIP_SERVICE_RELIABLE_DELIVERY, nullptr, cq, {'v', tag}));
  for (int i = 0; i < 4; ++i) expect_ok(pairs[i].second->post_recv(b.message(std::size_t(i) * 64, 64), b.arena.handle), "recv");
  for (int i : {2, 0, 3, 1}) expect_ok(pairs[i].first->post_send(a.message(0, 8), a.arena.handle), "send");
  std::vector<via::Vi*> seen;
  pump({a.nic.get(), b.nic.get()}, [&] {
    via::Cq::Entry e;
    while (cq->done(e) == via::Result::success) {
      EXPECT_TRUE(e.recv_queue);
      VIP_DESCRIPTOR* d;
      EXPECT_EQ(e.vi->recv_done(d), via::Result::success);
      seen.push_back(e.vi);
    }
    return seen.size() == 4;
  });
  ASSERT_EQ(seen.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::count(seen.begin(), seen.end(), pairs[i].second), 1);
}

TEST_P(Engine, DisconnectFlushesBothSides) {
  auto [va, vb] = connect();
  expect_ok(va->post_recv(a.message(0, 64), a.arena.handle), "recv a");
  expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "recv b");
  expect_ok(va->disconnect(), "disconnect");
  EXPECT_EQ(va->state(), via::ViState::idle);
  VIP_DESCRIPTOR* d = nullptr;
  ASSERT_EQ(va->recv_done(d), via::Result::success);
  EXPECT_EQ(status_err(d), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  d = wait_done(vb, true);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(status_err(d), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  EXPECT_EQ(vb->state(), via::ViState::error);
  expect_ok(vb->disconnect(), "disconnect b");
  EXPECT_EQ(vb->state(), via::ViState::idle);
  // Both VIs can connect again.
  EXPECT_EQ(va->post_send(a.message(0, 8), a.arena.handle), via::Result::invalid_state);
  expect_ok(a.nic->destroy_vi(va), "destroy");
}

TEST_P(Engine, AfterThePeerDisconnectsNothingReachesItsNextConnection) {
  auto [va, vb] = connect();
  expect_ok(vb->disconnect(), "disconnect");
  // b's VI (and so its ring slot) now serves a connection with a third NIC.
  Endpoint c;
  c.open(nic(2), 4096);
  EXPECT_EQ(connect_peers(b, "rank1", vb, c, "rank2", c.create_vi(), "y"),
            std::make_pair(via::Result::success, via::Result::success));
  expect_ok(vb->post_recv(b.message(0, 64), b.arena.handle), "post recv");
  // a has not noticed the disconnect yet and sends on its old VI.
  expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "send");
  VIP_DESCRIPTOR* d = nullptr;
  EXPECT_FALSE(pump({b.nic.get(), c.nic.get()}, [&] { return vb->recv_done(d) == via::Result::success; }, 200));
  // a's send is flushed once a notices that its peer went away; over tcp it
  // may have been handed to the kernel (complete, for reliable delivery)
  // before the peer's close arrived. Either way a's VI breaks.
  VIP_DESCRIPTOR* s = wait_done(va, false);
  ASSERT_NE(s, nullptr);
  if (!tcp() || status_err(s) != 0) {
    EXPECT_EQ(status_err(s), std::uint32_t(VIP_STATUS_DESC_FLUSHED_ERROR));
  }
  EXPECT_TRUE(pump({a.nic.get()}, [&] { return va->state() == via::ViState::error; }));
}

TEST_P(Engine, AWithdrawnPeerRequestIsNeverMatched) {
  via::Vi* va = a.create_vi();
  expect_ok(va->connect_peer_request(address(*a.nic, "rank0", "d"), address(*a.nic, "rank1", "d"), 10), "a");
  via::Result ra = via::Result::not_done;
  pump({a.nic.get()}, [&] { return (ra = va->connect_peer_done()) != via::Result::not_done; });
  EXPECT_EQ(ra, via::Result::timeout);
  // b asks for the same pair only now: a's old request must not connect it.
  via::Vi* vb = b.create_vi();
  expect_ok(vb->connect_peer_request(address(*b.nic, "rank1", "d"), address(*b.nic, "rank0", "d"), 200), "b");
  via::Result rb = via::Result::not_done;
  pump({b.nic.get()}, [&] { return (rb = vb->connect_peer_done()) != via::Result::not_done; });
  EXPECT_EQ(rb, via::Result::timeout);
  // a's VI (the same slot) serves a connection with a third NIC; nothing from b reaches it.
  Endpoint c;
  c.open(nic(2), 4096);
  EXPECT_EQ(connect_peers(a, "rank0", va, c, "rank2", c.create_vi(), "x"),
            std::make_pair(via::Result::success, via::Result::success));
  EXPECT_NE(vb->state(), via::ViState::connected);
}

TEST_P(Engine, ClientServerAcceptRejectAndTimeout) {
  via::Vi* server_vi = b.create_vi();
  std::atomic<int> phase{0};
  std::thread server([&] {
    via::ConnRequest* req;
    expect_ok(b.nic->connect_wait(address(*b.nic, "rank1", "srv"), 5000, req), "wait 1");
    EXPECT_EQ(req->remote.discriminator, std::vector<std::uint8_t>({'c'}));
    expect_ok(b.nic->connect_reject(req), "reject");
    expect_ok(b.nic->connect_wait(address(*b.nic, "rank1", "srv"), 5000, req), "wait 2");
    expect_ok(b.nic->connect_accept(req, *server_vi), "accept");
    phase = 1;
  });
  via::Vi* client = a.create_vi();
  EXPECT_EQ(client->connect_request(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "srv"), 5000),
            via::Result::reject);
  EXPECT_EQ(client->state(), via::ViState::idle);
  EXPECT_EQ(client->connect_request(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "srv"), 5000),
            via::Result::success);
  server.join();
  EXPECT_EQ(client->state(), via::ViState::connected);
  EXPECT_EQ(server_vi->state(), via::ViState::connected);
  // Nobody listens on this discriminator.
  via::Vi* lonely = a.create_vi();
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(lonely->connect_request(address(*a.nic, "rank0", "x"), address(*a.nic, "rank1", "nobody"), 200),
            via::Result::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(lonely->state(), via::ViState::idle);
  // A NIC that does not exist.
  EXPECT_EQ(lonely->connect_request(address(*a.nic, "rank0", "x"), address(*a.nic, absent_nic(), "nobody"), 200),
            via::Result::timeout);
  // Data flows over the accepted connection.
  expect_ok(server_vi->post_recv(b.message(0, 8), b.arena.handle), "recv");
  a.fill(0, 8, 77);
  expect_ok(client->post_send(a.message(0, 8), a.arena.handle), "send");
  ASSERT_NE(wait_done(server_vi, true), nullptr);
  EXPECT_EQ(b.mismatch(0, 8, 77), -1);
}

// Two NICs ask each other for a client connection at the same time, in one
// thread, neither having accepted yet: with a blocking connect_request each
// would wait for the other for ever. Each accepts the other's request from its
// progress loop (connect_wait with timeout 0); then both connections carry data.
TEST_P(Engine, ClientRequestsProgressWithoutBlockingWhileBothSidesAccept) {
  via::Vi* a_out = a.create_vi();
  via::Vi* b_out = b.create_vi();
  via::Vi* a_in = a.create_vi();
  via::Vi* b_in = b.create_vi();
  via::ConnRequest* req = nullptr;
  EXPECT_EQ(a.nic->connect_wait(address(*a.nic, "rank0", "srv"), 0, req), via::Result::timeout);
  expect_ok(a_out->connect_request_start(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "srv"), 5000),
            "a starts");
  expect_ok(b_out->connect_request_start(address(*b.nic, "rank1", "c"), address(*b.nic, "rank0", "srv"), 5000),
            "b starts");
  EXPECT_EQ(a_out->state(), via::ViState::connect_pending);
  EXPECT_EQ(a_out->connect_request_start(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "srv"), 5000),
            via::Result::invalid_state);
  via::Result ra = via::Result::not_done, rb = via::Result::not_done;
  bool a_accepted = false, b_accepted = false;
  auto accept = [&](Endpoint& e, const char* name, via::Vi* vi, bool& accepted) {
    if (accepted || e.nic->connect_wait(address(*e.nic, name, "srv"), 0, req) != via::Result::success) return;
    EXPECT_EQ(req->remote.discriminator, std::vector<std::uint8_t>({'c'}));
    expect_ok(e.nic->connect_accept(req, *vi), "accept");
    accepted = true;
  };
  EXPECT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] {
    accept(a, "rank0", a_in, a_accepted);
    accept(b, "rank1", b_in, b_accepted);
    if (ra == via::Result::not_done) ra = a_out->connect_request_done();
    if (rb == via::Result::not_done) rb = b_out->connect_request_done();
    return a_accepted && b_accepted && ra != via::Result::not_done && rb != via::Result::not_done;
  }));
  EXPECT_EQ(ra, via::Result::success);
  EXPECT_EQ(rb, via::Result::success);
  EXPECT_EQ(a_out->connect_request_done(), via::Result::success);
  for (auto [from, to, sender, receiver] : {std::tuple{a_out, b_in, &a, &b}, std::tuple{b_out, a_in, &b, &a}}) {
    expect_ok(to->post_recv(receiver->message(0, 8), receiver->arena.handle), "recv");
    sender->fill(4096, 8, 41);
    expect_ok(from->post_send(sender->message(4096, 8), sender->arena.handle), "send");
    ASSERT_NE(wait_done(to, true), nullptr);
    ASSERT_NE(wait_done(from, false), nullptr);
    EXPECT_EQ(receiver->mismatch(0, 8, 41), -1);
  }
}

// A started client request ends, without blocking, in a reject (the VI is idle
// and can ask again) or, when nobody answers, in a timeout at its deadline.
TEST_P(Engine, ClientRequestStartedEndsInRejectOrTimeout) {
  via::Vi* client = a.create_vi();
  expect_ok(client->connect_request_start(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "srv"), 5000),
            "start");
  via::ConnRequest* req = nullptr;
  via::Result outcome = via::Result::not_done;
  bool rejected = false;
  EXPECT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] {
    if (!rejected && b.nic->connect_wait(address(*b.nic, "rank1", "srv"), 0, req) == via::Result::success) {
      expect_ok(b.nic->connect_reject(req), "reject");
      rejected = true;
    }
    outcome = client->connect_request_done();
    return outcome != via::Result::not_done;
  }));
  EXPECT_EQ(outcome, via::Result::reject);
  EXPECT_EQ(client->state(), via::ViState::idle);
  EXPECT_EQ(client->connect_request_done(), via::Result::invalid_state);

  auto start = std::chrono::steady_clock::now();
  expect_ok(client->connect_request_start(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "nobody"), 100),
            "start again");
  EXPECT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] {
    outcome = client->connect_request_done();
    return outcome != via::Result::not_done;
  }));
  EXPECT_EQ(outcome, via::Result::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(client->state(), via::ViState::idle);
}

// The side that completes a connection first sends 8 bytes and closes its
// NIC (its process ends, its shared segment is gone) before the other side
// looks at its request again: that side is connected all the same and
// receives what was sent before the close.
void Engine::expect_connected_after_the_peer_sent_and_closed(via::Vi* sender, via::Vi* receiver,
                                                             const std::function<via::Result()>& poll_receiver) {
  b.fill(4096, 8, 23);
  expect_ok(sender->post_send(b.message(4096, 8), b.arena.handle), "send");
  VIP_DESCRIPTOR* sent = nullptr;
  ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return sender->send_done(sent) == via::Result::success; }));
  EXPECT_EQ(status_err(sent), 0u);
  b.nic.reset();
  via::Result outcome = via::Result::not_done;
  ASSERT_TRUE(pump({a.nic.get()}, [&] { return (outcome = poll_receiver()) != via::Result::not_done; }));
  ASSERT_EQ(outcome, via::Result::success);
  VIP_DESCRIPTOR* received = nullptr;
  ASSERT_TRUE(pump({a.nic.get()}, [&] { return receiver->recv_done(received) == via::Result::success; }));
  EXPECT_EQ(status_err(received), 0u);
  EXPECT_EQ(a.mismatch(0, 8, 23), -1);
}

TEST_P(Engine, AServerThatAcceptsSendsAndClosesBeforeTheClientLooksStillConnectsIt) {
  via::Vi* client = a.create_vi();
  expect_ok(client->post_recv(a.message(0, 8), a.arena.handle), "recv");
  expect_ok(client->connect_request_start(address(*a.nic, "rank0", "c"), address(*a.nic, "rank1", "srv"), 5000),
            "start");
  via::Vi* server_vi = b.create_vi();
  via::ConnRequest* req = nullptr;
  // The client's polls move its request (tcp's travels on them) until the server has it.
  ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] {
    EXPECT_EQ(client->connect_request_done(), via::Result::not_done);
    return b.nic->connect_wait(address(*b.nic, "rank1", "srv"), 0, req) == via::Result::success;
  }));
  expect_ok(b.nic->connect_accept(req, *server_vi), "accept");
  expect_connected_after_the_peer_sent_and_closed(server_vi, client, [&] { return client->connect_request_done(); });
}

TEST_P(Engine, APeerThatMatchesSendsAndClosesBeforeTheOtherLooksStillConnectsIt) {
  via::Vi* va = a.create_vi();
  via::Vi* vb = b.create_vi();
  expect_ok(va->post_recv(a.message(0, 8), a.arena.handle), "recv");
  expect_ok(va->connect_peer_request(address(*a.nic, "rank0", "p"), address(*a.nic, "rank1", "p"), 5000), "a asks");
  expect_ok(vb->connect_peer_request(address(*b.nic, "rank1", "p"), address(*b.nic, "rank0", "p"), 5000), "b asks");
  via::Result rb = via::Result::not_done;
  ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return (rb = vb->connect_peer_done()) != via::Result::not_done; }));
  ASSERT_EQ(rb, via::Result::success);
  expect_connected_after_the_peer_sent_and_closed(vb, va, [&] { return va->connect_peer_done(); });
}

TEST_P(Engine, WaitTimesOutOnASilentVi) {
  auto [va, vb] = connect();
  expect_ok(va->post_recv(a.message(0, 8), a.arena.handle), "recv");
  VIP_DESCRIPTOR* d;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(va->recv_wait(50, d), via::Result::timeout);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(50));
  EXPECT_LT(took, std::chrono::milliseconds(1000));
}

// An idle wait sleeps in whole slices (10 ms, doubling), not in short ones:
// a NIC with peers on both of the mixed provider's sides used to wake every
// millisecond to look at tcp's sockets, and each wake-up checked every
// peer's liveness.
TEST_P(Engine, AnIdleWaitSleepsInWholeSlices) {
  connect();
  const std::uint64_t before = a.nic->counters().sleeps;
  EXPECT_EQ(a.nic->wait([] { return false; }, 400), via::Result::timeout);
  EXPECT_LE(a.nic->counters().sleeps - before, 10u);
}

// A wait woken by work polls again (spin, then yield) before it sleeps: a rank
// whose peers keep asking things of it (a target serving gets or reads)
// answers at a poll's pace, not at a wake-up's. Messages 200 us apart, well
// within the yield phase (1 ms), wake it about once, not once each.
TEST_P(Engine, AWaitWokenByWorkPollsAgainBeforeItSleeps) {
  auto [va, vb] = connect(VIP_SERVICE_UNRELIABLE);  // no receives: each message is dropped, but it is work
  const std::uint64_t sleeps_before = b.nic->counters().sleeps;
  std::atomic<bool> stop = false;
  std::thread waiter([&, nic = b.nic.get()] { EXPECT_EQ(nic->wait([&] { return stop.load(); }, 30000), via::Result::success); });
  auto send = [&, va = va] {
    expect_ok(va->post_send(a.message(0, 8), a.arena.handle), "send");
    VIP_DESCRIPTOR* d = nullptr;
    ASSERT_TRUE(pump({a.nic.get()}, [&] { return va->send_done(d) == via::Result::success; }));
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the waiter is asleep by now
  constexpr int kMessages = 200;
  int long_gaps = 0;  // this thread held up for most of the yield phase: the waiter may sleep
  auto last = std::chrono::steady_clock::now();
  for (int i = 0; i < kMessages; ++i) {
    send();
    const auto now = std::chrono::steady_clock::now();
    if (i > 0 && now - last > std::chrono::microseconds(800)) ++long_gaps;
    last = now;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;
  send();  // wakes it, should it sleep
  waiter.join();
  // Once per message before; now the first sleeps, the last, one per long gap,
  // and a few more where the waiter itself was held up (a loaded machine).
  EXPECT_LE(b.nic->counters().sleeps - sleeps_before, std::uint64_t(long_gaps + kMessages / 5))
      << long_gaps << " long gaps";
}

// A sleeping NIC wakes as soon as its peer sends, whichever provider carries
// the VI (on mixed across nodes: tcp, while the NIC sleeps on shm's doorbell).
TEST_P(Engine, ASleepingNicWakesWhenItsPeerSends) {
  auto [va, vb] = connect();
  expect_ok(va->post_recv(a.message(0, 8), a.arena.handle), "recv");
  std::atomic<bool> sent = false;
  std::chrono::steady_clock::time_point sent_at;
  std::thread sender([&, vb = vb] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a is asleep by then
    sent_at = std::chrono::steady_clock::now();
    expect_ok(vb->post_send(b.message(64, 8), b.arena.handle), "send");
    b.nic->wait([&] {
      VIP_DESCRIPTOR* d;
      return vb->send_done(d) == via::Result::success;
    }, 2000);
    sent = true;
  });
  VIP_DESCRIPTOR* d = nullptr;
  EXPECT_EQ(va->recv_wait(3000, d), via::Result::success);
  const auto woke_at = std::chrono::steady_clock::now();
  sender.join();
  ASSERT_TRUE(sent);
  EXPECT_LT(woke_at - sent_at, std::chrono::milliseconds(100));
}

TEST_P(Engine, RegistrationChecks) {
  via::MemHandle h;
  std::vector<std::byte> buf(100);
  EXPECT_EQ(a.nic->register_memory(buf.data(), 0, via::MemAttributes{a.ptag, false, false}, h),
            via::Result::invalid_parameter);
  EXPECT_EQ(a.nic->register_memory(buf.data(), 100, via::MemAttributes{999, false, false}, h), via::Result::invalid_ptag);
  expect_ok(a.nic->register_memory(buf.data(), 100, via::MemAttributes{a.ptag, true, false}, h), "register");
  via::MemAttributes got;
  expect_ok(a.nic->query_memory(buf.data(), h, got), "query");
  EXPECT_TRUE(got.rdma_write);
  EXPECT_FALSE(got.rdma_read);
  EXPECT_EQ(a.nic->deregister_memory(buf.data() + 1, h), via::Result::invalid_parameter);
  expect_ok(a.nic->deregister_memory(buf.data(), h), "deregister");
  EXPECT_EQ(a.nic->deregister_memory(buf.data(), h), via::Result::invalid_parameter);
  // The slot is reused with a new generation: the old handle stays dead.
  via::MemHandle h2;
  expect_ok(a.nic->register_memory(buf.data(), 100, via::MemAttributes{a.ptag, false, false}, h2), "register again");
  EXPECT_NE(h, h2);
  EXPECT_EQ(a.nic->query_memory(buf.data(), h, got), via::Result::invalid_parameter);
}

// The test helper itself: a descriptor slot is handed out once until it is
// released, and running out of slots is an error, never a reused slot.
TEST(TestEndpoint, DescriptorSlotsAreHandedOutOnceUntilReleased) {
  Arena arena;
  arena.allocate(4096);
  std::set<VIP_DESCRIPTOR*> taken;
  for (std::size_t i = 0; i < Arena::kDescSlots; ++i) taken.insert(arena.take_desc());
  EXPECT_EQ(taken.size(), Arena::kDescSlots);
  EXPECT_THROW(arena.take_desc(), std::runtime_error);
  VIP_DESCRIPTOR* some = *std::next(taken.begin(), 7);
  arena.release(some);
  EXPECT_EQ(arena.take_desc(), some);
  arena.release(some);
  EXPECT_THROW(arena.release(some), std::runtime_error) << "released twice";
  EXPECT_THROW(arena.release(reinterpret_cast<VIP_DESCRIPTOR*>(arena.data())), std::runtime_error)
      << "not a descriptor slot";
}

// The built-in providers; or, when ENGINE_TEST_PROVIDER names another (one
// that VIASTACK_PROVIDER_PLUGIN registers: the course's exercise "provider"),
// that one alone, as "Named".
std::vector<Transport> providers_under_test() {
  if (const char* named = std::getenv("ENGINE_TEST_PROVIDER"); named && *named) return {Transport{"Named", named, false}};
  return {Transport{"ShmCma", "shm", true}, Transport{"ShmRingCopy", "shm", false}, Transport{"Tcp", "tcp", false},
          Transport{"MixedOneNode", "mixed", true, 1}, Transport{"MixedAcrossNodes", "mixed", false, 2}};
}

INSTANTIATE_TEST_SUITE_P(Providers, Engine, ::testing::ValuesIn(providers_under_test()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace

int main(int argc, char** argv) {
  // Lower the single-copy threshold so that moderate sizes take the CMA path
  // when it is enabled; the engine reads it once.
  setenv("VIASTACK_DIRECT_THRESHOLD", "16384", 1);
  // A read through the rings is taken over only when its target does not
  // poll for this long: never, in the tests that poll both ends.
  setenv("VIASTACK_READ_TAKEOVER_US", std::to_string(kReadTakeoverUs).c_str(), 1);
  setenv("VIASTACK_SPIN_US", "5", 1);
  // The mixed provider's tests pose as 16 ranks on this host: without it,
  // their waits would yield for 100 us, not the 1 ms the tests of the
  // phases assume (the engine reads it once).
  setenv("VIASTACK_YIELD_US", "1000", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

// ---- how long a wait spins ----

TEST(WaitPolicy, SpinsWhenEveryRankHasACpu) {
  EXPECT_EQ(via::wait_spin_ns(std::nullopt, 2, 2), 20'000u);  // VIASTACK_SPIN_US's default, 20 µs
  EXPECT_EQ(via::wait_spin_ns(std::nullopt, 1, 8), 20'000u);
}

TEST(WaitPolicy, YieldsAtOnceWhenRanksOutnumberTheJobsCpus) {
  EXPECT_EQ(via::wait_spin_ns(std::nullopt, 4, 2), 0u);
  EXPECT_EQ(via::wait_spin_ns(std::nullopt, 3, 1), 0u);
}

TEST(WaitPolicy, VIASTACK_SPIN_USStillDecides) {
  EXPECT_EQ(via::wait_spin_ns(50, 4, 2), 50'000u);
  EXPECT_EQ(via::wait_spin_ns(0, 1, 8), 0u);
}

TEST(WaitPolicy, YieldsForAMillisecondBeforeSleepingWhenEveryRankHasACpu) {
  EXPECT_EQ(via::wait_yield_ns(std::nullopt, 2, 2), 1'000'000u);  // VIASTACK_YIELD_US's default
  EXPECT_EQ(via::wait_yield_ns(std::nullopt, 1, 8), 1'000'000u);
}

TEST(WaitPolicy, SleepsSoonerWhenRanksOutnumberTheJobsCpus) {
  EXPECT_EQ(via::wait_yield_ns(std::nullopt, 4, 2), 100'000u);
  EXPECT_EQ(via::wait_yield_ns(std::nullopt, 3, 1), 100'000u);
}

TEST(WaitPolicy, VIASTACK_YIELD_USStillDecides) {
  EXPECT_EQ(via::wait_yield_ns(2000, 4, 2), 2'000'000u);
  EXPECT_EQ(via::wait_yield_ns(0, 1, 8), 0u);
}

// Where ranks outnumber the job's CPUs the phase may grow (yield_phase.hpp) up
// to VIASTACK_YIELD_US's default, or to the variable when set (which, being
// both ends, fixes it).
TEST(WaitPolicy, TheYieldPhaseGrowsAtMostToTheVariable) {
  EXPECT_EQ(via::wait_yield_longest_ns(std::nullopt), 1'000'000u);
  EXPECT_EQ(via::wait_yield_longest_ns(2000), 2'000'000u);
  EXPECT_EQ(via::wait_yield_longest_ns(0), 0u);
}

TEST(WaitPolicy, ReadsAreTakenOverSoonWhenEveryRankHasACpuAndLateWhenOutnumbered) {
  EXPECT_EQ(via::read_takeover_wait_ns(std::nullopt, 2, 2), 20'000u);  // VIASTACK_READ_TAKEOVER_US's default
  EXPECT_EQ(via::read_takeover_wait_ns(std::nullopt, 4, 2), 500'000u);
  EXPECT_EQ(via::read_takeover_wait_ns(0, 4, 2), 0u);
  EXPECT_EQ(via::read_takeover_wait_ns(50, 1, 8), 50'000u);
}

TEST(WaitPolicy, TheJobsCpusComeFromViarunWhenItSaysSo) {
  ::setenv("VIASTACK_NODE_CPUS", "3", 1);
  EXPECT_EQ(via::job_cpus_on_this_host(), 3);
  ::unsetenv("VIASTACK_NODE_CPUS");
  const int cpus = via::job_cpus_on_this_host();
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, sysconf(_SC_NPROCESSORS_ONLN));
}

// ---- work queues grow as descriptors are posted ----

TEST(WorkQueue, GrowsWhenFullAndKeepsTheOrderAcrossTheWrap) {
  via::WorkQueue q(1024, 4);
  std::vector<VIP_DESCRIPTOR> descs(100);
  std::size_t next_pushed = 0, next_popped = 0;
  // Push 3, pop 2, repeatedly: the ring wraps before it has to grow.
  while (next_pushed + 3 <= descs.size()) {
    for (int i = 0; i < 3; ++i) {
      via::WorkRequest& wr = q.push(&descs[next_pushed++]);
      wr.finished = true;
    }
    q.publish([](via::WorkRequest&) {});
    for (int i = 0; i < 2; ++i) ASSERT_EQ(q.pop_done(), &descs[next_popped++]);
  }
  EXPECT_GE(q.allocated(), q.tail() - q.head());
  EXPECT_LT(q.allocated(), 1024u) << "grew past what was outstanding";
  while (VIP_DESCRIPTOR* d = q.pop_done()) ASSERT_EQ(d, &descs[next_popped++]);
  EXPECT_EQ(next_popped, next_pushed);
}

TEST(WorkQueue, IndexOfSurvivesGrowth) {
  via::WorkQueue q(64, 2);
  std::vector<VIP_DESCRIPTOR> descs(40);
  for (std::size_t i = 0; i < 3; ++i) q.push(&descs[i]).finished = true;
  q.publish([](via::WorkRequest&) {});
  q.pop_done();
  const std::uint64_t second = q.index_of(q.at(q.head()));
  for (std::size_t i = 3; i < 40; ++i) q.push(&descs[i]);
  EXPECT_EQ(q.at(second).desc, &descs[1]);
  EXPECT_TRUE(q.full() == false);
}

TEST(WorkQueue, FullOnlyAtItsCapacity) {
  via::WorkQueue q(8, 2);
  std::vector<VIP_DESCRIPTOR> descs(8);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_FALSE(q.full()) << i;
    q.push(&descs[i]);
  }
  EXPECT_TRUE(q.full());
  EXPECT_EQ(q.allocated(), 8u);
}

// ---- the engine's copy of small pieces ----

// Every length on both sides of each of copy_bytes's cases, at every
// alignment: the bytes land, and not one byte before or after them.
TEST(CopyBytes, EveryLengthUpTo130AtEveryAlignment) {
  std::vector<std::byte> src(160), dst(160);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte(i * 7 + 1);
  for (std::size_t n = 0; n <= 130; ++n)
    for (std::size_t src_at = 0; src_at < 8; ++src_at)
      for (std::size_t dst_at = 1; dst_at < 9; ++dst_at) {
        std::fill(dst.begin(), dst.end(), std::byte{0xEE});
        via::copy_bytes(dst.data() + dst_at, src.data() + src_at, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool copied = i >= dst_at && i < dst_at + n;
          ASSERT_EQ(dst[i], copied ? src[src_at + i - dst_at] : std::byte{0xEE})
              << "length " << n << ", byte " << i << " (source at " << src_at << ", destination at " << dst_at << ")";
        }
      }
}
