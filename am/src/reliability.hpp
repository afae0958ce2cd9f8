// The UAM/AMUDP reliability state machine, per peer, apart from any I/O and
// with time passed in (no clock reads here), so that it can be driven packet
// by packet on virtual time in tests.
//
// Credits are request instances ("slots"): a requester holds at most `depth`
// requests to one peer, and a slot is busy until the request is answered.
// Every use of a slot carries the next sequence number of that slot. The
// receiver remembers, per slot, the last sequence number it handled: a copy of
// that request is a duplicate (answered again), an older one is stale
// (dropped).
//
// Retransmission follows RFC 6298 with one timer state per peer, as TCP keeps
// one per connection: the retransmission timeout (RTO) comes from the round
// trips measured (SRTT + 4 RTTVAR), within [min_rto, max_rto]; a request
// unanswered for one RTO goes again, and the RTO doubles once per timeout
// that fires until a valid measurement ends the backoff. Karn's rule: a
// request sent more than once is not measured (which copy was answered is
// not known). The backoff is the peer's, not the request's: while the peer
// answers other requests at the measured pace, one that was lost several
// times goes again after one RTO, not after 2^n.
//
// Giving up: a peer is taken for dead on silence, never because some request
// went unanswered while its other frames keep arriving (that is loss, or a
// slow handler). Dead: a request to it is open, no frame at all came from it
// for the peer timeout, and, when losses were measured, enough rounds of
// retransmission went unanswered that a live peer would almost surely have
// answered one (rounds_to_give_up). On a clean path that is the timeout
// itself; at 30 % loss each way, about 21 rounds, which with max_rto = 1 s
// is ~16 s.
//
// A request is answered either by its handler's reply or, when the handler
// does not reply, by an acknowledgement (slot, seq). Acknowledgements are not
// sent one per request: the receiver collects them and they travel together,
// on whatever message goes back to the requester next (a request or a reply)
// or in a message of their own once half the window is owed, once the oldest
// has waited a while, or when the receiver has nothing else to do. Neither
// replies nor acknowledgements are acknowledged: a lost one shows up as a
// retransmitted request, which is answered again the same way.
//
// Why explicit (slot, seq) pairs and not one cumulative sequence number: a
// cumulative "everything up to n is handled" cannot tell the requester which
// of those requests also have a reply on the way (a reply may be lost or
// overtaken on an unreliable VI), so it could not close them. An
// acknowledgement names exactly the requests that have no reply.
//
// Opening a slot, closing it and hearing from the peer read no clock: the
// next advance() stamps them with its `now`. Sending and receiving are the
// latency path, and a clock read there costs as much as the rest of the
// bookkeeping; a send stamped a little late only makes the retransmission
// and the give-up come that much later, never early, and a frame heard is
// stamped late the same way. Round trips are measured on some requests,
// with the clock read at both ends: when open() asks for it
// (wants_send_time: one request in time_every, and every one while the RTO
// is backed off, so that the backoff ends with the first that gets through),
// the caller gives the send time (sent_at); when the answer closes it,
// measuring() is true and the caller gives the time (answered_at). Else the
// next advance() stands in. So a stream of requests reads the clock twice
// per time_every requests, and the latency path of one not timed, never.
#pragma once

#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdint>
#include <vector>

namespace am {

struct RetryPolicy {
  bool retransmit = true;                     // false on reliable VIs: the engine delivers
  std::uint64_t min_rto_ns = 20'000'000;      // the RTO until a round trip is measured, and its floor
  std::uint64_t max_rto_ns = 1'000'000'000;   // the ceiling of one RTO, backed off or not
  std::uint64_t timeout_ns = 10'000'000'000;  // silence that makes a peer dead (0: never)
  unsigned time_every = 64;                   // requests opened per one timed (each while backed off)
};

inline constexpr std::uint64_t kNever = UINT64_MAX;
inline constexpr std::uint64_t kUnstamped = UINT64_MAX;

// How many unanswered retransmission rounds it takes, on top of the timeout,
// to give up on a silent peer when a fraction `loss` of transmissions went
// unanswered for an RTO: enough that a live peer would have answered one of
// them but for a chance of kGiveUpRisk (losses taken as independent; a round
// may carry several requests, which only makes it safer). Bounded, so that
// a dead peer is still given up in bounded time on the worst path.
inline constexpr double kGiveUpRisk = 1e-6;
inline constexpr unsigned kMaxGiveUpRounds = 64;
inline unsigned rounds_to_give_up(double loss) {
  if (loss <= 0) return 0;
  if (loss >= 1) return kMaxGiveUpRounds;
  return unsigned(std::min<double>(kMaxGiveUpRounds, std::ceil(std::log(kGiveUpRisk) / std::log(loss))));
}

class SendWindow {
 public:
  SendWindow(std::uint16_t depth, const RetryPolicy& policy)
      : policy_(policy), depth_(depth), slots_(depth), rto_base_ns_(std::min(policy.min_rto_ns, policy.max_rto_ns)) {
    free_.resize(depth);
    for (std::uint16_t i = 0; i < depth; ++i) free_[i] = std::uint16_t(depth - 1 - i);
    free_count_ = depth;
    unstamped_.reserve(depth);
  }
  std::uint16_t depth() const { return depth_; }
  bool has_credit() const { return free_count_ != 0; }
  unsigned outstanding() const { return unsigned(depth_ - free_count_); }
  bool is_open(std::uint16_t slot) const { return slot < depth_ && slots_[slot].open; }
  std::uint32_t seq(std::uint16_t slot) const { return slots_[slot].seq; }

  // The RTO now: measured, backed off, within [min_rto, max_rto].
  std::uint64_t rto_ns() const { return std::min(policy_.max_rto_ns, rto_base_ns_ << backoff_); }
  std::uint64_t smoothed_rtt_ns() const { return srtt_ns_; }
  // The fraction of transmissions that went unanswered for an RTO (and were
  // sent again), over about the last kLossWindow transmissions answered.
  double loss() const { return transmissions_ ? double(unanswered_) / double(transmissions_) : 0; }
  // Retransmission rounds since the peer was last heard from.
  unsigned unanswered_rounds() const { return unanswered_rounds_; }

  // Opens a request instance; returns its slot. Needs a credit. Its send time
  // is the `now` of the next advance().
  [[gnu::always_inline]] std::uint16_t open() {
    const std::uint16_t slot = free_[--free_count_];
    Slot& s = slots_[slot];
    ++s.seq;
    s.open = true;
    s.resent = 0;
    s.timed_sent_ns = kUnstamped;
    send_time_wanted_ = backoff_ > 0 || ++opened_untimed_ >= policy_.time_every;
    if (send_time_wanted_) {
      last_opened_ = slot;
      opened_untimed_ = 0;
    }
    // A slot closed and reopened before it was stamped is on the list already.
    if (s.sent_ns != kUnstamped) {
      s.sent_ns = kUnstamped;
      unstamped_.push_back(slot);
    }
    return slot;
  }

  // The open instance in `slot` leaves only now (a bundle filled for a
  // while): its send time becomes the `now` of the next advance() again.
  void restamp(std::uint16_t slot) {
    Slot& s = slots_[slot];
    untime(slot);  // it had not left: no round trip yet
    if (s.sent_ns == kUnstamped) return;
    s.sent_ns = kUnstamped;
    unstamped_.push_back(slot);
  }

  // A reply or an acknowledgement for (slot, seq): true if it answers an open
  // instance, which closes; false for a duplicate or stale one.
  [[gnu::always_inline]] bool close(std::uint16_t slot, std::uint32_t seq) {
    if (!is_open(slot) || slots_[slot].seq != seq) return false;
    const Slot& s = slots_[slot];
    if (s.timed_sent_ns != kUnstamped) {
      answer_pending_ = true;
      answered_sent_ns_ = s.timed_sent_ns;
    }
    ++transmissions_;
    if (s.resent) [[unlikely]] {
      transmissions_ += s.resent;
      unanswered_ += s.resent;
    }
    if (transmissions_ >= kLossWindow) {  // older transmissions count half, and so on
      transmissions_ /= 2;
      unanswered_ /= 2;
    }
    release(slot);
    return true;
  }

  // The request just opened is to be timed: sent_at(now) once it left.
  bool wants_send_time() const { return send_time_wanted_; }
  void sent_at(std::uint64_t now_ns) {
    send_time_wanted_ = false;
    if (slots_[last_opened_].open) slots_[last_opened_].timed_sent_ns = now_ns;
  }

  // The timed request was answered by the last close(): answered_at(now)
  // measures its round trip.
  bool measuring() const { return answer_pending_; }
  void answered_at(std::uint64_t now_ns) {
    answer_pending_ = false;
    measured(now_ns - std::min(now_ns, answered_sent_ns_));
  }

  // Any frame from the peer arrived (an answer or not): it is alive. Stamped
  // by the next advance().
  void heard() { heard_ = true; }

  // Earliest time advance() has something to do (kNever if nothing; 0 while
  // a send time or an answer is still to be stamped).
  std::uint64_t next_deadline() const {
    return unstamped_.empty() && !answer_pending_ && !send_time_wanted_ ? next_deadline_ : 0;
  }

  // Stamps what happened since the last call, calls retransmit(slot) for
  // every instance unanswered for an RTO, and give_up() when the peer is to
  // be taken for dead (see the top); the caller then closes what is open
  // (close_all), after marking the peer dead, so that what it runs for each
  // request cannot open another.
  template <class Retransmit, class GiveUp>
  void advance(std::uint64_t now_ns, Retransmit&& retransmit, GiveUp&& give_up) {
    if (answer_pending_) answered_at(now_ns);
    if (send_time_wanted_) sent_at(now_ns);
    for (std::uint16_t slot : unstamped_) {
      Slot& s = slots_[slot];
      s.sent_ns = s.first_sent_ns = now_ns;
      if (s.open) next_deadline_ = std::min(next_deadline_, now_ns + rto_ns());
    }
    unstamped_.clear();
    if (heard_) {
      heard_ = false;
      last_heard_ns_ = now_ns;
      unanswered_rounds_ = 0;
    }
    if (now_ns < next_deadline_) return;
    next_deadline_ = kNever;
    const std::uint64_t rto = rto_ns();
    std::uint64_t oldest_ns = kNever;  // first transmission of the oldest open instance
    bool resent = false;
    for (std::uint16_t slot = 0; slot < slots_.size(); ++slot) {
      Slot& s = slots_[slot];
      if (!s.open) continue;
      oldest_ns = std::min(oldest_ns, s.first_sent_ns);
      if (!policy_.retransmit) continue;
      if (now_ns - s.sent_ns >= rto) {
        untime(slot);  // Karn's rule
        s.sent_ns = now_ns;
        ++s.resent;
        resent = true;
        retransmit(slot);
      }
      next_deadline_ = std::min(next_deadline_, s.sent_ns + rto);
    }
    if (resent) {
      ++unanswered_rounds_;
      // RFC 6298 §5.5, once per timeout: the timeouts of requests sent
      // within one RTO of each other are one timer's expiry in TCP.
      if (now_ns >= backoff_hold_ns_) {
        if (rto_ns() < policy_.max_rto_ns) ++backoff_;
        backoff_hold_ns_ = now_ns + rto_ns();
      }
    }
    if (oldest_ns == kNever || policy_.timeout_ns == 0) return;
    const std::uint64_t give_up_ns = std::max(last_heard_ns_, oldest_ns) + policy_.timeout_ns;
    if (now_ns >= give_up_ns && unanswered_rounds_ >= rounds_to_give_up(loss())) {
      give_up();
      return;
    }
    // Past the timeout but short of rounds, the next retransmission looks again.
    if (now_ns < give_up_ns) next_deadline_ = std::min(next_deadline_, give_up_ns);
  }

  // Closes every open instance (the peer is gone), calling f(slot) for each.
  template <class F>
  void close_all(F&& f) {
    for (std::uint16_t slot = 0; slot < slots_.size(); ++slot)
      if (slots_[slot].open) {
        release(slot);
        f(slot);
      }
    if (outstanding() == 0) next_deadline_ = kNever;
  }

 private:
  static constexpr std::uint32_t kLossWindow = 1024;

  struct Slot {
    std::uint32_t seq = 0;
    bool open = false;
    std::uint32_t resent = 0;        // retransmissions of the current instance
    std::uint64_t sent_ns = 0;       // last transmission (kUnstamped: not yet known)
    std::uint64_t first_sent_ns = 0;
    std::uint64_t timed_sent_ns = kUnstamped;  // timed: when it left (kUnstamped: not timed)
  };
  [[gnu::always_inline]] void release(std::uint16_t slot) {
    slots_[slot].open = false;
    free_[free_count_++] = slot;
    untime(slot);
  }
  void untime(std::uint16_t slot) {
    slots_[slot].timed_sent_ns = kUnstamped;
    if (slot == last_opened_) send_time_wanted_ = false;
  }
  // RFC 6298 §2.2-2.4 (α = 1/8, β = 1/4); a valid measurement ends the backoff (§5.7).
  void measured(std::uint64_t rtt_ns) {
    if (!has_rtt_) {
      has_rtt_ = true;
      srtt_ns_ = rtt_ns;
      rttvar_ns_ = rtt_ns / 2;
    } else {
      const std::uint64_t error = srtt_ns_ > rtt_ns ? srtt_ns_ - rtt_ns : rtt_ns - srtt_ns_;
      rttvar_ns_ = (3 * rttvar_ns_ + error) / 4;
      srtt_ns_ = (7 * srtt_ns_ + rtt_ns) / 8;
    }
    const std::uint64_t before = rto_ns();
    rto_base_ns_ = std::clamp(srtt_ns_ + 4 * rttvar_ns_, std::min(policy_.min_rto_ns, policy_.max_rto_ns),
                              policy_.max_rto_ns);
    backoff_ = 0;
    if (rto_ns() < before) next_deadline_ = 0;  // retransmissions may be due earlier now
  }

  RetryPolicy policy_;
  std::uint16_t depth_;  // slots_.size(), kept: that is a division (a Slot is 40 bytes), on every answer
  std::vector<Slot> slots_;
  // LIFO: recently used slots (and their buffers) come back first. A stack
  // of depth_ entries, free_count_ of them free: never more (a slot is
  // released only once opened), so no vector's capacity check on the path
  // of every request and answer.
  std::vector<std::uint16_t> free_;
  std::uint16_t free_count_ = 0;
  std::vector<std::uint16_t> unstamped_;  // opened since the last advance(); each slot once
  std::uint64_t next_deadline_ = kNever;
  // Round trip and timeout (RFC 6298).
  bool has_rtt_ = false;
  std::uint64_t srtt_ns_ = 0, rttvar_ns_ = 0;
  std::uint64_t rto_base_ns_;                // from the measurements, before backoff
  unsigned backoff_ = 0;                     // doublings since the last valid measurement
  std::uint64_t backoff_hold_ns_ = 0;        // no further doubling before this
  std::uint16_t last_opened_ = 0;
  bool send_time_wanted_ = false;            // for last_opened_: sent_at() or the next advance() stamps it
  bool answer_pending_ = false;              // a timed request was answered: answered_at() or the next advance()
  std::uint64_t answered_sent_ns_ = 0;       // ... and it was sent then
  unsigned opened_untimed_ = UINT_MAX - 1;   // requests opened since one was timed (the first is)
  // Loss and silence.
  std::uint32_t transmissions_ = 0, unanswered_ = 0;
  bool heard_ = false;
  std::uint64_t last_heard_ns_ = 0;
  unsigned unanswered_rounds_ = 0;
};

enum class Admission { fresh, duplicate, stale, bad_slot };

// How the receiver answered the current use of a slot, which says how to
// answer a copy of it.
enum class Answer : std::uint8_t {
  running,       // the handler has not finished (or no request yet): nothing to send
  replied,       // the cached reply goes out again
  acknowledged,  // an acknowledgement goes out again
};

// An acknowledgement of request (slot, seq), laid out as on the wire
// (wire.hpp: slot, two zero bytes, seq), so that a message's are copied in one go.
struct Ack {
  Ack() = default;  // an array's, to be filled: nothing written
  Ack(std::uint16_t s, std::uint32_t q) : slot(s), zero(0), seq(q) {}
  std::uint16_t slot;
  std::uint16_t zero;
  std::uint32_t seq;
};

class ReceiveFilter {
 public:
  // Acknowledgements become due once half the window is owed, or once the
  // oldest has waited `max_delay` ticks (the caller's unit of time).
  ReceiveFilter(std::uint16_t depth, std::uint64_t max_delay)
      : last_(depth, 0),
        answer_(depth, Answer::running),
        owed_(depth),
        owed_slot_(depth, 0),
        batch_(std::max(1, depth / 2)),
        max_delay_(max_delay) {}

  // Classifies request (slot, seq); a fresh one is recorded as handled.
  Admission admit(std::uint16_t slot, std::uint32_t seq) {
    if (slot >= last_.size()) return Admission::bad_slot;
    std::uint32_t& last = last_[slot];
    if (seq == last) return Admission::duplicate;
    // Wrap-around comparison: a requester moves a slot on by one per answer.
    if (std::int32_t(seq - last) < 0) return Admission::stale;
    last = seq;
    answer_[slot] = Answer::running;
    return Admission::fresh;
  }
  Answer answer(std::uint16_t slot) const { return answer_[slot]; }

  // The handler of the slot's current request replied.
  void replied(std::uint16_t slot) { answer_[slot] = Answer::replied; }

  // The handler of the slot's current request did not reply: it is owed an
  // acknowledgement, sent with others.
  void acknowledge(std::uint16_t slot, std::uint64_t now) {
    answer_[slot] = Answer::acknowledged;
    owe(slot, now);
  }

  // A copy of an acknowledged request: the requester retransmitted, so its
  // acknowledgement was lost (or is slow). Owed again, and due at once.
  void acknowledge_again(std::uint16_t slot, std::uint64_t now) {
    owe(slot, now);
    urgent_ = true;
  }

  bool owes_acks() const { return owed_count_ != 0; }
  // True when the owed acknowledgements should go out in a message of their own.
  bool ack_due(std::uint64_t now) const {
    return owed_count_ != 0 && (owed_count_ >= batch_ || urgent_ || now - oldest_ >= max_delay_);
  }

  // Takes up to `max` owed acknowledgements, oldest first, into `out`;
  // returns how many.
  unsigned take_acks(Ack* out, unsigned max) {
    const unsigned n = std::min(max, owed_count_);
    std::copy_n(owed_.begin(), n, out);
    for (unsigned i = 0; i < n; ++i) owed_slot_[out[i].slot] = 0;
    std::copy(owed_.begin() + n, owed_.begin() + owed_count_, owed_.begin());
    owed_count_ -= n;
    if (owed_count_ == 0) urgent_ = false;
    return n;
  }

 private:
  // At most one owed acknowledgement per slot, for its latest request: the
  // list stays within the window whatever a peer sends.
  void owe(std::uint16_t slot, std::uint64_t now) {
    if (owed_slot_[slot]) {
      // Only a misbehaving requester reuses a slot before it is answered.
      for (unsigned i = 0; i < owed_count_; ++i)
        if (owed_[i].slot == slot) owed_[i].seq = last_[slot];
      return;
    }
    if (owed_count_ == 0) oldest_ = now;
    owed_slot_[slot] = 1;
    owed_[owed_count_++] = Ack{slot, last_[slot]};
  }

  std::vector<std::uint32_t> last_;  // last sequence number handled per slot (0: none yet)
  std::vector<Answer> answer_;       // per slot: how its last request was answered
  // Acknowledgements not yet sent, oldest first: the first owed_count_, room
  // for one per slot made once (owe() is on the path of every request that
  // does not reply, and stays small without a vector's growth).
  std::vector<Ack> owed_;
  unsigned owed_count_ = 0;
  std::vector<std::uint8_t> owed_slot_;  // per slot: in owed_
  std::size_t batch_;
  std::uint64_t max_delay_;
  std::uint64_t oldest_ = 0;         // when the oldest owed acknowledgement was queued
  bool urgent_ = false;              // a retransmission asked for one
};

}  // namespace am
