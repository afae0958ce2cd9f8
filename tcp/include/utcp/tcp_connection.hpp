// One TCP connection: RFC 9293's transmission control block and its state
// machine, with no I/O and no clock. Segments come in through on_segment,
// time through `now` on every call and on_timer; segments go out through the
// Transmit function given at construction. The stack (stack.hpp) owns the
// addresses, the checksum and the demultiplexing; the connection owns
// everything from the sequence numbers up: the handshake (simultaneous open
// included), the send and receive buffers, retransmission (RFC 6298, Karn's
// rule), fast retransmit and recovery (RFC 5681, RFC 6582; with SACK, RFC
// 2018 and RFC 6675) around a pluggable congestion controller
// (congestion.hpp), window scaling and timestamps (RFC 7323), Nagle and
// delayed ACK, zero-window probes, keepalive, the out-of-order queue,
// closing (simultaneous close included, TIME_WAIT) and resets (RFC 5961's
// checks).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "utcp/congestion.hpp"
#include "utcp/reassembly.hpp"  // Instant
#include "utcp/result.hpp"
#include "utcp/seq.hpp"
#include "utcp/tcp_header.hpp"

namespace utcp {

// RFC 9293 §3.3.2's states. LISTEN belongs to the stack's listeners: a
// connection starts in SYN-SENT (active open) or SYN-RECEIVED (a SYN taken
// by a listener) and ends in CLOSED.
enum class TcpState : std::uint8_t {
  closed,
  syn_sent,
  syn_received,
  established,
  fin_wait_1,
  fin_wait_2,
  close_wait,
  closing,
  last_ack,
  time_wait,
};
// "ESTABLISHED", "TIME-WAIT", ... as RFC 9293 spells them.
std::string_view to_string(TcpState state);

struct TcpConfig {
  // The largest segment we take, announced in our SYN. 0: the stack fills it
  // in from the link's MTU less 40 bytes of headers, which also caps it. The
  // MSS used (the smaller of both sides') is at least 48 bytes, as Linux's:
  // a peer announcing less is held to 48.
  std::uint16_t max_segment_size = 0;
  std::size_t send_buffer = 1u << 20;
  // Also the largest window offered; the window scale is the smallest that
  // covers it (RFC 7323 §2.2).
  std::size_t receive_buffer = 1u << 20;
  bool window_scaling = true;  // RFC 7323: offered on our SYN, used if both sides do
  bool timestamps = true;      // RFC 7323: TSopt, for RTTM and PAWS
  // RFC 2018: SACK-permitted offered on our SYN; if both sides do, ACKs
  // report out-of-order data in SACK blocks and loss recovery follows them
  // (RFC 6675) instead of NewReno's one hole per round trip.
  bool sack = true;
  bool nodelay = false;        // true: Nagle's algorithm off (TCP_NODELAY)
  bool delayed_ack = true;     // false: every segment acknowledged at once
  std::chrono::milliseconds delayed_ack_timeout{40};  // RFC 9293 §3.8.6.3: < 0.5 s
  // RFC 6298: the initial RTO is 1 s; its minimum is 1 s there, 200 ms in
  // Linux, which we follow (a user-level LAN stack). The maximum bounds one
  // RTO however far it backed off: RFC 6298 allows 60 s and more, for paths
  // where a round trip may take seconds; on a LAN whose round trips take
  // milliseconds, 60 s only stalls a stream for a minute after a few losses
  // in a row (at 30 % loss, several times a megabyte). A dead peer is told
  // by the retries below, not by the length of one wait.
  std::chrono::milliseconds initial_rto{1000};
  std::chrono::milliseconds min_rto{200};
  std::chrono::milliseconds max_rto{4000};
  // Timeouts in a row with nothing at all from the peer before giving up with
  // ETIMEDOUT (RFC 9293 §3.8.3's R2), SYNs and data apart; a segment from the
  // peer starts the count again (unanswered retransmissions while it keeps
  // sending are loss, not death). With loss measured, more: enough that a
  // live peer would have answered one but for a chance of one in a million
  // (at most 64). 15 data retries with the RTOs above: ~47 s of silence.
  int syn_retries = 6;
  // SYN-ACK retransmissions of a passive open before it is dropped: with the
  // RTOs above a half-open connection lives ~11 s (15 s with a 60 s maximum
  // RTO), not the minutes a SYN flood could otherwise hold it.
  int synack_retries = 3;
  int data_retries = 15;
  std::chrono::milliseconds time_wait{60000};  // 2 MSL
  bool keepalive = false;                       // RFC 9293 §3.8.4, off by default
  std::chrono::milliseconds keepalive_idle{7200000};
  std::chrono::milliseconds keepalive_interval{75000};
  int keepalive_probes = 9;
  // Segments held ahead of RCV.NXT (their bytes are bounded by the window:
  // overlaps are trimmed). Past it, or past the stack's shared bound, the
  // segments furthest ahead are dropped first.
  std::size_t max_out_of_order_segments = 2048;
  // The congestion controller's registered name ("newreno", "cubic", "bbr", or one
  // a program registered); empty: VIASTACK_UTCP_CC, else "bbr" (as Linux
  // where it is the default; random loss does not cut its rate, where
  // CUBIC's collapses: benchmarks/impairment.sh at 5 % loss, issue 23).
  std::string congestion_control;
};

// What crossed the connection, for tests and diagnostics.
struct TcpCounters {
  std::uint64_t segments_in = 0;
  std::uint64_t segments_out = 0;
  std::uint64_t bytes_in = 0;               // payload delivered in order
  std::uint64_t bytes_in_directly = 0;      // of those, copied straight into a waiting reader's buffer
  std::uint64_t bytes_out = 0;              // payload sent for the first time
  std::uint64_t retransmitted_segments = 0;
  std::uint64_t timeouts = 0;               // retransmission timer expiries
  std::uint64_t fast_retransmits = 0;       // on the third duplicate ACK (or SACK's loss detection)
  std::uint64_t reductions_undone = 0;      // recoveries and timeouts found spurious (D-SACK, timestamps) and undone
  std::uint64_t duplicate_acks_in = 0;
  std::uint64_t out_of_order_segments = 0;  // queued ahead of RCV.NXT
  std::uint64_t out_of_order_dropped = 0;   // segments not held (or dropped) to stay within the bounds
  std::uint64_t outside_window = 0;         // unacceptable segments (§3.10.7.4), answered with an ACK
  std::uint64_t paws_rejected = 0;          // RFC 7323 §5
  std::uint64_t challenge_acks = 0;         // RFC 5961
  std::uint64_t resets_in = 0;              // resets accepted
  std::uint64_t resets_out = 0;
  std::uint64_t zero_window_probes = 0;
  std::uint64_t keepalive_probes = 0;
  std::uint64_t urgent_in = 0;              // urgent pointers that advanced past what was read
};

// The state of the sender and receiver, as Linux's tcp_info shows it.
struct TcpInfo {
  TcpState state = TcpState::closed;
  wire::SeqNumber send_unacknowledged;  // SND.UNA
  wire::SeqNumber send_next;            // SND.NXT
  std::uint32_t send_window = 0;        // SND.WND, scaled
  wire::SeqNumber receive_next;         // RCV.NXT
  std::uint32_t receive_window = 0;     // RCV.WND as last advertised, scaled
  std::uint16_t max_segment_size = 0;   // the effective send MSS
  std::uint8_t send_window_scale = 0;   // 0 without window scaling
  std::uint8_t receive_window_scale = 0;
  bool timestamps = false;              // negotiated
  bool sack = false;                    // negotiated
  std::string congestion_control;       // the controller's name
  std::uint32_t congestion_window = 0;  // bytes (inflated during fast recovery)
  std::uint32_t slow_start_threshold = 0;
  CongestionPhase congestion_phase = CongestionPhase::slow_start;
  bool in_recovery = false;             // fast recovery
  std::uint64_t pacing_rate = 0;        // bytes per second the segments are spaced at; 0: not paced
  std::chrono::microseconds smoothed_rtt{0};  // 0 before the first sample
  std::chrono::microseconds rtt_variance{0};
  std::chrono::milliseconds rto{0};
  std::size_t bytes_unsent = 0;         // in the send buffer, not yet sent
  std::size_t bytes_in_flight = 0;      // sent, not acknowledged
  std::size_t bytes_readable = 0;       // in order, not yet read
  // Urgent data (RFC 9293 §3.8.5): how many of the bytes from the next one
  // read (received or still to come) lead up to the peer's urgent pointer;
  // 0 when none is pending. The urgent bytes stay in the stream (RFC 6093).
  std::size_t urgent_bytes = 0;
  std::size_t out_of_order_bytes = 0;   // held ahead of RCV.NXT
  std::size_t out_of_order_segments = 0;
};

// What the out-of-order queues of all connections of a stack may hold
// together, and hold now. The stack owns it; each connection takes from it
// and gives back (it must outlive them).
struct TcpOutOfOrderBudget {
  std::size_t max_bytes = 0;
  std::size_t max_segments = 0;
  std::size_t bytes = 0;
  std::size_t segments = 0;
};

class TcpConnection {
 public:
  struct Ports {
    std::uint16_t local = 0;
    std::uint16_t remote = 0;
  };
  // Sends one segment; the stack adds the IP addresses and the checksum. The
  // payload is valid only during the call.
  using Transmit = std::function<void(const wire::TcpHeader& header, std::span<const std::uint8_t> payload)>;

  // Active open: sends a SYN with initial sequence number iss; SYN-SENT.
  // out_of_order_budget, if any, bounds the out-of-order data together with
  // other connections'. Null (nothing sent) when config.congestion_control
  // names no registered controller.
  static std::unique_ptr<TcpConnection> connect(Ports ports, const TcpConfig& config, wire::SeqNumber iss, Instant now,
                                                Transmit transmit, TcpOutOfOrderBudget* out_of_order_budget = nullptr);
  // Passive open, for a listener given `syn` (SYN set; ACK and RST clear;
  // already checked by the stack): answers SYN-ACK; SYN-RECEIVED. Null as
  // for connect.
  static std::unique_ptr<TcpConnection> accept(Ports ports, const TcpConfig& config, const wire::TcpSegment& syn,
                                               wire::SeqNumber iss, Instant now, Transmit transmit,
                                               TcpOutOfOrderBudget* out_of_order_budget = nullptr);

  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;
  ~TcpConnection();

  // A segment for this connection (ports and checksum already checked),
  // processed as RFC 9293 §3.10.7 says; the payload is read during the call.
  // in_batch: more segments read from the link at once may follow; an ACK
  // that may wait for them is held until flush_held_ack (duplicate ACKs a
  // sender counts go at once).
  void on_segment(const wire::TcpSegment& segment, Instant now, bool in_batch = false);
  // Sends the ACK held while a batch came in, if there is one.
  void flush_held_ack(Instant now);
  // An ICMP destination unreachable about a segment we sent, whose quoted
  // header carries `quoted_sequence`: taken only if that is in flight,
  // SND.UNA <= SEG.SEQ < SND.NXT (RFC 5927 §4.1; returns whether it was).
  // In SYN-SENT a port or protocol unreachable ends the connection with
  // ECONNREFUSED; otherwise it is a soft error (RFC 5461), kept for a later
  // timeout.
  bool on_icmp_unreachable(std::uint8_t code, wire::SeqNumber quoted_sequence, Instant now);
  // Runs whatever timer is due: retransmission, delayed ACK, zero-window
  // probe, keepalive, TIME-WAIT, and pacing's next segment.
  void on_timer(Instant now);
  // When on_timer must next run; none when no timer is set.
  std::optional<Instant> next_timer() const;

  // Copies as much of data as the send buffer has room for and sends what
  // the windows, Nagle and the state allow. Returns the bytes taken (0 when
  // the buffer is full). Allowed in SYN-SENT and SYN-RECEIVED (queued until
  // established), ESTABLISHED and CLOSE-WAIT. EPIPE after shutdown_write or
  // close; the connection's error (ECONNRESET, ETIMEDOUT, ECONNREFUSED) once
  // it has one.
  Result<std::size_t> send(std::span<const std::uint8_t> data, Instant now);
  // Copies in-order bytes into buffer and opens the window (a window update
  // when it has grown by two segments or half the buffer, RFC 9293
  // §3.8.6.2.2). Returns the bytes copied; 0 at the end of the stream (the
  // peer's FIN reached and everything before it read); EAGAIN when nothing
  // is there yet; the connection's error if it has one and nothing is left.
  Result<std::size_t> receive(std::span<std::uint8_t> buffer, Instant now);

  // A reader about to wait lends its buffer: in-order data that arrives
  // while the receive buffer is empty is copied straight into it, up to its
  // size (readable() then holds), instead of into the receive buffer and
  // out again. take_read_buffer() ends the loan and returns how many bytes
  // the buffer got; the reader reads what followed with receive(). The
  // buffer must stay valid until then.
  void lend_read_buffer(std::span<std::uint8_t> buffer);
  std::size_t take_read_buffer();

  // Sends a FIN after the data already queued (SHUT_WR).
  void shutdown_write(Instant now);
  // The application is done with the connection: as shutdown_write, except
  // that unread received data (or data arriving later) makes it a reset, as
  // Linux does (RFC 9293 §3.6.1 allows either).
  void close(Instant now);
  // Sends a RST (unless in SYN-SENT or already CLOSED); CLOSED at once.
  void abort(Instant now);

  void set_nodelay(bool nodelay, Instant now);
  void set_keepalive(bool enabled, Instant now);
  // Reports cwnd, ssthresh and the phase: at once if established, then at
  // each change (see CongestionTrace). An empty function stops it.
  void set_congestion_trace(CongestionTrace trace);

  TcpState state() const;
  // Why the connection ended abnormally: ECONNREFUSED (RST in SYN-SENT or
  // ICMP), ECONNRESET, ETIMEDOUT; empty otherwise.
  std::error_code error() const;
  // Whether the stack may forget it: CLOSED (after TIME-WAIT, a reset, a
  // timeout, or LAST-ACK acknowledged).
  bool finished() const { return state() == TcpState::closed; }
  // ESTABLISHED was reached at some point (for accept and connect).
  bool was_established() const;
  // receive() would not say EAGAIN: bytes, the end of the stream, or an error.
  bool readable() const;
  // TcpInfo::urgent_bytes without the rest of info().
  std::size_t urgent_bytes() const;
  // Room in the send buffer, 0 once sending is over.
  std::size_t send_space() const;
  // Bytes in the send buffer wait for the windows (or Nagle) to go.
  bool has_unsent() const;
  // Everything sent has been acknowledged (and the buffer is empty).
  bool all_acknowledged() const;

  Ports ports() const;
  TcpInfo info() const;
  const TcpCounters& counters() const;

 private:
  struct Impl;
  explicit TcpConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The reset RFC 9293 §3.10.7.1 sends for a segment that reaches no
// connection (or a listener, for an ACK): none for a RST; otherwise
// <SEQ=SEG.ACK><CTL=RST> if the segment has ACK, else
// <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. Ports swapped.
std::optional<wire::TcpHeader> reset_for(const wire::TcpSegment& segment);

// RFC 9293 §3.4.1/RFC 6528: ISN = M + F(local, remote, secret), M a 4 µs
// clock. The stack passes its secret and the quad as bytes.
wire::SeqNumber initial_sequence_number(std::span<const std::uint8_t> connection_id, std::uint64_t secret, Instant now);

}  // namespace utcp
