// The tcp provider's control messages: the handshake that proves a
// connection belongs to the job, then the VI connection request and its
// answer. Fixed-size, little-endian records, encoded and decoded here and
// nowhere else, so that the parser can be fuzzed on its own.
//
//   client                                   server
//   Hello {magic, version, purpose, nonce_c}  ->
//                       <- Challenge {magic, nonce_s, server proof}
//   Proof {client proof}                      ->   (nothing else is read before it checks)
//   ConnectRequest                            ->   (purpose kPurposeVi)
//                       <- ConnectResponse
//
// A proof is HMAC-SHA256 under the job key over a role label, the purpose and
// both nonces, so neither side can replay an old handshake or answer for the
// other role.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <vipl.h>

namespace via::tcp {

inline constexpr std::uint32_t kMagic = 0x54414956;  // "VIAT"
// 2: frames of up to 512 KiB (tcp_link.hpp); version 1 peers refused larger than 128 KiB.
// 3: connect requests and responses name their sender's kernel (host_kernel).
inline constexpr std::uint16_t kWireVersion = 3;
inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kProofBytes = 32;
inline constexpr std::size_t kKeyBytes = 32;
inline constexpr std::size_t kMaxDiscriminator = 16;
inline constexpr std::size_t kHostBytes = 6;  // IPv4 address and port, network order

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using ProofMac = std::array<std::uint8_t, kProofBytes>;
using JobKey = std::array<std::uint8_t, kKeyBytes>;

enum class Purpose : std::uint16_t { vi = 1, directory = 2 };

struct Hello {
  static constexpr std::size_t kBytes = 24;
  Purpose purpose = Purpose::vi;
  Nonce nonce{};
};

struct Challenge {
  static constexpr std::size_t kBytes = 4 + kNonceBytes + kProofBytes;
  Nonce nonce{};
  ProofMac proof{};
};

enum class ConnectMode : std::uint8_t { client = 1, peer = 2 };

struct ConnectRequest {
  static constexpr std::size_t kBytes = 12 + kHostBytes + 2 + 2 * kMaxDiscriminator;
  ConnectMode mode = ConnectMode::client;
  VIP_RELIABILITY_LEVEL reliability = VIP_SERVICE_RELIABLE_DELIVERY;
  bool rdma_write = false;
  bool rdma_read = false;
  std::uint32_t max_transfer = 0;
  std::uint32_t host_kernel = 0;  // the requester's kernel (tcp_link.hpp's this_kernel()); 0: not known
  std::array<std::uint8_t, kHostBytes> from_host{};  // where the requester listens
  std::vector<std::uint8_t> local_disc;   // the requester's discriminator
  std::vector<std::uint8_t> target_disc;  // the one it asks for
};

enum class ConnectStatus : std::uint8_t { accepted = 1, rejected = 2, reliability_mismatch = 3 };

struct ConnectResponse {
  static constexpr std::size_t kBytes = 12;
  ConnectStatus status = ConnectStatus::rejected;
  VIP_RELIABILITY_LEVEL reliability = VIP_SERVICE_RELIABLE_DELIVERY;
  bool rdma_write = false;
  bool rdma_read = false;
  std::uint32_t max_transfer = 0;
  std::uint32_t host_kernel = 0;  // the responder's kernel, as in ConnectRequest
};

// Encoders fill exactly T::kBytes; decoders take exactly T::kBytes and return
// nothing (with the reason in `error`) for anything malformed.
std::vector<std::uint8_t> encode(const Hello& m);
std::vector<std::uint8_t> encode(const Challenge& m);
std::vector<std::uint8_t> encode(const ConnectRequest& m);
std::vector<std::uint8_t> encode(const ConnectResponse& m);
std::optional<Hello> decode_hello(std::span<const std::uint8_t> bytes, std::string& error);
std::optional<Challenge> decode_challenge(std::span<const std::uint8_t> bytes, std::string& error);
std::optional<ConnectRequest> decode_request(std::span<const std::uint8_t> bytes, std::string& error);
std::optional<ConnectResponse> decode_response(std::span<const std::uint8_t> bytes, std::string& error);

// ---- the job key ----

enum class Role { client, server };
// HMAC-SHA256(key, role label | purpose | nonce_c | nonce_s).
ProofMac make_proof(const JobKey& key, Role role, Purpose purpose, const Nonce& client, const Nonce& server);
// Constant-time comparison.
bool proof_matches(const ProofMac& a, const ProofMac& b);
Nonce random_nonce();
JobKey random_key();
std::string key_to_hex(const JobKey& key);
std::optional<JobKey> key_from_hex(std::string_view hex);
// VIASTACK_JOB_KEY; nothing (with the reason) when unset or malformed.
std::optional<JobKey> job_key_from_environment(std::string& error);

}  // namespace via::tcp
