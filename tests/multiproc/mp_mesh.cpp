// Connection set-up at scale: every rank asks every other for a peer-to-peer
// connection at once, then waits for them in rank order (as MPI's and AM's
// start-up do), and exchanges one message with each (`mp_mesh [bytes]`,
// default 8; larger ones cross the small rings of a crowded node in pieces). With many ranks
// the requests outnumber what a NIC's connection inbox or a listener's
// pending connections hold, so the job finishes only if a request that found
// no room is retried while its sender waits on other connections.
// Rank 0 prints the set-up time; with --json, one line with it, the rank's
// resident memory and the /dev/shm its NIC's segment took (the scale report
// in docs/PERFORMANCE.md).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "via/bootstrap.hpp"
#include "via/via.hpp"

namespace {

constexpr std::uint32_t kConnectTimeoutMs = 60000;
constexpr std::uint32_t kWaitMs = 60000;
constexpr std::size_t kDescriptorBytes = 64;

// The byte at `i` of the message from rank `from` to rank `to`.
std::uint8_t pattern(int from, int to, std::size_t i) {
  return std::uint8_t((std::size_t(from) * 131 + std::size_t(to) * 7 + i * 13 + (i >> 8)) & 0xFF);
}

// Per peer a receive and a send: descriptors first, then the buffers.
struct Buffers {
  Buffers(std::size_t peers, std::size_t message_bytes)
      : count(peers * 2), message(message_bytes), bytes(count * (kDescriptorBytes + message_bytes)) {
    base = static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    std::memset(base, 0, bytes);
  }
  ~Buffers() { std::free(base); }
  VIP_DESCRIPTOR* descriptor(std::size_t i) const { return reinterpret_cast<VIP_DESCRIPTOR*>(base + i * kDescriptorBytes); }
  std::uint8_t* buffer(std::size_t i) const {
    return reinterpret_cast<std::uint8_t*>(base + count * kDescriptorBytes + i * message);
  }
  // Descriptor i over buffer i.
  VIP_DESCRIPTOR* message_descriptor(std::size_t i, via::MemHandle handle) const {
    VIP_DESCRIPTOR* d = descriptor(i);
    *d = VIP_DESCRIPTOR{};
    d->CS.SegCount = 1;
    d->CS.Length = std::uint32_t(message);
    d->DS[0].Local.Data.Address = buffer(i);
    d->DS[0].Local.Handle = handle;
    d->DS[0].Local.Length = std::uint32_t(message);
    return d;
  }
  std::size_t count, message, bytes;
  std::byte* base;
};

long resident_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) return std::atol(line.c_str() + 6);
  return -1;
}

// The memory a segment file holds (allocated blocks, not its sparse size); -1 if none.
long long segment_kb(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? (long long)st.st_blocks / 2 : -1;
}

int fail(int rank, const char* what, via::Result r) {
  std::fprintf(stderr, "mp_mesh: rank %d: %s: %s\n", rank, what, via::describe(r));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) {
    std::fprintf(stderr, "mp_mesh: %s\n", why.c_str());
    return 1;
  }
  const int rank = job->rank(), size = job->size();
  const bool json = argc > 1 && std::strcmp(argv[argc - 1], "--json") == 0;
  const std::size_t message_bytes = argc > 1 + json ? std::strtoull(argv[1], nullptr, 10) : 8;
  if (message_bytes == 0 || message_bytes > (64u << 20)) {
    std::fprintf(stderr, "usage: mp_mesh [bytes per message, 1 to 64 MiB] [--json]\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<via::Nic> nic;
  via::Ptag ptag = 0;
  if (via::Result r = via::Nic::open("", nic); r != via::Result::success) return fail(rank, "opening the NIC", r);
  if (via::Result r = nic->create_ptag(ptag); r != via::Result::success) return fail(rank, "creating a ptag", r);
  Buffers buffers{std::size_t(size), message_bytes};
  via::MemHandle handle = 0;
  if (via::Result r = nic->register_memory(buffers.base, buffers.bytes, via::MemAttributes{ptag, false, false}, handle);
      r != via::Result::success)
    return fail(rank, "registering memory", r);

  std::vector<via::Vi*> vis(std::size_t(size), nullptr);
  via::ViAttributes attrs;
  attrs.ptag = ptag;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    via::Vi*& vi = vis[std::size_t(p)];
    if (via::Result r = nic->create_vi(attrs, nullptr, nullptr, vi); r != via::Result::success)
      return fail(rank, "creating a VI", r);
    const std::size_t recv = std::size_t(p) * 2;
    if (via::Result r = vi->post_recv(buffers.message_descriptor(recv, handle), handle);
        r != via::Result::success)
      return fail(rank, "posting a receive", r);
    via::NetAddress local{{}, {'m', 'e', 's', 'h'}}, remote;
    if (via::Result r = nic->resolve("rank" + std::to_string(p), 0, remote.host); r != via::Result::success)
      return fail(rank, "resolving a peer", r);
    remote.discriminator = local.discriminator;
    if (via::Result r = vi->connect_peer_request(local, remote, kConnectTimeoutMs); r != via::Result::success)
      return fail(rank, "requesting a connection", r);
  }
  for (int p = 0; p < size; ++p)
    if (p != rank)
      if (via::Result r = vis[std::size_t(p)]->connect_peer_wait(); r != via::Result::success) {
        std::fprintf(stderr, "mp_mesh: rank %d: connecting to rank %d: %s\n", rank, p, via::describe(r));
        return 1;
      }
  const double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const std::size_t send = std::size_t(p) * 2 + 1;
    for (std::size_t i = 0; i < message_bytes; ++i) buffers.buffer(send)[i] = pattern(rank, p, i);
    if (via::Result r = vis[std::size_t(p)]->post_send(buffers.message_descriptor(send, handle), handle);
        r != via::Result::success)
      return fail(rank, "posting a send", r);
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    via::Vi* vi = vis[std::size_t(p)];
    VIP_DESCRIPTOR* d = nullptr;
    if (via::Result r = vi->send_wait(kWaitMs, d); r != via::Result::success) return fail(rank, "sending", r);
    if (via::Result r = vi->recv_wait(kWaitMs, d); r != via::Result::success) return fail(rank, "receiving", r);
    const std::uint8_t* got = buffers.buffer(std::size_t(p) * 2);
    bool intact = d->CS.Length == message_bytes;
    for (std::size_t i = 0; intact && i < message_bytes; ++i) intact = got[i] == pattern(p, rank, i);
    if ((d->CS.Status & VIP_STATUS_ERROR_MASK) || !intact) {
      std::fprintf(stderr, "mp_mesh: rank %d: the message from rank %d arrived wrong (status %u)\n", rank, p,
                   unsigned(d->CS.Status));
      return 1;
    }
  }
  if (rank == 0 && json)
    std::printf("{\"bench\":\"mp_mesh\",\"provider\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"setup_s\":%.3f,"
                "\"rss_kB\":%ld,\"shm_kB\":%lld}\n",
                nic->provider_name(), size, message_bytes, setup_s, resident_kb(),
                segment_kb("/dev/shm/viastack." + job->job_id() + "/nic." + std::to_string(rank)));
  else if (rank == 0)
    std::printf("mp_mesh: %d ranks over %s: every pair connected in %.2f s and exchanged %zu-byte messages\n", size,
                nic->provider_name(), setup_s, message_bytes);
  return 0;
}
