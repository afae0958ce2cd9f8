// N ranks (more than there are cores) pass a token around a ring and run
// dissemination barriers; finishes in seconds only if waiting ranks sleep
// instead of spinning. Usage: mp_ring LAPS BARRIERS
#include <chrono>
#include <cstdio>
#include <map>

#include "support/endpoint.hpp"

using namespace testing_support;

namespace {

constexpr std::size_t kSlot = 64;
constexpr int kPosted = 16;  // receives kept posted per peer

struct Ring {
  Endpoint ep;
  int rank = 0, size = 1;
  std::map<int, via::Vi*> peers;  // one VI per distinct peer
  std::map<via::Vi*, int> slot_of;

  void connect_all() {
    ep.open("", 1 << 20, false, false);
    std::vector<int> wanted;
    for (int d = 1; d < size; d *= 2) {
      wanted.push_back((rank + d) % size);
      wanted.push_back((rank - d % size + size) % size);
    }
    for (int p : wanted) {
      if (p == rank || peers.count(p)) continue;
      via::Vi* vi = ep.create_vi();
      slot_of[vi] = int(peers.size());
      peers[p] = vi;
      for (int i = 0; i < kPosted; ++i) post_recv(vi, i);
      expect_ok(vi->connect_peer_request(address(*ep.nic, "rank" + std::to_string(rank), "ring"),
                                         address(*ep.nic, "rank" + std::to_string(p), "ring"), 60000),
                "connect request");
    }
    for (auto& [p, vi] : peers) expect_ok(vi->connect_peer_wait(), "connect");
  }

  std::size_t recv_offset(via::Vi* vi, int i) const { return (std::size_t(slot_of.at(vi)) * kPosted + std::size_t(i)) * kSlot; }
  void post_recv(via::Vi* vi, int i) { expect_ok(vi->post_recv(ep.message(recv_offset(vi, i), kSlot), ep.arena.handle), "recv"); }

  void send(int to, std::uint64_t value) {
    via::Vi* vi = peers.at(to);
    std::size_t off = (1 << 19);  // outgoing scratch area
    std::memcpy(ep.arena.data(off), &value, sizeof value);
    expect_ok(vi->post_send(ep.message(off, sizeof value), ep.arena.handle), "send");
    VIP_DESCRIPTOR* d;
    expect_ok(vi->send_wait(60000, d), "send completion");
    ep.release(d);
  }

  std::uint64_t receive(int from) {
    via::Vi* vi = peers.at(from);
    VIP_DESCRIPTOR* d;
    expect_ok(vi->recv_wait(60000, d), "receive");
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) throw std::runtime_error("receive failed");
    std::uint64_t value;
    std::memcpy(&value, d->DS[0].Local.Data.Address, sizeof value);
    int i = int((static_cast<std::byte*>(d->DS[0].Local.Data.Address) - ep.arena.data(recv_offset(vi, 0))) / kSlot);
    ep.release(d);
    post_recv(vi, i);
    return value;
  }

  void barrier() {
    for (int d = 1; d < size; d *= 2) {
      send((rank + d) % size, 0);
      receive((rank - d % size + size) % size);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int laps = argc > 1 ? std::atoi(argv[1]) : 100;
  const int barriers = argc > 2 ? std::atoi(argv[2]) : 300;
  Ring ring;
  ring.rank = std::atoi(std::getenv("VIASTACK_RANK"));
  ring.size = std::atoi(std::getenv("VIASTACK_SIZE"));
  try {
    ring.connect_all();
    auto start = std::chrono::steady_clock::now();
    if (ring.size > 1) {
      const int next = (ring.rank + 1) % ring.size, prev = (ring.rank - 1 + ring.size) % ring.size;
      for (int lap = 0; lap < laps; ++lap) {
        if (ring.rank == 0) {
          ring.send(next, std::uint64_t(lap) * ring.size + 1);
          std::uint64_t token = ring.receive(prev);
          if (token != std::uint64_t(lap + 1) * ring.size) throw std::runtime_error("token lost or doubled");
        } else {
          ring.send(next, ring.receive(prev) + 1);
        }
      }
    }
    auto ring_done = std::chrono::steady_clock::now();
    for (int i = 0; i < barriers; ++i) ring.barrier();
    auto end = std::chrono::steady_clock::now();
    if (ring.rank == 0)
      std::printf("mp_ring: %d ranks, %d laps in %.3f s, %d barriers in %.3f s\n", ring.size, laps,
                  std::chrono::duration<double>(ring_done - start).count(), barriers,
                  std::chrono::duration<double>(end - ring_done).count());
    for (auto& [p, vi] : ring.peers) vi->disconnect();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_ring rank %d: %s\n", ring.rank, e.what());
    return 1;
  }
  return 0;
}
