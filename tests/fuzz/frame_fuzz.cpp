// libFuzzer target for the engine's frame handling: whatever a peer writes
// into our rings (headers with any type, flags, lengths, offsets, handles,
// addresses) must end in a delivered message, an error completion or a
// broken VI, never a crash or a write outside registered memory.
//
// The input is a sequence of frames: a FrameHeader followed by up to
// header.length payload bytes. A fake link hands them to a VI that has
// receives posted and RDMA-enabled memory registered.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "providers/provider.hpp"

namespace {

// The memory a single-copy transfer may touch on this side: the target's
// registered memory. Anything else aborts, as the fuzzer's finding.
void check_within(const iovec* iov, std::size_t n, const std::byte* memory, std::size_t bytes) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto* base = static_cast<const std::byte*>(iov[i].iov_base);
    if (iov[i].iov_len && (base < memory || base > memory + bytes || iov[i].iov_len > std::size_t(memory + bytes - base)))
      std::abort();
  }
}

class FuzzLink final : public via::Link {
 public:
  // `direct`: the link offers single copy, whose transfers move nothing here
  // but check that this side's memory they name is `memory`'s.
  FuzzLink(const std::uint8_t* data, std::size_t size, bool direct, const std::byte* memory, std::size_t bytes)
      : data_(data), size_(size), direct_(direct), memory_(memory), bytes_(bytes) {
    parse();
  }
  const char* transport() const override { return "fuzz"; }
  bool direct() const override { return direct_; }
  bool direct_read(const iovec* local, std::size_t n, const iovec*, std::size_t) override {
    check_within(local, n, memory_, bytes_);
    return true;
  }
  bool direct_write(const iovec* local, std::size_t n, const iovec*, std::size_t) override {
    check_within(local, n, memory_, bytes_);
    return true;
  }
  std::uint32_t check_peer_region(std::uint64_t, std::uint64_t, via::MemHandle, bool) const override { return 0; }
  std::atomic<std::uint64_t>* peer_read_claim() override { return &claim_; }
  std::span<std::atomic<std::uint64_t>> peer_ring_read_claims() override { return ring_claims_; }
  std::size_t max_payload() const override { return 64 * 1024; }
  bool try_send(const via::FrameHeader&, const iovec*, std::size_t) override { return true; }
  bool peek(const via::FrameHeader*& header, const std::byte*& payload) override {
    if (!have_) return false;
    header = &header_;
    payload = payload_.data();
    return true;
  }
  void pop() override { parse(); }
  PeerState peer_state() override { return PeerState::up; }
  void close(bool) override {}

 private:
  void parse() {
    have_ = size_ >= sizeof(via::FrameHeader);
    if (!have_) return;
    std::memcpy(&header_, data_, sizeof header_);
    // A read request naming an address below the memory's size names that
    // offset of the registered memory, as a peer that learnt the address
    // would (the fuzzer could not guess it). A peer's offer of a share of its
    // read: as the peer would, it offers before the frame is seen.
    if (header_.type == via::kFrameReadRequest) {
      if (header_.raddr < bytes_) header_.raddr += reinterpret_cast<std::uintptr_t>(memory_);
      if (header_.flags & via::kFlagShared) claim_.store(via::read_claim_word(header_.imm, via::kClaimOffered));
      if (header_.flags & via::kFlagWithdrawable)
        ring_claims_[header_.imm % std::size(ring_claims_)].store(via::ring_claim_word(header_.imm, via::kClaimOffered, 0));
    }
    data_ += sizeof header_;
    size_ -= sizeof header_;
    // The payload buffer always holds header.length bytes, as a ring would.
    std::size_t length = std::min<std::size_t>(header_.length, max_payload());
    payload_.assign(std::max<std::size_t>(length, 1), std::byte{0});
    std::size_t take = std::min(length, size_);
    if (take) std::memcpy(payload_.data(), data_, take);
    data_ += take;
    size_ -= take;
  }
  const std::uint8_t* data_;
  std::size_t size_;
  const bool direct_;
  const std::byte* memory_;
  const std::size_t bytes_;
  std::atomic<std::uint64_t> claim_{0};
  std::atomic<std::uint64_t> ring_claims_[8]{};
  bool have_ = false;
  via::FrameHeader header_{};
  std::vector<std::byte> payload_;
};

struct Target {
  std::unique_ptr<via::Nic> nic;
  via::Ptag ptag = 0;
  std::byte* memory = nullptr;
  via::MemHandle handle = 0;
  static constexpr std::size_t kBytes = 1 << 20;

  Target() {
    setenv("VIASTACK_JOB", ("fuzz-" + std::to_string(getpid())).c_str(), 1);
    if (via::Nic::open("shm:0", nic) != via::Result::success) std::abort();
    nic->set_error_handler(nullptr);  // errors are expected here, and quiet
    nic->create_ptag(ptag);
    memory = static_cast<std::byte*>(std::aligned_alloc(4096, kBytes));
    nic->register_memory(memory, kBytes, via::MemAttributes{ptag, true, true}, handle);
  }
  VIP_DESCRIPTOR* desc(int i) { return reinterpret_cast<VIP_DESCRIPTOR*>(memory + i * 64); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Target t;
  // Reliability level, the VI's RDMA enables and whether the link has single
  // copy come from the first byte.
  const std::uint8_t mode = size ? data[0] : 0;
  via::ViAttributes attrs;
  attrs.reliability = std::uint16_t(1u << (mode % 3));
  attrs.ptag = t.ptag;
  attrs.rdma_write = mode & 4;
  attrs.rdma_read = (mode & 8) && attrs.reliability != VIP_SERVICE_UNRELIABLE;
  via::Vi* vi;
  if (t.nic->create_vi(attrs, nullptr, nullptr, vi) != via::Result::success) std::abort();
  // Receives over the first half of the memory (descriptors live in the first 4 KiB).
  for (int i = 0; i < 8; ++i) {
    VIP_DESCRIPTOR* d = t.desc(i);
    std::memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = t.memory + 4096 + std::size_t(i) * 65536;
    d->DS[0].Local.Handle = t.handle;
    d->DS[0].Local.Length = i % 2 ? 65536 : 100;
    vi->post_recv(d, t.handle);
  }
  via::impl(*vi).attach(
      std::make_unique<FuzzLink>(data + (size ? 1 : 0), size ? size - 1 : 0, mode & 16, t.memory, t.kBytes),
      via::ViAttributes{});
  // An RDMA read and a send outstanding, so responses and acks have something to match.
  VIP_DESCRIPTOR* read = t.desc(20);
  std::memset(read, 0, 128);
  read->CS.Control = VIP_CONTROL_OP_RDMAREAD;
  read->CS.SegCount = 2;
  read->DS[0].Remote.Data.AddressBits = 0x1000;
  read->DS[0].Remote.Handle = 1;
  read->DS[1].Local.Data.Address = t.memory + (t.kBytes - 8192);
  read->DS[1].Local.Handle = t.handle;
  read->DS[1].Local.Length = 4096;
  vi->post_send(read, t.handle);
  for (int i = 0; i < 64 && vi->state() == via::ViState::connected; ++i) t.nic->progress();
  // Drain, return to idle, destroy.
  VIP_DESCRIPTOR* d;
  vi->disconnect();
  while (vi->recv_done(d) == via::Result::success) {
  }
  while (vi->send_done(d) == via::Result::success) {
  }
  if (t.nic->destroy_vi(vi) != via::Result::success) std::abort();
  return 0;
}
