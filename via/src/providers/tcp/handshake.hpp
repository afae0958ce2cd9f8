// The job-key handshake (wire.hpp) run asynchronously on an Asio socket, by
// the tcp provider for VI connections and by viarun's directory service.
#pragma once

#include <asio.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "providers/tcp/wire.hpp"

namespace via::tcp {

// A connection while it proves itself; later steps of the caller's protocol
// keep using it (handlers hold it by shared_ptr, so it outlives them).
struct Handshake {
  explicit Handshake(asio::ip::tcp::socket s);
  asio::ip::tcp::socket socket;
  std::string peer;  // "address:port", for logs
  Purpose purpose = Purpose::vi;
  Nonce client_nonce{}, server_nonce{};
  std::vector<std::uint8_t> buffer;
  // The last error was the stream's (closed, reset, timed out), not something
  // the peer said: a connecting side may try again on a new stream.
  bool stream_failed = false;
  // Server side: the challenge (with the server's proof) was written, so the
  // client knows who it talks to and reads a ConnectResponse next.
  bool challenge_sent = false;
};

// `done` gets an empty string on success, else what went wrong. Nothing the
// peer sends after the proof is read here.
using HandshakeDone = std::function<void(const std::string& error)>;
// `after_proof` is written with the client's proof, in one write: a server
// that answers and closes before it reads them (a NIC on its way out) resets
// the stream once they arrive, and a second write would fail there before
// the client read the answer already waiting for it.
void run_client_handshake(const std::shared_ptr<Handshake>& h, const JobKey& key, Purpose purpose,
                          std::vector<std::uint8_t> after_proof, HandshakeDone done);
void run_server_handshake(const std::shared_ptr<Handshake>& h, const JobKey& key, HandshakeDone done);

// Reads exactly n bytes into h->buffer, then calls next (or done with the error).
void read_exactly(const std::shared_ptr<Handshake>& h, std::size_t n, HandshakeDone done);
void write_all(const std::shared_ptr<Handshake>& h, std::vector<std::uint8_t> bytes, HandshakeDone done);

std::string describe_endpoint(const asio::ip::tcp::endpoint& e);
// Splits "host:port" (IPv4) into an endpoint; nothing when malformed.
std::optional<asio::ip::tcp::endpoint> parse_endpoint(const std::string& text);
// How long a connection may take to prove itself: VIASTACK_TCP_AUTH_TIMEOUT_MS, default 3 s.
std::chrono::milliseconds auth_timeout();

}  // namespace via::tcp
