// UDP over VIA between every pair of ranks, under viarun:
//
//   viarun -n 3 -- utcp_udp_flood ROUNDS [faults]
//
// Each round every rank sends each peer datagrams of 1 to 60000 bytes (most
// of them fragmented at MTU 9000) and then waits at a barrier. UDP is
// unreliable, and with VIASTACK_FAULTS so are the VIs under it, so the test
// does not ask that everything arrive: it asks that whatever arrives is intact
// (the stack's checksums and a byte pattern), at the rank it was sent to,
// and that the datagrams missing are no more than the losses counted (faults
// injected by the senders' NICs, receive buffers or queues that overflowed,
// reassemblies given up). With "faults", faults must have happened; without,
// nothing may be missing but what a receiver that fell behind dropped for
// want of a posted buffer (counted). Barriers and the final tallies go over
// reliable VIs of their own, which VIASTACK_FAULTS leaves alone.
//
// Rank 0 also pings every peer and sends to a closed port of rank 1, which
// must come back as ECONNREFUSED.
//
// With VIASTACK_TRACE set, each rank also checks that its pcap file holds one
// record for every packet its stack sent or received on the link.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <via/via.hpp>

#include "utcp/udp_socket.hpp"
#include "utcp/via_host.hpp"

namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint16_t port = 47000;  // no protocol Wireshark decodes (7000 is AFS RX)
constexpr std::size_t header_bytes = 16;  // source rank, destination rank, sequence, size
// 8972: the most one 9000-byte packet holds.
constexpr std::size_t sizes[] = {header_bytes, 100, 1472, 8972, 8973, 17000, 30000, 60000};
constexpr std::size_t per_round = std::size(sizes) + 1;  // and one of a size drawn from the sequence number
constexpr auto control_timeout = 60s;

std::size_t size_of(std::uint32_t sequence) {
  const std::size_t slot = sequence % per_round;
  return slot < std::size(sizes) ? sizes[slot] : header_bytes + (sequence * 2654435761u) % (60000 - header_bytes);
}

std::uint8_t pattern(std::uint32_t source, std::uint32_t destination, std::uint32_t sequence, std::size_t i) {
  return static_cast<std::uint8_t>(source * 31 + destination * 17 + sequence * 131 + i * 7 + (i >> 8));
}

void store32(std::uint8_t* p, std::uint32_t v) { std::memcpy(p, &v, 4); }
std::uint32_t load32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

Bytes make_datagram(std::uint32_t source, std::uint32_t destination, std::uint32_t sequence) {
  Bytes bytes(size_of(sequence));
  store32(&bytes[0], source);
  store32(&bytes[4], destination);
  store32(&bytes[8], sequence);
  store32(&bytes[12], static_cast<std::uint32_t>(size_of(sequence)));
  for (std::size_t i = header_bytes; i < bytes.size(); ++i) bytes[i] = pattern(source, destination, sequence, i);
  return bytes;
}

// Reliable VIs to every peer, one small message at a time each way.
class Control {
 public:
  struct Message {
    std::uint64_t kind, round, values[8];
  };
  static constexpr std::uint64_t barrier_kind = 1, tally_kind = 2;

  Control(via::Nic& nic, int rank, int size) : vis_(size, nullptr) {
    check(nic.create_ptag(ptag_), "create ptag");
    arena_.resize(static_cast<std::size_t>(size) * slots * slot_bytes + 64);
    base_ = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(arena_.data()) + 63) / 64 * 64);
    check(nic.register_memory(base_, static_cast<std::size_t>(size) * slots * slot_bytes, {ptag_, false, false}, handle_),
          "register control buffers");
    via::ViAttributes attributes;
    attributes.ptag = ptag_;
    const via::NetAddress local{{}, {'c', 't', 'l'}};
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      check(nic.create_vi(attributes, nullptr, nullptr, vis_[peer]), "create control VI");
      for (int i = 1; i < slots; ++i) post_receive(peer, i);
      via::NetAddress remote{{}, local.discriminator};
      std::string name = "rank";
      name += std::to_string(peer);
      check(nic.resolve(name, 0, remote.host), "resolve");
      check(vis_[peer]->connect_peer_request(local, remote, 60000), "control connect");
    }
    for (via::Vi* vi : vis_)
      if (vi) check(vi->connect_peer_wait(), "control connect");
  }

  // Both wait through the host, so that its stack keeps taking packets in.
  void send(utcp::ViaHost& host, int peer, const Message& message) {
    VIP_DESCRIPTOR* d = descriptor(peer, 0, sizeof message);
    std::memcpy(buffer(peer, 0), &message, sizeof message);
    check(vis_[peer]->post_send(d, handle_), "control send");
    VIP_DESCRIPTOR* done = nullptr;
    if (!host.wait_until([&] { return vis_[peer]->send_done(done) == via::Result::success; }, control_timeout))
      throw std::runtime_error("control send timed out");
  }
  Message receive(utcp::ViaHost& host, int peer, const std::function<void()>& meanwhile) {
    VIP_DESCRIPTOR* done = nullptr;
    const bool arrived = host.wait_until(
        [&] {
          meanwhile();
          return vis_[peer]->recv_done(done) == via::Result::success;
        },
        control_timeout);
    if (!arrived || (done->CS.Status & VIP_STATUS_ERROR_MASK)) throw std::runtime_error("control receive failed");
    const int slot = static_cast<int>((reinterpret_cast<std::uint8_t*>(done) - base_) / slot_bytes) % slots;
    Message message;
    std::memcpy(&message, buffer(peer, slot), sizeof message);
    post_receive(peer, slot);
    return message;
  }

 private:
  static constexpr int slots = 8;  // slot 0 sends, the others receive
  static constexpr std::size_t slot_bytes = 256;  // a descriptor, then the message

  static void check(via::Result result, const char* what) {
    if (result != via::Result::success) throw std::runtime_error(std::string(what) + ": " + via::describe(result));
  }
  std::uint8_t* slot(int peer, int index) { return base_ + (static_cast<std::size_t>(peer) * slots + index) * slot_bytes; }
  std::uint8_t* buffer(int peer, int index) { return slot(peer, index) + 128; }
  VIP_DESCRIPTOR* descriptor(int peer, int index, std::size_t length) {
    auto* d = reinterpret_cast<VIP_DESCRIPTOR*>(slot(peer, index));
    std::memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->CS.Length = static_cast<VIP_UINT32>(length);
    d->DS[0].Local.Data.Address = buffer(peer, index);
    d->DS[0].Local.Handle = handle_;
    d->DS[0].Local.Length = static_cast<VIP_UINT32>(length);
    return d;
  }
  void post_receive(int peer, int index) {
    check(vis_[peer]->post_recv(descriptor(peer, index, sizeof(Message)), handle_), "control post receive");
  }

  via::Ptag ptag_ = 0;
  std::vector<std::uint8_t> arena_;
  std::uint8_t* base_ = nullptr;
  via::MemHandle handle_{};
  std::vector<via::Vi*> vis_;
};

struct Tally {
  std::vector<std::vector<std::uint32_t>> deliveries;  // [peer][sequence]
  std::uint64_t corrupt = 0;
};

int failures = 0;
std::string describe(const char* what, const std::string& detail) {
  std::string text = what;
  text += detail;
  return text;
}

void require(bool condition, int rank, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "utcp_udp_flood: rank %d: %s\n", rank, what.c_str());
  ++failures;
}

// Takes every datagram waiting and checks it.
void drain(utcp::UdpSocket& socket, utcp::ViaHost& host, Tally& tally, Bytes& buffer) {
  for (;;) {
    const auto received = socket.receive_from(buffer);
    if (!received) {
      require(received.error() == std::make_error_code(std::errc::operation_would_block), host.rank(),
              describe("receive: ", received.error().message()));
      return;
    }
    std::optional<std::uint32_t> source;
    for (int peer = 0; peer < host.size(); ++peer)
      if (peer != host.rank() && received->from.address == host.address_of(peer)) source = peer;
    const std::size_t size = received->size;
    bool intact = source && received->from.port == port && !received->truncated && size >= header_bytes;
    const std::uint32_t sequence = intact ? load32(&buffer[8]) : 0;
    intact = intact && load32(&buffer[0]) == *source && load32(&buffer[4]) == static_cast<std::uint32_t>(host.rank()) &&
             load32(&buffer[12]) == size && sequence < tally.deliveries[*source].size() && size_of(sequence) == size;
    for (std::size_t i = header_bytes; intact && i < size; ++i)
      intact = buffer[i] == pattern(*source, host.rank(), sequence, i);
    if (intact)
      ++tally.deliveries[*source][sequence];
    else
      ++tally.corrupt;
  }
}

std::size_t pcap_records(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const Bytes file{std::istreambuf_iterator<char>(in), {}};
  std::size_t records = 0;
  for (std::size_t at = 24; at + 16 <= file.size(); ++records) at += 16 + load32(&file[at + 8]);
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
  const bool faults = argc > 2 && std::string(argv[2]) == "faults";
  try {
    utcp::ViaHostConfig config = utcp::ViaHostConfig::from_environment();
    config.link.receive_buffers_per_peer = 64;
    config.stack.reassembly.timeout = 500ms;
    config.stack.udp_receive_queue_datagrams = 4096;
    config.stack.udp_receive_queue_bytes = 256u << 20;
    const int rank = config.rank, size = config.size;
    std::unique_ptr<via::Nic> nic;
    if (via::Nic::open("", nic) != via::Result::success) throw std::runtime_error("cannot open the NIC");
    Control control(*nic, rank, size);
    std::optional<utcp::ViaHost> host(std::in_place, *nic, config);
    utcp::UdpSocket socket(host->stack());
    if (socket.bind({{}, port})) throw std::runtime_error("bind");
    socket.set_nonblocking(true);

    const std::uint32_t expected = static_cast<std::uint32_t>(rounds * per_round);
    Tally tally;
    tally.deliveries.assign(size, std::vector<std::uint32_t>(expected, 0));
    Bytes buffer(65536);
    const auto keep_draining = [&] { drain(socket, *host, tally, buffer); };

    // Ping every peer; under faults a request or reply may be lost, so retry.
    if (rank == 0) {
      for (int peer = 1; peer < size; ++peer) {
        bool answered = false;
        for (std::uint16_t attempt = 0; attempt < 20 && !answered; ++attempt) {
          require(!host->stack().send_echo_request(host->address_of(peer), 1, attempt, Bytes(1000, 0x5a)), rank, "ping");
          answered = host->wait_until(
              [&] {
                while (const auto reply = host->stack().take_echo_reply())
                  if (reply->from == host->address_of(peer) && reply->sequence == attempt) return true;
                return false;
              },
              500ms);
        }
        require(answered, rank, describe("no echo reply from rank ", std::to_string(peer)));
      }
      // A datagram to a closed port comes back as port unreachable: ECONNREFUSED on a connected socket.
      utcp::UdpSocket probe(host->stack());
      require(!probe.connect({host->address_of(1), port + 1}), rank, "connect the probe");
      std::error_code refused;
      for (int attempt = 0; attempt < 20 && !refused; ++attempt) {
        require(probe.send(Bytes(32, 1)).has_value(), rank, "send the probe");
        if (host->wait_until([&] { return probe.readable(); }, 500ms)) {
          const auto answer = probe.receive_from(buffer);
          refused = answer ? std::error_code() : answer.error();
          require(refused == std::make_error_code(std::errc::connection_refused), rank,
                  describe("the probe got ", refused.message()));
        }
      }
      require(refused == std::make_error_code(std::errc::connection_refused), rank, "no port unreachable came back");
    }

    for (int round = 0; round < rounds; ++round) {
      for (std::size_t k = 0; k < per_round; ++k) {
        const auto sequence = static_cast<std::uint32_t>(round * per_round + k);
        for (int peer = 0; peer < size; ++peer) {
          if (peer == rank) continue;
          const Bytes datagram = make_datagram(rank, peer, sequence);
          const auto sent = socket.send_to(datagram, {host->address_of(peer), port});
          require(sent && *sent == datagram.size(), rank, describe("send_to: ", sent ? "short" : sent.error().message()));
        }
        keep_draining();
      }
      for (int peer = 0; peer < size; ++peer)
        if (peer != rank) control.send(*host, peer, {Control::barrier_kind, static_cast<std::uint64_t>(round), {}});
      for (int peer = 0; peer < size; ++peer)
        if (peer != rank) {
          const Control::Message m = control.receive(*host, peer, keep_draining);
          require(m.kind == Control::barrier_kind && m.round == static_cast<std::uint64_t>(round), rank, "barrier out of step");
        }
    }
    // Stragglers (frames held back to be reordered), then every unfinished
    // reassembly times out.
    host->wait_until([&] { keep_draining(); return false; }, 800ms);
    keep_draining();

    const via::NicCounters& nic_counters = host->nic().counters();
    const utcp::StackCounters counters = host->stack().counters();
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank)
        control.send(*host, peer,
                     {Control::tally_kind, 0,
                      {nic_counters.faults_dropped, nic_counters.faults_duplicated, nic_counters.faults_reordered,
                       counters.ip.link_refused}});
    std::uint64_t peer_drops = 0, peer_duplicates = 0, peer_reorders = 0, peer_refused = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const Control::Message m = control.receive(*host, peer, keep_draining);
      require(m.kind == Control::tally_kind, rank, "tally out of step");
      peer_drops += m.values[0];
      peer_duplicates += m.values[1];
      peer_reorders += m.values[2];
      peer_refused += m.values[3];
    }

    std::uint64_t missing = 0, duplicated = 0;
    for (int peer = 0; peer < size; ++peer)
      for (std::uint32_t n : tally.deliveries[peer])
        if (peer != rank) {
          missing += n == 0;
          duplicated += n > 1 ? n - 1 : 0;
        }
    const std::uint64_t counted_losses = peer_drops + peer_duplicates + peer_reorders + peer_refused +
                                         nic_counters.dropped_no_receive + counters.udp.receive_queue_drops +
                                         counters.reassembly.evicted + host->link().counters().receive_errors;
    std::printf(
        "rank %d: %u datagrams expected from each of %d peers; missing %llu, duplicated %llu; losses counted %llu "
        "(peers' faults: %llu dropped, %llu duplicated, %llu reordered; here: %llu without a receive buffer, %llu "
        "queue drops); reassembled %llu, reassembly timeouts %llu, duplicate fragments %llu\n",
        rank, expected, size - 1, static_cast<unsigned long long>(missing), static_cast<unsigned long long>(duplicated),
        static_cast<unsigned long long>(counted_losses), static_cast<unsigned long long>(peer_drops),
        static_cast<unsigned long long>(peer_duplicates), static_cast<unsigned long long>(peer_reorders),
        static_cast<unsigned long long>(nic_counters.dropped_no_receive),
        static_cast<unsigned long long>(counters.udp.receive_queue_drops),
        static_cast<unsigned long long>(counters.reassembly.reassembled),
        static_cast<unsigned long long>(counters.reassembly.timeouts),
        static_cast<unsigned long long>(counters.reassembly.duplicates));

    require(tally.corrupt == 0, rank, std::to_string(tally.corrupt) + " datagrams arrived corrupt or misrouted");
    require(counters.ip.bad_checksum == 0 && counters.udp.bad_checksum == 0 && counters.icmp.bad_checksum == 0, rank,
            "a checksum failed, with no corruption injected");
    require(missing <= counted_losses, rank, "more datagrams missing than losses counted");
    require(duplicated <= peer_duplicates, rank, "more datagrams duplicated than frames the peers duplicated");
    require(counters.reassembly.reassembled > 0, rank, "no fragmented datagram was reassembled");
    if (faults) {
      require(peer_drops > 0, rank, "VIASTACK_FAULTS dropped nothing: the faults were not applied");
    } else {
      // Without faults the only loss UDP may see is its own: a receiver that
      // fell behind (descheduled on a busy machine) finds no buffer posted on
      // its unreliable VI, and fragments of a datagram it dropped leave a
      // reassembly to time out. Anything else is a defect.
      const std::uint64_t behind = nic_counters.dropped_no_receive;
      require(duplicated == 0 && counters.reassembly.duplicates == 0, rank,
              "datagrams or fragments duplicated with no faults injected");
      require(counted_losses == behind, rank, "losses other than a receiver falling behind, with no faults injected");
      require(behind > 0 || (missing == 0 && counters.reassembly.timeouts == 0), rank,
              "datagrams lost with no faults injected and no receive found without a buffer");
    }

    // Nobody tears down its VIs while a peer may still be sending.
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) control.send(*host, peer, {Control::barrier_kind, static_cast<std::uint64_t>(rounds), {}});
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) (void)control.receive(*host, peer, keep_draining);

    const utcp::StackCounters final_counters = host->stack().counters();
    socket.close();
    host.reset();  // closes the trace file
    if (config.trace) {
      const std::size_t records = pcap_records(utcp::trace_file_for_rank(*config.trace, rank, size));
      require(records == final_counters.ip.packets_in + final_counters.ip.packets_out, rank,
              describe("the trace holds a different number of packets than the stack saw: ",
                       std::to_string(records)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "utcp_udp_flood: %s\n", e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
