// The job's directory: a key-value store that viarun serves over TCP, where
// each rank's tcp NIC publishes the address it listens on and looks up its
// peers' ("tcp.<job>.<rank>" -> "a.b.c.d:port"). Connections prove their job
// membership first (wire.hpp), like VI connections.
//
// Protocol after the handshake, one line each way:
//   "put <key> <value>\n" -> "ok\n"
//   "get <key>\n"         -> "=<value>\n", or "-\n" while nobody put it
#pragma once

#include <asio.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "providers/tcp/admission.hpp"
#include "providers/tcp/wire.hpp"

namespace via::tcp {

class DirectoryServer {
 public:
  // Listens on `address` (port chosen by the kernel) and serves from its own
  // thread. Connections still proving themselves are bounded and logged as a
  // tcp NIC's are (admission.hpp), with room for all `job_ranks` ranks
  // connecting at once; it raises the process's descriptor limit.
  DirectoryServer(const JobKey& key, const asio::ip::address& address, std::size_t job_ranks);
  ~DirectoryServer();
  DirectoryServer(const DirectoryServer&) = delete;
  DirectoryServer& operator=(const DirectoryServer&) = delete;
  // "a.b.c.d:port", for VIASTACK_DIRECTORY.
  std::string address() const { return address_; }

 private:
  struct Session;
  void prove(const std::shared_ptr<Admissions::Admission>& a);
  void serve(const std::shared_ptr<Session>& s);
  std::string answer(const std::string& line);

  const JobKey key_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  Admissions admissions_;
  std::string address_;
  std::map<std::string, std::string> entries_;  // touched only by the server thread
  std::thread thread_;
};

// Shared by the threads of a process (one bootstrap serves all its NICs).
class DirectoryClient {
 public:
  // Connects to VIASTACK_DIRECTORY ("host:port") and proves job membership;
  // nothing (with the reason) on failure.
  static std::unique_ptr<DirectoryClient> connect(const std::string& address, const JobKey& key, std::string& error);
  bool put(const std::string& key, const std::string& value, std::string& error);
  // Waits until someone put `key`, up to `timeout`.
  std::optional<std::string> get(const std::string& key, std::chrono::milliseconds timeout, std::string& error);
  // The local address of the connection: how this host is reached from the launcher's.
  asio::ip::address local_address() const;

 private:
  DirectoryClient();
  // One request and its answer, one at a time.
  std::optional<std::string> exchange(const std::string& line, std::string& error);

  std::mutex exchange_lock_;

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  std::string input_;  // what the directory sent beyond the last answer
};

}  // namespace via::tcp
