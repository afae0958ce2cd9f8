// Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation), the
// sender's measure of how fast the network delivers its data, from which a
// model-based congestion controller (BBR, utcp/bbr.hpp) works. Each segment
// sent remembers what the connection had delivered by then and when; an ACK
// that delivers segments (cumulatively or by SACK) takes the most recently
// sent of them and compares: bytes delivered since, over the longer of the
// send interval and the ACK interval (the shorter one may be compressed).
// Like the connection, it reads no clock: times are passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

#include "utcp/congestion.hpp"  // RateSample
#include "utcp/reassembly.hpp"  // Instant
#include "utcp/seq.hpp"

namespace utcp {

class DeliveryRateSampler {
 public:
  // [start, end) of sequence space went out at `now` (again, if it was sent
  // before: it is then remembered as this transmission, and its RTT is
  // never sampled). `nothing_in_flight`: nothing was outstanding before it;
  // the intervals then start afresh.
  void on_transmit(wire::SeqNumber start, wire::SeqNumber end, Instant now, bool nothing_in_flight);
  // SND.UNA moved to `ack`: everything below it not SACKed before is delivered.
  void on_cumulative_ack(wire::SeqNumber ack, Instant now);
  // A SACK block: the segments wholly inside it are delivered.
  void on_sack_block(wire::SeqNumber left, wire::SeqNumber right, Instant now);
  // The application has nothing more to send while cwnd has room
  // (`bytes_in_flight` out): samples taken until what is now in flight is
  // delivered are app-limited (they measure the application, not the path).
  void on_app_limited(std::uint32_t bytes_in_flight);

  // The sample of the ACK just processed (by the calls above), or none when
  // it delivered nothing. The caller adds what the ACK did otherwise
  // (loss marked, bytes in flight). Starts the next ACK's.
  std::optional<RateSample> take_sample(Instant now);

  std::uint64_t delivered() const { return delivered_; }
  bool app_limited() const { return app_limited_until_ != 0; }
  std::size_t segments_remembered() const { return segments_.size(); }
  // The connection is over (or nothing it sent will be acknowledged): the
  // segments' records go, the counts stay.
  void forget_segments() { segments_ = {}; }

 private:
  struct Segment {
    wire::SeqNumber end;
    Instant sent_at;
    Instant first_sent_at;  // the connection's first_sent_time when this one went
    Instant delivered_at;   // the connection's delivered_time then
    std::uint64_t delivered = 0;
    bool app_limited = false;
    bool retransmitted = false;
    bool sacked = false;
  };
  void deliver(const Segment& segment, std::uint32_t length, Instant now);
  void split_at(wire::SeqNumber point);

  std::map<wire::SeqNumber, Segment> segments_;
  std::uint64_t delivered_ = 0;  // C.delivered: bytes
  Instant delivered_at_{};      // C.delivered_time
  Instant first_sent_at_{};     // C.first_sent_time
  std::uint64_t app_limited_until_ = 0;  // C.app_limited: 0, or the delivered count that ends it
  std::optional<std::chrono::microseconds> min_rtt_;  // intervals shorter than this are not believed

  // The ACK being processed: the most recently sent segment it delivered.
  struct Pending {
    // Declared, not implied: clang cannot make the implicit default
    // constructor of a nested class with member initializers while the
    // enclosing class is incomplete (optional::emplace() would not compile).
    Pending() {}
    std::uint64_t prior_delivered = 0;
    Instant prior_time;
    Instant sent_at;
    std::chrono::microseconds send_elapsed{0};
    bool app_limited = false;
    bool retransmitted = false;
    std::uint32_t newly_delivered = 0;
  };
  std::optional<Pending> pending_;
};

}  // namespace utcp
