// Connection set-up at scale: every rank asks every other for a peer-to-peer
// connection at once, then waits for them in rank order (as MPI's and AM's
// start-up do), and exchanges one 8-byte message with each. With many ranks
// the requests outnumber what a NIC's connection inbox or a listener's
// pending connections hold, so the job finishes only if a request that found
// no room is retried while its sender waits on other connections.
// Prints the set-up time on rank 0.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "via/bootstrap.hpp"
#include "via/via.hpp"

namespace {

constexpr std::uint32_t kConnectTimeoutMs = 60000;
constexpr std::uint32_t kWaitMs = 60000;
constexpr std::size_t kDescriptorBytes = 64;

// A value no other pair of ranks sends.
std::uint64_t token(int from, int to) { return std::uint64_t(from) << 32 | std::uint32_t(to) | 0x5a00000000000000ull; }

struct Buffers {
  explicit Buffers(std::size_t peers) : bytes((peers * 2) * (kDescriptorBytes + 8)) {
    base = static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    std::memset(base, 0, bytes);
  }
  ~Buffers() { std::free(base); }
  // Descriptor and 8-byte buffer number i (two per peer: a send and a receive).
  VIP_DESCRIPTOR* descriptor(std::size_t i) const { return reinterpret_cast<VIP_DESCRIPTOR*>(base + i * kDescriptorBytes); }
  std::uint64_t* word(std::size_t i, std::size_t count) const {
    return reinterpret_cast<std::uint64_t*>(base + count * kDescriptorBytes) + i;
  }
  std::byte* base;
  std::size_t bytes;
};

VIP_DESCRIPTOR* message(VIP_DESCRIPTOR* d, std::uint64_t* buffer, via::MemHandle handle) {
  *d = VIP_DESCRIPTOR{};
  d->CS.SegCount = 1;
  d->CS.Length = sizeof *buffer;
  d->DS[0].Local.Data.Address = buffer;
  d->DS[0].Local.Handle = handle;
  d->DS[0].Local.Length = sizeof *buffer;
  return d;
}

int fail(int rank, const char* what, via::Result r) {
  std::fprintf(stderr, "mp_mesh: rank %d: %s: %s\n", rank, what, via::describe(r));
  return 1;
}

}  // namespace

int main() {
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) {
    std::fprintf(stderr, "mp_mesh: %s\n", why.c_str());
    return 1;
  }
  const int rank = job->rank(), size = job->size();
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<via::Nic> nic;
  via::Ptag ptag = 0;
  if (via::Result r = via::Nic::open("", nic); r != via::Result::success) return fail(rank, "opening the NIC", r);
  if (via::Result r = nic->create_ptag(ptag); r != via::Result::success) return fail(rank, "creating a ptag", r);
  const std::size_t slots = std::size_t(size) * 2;
  Buffers buffers{std::size_t(size)};
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
    if (via::Result r = vi->post_recv(message(buffers.descriptor(recv), buffers.word(recv, slots), handle), handle);
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
    *buffers.word(send, slots) = token(rank, p);
    if (via::Result r = vis[std::size_t(p)]->post_send(message(buffers.descriptor(send), buffers.word(send, slots), handle),
                                                       handle);
        r != via::Result::success)
      return fail(rank, "posting a send", r);
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    via::Vi* vi = vis[std::size_t(p)];
    VIP_DESCRIPTOR* d = nullptr;
    if (via::Result r = vi->send_wait(kWaitMs, d); r != via::Result::success) return fail(rank, "sending", r);
    if (via::Result r = vi->recv_wait(kWaitMs, d); r != via::Result::success) return fail(rank, "receiving", r);
    const std::uint64_t got = *buffers.word(std::size_t(p) * 2, slots);
    if ((d->CS.Status & VIP_STATUS_ERROR_MASK) || got != token(p, rank)) {
      std::fprintf(stderr, "mp_mesh: rank %d: the message from rank %d arrived wrong (status %u)\n", rank, p,
                   unsigned(d->CS.Status));
      return 1;
    }
  }
  if (rank == 0)
    std::printf("mp_mesh: %d ranks over %s: every pair connected in %.2f s and exchanged a message\n", size,
                nic->provider_name(), setup_s);
  return 0;
}
