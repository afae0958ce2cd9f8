// The tcp provider's control messages (providers/tcp/wire.hpp): exact
// encodings, round trips, every malformed form refused with a reason, and the
// job-key proofs and key parsing the handshake stands on.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "providers/tcp/wire.hpp"

using namespace via::tcp;

namespace {

using Bytes = std::vector<std::uint8_t>;

Nonce nonce_from(std::uint8_t first) {
  Nonce n;
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = std::uint8_t(first + i);
  return n;
}

ProofMac proof_from(std::uint8_t first) {
  ProofMac p;
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::uint8_t(first + 3 * i);
  return p;
}

JobKey key_from(std::uint8_t first) {
  JobKey k;
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::uint8_t(first ^ (i * 29));
  return k;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Expects decode to refuse `bytes` with an error containing `reason`.
template <class Decode>
void expect_refused(Decode decode, const Bytes& bytes, const std::string& reason) {
  std::string error;
  EXPECT_FALSE(decode(bytes, error).has_value()) << "accepted; expected: " << reason;
  EXPECT_NE(error.find(reason), std::string::npos) << "error was '" << error << "', expected '" << reason << "'";
}

// ---- Hello ----

TEST(TcpWireHello, EncodesMagicVersionPurposeAndNonceLittleEndian) {
  const Bytes bytes = encode(Hello{Purpose::directory, nonce_from(0x10)});
  ASSERT_EQ(bytes.size(), Hello::kBytes);
  EXPECT_EQ(Bytes(bytes.begin(), bytes.begin() + 8), Bytes({'V', 'I', 'A', 'T', 3, 0, 2, 0}));
  const Nonce nonce = nonce_from(0x10);
  EXPECT_EQ(Bytes(bytes.begin() + 8, bytes.end()), Bytes(nonce.begin(), nonce.end()));
}

TEST(TcpWireHello, RoundTripsBothPurposes) {
  for (Purpose purpose : {Purpose::vi, Purpose::directory}) {
    std::string error;
    auto hello = decode_hello(encode(Hello{purpose, nonce_from(0xA0)}), error);
    ASSERT_TRUE(hello.has_value()) << error;
    EXPECT_EQ(hello->purpose, purpose);
    EXPECT_EQ(hello->nonce, nonce_from(0xA0));
  }
}

TEST(TcpWireHello, RefusesBadMagicVersionPurposeAndSize) {
  const Bytes good = encode(Hello{Purpose::vi, nonce_from(1)});
  for (std::size_t i = 0; i < 4; ++i) {
    Bytes bad = good;
    bad[i] ^= 0x20;
    expect_refused(decode_hello, bad, "bad magic");
  }
  Bytes version = good;
  version[4] = 1;  // frames of at most 128 KiB
  expect_refused(decode_hello, version, "unsupported protocol version 1");
  version[4] = 2;  // connect requests and responses without the sender's kernel
  expect_refused(decode_hello, version, "unsupported protocol version 2");
  version[4] = 4;
  expect_refused(decode_hello, version, "unsupported protocol version 4");
  version[4] = 1;
  version[5] = 1;  // 257
  expect_refused(decode_hello, version, "unsupported protocol version 257");
  for (std::uint16_t purpose : {0, 3, 0x0101}) {
    Bytes bad = good;
    bad[6] = std::uint8_t(purpose);
    bad[7] = std::uint8_t(purpose >> 8);
    expect_refused(decode_hello, bad, "unknown connection purpose " + std::to_string(purpose));
  }
  expect_refused(decode_hello, Bytes(good.begin(), good.end() - 1), "hello: wrong size 23");
  Bytes longer = good;
  longer.push_back(0);
  expect_refused(decode_hello, longer, "hello: wrong size 25");
  expect_refused(decode_hello, Bytes{}, "hello: wrong size 0");
  // Someone speaking another protocol at our port.
  const Bytes http = text("GET / HTTP/1.1\r\nHost: example\r\n");
  expect_refused(decode_hello, Bytes(http.begin(), http.begin() + Hello::kBytes), "bad magic");
}

// ---- Challenge ----

TEST(TcpWireChallenge, RoundTripsNonceAndProof) {
  const Bytes bytes = encode(Challenge{nonce_from(0x33), proof_from(0x44)});
  ASSERT_EQ(bytes.size(), Challenge::kBytes);
  EXPECT_EQ(Bytes(bytes.begin(), bytes.begin() + 4), Bytes({'V', 'I', 'A', 'T'}));
  std::string error;
  auto challenge = decode_challenge(bytes, error);
  ASSERT_TRUE(challenge.has_value()) << error;
  EXPECT_EQ(challenge->nonce, nonce_from(0x33));
  EXPECT_EQ(challenge->proof, proof_from(0x44));
}

TEST(TcpWireChallenge, RefusesBadMagicAndSize) {
  const Bytes good = encode(Challenge{nonce_from(0x33), proof_from(0x44)});
  Bytes bad = good;
  bad[3] = 0;
  expect_refused(decode_challenge, bad, "bad magic");
  expect_refused(decode_challenge, Bytes(good.begin(), good.end() - 1), "challenge: wrong size 51");
  expect_refused(decode_challenge, Bytes(Hello::kBytes, 0), "challenge: wrong size 24");
}

// ---- ConnectRequest ----

ConnectRequest full_request() {
  ConnectRequest r;
  r.mode = ConnectMode::peer;
  r.reliability = VIP_SERVICE_RELIABLE_RECEPTION;
  r.rdma_write = true;
  r.rdma_read = false;
  r.max_transfer = 0x01020304;
  r.host_kernel = 0xA0B0C0D0;
  r.from_host = {127, 0, 0, 1, 0x12, 0x34};
  r.local_disc = text("0123456789abcdef");  // the longest allowed
  r.target_disc = text("srv");
  return r;
}

void expect_same(const ConnectRequest& a, const ConnectRequest& b) {
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.reliability, b.reliability);
  EXPECT_EQ(a.rdma_write, b.rdma_write);
  EXPECT_EQ(a.rdma_read, b.rdma_read);
  EXPECT_EQ(a.max_transfer, b.max_transfer);
  EXPECT_EQ(a.host_kernel, b.host_kernel);
  EXPECT_EQ(a.from_host, b.from_host);
  EXPECT_EQ(a.local_disc, b.local_disc);
  EXPECT_EQ(a.target_disc, b.target_disc);
}

TEST(TcpWireConnectRequest, HasTheDocumentedLayout) {
  const Bytes bytes = encode(full_request());
  ASSERT_EQ(bytes.size(), ConnectRequest::kBytes);
  ASSERT_EQ(ConnectRequest::kBytes, 52u);
  EXPECT_EQ(Bytes(bytes.begin(), bytes.begin() + 20),
            Bytes({2, 4, 1, 0, 0x04, 0x03, 0x02, 0x01, 0xD0, 0xC0, 0xB0, 0xA0, 127, 0, 0, 1, 0x12, 0x34, 16, 3}));
  EXPECT_EQ(Bytes(bytes.begin() + 20, bytes.begin() + 36), text("0123456789abcdef"));
  Bytes target = text("srv");
  target.resize(kMaxDiscriminator);  // zero padded
  EXPECT_EQ(Bytes(bytes.begin() + 36, bytes.end()), target);
}

TEST(TcpWireConnectRequest, RoundTripsEveryModeLevelAndFlag) {
  for (ConnectMode mode : {ConnectMode::client, ConnectMode::peer})
    for (VIP_RELIABILITY_LEVEL level :
         {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_RECEPTION})
      for (int flags = 0; flags < 4; ++flags) {
        ConnectRequest r = full_request();
        r.mode = mode;
        r.reliability = level;
        r.rdma_write = flags & 1;
        r.rdma_read = flags & 2;
        std::string error;
        auto decoded = decode_request(encode(r), error);
        ASSERT_TRUE(decoded.has_value()) << error;
        expect_same(*decoded, r);
      }
}

TEST(TcpWireConnectRequest, RoundTripsEmptyAndLongestDiscriminators) {
  ConnectRequest r = full_request();
  r.local_disc.clear();
  r.target_disc = text("fedcba9876543210");
  r.max_transfer = 0xFFFFFFFF;
  std::string error;
  auto decoded = decode_request(encode(r), error);
  ASSERT_TRUE(decoded.has_value()) << error;
  expect_same(*decoded, r);
}

TEST(TcpWireConnectRequest, RefusesEveryMalformedField) {
  const Bytes good = encode(full_request());
  struct Case {
    const char* what;
    std::size_t at;
    std::uint8_t value;
  };
  const Case cases[] = {
      {"mode 0", 0, 0},          {"mode 3", 0, 3},           {"mode 0xFF", 0, 0xFF},
      {"reliability 0", 1, 0},   {"reliability 3", 1, 3},    {"reliability 8", 1, 8},
      {"rdma_write 2", 2, 2},    {"rdma_write 0xFF", 2, 0xFF}, {"rdma_read 2", 3, 2},
      {"local length 17", 18, 17}, {"local length 255", 18, 255},
      {"target length 17", 19, 17},  {"target length 255", 19, 255},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Bytes bad = good;
    bad[c.at] = c.value;
    expect_refused(decode_request, bad, "malformed connect request");
  }
  expect_refused(decode_request, Bytes(good.begin(), good.end() - 1), "connect request: wrong size 51");
  Bytes longer = good;
  longer.push_back(0);
  expect_refused(decode_request, longer, "connect request: wrong size 53");
}

// ---- ConnectResponse ----

TEST(TcpWireConnectResponse, RoundTripsEveryStatus) {
  for (ConnectStatus status : {ConnectStatus::accepted, ConnectStatus::rejected, ConnectStatus::reliability_mismatch}) {
    ConnectResponse r{status, VIP_SERVICE_UNRELIABLE, true, false, 0xA1B2C3D4, 0x01020304};
    const Bytes bytes = encode(r);
    ASSERT_EQ(bytes.size(), ConnectResponse::kBytes);
    EXPECT_EQ(bytes, Bytes({std::uint8_t(status), 1, 1, 0, 0xD4, 0xC3, 0xB2, 0xA1, 4, 3, 2, 1}));
    std::string error;
    auto decoded = decode_response(bytes, error);
    ASSERT_TRUE(decoded.has_value()) << error;
    EXPECT_EQ(decoded->status, status);
    EXPECT_EQ(decoded->reliability, VIP_SERVICE_UNRELIABLE);
    EXPECT_TRUE(decoded->rdma_write);
    EXPECT_FALSE(decoded->rdma_read);
    EXPECT_EQ(decoded->max_transfer, 0xA1B2C3D4u);
    EXPECT_EQ(decoded->host_kernel, 0x01020304u);
  }
}

TEST(TcpWireConnectResponse, RefusesEveryMalformedField) {
  const Bytes good = encode(ConnectResponse{ConnectStatus::accepted, VIP_SERVICE_RELIABLE_DELIVERY, true, true, 4096});
  struct Case {
    const char* what;
    std::size_t at;
    std::uint8_t value;
  };
  const Case cases[] = {
      {"status 0", 0, 0},        {"status 4", 0, 4},        {"status 0xFF", 0, 0xFF},  {"reliability 0", 1, 0},
      {"reliability 6", 1, 6},   {"rdma_write 2", 2, 2},    {"rdma_read 0x10", 3, 0x10},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Bytes bad = good;
    bad[c.at] = c.value;
    expect_refused(decode_response, bad, "malformed connect response");
  }
  expect_refused(decode_response, Bytes(11, 0), "connect response: wrong size 11");
  expect_refused(decode_response, Bytes(13, 0), "connect response: wrong size 13");
}

// ---- proofs and keys ----

TEST(TcpWireProof, DependsOnKeyRolePurposeAndBothNonces) {
  const JobKey key = key_from(7);
  const Nonce c = nonce_from(1), s = nonce_from(100);
  const ProofMac base = make_proof(key, Role::client, Purpose::vi, c, s);
  EXPECT_EQ(make_proof(key, Role::client, Purpose::vi, c, s), base) << "a proof must be reproducible";
  EXPECT_TRUE(proof_matches(base, make_proof(key, Role::client, Purpose::vi, c, s)));

  JobKey other_key = key;
  other_key[31] ^= 1;
  Nonce other_c = c, other_s = s;
  other_c[15] ^= 0x80;
  other_s[0] ^= 1;
  const std::vector<std::pair<const char*, ProofMac>> variants = {
      {"key", make_proof(other_key, Role::client, Purpose::vi, c, s)},
      {"role", make_proof(key, Role::server, Purpose::vi, c, s)},
      {"purpose", make_proof(key, Role::client, Purpose::directory, c, s)},
      {"client nonce", make_proof(key, Role::client, Purpose::vi, other_c, s)},
      {"server nonce", make_proof(key, Role::client, Purpose::vi, c, other_s)},
      {"nonces swapped", make_proof(key, Role::client, Purpose::vi, s, c)},
  };
  for (const auto& [what, proof] : variants) {
    SCOPED_TRACE(what);
    EXPECT_NE(proof, base);
    EXPECT_FALSE(proof_matches(proof, base));
  }
}

TEST(TcpWireProof, MatchingComparesEveryByte) {
  const ProofMac p = make_proof(key_from(9), Role::server, Purpose::vi, nonce_from(3), nonce_from(4));
  for (std::size_t i = 0; i < p.size(); ++i) {
    ProofMac q = p;
    q[i] ^= 0x01;
    EXPECT_FALSE(proof_matches(p, q)) << "byte " << i;
  }
}

TEST(TcpWireKeys, RandomKeysAndNoncesDiffer) {
  EXPECT_NE(random_key(), random_key());
  EXPECT_NE(random_nonce(), random_nonce());
}

TEST(TcpWireKeys, HexRoundTripAndUpperCase) {
  const JobKey key = key_from(0x5C);
  const std::string hex = key_to_hex(key);
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(key_from_hex(hex), key);
  std::string upper = hex;
  for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_EQ(key_from_hex(upper), key);
  EXPECT_EQ(key_to_hex(JobKey{}), std::string(64, '0'));
  JobKey ff;
  ff.fill(0xFF);
  EXPECT_EQ(key_from_hex(std::string(64, 'f')), ff);
}

TEST(TcpWireKeys, HexRefusesBadLengthAndDigits) {
  const std::string hex = key_to_hex(key_from(0x21));
  EXPECT_FALSE(key_from_hex(""));
  EXPECT_FALSE(key_from_hex(hex.substr(0, 63)));
  EXPECT_FALSE(key_from_hex(hex + "0"));
  EXPECT_FALSE(key_from_hex(hex.substr(0, 62)));
  for (std::size_t at : {std::size_t(0), std::size_t(1), std::size_t(33), std::size_t(63)})
    for (char bad : {'g', 'G', ' ', '-', 'x', '\0', ':'}) {
      std::string s = hex;
      s[at] = bad;
      EXPECT_FALSE(key_from_hex(s)) << "digit '" << bad << "' at " << at;
    }
}

// Sets VIASTACK_JOB_KEY (or unsets it, for nullopt) for one test, then restores it.
class ScopedJobKey {
 public:
  explicit ScopedJobKey(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("VIASTACK_JOB_KEY")) saved_ = old;
    if (value)
      setenv("VIASTACK_JOB_KEY", value->c_str(), 1);
    else
      unsetenv("VIASTACK_JOB_KEY");
  }
  ~ScopedJobKey() {
    if (saved_)
      setenv("VIASTACK_JOB_KEY", saved_->c_str(), 1);
    else
      unsetenv("VIASTACK_JOB_KEY");
  }

 private:
  std::optional<std::string> saved_;
};

TEST(TcpWireKeys, JobKeyFromEnvironment) {
  const JobKey key = key_from(0x42);
  {
    ScopedJobKey env(key_to_hex(key));
    std::string error;
    EXPECT_EQ(job_key_from_environment(error), key);
  }
  for (const std::optional<std::string>& unset : {std::optional<std::string>(), std::optional<std::string>("")}) {
    ScopedJobKey env(unset);
    std::string error;
    EXPECT_FALSE(job_key_from_environment(error));
    EXPECT_NE(error.find("VIASTACK_JOB_KEY is not set"), std::string::npos) << error;
  }
  // A malformed key stops the program, naming the variable but not the secret.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const std::string& malformed : {std::string("secret"), key_to_hex(key).substr(1), key_to_hex(key) + "00",
                                       "z" + key_to_hex(key).substr(1)}) {
    const auto read_key = [&malformed] {
      ScopedJobKey env(malformed);
      std::string error;
      job_key_from_environment(error);
    };
    EXPECT_EXIT(read_key(), ::testing::ExitedWithCode(1),
                "^viastack\\[via (pid|rank) [0-9]+\\] error: "
                "VIASTACK_JOB_KEY=<[0-9]+ characters, not shown>: expected 64 hex digits")
        << malformed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
