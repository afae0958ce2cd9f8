// Every rank of a job connects to every other, sends each a message of every
// size and checks every byte it receives, then checks that each peer's
// traffic went over the provider it should: on a mixed NIC, shm to the ranks
// of its node and tcp to the others (the per-VI counters show it). Runs under
// any launcher the bootstrap knows. With --provider P the NIC must be P's
// (a job meant to be mixed is not quietly all shm). With --until-broken S the
// ranks then keep exchanging messages until a connection breaks (the test
// that cuts a link expects this): the survivor prints the cause and exits 3;
// nothing breaking within S seconds exits 1.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "support/endpoint.hpp"
#include "via/bootstrap.hpp"

using namespace testing_support;

namespace {

const std::size_t kSizes[] = {0, 8, 4096, 65537, 1u << 20};
constexpr std::size_t kSlot = 1u << 20;
// Per peer and size: one outgoing slot and two incoming ones, for alternate
// rounds, so that the next round's receive never lands on unchecked data.
constexpr std::size_t kSlotsPerPeer = 3 * std::size(kSizes);
constexpr std::uint32_t kWaitMs = 30000;

int exit_code = 0;
std::string lost_cause;

std::uint64_t seed_of(int from, int to, std::size_t size, int round) {
  return std::uint64_t(from) * 1000003 + std::uint64_t(to) * 7919 + size * 31 + std::uint64_t(round);
}

struct Peer {
  via::Vi* vi = nullptr;
  // The provider the connection runs on, noted once connected: a peer that
  // finished first may have closed it by the time it is checked.
  const char* transport = nullptr;
  std::size_t base = 0;  // offset of this peer's slots in the arena
  std::size_t out(std::size_t i) const { return base + i * kSlot; }
  std::size_t in(std::size_t i, int round) const { return base + ((1 + round % 2) * std::size(kSizes) + i) * kSlot; }
};

// Waits for one completion; false (with the cause recorded) when the VI broke.
bool complete(via::Vi* vi, bool recv, VIP_DESCRIPTOR*& d) {
  const via::Result r = recv ? vi->recv_wait(kWaitMs, d) : vi->send_wait(kWaitMs, d);
  if (r != via::Result::success) {
    if (lost_cause.empty()) lost_cause = std::string("waiting: ") + via::describe(r);
    return false;
  }
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
    if (lost_cause.empty()) lost_cause = "descriptor completed with status " + std::to_string(d->CS.Status);
    return false;
  }
  return true;
}

// Round r sends kSizes[size_of_round(r)]: each size once, then the 64 KiB one again and again.
std::size_t size_of_round(int round) { return std::size_t(round) < std::size(kSizes) ? std::size_t(round) : 3; }

void post_receives(Endpoint& ep, std::map<int, Peer>& peers, int round) {
  const std::size_t i = size_of_round(round);
  for (auto& [p, peer] : peers)
    expect_ok(peer.vi->post_recv(ep.message(peer.in(i, round), kSizes[i]), ep.arena.handle), "post receive");
}

// One round: every rank sends one message to every peer and receives one from
// each. A peer sends round r+1 only after it received our round r message, so
// our receives for r+1 go out before that message does.
bool exchange(Endpoint& ep, int rank, std::map<int, Peer>& peers, int round) {
  const std::size_t size_index = size_of_round(round);
  const std::size_t size = kSizes[size_index];
  post_receives(ep, peers, round + 1);
  for (auto& [p, peer] : peers) {
    ep.fill(peer.out(size_index), size, seed_of(rank, p, size, round));
    expect_ok(peer.vi->post_send(ep.message(peer.out(size_index), size), ep.arena.handle), "post send");
  }
  bool ok = true;
  for (auto& [p, peer] : peers) {
    VIP_DESCRIPTOR* sent;
    VIP_DESCRIPTOR* received;
    if (!complete(peer.vi, false, sent) || !complete(peer.vi, true, received)) return false;
    if (received->CS.Length != size ||
        ep.mismatch(peer.in(size_index, round), size, seed_of(p, rank, size, round)) != -1) {
      std::fprintf(stderr, "mp_alltoall: rank %d: %zu bytes from rank %d arrived wrong\n", rank, size, p);
      exit_code = 1;
      ok = false;
    }
    ep.release(sent);
    ep.release(received);
  }
  return ok;
}

// The provider rank `peer`'s traffic must take on this NIC.
std::string expected_transport(const via::Nic& nic, const via::Bootstrap& job, int peer) {
  if (std::string(nic.provider_name()) != "mixed") return nic.provider_name();
  return job.node_of(peer) == job.node_of(job.rank()) ? "shm" : "tcp";
}

// Every peer's VI runs on the expected provider and carried frames both ways.
bool check_transports(const via::Nic& nic, const via::Bootstrap& job, const std::map<int, Peer>& peers) {
  std::map<std::string, std::pair<int, std::uint64_t>> by_transport;  // peers, frames
  bool ok = true;
  for (const auto& [p, peer] : peers) {
    const char* transport = peer.transport;
    const auto& counters = peer.vi->counters();
    if (!transport || transport != expected_transport(nic, job, p) || counters.frames_sent == 0 ||
        counters.frames_received == 0) {
      std::fprintf(stderr, "mp_alltoall: rank %d: traffic with rank %d (node %d) went over %s (%llu frames out, %llu in)\n",
                   job.rank(), p, job.node_of(p), transport ? transport : "nothing",
                   static_cast<unsigned long long>(counters.frames_sent),
                   static_cast<unsigned long long>(counters.frames_received));
      ok = false;
    }
    auto& [count, frames] = by_transport[transport ? transport : "nothing"];
    ++count;
    frames += counters.frames_sent + counters.frames_received;
  }
  std::string summary;
  for (const auto& [transport, totals] : by_transport) {
    summary += ' ';
    summary += transport;
    summary += ": " + std::to_string(totals.first) + " peers, " + std::to_string(totals.second) + " frames;";
  }
  std::printf("mp_alltoall: rank %d (node %d) traffic by provider:%s\n", job.rank(), job.node_of(job.rank()),
              summary.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) {
    std::fprintf(stderr, "mp_alltoall: %s\n", why.c_str());
    return 1;
  }
  const int rank = job->rank();
  const int size = job->size();
  const int until_broken_s = argc == 3 && std::strcmp(argv[1], "--until-broken") == 0 ? std::atoi(argv[2]) : 0;
  const char* required_provider = argc == 3 && std::strcmp(argv[1], "--provider") == 0 ? argv[2] : nullptr;
  try {
    Endpoint ep;
    ep.open("", kSlot * kSlotsPerPeer * std::size_t(size), false, false);
    if (required_provider && std::strcmp(ep.nic->provider_name(), required_provider) != 0) {
      std::fprintf(stderr, "mp_alltoall: rank %d: the NIC is %s's, not %s's\n", rank, ep.nic->provider_name(),
                   required_provider);
      return 1;
    }
    // A peer that finished and left disconnects in order; anything else is a lost connection.
    ep.nic->set_error_handler([&](const via::AsyncError& e) {
      if (!e.orderly && lost_cause.empty()) lost_cause = e.cause;
    });
    std::map<int, Peer> peers;
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      Peer& peer = peers[p];
      peer.base = std::size_t(p) * kSlot * kSlotsPerPeer;
      peer.vi = ep.create_vi();
      via::NetAddress local{{}, {'a', '2', 'a'}}, remote;
      expect_ok(ep.nic->resolve("rank" + std::to_string(p), 0, remote.host), "resolve");
      remote.discriminator = local.discriminator;
      expect_ok(peer.vi->connect_peer_request(local, remote, 60000), "connect request");
    }
    post_receives(ep, peers, 0);
    for (auto& [p, peer] : peers) {
      expect_ok(peer.vi->connect_peer_wait(), "connect");
      peer.transport = peer.vi->transport();
    }

    int round = 0;
    for (; round < int(std::size(kSizes)); ++round)
      if (!exchange(ep, rank, peers, round)) break;
    if (exit_code == 0 && lost_cause.empty()) {
      std::printf("mp_alltoall: rank %d of %d over %s: all verified\n", rank, size, ep.nic->provider_name());
      if (!check_transports(*ep.nic, *job, peers)) exit_code = 1;
    }

    if (until_broken_s > 0 && exit_code == 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(until_broken_s);
      for (; lost_cause.empty() && std::chrono::steady_clock::now() < give_up; ++round) exchange(ep, rank, peers, round);
      if (lost_cause.empty()) {
        std::fprintf(stderr, "mp_alltoall: rank %d: no connection broke in %d s\n", rank, until_broken_s);
        return 1;
      }
      std::printf("mp_alltoall: rank %d: connection lost: %s\n", rank, lost_cause.c_str());
      std::fflush(stdout);
      return 3;
    }
    if (!lost_cause.empty()) {
      std::fprintf(stderr, "mp_alltoall: rank %d: %s\n", rank, lost_cause.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_alltoall: rank %d: %s\n", rank, e.what());
    return 1;
  }
  return exit_code;
}
