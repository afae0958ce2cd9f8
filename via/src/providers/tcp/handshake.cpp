#include "providers/tcp/handshake.hpp"

#include "via/config.hpp"

namespace via::tcp {

std::string describe_endpoint(const asio::ip::tcp::endpoint& e) {
  std::string s = e.address().to_string();
  s += ':';
  s += std::to_string(e.port());
  return s;
}

std::optional<asio::ip::tcp::endpoint> parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  asio::error_code ec;
  const auto address = asio::ip::make_address_v4(text.substr(0, colon), ec);
  const std::string port = text.substr(colon + 1);
  if (ec || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const unsigned long number = std::stoul(port);
  if (number == 0 || number > 65535) return std::nullopt;
  return asio::ip::tcp::endpoint(address, std::uint16_t(number));
}

std::chrono::milliseconds auth_timeout() {
  static const auto value = std::chrono::milliseconds(config::integer("VIASTACK_TCP_AUTH_TIMEOUT_MS"));
  return value;
}

Handshake::Handshake(asio::ip::tcp::socket s) : socket(std::move(s)) {
  asio::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  peer = ec ? "<unknown peer>" : describe_endpoint(remote);
}

namespace {
std::string io_error(const char* what, const asio::error_code& ec) {
  if (ec == asio::error::eof) return std::string(what) + ": connection closed by the peer";
  if (ec == asio::error::operation_aborted) return std::string(what) + ": timed out";
  return std::string(what) + ": " + ec.message();
}
}  // namespace

void read_exactly(const std::shared_ptr<Handshake>& h, std::size_t n, HandshakeDone done) {
  h->buffer.resize(n);
  asio::async_read(h->socket, asio::buffer(h->buffer), [h, done = std::move(done)](const asio::error_code& ec, std::size_t) {
    h->stream_failed = bool(ec);
    done(ec ? io_error("reading", ec) : std::string());
  });
}

void write_all(const std::shared_ptr<Handshake>& h, std::vector<std::uint8_t> bytes, HandshakeDone done) {
  auto data = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
  asio::async_write(h->socket, asio::buffer(*data), [h, data, done = std::move(done)](const asio::error_code& ec, std::size_t) {
    h->stream_failed = bool(ec);
    done(ec ? io_error("writing", ec) : std::string());
  });
}

void run_client_handshake(const std::shared_ptr<Handshake>& h, const JobKey& key, Purpose purpose,
                          std::vector<std::uint8_t> after_proof, HandshakeDone done) {
  h->purpose = purpose;
  h->client_nonce = random_nonce();
  write_all(h, encode(Hello{purpose, h->client_nonce}), [h, &key, after_proof = std::move(after_proof), done](const std::string& error) {
    if (!error.empty()) return done(error);
    read_exactly(h, Challenge::kBytes, [h, &key, after_proof, done](const std::string& error) {
      if (!error.empty()) return done(error);
      std::string why;
      auto challenge = decode_challenge(h->buffer, why);
      if (!challenge) return done(why);
      h->server_nonce = challenge->nonce;
      if (!proof_matches(challenge->proof, make_proof(key, Role::server, h->purpose, h->client_nonce, h->server_nonce)))
        return done("the peer could not prove it belongs to this job (wrong job key)");
      const ProofMac mine = make_proof(key, Role::client, h->purpose, h->client_nonce, h->server_nonce);
      std::vector<std::uint8_t> bytes(mine.begin(), mine.end());
      bytes.insert(bytes.end(), after_proof.begin(), after_proof.end());
      write_all(h, std::move(bytes), done);
    });
  });
}

void run_server_handshake(const std::shared_ptr<Handshake>& h, const JobKey& key, HandshakeDone done) {
  read_exactly(h, Hello::kBytes, [h, &key, done](const std::string& error) {
    if (!error.empty()) return done(error);
    std::string why;
    auto hello = decode_hello(h->buffer, why);
    if (!hello) return done(why);
    h->purpose = hello->purpose;
    h->client_nonce = hello->nonce;
    h->server_nonce = random_nonce();
    Challenge challenge{h->server_nonce, make_proof(key, Role::server, h->purpose, h->client_nonce, h->server_nonce)};
    write_all(h, encode(challenge), [h, &key, done](const std::string& error) {
      if (!error.empty()) return done(error);
      h->challenge_sent = true;
      read_exactly(h, kProofBytes, [h, &key, done](const std::string& error) {
        if (!error.empty()) return done(error);
        ProofMac proof;
        std::copy(h->buffer.begin(), h->buffer.end(), proof.begin());
        if (!proof_matches(proof, make_proof(key, Role::client, h->purpose, h->client_nonce, h->server_nonce)))
          return done("wrong job key");
        done({});
      });
    });
  });
}

}  // namespace via::tcp
