// libFuzzer target for utcp's TCP state machine and IPv4 reassembly, driven
// by structured input rather than raw bytes, so that the fuzzer reaches the
// shapes an attacker uses (issue 23) in a few bytes each:
//
// Mode 0, a connection: the first op opens it (actively, or passively from
// a SYN whose options come from the input: any MSS, 0-255 included, with or
// without timestamps and window scale); then each op is a segment from the
// peer (any flags, sequence and acknowledgment near the connection's own,
// any window and options, SACK blocks near what we sent, an urgent pointer
// with URG, a payload), an application call (send, receive,
// shutdown, close, abort), time passing (timers run), a flood of
// overlapping out-of-order segments, or an ICMP unreachable quoting a
// sequence number near ours. Checked after every op: no exception
// escaped; no segment sent carries more than the MSS in effect (and that
// MSS is in [48, ours]); every SACK block we send holds data ahead of
// RCV.NXT (a first one reporting a duplicate, below it); the out-of-order queue stays within its bounds;
// every byte delivered is the byte the peer sent at that sequence number
// (the peer's payload is a function of the sequence number); an ICMP error is
// taken only if the sequence number it quotes is in flight (RFC 5927); the
// urgent bytes reported lie within what the window and a pointer can reach.
//
// Mode 1, reassembly: a flood of fragments generated from a few parameters
// (sizes down to 8 bytes, many identifications, overlaps, duplicates,
// missing ends) through a reassembler with small limits, which must hold:
// datagrams, bytes; a datagram completed must carry the bytes sent, and one
// timed out is reported (for ICMP time exceeded) with its first fragment's bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "utcp/reassembly.hpp"
#include "utcp/tcp_connection.hpp"

namespace {

using utcp::Instant;
using utcp::TcpConnection;
using utcp::TcpState;
using utcp::wire::SeqNumber;
using utcp::wire::TcpHeader;
namespace flag = utcp::wire::tcp_flags;

void require(bool condition) {
  if (!condition) std::abort();
}

// Reads the input front to back; zeros once it runs out.
class Input {
 public:
  explicit Input(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  bool empty() const { return bytes_.empty(); }
  std::uint8_t u8() {
    if (bytes_.empty()) return 0;
    const std::uint8_t value = bytes_.front();
    bytes_ = bytes_.subspan(1);
    return value;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() << 8 | u8()); }
  std::int32_t s16() { return static_cast<std::int16_t>(u16()); }

 private:
  std::span<const std::uint8_t> bytes_;
};

// The peer's stream: the byte at sequence number s.
std::uint8_t peer_byte(std::uint32_t sequence) { return static_cast<std::uint8_t>(sequence * 2654435761u >> 24); }

constexpr std::uint32_t our_iss = 1000;
constexpr std::uint32_t peer_iss = 0xfffff000;  // wraps during the run
constexpr std::uint16_t our_mss = 1460;

class ConnectionDriver {
 public:
  explicit ConnectionDriver(Input& input) : input_(input) {
    config_.max_segment_size = our_mss;
    config_.receive_buffer = 4096u << (input_.u8() % 8);
    config_.send_buffer = 65536;
    config_.max_out_of_order_segments = 64;
    budget_.max_bytes = 32768;
    budget_.max_segments = 48;
    const std::uint8_t open = input_.u8();
    config_.timestamps = open & 2;
    config_.window_scaling = open & 4;
    if (open & 1) {
      connection_ = TcpConnection::connect({1000, 2000}, config_, SeqNumber(our_iss), now_, capture(), &budget_);
    } else {
      TcpHeader syn = header(flag::syn, peer_iss, 0);
      read_options(syn);
      const std::uint8_t payload[1] = {peer_byte(peer_iss)};
      connection_ =
          TcpConnection::accept({1000, 2000}, config_, {syn, std::span(payload, open & 8 ? 1 : 0)}, SeqNumber(our_iss),
                                now_, capture(), &budget_);
    }
    check();
  }

  void step() {
    switch (input_.u8() % 10) {
      case 0:
      case 1:
        peer_segment();
        break;
      case 2: {
        std::vector<std::uint8_t> data(input_.u16() % 20000, 0x5a);
        (void)connection_->send(data, now_);
        break;
      }
      case 3:
        receive(input_.u16());
        break;
      case 4:
        now_ += std::chrono::milliseconds(input_.u8() * 20);
        for (int fired = 0; fired < 64; ++fired) {
          const auto at = connection_->next_timer();
          if (!at || *at > now_) break;
          connection_->on_timer(now_);
        }
        break;
      case 5:
        connection_->shutdown_write(now_);
        break;
      case 6:
        if (input_.u8() < 32) connection_->close(now_);
        break;
      case 7:
        if (input_.u8() < 8) connection_->abort(now_);
        break;
      case 8:
        overlapping_flood();
        break;
      case 9:
        icmp_unreachable();
        break;
    }
    check();
  }

 private:
  TcpConnection::Transmit capture() {
    return [this](const TcpHeader& sent, std::span<const std::uint8_t> payload) {
      if (sent.has(flag::syn)) {
        require(sent.options.max_segment_size == our_mss);
        our_next_ = sent.sequence.value() + 1;
      }
      // No segment larger than the MSS in effect (its payload less options).
      if (connection_ && !payload.empty()) require(payload.size() <= connection_->info().max_segment_size);
      our_next_ = std::max(our_next_, sent.sequence.value() + static_cast<std::uint32_t>(payload.size()) +
                                          (sent.has(flag::fin) ? 1u : 0u));
      if (sent.options.timestamps) peer_echo_ = sent.options.timestamps->value;
      // Every SACK block holds data ahead of RCV.NXT, but for a D-SACK (RFC
      // 2883) in the first place: data received twice, below the ACK.
      const auto blocks = sent.options.sack();
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        const bool duplicate_report = i == 0 && blocks[0].right <= sent.acknowledgment;
        require(blocks[i].left < blocks[i].right && (duplicate_report || sent.acknowledgment < blocks[i].left));
      }
    };
  }

  TcpHeader header(std::uint8_t flags, std::uint32_t sequence, std::uint32_t ack) {
    TcpHeader h;
    h.source_port = 2000;
    h.destination_port = 1000;
    h.sequence = SeqNumber(sequence);
    h.acknowledgment = SeqNumber(ack);
    h.flags = flags;
    h.window = 65535;
    return h;
  }

  // Options as the input says: bit 0 an MSS (one byte: 0-255, the tiny
  // ones that crashed utcp; or two), bit 1 timestamps, bit 2 window scale,
  // bit 4 SACK-permitted, bit 5 SACK blocks (up to four, their edges near
  // what we sent: inside, outside, reversed, overlapping).
  void read_options(TcpHeader& h) {
    const std::uint8_t which = input_.u8();
    if (which & 1) h.options.max_segment_size = (which & 8) ? input_.u16() : input_.u8();
    if (which & 2) h.options.timestamps = utcp::wire::TcpTimestamps{peer_clock_ += input_.u8(), peer_echo_};
    if (which & 4) h.options.window_scale = input_.u8() % 16;
    if (which & 16) h.options.sack_permitted = true;
    if (which & 32) {
      const std::uint32_t base = connection_ ? connection_->info().send_unacknowledged.value() : our_iss;
      h.options.sack_block_count = static_cast<std::uint8_t>(1 + input_.u8() % utcp::wire::TcpOptions::max_sack_blocks);
      for (std::uint8_t i = 0; i < h.options.sack_block_count; ++i) {
        const std::uint32_t left = base + static_cast<std::uint32_t>(input_.s16() * 4);
        h.options.sack_blocks[i] = {SeqNumber(left), SeqNumber(left + static_cast<std::uint32_t>(input_.s16()))};
      }
    }
  }

  // A segment near the connection's sequence numbers, carrying the peer's
  // stream at its sequence number.
  void peer_segment() {
    const utcp::TcpInfo info = connection_->info();
    const std::uint8_t flags = input_.u8();
    const std::uint32_t sequence = info.receive_next.value() + static_cast<std::uint32_t>(input_.s16());
    const std::uint32_t ack = (input_.u8() & 1 ? our_next_ : info.send_unacknowledged.value()) +
                              static_cast<std::uint32_t>(input_.s16() >> 8);
    TcpHeader h = header(flags, sequence, ack);
    h.window = input_.u16();
    if (flags & flag::urg) h.urgent_pointer = input_.u16();
    read_options(h);
    send_stream(h, input_.u16() % 3000);
  }

  // Many out-of-order segments overlapping each other, ahead of a hole at RCV.NXT.
  void overlapping_flood() {
    const std::uint32_t start = connection_->info().receive_next.value() + 1 + input_.u8();
    const std::size_t count = 1 + input_.u8() * 8u;
    const std::uint32_t stride = 1 + input_.u8() % 64;
    const std::uint32_t length = 1 + input_.u16() % 1500;
    const bool descending = input_.u8() & 1;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t k = static_cast<std::uint32_t>(descending ? count - 1 - i : i);
      TcpHeader h = header(flag::ack, start + k * stride, connection_->info().send_unacknowledged.value());
      if (peer_clock_ != 0) h.options.timestamps = utcp::wire::TcpTimestamps{peer_clock_, peer_echo_};
      send_stream(h, length);
    }
  }

  void icmp_unreachable() {
    const utcp::TcpInfo before = connection_->info();
    const std::uint8_t code = input_.u8() % 16;
    const SeqNumber quoted(before.send_unacknowledged.value() + static_cast<std::uint32_t>(input_.s16()));
    const bool in_flight = before.send_unacknowledged <= quoted && quoted < SeqNumber(our_next_);
    if (connection_->on_icmp_unreachable(code, quoted, now_)) require(in_flight);
  }

  void send_stream(const TcpHeader& h, std::size_t length) {
    std::vector<std::uint8_t> payload(length);
    const std::uint32_t first = h.sequence.value() + (h.has(flag::syn) ? 1 : 0);
    for (std::size_t i = 0; i < length; ++i) payload[i] = peer_byte(first + static_cast<std::uint32_t>(i));
    connection_->on_segment({h, payload}, now_);
  }

  void receive(std::size_t size) {
    std::vector<std::uint8_t> buffer(size % 70000 + 1);
    const auto got = connection_->receive(buffer, now_);
    if (!got) return;
    // In order and exactly what the peer sent at those sequence numbers.
    require(*got == 0 || delivered_next_.has_value());
    for (std::size_t i = 0; i < *got; ++i) require(buffer[i] == peer_byte(*delivered_next_ + static_cast<std::uint32_t>(i)));
    if (delivered_next_) *delivered_next_ += static_cast<std::uint32_t>(*got);
  }

  void check() {
    const utcp::TcpInfo info = connection_->info();
    // RCV.NXT once the peer's SYN is taken (a SYN's data is not): where the stream starts.
    if (!delivered_next_ && info.state != TcpState::syn_sent && info.state != TcpState::closed)
      delivered_next_ = info.receive_next.value();
    require(info.out_of_order_segments <= config_.max_out_of_order_segments);
    require(info.out_of_order_bytes <= config_.receive_buffer);
    require(budget_.bytes <= budget_.max_bytes && budget_.segments <= budget_.max_segments);
    require(budget_.bytes == info.out_of_order_bytes && budget_.segments == info.out_of_order_segments);
    if (info.state != TcpState::syn_sent && info.state != TcpState::closed) {
      const std::uint32_t options = info.timestamps ? 12 : 0;
      require(info.max_segment_size + options >= 48 && info.max_segment_size + options <= our_mss);
    }
    require(info.urgent_bytes <= info.bytes_readable + config_.receive_buffer + 65535);
  }

  Input& input_;
  utcp::TcpConfig config_;
  utcp::TcpOutOfOrderBudget budget_;
  Instant now_ = Instant{} + std::chrono::hours(1);
  std::unique_ptr<TcpConnection> connection_;
  std::uint32_t our_next_ = our_iss;
  std::uint32_t peer_clock_ = 0, peer_echo_ = 0;
  std::optional<std::uint32_t> delivered_next_;  // the sequence number of the next byte receive() must return
};

void fuzz_connection(Input& input) {
  ConnectionDriver driver(input);
  for (int ops = 0; ops < 400 && !input.empty(); ++ops) driver.step();
}

// Fragments of datagrams whose byte at offset o is o's low byte mixed with the id.
std::uint8_t datagram_byte(std::uint16_t id, std::size_t offset) {
  return static_cast<std::uint8_t>(offset * 31 + id);
}

void fuzz_reassembly(Input& input) {
  utcp::ReassemblyLimits limits;
  limits.timeout = std::chrono::milliseconds(1 + input.u16());
  limits.max_bytes = 0;  // raised to its floor
  limits.max_datagrams = 1 + input.u8() % 64;
  limits.max_fragments_per_datagram = 1 + input.u8() % 160;
  utcp::Reassembler reassembler(limits);
  Instant now{};
  std::vector<std::uint8_t> payload;
  while (!input.empty()) {
    // A burst: `count` fragments of `unit` 8-byte blocks over `ids` datagrams.
    const std::size_t count = 1 + input.u8() * 16u;
    const std::size_t unit = 1 + input.u8() % 16;
    const std::uint16_t ids = static_cast<std::uint16_t>(1 + input.u8());
    const std::uint8_t shape = input.u8();
    for (std::size_t i = 0; i < count; ++i) {
      const auto id = static_cast<std::uint16_t>(i % ids + (shape & 0xf0));
      const std::size_t block = (shape & 1) ? i / ids : (i / ids) * 2 % 97;  // in order, or scattered
      utcp::wire::Ipv4Header header;
      header.protocol = 17;
      header.identification = id;
      header.source = utcp::wire::Ipv4Address::from_octets(10, 0, 0, static_cast<std::uint8_t>(1 + (shape >> 1 & 3)));
      header.fragment_offset = static_cast<std::uint16_t>(std::min<std::size_t>(block * unit * 8, 65000) / 8 * 8);
      header.more_fragments = !((shape & 8) && i + ids >= count);
      const std::size_t size = (shape & 4) ? unit * 8 + 4 : unit * 8;  // +4: overlaps the next block
      payload.resize(size);
      for (std::size_t b = 0; b < size; ++b) payload[b] = datagram_byte(id, header.fragment_offset + b);
      if (const auto datagram = reassembler.offer(header, payload, now)) {
        for (std::size_t b = 0; b < datagram->payload.size(); ++b)
          require(datagram->payload[b] == datagram_byte(datagram->header.identification, b));
      }
      require(reassembler.datagrams_pending() <= limits.max_datagrams);
      require(reassembler.bytes_held() <= 65535 + 256 + limits.max_fragments_per_datagram * 64);
    }
    now += std::chrono::milliseconds(input.u8() * 4);
    reassembler.expire(now, [](const utcp::wire::Ipv4Header& first, std::span<const std::uint8_t> bytes) {
      require(first.fragment_offset == 0 && !bytes.empty());
      for (std::size_t b = 0; b < bytes.size(); ++b) require(bytes[b] == datagram_byte(first.identification, b));
    });
    if (const auto next = reassembler.next_deadline()) require(*next > now);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input input({data, size});
  if (input.u8() & 1)
    fuzz_reassembly(input);
  else
    fuzz_connection(input);
  return 0;
}
