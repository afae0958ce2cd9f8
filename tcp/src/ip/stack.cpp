#include "utcp/stack.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "utcp/checksum.hpp"
#include "utcp/icmp.hpp"
#include "utcp/tcp_header.hpp"
#include "utcp/udp.hpp"
#include "utcp/udp_socket.hpp"
#include "wire/bytes.hpp"

namespace utcp {
namespace {

using wire::Ipv4Address;
using wire::Ipv4Header;

constexpr std::size_t header_room = wire::ipv4_min_header_length;
// Packets taken from the link per poll, so that a flood cannot keep poll
// from returning.
constexpr std::size_t receive_budget = 256;

std::error_code error(std::errc code) { return std::make_error_code(code); }

bool is_multicast(Ipv4Address address) { return address.value >> 28 == 0xe; }

std::uint64_t random_secret() {
  std::random_device device;
  return std::uint64_t{device()} << 32 | device();
}

// The errno a connected socket reports for a destination unreachable code,
// as RFC 1122 §4.1.3.3 asks UDP to pass it up (Linux's icmp_err_convert).
std::error_code unreachable_error(std::uint8_t code) {
  switch (code) {
    case wire::unreachable_code::network: return error(std::errc::network_unreachable);
    case wire::unreachable_code::protocol: return error(std::errc::no_protocol_option);
    case wire::unreachable_code::port: return error(std::errc::connection_refused);
    case wire::unreachable_code::fragmentation_needed: return error(std::errc::message_size);
    default: return error(std::errc::host_unreachable);
  }
}

}  // namespace

std::string Endpoint::to_string() const {
  std::string text = address.to_string();
  text += ':';
  text += std::to_string(port);
  return text;
}

Stack::Stack(Link& link, const StackConfig& config)
    : link_(link),
      config_(config),
      netmask_(config.prefix_length <= 0 ? 0 : ~std::uint32_t{0} << (32 - std::min(config.prefix_length, 32))),
      reassembler_(config.reassembly),
      packet_(wire::ipv4_max_total_length),
      fragment_(std::min(link.mtu(), wire::ipv4_max_total_length)),
      tcp_out_of_order_{config.tcp_out_of_order_bytes, config.tcp_out_of_order_segments},
      tcp_secret_(config.tcp_secret ? *config.tcp_secret : random_secret()),
      // Where the search for free ports starts is secret too (RFC 6056): a
      // program run again on the same address does not take the port its last
      // run had, whose peer may still be sending to it.
      next_ephemeral_port_(static_cast<std::uint16_t>(kFirstDynamicPort + tcp_secret_ % kDynamicPorts)) {}

bool Stack::poll(Instant now) {
  now_ = now;
  // What the link holds is one batch: ACKs that may wait go once at its end
  // (tcp_poll_timers), not one for each segment.
  tcp_batch_ = true;
  std::size_t handled =
      link_.receive([&](std::span<const std::uint8_t> packet) { input(packet, current_time(), false); }, receive_budget);
  tcp_batch_ = false;
  // Only the packets queued so far: answering them may loop more back.
  for (std::size_t n = loopback_.size(); n > 0; --n, ++handled) {
    const std::vector<std::uint8_t> packet = std::move(loopback_.front());
    loopback_.pop_front();
    input(packet, current_time(), true);
  }
  handled += reassembler_.expire(current_time(), [this](const Ipv4Header& first, std::span<const std::uint8_t> payload) {
    send_icmp_error(wire::IcmpTimeExceeded{wire::time_exceeded_code::reassembly}, first, payload);
  });
  handled += tcp_poll_timers();
  return handled > 0;
}

Instant Stack::current_time() {
  if (clock_) now_ = std::max(now_, clock_());
  return now_;
}

std::optional<Instant> Stack::poll_at() const {
  if (!loopback_.empty()) return now_;  // looped-back packets wait for the next poll
  std::optional<Instant> at = reassembler_.next_deadline();
  for (const auto& [quad, entry] : tcp_connections_)
    if (const std::optional<Instant> timer = entry.connection->next_timer(); timer && (!at || *timer < *at)) at = timer;
  return at;
}

std::error_code Stack::wait_for(const std::function<bool()>& ready, bool nonblocking,
                                std::optional<std::chrono::milliseconds> timeout) {
  if (ready()) return {};
  if (nonblocking || !waiter_ || !waiter_->wait_until(ready, timeout)) return error(std::errc::operation_would_block);
  return {};
}

std::optional<std::uint16_t> Stack::ephemeral_port(const std::function<bool(std::uint16_t)>& taken) {
  constexpr std::uint32_t first = kFirstDynamicPort, count = kDynamicPorts;
  for (std::uint32_t tried = 0; tried < count; ++tried) {
    const std::uint16_t candidate = next_ephemeral_port_;
    next_ephemeral_port_ = static_cast<std::uint16_t>(candidate == 65535 ? first : candidate + 1);
    if (!taken(candidate)) return candidate;
  }
  return std::nullopt;
}

StackCounters Stack::counters() const {
  StackCounters counters = counters_;
  counters.reassembly = reassembler_.counters();
  counters.tcp.out_of_order_bytes = tcp_out_of_order_.bytes;
  counters.tcp.out_of_order_segments = tcp_out_of_order_.segments;
  return counters;
}

// ---- sending ----

std::error_code Stack::route(Ipv4Address destination) const {
  if (destination == config_.address) return {};
  if ((destination.value & netmask_) != (config_.address.value & netmask_)) return error(std::errc::network_unreachable);
  if (!link_.reaches(destination)) return error(std::errc::host_unreachable);
  return {};
}

bool Stack::transmit(Ipv4Address next_hop, std::span<const std::uint8_t> packet) {
  if (next_hop == config_.address) {
    loopback_.emplace_back(packet.begin(), packet.end());
  } else if (!link_.transmit(next_hop, packet)) {
    ++counters_.ip.link_refused;
    return false;
  }
  ++counters_.ip.packets_out;
  return true;
}

bool Stack::transmit_gathered(Ipv4Address next_hop, std::span<const std::uint8_t> head,
                              std::span<const std::uint8_t> body) {
  if (!link_.transmit_gathered(next_hop, head, body)) {
    ++counters_.ip.link_refused;
    return false;
  }
  ++counters_.ip.packets_out;
  return true;
}

Ipv4Header Stack::ipv4_header_to(std::uint8_t protocol, Ipv4Address destination) {
  Ipv4Header header;
  header.identification = next_identification_++;
  header.time_to_live = config_.time_to_live;
  header.protocol = protocol;
  header.source = config_.address;
  header.destination = destination;
  return header;
}

std::error_code Stack::send_ip(std::uint8_t protocol, Ipv4Address destination, std::size_t transport_length,
                               std::span<std::uint8_t> packet) {
  if (const std::error_code routing = route(destination)) return routing;
  Ipv4Header header = ipv4_header_to(protocol, destination);
  const std::span<const std::uint8_t> transport(packet.data() + header_room, transport_length);

  // To ourselves the datagram goes whole: there is no link MTU in between.
  const bool fits = destination == config_.address || header_room + transport_length <= link_.mtu();
  if (fits) {
    const std::size_t length = wire::emit_ipv4(header, transport, packet);  // transport already in place
    return transmit(destination, packet.first(length)) ? std::error_code{} : error(std::errc::no_buffer_space);
  }
  // RFC 791 §3.2: every fragment but the last carries a multiple of 8 bytes.
  const std::size_t per_fragment = (link_.mtu() - header_room) / 8 * 8;
  if (per_fragment == 0) return error(std::errc::message_size);
  ++counters_.ip.datagrams_fragmented;
  for (std::size_t offset = 0; offset < transport_length; offset += per_fragment) {
    const std::size_t size = std::min(per_fragment, transport_length - offset);
    header.fragment_offset = static_cast<std::uint16_t>(offset);
    header.more_fragments = offset + size < transport_length;
    const std::size_t length = wire::emit_ipv4(header, transport.subspan(offset, size), fragment_);
    if (!transmit(destination, std::span(fragment_).first(length))) return error(std::errc::no_buffer_space);
    ++counters_.ip.fragments_out;
  }
  return {};
}

std::error_code Stack::send_echo_request(Ipv4Address to, std::uint16_t identifier, std::uint16_t sequence,
                                         std::span<const std::uint8_t> data) {
  if (data.size() > wire::ipv4_max_total_length - header_room - wire::icmp_header_length)
    return error(std::errc::message_size);
  const std::size_t length = wire::emit_icmp(wire::IcmpEcho{false, identifier, sequence}, data,
                                             std::span(packet_).subspan(header_room));
  if (const std::error_code failed = send_ip(wire::ip_protocol::icmp, to, length, packet_)) return failed;
  ++counters_.icmp.echo_requests_out;
  return {};
}

std::optional<EchoReply> Stack::take_echo_reply() {
  if (echo_replies_.empty()) return std::nullopt;
  EchoReply reply = std::move(echo_replies_.front());
  echo_replies_.pop_front();
  return reply;
}

void Stack::send_icmp_error(const wire::IcmpHeader& message, const Ipv4Header& header,
                            std::span<const std::uint8_t> payload) {
  // RFC 1122 §3.2.2: no error about a datagram whose source is not one host,
  // nor about one sent to a broadcast or multicast address (we only take in
  // datagrams to our own address).
  const Ipv4Address source = header.source;
  const std::uint32_t host_bits = ~netmask_;
  if (source.value == 0 || is_multicast(source) || source.value == 0xffffffff || source.value >> 24 == 127 ||
      (host_bits != 0 && (source.value & host_bits) == host_bits))
    return;
  // Nor about an ICMP error (only echo requests and replies are not errors here).
  constexpr std::uint8_t echo_reply = 0, echo_request = 8;
  if (header.protocol == wire::ip_protocol::icmp && !payload.empty() && payload[0] != echo_reply &&
      payload[0] != echo_request)
    return;
  // The quote: the datagram's header (a reassembled one's as it was before
  // fragmentation, a first fragment's as it came) and the first 8 bytes of
  // its payload (RFC 792).
  std::uint8_t quote[header_room + 8];
  const std::span<const std::uint8_t> start = payload.first(std::min<std::size_t>(payload.size(), 8));
  const std::size_t quote_length = wire::emit_ipv4(header, start, quote);
  wire::detail::store16(quote + 2, static_cast<std::uint16_t>(header_room + payload.size()));
  wire::detail::store16(quote + 10, 0);
  wire::detail::store16(quote + 10, wire::internet_checksum(std::span(quote).first(header_room)));

  const std::size_t length =
      wire::emit_icmp(message, std::span(quote).first(quote_length), std::span(packet_).subspan(header_room));
  const std::error_code failed = send_ip(wire::ip_protocol::icmp, source, length, packet_);
  if (!failed)
    ++(std::holds_alternative<wire::IcmpTimeExceeded>(message) ? counters_.icmp.time_exceeded_out
                                                                : counters_.icmp.unreachable_out);
}

// ---- receiving ----

void Stack::input(std::span<const std::uint8_t> packet, Instant now, bool looped_back) {
  ++counters_.ip.packets_in;
  const auto parsed = wire::parse_ipv4(packet);
  if (!parsed) {
    ++(parsed.error() == wire::Error::bad_checksum ? counters_.ip.bad_checksum : counters_.ip.malformed);
    return;
  }
  const Ipv4Header& header = parsed->header;
  if (header.destination != config_.address) {
    ++counters_.ip.not_for_us;
    return;
  }
  // Only this stack sends from its own address, and its packets to itself
  // never leave it (transmit loops them back): one from the link that claims
  // it is spoofed, and answering it (an ICMP error, a reset) would be talking
  // to ourselves. Linux drops such "martian" sources as well.
  if (header.source == config_.address && !looped_back) {
    ++counters_.ip.own_source;
    return;
  }
  if (header.more_fragments || header.fragment_offset != 0) {
    if (const auto datagram = reassembler_.offer(header, parsed->payload, now))
      deliver(datagram->header, datagram->payload);
    return;
  }
  deliver(header, parsed->payload);
}

void Stack::deliver(const Ipv4Header& header, std::span<const std::uint8_t> payload) {
  switch (header.protocol) {
    case wire::ip_protocol::icmp:
      return input_icmp(header, payload);
    case wire::ip_protocol::udp:
      return input_udp(header, payload);
    case wire::ip_protocol::tcp:
      return input_tcp(header, payload);
    default:
      ++counters_.ip.unknown_protocol;
      return send_icmp_error(wire::IcmpDestinationUnreachable{wire::unreachable_code::protocol}, header, payload);
  }
}

void Stack::input_icmp(const Ipv4Header& header, std::span<const std::uint8_t> message) {
  const auto parsed = wire::parse_icmp(message);
  if (!parsed) {
    switch (parsed.error()) {
      case wire::Error::bad_checksum: ++counters_.icmp.bad_checksum; break;
      case wire::Error::unsupported_icmp_type: ++counters_.icmp.unsupported; break;
      default: ++counters_.icmp.malformed; break;
    }
    return;
  }
  if (const auto* echo = std::get_if<wire::IcmpEcho>(&parsed->header)) {
    if (echo->reply) {
      ++counters_.icmp.echo_replies_in;
      if (echo_replies_.size() >= config_.echo_reply_queue) {
        ++counters_.icmp.echo_replies_dropped;
        return;
      }
      echo_replies_.push_back(
          EchoReply{header.source, echo->identifier, echo->sequence, {parsed->data.begin(), parsed->data.end()}});
      return;
    }
    ++counters_.icmp.echo_requests_in;
    // RFC 1122 §3.2.2.6: the reply carries the request's identifier, sequence and data.
    const std::size_t length = wire::emit_icmp(wire::IcmpEcho{true, echo->identifier, echo->sequence}, parsed->data,
                                               std::span(packet_).subspan(header_room));
    // A reply that cannot leave is counted there.
    (void)send_ip(wire::ip_protocol::icmp, header.source, length, packet_);
    return;
  }

  if (std::holds_alternative<wire::IcmpTimeExceeded>(parsed->header)) {
    ++counters_.icmp.time_exceeded_in;  // a host that sent nothing through routers has nothing to do
    return;
  }
  ++counters_.icmp.unreachable_in;
  const auto& unreachable = std::get<wire::IcmpDestinationUnreachable>(parsed->header);
  const auto quoted = wire::parse_quoted_datagram(parsed->data);  // parse_icmp checked it parses
  if (quoted->header.source != config_.address) return;
  const std::uint16_t source_port = wire::detail::load16(quoted->payload_start.data());
  const std::uint16_t destination_port = wire::detail::load16(quoted->payload_start.data() + 2);
  if (quoted->header.protocol == wire::ip_protocol::tcp) {
    const auto connection = tcp_connections_.find(TcpQuad{source_port, {quoted->header.destination, destination_port}});
    if (connection == tcp_connections_.end()) return;
    // The quote holds at least the first 8 bytes of the TCP header: the ports and the sequence number.
    const wire::SeqNumber sequence{wire::detail::load32(quoted->payload_start.data() + 4)};
    if (connection->second.connection->on_icmp_unreachable(unreachable.code, sequence, now_))
      ++counters_.tcp.unreachable_in;
    else
      ++counters_.tcp.unreachable_ignored;
    return;
  }
  if (quoted->header.protocol != wire::ip_protocol::udp) return;
  const auto port = udp_ports_.find(source_port);
  if (port == udp_ports_.end()) return;
  // Like BSD and Linux, only a connected socket hears of errors: an
  // unconnected one could not tell which of its sends failed.
  for (const SocketId id : port->second) {
    UdpSocketState& socket = udp_sockets_.at(id);
    if (socket.remote == Endpoint{quoted->header.destination, destination_port})
      socket.pending_error = unreachable_error(unreachable.code);
  }
}

Stack::UdpSocketState* Stack::udp_receiver(std::uint16_t port, Endpoint from) {
  const auto bound = udp_ports_.find(port);
  if (bound == udp_ports_.end()) return nullptr;
  UdpSocketState* unconnected = nullptr;
  for (const SocketId id : bound->second) {
    UdpSocketState& socket = udp_sockets_.at(id);
    if (socket.remote == from) return &socket;
    if (!socket.remote) unconnected = &socket;
  }
  return unconnected;
}

void Stack::input_udp(const Ipv4Header& header, std::span<const std::uint8_t> bytes) {
  const auto datagram = wire::parse_udp(bytes, header.source, header.destination);
  if (!datagram) {
    ++(datagram.error() == wire::Error::bad_checksum ? counters_.udp.bad_checksum : counters_.udp.malformed);
    return;
  }
  const Endpoint from{header.source, datagram->header.source_port};
  UdpSocketState* socket = udp_receiver(datagram->header.destination_port, from);
  if (!socket) {
    ++counters_.udp.no_port;
    return send_icmp_error(wire::IcmpDestinationUnreachable{wire::unreachable_code::port}, header, bytes);
  }
  const std::size_t size = datagram->payload.size();
  if (socket->queue.size() >= socket->queue_datagrams_limit || socket->queued_bytes + size > socket->queue_bytes_limit) {
    ++counters_.udp.receive_queue_drops;
    ++socket->drops;
    return;
  }
  socket->queue.push_back(QueuedDatagram{from, {datagram->payload.begin(), datagram->payload.end()}});
  socket->queued_bytes += size;
  ++counters_.udp.datagrams_in;
}

// ---- UDP socket calls ----

Stack::SocketId Stack::udp_open() {
  const SocketId id = next_socket_id_++;
  UdpSocketState& state = udp_sockets_[id];
  state.queue_datagrams_limit = config_.udp_receive_queue_datagrams;
  state.queue_bytes_limit = config_.udp_receive_queue_bytes;
  return id;
}

void Stack::udp_close(SocketId id) {
  const auto it = udp_sockets_.find(id);
  if (it == udp_sockets_.end()) return;
  if (const auto port = udp_ports_.find(it->second.local_port); port != udp_ports_.end()) {
    std::erase(port->second, id);
    if (port->second.empty()) udp_ports_.erase(port);
  }
  udp_sockets_.erase(it);
}

Stack::UdpSocketState* Stack::udp_state(SocketId id) { return find_state(udp_sockets_, id); }

std::error_code Stack::udp_bind(UdpSocketState& socket, SocketId id, Endpoint local) {
  if (socket.local_port != 0) return error(std::errc::invalid_argument);
  if (local.address.value != 0 && local.address != config_.address) return error(std::errc::address_not_available);
  std::uint16_t port = local.port;
  if (port == 0) {
    const auto free = ephemeral_port([this](std::uint16_t candidate) { return udp_ports_.contains(candidate); });
    if (!free) return error(std::errc::address_in_use);
    port = *free;
  } else if (const auto bound = udp_ports_.find(port); bound != udp_ports_.end()) {
    const bool all_allow = socket.reuse_address && std::ranges::all_of(bound->second, [this](SocketId other) {
                             return udp_sockets_.at(other).reuse_address;
                           });
    if (!all_allow) return error(std::errc::address_in_use);
  }
  udp_ports_[port].push_back(id);
  socket.local_port = port;
  return {};
}

std::error_code Stack::udp_send(UdpSocketState& socket, SocketId id, std::span<const std::uint8_t> data, Endpoint to) {
  if (data.size() > udp_max_payload) return error(std::errc::message_size);
  if (socket.local_port == 0)
    if (const std::error_code failed = udp_bind(socket, id, {})) return failed;
  const std::size_t length = wire::emit_udp(wire::UdpHeader{socket.local_port, to.port}, config_.address, to.address,
                                            data, std::span(packet_).subspan(header_room));
  if (const std::error_code failed = send_ip(wire::ip_protocol::udp, to.address, length, packet_)) return failed;
  ++counters_.udp.datagrams_out;
  return {};
}

}  // namespace utcp

namespace utcp {

// ---- TCP: demultiplexing and listeners ----

std::size_t Stack::TcpQuadHash::operator()(const TcpQuad& quad) const {
  const std::uint64_t key = std::uint64_t{quad.remote.address.value} << 32 | std::uint64_t{quad.remote.port} << 16 |
                            quad.local_port;
  return std::hash<std::uint64_t>{}(key);
}

void Stack::input_tcp(const Ipv4Header& header, std::span<const std::uint8_t> bytes) {
  const auto segment = wire::parse_tcp(bytes, header.source, header.destination);
  if (!segment) {
    ++(segment.error() == wire::Error::bad_checksum ? counters_.tcp.bad_checksum : counters_.tcp.malformed);
    return;
  }
  ++counters_.tcp.segments_in;
  const TcpQuad quad{segment->header.destination_port, {header.source, segment->header.source_port}};
  if (const auto found = tcp_connections_.find(quad); found != tcp_connections_.end()) {
    TcpConnectionEntry& entry = found->second;
    if (!entry.connection->finished()) {
      entry.connection->on_segment(*segment, now_, tcp_batch_);
      if (entry.half_open_of != 0 && entry.connection->was_established()) tcp_promote_half_open(quad, entry);
      return;
    }
    // A closed connection takes nothing more; one no socket holds makes way
    // for a new one on the same quad.
    if (!entry.held) tcp_connections_.erase(found);
  }
  if (const auto port = tcp_ports_.find(quad.local_port); port != tcp_ports_.end())
    if (const auto listener = tcp_listeners_.find(port->second); listener != tcp_listeners_.end())
      return input_tcp_listen(listener->first, listener->second, quad, *segment);
  ++counters_.tcp.no_connection;
  tcp_send_reset_for(*segment, header.source);
}

// RFC 9293 §3.10.7.2: in LISTEN a RST is ignored, an ACK answered with a
// reset, a SYN starts a connection, anything else dropped.
void Stack::input_tcp_listen(SocketId listener_id, TcpListenerState& listener, const TcpQuad& quad,
                             const wire::TcpSegment& segment) {
  const wire::TcpHeader& header = segment.header;
  if (header.has(wire::tcp_flags::rst)) return;
  if (header.has(wire::tcp_flags::ack)) {
    ++counters_.tcp.no_connection;
    return tcp_send_reset_for(segment, quad.remote.address);
  }
  if (!header.has(wire::tcp_flags::syn)) return;
  // A full backlog drops the SYN, as Linux does: the peer retries.
  if (listener.queue.size() >= listener.backlog || tcp_connections_.contains(quad)) {
    ++counters_.tcp.backlog_drops;
    return;
  }
  // The oldest half-open connection makes way: under a flood of spoofed
  // SYNs a legitimate one lives as long as the flood takes to send
  // tcp_max_half_open more, many round trips on any real network.
  if (listener.half_open.size() >= std::max<std::size_t>(config_.tcp_max_half_open, 1)) {
    tcp_connections_.erase(listener.half_open.front());
    listener.half_open.pop_front();
    ++counters_.tcp.half_open_evictions;
  }
  std::unique_ptr<TcpConnection> connection =
      TcpConnection::accept({quad.local_port, quad.remote.port}, tcp_connection_config(listener.config), segment,
                            tcp_initial_sequence(quad), now_, tcp_transmitter(quad), &tcp_out_of_order_);
  // The controller's factory made none (listen() and set_config() refused
  // unknown names): the SYN is dropped.
  if (!connection) return;
  TcpConnectionEntry entry{std::move(connection)};
  entry.half_open_of = listener_id;
  tcp_connections_.emplace(quad, std::move(entry));
  listener.half_open.push_back(quad);
  ++counters_.tcp.passive_opens;
}

void Stack::tcp_promote_half_open(const TcpQuad& quad, TcpConnectionEntry& entry) {
  TcpListenerState& listener = tcp_listeners_.at(entry.half_open_of);
  listener.half_open.erase(std::find(listener.half_open.begin(), listener.half_open.end(), quad));
  listener.queue.push_back(quad);
  entry.half_open_of = 0;
}

void Stack::tcp_send_reset_for(const wire::TcpSegment& segment, Ipv4Address to) {
  const std::optional<wire::TcpHeader> reset = reset_for(segment);
  if (!reset) return;
  tcp_send_segment(*reset, {}, to);
  ++counters_.tcp.resets_out;
}

void Stack::tcp_send_segment(const wire::TcpHeader& header, std::span<const std::uint8_t> payload, Ipv4Address to) {
  const std::size_t transport_length = wire::tcp_header_length(header) + payload.size();
  if (to != config_.address && !payload.empty() && header_room + transport_length <= link_.max_gathered(to) &&
      !route(to)) {
    // The link copies the payload from where the connection keeps it: only
    // the headers are built here, the payload is read once for its sum.
    const std::span<std::uint8_t> headers(packet_);
    const std::size_t tcp_length =
        wire::emit_tcp_header(header, config_.address, to, payload, headers.subspan(header_room));
    wire::emit_ipv4_header(ipv4_header_to(wire::ip_protocol::tcp, to), transport_length, headers);
    if (transmit_gathered(to, headers.first(header_room + tcp_length), payload)) ++counters_.tcp.segments_out;
    return;
  }
  std::span<std::uint8_t> packet;
  if (to != config_.address && header_room + transport_length <= link_.mtu()) packet = link_.packet_buffer();
  if (packet.empty()) packet = packet_;
  const std::size_t length = wire::emit_tcp(header, config_.address, to, payload, packet.subspan(header_room));
  // A segment that cannot leave is counted by send_ip; the connection retransmits it.
  if (!send_ip(wire::ip_protocol::tcp, to, length, packet)) ++counters_.tcp.segments_out;
}

TcpConfig Stack::tcp_connection_config(TcpConfig config) const {
  // At most what one packet on the link carries: a larger configured MSS
  // would announce segments the link must fragment, and one past 65495 bytes
  // no IPv4 packet can hold.
  constexpr std::size_t headers = header_room + wire::tcp_min_header_length;
  const auto link_limit = static_cast<std::uint16_t>(std::min<std::size_t>(link_.mtu(), 65535) - headers);
  config.max_segment_size = config.max_segment_size == 0 ? link_limit : std::min(config.max_segment_size, link_limit);
  // A link that drops what arrives past its receive buffers: a window of
  // more full-sized segments than they hold loses the excess whenever this
  // side falls behind (a VIA link's 32 buffers against a 1 MiB window lost
  // segments every few megabytes of a stream, and each loss halved the
  // sender's window). A quarter of them stays free for what else comes:
  // the peer's ACKs, a probe.
  if (const std::size_t packets = link_.receive_packets_per_peer(); packets > 0) {
    const std::size_t segments = std::max<std::size_t>(packets - packets / 4, 1);
    config.receive_buffer = std::min(config.receive_buffer, segments * config.max_segment_size);
  }
  return config;
}

wire::SeqNumber Stack::tcp_initial_sequence(const TcpQuad& quad) const {
  std::uint8_t id[12];
  wire::detail::store32(id, config_.address.value);
  wire::detail::store16(id + 4, quad.local_port);
  wire::detail::store32(id + 6, quad.remote.address.value);
  wire::detail::store16(id + 10, quad.remote.port);
  return initial_sequence_number(id, tcp_secret_, now_);
}

TcpConnection::Transmit Stack::tcp_transmitter(const TcpQuad& quad) {
  return [this, to = quad.remote.address](const wire::TcpHeader& header, std::span<const std::uint8_t> payload) {
    tcp_send_segment(header, payload, to);
  };
}

std::size_t Stack::tcp_poll_timers() {
  std::size_t fired = 0;
  for (auto it = tcp_connections_.begin(); it != tcp_connections_.end();) {
    TcpConnection& connection = *it->second.connection;
    connection.flush_held_ack(now_);
    if (const std::optional<Instant> at = connection.next_timer(); at && *at <= now_) {
      connection.on_timer(now_);
      ++fired;
    }
    if (!it->second.held && connection.finished())
      it = tcp_connections_.erase(it);
    else
      ++it;
  }
  for (auto& [id, listener] : tcp_listeners_)
    std::erase_if(listener.half_open, [this](const TcpQuad& quad) {
      const auto entry = tcp_connections_.find(quad);
      if (!entry->second.connection->finished()) return false;
      tcp_connections_.erase(entry);
      return true;
    });
  return fired;
}

// ---- TCP socket and listener calls ----

Stack::SocketId Stack::tcp_open(const TcpConfig& config) {
  const SocketId id = next_socket_id_++;
  tcp_sockets_[id].config = config;
  return id;
}

Stack::TcpSocketState* Stack::tcp_state(SocketId id) { return find_state(tcp_sockets_, id); }

const Stack::TcpSocketState* Stack::tcp_state(SocketId id) const { return find_state(tcp_sockets_, id); }

TcpConnection* Stack::tcp_connection(const TcpSocketState& socket) const {
  return socket.connection ? tcp_connections_.at(*socket.connection).connection.get() : nullptr;
}

std::error_code Stack::tcp_bind_port(SocketId owner, Endpoint local, std::uint16_t& port) {
  if (local.address.value != 0 && local.address != config_.address) return error(std::errc::address_not_available);
  std::uint16_t chosen = local.port;
  if (chosen == 0) {
    const auto free = ephemeral_port([this](std::uint16_t candidate) { return tcp_ports_.contains(candidate); });
    if (!free) return error(std::errc::address_in_use);
    chosen = *free;
  } else if (tcp_ports_.contains(chosen)) {
    // Only live sockets and listeners hold a port: connections left closing
    // (TIME-WAIT) do not, as with Linux's SO_REUSEADDR.
    return error(std::errc::address_in_use);
  }
  tcp_ports_[chosen] = owner;
  port = chosen;
  return {};
}

std::error_code Stack::tcp_connect(TcpSocketState& socket, SocketId id, Endpoint remote) {
  if (const TcpConnection* connection = tcp_connection(socket)) {
    // A connect that failed may be tried again; otherwise there is one connection per socket.
    if (!connection->finished() || connection->was_established()) {
      const TcpState state = connection->state();
      return error(state == TcpState::syn_sent || state == TcpState::syn_received ? std::errc::connection_already_in_progress
                                                                                  : std::errc::already_connected);
    }
    tcp_connections_.erase(*socket.connection);
    socket.connection.reset();
  }
  if (remote.port == 0 || remote.address.value == 0) return error(std::errc::invalid_argument);
  // The stack's default controller (VIASTACK_UTCP_CC, StackConfig::tcp) is checked here, before a port is taken.
  if (!congestion_controller_known(socket.config.congestion_control))
    return error(std::errc::no_such_file_or_directory);
  if (const std::error_code unroutable = route(remote.address)) return unroutable;
  if (socket.local_port == 0) {
    // Any port free for this peer: the quad must be new, not the port.
    const auto free = ephemeral_port([&](std::uint16_t candidate) {
      return tcp_ports_.contains(candidate) || tcp_connections_.contains(TcpQuad{candidate, remote});
    });
    if (!free) return error(std::errc::address_not_available);
    tcp_ports_[*free] = id;
    socket.local_port = *free;
    socket.owns_port = true;
  }
  const TcpQuad quad{socket.local_port, remote};
  // A connection on the same quad, closing or in TIME-WAIT, blocks it (POSIX's EADDRINUSE for connect).
  if (tcp_connections_.contains(quad)) return error(std::errc::address_in_use);
  std::unique_ptr<TcpConnection> connection =
      TcpConnection::connect({quad.local_port, remote.port}, tcp_connection_config(socket.config),
                             tcp_initial_sequence(quad), now_, tcp_transmitter(quad), &tcp_out_of_order_);
  // The controller's factory made none.
  if (!connection) return error(std::errc::no_such_file_or_directory);
  if (socket.congestion_trace) connection->set_congestion_trace(socket.congestion_trace);
  tcp_connections_.emplace(quad, TcpConnectionEntry{std::move(connection)});
  socket.connection = quad;
  socket.error_reported = false;
  ++counters_.tcp.active_opens;
  return {};
}

void Stack::tcp_release(SocketId id, bool abort) {
  const auto it = tcp_sockets_.find(id);
  if (it == tcp_sockets_.end()) return;
  TcpSocketState& socket = it->second;
  if (socket.connection) {
    const auto entry = tcp_connections_.find(*socket.connection);
    TcpConnection& connection = *entry->second.connection;
    if (abort)
      connection.abort(now_);
    else if (!connection.finished())
      connection.close(now_);
    if (connection.finished())
      tcp_connections_.erase(entry);
    else
      entry->second.held = false;  // goes on closing in the stack
  }
  if (socket.owns_port) tcp_ports_.erase(socket.local_port);
  tcp_sockets_.erase(it);
}

Stack::SocketId Stack::tcp_listener_open(const TcpConfig& config) {
  const SocketId id = next_socket_id_++;
  tcp_listeners_[id].config = config;
  return id;
}

Stack::TcpListenerState* Stack::tcp_listener_state(SocketId id) { return find_state(tcp_listeners_, id); }

const Stack::TcpListenerState* Stack::tcp_listener_state(SocketId id) const { return find_state(tcp_listeners_, id); }

std::optional<Stack::TcpQuad> Stack::tcp_acceptable(const TcpListenerState& listener) const {
  for (const TcpQuad& quad : listener.queue)
    if (tcp_connections_.at(quad).connection->was_established()) return quad;
  return std::nullopt;
}

void Stack::tcp_listener_close(SocketId id) {
  const auto it = tcp_listeners_.find(id);
  if (it == tcp_listeners_.end()) return;
  for (const std::deque<TcpQuad>* waiting : {&it->second.queue, &it->second.half_open})
    for (const TcpQuad& quad : *waiting) {
      const auto entry = tcp_connections_.find(quad);
      entry->second.connection->abort(now_);
      tcp_connections_.erase(entry);
    }
  if (it->second.local_port != 0) tcp_ports_.erase(it->second.local_port);
  tcp_listeners_.erase(it);
}

}  // namespace utcp
