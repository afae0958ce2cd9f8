// The UAM/AMUDP reliability state machine, per peer, apart from any I/O and
// with time passed in (no clock reads here), so that it can be driven packet
// by packet on virtual time in tests.
//
// Credits are request instances ("slots"): a requester holds at most `depth`
// requests to one peer, and a slot is busy until the request is answered.
// Every use of a slot carries the next sequence number of that slot. The
// receiver remembers, per slot, the last sequence number it handled: a copy of
// that request is a duplicate (answered again), an older one is stale
// (dropped). Retransmission backs off exponentially; a request unanswered for
// longer than the timeout expires.
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
// Opening a slot reads no clock: the first advance() after it stamps the send
// time. Sending is the latency path, and a clock read there costs as much as
// the rest of the bookkeeping; a stamp taken a little late only makes the
// retransmission and the timeout come that much later, never early.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace am {

struct RetryPolicy {
  bool retransmit = true;                    // false on reliable VIs: the engine delivers
  std::uint64_t first_ns = 20'000'000;       // first retransmission after this long
  std::uint64_t max_interval_ns = 1'000'000'000;
  std::uint64_t timeout_ns = 10'000'000'000;  // unanswered this long: expired (0: never)
};

inline constexpr std::uint64_t kNever = UINT64_MAX;
inline constexpr std::uint64_t kUnstamped = UINT64_MAX;

class SendWindow {
 public:
  SendWindow(std::uint16_t depth, const RetryPolicy& policy) : policy_(policy), slots_(depth) {
    for (std::uint16_t i = depth; i > 0; --i) free_.push_back(std::uint16_t(i - 1));
    unstamped_.reserve(depth);
  }
  std::uint16_t depth() const { return std::uint16_t(slots_.size()); }
  bool has_credit() const { return !free_.empty(); }
  unsigned outstanding() const { return unsigned(slots_.size() - free_.size()); }
  bool is_open(std::uint16_t slot) const { return slot < slots_.size() && slots_[slot].open; }
  std::uint32_t seq(std::uint16_t slot) const { return slots_[slot].seq; }

  // Opens a request instance; returns its slot. Needs a credit. Its send time
  // is the `now` of the next advance().
  std::uint16_t open() {
    const std::uint16_t slot = free_.back();
    free_.pop_back();
    Slot& s = slots_[slot];
    ++s.seq;
    s.open = true;
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
    if (s.sent_ns == kUnstamped) return;
    s.sent_ns = kUnstamped;
    unstamped_.push_back(slot);
  }

  // A reply or an acknowledgement for (slot, seq): true if it answers an open
  // instance, which closes; false for a duplicate or stale one.
  bool close(std::uint16_t slot, std::uint32_t seq) {
    if (!is_open(slot) || slots_[slot].seq != seq) return false;
    release(slot);
    return true;
  }

  // Earliest time advance() has something to do (kNever if nothing; 0 while
  // a send time is still to be stamped).
  std::uint64_t next_deadline() const { return unstamped_.empty() ? next_deadline_ : 0; }

  // Calls retransmit(slot) for every instance whose retransmission is due
  // (the next one is scheduled at twice the interval, capped), and
  // expire(slot) for every instance past the timeout (it closes first).
  template <class Retransmit, class Expire>
  void advance(std::uint64_t now_ns, Retransmit&& retransmit, Expire&& expire) {
    for (std::uint16_t slot : unstamped_) {
      Slot& s = slots_[slot];
      s.sent_ns = now_ns;
      s.interval_ns = policy_.first_ns;
      s.next_ns = due(s);
      if (s.open) next_deadline_ = std::min(next_deadline_, s.next_ns);
    }
    unstamped_.clear();
    if (now_ns < next_deadline_) return;
    next_deadline_ = kNever;
    for (std::uint16_t slot = 0; slot < slots_.size(); ++slot) {
      Slot& s = slots_[slot];
      if (!s.open) continue;
      if (policy_.timeout_ns && now_ns - s.sent_ns >= policy_.timeout_ns) {
        release(slot);
        expire(slot);
        continue;
      }
      if (now_ns >= s.next_ns && policy_.retransmit) {
        s.interval_ns = std::min(s.interval_ns * 2, policy_.max_interval_ns);
        s.next_ns = due(s, now_ns);
        retransmit(slot);
      }
      next_deadline_ = std::min(next_deadline_, s.next_ns);
    }
  }

  // Closes every open instance (the peer is gone), calling f(slot) for each.
  template <class F>
  void close_all(F&& f) {
    for (std::uint16_t slot = 0; slot < slots_.size(); ++slot)
      if (slots_[slot].open) {
        release(slot);
        f(slot);
      }
  }

 private:
  struct Slot {
    std::uint32_t seq = 0;
    bool open = false;
    std::uint64_t sent_ns = 0;      // first transmission (kUnstamped: not yet known)
    std::uint64_t next_ns = kNever;  // next retransmission or expiry
    std::uint64_t interval_ns = 0;
  };
  // Next event for a slot: a retransmission, or else its expiry.
  std::uint64_t due(const Slot& s, std::uint64_t now_ns) const {
    const std::uint64_t expiry = policy_.timeout_ns ? s.sent_ns + policy_.timeout_ns : kNever;
    return policy_.retransmit ? std::min(now_ns + s.interval_ns, expiry) : expiry;
  }
  std::uint64_t due(const Slot& s) const { return due(s, s.sent_ns); }
  void release(std::uint16_t slot) {
    slots_[slot].open = false;
    free_.push_back(slot);
  }

  RetryPolicy policy_;
  std::vector<Slot> slots_;
  std::vector<std::uint16_t> free_;  // LIFO: recently used slots (and their buffers) come back first
  std::vector<std::uint16_t> unstamped_;  // opened since the last advance(); each slot once
  std::uint64_t next_deadline_ = kNever;
};

enum class Admission { fresh, duplicate, stale, bad_slot };

// How the receiver answered the current use of a slot, which says how to
// answer a copy of it.
enum class Answer : std::uint8_t {
  running,       // the handler has not finished (or no request yet): nothing to send
  replied,       // the cached reply goes out again
  acknowledged,  // an acknowledgement goes out again
};

struct Ack {
  std::uint16_t slot;
  std::uint32_t seq;
};

class ReceiveFilter {
 public:
  // Acknowledgements become due once half the window is owed, or once the
  // oldest has waited `max_delay` ticks (the caller's unit of time).
  ReceiveFilter(std::uint16_t depth, std::uint64_t max_delay)
      : last_(depth, 0),
        answer_(depth, Answer::running),
        owed_slot_(depth, 0),
        batch_(std::max(1, depth / 2)),
        max_delay_(max_delay) {
    owed_.reserve(depth);
  }

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

  bool owes_acks() const { return !owed_.empty(); }
  // True when the owed acknowledgements should go out in a message of their own.
  bool ack_due(std::uint64_t now) const {
    return !owed_.empty() && (owed_.size() >= batch_ || urgent_ || now - oldest_ >= max_delay_);
  }

  // Takes up to `max` owed acknowledgements, oldest first, into `out`;
  // returns how many.
  unsigned take_acks(Ack* out, unsigned max) {
    const unsigned n = unsigned(std::min<std::size_t>(max, owed_.size()));
    std::copy_n(owed_.begin(), n, out);
    for (unsigned i = 0; i < n; ++i) owed_slot_[out[i].slot] = 0;
    owed_.erase(owed_.begin(), owed_.begin() + n);
    if (owed_.empty()) urgent_ = false;
    return n;
  }

 private:
  // At most one owed acknowledgement per slot, for its latest request: the
  // list stays within the window whatever a peer sends.
  void owe(std::uint16_t slot, std::uint64_t now) {
    if (owed_slot_[slot]) {
      // Only a misbehaving requester reuses a slot before it is answered.
      for (Ack& a : owed_)
        if (a.slot == slot) a.seq = last_[slot];
      return;
    }
    if (owed_.empty()) oldest_ = now;
    owed_slot_[slot] = 1;
    owed_.push_back(Ack{slot, last_[slot]});
  }

  std::vector<std::uint32_t> last_;  // last sequence number handled per slot (0: none yet)
  std::vector<Answer> answer_;       // per slot: how its last request was answered
  std::vector<Ack> owed_;            // acknowledgements not yet sent, oldest first
  std::vector<std::uint8_t> owed_slot_;  // per slot: in owed_
  std::size_t batch_;
  std::uint64_t max_delay_;
  std::uint64_t oldest_ = 0;         // when the oldest owed acknowledgement was queued
  bool urgent_ = false;              // a retransmission asked for one
};

}  // namespace am
