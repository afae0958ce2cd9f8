// Two ranks under viarun move data at sizes on both sides of every threshold
// with send/receive, RDMA write with immediate data and RDMA read, and check
// every byte. Exit 0 only if everything verified.
#include <cstdio>

#include "support/endpoint.hpp"

using namespace testing_support;

namespace {

const std::size_t kSizes[] = {1, 72, 73, 4096, 65536, 65537, 262145, (2u << 20) - 1, 2u << 20, (2u << 20) + 1,
                              (4u << 20) + 3};
constexpr std::size_t kMax = (4u << 20) + 64;

// Layout of each rank's arena: [0, kMax) outgoing, [kMax, 2 kMax) incoming / RDMA target.
constexpr std::size_t kOut = 0, kIn = kMax;

int failures = 0;
void verify(bool ok, const char* what, std::size_t size) {
  if (!ok) {
    std::fprintf(stderr, "mp_transfer: %s failed at %zu bytes\n", what, size);
    ++failures;
  }
}

VIP_DESCRIPTOR* wait(via::Vi* vi, bool recv) {
  VIP_DESCRIPTOR* d = nullptr;
  expect_ok(recv ? vi->recv_wait(30000, d) : vi->send_wait(30000, d), recv ? "receive" : "send");
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) throw std::runtime_error("descriptor failed, status " + std::to_string(d->CS.Status));
  return d;
}

}  // namespace

int main() {
  const int rank = std::atoi(std::getenv("VIASTACK_RANK") ? std::getenv("VIASTACK_RANK") : "0");
  const int peer = 1 - rank;
  try {
    Endpoint ep;
    ep.open("", 2 * kMax);
    via::Vi* vi = ep.create_vi();
    // Receives before connecting: the first message may come at once.
    for (int i = 0; i < 4; ++i) expect_ok(vi->post_recv(ep.message(kIn, kMax), ep.arena.handle), "post recv");
    expect_ok(vi->connect_peer_request(address(*ep.nic, "rank" + std::to_string(rank), "t"),
                                       address(*ep.nic, "rank" + std::to_string(peer), "t"), 30000),
              "connect request");
    expect_ok(vi->connect_peer_wait(), "connect");

    // Tell the peer where our incoming area is.
    struct Where { std::uint64_t addr; via::MemHandle handle; } mine{std::uintptr_t(ep.arena.data(kIn)), ep.arena.handle}, theirs;
    std::memcpy(ep.arena.data(kOut), &mine, sizeof mine);
    expect_ok(vi->post_send(ep.message(kOut, sizeof mine), ep.arena.handle), "send address");
    wait(vi, false);
    wait(vi, true);
    std::memcpy(&theirs, ep.arena.data(kIn), sizeof theirs);
    expect_ok(vi->post_recv(ep.message(kIn, kMax), ep.arena.handle), "post recv");

    std::uint64_t seed = 1;
    for (std::size_t size : kSizes) {
      // Send/receive: rank 0 sends, rank 1 checks and echoes back what it got.
      if (rank == 0) {
        ep.fill(kOut, size, seed);
        expect_ok(vi->post_send(ep.message(kOut, size), ep.arena.handle), "send");
        wait(vi, false);
        VIP_DESCRIPTOR* r = wait(vi, true);
        verify(r->CS.Length == size && ep.mismatch(kIn, size, seed) == -1, "echo", size);
      } else {
        VIP_DESCRIPTOR* r = wait(vi, true);
        verify(r->CS.Length == size && ep.mismatch(kIn, size, seed) == -1, "send/receive", size);
        std::memcpy(ep.arena.data(kOut), ep.arena.data(kIn), size);
        expect_ok(vi->post_send(ep.message(kOut, size), ep.arena.handle), "echo");
        wait(vi, false);
      }
      expect_ok(vi->post_recv(ep.message(kIn, kMax), ep.arena.handle), "post recv");
      ++seed;

      // RDMA write with immediate data into the peer's incoming area; the peer checks.
      if (rank == 0) {
        ep.fill(kOut, size, seed);
        VIP_DESCRIPTOR* w = ep.rdma(VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, theirs.addr, theirs.handle, kOut, size);
        w->CS.ImmediateData = std::uint32_t(seed);
        expect_ok(vi->post_send(w, ep.arena.handle), "RDMA write");
        wait(vi, false);
        wait(vi, true);  // the peer's verdict
        verify(*reinterpret_cast<std::uint32_t*>(ep.arena.data(kIn)) == 1, "RDMA write (peer's check)", size);
      } else {
        VIP_DESCRIPTOR* r = wait(vi, true);
        bool ok = (r->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_REMOTE_RDMA_WRITE &&
                  r->CS.ImmediateData == std::uint32_t(seed) && r->CS.Length == size &&
                  ep.mismatch(kIn, size, seed) == -1;
        verify(ok, "RDMA write with immediate", size);
        *reinterpret_cast<std::uint32_t*>(ep.arena.data(kOut)) = ok;
        expect_ok(vi->post_send(ep.message(kOut, 4), ep.arena.handle), "verdict");
        wait(vi, false);
      }
      expect_ok(vi->post_recv(ep.message(kIn, kMax), ep.arena.handle), "post recv");
      ++seed;

      // RDMA read: rank 1 publishes a pattern and tells rank 0, which reads and checks it.
      if (rank == 1) {
        ep.fill(kIn, size, seed);
        expect_ok(vi->post_send(ep.message(kOut, 0), ep.arena.handle), "ready");
        wait(vi, false);
        wait(vi, true);  // rank 0 is done reading
      } else {
        wait(vi, true);
        std::memset(ep.arena.data(kOut), 0, size);
        expect_ok(vi->post_send(ep.rdma(VIP_CONTROL_OP_RDMAREAD, theirs.addr, theirs.handle, kOut, size), ep.arena.handle),
                  "RDMA read");
        wait(vi, false);
        verify(ep.mismatch(kOut, size, seed) == -1, "RDMA read", size);
        expect_ok(vi->post_send(ep.message(kOut, 0), ep.arena.handle), "done");
        wait(vi, false);
      }
      expect_ok(vi->post_recv(ep.message(kIn, kMax), ep.arena.handle), "post recv");
      ++seed;
    }
    const auto& c = ep.nic->counters();
    std::printf("rank %d: %s, frames sent %llu, single-copy reads %llu writes %llu, shares of reads written %llu\n",
                rank, failures ? "FAILED" : "all verified", (unsigned long long)c.frames_sent,
                (unsigned long long)c.direct_reads, (unsigned long long)c.direct_writes,
                (unsigned long long)c.shared_read_writes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_transfer rank %d: %s\n", rank, e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
