// utcp_echo.cpp: a TCP echo server and its clients on utcp, the user-level
// TCP/IP stack, over VIA. Every rank is an IP host (utcp::ViaHost: its NIC, a
// link to every other rank, a stack; rank r has the address 10.0.0.<r+1>).
//
//   viarun -n 3 build/bin/utcp_echo [--messages N] [--bytes N] [--linger-ms N]
//
// Rank 0 is the server: it listens on port 7 and serves one connection after
// another, sending back whatever it receives until the client closes. Every
// other rank is a client: it connects, sends N messages, reads each one's
// echo in full and checks it, then closes. The calls are BSD's (listen,
// accept, connect, send, receive, shutdown) with errno-style errors, and they
// block by driving the stack: utcp acts only inside calls on it, so a program
// that must still answer its peer (TCP's TIME-WAIT, below) keeps calling.
//
// Any failure prints a line on stderr and exits 1.
#include <utcp/tcp_socket.hpp>
#include <utcp/via_host.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <vector>

#include "example_options.h"

namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kEchoPort = 7;
constexpr auto kCallTimeout = 30s;  // no call waits longer: a stuck peer ends the run

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "utcp_echo rank %d: %s\n", rank, what.c_str());
  std::exit(EXAMPLE_FAILED);
}

void check(int rank, const std::error_code& error, const char* what) {
  if (error) fail(rank, std::string(what) + ": " + error.message());
}

// Byte j of message m from rank `client`.
std::uint8_t pattern(int client, long m, std::size_t j) { return std::uint8_t(client * 31 + m * 7 + long(j) * 3); }

// Serves one connection: echoes until the client closes its side, then
// closes ours and waits until the client has acknowledged that (CLOSED).
std::size_t serve(utcp::ViaHost& host, utcp::TcpSocket& connection) {
  connection.set_receive_timeout(kCallTimeout);
  connection.set_send_timeout(kCallTimeout);
  std::vector<std::uint8_t> buffer(64 * 1024);
  std::size_t echoed = 0;
  for (;;) {
    const utcp::Result<std::size_t> got = connection.receive(buffer);
    if (!got) check(0, got.error(), "receive");
    if (*got == 0) break;  // the client shut down its side
    for (std::size_t sent = 0; sent < *got;) {
      const utcp::Result<std::size_t> n = connection.send(std::span(buffer).subspan(sent, *got - sent));
      if (!n) check(0, n.error(), "send");
      sent += *n;
    }
    echoed += *got;
  }
  check(0, connection.shutdown(utcp::Shutdown::write), "shutdown");
  if (!host.wait_until([&] { return connection.state() == utcp::TcpState::closed; }, kCallTimeout))
    fail(0, "the client never acknowledged our FIN: " + std::string(utcp::to_string(connection.state())));
  connection.close();
  return echoed;
}

void run_server(utcp::ViaHost& host) {
  utcp::TcpListener listener(host.stack());
  check(0, listener.listen({{}, kEchoPort}), "listen");
  listener.set_accept_timeout(kCallTimeout);
  for (int served = 0; served < host.size() - 1; ++served) {
    utcp::Result<utcp::TcpSocket> connection = listener.accept();
    if (!connection) check(0, connection.error(), "accept");
    const utcp::Endpoint client = *connection->remote_endpoint();
    const std::size_t echoed = serve(host, *connection);
    std::printf("server: echoed %zu bytes to %s\n", echoed, client.to_string().c_str());
  }
}

// Connects to the server, trying again while it refuses: it may not be
// listening yet.
utcp::TcpSocket connect_to_server(utcp::ViaHost& host) {
  const utcp::Endpoint server{host.address_of(0), kEchoPort};
  for (int attempt = 0; attempt < 300; ++attempt) {
    utcp::TcpSocket socket(host.stack());
    const std::error_code error = socket.connect(server);
    if (!error) return socket;
    if (error != std::errc::connection_refused) check(host.rank(), error, "connect");
    host.wait_until([] { return false; }, 100ms);  // drives the stack for 100 ms
  }
  fail(host.rank(), "connect: " + server.to_string() + " refused for 30 s");
}

void run_client(utcp::ViaHost& host, long messages, std::size_t bytes, std::chrono::milliseconds linger) {
  const int me = host.rank();
  utcp::TcpSocket socket = connect_to_server(host);
  socket.set_receive_timeout(kCallTimeout);
  socket.set_send_timeout(kCallTimeout);
  std::vector<std::uint8_t> message(bytes), echo(bytes);
  for (long m = 0; m < messages; ++m) {
    for (std::size_t j = 0; j < bytes; ++j) message[j] = pattern(me, m, j);
    for (std::size_t sent = 0; sent < bytes;) {
      const utcp::Result<std::size_t> n = socket.send(std::span(message).subspan(sent));
      if (!n) check(me, n.error(), "send");
      sent += *n;
    }
    // A stream has no message boundaries: read until the whole echo is here.
    for (std::size_t got = 0; got < bytes;) {
      const utcp::Result<std::size_t> n = socket.receive(std::span(echo).subspan(got));
      if (!n) check(me, n.error(), "receive");
      if (*n == 0) fail(me, "the server closed the connection early");
      got += *n;
    }
    if (echo != message) fail(me, "echo " + std::to_string(m) + " differs from the message");
  }
  // Close: our FIN, then the server's (receive returns 0). We closed first,
  // so we are in TIME-WAIT: should our ACK of the server's FIN be lost, it
  // sends its FIN again, and only a stack that is still driven answers.
  check(me, socket.shutdown(utcp::Shutdown::write), "shutdown");
  std::uint8_t byte;
  const utcp::Result<std::size_t> end = socket.receive(std::span(&byte, 1));
  if (!end) check(me, end.error(), "receive");
  if (*end != 0) fail(me, "the server sent more than the echoes");
  host.wait_until([] { return false; }, linger);
  socket.close();
  std::printf("client %s: %ld messages of %zu bytes echoed, every byte checked\n",
              host.stack().address().to_string().c_str(), messages, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  long messages = 100, bytes = 1000, linger_ms = 300;
  usage_text =
      "usage: viarun -n N utcp_echo [--messages N] [--bytes N] [--linger-ms N]\n"
      "\n"
      "A TCP echo server (rank 0, port 7) and N-1 clients (every other rank) on the\n"
      "user-level TCP/IP stack over VIA. Each client sends its messages, checks each\n"
      "echo byte for byte, and closes; the server serves the clients one by one.\n"
      "\n"
      "  --messages N   messages each client sends (1..1000000, default 100)\n"
      "  --bytes N      bytes per message (1..1048576, default 1000)\n"
      "  --linger-ms N  how long a client stays in TIME-WAIT, still answering the\n"
      "                 server (0..60000, default 300)\n"
      "  --help         this text\n"
      "\n"
      "Environment: VIASTACK_UTCP_MTU, VIASTACK_UTCP_NETWORK (the hosts' addresses),\n"
      "VIASTACK_TRACE=file.pcap (every packet, one file per rank), VIASTACK_FAULTS\n"
      "(loss, duplication, reordering on the link: TCP recovers from them).\n"
      "\n"
      "Exit status: 0 every echo checked and every connection closed; 1 a socket\n"
      "error or a wrong echo; 2 bad usage, or fewer than 2 ranks.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--messages", 1, 1000000, &messages) &&
        !number_option(argc, argv, &i, "--bytes", 1, 1 << 20, &bytes) &&
        !number_option(argc, argv, &i, "--linger-ms", 0, 60000, &linger_ms))
      usage_error("unknown option", argv[i]);
  }
  try {
    utcp::ViaHost host;  // this rank's NIC, link and stack, from viarun's environment
    if (host.size() < 2) usage_error("needs 2 ranks or more (viarun -n 2); ranks:", std::to_string(host.size()).c_str());
    if (host.rank() == 0)
      run_server(host);
    else
      run_client(host, messages, std::size_t(bytes), std::chrono::milliseconds(linger_ms));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "utcp_echo: %s\n", e.what());
    return EXAMPLE_FAILED;
  }
  return EXAMPLE_OK;
}
