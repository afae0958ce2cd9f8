// utcp_udp_exchange.cpp: UDP on utcp, the user-level TCP/IP stack, over
// VIA. Every rank is an IP host (utcp::ViaHost; rank r has the address
// 10.0.0.<r+1>) with a UDP socket on port 7000, and in each round sends one
// datagram to every other rank, then receives one from each.
//
//   viarun -n 3 build/bin/utcp_udp_exchange [--rounds N] [--bytes N]
//
// Datagrams larger than the link's MTU (9000 bytes) travel as IP fragments
// and are reassembled. Each one says who sent it in which round; the receiver
// checks it came from that rank's address and port, and every byte. UDP does
// not resend: a lost datagram ends the run (the receive times out), so this
// runs without VIASTACK_FAULTS' drop; a duplicate is counted and ignored.
// At the end the ranks meet at the job's fence (via/bootstrap.hpp), so that
// none closes its socket while another may still send to it.
//
// Any failure prints a line on stderr and exits 1.
#include <utcp/udp_socket.hpp>
#include <utcp/via_host.hpp>
#include <via/bootstrap.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "example_options.h"

namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kPort = 7000;

// What starts every datagram.
struct Header {
  std::uint32_t sender;
  std::uint32_t round;
};

std::uint8_t pattern(std::uint32_t sender, std::uint32_t round, std::size_t j) {
  return std::uint8_t(sender * 29 + round * 13 + j * 5);
}

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "utcp_udp_exchange rank %d: %s\n", rank, what.c_str());
  std::exit(EXAMPLE_FAILED);
}

}  // namespace

int main(int argc, char** argv) {
  long rounds = 50, bytes = 1000;
  usage_text =
      "usage: viarun -n N utcp_udp_exchange [--rounds N] [--bytes N]\n"
      "\n"
      "UDP on the user-level TCP/IP stack over VIA: in each round every rank sends\n"
      "a datagram to every other rank and receives one from each, checking its\n"
      "sender, round and every byte. Datagrams above the MTU go as IP fragments.\n"
      "\n"
      "  --rounds N  rounds (1..100000, default 50)\n"
      "  --bytes N   payload bytes per datagram (0..65499, default 1000)\n"
      "  --help      this text\n"
      "\n"
      "Environment: VIASTACK_UTCP_MTU, VIASTACK_UTCP_NETWORK (the hosts' addresses),\n"
      "VIASTACK_TRACE=file.pcap (every packet, one file per rank). UDP does not\n"
      "resend: with VIASTACK_FAULTS dropping frames, a datagram is lost and the\n"
      "run fails.\n"
      "\n"
      "Exit status: 0 every datagram arrived and checked; 1 a socket error, a lost\n"
      "or wrong datagram; 2 bad usage, or fewer than 2 ranks.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--rounds", 1, 100000, &rounds) &&
        !number_option(argc, argv, &i, "--bytes", 0, long(utcp::udp_max_payload - sizeof(Header)), &bytes))
      usage_error("unknown option", argv[i]);
  }
  try {
    utcp::ViaHost host;  // this rank's NIC, link and stack, from viarun's environment
    const int me = host.rank(), procs = host.size();
    if (procs < 2) usage_error("needs 2 ranks or more (viarun -n 2); ranks:", std::to_string(procs).c_str());
    const std::size_t payload = std::size_t(bytes), datagram_bytes = sizeof(Header) + payload;

    // Bound before this rank's stack takes in any packet (the first receive):
    // the others' datagrams find the port open.
    utcp::UdpSocket socket(host.stack());
    if (const std::error_code error = socket.bind({{}, kPort})) fail(me, "bind: " + error.message());
    socket.set_receive_timeout(10s);

    // seen[sender][round]; a faster rank's next round may come before this
    // round is complete, so rounds are counted apart.
    std::vector<std::vector<bool>> seen(std::size_t(procs), std::vector<bool>(std::size_t(rounds), false));
    std::vector<int> received_in_round(std::size_t(rounds), 0);
    long duplicates = 0;
    std::vector<std::uint8_t> out(datagram_bytes), in(datagram_bytes + 1);  // one byte more: a longer one shows

    for (std::uint32_t round = 0; round < std::uint32_t(rounds); ++round) {
      const Header header{std::uint32_t(me), round};
      std::memcpy(out.data(), &header, sizeof header);
      for (std::size_t j = 0; j < payload; ++j) out[sizeof header + j] = pattern(header.sender, round, j);
      for (int peer = 0; peer < procs; ++peer) {
        if (peer == me) continue;
        const utcp::Result<std::size_t> sent = socket.send_to(out, {host.address_of(peer), kPort});
        if (!sent) fail(me, "send_to rank " + std::to_string(peer) + ": " + sent.error().message());
      }
      while (received_in_round[round] < procs - 1) {
        const utcp::Result<utcp::Received> got = socket.receive_from(in);
        if (!got)
          fail(me, "receive in round " + std::to_string(round) + ": " + got.error().message() +
                       (got.error() == std::errc::resource_unavailable_try_again ? " (a datagram lost?)" : ""));
        Header h;
        if (got->size != datagram_bytes) fail(me, "a datagram of " + std::to_string(got->size) + " bytes");
        std::memcpy(&h, in.data(), sizeof h);
        if (h.sender >= std::uint32_t(procs) || h.sender == std::uint32_t(me) || h.round >= std::uint32_t(rounds) ||
            !(got->from == utcp::Endpoint{host.address_of(int(h.sender)), kPort}))
          fail(me, "a datagram from " + got->from.to_string() + " claiming to be rank " + std::to_string(h.sender) +
                       "'s of round " + std::to_string(h.round));
        for (std::size_t j = 0; j < payload; ++j)
          if (in[sizeof h + j] != pattern(h.sender, h.round, j))
            fail(me, "rank " + std::to_string(h.sender) + "'s datagram of round " + std::to_string(h.round) +
                         " has a wrong byte at " + std::to_string(j));
        if (seen[h.sender][h.round]) {
          ++duplicates;
          continue;
        }
        seen[h.sender][h.round] = true;
        ++received_in_round[h.round];
      }
    }

    std::string error;
    const auto job = via::job_bootstrap(error);
    if (!job || !job->fence(error)) fail(me, "the closing fence: " + error);
    std::printf("rank %d (%s): %ld datagrams of %zu bytes from each of %d ranks, every byte checked; %ld duplicates\n",
                me, host.stack().address().to_string().c_str(), rounds, datagram_bytes, procs - 1, duplicates);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "utcp_udp_exchange: %s\n", e.what());
    return EXAMPLE_FAILED;
  }
  return EXAMPLE_OK;
}
