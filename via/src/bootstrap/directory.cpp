#include "bootstrap/directory.hpp"

#include <fcntl.h>

#include <cstdlib>
#include <istream>
#include <thread>

#include "providers/tcp/handshake.hpp"

namespace via::tcp {

namespace {
constexpr std::size_t kMaxLine = 1024;
constexpr std::chrono::seconds kExchangeTimeout{30};
// How long a rank keeps trying to get into a busy directory.
constexpr std::chrono::seconds kConnectPatience{60};
}  // namespace

// ---- server ----

struct DirectoryServer::Session {
  std::shared_ptr<Handshake> conn;
  asio::streambuf input{kMaxLine};
  std::string reply;
};

DirectoryServer::DirectoryServer(const JobKey& key, const asio::ip::address& address, std::size_t job_ranks)
    : key_(key), acceptor_(io_, asio::ip::tcp::endpoint(address, 0)),
      admissions_(acceptor_, job_ranks, "directory: ", [this](const auto& a) { prove(a); }) {
  address_ = describe_endpoint(acceptor_.local_endpoint());
  fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);  // the ranks viarun starts do not inherit it
  admissions_.start();
  thread_ = std::thread([this] { io_.run(); });
}

DirectoryServer::~DirectoryServer() {
  io_.stop();
  thread_.join();
}

void DirectoryServer::prove(const std::shared_ptr<Admissions::Admission>& a) {
  run_server_handshake(a->conn, key_, [this, a](const std::string& error) {
    if (!error.empty()) return admissions_.refuse(*a, error);
    if (a->conn->purpose != Purpose::directory) return admissions_.refuse(*a, "not a directory client");
    if (!admissions_.settle(*a)) return;  // evicted or timed out meanwhile
    auto s = std::make_shared<Session>();
    s->conn = a->conn;
    serve(s);
  });
}

void DirectoryServer::serve(const std::shared_ptr<Session>& s) {
  asio::async_read_until(s->conn->socket, s->input, '\n', [this, s](const asio::error_code& ec, std::size_t n) {
    if (ec) return;  // the client left (or sent an over-long line)
    std::string line(n - 1, '\0');
    std::istream in(&s->input);
    in.read(line.data(), std::streamsize(n - 1));
    in.ignore(1);
    s->reply = answer(line);
    asio::async_write(s->conn->socket, asio::buffer(s->reply), [this, s](const asio::error_code& ec, std::size_t) {
      if (!ec) serve(s);
    });
  });
}

std::string DirectoryServer::answer(const std::string& line) {
  if (line.starts_with("put ")) {
    const auto space = line.find(' ', 4);
    if (space == std::string::npos) return "error: put needs a key and a value\n";
    entries_[line.substr(4, space - 4)] = line.substr(space + 1);
    return "ok\n";
  }
  if (line.starts_with("get ")) {
    auto it = entries_.find(line.substr(4));
    return it == entries_.end() ? "-\n" : "=" + it->second + "\n";
  }
  return "error: unknown request\n";
}

// ---- client ----

DirectoryClient::DirectoryClient() : socket_(io_) {}

std::unique_ptr<DirectoryClient> DirectoryClient::connect(const std::string& address, const JobKey& key,
                                                          std::string& error) {
  auto endpoint = parse_endpoint(address);
  if (!endpoint) {
    error = "VIASTACK_DIRECTORY='" + address + "' is not an IPv4 address:port";
    return nullptr;
  }
  // Hundreds of ranks start at once: a directory that is busy may close or
  // time out a stream before it proves itself. Such a stream is opened again
  // after a growing, jittered pause; only a wrong proof ends the attempt.
  const auto give_up = std::chrono::steady_clock::now() + kConnectPatience;
  std::chrono::milliseconds pause{10};
  for (;;) {
    std::unique_ptr<DirectoryClient> client(new DirectoryClient());
    asio::error_code ec;
    client->socket_.connect(*endpoint, ec);
    bool worth_retrying = true;
    if (ec) {
      error = "cannot reach the job's directory at " + address + ": " +
              (out_of_descriptors(ec) ? describe_descriptor_shortage(ec) : ec.message());
    } else {
      auto h = std::make_shared<Handshake>(std::move(client->socket_));
      std::string outcome = "timed out";
      run_client_handshake(h, key, Purpose::directory, {}, [&](const std::string& e) { outcome = e; });
      client->io_.run_for(auth_timeout());
      if (outcome.empty()) {
        client->socket_ = std::move(h->socket);
        return client;
      }
      error = "the job's directory at " + address + " refused us: " + outcome;
      worth_retrying = h->stream_failed || outcome == "timed out";
    }
    if (!worth_retrying || std::chrono::steady_clock::now() + pause > give_up) return nullptr;
    std::this_thread::sleep_for(pause + std::chrono::milliseconds(std::rand() % (pause.count() + 1)));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

std::optional<std::string> DirectoryClient::exchange(const std::string& line, std::string& error) {
  std::lock_guard guard(exchange_lock_);
  asio::error_code ec;
  asio::write(socket_, asio::buffer(line), ec);
  std::size_t n = 0;
  if (!ec) {
    bool done = false;
    asio::async_read_until(socket_, asio::dynamic_buffer(input_, kMaxLine), '\n',
                           [&](const asio::error_code& e, std::size_t got) { ec = e, n = got, done = true; });
    io_.restart();
    io_.run_for(kExchangeTimeout);
    if (!done) {
      socket_.close();
      error = "the job's directory did not answer";
      return std::nullopt;
    }
  }
  if (ec) {
    error = "lost the job's directory: " + ec.message();
    return std::nullopt;
  }
  std::string reply = input_.substr(0, n - 1);
  input_.erase(0, n);
  return reply;
}

bool DirectoryClient::put(const std::string& key, const std::string& value, std::string& error) {
  auto reply = exchange("put " + key + " " + value + "\n", error);
  if (reply && *reply != "ok") error = "the job's directory said: " + *reply;
  return reply && *reply == "ok";
}

std::optional<std::string> DirectoryClient::get(const std::string& key, std::chrono::milliseconds timeout,
                                                std::string& error) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto reply = exchange("get " + key + "\n", error);
    if (!reply) return std::nullopt;
    if (reply->starts_with("=")) return reply->substr(1);
    if (std::chrono::steady_clock::now() >= give_up) {
      error = "nobody published '" + key + "' in the job's directory in time";
      return std::nullopt;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

asio::ip::address DirectoryClient::local_address() const {
  asio::error_code ec;
  auto local = socket_.local_endpoint(ec);
  return ec ? asio::ip::address(asio::ip::address_v4::loopback()) : local.address();
}

}  // namespace via::tcp
