// utcp's VIA link connects to a peer only when a packet first goes to or
// comes from it, under viarun:
//
//   viarun -n N -- utcp_lazy_links
//
// Each rank pings its successor on a ring with UDP until it answers, answers
// its predecessor until it has heard from it, and then checks that its link made VIs for those two
// peers only (one when N is 2), not for all N - 1.
#include <chrono>
#include <cstdio>
#include <string>

#include "utcp/udp_socket.hpp"
#include "utcp/via_host.hpp"

using namespace std::chrono_literals;

namespace {

constexpr std::uint16_t kPort = 7100;

std::vector<std::uint8_t> text(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

int main() {
  try {
    const utcp::ViaHostConfig config = utcp::ViaHostConfig::from_environment();
    const int rank = config.rank, size = config.size;
    utcp::ViaHost host(config);
    utcp::UdpSocket socket(host.stack());
    if (socket.bind({{}, kPort})) throw std::runtime_error("bind");
    socket.set_nonblocking(true);
    const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::steady_clock::now() - start; };
    bool answered = false, pinged = false;
    std::optional<std::chrono::steady_clock::duration> both_at;
    std::vector<std::uint8_t> buffer(64);
    // Pings go every 50 ms until the successor answers. A rank also waits for
    // its predecessor's first ping (a predecessor slow to start, under load,
    // would otherwise find it gone), then stays half a second more to answer
    // a predecessor whose answer was lost.
    while (!both_at || elapsed() < *both_at + 500ms) {
      if (elapsed() > 20s)
        throw std::runtime_error(answered ? "no ping from rank " + std::to_string(previous) + " in 20 s"
                                          : "no answer from rank " + std::to_string(next) + " in 20 s");
      if (!answered) (void)socket.send_to(text("ping"), {host.address_of(next), kPort});
      host.wait_until([&] { return socket.readable(); }, 50ms);
      while (socket.readable()) {
        const auto received = socket.receive_from(buffer);
        if (!received) break;
        const std::string message(buffer.begin(), buffer.begin() + long(received->size));
        if (message == "ping") (void)socket.send_to(text("pong"), received->from);
        pinged |= message == "ping" && received->from.address == host.address_of(previous);
        answered |= message == "pong" && received->from.address == host.address_of(next);
      }
      if (answered && pinged && !both_at) both_at = elapsed();
    }
    const int expected = size > 2 ? 2 : 1;
    const int in_use = host.link().peers_in_use();
    std::printf("rank %d: VIs to %d of %d peers (expected %d)\n", rank, in_use, size - 1, expected);
    return in_use == expected ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "utcp_lazy_links: %s\n", e.what());
    return 1;
  }
}
