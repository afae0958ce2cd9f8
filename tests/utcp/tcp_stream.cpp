// A TCP stream over VIA between two ranks, under viarun:
//
//   viarun -n 2 -- utcp_tcp_stream MIB|KIBK [faults [STALL_SECONDS]]
//
// Rank 1 listens, rank 0 connects (again while refused: rank 1 may not be
// listening yet). Each side sends MIB MiB of a byte sequence both know,
// followed by the 64-bit FNV-1a checksum of those bytes, then shuts down its
// writing; each checks every byte it receives against the sequence and the
// checksum against its own count, reads to the end of the stream and waits
// for the close handshake to finish. With "faults" (VIASTACK_FAULTS set),
// TCP must have retransmitted something.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "utcp/tcp_socket.hpp"
#include "utcp/via_host.hpp"
#include "via/mesh.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::uint16_t port = 5201;

// The byte at `offset` of the stream rank `source` sends.
std::uint8_t stream_byte(int source, std::uint64_t offset) {
  std::uint64_t x = (offset >> 3) + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(source + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finalizer
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<std::uint8_t>(x >> (8 * (offset & 7)));
}

void fill_stream(int source, std::uint64_t offset, std::span<std::uint8_t> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = stream_byte(source, offset + i);
}

struct Fnv1a {
  std::uint64_t value = 0xcbf29ce484222325ull;
  void add(std::span<const std::uint8_t> bytes) {
    for (const std::uint8_t byte : bytes) value = (value ^ byte) * 0x100000001b3ull;
  }
};

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "utcp_tcp_stream: rank %d: %s\n", rank, what.c_str());
  std::exit(1);
}

// What the NIC, the link and the connection saw, for a failure's message: a
// stall with frames arriving but none taken in reads differently from one
// where the faults dropped them, or where the link to the peer failed.
std::string stall_report(utcp::ViaHost& host, utcp::TcpSocket& socket) {
  const via::NicCounters& nic = host.nic().counters();
  std::string report = "; NIC frames sent " + std::to_string(nic.frames_sent) + ", received " +
                       std::to_string(nic.frames_received) + ", dropped with no receive posted " +
                       std::to_string(nic.dropped_no_receive) + ", faults dropped " + std::to_string(nic.faults_dropped) +
                       "; link to the peer " + (host.link().reaches(host.address_of(1 - host.rank())) ? "up" : "FAILED") +
                       ", sends it dropped " + std::to_string(host.link().counters().dropped);
  if (const auto counters = socket.counters())
    report += "; TCP retransmitted " + std::to_string(counters->retransmitted_segments) + " (timeouts " +
              std::to_string(counters->timeouts) + "), segments in " + std::to_string(counters->segments_in);
  return report;
}

// Each rank tells the other that its close finished, out of band: through
// a reliable mesh on the same NIC, which VIASTACK_FAULTS leaves alone (faults
// act on unreliable VIs). The side in TIME-WAIT stays until the peer's close
// finished too, acknowledging its FIN again however many of those ACKs the
// faults drop; a fixed linger would end the test by chance under heavy loss.
class CloseNotices final : public via::MeshClient {
 public:
  CloseNotices(via::Nic& nic, int rank) : rank_(rank) {
    via::MeshOptions options;
    options.service = "closed";
    options.message_bytes = 64;
    options.receives_per_peer = 4;
    options.send_descriptors = 8;
    options.bounce_buffers = 4;
    if (via::Mesh::open(nic, rank, 2, options, *this, mesh_) != via::Result::success)
      fail(rank, "cannot open the mesh for the close notices");
  }
  void tell_peer() {
    const std::byte closed[1]{std::byte{1}};
    if (mesh_->send(1 - rank_, closed) == via::Mesh::Sent::dropped) {
      mesh_->poll();  // on_peer_failed says why
      fail(rank_, "the close notice was dropped");
    }
  }
  bool peer_closed() {
    mesh_->poll();
    return peer_closed_;
  }

 private:
  void on_message(int, std::span<std::byte>) override { peer_closed_ = true; }
  void on_rdma_complete(std::uint64_t, bool) override {}
  void on_peer_failed(int, const std::string& why) override { fail(rank_, "the close notices' peer failed: " + why); }

  int rank_;
  bool peer_closed_ = false;
  std::unique_ptr<via::Mesh> mesh_;
};

utcp::TcpSocket open_connection(utcp::ViaHost& host) {
  if (host.rank() == 1) {
    utcp::TcpListener listener(host.stack());
    if (const std::error_code failed = listener.listen({{}, port})) fail(1, "listen: " + failed.message());
    listener.set_accept_timeout(60s);
    auto accepted = listener.accept();
    if (!accepted) fail(1, "accept: " + accepted.error().message());
    return std::move(*accepted);
  }
  for (int attempt = 0; attempt < 300; ++attempt) {
    utcp::TcpSocket socket(host.stack());
    const std::error_code failed = socket.connect({host.address_of(1), port});
    if (!failed) return socket;
    if (failed != std::make_error_code(std::errc::connection_refused)) fail(0, "connect: " + failed.message());
    host.wait_until([] { return false; }, 100ms);  // rank 1 is not listening yet
  }
  fail(0, "connect: still refused after 30 s");
}

}  // namespace

int main(int argc, char** argv) {
  // MIB, or KIB with a K after it ("128K").
  char* unit = nullptr;
  const std::uint64_t count = argc > 1 ? std::strtoull(argv[1], &unit, 10) : 16;
  const bool kibibytes = unit && (*unit == 'K' || *unit == 'k');
  const bool faults = argc > 2 && std::string(argv[2]) == "faults";
  // How long nothing may move before the test fails (s). Under 30 % loss
  // each way a round trip gets through one time in two, once every max_rto
  // (4 s) when backed off: 30 s is ~8 tries, 45 s makes a stall by chance
  // one in several thousand.
  const std::chrono::seconds stall_timeout(argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 30);
  const std::uint64_t size = count << (kibibytes ? 10 : 20);
  const double mebibytes = static_cast<double>(size) / (1 << 20);
  try {
    utcp::ViaHostConfig config = utcp::ViaHostConfig::from_environment();
    if (config.size != 2) fail(config.rank, "needs exactly 2 ranks");
    // Room at the link for a whole window of segments each way, so that
    // what is lost is what the faults drop.
    config.link.receive_buffers_per_peer = 256;
    config.link.send_buffers = 256;
    config.stack.tcp.send_buffer = 1u << 20;
    config.stack.tcp.receive_buffer = 1u << 20;
    std::unique_ptr<via::Nic> nic;
    if (via::Nic::open("", nic) != via::Result::success) fail(config.rank, "cannot open the NIC");
    CloseNotices close_notices(*nic, config.rank);
    utcp::ViaHost host(*nic, config);
    const int rank = host.rank(), peer = 1 - rank;

    utcp::TcpSocket socket = open_connection(host);
    socket.set_nonblocking(true);
    const Clock::time_point started = Clock::now();

    // What goes out: the stream, then its checksum (8 bytes, little-endian).
    std::vector<std::uint8_t> chunk(256 << 10), expected(64 << 10), buffer(64 << 10);
    std::uint64_t chunk_offset = 0, chunk_sent = 0, sent = 0, received = 0;
    std::size_t chunk_size = 0;
    Fnv1a sent_sum, received_sum;
    std::vector<std::uint8_t> peer_sum_bytes;
    bool trailer_queued = false, write_shut = false, ended = false;
    chunk_size = std::min<std::uint64_t>(chunk.size(), size);
    fill_stream(rank, 0, std::span(chunk).first(chunk_size));
    sent_sum.add(std::span(chunk).first(chunk_size));

    while (!ended || !write_shut) {
      // Each event asked for only while it matters: the end of the stream stays readable.
      utcp::PollEntry entry{&socket, static_cast<short>((ended ? 0 : utcp::poll_events::in) |
                                                        (write_shut ? 0 : utcp::poll_events::out))};
      const auto ready = utcp::poll(host.stack(), std::span(&entry, 1), stall_timeout);
      if (!ready || *ready == 0) {
        const utcp::TcpInfo info = *socket.info();
        fail(rank, "the stream stalled in " + std::string(utcp::to_string(info.state)) + " with " +
                       std::to_string(sent) + " bytes sent, " + std::to_string(received) + " received, " +
                       std::to_string(info.bytes_unsent) + " unsent, " + std::to_string(info.bytes_in_flight) +
                       " in flight" + stall_report(host, socket));
      }
      if (entry.revents & utcp::poll_events::err) fail(rank, "socket error: " + socket.take_error().message());

      while (!write_shut) {
        if (chunk_sent == chunk_size) {
          if (sent == size && !trailer_queued) {
            // The checksum goes last; the chunk holds it now.
            for (int i = 0; i < 8; ++i) chunk[i] = static_cast<std::uint8_t>(sent_sum.value >> (8 * i));
            chunk_size = 8;
            trailer_queued = true;
          } else if (sent == size) {
            if (const std::error_code failed = socket.shutdown(utcp::Shutdown::write))
              fail(rank, "shutdown: " + failed.message());
            write_shut = true;
            break;
          } else {
            chunk_offset = sent;
            chunk_size = std::min<std::uint64_t>(chunk.size(), size - sent);
            fill_stream(rank, chunk_offset, std::span(chunk).first(chunk_size));
            sent_sum.add(std::span(chunk).first(chunk_size));
          }
          chunk_sent = 0;
        }
        const auto n = socket.send(std::span(chunk).subspan(chunk_sent, chunk_size - chunk_sent));
        if (!n) {
          if (n.error() == std::make_error_code(std::errc::operation_would_block)) break;
          fail(rank, "send: " + n.error().message());
        }
        chunk_sent += *n;
        if (!trailer_queued) sent += *n;
      }

      while (!ended) {
        const auto n = socket.receive(buffer);
        if (!n) {
          if (n.error() == std::make_error_code(std::errc::operation_would_block)) break;
          fail(rank, "receive: " + n.error().message());
        }
        if (*n == 0) {
          ended = true;
          break;
        }
        std::span<const std::uint8_t> got = std::span(buffer).first(*n);
        const std::size_t stream_part = static_cast<std::size_t>(std::min<std::uint64_t>(got.size(), size - std::min(received, size)));
        if (stream_part > 0) {
          fill_stream(peer, received, std::span(expected).first(stream_part));
          if (std::memcmp(expected.data(), got.data(), stream_part) != 0)
            fail(rank, "received bytes differ from the stream near offset " + std::to_string(received));
          received_sum.add(got.first(stream_part));
        }
        peer_sum_bytes.insert(peer_sum_bytes.end(), got.begin() + static_cast<std::ptrdiff_t>(stream_part), got.end());
        received += got.size();
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();

    if (received != size + 8) fail(rank, "the stream held " + std::to_string(received) + " bytes");
    std::uint64_t peer_sum = 0;
    for (int i = 0; i < 8; ++i) peer_sum |= std::uint64_t{peer_sum_bytes[i]} << (8 * i);
    if (peer_sum != received_sum.value) fail(rank, "the checksums differ");

    // The close handshake: both FINs acknowledged. The side left in
    // TIME-WAIT stays until the peer's close finished as well, to acknowledge
    // the peer's FIN again if that ACK was lost.
    if (!host.wait_until(
            [&] { return socket.state() == utcp::TcpState::time_wait || socket.state() == utcp::TcpState::closed; },
            stall_timeout))
      fail(rank, std::string("the close did not finish: ") + std::string(utcp::to_string(socket.state())) +
                     stall_report(host, socket));
    if (socket.take_error()) fail(rank, "the connection ended with an error");
    const utcp::TcpCounters counters = *socket.counters();
    close_notices.tell_peer();
    if (!host.wait_until([&] { return close_notices.peer_closed(); }, stall_timeout))
      fail(rank, "the peer's close did not finish" + stall_report(host, socket));
    socket.close();

    std::printf(
        "rank %d: %g MiB each way in %.2f s (%.1f MB/s each way), checksum %016llx; segments out %llu, "
        "retransmitted %llu (timeouts %llu, fast %llu), out of order %llu; faults dropped %llu\n",
        rank, mebibytes, seconds, static_cast<double>(size) / seconds / 1e6,
        static_cast<unsigned long long>(received_sum.value), static_cast<unsigned long long>(counters.segments_out),
        static_cast<unsigned long long>(counters.retransmitted_segments),
        static_cast<unsigned long long>(counters.timeouts), static_cast<unsigned long long>(counters.fast_retransmits),
        static_cast<unsigned long long>(counters.out_of_order_segments),
        static_cast<unsigned long long>(host.nic().counters().faults_dropped));
    // Data segments leave inline, the VI gathering their headers and the
    // payload from the send ring into the link, or (while sends wait in a
    // VI's queue) built in the link's registered send buffers and sent from
    // there; a copy through the mesh's bounce buffers is the exception (no
    // descriptor free, or the peer's backlog not empty).
    const via::Mesh::Counters& link = host.link().counters();
    std::printf("rank %d: link sends from its buffers %llu, through bounce buffers %llu, inline %llu\n", rank,
                static_cast<unsigned long long>(link.registered_sends),
                static_cast<unsigned long long>(link.bounce_sends), static_cast<unsigned long long>(link.inline_sends));
    if (link.registered_sends + link.inline_sends <= link.bounce_sends) fail(rank, "data segments were copied into bounce buffers");
    if (faults && host.nic().counters().faults_dropped == 0) fail(rank, "VIASTACK_FAULTS dropped nothing");
    if (faults && counters.retransmitted_segments == 0) fail(rank, "frames were dropped but nothing was retransmitted");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "utcp_tcp_stream: %s\n", e.what());
    return 1;
  }
  return 0;
}
