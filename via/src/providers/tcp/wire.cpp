#include "providers/tcp/wire.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "via/config.hpp"

namespace via::tcp {

namespace {

class Writer {
 public:
  explicit Writer(std::size_t size) { bytes_.reserve(size); }
  void u8(std::uint8_t v) { bytes_.push_back(v); }
  void u16(std::uint16_t v) { u8(std::uint8_t(v)), u8(std::uint8_t(v >> 8)); }
  void u32(std::uint32_t v) { u16(std::uint16_t(v)), u16(std::uint16_t(v >> 16)); }
  void raw(std::span<const std::uint8_t> s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  // A length byte, then the bytes padded to `room`.
  void padded(const std::vector<std::uint8_t>& s, std::size_t room) {
    raw(s);
    bytes_.resize(bytes_.size() + room - s.size());
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> s) : s_(s) {}
  std::uint8_t u8() { return s_[at_++]; }
  std::uint16_t u16() { return std::uint16_t(u8() | u8() << 8); }
  std::uint32_t u32() { return std::uint32_t(u16()) | std::uint32_t(u16()) << 16; }
  template <std::size_t N>
  std::array<std::uint8_t, N> array() {
    std::array<std::uint8_t, N> a;
    std::memcpy(a.data(), s_.data() + at_, N);
    at_ += N;
    return a;
  }
  std::vector<std::uint8_t> bytes(std::size_t n, std::size_t room) {
    std::vector<std::uint8_t> v(s_.begin() + long(at_), s_.begin() + long(at_ + n));
    at_ += room;
    return v;
  }

 private:
  std::span<const std::uint8_t> s_;
  std::size_t at_ = 0;
};

bool size_is(std::span<const std::uint8_t> bytes, std::size_t expected, const char* what, std::string& error) {
  if (bytes.size() == expected) return true;
  error = what;
  error += ": wrong size ";
  error += std::to_string(bytes.size());
  return false;
}

bool valid_reliability(std::uint8_t r) {
  return r == VIP_SERVICE_UNRELIABLE || r == VIP_SERVICE_RELIABLE_DELIVERY || r == VIP_SERVICE_RELIABLE_RECEPTION;
}

bool valid_flag(std::uint8_t f) { return f <= 1; }

}  // namespace

std::vector<std::uint8_t> encode(const Hello& m) {
  Writer w(Hello::kBytes);
  w.u32(kMagic);
  w.u16(kWireVersion);
  w.u16(std::uint16_t(m.purpose));
  w.raw(m.nonce);
  return w.take();
}

std::vector<std::uint8_t> encode(const Challenge& m) {
  Writer w(Challenge::kBytes);
  w.u32(kMagic);
  w.raw(m.nonce);
  w.raw(m.proof);
  return w.take();
}

std::vector<std::uint8_t> encode(const ConnectRequest& m) {
  Writer w(ConnectRequest::kBytes);
  w.u8(std::uint8_t(m.mode));
  w.u8(std::uint8_t(m.reliability));
  w.u8(m.rdma_write);
  w.u8(m.rdma_read);
  w.u32(m.max_transfer);
  w.u32(m.host_kernel);
  w.raw(m.from_host);
  w.u8(std::uint8_t(m.local_disc.size()));
  w.u8(std::uint8_t(m.target_disc.size()));
  w.padded(m.local_disc, kMaxDiscriminator);
  w.padded(m.target_disc, kMaxDiscriminator);
  return w.take();
}

std::vector<std::uint8_t> encode(const ConnectResponse& m) {
  Writer w(ConnectResponse::kBytes);
  w.u8(std::uint8_t(m.status));
  w.u8(std::uint8_t(m.reliability));
  w.u8(m.rdma_write);
  w.u8(m.rdma_read);
  w.u32(m.max_transfer);
  w.u32(m.host_kernel);
  return w.take();
}

std::optional<Hello> decode_hello(std::span<const std::uint8_t> bytes, std::string& error) {
  if (!size_is(bytes, Hello::kBytes, "hello", error)) return std::nullopt;
  Reader r(bytes);
  if (r.u32() != kMagic) {
    error = "not a viastack peer (bad magic)";
    return std::nullopt;
  }
  if (std::uint16_t v = r.u16(); v != kWireVersion) {
    error = "unsupported protocol version " + std::to_string(v);
    return std::nullopt;
  }
  Hello m;
  std::uint16_t purpose = r.u16();
  if (purpose != std::uint16_t(Purpose::vi) && purpose != std::uint16_t(Purpose::directory)) {
    error = "unknown connection purpose " + std::to_string(purpose);
    return std::nullopt;
  }
  m.purpose = Purpose(purpose);
  m.nonce = r.array<kNonceBytes>();
  return m;
}

std::optional<Challenge> decode_challenge(std::span<const std::uint8_t> bytes, std::string& error) {
  if (!size_is(bytes, Challenge::kBytes, "challenge", error)) return std::nullopt;
  Reader r(bytes);
  if (r.u32() != kMagic) {
    error = "not a viastack peer (bad magic)";
    return std::nullopt;
  }
  Challenge m;
  m.nonce = r.array<kNonceBytes>();
  m.proof = r.array<kProofBytes>();
  return m;
}

std::optional<ConnectRequest> decode_request(std::span<const std::uint8_t> bytes, std::string& error) {
  if (!size_is(bytes, ConnectRequest::kBytes, "connect request", error)) return std::nullopt;
  Reader r(bytes);
  ConnectRequest m;
  const std::uint8_t mode = r.u8(), reliability = r.u8(), rdma_write = r.u8(), rdma_read = r.u8();
  m.max_transfer = r.u32();
  m.host_kernel = r.u32();
  m.from_host = r.array<kHostBytes>();
  const std::uint8_t local_len = r.u8(), target_len = r.u8();
  if ((mode != std::uint8_t(ConnectMode::client) && mode != std::uint8_t(ConnectMode::peer)) ||
      !valid_reliability(reliability) || !valid_flag(rdma_write) || !valid_flag(rdma_read) ||
      local_len > kMaxDiscriminator || target_len > kMaxDiscriminator) {
    error = "malformed connect request";
    return std::nullopt;
  }
  m.mode = ConnectMode(mode);
  m.reliability = VIP_RELIABILITY_LEVEL(reliability);
  m.rdma_write = rdma_write;
  m.rdma_read = rdma_read;
  m.local_disc = r.bytes(local_len, kMaxDiscriminator);
  m.target_disc = r.bytes(target_len, kMaxDiscriminator);
  return m;
}

std::optional<ConnectResponse> decode_response(std::span<const std::uint8_t> bytes, std::string& error) {
  if (!size_is(bytes, ConnectResponse::kBytes, "connect response", error)) return std::nullopt;
  Reader r(bytes);
  ConnectResponse m;
  const std::uint8_t status = r.u8(), reliability = r.u8(), rdma_write = r.u8(), rdma_read = r.u8();
  m.max_transfer = r.u32();
  m.host_kernel = r.u32();
  if (status < std::uint8_t(ConnectStatus::accepted) || status > std::uint8_t(ConnectStatus::reliability_mismatch) ||
      !valid_reliability(reliability) || !valid_flag(rdma_write) || !valid_flag(rdma_read)) {
    error = "malformed connect response";
    return std::nullopt;
  }
  m.status = ConnectStatus(status);
  m.reliability = VIP_RELIABILITY_LEVEL(reliability);
  m.rdma_write = rdma_write;
  m.rdma_read = rdma_read;
  return m;
}

// ---- the job key ----

ProofMac make_proof(const JobKey& key, Role role, Purpose purpose, const Nonce& client, const Nonce& server) {
  Writer w(64);
  static constexpr char kClient[] = "viastack client", kServer[] = "viastack server";
  const char* label = role == Role::client ? kClient : kServer;
  w.raw({reinterpret_cast<const std::uint8_t*>(label), std::strlen(label)});
  w.u16(std::uint16_t(purpose));
  w.raw(client);
  w.raw(server);
  const std::vector<std::uint8_t> message = w.take();
  ProofMac mac{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), int(key.size()), message.data(), message.size(), mac.data(), &length) ||
      length != mac.size())
    throw std::runtime_error("HMAC-SHA256 failed");
  return mac;
}

bool proof_matches(const ProofMac& a, const ProofMac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

namespace {
template <std::size_t N>
std::array<std::uint8_t, N> random_bytes() {
  std::array<std::uint8_t, N> a;
  if (RAND_bytes(a.data(), int(N)) != 1) throw std::runtime_error("no random bytes from OpenSSL");
  return a;
}
}  // namespace

Nonce random_nonce() { return random_bytes<kNonceBytes>(); }
JobKey random_key() { return random_bytes<kKeyBytes>(); }

std::string key_to_hex(const JobKey& key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (std::uint8_t b : key) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

std::optional<JobKey> key_from_hex(std::string_view hex) {
  if (hex.size() != 2 * kKeyBytes) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  JobKey key;
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    key[i] = std::uint8_t(hi << 4 | lo);
  }
  return key;
}

std::optional<JobKey> job_key_from_environment(std::string& error) {
  const auto hex = config::text_if_set("VIASTACK_JOB_KEY");  // 64 hex digits: checked by the table
  if (!hex) {
    error = "VIASTACK_JOB_KEY is not set (viarun sets it; the tcp provider only talks to members of its job)";
    return std::nullopt;
  }
  return key_from_hex(*hex);
}

}  // namespace via::tcp
