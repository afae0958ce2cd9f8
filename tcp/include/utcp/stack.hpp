// The stack: one IPv4 host on one link, with ICMP, UDP and TCP. Its state
// (routing, reassembly, sockets) changes only inside calls on it, and time
// enters only through poll(now): it reads no clock, so every behaviour can be
// driven packet by packet on virtual time (as smoltcp's Interface::poll).
// A host over VIA (via_host.hpp) adds the clock and the waiting.
//
// Sending happens at once, inside the socket call; receiving and timeouts
// happen in poll. A socket call that needs the time (TCP's) takes the last
// poll's. One stack and its sockets are used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "utcp/address.hpp"
#include "utcp/icmp.hpp"
#include "utcp/ipv4.hpp"
#include "utcp/link.hpp"
#include "utcp/reassembly.hpp"
#include "utcp/result.hpp"
#include "utcp/tcp_connection.hpp"

namespace utcp {

struct Endpoint {
  wire::Ipv4Address address;
  std::uint16_t port = 0;
  std::string to_string() const;  // "10.0.0.1:7"
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct StackConfig {
  wire::Ipv4Address address;
  int prefix_length = 16;  // the link's subnet: other addresses in it are neighbours
  std::uint8_t time_to_live = 64;
  ReassemblyLimits reassembly;
  // Default bounds of each UDP socket's receive queue; a datagram that would
  // pass either is dropped and counted.
  std::size_t udp_receive_queue_datagrams = 256;
  std::size_t udp_receive_queue_bytes = 1u << 20;
  std::size_t echo_reply_queue = 64;
  // The defaults of every TCP socket and listener; a max_segment_size of 0
  // becomes the link's MTU less 40.
  TcpConfig tcp;
  // The secret of RFC 6528's initial sequence numbers; none: a random one.
  std::optional<std::uint64_t> tcp_secret;
  // Out-of-order data all connections together may hold (each is bounded by
  // its window and TcpConfig::max_out_of_order_segments as well).
  std::size_t tcp_out_of_order_bytes = 64u << 20;
  std::size_t tcp_out_of_order_segments = 65536;
  // Half-open (SYN-RECEIVED) connections per listener; a SYN beyond it
  // evicts the oldest, so a SYN flood cannot lock a port.
  std::size_t tcp_max_half_open = 1024;
};

struct StackCounters {
  struct Ip {
    std::uint64_t packets_in = 0;
    std::uint64_t packets_out = 0;        // to the link or looped back; each fragment counts
    std::uint64_t bad_checksum = 0;       // header checksum failed
    std::uint64_t malformed = 0;          // any other reason parse_ipv4 refused
    std::uint64_t not_for_us = 0;         // another destination: a host does not forward
    std::uint64_t own_source = 0;         // from the link with our own address as source: spoofed
    std::uint64_t unknown_protocol = 0;   // answered with protocol unreachable
    std::uint64_t fragments_out = 0;
    std::uint64_t datagrams_fragmented = 0;
    std::uint64_t link_refused = 0;       // the link could not take a packet
  } ip;
  ReassemblyCounters reassembly;
  struct Icmp {
    std::uint64_t bad_checksum = 0;
    std::uint64_t malformed = 0;
    std::uint64_t unsupported = 0;        // types other than echo, destination unreachable and time exceeded
    std::uint64_t echo_requests_in = 0;   // each answered with a reply
    std::uint64_t echo_replies_in = 0;
    std::uint64_t echo_replies_dropped = 0;  // the reply queue was full
    std::uint64_t echo_requests_out = 0;
    std::uint64_t unreachable_in = 0;
    std::uint64_t unreachable_out = 0;
    std::uint64_t time_exceeded_in = 0;   // counted, not acted on
    std::uint64_t time_exceeded_out = 0;  // for datagrams whose reassembly timed out
  } icmp;
  struct Udp {
    std::uint64_t datagrams_in = 0;       // delivered to a socket's queue
    std::uint64_t datagrams_out = 0;
    std::uint64_t bad_checksum = 0;
    std::uint64_t malformed = 0;
    std::uint64_t no_port = 0;            // no socket: answered with port unreachable
    std::uint64_t receive_queue_drops = 0;
  } udp;
  struct Tcp {
    std::uint64_t segments_in = 0;        // parsed and demultiplexed
    std::uint64_t segments_out = 0;
    std::uint64_t bad_checksum = 0;
    std::uint64_t malformed = 0;          // any other reason parse_tcp refused
    std::uint64_t no_connection = 0;      // no connection, no listener (or not a SYN for it): answered with RST unless a RST
    std::uint64_t resets_out = 0;         // RSTs the stack sent for segments no connection took
    std::uint64_t backlog_drops = 0;      // SYNs dropped: the listener's backlog was full
    std::uint64_t active_opens = 0;       // connect
    std::uint64_t passive_opens = 0;      // SYNs taken by a listener
    std::uint64_t unreachable_in = 0;     // ICMP destination unreachable passed to a connection
    std::uint64_t unreachable_ignored = 0;  // ... quoting a segment not in flight (RFC 5927)
    std::uint64_t half_open_evictions = 0;   // half-open connections dropped for a newer SYN
    std::uint64_t out_of_order_bytes = 0;    // now held ahead of RCV.NXT, all connections
    std::uint64_t out_of_order_segments = 0;
  } tcp;
};

struct EchoReply {
  wire::Ipv4Address from;
  std::uint16_t identifier = 0;
  std::uint16_t sequence = 0;
  std::vector<std::uint8_t> data;
};

// What a blocking socket call uses to wait: it drives the stack (polls its
// link with the current time) until ready() holds or the timeout passes
// (never, without one). Returns whether ready() held; once it returns true
// it is not called again, so it may take what it finds. A stack without a
// waiter has only non-blocking calls.
class TcpSocket;
class TcpListener;
struct PollEntry;

class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual bool wait_until(const std::function<bool()>& ready, std::optional<std::chrono::milliseconds> timeout) = 0;
};

class Stack {
 public:
  // The link must outlive the stack, and the stack its sockets.
  Stack(Link& link, const StackConfig& config);
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;

  wire::Ipv4Address address() const { return config_.address; }
  const StackConfig& config() const { return config_; }
  Link& link() { return link_; }

  // Takes in what the link (and the loopback) has, answers what needs an
  // answer, and discards reassemblies whose time ran out. True if anything
  // happened.
  bool poll(Instant now);
  // Tells the stack the time without taking anything in: a host that has
  // sockets to open before packets may be taken (they would find no socket).
  void set_time(Instant now) { now_ = now; }
  // A host on real time gives its clock: the stack then reads it for each
  // packet it takes in and each socket call, as Linux stamps each ACK when
  // it arrives. A batch takes time: timed by the poll's start, an ACK read
  // late in it would make the round trip of a segment sent early in it look
  // shorter than it was, down to zero (and RACK's reordering window, a
  // quarter of the minimum RTT, with it). Without one (virtual time), the
  // poll's time is the time of all it does.
  void set_clock(std::function<Instant()> clock) { clock_ = std::move(clock); }
  // When poll must next run even if no packet arrives (a reassembly timeout,
  // a TCP timer).
  std::optional<Instant> poll_at() const;

  // Ping: sends an ICMP echo request; replies queue up for take_echo_reply.
  std::error_code send_echo_request(wire::Ipv4Address to, std::uint16_t identifier, std::uint16_t sequence,
                                    std::span<const std::uint8_t> data);
  std::optional<EchoReply> take_echo_reply();

  StackCounters counters() const;

  void set_waiter(Waiter* waiter) { waiter_ = waiter; }
  Waiter* waiter() const { return waiter_; }

 private:
  friend class UdpSocket;
  friend class TcpSocket;
  friend class TcpListener;
  friend Result<std::size_t> poll(Stack& stack, std::span<PollEntry> entries,
                                  std::optional<std::chrono::milliseconds> timeout);
  struct QueuedDatagram {
    Endpoint from;
    std::vector<std::uint8_t> payload;
  };
  struct UdpSocketState {
    std::uint16_t local_port = 0;  // 0: not bound
    std::optional<Endpoint> remote;
    std::deque<QueuedDatagram> queue;
    std::size_t queued_bytes = 0;
    std::size_t queue_datagrams_limit;
    std::size_t queue_bytes_limit;
    std::uint64_t drops = 0;
    std::error_code pending_error;  // from an ICMP error, reported once by the next call
    bool nonblocking = false;
    bool reuse_address = false;  // SO_REUSEADDR: may share its port with sockets that allow it too
    std::optional<std::chrono::milliseconds> receive_timeout;
  };
  using SocketId = std::uint32_t;  // UDP sockets, TCP sockets and listeners share the numbering

  // A TCP connection is known by its local port and its peer (the local
  // address is always ours).
  struct TcpQuad {
    std::uint16_t local_port = 0;
    Endpoint remote;
    friend bool operator==(const TcpQuad&, const TcpQuad&) = default;
  };
  struct TcpQuadHash {
    std::size_t operator()(const TcpQuad& quad) const;
  };
  struct TcpConnectionEntry {
    std::unique_ptr<TcpConnection> connection;
    // A socket or a listener's queue holds it; once neither does, the stack
    // forgets it when it is finished (after its FIN handshake, TIME-WAIT).
    bool held = true;
    // The listener whose half-open list holds it, until ESTABLISHED; 0: none.
    std::uint32_t half_open_of = 0;
  };
  struct TcpSocketState {
    std::uint16_t local_port = 0;  // 0: not bound
    bool owns_port = false;        // bound or connected itself (an accepted socket shares its listener's port)
    std::optional<TcpQuad> connection;
    TcpConfig config;
    bool nonblocking = false;
    bool write_shut = false;
    bool read_shut = false;
    bool error_reported = false;  // the connection's error was returned once (SO_ERROR is then clear)
    std::optional<std::chrono::milliseconds> receive_timeout;
    std::optional<std::chrono::milliseconds> send_timeout;
    CongestionTrace congestion_trace;  // given to the connection when it is made
  };
  struct TcpListenerState {
    std::uint16_t local_port = 0;  // 0: not listening
    std::size_t backlog = 0;
    // Connections that reached ESTABLISHED, not yet accepted, oldest first:
    // the backlog bounds them (a SYN finding it full is dropped).
    std::deque<TcpQuad> queue;
    // Connections in SYN-RECEIVED, oldest first, bounded apart from the
    // backlog (StackConfig::tcp_max_half_open): a SYN finding it full evicts
    // the oldest, so that spoofed SYNs cannot hold the port.
    std::deque<TcpQuad> half_open;
    TcpConfig config;
    bool nonblocking = false;
    std::optional<std::chrono::milliseconds> accept_timeout;
  };

  // A blocking call's wait: {} once ready() holds; EAGAIN at once when
  // non-blocking or without a waiter, or when the timeout passes.
  std::error_code wait_for(const std::function<bool()>& ready, bool nonblocking,
                           std::optional<std::chrono::milliseconds> timeout);
  // A free port of RFC 6335's dynamic range (49152-65535) that `taken` refuses not.
  std::optional<std::uint16_t> ephemeral_port(const std::function<bool(std::uint16_t)>& taken);

  // The state of socket `id` in one of the tables below; null if it is closed.
  template <typename Table>
  static auto* find_state(Table& table, SocketId id) {
    const auto it = table.find(id);
    return it == table.end() ? nullptr : &it->second;
  }

  // Socket calls, for UdpSocket.
  SocketId udp_open();
  void udp_close(SocketId id);
  UdpSocketState* udp_state(SocketId id);
  std::error_code udp_bind(UdpSocketState& socket, SocketId id, Endpoint local);
  // The socket on `port` a datagram from `from` goes to: one connected to
  // `from`, else the last bound of those connected to nobody.
  UdpSocketState* udp_receiver(std::uint16_t port, Endpoint from);
  std::error_code udp_send(UdpSocketState& socket, SocketId id, std::span<const std::uint8_t> data, Endpoint to);

  // Socket calls, for TcpSocket, TcpListener and poll.
  SocketId tcp_open(const TcpConfig& config);
  TcpSocketState* tcp_state(SocketId id);
  const TcpSocketState* tcp_state(SocketId id) const;
  TcpConnection* tcp_connection(const TcpSocketState& socket) const;
  // Binds port (0: an ephemeral one) to `owner`, a socket or a listener.
  std::error_code tcp_bind_port(SocketId owner, Endpoint local, std::uint16_t& port);
  std::error_code tcp_connect(TcpSocketState& socket, SocketId id, Endpoint remote);
  // The socket lets go of its connection (closing or aborting it first) and of its port.
  void tcp_release(SocketId id, bool abort);
  SocketId tcp_listener_open(const TcpConfig& config);
  TcpListenerState* tcp_listener_state(SocketId id);
  const TcpListenerState* tcp_listener_state(SocketId id) const;
  // The oldest connection of the queue that reached ESTABLISHED, if any.
  std::optional<TcpQuad> tcp_acceptable(const TcpListenerState& listener) const;
  void tcp_listener_close(SocketId id);
  static short tcp_poll_events(const TcpSocket& socket);

  // What a new connection is opened with: its configuration with the MSS
  // filled in, its initial sequence number, and how it sends.
  TcpConfig tcp_connection_config(TcpConfig config) const;
  wire::SeqNumber tcp_initial_sequence(const TcpQuad& quad) const;
  TcpConnection::Transmit tcp_transmitter(const TcpQuad& quad);
  // Emits a segment from our address to `to` and sends it: its headers
  // alone when the link gathers them with the payload where it lies (the
  // link's copy the only one), else built in the link's own send buffer when
  // the link lends one and it fits the MTU (no copy on the way out), else in
  // packet_.
  void tcp_send_segment(const wire::TcpHeader& header, std::span<const std::uint8_t> payload, wire::Ipv4Address to);
  // Sends the ACKs held through the link's batch, runs due connection
  // timers, forgets finished connections no one holds,
  // and drops listeners' queued connections that died before ESTABLISHED.
  std::size_t tcp_poll_timers();

  // Sends the transport bytes already written at packet[20] (packet_, or a
  // buffer the link lent) as one IPv4 datagram, fragmented to the link's MTU.
  std::error_code send_ip(std::uint8_t protocol, wire::Ipv4Address destination, std::size_t transport_length,
                          std::span<std::uint8_t> packet);
  std::error_code route(wire::Ipv4Address destination) const;
  bool transmit(wire::Ipv4Address next_hop, std::span<const std::uint8_t> packet);
  bool transmit_gathered(wire::Ipv4Address next_hop, std::span<const std::uint8_t> head,
                         std::span<const std::uint8_t> body);
  // The header of our next datagram to destination (its identification taken).
  wire::Ipv4Header ipv4_header_to(std::uint8_t protocol, wire::Ipv4Address destination);

  // A packet from the link, or (`looped_back`) one this stack sent itself.
  void input(std::span<const std::uint8_t> packet, Instant now, bool looped_back);
  void deliver(const wire::Ipv4Header& header, std::span<const std::uint8_t> payload);
  void input_icmp(const wire::Ipv4Header& header, std::span<const std::uint8_t> message);
  void input_udp(const wire::Ipv4Header& header, std::span<const std::uint8_t> datagram);
  void input_tcp(const wire::Ipv4Header& header, std::span<const std::uint8_t> segment);
  // A SYN (or anything) to a port with a listener and no connection.
  void input_tcp_listen(SocketId listener_id, TcpListenerState& listener, const TcpQuad& quad,
                        const wire::TcpSegment& segment);
  // A half-open connection reached ESTABLISHED: to its listener's accept queue.
  void tcp_promote_half_open(const TcpQuad& quad, TcpConnectionEntry& entry);
  void tcp_send_reset_for(const wire::TcpSegment& segment, wire::Ipv4Address to);
  // An ICMP error (destination unreachable, time exceeded) about a datagram
  // (or first fragment) we received, quoting its header and the start of
  // its payload, unless RFC 1122 §3.2.2 forbids an error about it.
  void send_icmp_error(const wire::IcmpHeader& message, const wire::Ipv4Header& header,
                       std::span<const std::uint8_t> payload);

  Link& link_;
  StackConfig config_;
  std::uint32_t netmask_;
  Reassembler reassembler_;
  StackCounters counters_;
  std::uint16_t next_identification_ = 0;
  std::vector<std::uint8_t> packet_;    // the datagram being sent, IPv4 header room first
  std::vector<std::uint8_t> fragment_;  // one fragment being sent
  std::deque<std::vector<std::uint8_t>> loopback_;  // packets to ourselves, taken in by poll
  std::deque<EchoReply> echo_replies_;
  std::unordered_map<SocketId, UdpSocketState> udp_sockets_;
  // Sockets sharing a port (SO_REUSEADDR) are listed in the order they bound it.
  std::unordered_map<std::uint16_t, std::vector<SocketId>> udp_ports_;
  SocketId next_socket_id_ = 1;
  TcpOutOfOrderBudget tcp_out_of_order_;  // before the connections, which give back to it
  std::unordered_map<TcpQuad, TcpConnectionEntry, TcpQuadHash> tcp_connections_;
  std::unordered_map<SocketId, TcpSocketState> tcp_sockets_;
  std::unordered_map<SocketId, TcpListenerState> tcp_listeners_;
  std::unordered_map<std::uint16_t, SocketId> tcp_ports_;  // the socket or listener bound to each port
  std::uint64_t tcp_secret_;
  static constexpr std::uint32_t kFirstDynamicPort = 49152, kDynamicPorts = 65536 - kFirstDynamicPort;  // RFC 6335
  std::uint16_t next_ephemeral_port_;
  // The time of what the stack does now: the clock's reading, if there is a
  // clock (never earlier than the last), else the last poll's time.
  Instant current_time();
  Instant now_{};  // the last time read, for the socket calls
  std::function<Instant()> clock_;
  bool tcp_batch_ = false;  // poll is taking a batch of packets from the link
  Waiter* waiter_ = nullptr;
};

}  // namespace utcp
