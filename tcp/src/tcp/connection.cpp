// RFC 9293's transmission control block and its event processing (§3.10),
// with no I/O: segments arrive through on_segment, leave through the
// Transmit function, and time comes only from the `now` of each call.
//
// Sequence variables follow RFC 9293 §3.3.1, with one addition: SND.MAX,
// the highest sequence number ever sent. After a retransmission timeout
// SND.NXT goes back to SND.UNA and the data is sent again in slow start
// (RFC 5681 §3.1, "go back N"), so SND.NXT alone no longer says what the
// peer may acknowledge.
#include "utcp/tcp_connection.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include <via/copy.hpp>

#include "tcp/byte_ring.hpp"
#include "utcp/delivery_rate.hpp"
#include "tcp/loss_recovery.hpp"
#include "tcp/out_of_order_queue.hpp"
#include "tcp/rack.hpp"
#include "tcp/rtt_estimator.hpp"

namespace utcp {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using wire::SeqNumber;
using wire::TcpHeader;
using wire::TcpSegment;
namespace flag = wire::tcp_flags;

constexpr std::uint16_t default_max_segment_size = 536;  // RFC 9293 §3.7.1, when the peer sends none
// The floor of the MSS, the peer's and ours, as Linux's TCP_MIN_SND_MSS: an
// MSS of 0 (or 12 with timestamps) left no room for data and stalled the
// connection for ever, 0-11 with timestamps made the payload per segment
// wrap, and 1 made 1-byte segments (CVE-2019-11479's amplification).
constexpr std::uint16_t min_max_segment_size = 48;
constexpr std::uint8_t max_window_scale = 14;            // RFC 7323 §2.3
constexpr std::uint32_t max_window_field = 65535;
constexpr std::uint32_t timestamp_option_bytes = 12;     // 10, padded with two no-operations

std::error_code error_of(std::errc value) { return std::make_error_code(value); }

// The sequence space a segment occupies: its data, plus one each for SYN and FIN.
std::uint32_t sequence_length(const TcpSegment& segment) {
  return static_cast<std::uint32_t>(segment.payload.size()) + (segment.header.has(flag::syn) ? 1 : 0) +
         (segment.header.has(flag::fin) ? 1 : 0);
}

// The smallest shift that lets the 16-bit window field cover the buffer (RFC 7323 §2.2).
std::uint8_t window_scale_for(std::size_t buffer) {
  std::uint8_t shift = 0;
  while (shift < max_window_scale && (std::size_t{max_window_field} << shift) < buffer) ++shift;
  return shift;
}

// SipHash-2-4 (Aumasson and Bernstein), the keyed hash RFC 6528 asks for as F.
std::uint64_t siphash_2_4(std::uint64_t key0, std::uint64_t key1, std::span<const std::uint8_t> data) {
  auto rotate = [](std::uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); };
  std::uint64_t v0 = key0 ^ 0x736f6d6570736575ull;
  std::uint64_t v1 = key1 ^ 0x646f72616e646f6dull;
  std::uint64_t v2 = key0 ^ 0x6c7967656e657261ull;
  std::uint64_t v3 = key1 ^ 0x7465646279746573ull;
  auto round = [&] {
    v0 += v1; v1 = rotate(v1, 13); v1 ^= v0; v0 = rotate(v0, 32);
    v2 += v3; v3 = rotate(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotate(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotate(v1, 17); v1 ^= v2; v2 = rotate(v2, 32);
  };
  auto absorb = [&](std::uint64_t word) {
    v3 ^= word;
    round();
    round();
    v0 ^= word;
  };
  const std::size_t whole = data.size() / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8) {
    std::uint64_t word = 0;
    for (int b = 0; b < 8; ++b) word |= std::uint64_t{data[i + b]} << (8 * b);
    absorb(word);
  }
  std::uint64_t last = std::uint64_t{data.size() & 0xff} << 56;
  for (std::size_t i = whole; i < data.size(); ++i) last |= std::uint64_t{data[i]} << (8 * (i - whole));
  absorb(last);
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace

std::string_view to_string(TcpState state) {
  switch (state) {
    case TcpState::closed: return "CLOSED";
    case TcpState::syn_sent: return "SYN-SENT";
    case TcpState::syn_received: return "SYN-RECEIVED";
    case TcpState::established: return "ESTABLISHED";
    case TcpState::fin_wait_1: return "FIN-WAIT-1";
    case TcpState::fin_wait_2: return "FIN-WAIT-2";
    case TcpState::close_wait: return "CLOSE-WAIT";
    case TcpState::closing: return "CLOSING";
    case TcpState::last_ack: return "LAST-ACK";
    case TcpState::time_wait: return "TIME-WAIT";
  }
  return "?";
}

struct TcpConnection::Impl {
  Impl(Ports ports_, const TcpConfig& config_, SeqNumber iss_, Instant now_, Transmit transmit_, TcpState state_,
       TcpOutOfOrderBudget* out_of_order_budget, std::unique_ptr<CongestionController> controller);

  // --- Events ---
  void on_segment(const TcpSegment& segment);
  void on_segment_in_syn_sent(const TcpSegment& segment);
  // window_unscaled: the segment is a SYN-ACK with its SYN taken off, whose
  // window is never scaled (RFC 7323 §2.2).
  void on_segment_synchronized(const TcpSegment& segment, bool window_unscaled = false);
  void on_timer();
  void on_retransmission_timeout();
  void on_reorder_timeout();
  void on_probe_timeout();
  int retries_to_give_up() const;
  void on_persist_timeout();
  void on_keepalive_timeout();

  // --- Receiving ---
  void take_peer_syn(const TcpHeader& syn);
  bool paws_rejects(const TcpSegment& segment) const;
  bool is_harmless_duplicate_ack(const TcpSegment& segment) const;
  bool overtaken(const TcpHeader& header) const;
  struct InWindow {
    SeqNumber sequence;
    std::span<const std::uint8_t> payload;
    bool fin;
  };
  std::optional<InWindow> trim_to_window(const TcpSegment& segment) const;
  void on_acceptable_reset(const TcpHeader& header);
  bool process_acknowledgment(const TcpSegment& segment, bool window_unscaled = false);
  void measure_echoed_timestamp(const TcpHeader& header);
  void add_rtt_sample(microseconds sample);
  void on_new_acknowledgment(SeqNumber ack, std::optional<std::uint32_t> echoed);
  // The TSecr of `header`, when timestamps are in use and it carries them.
  std::optional<std::uint32_t> echo_of(const TcpHeader& header) const {
    if (!timestamps || !header.options.timestamps) return std::nullopt;
    return header.options.timestamps->echo_reply;
  }
  void on_duplicate_ack();
  void take_sack_blocks(const TcpHeader& header, SeqNumber prior_unacknowledged);
  bool is_duplicate_report(std::span<const wire::SackBlock> blocks) const;
  void note_duplicate(const TcpSegment& segment);
  void note_duplicate_held(const InWindow& part);
  void detect_lost_segments();
  void start_fast_retransmit();
  void trace_congestion();
  void report_delivery(std::uint64_t segments_marked_lost_before);
  void receive_data(const InWindow& part);
  void deliver_in_order(std::span<const std::uint8_t> bytes, bool fin);
  void on_fin_received();
  void send_window_update_if_grown();

  // --- Sending ---
  void transmit_pending();
  bool worth_sending(std::uint32_t length, std::uint32_t unsent) const;
  std::uint32_t transmit_at(SeqNumber sequence, std::uint32_t length);
  std::uint32_t retransmit_first_unacknowledged();
  void transmit_in_sack_recovery();
  bool held_by_pacing();
  void account_paced(std::uint32_t bytes);
  void check_app_limited();
  std::uint32_t retransmit_range(SeqNumber start, std::uint32_t length);
  void add_sack_blocks(wire::TcpOptions& options) const;
  void remember_out_of_order(SeqNumber sequence);
  std::uint32_t sack_option_bytes() const;
  void update_probe_timer(bool restart);
  void emit(SeqNumber sequence, std::uint8_t flags, std::span<const std::uint8_t> payload);
  std::uint16_t advertise_window();
  // At SND.MAX, not SND.NXT: after a timeout SND.NXT went back, and a pure
  // ACK numbered below what the peer already took would be unacceptable to
  // it and dropped, ACK field and all (as BSD's tcp_output reasons).
  void send_ack() { emit(send_max, flag::ack, {}); }
  void send_challenge_ack();
  void send_reset(SeqNumber sequence, bool with_ack);
  // An ACK with an old sequence number, which the peer must answer with an
  // ACK of its own: zero-window probes (as Linux sends them) and keepalives.
  void send_probe() { emit(send_unacknowledged - 1, flag::ack, {}); }

  // --- State changes ---
  void become_established();
  void shutdown_write();
  void enter_time_wait();
  void release_buffers();
  void time_out_orphan();
  void enter_closed(std::error_code why);
  void update_persist_timer();

  // --- Derived quantities ---
  bool synchronized() const { return state != TcpState::syn_sent && state != TcpState::syn_received; }
  bool may_send_data() const {
    return state == TcpState::established || state == TcpState::close_wait || state == TcpState::fin_wait_1 ||
           state == TcpState::closing || state == TcpState::last_ack;
  }
  // send() takes data: before the FIN, in a state that will send it.
  bool accepts_writes() const {
    const bool open = state == TcpState::syn_sent || state == TcpState::syn_received ||
                      state == TcpState::established || state == TcpState::close_wait;
    return open && !fin_queued;
  }
  bool accepts_data() const {
    return state == TcpState::established || state == TcpState::fin_wait_1 || state == TcpState::fin_wait_2;
  }
  SeqNumber data_end() const { return send_buffer_start + static_cast<std::uint32_t>(send_buffer.size()); }
  SeqNumber fin_sequence() const { return data_end(); }  // meaningful once fin_queued
  bool fin_acknowledged() const { return fin_queued && send_unacknowledged > fin_sequence(); }
  std::uint32_t unsent_bytes() const { return data_end() > send_next ? data_end() - send_next : 0; }
  // The FIN is next to go: all data has gone, it has not (or goes again).
  bool fin_unsent() const { return fin_queued && send_next == fin_sequence(); }
  std::uint32_t bytes_in_flight() const { return send_next - send_unacknowledged; }
  // After a timeout, sending again what SND.NXT went back over (only then is it below SND.MAX).
  bool going_back_n() const { return congestion.phase() == CongestionPhase::timeout_recovery && send_next < send_max; }
  std::uint32_t usable_window() const;
  std::uint32_t congestion_room() const;
  std::uint32_t receive_window() const { return std::max(0, receive_advertised_edge - receive_next); }
  // The payload of a full segment: the MSS less the options every segment carries (RFC 9293 §3.7.1).
  std::uint32_t max_payload() const { return max_segment_size - (timestamps ? timestamp_option_bytes : 0); }
  std::uint32_t timestamp_now() const {
    return static_cast<std::uint32_t>(duration_cast<milliseconds>(now.time_since_epoch()).count()) + timestamp_offset;
  }
  std::optional<Instant> keepalive_deadline() const;
  std::chrono::milliseconds persist_interval() const {
    return std::min(rtt.rto() * (1 << std::min(persist_backoff, 16)), config.max_rto);
  }

  Ports ports;
  TcpConfig config;
  Transmit transmit;
  Instant now;
  TcpState state;
  std::error_code error;
  std::error_code soft_error;  // from ICMP, reported if the connection later times out (RFC 5461)
  bool established_once = false;
  bool application_closed = false;  // close(): unread or later data makes it a reset
  TcpCounters counters;

  // Send sequence space (RFC 9293 §3.3.1).
  SeqNumber iss;
  SeqNumber send_unacknowledged;  // SND.UNA
  SeqNumber send_next;            // SND.NXT
  SeqNumber send_max;             // highest sent, see the top of the file
  std::uint32_t send_window = 0;  // SND.WND, scaled
  std::uint32_t max_send_window = 0;  // the largest the peer offered: RFC 5961 §5.2, sender SWS avoidance
  SeqNumber send_wl1;
  SeqNumber send_wl2;
  tcp::ByteRing send_buffer;
  SeqNumber send_buffer_start;  // the sequence number of send_buffer's first byte
  bool fin_queued = false;
  SeqNumber short_segment_end;  // the end of the last segment shorter than the MSS, for Nagle

  // Receive sequence space.
  SeqNumber irs;
  SeqNumber receive_next;            // RCV.NXT
  SeqNumber receive_advertised_edge;  // RCV.NXT + RCV.WND as last advertised; never moves left
  tcp::ByteRing receive_buffer;
  // A blocked reader's buffer (lend_read_buffer): in-order data that finds
  // the receive buffer empty goes straight into it, one copy less.
  std::span<std::uint8_t> read_loan;
  std::size_t read_loan_filled = 0;
  tcp::OutOfOrderQueue out_of_order;
  // Where the latest out-of-order segments began, newest first: the SACK
  // blocks we send report the data around them (RFC 2018 §4).
  std::vector<SeqNumber> recent_out_of_order;
  // Data that arrived again, for the first block of the next ACK (D-SACK,
  // RFC 2883), reported once.
  std::optional<wire::SackBlock> duplicate_to_report;
  bool fin_received = false;
  // RCV.UP: where the urgent data the peer signalled ends (RFC 9293 §3.8.5;
  // the pointer points past the last urgent byte, RFC 6093). The data stays
  // in the stream; urgent_bytes() tells the application how much of what it
  // reads next leads up to it.
  std::optional<SeqNumber> receive_urgent;
  // Where the next byte the application reads sits in the sequence space.
  SeqNumber read_position() const {
    return receive_next - static_cast<std::uint32_t>(receive_buffer.size()) - (fin_received ? 1u : 0u);
  }
  std::uint32_t urgent_bytes() const {
    return receive_urgent && read_position() < *receive_urgent ? *receive_urgent - read_position() : 0;
  }
  void take_urgent_pointer(const TcpHeader& header);
  // Once read past, RCV.UP is forgotten: kept, it would read as ahead again
  // 2 GiB later (sequence numbers compare modulo 2^32).
  void forget_urgent_read() {
    if (receive_urgent && *receive_urgent <= read_position()) receive_urgent.reset();
  }

  // Options negotiated on the SYNs.
  std::uint16_t local_max_segment_size;
  std::uint16_t max_segment_size = default_max_segment_size;  // min(the peer's, ours)
  bool window_scaling = false;
  std::uint8_t offered_window_scale;
  std::uint8_t send_window_scale = 0;
  std::uint8_t receive_window_scale = 0;
  bool timestamps = false;
  bool sack = false;
  std::uint32_t timestamp_offset;  // RFC 7323 §5.4: a per-connection offset (the ISS, already unpredictable)
  std::uint32_t timestamp_recent = 0;  // TS.Recent
  SeqNumber last_ack_sent;

  // Retransmission (RFC 6298) and congestion control.
  tcp::RttEstimator rtt;
  std::optional<Instant> retransmission_deadline;
  int retries = 0;  // timeouts since the peer was last heard from
  std::uint64_t sent_when_heard = 0, retransmitted_when_heard = 0;  // the counters then
  // The one segment being timed (Karn): the ACK that covers timed_ack gives a
  // sample; any retransmission cancels it.
  std::optional<SeqNumber> timed_ack;
  Instant timed_since;
  std::optional<std::uint32_t> last_retransmission_timestamp;  // its TSval: echoes of it or later time a round trip
  std::optional<microseconds> rtt_sample;  // taken by the segment being processed, for the congestion controller
  tcp::LossRecovery congestion;
  // With SACK: what is outstanding, SACKed and lost (RACK, RFC 8985), the
  // reordering timer that tells loss from reordering, and the tail loss
  // probe's timer, with whether its probe is out (one per tail).
  tcp::Rack rack;
  std::optional<Instant> reorder_deadline;
  std::optional<Instant> probe_deadline;
  bool probe_outstanding = false;
  CongestionTrace congestion_trace;
  std::optional<CongestionSample> last_traced;
  // What each ACK delivered and how fast (for a controller that models the
  // path); and pacing, when the controller asks for it: segments go no
  // earlier than next_send_time, the timer below sends the next.
  DeliveryRateSampler delivery;
  Instant next_send_time{};
  std::optional<Instant> pacing_deadline;

  // Acknowledgments.
  bool ack_now = false;                       // an ACK is due before on_segment returns
  // A segment that came in a batch from the link (on_segment's in_batch)
  // may leave its ACK held until flush_held_ack, to share one with the
  // batch's later segments, unless the ACK is urgent: a duplicate ACK the
  // sender counts, a FIN's, a cut segment's.
  bool in_batch = false;
  bool ack_urgent = false;
  bool ack_held = false;
  std::uint32_t acks_coalesced = 0;           // ACKs due and held since the last one sent
  SeqNumber duplicate_acks_for;               // the RCV.NXT the duplicate ACKs below were for
  std::uint32_t duplicate_acks_at_once = 0;   // sent unheld for that RCV.NXT
  std::uint32_t bytes_unacknowledged = 0;     // received since our last ACK
  std::optional<Instant> delayed_ack_deadline;

  // The other timers.
  std::optional<Instant> persist_deadline;
  int persist_backoff = 0;
  // When an ending connection closes by itself: the end of TIME-WAIT, or of
  // an orphaned FIN-WAIT-2 (closed by the application, the peer silent:
  // Linux's tcp_fin_timeout, here the same 2 MSL).
  std::optional<Instant> closes_at;
  Instant heard_since;  // the last acceptable segment, for keepalive
  // When an ACK last answered a pure ACK that PAWS dropped.
  std::optional<Instant> last_invalid_reply;
  static constexpr milliseconds invalid_reply_interval{500};  // Linux's tcp_invalid_ratelimit
  int keepalive_probes_unanswered = 0;
  // The buffers shrink when idle: a buffer emptied while it holds storage
  // gives it back if it is still empty a second later. A quiet connection
  // does not keep a burst's megabytes; a busy one, whose buffers empty and
  // fill all the time, reallocates at most once a second.
  std::optional<Instant> idle_buffers_deadline;
  static constexpr milliseconds idle_buffers_delay{1000};
  void note_emptied_buffers() {
    const auto emptied = [](const tcp::ByteRing& ring) { return ring.empty() && ring.allocated() > 0; };
    if (!idle_buffers_deadline && (emptied(send_buffer) || emptied(receive_buffer)))
      idle_buffers_deadline = now + idle_buffers_delay;
  }

  std::vector<std::uint8_t> segment_scratch;  // a segment's payload that wraps around the ring's end
};

TcpConnection::Impl::Impl(Ports ports_, const TcpConfig& config_, SeqNumber iss_, Instant now_, Transmit transmit_,
                          TcpState state_, TcpOutOfOrderBudget* out_of_order_budget,
                          std::unique_ptr<CongestionController> controller)
    : ports(ports_),
      config(config_),
      transmit(std::move(transmit_)),
      now(now_),
      state(state_),
      iss(iss_),
      send_unacknowledged(iss_),
      send_next(iss_),
      send_max(iss_),
      send_buffer(config_.send_buffer),
      send_buffer_start(iss_ + 1),
      short_segment_end(iss_),
      receive_buffer(config_.receive_buffer),
      out_of_order(config_.max_out_of_order_segments, out_of_order_budget),
      local_max_segment_size(std::max(config_.max_segment_size != 0 ? config_.max_segment_size : default_max_segment_size,
                                      min_max_segment_size)),
      offered_window_scale(window_scale_for(config_.receive_buffer)),
      timestamp_offset(iss_.value()),
      rtt(config_.initial_rto, config_.min_rto, config_.max_rto),
      congestion(std::move(controller)),
      heard_since(now_) {}

// ============================================================================
// Events
// ============================================================================

void TcpConnection::Impl::on_segment(const TcpSegment& segment) {
  ++counters.segments_in;
  ack_urgent = false;
  switch (state) {
    case TcpState::closed:
      return;
    case TcpState::syn_sent:
      on_segment_in_syn_sent(segment);
      break;
    default:
      on_segment_synchronized(segment);
      break;
  }
  if (state == TcpState::closed) return;
  transmit_pending();
  if (!ack_now) return;
  // As Linux's SACK compression (tcp_comp_sack_nr) and GRO: at most 44 held
  // in a row, so that a long batch is no single stretch ACK.
  constexpr std::uint32_t max_coalesced_acks = 44;
  if (in_batch && !ack_urgent && ++acks_coalesced < max_coalesced_acks)
    ack_held = true;
  else
    send_ack();
}

// RFC 9293 §3.10.7.3.
void TcpConnection::Impl::on_segment_in_syn_sent(const TcpSegment& segment) {
  const TcpHeader& header = segment.header;
  const bool has_ack = header.has(flag::ack);
  const bool ack_acceptable = has_ack && iss < header.acknowledgment && header.acknowledgment <= send_max;
  if (has_ack && !ack_acceptable) {
    if (!header.has(flag::rst)) send_reset(header.acknowledgment, false);
    return;
  }
  if (header.has(flag::rst)) {
    if (ack_acceptable) {
      ++counters.resets_in;
      enter_closed(error_of(std::errc::connection_refused));
    }
    return;
  }
  if (!header.has(flag::syn)) return;
  // Data on a SYN is not taken: the peer will send it again once established.
  take_peer_syn(header);
  if (ack_acceptable) {
    become_established();
    on_new_acknowledgment(header.acknowledgment, echo_of(header));
    ack_now = true;
    ack_urgent = true;
  } else {
    // Simultaneous open (§3.5, figure 8): our SYN goes again, now with an ACK.
    state = TcpState::syn_received;
    send_next = iss;
    retransmission_deadline.reset();
    timed_ack.reset();
  }
}

// RFC 9293 §3.10.7.4, for every state from SYN-RECEIVED on.
void TcpConnection::Impl::on_segment_synchronized(const TcpSegment& segment, bool window_unscaled) {
  const TcpHeader& header = segment.header;
  if (state == TcpState::syn_received && header.has(flag::syn) && header.sequence == irs) {
    if (!header.has(flag::ack)) {
      transmit_at(iss, 0);  // our SYN-ACK was lost: the peer sent its SYN again
      return;
    }
    // Simultaneous open (§3.5, figure 8): the peer's SYN-ACK repeats the SYN
    // taken already; what is new is its ACK (and any data behind the SYN).
    TcpSegment rest = segment;
    rest.header.flags &= static_cast<std::uint8_t>(~flag::syn);
    rest.header.sequence = irs + 1;
    on_segment_synchronized(rest, true);
    return;
  }
  // First: PAWS (RFC 7323 §5.3), then the sequence number.
  if (paws_rejects(segment)) {
    ++counters.paws_rejected;
    // Answered (RFC 7323 §5.3), but a segment that takes no sequence space
    // (a pure ACK) at most once per invalid_reply_interval, as Linux's
    // tcp_oow_rate_limited: on a path that reorders, most old ACKs arrive
    // overtaken, and one ACK each is an ACK for every ACK the peer sent.
    if (sequence_length(segment) > 0 || !last_invalid_reply || now - *last_invalid_reply >= invalid_reply_interval) {
      last_invalid_reply = now;
      send_ack();
    }
    return;
  }
  const std::optional<InWindow> part = trim_to_window(segment);
  if (!part) {
    if (header.has(flag::rst)) return;
    note_duplicate(segment);
    ++counters.outside_window;
    // A retransmitted FIN restarts TIME-WAIT's 2 MSL (§3.10.7.4, TIME-WAIT).
    if (state == TcpState::time_wait && header.has(flag::fin)) enter_time_wait();
    // The segment is dropped, "but special allowance should be made to
    // accept valid ACKs" (§3.10.7.4): with our window closed, a probe at
    // RCV.NXT still carries the peer's acknowledgement of our data; and a
    // segment whose data all arrived already (the peer resent it) may carry
    // a newer ACK than the one it first came with (BSD trims such a segment
    // to nothing and takes its ACK). process_acknowledgment checks the ACK.
    const std::uint32_t length = sequence_length(segment);
    const bool probe = receive_window() == 0 && header.sequence == receive_next;
    const bool all_old = length > 0 && header.sequence + length <= receive_next;
    if ((probe || all_old) && header.has(flag::ack) && !header.has(flag::syn) && !process_acknowledgment(segment))
      return;
    send_ack();
    return;
  }
  heard_since = now;
  keepalive_probes_unanswered = 0;
  // The peer is alive: retransmissions unanswered while its segments keep
  // coming are loss, and do not count toward giving up (R2 counts silence);
  // the loss is measured on what was sent until now, not on the probes of a
  // silence to come.
  retries = 0;
  sent_when_heard = counters.segments_out;
  retransmitted_when_heard = counters.retransmitted_segments;
  // Second: RST (RFC 5961 §3.2).
  if (header.has(flag::rst)) {
    on_acceptable_reset(header);
    return;
  }
  // Fourth: a SYN in a synchronized state (RFC 5961 §4.2).
  if (header.has(flag::syn)) {
    send_challenge_ack();
    return;
  }
  // Fifth: ACK.
  if (!header.has(flag::ack)) return;
  // RFC 7323 §4.3: TS.Recent follows the segment that the ACK we send next covers.
  if (timestamps && header.options.timestamps && header.sequence <= last_ack_sent &&
      static_cast<std::int32_t>(header.options.timestamps->value - timestamp_recent) >= 0) {
    timestamp_recent = header.options.timestamps->value;
  }
  if (!process_acknowledgment(segment, window_unscaled)) return;
  note_duplicate(segment);
  // Sixth: URG.
  if (header.has(flag::urg) && accepts_data()) take_urgent_pointer(header);
  // Seventh and eighth: the text and FIN.
  if ((!part->payload.empty() || part->fin) && accepts_data()) receive_data(*part);
}

void TcpConnection::Impl::on_timer() {
  auto due = [this](const std::optional<Instant>& deadline) { return deadline && *deadline <= now; };
  if (due(closes_at)) {
    enter_closed({});
    return;
  }
  if (due(retransmission_deadline)) on_retransmission_timeout();
  if (state == TcpState::closed) return;
  if (due(reorder_deadline)) on_reorder_timeout();
  if (due(probe_deadline)) on_probe_timeout();
  if (due(pacing_deadline)) transmit_pending();
  if (due(persist_deadline)) on_persist_timeout();
  if (due(delayed_ack_deadline)) send_ack();
  if (due(keepalive_deadline())) on_keepalive_timeout();
  if (due(idle_buffers_deadline)) {
    idle_buffers_deadline.reset();
    send_buffer.release();  // each only if still empty
    receive_buffer.release();
  }
}

// RFC 6298 §5.4-5.6, RFC 5681 §3.1 and RFC 9293 §3.8.3's R2.
void TcpConnection::Impl::on_retransmission_timeout() {
  retransmission_deadline.reset();
  ++counters.timeouts;
  if (retries >= retries_to_give_up()) {
    enter_closed(soft_error ? soft_error : error_of(std::errc::timed_out));
    return;
  }
  ++retries;
  rtt.back_off();
  bool go_back_n = true;
  if (synchronized()) {
    congestion.on_timeout(send_max - send_unacknowledged, send_unacknowledged, send_max, now);
    // With SACK the scoreboard says what to send again (transmit_pending),
    // unless the receiver reneged on what it SACKed (rack.hpp).
    go_back_n = !sack || !rack.on_timeout(now);
    reorder_deadline.reset();
    probe_deadline.reset();
    trace_congestion();
  }
  // Go back N: the rest follows in slow start as ACKs come.
  if (go_back_n) send_next = send_unacknowledged;
  retransmit_first_unacknowledged();
}

// RACK's reordering window passed for a segment not delivered: lost now
// (RFC 8985 §6.2), and recovery sends it.
void TcpConnection::Impl::on_reorder_timeout() {
  reorder_deadline.reset();
  detect_lost_segments();
  transmit_pending();
}

// RFC 8985 §7.3: nothing heard for the probe timeout with data out (the
// tail of a flight may be lost, with no ACK left to tell): one segment
// goes, new data if the peer's window allows, else the last one sent, so
// that its ACK (and SACK) starts recovery at once instead of the RTO.
void TcpConnection::Impl::on_probe_timeout() {
  probe_deadline.reset();
  probe_outstanding = true;
  const std::uint32_t in_flight = bytes_in_flight();
  const std::uint32_t room = send_window > in_flight ? send_window - in_flight : 0;
  const std::uint32_t fresh = std::min({unsent_bytes(), room, max_payload()});
  if (fresh > 0) {
    send_next += transmit_at(send_next, fresh);
  } else if (const auto last = rack.last_unsacked()) {
    retransmit_range(last->start, last->end - last->start);
  }
  retransmission_deadline = now + rtt.rto();
}

// RFC 9293 §3.8.6.1: the peer's window stayed closed; probe it so that a
// lost window update cannot deadlock the connection. A window open but too
// small for SWS avoidance to send is the same stall, ended the same way
// (§3.8.6.2.1's override timeout).
void TcpConnection::Impl::on_persist_timeout() {
  persist_deadline.reset();
  ++persist_backoff;
  const std::uint32_t length = std::min({usable_window(), unsent_bytes(), max_payload()});
  if (length > 0) {
    send_next += transmit_at(send_next, length);
  } else {
    ++counters.zero_window_probes;
    send_probe();
  }
  update_persist_timer();
}

// RFC 9293 §3.8.4 (RFC 1122 §4.2.3.6).
void TcpConnection::Impl::on_keepalive_timeout() {
  if (keepalive_probes_unanswered >= config.keepalive_probes) {
    enter_closed(soft_error ? soft_error : error_of(std::errc::timed_out));
    return;
  }
  ++keepalive_probes_unanswered;
  ++counters.keepalive_probes;
  send_probe();
}

// ============================================================================
// Receiving
// ============================================================================

// The peer's SYN: its sequence numbers and options (MSS: RFC 9293 §3.7.1;
// window scale and timestamps: RFC 7323, used only if both SYNs carry them).
void TcpConnection::Impl::take_peer_syn(const TcpHeader& syn) {
  irs = syn.sequence;
  receive_next = irs + 1;
  receive_advertised_edge = receive_next + static_cast<std::uint32_t>(std::min<std::size_t>(receive_buffer.capacity(), max_window_field));
  last_ack_sent = receive_next;
  max_segment_size = std::clamp(syn.options.max_segment_size.value_or(default_max_segment_size), min_max_segment_size,
                                local_max_segment_size);
  window_scaling = config.window_scaling && syn.options.window_scale.has_value();
  if (window_scaling) {
    send_window_scale = std::min(*syn.options.window_scale, max_window_scale);
    receive_window_scale = offered_window_scale;
  }
  sack = config.sack && syn.options.sack_permitted;
  congestion.use_sack(sack);
  timestamps = config.timestamps && syn.options.timestamps.has_value();
  if (timestamps) timestamp_recent = syn.options.timestamps->value;
  send_window = syn.window;  // never scaled on a SYN (RFC 7323 §2.2)
  max_send_window = send_window;
  send_wl1 = syn.sequence;
  send_wl2 = syn.acknowledgment;
}

// RFC 7323 §5.3 R1: a timestamp older than TS.Recent marks an old duplicate.
// Save, as Linux's tcp_disordered_ack, a harmless duplicate ACK older by at
// most an RTO (the peer's clock taken to tick about once a millisecond, as
// Linux takes it): on a path that reorders, most ACKs arrive after one the
// peer sent later, and dropping them dropped the SACK blocks only they
// carried; the segments those reported were then deemed lost as soon as a
// later one was SACKed, and sent again for nothing.
bool TcpConnection::Impl::paws_rejects(const TcpSegment& segment) const {
  const TcpHeader& header = segment.header;
  if (header.has(flag::rst) || !overtaken(header)) return false;
  const auto age = static_cast<std::int32_t>(timestamp_recent - header.options.timestamps->value);
  return age > rtt.rto().count() || !is_harmless_duplicate_ack(segment);
}

// A pure ACK at RCV.NXT of SND.UNA again, with no more window than the one
// in use (less is a window from before the one in use, and left alone):
// taken, it changes nothing but what it SACKs.
bool TcpConnection::Impl::is_harmless_duplicate_ack(const TcpSegment& segment) const {
  const TcpHeader& header = segment.header;
  return header.has(flag::ack) && !header.has(flag::syn) && !header.has(flag::fin) && segment.payload.empty() &&
         header.sequence == receive_next && header.acknowledgment == send_unacknowledged &&
         (std::uint32_t{header.window} << send_window_scale) <= send_window;
}

// Sent by the peer before the segment that set TS.Recent (RFC 7323): the
// network delivered it late.
bool TcpConnection::Impl::overtaken(const TcpHeader& header) const {
  return timestamps && header.options.timestamps &&
         static_cast<std::int32_t>(header.options.timestamps->value - timestamp_recent) < 0;
}

// §3.10.7.4's acceptability test (four cases, by segment length and window),
// then the segment cut down to the window: what lies before RCV.NXT was
// received already, what lies past the window is not taken (nor a FIN behind it).
std::optional<TcpConnection::Impl::InWindow> TcpConnection::Impl::trim_to_window(const TcpSegment& segment) const {
  const std::uint32_t window = receive_window();
  const std::uint32_t length = sequence_length(segment);
  const SeqNumber sequence = segment.header.sequence;
  bool acceptable = false;
  if (length == 0) {
    // Up to the right edge itself, as Linux's tcp_sequence: a sender that
    // filled our window numbers its pure ACKs there (SND.MAX), and RFC 9293's
    // strict "< RCV.NXT+RCV.WND" would drop their ACK fields.
    acceptable = wire::in_window(sequence, receive_next, window + 1);
  } else if (window > 0) {
    acceptable = wire::in_window(sequence, receive_next, window) ||
                 wire::in_window(sequence + (length - 1), receive_next, window);
  }
  if (!acceptable) return std::nullopt;

  InWindow part{sequence, segment.payload, segment.header.has(flag::fin)};
  if (sequence < receive_next) {
    const std::uint32_t already = receive_next - sequence;
    const std::uint32_t skipped = std::min<std::uint32_t>(already, static_cast<std::uint32_t>(part.payload.size()));
    part.payload = part.payload.subspan(skipped);
    part.sequence = receive_next;
  }
  const std::uint32_t room = window - (part.sequence - receive_next);
  if (part.payload.size() > room) {
    part.payload = part.payload.first(room);
    part.fin = false;
  } else if (part.payload.size() == room) {
    part.fin = false;  // no room left for the FIN's sequence number
  }
  return part;
}

// An RST inside the window: exactly at RCV.NXT it resets the connection;
// anywhere else it may be a blind attack, answered with a challenge ACK
// (RFC 5961 §3.2).
void TcpConnection::Impl::on_acceptable_reset(const TcpHeader& header) {
  if (header.sequence != receive_next) {
    send_challenge_ack();
    return;
  }
  ++counters.resets_in;
  switch (state) {
    case TcpState::syn_received:
      // Passive: the stack's listener forgets it; active (simultaneous open): refused.
      enter_closed(error_of(std::errc::connection_refused));
      break;
    case TcpState::established:
    case TcpState::fin_wait_1:
    case TcpState::fin_wait_2:
    case TcpState::close_wait:
      enter_closed(error_of(std::errc::connection_reset));
      break;
    default:  // CLOSING, LAST-ACK, TIME-WAIT: the connection was ending anyway
      enter_closed({});
      break;
  }
}

// §3.10.7.4's fifth check. Returns whether the segment goes on to its text.
bool TcpConnection::Impl::process_acknowledgment(const TcpSegment& segment, bool window_unscaled) {
  const TcpHeader& header = segment.header;
  const SeqNumber ack = header.acknowledgment;
  if (state == TcpState::syn_received) {
    if (!(send_unacknowledged < ack && ack <= send_max)) {
      send_reset(ack, false);
      return false;
    }
    become_established();
  }
  if (ack > send_max) {  // acknowledges something never sent
    send_ack();
    return false;
  }
  if (ack < send_unacknowledged - max_send_window) {  // RFC 5961 §5.2: too old to be genuine
    send_challenge_ack();
    return false;
  }
  const std::uint32_t window = std::uint32_t{header.window} << (window_unscaled ? 0 : send_window_scale);
  // RFC 5681 §2: a duplicate ACK carries no data, no SYN or FIN, does not move
  // SND.UNA or the window, while data is outstanding.
  const bool duplicate = ack == send_unacknowledged && segment.payload.empty() && !header.has(flag::fin) &&
                         window == send_window && send_max != send_unacknowledged;
  const SeqNumber prior_unacknowledged = send_unacknowledged;
  const std::uint64_t segments_marked_lost_before = rack.segments_marked_lost();
  if (sack) rack.on_ack();
  if (ack > send_unacknowledged) {
    measure_echoed_timestamp(header);
    on_new_acknowledgment(ack, echo_of(header));
  }
  if (sack) take_sack_blocks(header, prior_unacknowledged);
  if (duplicate) on_duplicate_ack();
  if (sack && synchronized()) detect_lost_segments();
  if (synchronized()) report_delivery(segments_marked_lost_before);
  // The window comes from the newest segment only (§3.10.7.4, SND.WL1/WL2;
  // with timestamps, not one that a later segment overtook).
  if (!overtaken(header) && (send_wl1 < header.sequence || (send_wl1 == header.sequence && send_wl2 <= ack))) {
    send_window = window;
    max_send_window = std::max(max_send_window, window);
    send_wl1 = header.sequence;
    send_wl2 = ack;
  }
  if (fin_acknowledged()) {
    switch (state) {
      case TcpState::fin_wait_1:
        state = TcpState::fin_wait_2;
        time_out_orphan();
        break;
      case TcpState::closing:
        enter_time_wait();
        break;
      case TcpState::last_ack:
        enter_closed({});
        return false;
      default:
        break;
    }
  }
  return true;
}

// RFC 7323 §4 (RTTM) where Karn's rule leaves a gap: an ACK of new data
// that no segment sent once times (a retransmission cancelled the timing)
// still gives a sample, from the timestamp it echoes, which names the
// transmission it answers. So the backoff ends (RFC 6298 §5.7) as soon as a
// retransmission gets through, not only once a later segment sent once is
// acknowledged: under heavy loss, that waited through one more doubling
// after another. As Linux, the timed segment is preferred when there is one.
// Only an echo of the last retransmission or later counts: the peer echoes
// the segment that last moved its RCV.NXT, and when every ACK of it was lost
// the next one, on the peer's own data after a long outage, would measure
// the outage (seconds) and hold the RTO at its maximum for many samples.
void TcpConnection::Impl::measure_echoed_timestamp(const TcpHeader& header) {
  if (!timestamps || !header.options.timestamps || timed_ack || !last_retransmission_timestamp) return;
  const std::uint32_t echoed = header.options.timestamps->echo_reply;
  if (static_cast<std::int32_t>(echoed - *last_retransmission_timestamp) < 0) return;
  const auto elapsed = static_cast<std::int32_t>(timestamp_now() - echoed);
  if (elapsed < 0) return;  // echoes a time we have not reached: not ours
  add_rtt_sample(milliseconds(elapsed));
}

void TcpConnection::Impl::add_rtt_sample(microseconds sample) {
  rtt.add_sample(sample);
  rtt_sample = sample;
}

// RFC 9293 §3.8.3's R2, at least config's, raised with the loss measured so
// that a live peer is not given up: enough retransmissions that one would
// get through but for a chance of one in a million, with a round trip failing
// as often as a transmission needed another (retransmissions over segments
// sent, which counts each way's loss and spurious retransmissions too).
int TcpConnection::Impl::retries_to_give_up() const {
  const int configured = synchronized()                     ? config.data_retries
                         : state == TcpState::syn_received ? config.synack_retries
                                                           : config.syn_retries;
  if (sent_when_heard == 0 || retransmitted_when_heard == 0) return configured;
  const double loss =
      std::min(0.99, static_cast<double>(retransmitted_when_heard) / static_cast<double>(sent_when_heard));
  const double needed = std::ceil(std::log(1e-6) / std::log(loss));
  return std::max(configured, static_cast<int>(std::min(needed, 64.0)));
}

void TcpConnection::Impl::on_new_acknowledgment(SeqNumber ack, std::optional<std::uint32_t> echoed) {
  const std::uint32_t acked_data = ack > send_buffer_start ? std::min(ack, data_end()) - send_buffer_start : 0;
  send_buffer.pop(acked_data);
  send_buffer_start += acked_data;
  note_emptied_buffers();
  send_unacknowledged = ack;
  send_next = std::max(send_next, ack);
  // Nagle's mark follows SND.UNA once passed: left behind, it would read as
  // ahead of it after 2 GiB of full segments (modulo 2^32) and hold a short write.
  if (short_segment_end < ack) short_segment_end = ack;
  if (sack) rack.on_cumulative_ack(ack, now, echoed);
  delivery.on_cumulative_ack(ack, now);
  retries = 0;
  probe_outstanding = false;
  if (timed_ack && ack >= *timed_ack) {
    add_rtt_sample(duration_cast<microseconds>(now - timed_since));
    timed_ack.reset();
  }
  if (synchronized()) {
    const AckSample sample{acked_data, static_cast<std::uint32_t>(send_max - ack),
                           std::exchange(rtt_sample, std::nullopt), rtt.smoothed(), now};
    const bool recovering = congestion.recovering();
    const auto outcome = congestion.on_new_ack(sample, ack, echoed);
    if (recovering && !congestion.recovering()) rack.on_recovery_exit();
    switch (outcome) {
      case tcp::LossRecovery::AckOutcome::retransmit_next_hole:
        retransmit_first_unacknowledged();
        break;
      case tcp::LossRecovery::AckOutcome::timeout_undone:
        send_next = send_max;  // RFC 4015: the rest was not lost; no go-back-N
        break;
      case tcp::LossRecovery::AckOutcome::none:
        break;
    }
    counters.reductions_undone = congestion.reductions_undone();
    trace_congestion();
  }
  // RFC 6298 §5.2 and §5.3.
  if (send_unacknowledged == send_max) {
    retransmission_deadline.reset();
  } else {
    retransmission_deadline = now + rtt.rto();
  }
  update_probe_timer(true);
}

void TcpConnection::Impl::on_duplicate_ack() {
  ++counters.duplicate_acks_in;
  if (congestion.on_duplicate_ack(send_max - send_unacknowledged, send_unacknowledged, send_max, now))
    start_fast_retransmit();
  trace_congestion();
}

// Recovery began: the first unacknowledged segment goes again at once
// (RFC 5681 §3.2 step 2, RFC 6675 §5 step 4.3).
void TcpConnection::Impl::start_fast_retransmit() {
  ++counters.fast_retransmits;
  retransmit_first_unacknowledged();
}

// The SACK blocks of an acceptable ACK: those within (SND.UNA, SND.MAX]
// mark what they cover delivered; others (old, reneged or forged) are
// ignored (RFC 2018 §8 makes ignoring SACK information always safe).
void TcpConnection::Impl::take_sack_blocks(const TcpHeader& header, SeqNumber prior_unacknowledged) {
  const std::span<const wire::SackBlock> blocks = header.options.sack();
  bool duplicate_counts = false;
  if (is_duplicate_report(blocks)) {
    using Outcome = tcp::LossRecovery::DuplicateOutcome;
    const Outcome outcome = congestion.on_duplicate_reported(blocks[0].left, blocks[0].right, prior_unacknowledged,
                                                             send_unacknowledged, now);
    duplicate_counts = outcome != Outcome::dubious;
    if (outcome == Outcome::undone) {
      counters.reductions_undone = congestion.reductions_undone();
      trace_congestion();
    }
  }
  for (const wire::SackBlock& block : blocks) {
    if (send_unacknowledged < block.left && block.left < block.right && block.right <= send_max) {
      rack.on_sack_block(block.left, block.right, now, echo_of(header));
      delivery.on_sack_block(block.left, block.right, now);
    }
  }
  if (duplicate_counts) rack.on_duplicate_reported();
}

// RFC 2883 §4: the first block is a D-SACK when it lies below the
// cumulative ACK (no further back than a window: RFC 5961's bound on
// genuine ACKs) or inside the second block.
bool TcpConnection::Impl::is_duplicate_report(std::span<const wire::SackBlock> blocks) const {
  if (blocks.empty() || !(blocks[0].left < blocks[0].right) || send_max < blocks[0].right) return false;
  const wire::SackBlock& first = blocks[0];
  if (first.right <= send_unacknowledged) return !(first.left < send_unacknowledged - max_send_window);
  return blocks.size() > 1 && blocks[1].left <= first.left && first.right <= blocks[1].right;
}

// RFC 2883: data of this segment at or below RCV.NXT arrived before; the
// next ACK reports it first.
void TcpConnection::Impl::note_duplicate(const TcpSegment& segment) {
  const SeqNumber start = segment.header.sequence;
  if (!sack || segment.payload.empty() || !(start < receive_next)) return;
  const SeqNumber end = std::min(start + static_cast<std::uint32_t>(segment.payload.size()), receive_next);
  duplicate_to_report = wire::SackBlock{start, end};
}

// RFC 2883 §4.2: data of this out-of-order segment held already arrived
// before; the next ACK reports it first, then the block holding it.
void TcpConnection::Impl::note_duplicate_held(const InWindow& part) {
  const SeqNumber end = part.sequence + static_cast<std::uint32_t>(part.payload.size());
  if (const auto held = out_of_order.held_within(part.sequence, end))
    duplicate_to_report = wire::SackBlock{held->first, held->second};
}

// RACK (RFC 8985 §6.2) after an ACK or the reordering timer: segments whose
// time is up are lost, and the first loss begins recovery (RFC 6675 §5,
// with RACK in place of DupThresh); a segment still within the window sets
// the reordering timer.
void TcpConnection::Impl::detect_lost_segments() {
  const auto wait = rack.detect_losses(now, rtt.smoothed(), congestion.in_recovery());
  reorder_deadline.reset();
  if (wait) reorder_deadline = now + *wait;
  if (congestion.in_recovery() || !rack.any_lost()) return;
  if (!congestion.enter_recovery(send_max - send_unacknowledged, send_unacknowledged, send_max, now)) return;
  // RFC 6675 §5 step 4.3: the first lost segment goes at once, whatever the pipe.
  ++counters.fast_retransmits;
  probe_deadline.reset();
  const tcp::Rack::Range first = *rack.first_lost();
  retransmit_range(first.start, std::min<std::uint32_t>(max_payload(), first.end - first.start));
  trace_congestion();
}

// RFC 8985 §7.2: the probe timer runs while data is out, outside recovery,
// with nothing SACKed (then RACK watches the tail), and no probe out since
// the last new ACK; it restarts on a new ACK and is set on sending, and
// only if it ends before the RTO.
void TcpConnection::Impl::update_probe_timer(bool restart) {
  const bool wanted = sack && may_send_data() && send_max != send_unacknowledged && !probe_outstanding &&
                      congestion.phase() != CongestionPhase::fast_recovery &&
                      congestion.phase() != CongestionPhase::timeout_recovery && !rack.any_sacked();
  if (!wanted) {
    probe_deadline.reset();
    return;
  }
  if (probe_deadline && !restart) return;
  const bool one_segment = static_cast<std::uint32_t>(send_max - send_unacknowledged) <= max_payload();
  const Instant deadline = now + tcp::probe_timeout(rtt.smoothed(), one_segment);
  if (retransmission_deadline && *retransmission_deadline <= deadline) {
    probe_deadline.reset();
  } else {
    probe_deadline = deadline;
  }
}

// RFC 2018 §4: the first block holds the segment that arrived last, the
// others the most recent before it, as many as the options have room for
// (three beside timestamps).
void TcpConnection::Impl::add_sack_blocks(wire::TcpOptions& options) const {
  const std::size_t room = timestamps ? 3 : wire::TcpOptions::max_sack_blocks;
  if (duplicate_to_report) options.sack_blocks[options.sack_block_count++] = *duplicate_to_report;
  for (const SeqNumber point : recent_out_of_order) {
    if (options.sack_block_count == room) break;
    if (point < receive_next) continue;
    const auto run = out_of_order.run_around(point);
    if (!run) continue;
    const wire::SackBlock block{run->first, run->second};
    // A block equal to the D-SACK still goes: RFC 2883 §4 wants the block
    // holding the duplicate second, which tells the D-SACK from a SACK.
    const auto taken = options.sack().subspan(duplicate_to_report ? 1 : 0);
    if (std::find(taken.begin(), taken.end(), block) != taken.end()) continue;
    options.sack_blocks[options.sack_block_count++] = block;
  }
}

// RFC 2018 §4: the blocks after the first are the most recent other
// blocks. An arrival stands for the whole run it joined: the points of
// earlier arrivals in that run go, so that a run growing segment by segment
// does not fill the list (and the ACK) with copies of itself, or with
// overlapping parts of itself once it is longer than run_around looks.
void TcpConnection::Impl::remember_out_of_order(SeqNumber sequence) {
  constexpr std::size_t remembered = 2 * wire::TcpOptions::max_sack_blocks;
  if (const auto run = out_of_order.run_around(sequence)) {
    std::erase_if(recent_out_of_order,
                  [&](SeqNumber point) { return run->first <= point && point < run->second; });
  }
  recent_out_of_order.insert(recent_out_of_order.begin(), sequence);
  if (recent_out_of_order.size() > remembered) recent_out_of_order.pop_back();
}

// The bytes the SACK option adds to the next segment's header, with what
// is held out of order now (0 when nothing is).
std::uint32_t TcpConnection::Impl::sack_option_bytes() const {
  if (!sack || (out_of_order.empty() && !duplicate_to_report)) return 0;
  TcpHeader without;
  if (timestamps) without.options.timestamps = wire::TcpTimestamps{};
  TcpHeader with = without;
  add_sack_blocks(with.options);
  return static_cast<std::uint32_t>(wire::tcp_header_length(with) - wire::tcp_header_length(without));
}

// A sample to the trace, if there is one and the window, the threshold or
// the phase changed since the last.
// The rate sample of the ACK just processed, if it delivered anything, to
// the controller: with how many segments it found lost and what is left in
// the network.
void TcpConnection::Impl::report_delivery(std::uint64_t segments_marked_lost_before) {
  std::optional<RateSample> sample = delivery.take_sample(now);
  if (!sample || !congestion.started()) return;
  sample->newly_lost_segments = static_cast<std::uint32_t>(rack.segments_marked_lost() - segments_marked_lost_before);
  sample->bytes_in_flight = sack ? static_cast<std::uint32_t>(rack.pipe()) : bytes_in_flight();
  congestion.on_rate_sample(*sample);
  trace_congestion();
}

void TcpConnection::Impl::trace_congestion() {
  if (!congestion_trace || !congestion.started()) return;
  const CongestionSample sample{now, congestion.window(), congestion.controller().ssthresh(), congestion.phase()};
  if (last_traced && last_traced->cwnd == sample.cwnd && last_traced->ssthresh == sample.ssthresh &&
      last_traced->phase == sample.phase)
    return;
  last_traced = sample;
  congestion_trace(sample);
}

// RFC 9293 §3.10.7.4's sixth check: RCV.UP = max(RCV.UP, SEG.UP). A pointer
// that advances past what was read is news for the application (counted).
void TcpConnection::Impl::take_urgent_pointer(const TcpHeader& header) {
  if (header.urgent_pointer == 0) return;  // points at the segment's first byte: nothing before it is urgent
  const SeqNumber pointer = header.sequence + header.urgent_pointer;
  if (pointer <= read_position() || (receive_urgent && pointer <= *receive_urgent)) return;
  receive_urgent.emplace(pointer);
  ++counters.urgent_in;
}

void TcpConnection::Impl::receive_data(const InWindow& part) {
  if (application_closed && !part.payload.empty()) {
    // Nobody will read it: tell the peer (RFC 9293 §3.6.1, as Linux does).
    send_reset(send_max, true);
    enter_closed({});
    return;
  }
  if (part.sequence != receive_next) {
    if (sack && !part.payload.empty()) note_duplicate_held(part);
    counters.out_of_order_dropped += out_of_order.insert(part.sequence, part.payload, part.fin);
    ++counters.out_of_order_segments;
    if (sack) remember_out_of_order(part.sequence);
    ack_now = true;  // a duplicate ACK at once, for the sender's fast retransmit (RFC 5681 §4.2)
    // A sender without SACK counts them all; one with SACK learns what
    // arrived from the blocks, and needs only its DupThresh (RFC 5681 §3.2)
    // of them as they come, as Linux sends (TCP_FASTRETRANS_THRESH).
    constexpr std::uint32_t duplicate_threshold = 3;
    if (duplicate_acks_for != receive_next) {
      duplicate_acks_for = receive_next;
      duplicate_acks_at_once = 0;
    }
    if (!sack || duplicate_acks_at_once < duplicate_threshold) {
      ++duplicate_acks_at_once;
      ack_urgent = true;
    }
    return;
  }
  const bool fills_hole = !out_of_order.empty();
  deliver_in_order(part.payload, part.fin);
  while (auto held = out_of_order.pop_reachable(receive_next)) {
    const std::uint32_t already = receive_next - held->sequence;
    const auto bytes = std::span<const std::uint8_t>(held->bytes).subspan(std::min<std::size_t>(already, held->bytes.size()));
    deliver_in_order(bytes, held->fin);
  }
  if (fills_hole || fin_received) {
    ack_now = true;  // RFC 5681 §4.2: an ACK at once when a hole fills
  } else if (!config.delayed_ack || bytes_unacknowledged >= 2 * max_payload()) {
    ack_now = true;  // RFC 9293 §3.8.6.3: at least every second full-sized segment
  } else if (!delayed_ack_deadline) {
    delayed_ack_deadline = now + config.delayed_ack_timeout;
  }
}

void TcpConnection::Impl::deliver_in_order(std::span<const std::uint8_t> bytes, bool fin) {
  if (fin_received) return;
  std::size_t lent = 0;
  if (receive_buffer.empty() && read_loan_filled < read_loan.size()) {
    // Read at once: the window stays as open as if the reader had taken it.
    lent = std::min(bytes.size(), read_loan.size() - read_loan_filled);
    via::copy_memory(read_loan.data() + read_loan_filled, bytes.data(), lent);
    read_loan_filled += lent;
    counters.bytes_in_directly += lent;
  }
  const std::size_t taken = lent + receive_buffer.push(bytes.subspan(lent));
  receive_next += static_cast<std::uint32_t>(taken);
  if (lent > 0) forget_urgent_read();
  bytes_unacknowledged += static_cast<std::uint32_t>(taken);
  counters.bytes_in += taken;
  if (taken < bytes.size()) {
    ack_now = true;  // the buffer is full: what was cut will come again
    ack_urgent = true;
    return;
  }
  if (fin) on_fin_received();
}

// §3.10.7.4's eighth check: the FIN, reached in order.
void TcpConnection::Impl::on_fin_received() {
  receive_next += 1;
  fin_received = true;
  ack_now = true;
  ack_urgent = true;
  switch (state) {
    case TcpState::established:
      state = TcpState::close_wait;
      break;
    case TcpState::fin_wait_1:
      state = TcpState::closing;  // our FIN is not acknowledged yet (or it would be FIN-WAIT-2)
      break;
    case TcpState::fin_wait_2:
      enter_time_wait();
      break;
    default:
      break;
  }
}

// RFC 9293 §3.8.6.2.2: after the application reads, announce the larger
// window once it has grown by two segments or half the buffer.
void TcpConnection::Impl::send_window_update_if_grown() {
  if (!accepts_data()) return;
  const std::uint32_t possible = static_cast<std::uint32_t>(receive_buffer.free());
  const std::int32_t growth = (receive_next + possible) - receive_advertised_edge;
  const auto threshold = static_cast<std::int32_t>(
      std::min<std::size_t>(2 * std::size_t{max_payload()}, receive_buffer.capacity() / 2));
  if (growth >= threshold) send_ack();
}

// ============================================================================
// Sending
// ============================================================================

std::uint32_t TcpConnection::Impl::usable_window() const {
  const std::uint32_t in_flight = bytes_in_flight();
  const std::uint32_t peer_room = send_window > in_flight ? send_window - in_flight : 0;
  return std::min(congestion_room(), peer_room);
}

// What cwnd lets go now. With SACK (outside the go-back-N that follows a
// timeout after the receiver reneged, whose marks are gone) cwnd less the pipe, RFC 6675 §5 step (3):
// a segment the peer SACKed has left the network, so while RACK waits out
// its reordering window a new one takes its place (as Linux's in_flight);
// this covers limited transmit. Without SACK, cwnd less all outstanding
// plus limited transmit (RFC 3042).
std::uint32_t TcpConnection::Impl::congestion_room() const {
  if (sack && !going_back_n()) {
    const std::uint64_t pipe = rack.pipe();
    return congestion.window() > pipe ? static_cast<std::uint32_t>(congestion.window() - pipe) : 0;
  }
  const std::uint32_t window = congestion.window() + congestion.limited_transmit();
  const std::uint32_t in_flight = bytes_in_flight();
  return window > in_flight ? window - in_flight : 0;
}

// Sends what the state, the windows, Nagle and SWS avoidance allow.
void TcpConnection::Impl::transmit_pending() {
  if (!synchronized()) {
    if (send_next == iss) send_next += transmit_at(iss, 0);  // the SYN (or SYN-ACK)
    return;
  }
  pacing_deadline.reset();
  // The scoreboard in fast recovery, and after a timeout that kept it.
  const bool by_scoreboard =
      congestion.in_recovery() || (congestion.phase() == CongestionPhase::timeout_recovery && !going_back_n());
  if (may_send_data() && sack && by_scoreboard) {
    transmit_in_sack_recovery();
  } else if (may_send_data()) {
    for (;;) {
      const std::uint32_t unsent = unsent_bytes();
      const std::uint32_t length = std::min({unsent, usable_window(), max_payload()});
      if (!worth_sending(length, unsent) || held_by_pacing()) break;
      send_next += transmit_at(send_next, length);
      account_paced(length);
    }
  }
  check_app_limited();
  update_persist_timer();
  update_probe_timer(false);
}

// Pacing (for a controller with a pacing rate): whether the next segment
// must wait; if so the pacing timer is set for when it may go.
bool TcpConnection::Impl::held_by_pacing() {
  const std::optional<double> rate = congestion.pacing_rate();
  if (!rate || *rate <= 0 || next_send_time <= now) return false;
  pacing_deadline = next_send_time;
  return true;
}

// A segment of `bytes` went out paced: the next goes bytes / rate later. A
// sender that fell behind (the host woke late, or had nothing to send)
// catches up by at most one burst (pacing_burst), a token bucket of that
// size: so a host that wakes once a millisecond still reaches the rate,
// and an idle one does not send a window at once.
void TcpConnection::Impl::account_paced(std::uint32_t bytes) {
  const std::optional<double> rate = congestion.pacing_rate();
  if (!rate || *rate <= 0) return;
  const auto duration_of = [&](double bytes_at_rate) {
    return duration_cast<Instant::duration>(std::chrono::duration<double>(bytes_at_rate / *rate));
  };
  const Instant earliest = now - duration_of(pacing_burst(*rate, max_payload()));
  next_send_time = std::max(next_send_time, earliest) + duration_of(bytes);
}

// draft-cheng-iccrg-delivery-rate-estimation §3.4 (Linux's
// tcp_rate_check_app_limited): less than a segment left to send, room in
// cwnd, nothing lost waiting to go again: the application, not the
// network, limits what is delivered until what is in flight now is.
void TcpConnection::Impl::check_app_limited() {
  if (!congestion.started() || !may_send_data() || unsent_bytes() >= max_payload()) return;
  if (congestion_room() < max_payload() || (sack && rack.any_lost())) return;
  delivery.on_app_limited(sack ? static_cast<std::uint32_t>(rack.pipe()) : bytes_in_flight());
}

bool TcpConnection::Impl::worth_sending(std::uint32_t length, std::uint32_t unsent) const {
  // The FIN alone, once the peer's window has room for its sequence number
  // (as Linux's tcp_snd_wnd_test): into a closed window it would be dropped,
  // and retried only by the retransmission timer; the persist timer probes
  // meanwhile, and the ACK that opens the window lets it go.
  if (length == 0) return unsent == 0 && fin_unsent() && send_window > bytes_in_flight();
  if (length == max_payload()) return true;
  // The rest of the data in one short segment: Nagle's algorithm (RFC 896,
  // RFC 9293 §3.7.4) holds it back while an earlier short segment is
  // unacknowledged. (Minshall's form, as Linux: the tail of a large write
  // goes at once, no stall against the peer's delayed ACK.)
  if (length == unsent) return config.nodelay || short_segment_end <= send_unacknowledged;
  // Window-limited: send once a good part of the largest window the peer
  // ever offered can go (RFC 9293 §3.8.6.2.1, Fs = 1/2).
  return length >= max_send_window / 2;
}

// Sends the segment at `sequence` with up to `length` bytes of data (the
// SYN when the sequence is the ISS, a FIN when it ends the stream). Returns
// the sequence space it covers.
std::uint32_t TcpConnection::Impl::transmit_at(SeqNumber sequence, std::uint32_t length) {
  std::uint8_t flags = flag::ack;
  std::span<const std::uint8_t> payload;
  std::uint32_t covered = length;
  std::uint32_t full_segment = max_payload();
  if (!synchronized() && sequence == iss) {
    flags = state == TcpState::syn_received ? flag::syn | flag::ack : flag::syn;
    covered = 1;
  } else {
    // The SACK blocks the segment will carry take room from its data.
    full_segment -= sack_option_bytes();
    length = std::min(length, full_segment);
    covered = length;
    // Straight from the ring: the stack copies it into the packet as it sums it.
    payload = send_buffer.view(sequence - send_buffer_start, length, segment_scratch);
    if (length > 0 && sequence + length == data_end()) flags |= flag::psh;
    if (fin_queued && sequence + length == fin_sequence()) {
      flags |= flag::fin;
      covered += 1;
    }
  }
  const SeqNumber end = sequence + covered;
  if (synchronized()) delivery.on_transmit(sequence, end, now, send_unacknowledged == send_max);
  if (sequence < send_max) {
    ++counters.retransmitted_segments;
    timed_ack.reset();  // Karn's rule: no sample from a retransmission
    last_retransmission_timestamp = timestamp_now();
    if (synchronized()) congestion.on_retransmission(sequence, end, timestamps ? last_retransmission_timestamp : std::nullopt);
  } else if (!timed_ack) {
    timed_ack = end;
    timed_since = now;
  }
  if (end > send_max) {
    counters.bytes_out += std::min<std::uint32_t>(end - send_max, length);
    send_max = end;
  }
  if (length > 0 && length < full_segment) short_segment_end = std::max(short_segment_end, end);
  if (!retransmission_deadline) retransmission_deadline = now + rtt.rto();  // RFC 6298 §5.1
  if (sack && synchronized())
    rack.on_transmit(sequence, end, now, timestamps ? std::optional(timestamp_now()) : std::nullopt);
  emit(sequence, flags, payload);
  return covered;
}

// The first unacknowledged segment again: on a timeout, the third duplicate
// ACK and a partial ACK.
std::uint32_t TcpConnection::Impl::retransmit_first_unacknowledged() {
  const std::uint32_t outstanding = send_max - send_unacknowledged;
  return retransmit_range(send_unacknowledged, std::min(max_payload(), outstanding));
}

// Sends again up to `length` of sequence space from `start` (its data, and
// the FIN if it ends there). Returns the sequence space covered.
std::uint32_t TcpConnection::Impl::retransmit_range(SeqNumber start, std::uint32_t length) {
  const std::uint32_t data = data_end() > start ? data_end() - start : 0;
  const std::uint32_t covered = transmit_at(start, std::min(length, data));
  send_next = std::max(send_next, start + covered);
  return covered;
}

// RFC 6675 §5 step (C) and §4's NextSeg(), loss as RACK says: while the
// pipe leaves a segment of cwnd free, send (1) the first segment deemed
// lost, else (2) new data. (RFC 6675's rules 3 and 4, holes not deemed
// lost and the rescue retransmission, are left to RACK's timer and the
// tail loss probe, which tell when such a hole is lost.)
void TcpConnection::Impl::transmit_in_sack_recovery() {
  const std::uint32_t mss = max_payload();
  while (rack.pipe() + mss <= congestion.window() && !held_by_pacing()) {
    if (const auto lost = rack.first_lost()) {
      const std::uint32_t resent = retransmit_range(lost->start, std::min<std::uint32_t>(mss, lost->end - lost->start));
      if (resent == 0) return;
      account_paced(resent);
      continue;
    }
    const std::uint32_t in_flight = bytes_in_flight();
    const std::uint32_t room = send_window > in_flight ? send_window - in_flight : 0;
    const std::uint32_t fresh = std::min({unsent_bytes(), room, mss});
    if (fresh == 0 || !worth_sending(fresh, unsent_bytes())) return;
    send_next += transmit_at(send_next, fresh);
    account_paced(fresh);
  }
}

void TcpConnection::Impl::emit(SeqNumber sequence, std::uint8_t flags, std::span<const std::uint8_t> payload) {
  TcpHeader header;
  header.source_port = ports.local;
  header.destination_port = ports.remote;
  header.sequence = sequence;
  header.flags = flags;
  if ((flags & flag::ack) != 0) {
    header.acknowledgment = receive_next;
    last_ack_sent = receive_next;
    bytes_unacknowledged = 0;
    ack_now = false;
    ack_held = false;
    acks_coalesced = 0;
    delayed_ack_deadline.reset();
  }
  if ((flags & flag::syn) != 0) {
    header.window = static_cast<std::uint16_t>(std::min<std::size_t>(receive_buffer.capacity(), max_window_field));
    header.options.max_segment_size = local_max_segment_size;
    // Our SYN offers what the configuration allows; a SYN-ACK answers only what the peer offered.
    const bool answering = state == TcpState::syn_received;
    if (answering ? window_scaling : config.window_scaling) header.options.window_scale = offered_window_scale;
    if (answering ? timestamps : config.timestamps) {
      header.options.timestamps = wire::TcpTimestamps{timestamp_now(), answering ? timestamp_recent : 0};
    }
    header.options.sack_permitted = answering ? sack : config.sack;
  } else {
    header.window = (flags & flag::rst) != 0 ? 0 : advertise_window();
    if (timestamps) header.options.timestamps = wire::TcpTimestamps{timestamp_now(), timestamp_recent};
    // On data segments too (transmit_at left room for them in the MSS).
    if (sack && (flags & flag::ack) != 0 && (flags & flag::rst) == 0) {
      add_sack_blocks(header.options);
      duplicate_to_report.reset();
    }
  }
  ++counters.segments_out;
  transmit(header, payload);
}

// The window field for a segment we send. The right edge moves right only
// by a useful amount (receiver SWS avoidance, RFC 9293 §3.8.6.2.2: half the
// buffer or one segment), and never past the free space. A scaled field is
// rounded down: the peer may see the edge come back by less than one unit
// (the granularity RFC 7323 §2.4 accepts), but never an offer past the
// buffer. Rounded up, and the edge moved out to match, every ACK to a
// stalled reader offered a few more bytes the buffer could not take, the
// window never reached zero, and the sender's retransmissions of what was
// dropped timed the connection out while its peer was alive.
std::uint16_t TcpConnection::Impl::advertise_window() {
  const std::uint32_t free = static_cast<std::uint32_t>(receive_buffer.free());
  const SeqNumber edge = receive_next + (free >> receive_window_scale << receive_window_scale);
  const auto threshold = static_cast<std::int32_t>(std::min<std::size_t>(receive_buffer.capacity() / 2, max_payload()));
  if (edge - receive_advertised_edge >= threshold) receive_advertised_edge = edge;
  return static_cast<std::uint16_t>(std::min(receive_window() >> receive_window_scale, max_window_field));
}

void TcpConnection::Impl::send_challenge_ack() {
  ++counters.challenge_acks;
  send_ack();
}

void TcpConnection::Impl::send_reset(SeqNumber sequence, bool with_ack) {
  ++counters.resets_out;
  emit(sequence, with_ack ? flag::rst | flag::ack : flag::rst, {});
}

// ============================================================================
// State changes
// ============================================================================

void TcpConnection::Impl::become_established() {
  state = fin_queued ? TcpState::fin_wait_1 : TcpState::established;
  established_once = true;
  congestion.start(max_payload(), send_unacknowledged, now);
  trace_congestion();
  heard_since = now;
}

void TcpConnection::Impl::shutdown_write() {
  if (fin_queued) return;
  switch (state) {
    case TcpState::syn_sent:
    case TcpState::syn_received:
      fin_queued = true;  // sent once established, after the data queued
      break;
    case TcpState::established:
      fin_queued = true;
      state = TcpState::fin_wait_1;
      break;
    case TcpState::close_wait:
      fin_queued = true;
      state = TcpState::last_ack;
      break;
    default:
      return;
  }
  transmit_pending();
}

void TcpConnection::Impl::enter_time_wait() {
  state = TcpState::time_wait;
  closes_at = now + config.time_wait;
  retransmission_deadline.reset();
  persist_deadline.reset();
  reorder_deadline.reset();
  probe_deadline.reset();
  release_buffers();
}

// TIME-WAIT and CLOSED keep the state, not the memory: nothing will be sent
// or arrive in order any more (bytes still unread stay until read).
void TcpConnection::Impl::release_buffers() {
  send_buffer.release();
  receive_buffer.release();
  idle_buffers_deadline.reset();
  out_of_order.clear();
  std::vector<SeqNumber>().swap(recent_out_of_order);
  duplicate_to_report.reset();
  rack.clear();
  delivery.forget_segments();
  std::vector<std::uint8_t>().swap(segment_scratch);
}

// An application that closed cannot learn that the peer never finishes:
// FIN-WAIT-2 ends after a timeout then (Linux's tcp_fin_timeout).
void TcpConnection::Impl::time_out_orphan() {
  if (application_closed && state == TcpState::fin_wait_2 && !closes_at) closes_at = now + config.time_wait;
}

void TcpConnection::Impl::enter_closed(std::error_code why) {
  state = TcpState::closed;
  error = why;
  retransmission_deadline.reset();
  persist_deadline.reset();
  reorder_deadline.reset();
  probe_deadline.reset();
  pacing_deadline.reset();
  delayed_ack_deadline.reset();
  closes_at.reset();
  ack_now = false;
  ack_held = false;
  release_buffers();
}

// The persist timer runs while data (or the FIN) waits, nothing is in
// flight, and the window keeps it back; it backs off as the retransmission
// timer does.
void TcpConnection::Impl::update_persist_timer() {
  const bool stalled =
      may_send_data() && (unsent_bytes() > 0 || fin_unsent()) && send_max == send_unacknowledged;
  if (!stalled) {
    persist_deadline.reset();
    persist_backoff = 0;
    return;
  }
  if (!persist_deadline) persist_deadline = now + persist_interval();
}

std::optional<Instant> TcpConnection::Impl::keepalive_deadline() const {
  const bool idle = (state == TcpState::established || state == TcpState::close_wait) &&
                    send_max == send_unacknowledged && unsent_bytes() == 0;
  if (!config.keepalive || !idle) return std::nullopt;
  return heard_since + config.keepalive_idle + keepalive_probes_unanswered * config.keepalive_interval;
}

// ============================================================================
// TcpConnection
// ============================================================================

TcpConnection::TcpConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpConnection::~TcpConnection() = default;

std::unique_ptr<TcpConnection> TcpConnection::connect(Ports ports, const TcpConfig& config, SeqNumber iss,
                                                      Instant now, Transmit transmit,
                                                      TcpOutOfOrderBudget* out_of_order_budget) {
  std::unique_ptr<CongestionController> controller = make_congestion_controller(config.congestion_control);
  if (!controller) return nullptr;
  auto impl = std::make_unique<Impl>(ports, config, iss, now, std::move(transmit), TcpState::syn_sent,
                                     out_of_order_budget, std::move(controller));
  impl->transmit_pending();
  return std::unique_ptr<TcpConnection>(new TcpConnection(std::move(impl)));
}

std::unique_ptr<TcpConnection> TcpConnection::accept(Ports ports, const TcpConfig& config, const TcpSegment& syn,
                                                     SeqNumber iss, Instant now, Transmit transmit,
                                                     TcpOutOfOrderBudget* out_of_order_budget) {
  std::unique_ptr<CongestionController> controller = make_congestion_controller(config.congestion_control);
  if (!controller) return nullptr;
  auto impl = std::make_unique<Impl>(ports, config, iss, now, std::move(transmit), TcpState::syn_received,
                                     out_of_order_budget, std::move(controller));
  ++impl->counters.segments_in;
  impl->take_peer_syn(syn.header);
  impl->transmit_pending();
  return std::unique_ptr<TcpConnection>(new TcpConnection(std::move(impl)));
}

void TcpConnection::on_segment(const TcpSegment& segment, Instant now, bool in_batch) {
  impl_->now = now;
  impl_->in_batch = in_batch;
  impl_->on_segment(segment);
}

void TcpConnection::flush_held_ack(Instant now) {
  if (!impl_->ack_held) return;
  impl_->now = now;
  impl_->send_ack();
}

bool TcpConnection::on_icmp_unreachable(std::uint8_t code, SeqNumber quoted_sequence, Instant now) {
  impl_->now = now;
  constexpr std::uint8_t net_unreachable = 0, protocol_unreachable = 2, port_unreachable = 3;
  if (impl_->state == TcpState::closed) return false;
  if (quoted_sequence < impl_->send_unacknowledged || quoted_sequence >= impl_->send_max) return false;
  const bool refused = code == protocol_unreachable || code == port_unreachable;
  if (refused && impl_->state == TcpState::syn_sent) {
    impl_->enter_closed(error_of(std::errc::connection_refused));
    return true;
  }
  impl_->soft_error = refused                     ? error_of(std::errc::connection_refused)
                      : code == net_unreachable ? error_of(std::errc::network_unreachable)
                                                : error_of(std::errc::host_unreachable);
  return true;
}

void TcpConnection::on_timer(Instant now) {
  impl_->now = now;
  impl_->on_timer();
}

std::optional<Instant> TcpConnection::next_timer() const {
  std::optional<Instant> earliest;
  for (const std::optional<Instant>& deadline :
       {impl_->retransmission_deadline, impl_->persist_deadline, impl_->reorder_deadline, impl_->probe_deadline,
        impl_->pacing_deadline, impl_->delayed_ack_deadline,
        impl_->closes_at, impl_->keepalive_deadline(), impl_->idle_buffers_deadline}) {
    if (deadline && (!earliest || *deadline < *earliest)) earliest = deadline;
  }
  return earliest;
}

Result<std::size_t> TcpConnection::send(std::span<const std::uint8_t> data, Instant now) {
  Impl& c = *impl_;
  c.now = now;
  if (c.error) return c.error;
  if (!c.accepts_writes()) return error_of(std::errc::broken_pipe);
  const std::size_t taken = c.send_buffer.push(data);
  c.transmit_pending();
  return taken;
}

Result<std::size_t> TcpConnection::receive(std::span<std::uint8_t> buffer, Instant now) {
  Impl& c = *impl_;
  c.now = now;
  if (!c.receive_buffer.empty()) {
    const std::size_t count = std::min(buffer.size(), c.receive_buffer.size());
    c.receive_buffer.copy_out(0, buffer.first(count));
    c.receive_buffer.pop(count);
    c.forget_urgent_read();
    c.note_emptied_buffers();
    if (c.state == TcpState::time_wait || c.state == TcpState::closed) c.receive_buffer.release();
    c.send_window_update_if_grown();
    return count;
  }
  if (c.fin_received) return std::size_t{0};
  if (c.error) return c.error;
  if (c.state == TcpState::closed) return std::size_t{0};
  return error_of(std::errc::resource_unavailable_try_again);
}

void TcpConnection::shutdown_write(Instant now) {
  impl_->now = now;
  impl_->shutdown_write();
}

void TcpConnection::close(Instant now) {
  Impl& c = *impl_;
  c.now = now;
  c.application_closed = true;
  if (c.state == TcpState::closed) return;
  if (c.state == TcpState::syn_sent) {
    c.enter_closed({});
  } else if (!c.receive_buffer.empty()) {
    c.send_reset(c.send_max, true);
    c.enter_closed({});
  } else {
    c.shutdown_write();
    c.time_out_orphan();
  }
}

void TcpConnection::abort(Instant now) {
  Impl& c = *impl_;
  c.now = now;
  if (c.state != TcpState::syn_sent && c.state != TcpState::closed) c.send_reset(c.send_max, true);
  c.enter_closed({});
}

void TcpConnection::set_nodelay(bool nodelay, Instant now) {
  impl_->now = now;
  impl_->config.nodelay = nodelay;
  impl_->transmit_pending();
}

void TcpConnection::set_congestion_trace(CongestionTrace trace) {
  impl_->congestion_trace = std::move(trace);
  impl_->last_traced.reset();
  impl_->trace_congestion();
}

void TcpConnection::set_keepalive(bool enabled, Instant now) {
  impl_->now = now;
  impl_->config.keepalive = enabled;
  impl_->heard_since = now;
  impl_->keepalive_probes_unanswered = 0;
}

TcpState TcpConnection::state() const { return impl_->state; }
std::error_code TcpConnection::error() const { return impl_->error; }
bool TcpConnection::was_established() const { return impl_->established_once; }

std::size_t TcpConnection::urgent_bytes() const { return impl_->urgent_bytes(); }

bool TcpConnection::readable() const {
  const Impl& c = *impl_;
  return c.read_loan_filled > 0 || !c.receive_buffer.empty() || c.fin_received || c.error ||
         c.state == TcpState::closed;
}

void TcpConnection::lend_read_buffer(std::span<std::uint8_t> buffer) {
  impl_->read_loan = buffer;
  impl_->read_loan_filled = 0;
}

std::size_t TcpConnection::take_read_buffer() {
  impl_->read_loan = {};
  return std::exchange(impl_->read_loan_filled, 0);
}

std::size_t TcpConnection::send_space() const {
  return impl_->accepts_writes() ? impl_->send_buffer.free() : 0;
}

bool TcpConnection::has_unsent() const { return impl_->unsent_bytes() > 0; }

bool TcpConnection::all_acknowledged() const {
  return impl_->send_buffer.empty() && impl_->send_unacknowledged == impl_->send_max;
}

TcpConnection::Ports TcpConnection::ports() const { return impl_->ports; }

TcpInfo TcpConnection::info() const {
  const Impl& c = *impl_;
  TcpInfo info;
  info.state = c.state;
  info.send_unacknowledged = c.send_unacknowledged;
  info.send_next = c.send_next;
  info.send_window = c.send_window;
  info.receive_next = c.receive_next;
  info.receive_window = c.receive_window();
  info.max_segment_size = static_cast<std::uint16_t>(c.max_payload());
  info.send_window_scale = c.send_window_scale;
  info.receive_window_scale = c.receive_window_scale;
  info.timestamps = c.timestamps;
  info.sack = c.sack;
  info.congestion_control = c.congestion.controller().name();
  info.congestion_window = c.congestion.window();
  info.slow_start_threshold = c.congestion.controller().ssthresh();
  info.congestion_phase = c.congestion.phase();
  info.in_recovery = c.congestion.in_recovery();
  info.pacing_rate = static_cast<std::uint64_t>(c.congestion.pacing_rate().value_or(0));
  info.smoothed_rtt = c.rtt.smoothed();
  info.rtt_variance = c.rtt.variance();
  info.rto = c.rtt.rto();
  info.bytes_unsent = c.unsent_bytes();
  info.bytes_in_flight = c.bytes_in_flight();
  info.bytes_readable = c.receive_buffer.size();
  info.urgent_bytes = c.urgent_bytes();
  info.out_of_order_bytes = c.out_of_order.bytes();
  info.out_of_order_segments = c.out_of_order.size();
  return info;
}

const TcpCounters& TcpConnection::counters() const { return impl_->counters; }

// ============================================================================
// Free functions
// ============================================================================

std::optional<wire::TcpHeader> reset_for(const TcpSegment& segment) {
  const TcpHeader& in = segment.header;
  if (in.has(flag::rst)) return std::nullopt;
  TcpHeader reset;
  reset.source_port = in.destination_port;
  reset.destination_port = in.source_port;
  if (in.has(flag::ack)) {
    reset.sequence = in.acknowledgment;
    reset.flags = flag::rst;
  } else {
    reset.acknowledgment = in.sequence + sequence_length(segment);
    reset.flags = flag::rst | flag::ack;
  }
  return reset;
}

SeqNumber initial_sequence_number(std::span<const std::uint8_t> connection_id, std::uint64_t secret, Instant now) {
  // M: a clock ticking every 4 µs (RFC 9293 §3.4.1).
  const auto ticks = static_cast<std::uint32_t>(duration_cast<microseconds>(now.time_since_epoch()).count() / 4);
  // F: SipHash keyed with the secret; the second key half is derived from it
  // (a different odd multiple) so that one 64-bit secret keys all 128 bits.
  const std::uint64_t hash = siphash_2_4(secret, secret * 0x9e3779b97f4a7c15ull + 1, connection_id);
  return SeqNumber(ticks + static_cast<std::uint32_t>(hash));
}

}  // namespace utcp
