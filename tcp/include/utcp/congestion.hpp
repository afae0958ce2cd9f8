// Congestion control for utcp's TCP, behind an interface (what smoltcp
// calls a controller): a CongestionController owns cwnd and ssthresh and is
// told what the connection learns (data acknowledged, loss detected, a
// retransmission timeout, recovery over). It reads no clock: the time of each
// event is passed in, so that it runs on virtual time in tests.
//
// The connection keeps loss detection and recovery (duplicate ACKs, the
// recovery point, NewReno's window inflation during fast recovery: RFC 5681,
// RFC 6582; or SACK's scoreboard and pipe: RFC 6675); the controller decides
// only how large the window is outside it, how far it falls on a loss, and
// where it starts again.
//
// Three controllers come with utcp, "newreno" (RFC 5681), "cubic" (RFC
// 9438) and "bbr" (BBR v1, utcp/bbr.hpp: a model of the path instead of a
// response to loss; it paces, see pacing_rate); a program registers more by name (register_congestion_controller)
// and chooses one per socket (TcpSocket::set_congestion_control, or
// TcpConfig::congestion_control), or for all sockets with VIASTACK_UTCP_CC.
//
//   class Aimd final : public utcp::CongestionController { ... };
//   utcp::register_congestion_controller("aimd", [] { return std::make_unique<Aimd>(); });
//   socket.set_congestion_control("aimd");
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "utcp/reassembly.hpp"  // Instant
#include "utcp/result.hpp"

namespace utcp {

// What a newly acknowledging ACK tells the controller (outside recovery).
struct AckSample {
  std::uint32_t bytes_acknowledged = 0;  // data newly acknowledged (0 for an ACK of a SYN or FIN alone)
  std::uint32_t bytes_in_flight = 0;     // still outstanding after this ACK
  std::optional<std::chrono::microseconds> rtt;  // the round trip this ACK measured, if it timed one
  std::chrono::microseconds smoothed_rtt{0};     // SRTT (RFC 6298), 0 before the first sample
  Instant now;
};

// What one ACK tells about the rate of delivery
// (draft-cheng-iccrg-delivery-rate-estimation): `delivered` bytes reached the
// peer over `interval`, from the most recently sent of the segments this ACK
// delivered (cumulatively or by SACK) back to the delivery the connection had
// counted when that segment was sent. Given for every ACK that delivered
// something, in recovery too.
struct RateSample {
  std::uint64_t delivered = 0;         // bytes delivered over the interval
  std::chrono::microseconds interval{0};  // 0: no valid sample (delivered says nothing)
  std::uint64_t prior_delivered = 0;   // the connection's delivered count when that segment was sent
  std::uint64_t total_delivered = 0;   // the connection's delivered count now
  bool is_app_limited = false;         // the application, not the network, limited the interval
  std::optional<std::chrono::microseconds> rtt;  // of that segment, unless it was ever retransmitted
  std::uint32_t newly_delivered = 0;   // bytes this ACK delivered
  std::uint32_t newly_lost_segments = 0;  // segments this ACK's loss detection (RACK) marked lost
  std::uint32_t bytes_in_flight = 0;   // the pipe after this ACK (SACKed and lost segments not counted)
  Instant now;

  // Bytes per second; 0 without a valid interval.
  double delivery_rate() const {
    return interval.count() > 0 ? static_cast<double>(delivered) * 1e6 / static_cast<double>(interval.count()) : 0;
  }
};

class CongestionController {
 public:
  virtual ~CongestionController() = default;

  // The name it is registered under ("newreno", "cubic").
  virtual std::string_view name() const = 0;
  // The connection is established: `mss` is the payload of a full segment.
  virtual void start(std::uint32_t mss, Instant now) = 0;
  // An ACK acknowledged new data outside loss recovery: grow the window.
  virtual void on_ack(const AckSample& ack) = 0;
  // Loss detected by duplicate ACKs or SACK: set ssthresh and cwnd for the
  // recovery to come (with `bytes_in_flight` outstanding when it was detected).
  virtual void on_enter_recovery(std::uint32_t bytes_in_flight, Instant now) = 0;
  // Everything outstanding when recovery began is acknowledged; `bytes_in_flight`
  // are outstanding now. The window the connection goes on with.
  virtual void on_recovery_exit(std::uint32_t bytes_in_flight, Instant now) = 0;
  // The retransmission timer expired (RFC 5681 §3.1: cwnd falls to one
  // segment). `within_episode`: during a recovery, or after an earlier
  // timeout not yet repaired; what on_spurious_recovery restores is then
  // still the state from before that episode's first reduction.
  virtual void on_rto(std::uint32_t bytes_in_flight, bool within_episode, Instant now) = 0;
  // The last loss episode (a recovery, or a timeout) was spurious, as
  // D-SACK (RFC 2883) or timestamps (RFC 3522) told it the way Linux does
  // (tcp/src/tcp/loss_recovery.hpp). Go back to the window and threshold
  // from before it began (RFC 4015's response, as Linux's undo). The default
  // keeps the reduced window, which is always safe.
  virtual void on_spurious_recovery(Instant /*now*/) {}
  // Every ACK that delivered data, in recovery too, with its rate sample
  // (after on_ack or the recovery event the same ACK caused). Model-based
  // controllers (BBR) work from these; the default ignores them.
  virtual void on_rate_sample(const RateSample& /*sample*/) {}
  // The rate, in bytes of payload per second, at which the connection
  // spaces its segments; none: it sends as fast as cwnd and the windows
  // allow (the default, an ACK-clocked controller).
  virtual std::optional<double> pacing_rate() const { return std::nullopt; }

  virtual std::uint32_t cwnd() const = 0;      // bytes
  virtual std::uint32_t ssthresh() const = 0;  // bytes
};

// RFC 6928's initial window: min(10 MSS, max(2 MSS, 14600 bytes)).
std::uint32_t initial_window(std::uint32_t mss);

// What a paced sender may send at once at `rate` bytes per second: a
// millisecond's worth, at least two segments (Linux's TSO sizing for
// pacing, without its 64 KB cap: no segmentation offload here). A host
// wakes about once a millisecond; smaller bursts would cap the rate.
std::uint32_t pacing_burst(double rate, std::uint32_t mss);

// RFC 5681: slow start (one MSS per MSS acknowledged), congestion avoidance
// (about one MSS per window), ssthresh half the flight on a loss; RFC 6582
// §3.2 step 4's first option when recovery ends.
class NewRenoController final : public CongestionController {
 public:
  std::string_view name() const override { return "newreno"; }
  void start(std::uint32_t mss, Instant now) override;
  void on_ack(const AckSample& ack) override;
  void on_enter_recovery(std::uint32_t bytes_in_flight, Instant now) override;
  void on_recovery_exit(std::uint32_t bytes_in_flight, Instant now) override;
  void on_rto(std::uint32_t bytes_in_flight, bool within_episode, Instant now) override;
  void on_spurious_recovery(Instant now) override;
  std::uint32_t cwnd() const override { return window_; }
  std::uint32_t ssthresh() const override { return threshold_; }

 private:
  void save_for_undo();

  std::uint32_t mss_ = 536;
  std::uint32_t window_ = 0;
  std::uint32_t threshold_ = 1u << 30;
  std::uint32_t window_before_recovery_ = 0;
  std::uint32_t threshold_before_recovery_ = 1u << 30;
  std::uint32_t bytes_acknowledged_in_window_ = 0;  // toward the next SMSS in congestion avoidance
};

// CUBIC (RFC 9438), in segments as the RFC writes it: after a loss the
// window follows W_cubic(t) = C (t - K)^3 + W_max (§4.2), K the time it takes
// to climb back to W_max from where the reduction left it, never below what
// AIMD with the same average window would reach (the Reno-friendly region,
// §4.3); β = 0.7 (§4.6), fast convergence (§4.7), RFC 5681's slow start.
class CubicController final : public CongestionController {
 public:
  static constexpr double c = 0.4;      // segments / s^3
  static constexpr double beta = 0.7;   // the multiplicative decrease
  // α of the Reno-friendly estimate until it reaches cwnd_prior (§4.3).
  static constexpr double alpha = 3 * (1 - beta) / (1 + beta);

  std::string_view name() const override { return "cubic"; }
  void start(std::uint32_t mss, Instant now) override;
  void on_ack(const AckSample& ack) override;
  void on_enter_recovery(std::uint32_t bytes_in_flight, Instant now) override;
  void on_recovery_exit(std::uint32_t bytes_in_flight, Instant now) override;
  void on_rto(std::uint32_t bytes_in_flight, bool within_episode, Instant now) override;
  void on_spurious_recovery(Instant now) override;
  std::uint32_t cwnd() const override;
  std::uint32_t ssthresh() const override;

  // The state of the current congestion avoidance stage, in segments and
  // seconds (for tests and traces): W_max, K, W_est; none before it begins.
  double w_max() const { return w_max_; }
  std::optional<double> k() const { return epoch_ ? std::optional<double>(k_) : std::nullopt; }
  std::optional<double> w_est() const { return epoch_ ? std::optional<double>(w_est_) : std::nullopt; }
  // W_cubic(t), t in seconds since the stage began (Figure 1).
  double w_cubic(double t) const;

 private:
  void reduce(std::uint32_t bytes_in_flight);
  void save_for_undo();

  double mss_ = 536;
  double cwnd_ = 0;        // segments
  double ssthresh_ = 0;    // segments
  double w_max_ = 0;       // the window before the last reduction (after fast convergence); 0: none
  double cwnd_prior_ = 0;  // the window when ssthresh was last set
  // The current congestion avoidance stage: its start (t_epoch), K, W_est.
  std::optional<Instant> epoch_;
  double k_ = 0;
  double w_est_ = 0;
  // All of the above as the episode's first reduction found it, for on_spurious_recovery.
  struct Saved {
    double cwnd, ssthresh, w_max, cwnd_prior;
    std::optional<Instant> epoch;
    double k, w_est;
  };
  std::optional<Saved> before_recovery_;
};

// ---- The registry ----

using CongestionControllerFactory = std::function<std::unique_ptr<CongestionController>()>;

// Makes `name` choosable. EINVAL for an empty name or factory; EEXIST if
// the name is taken ("newreno", "cubic" and "bbr" are there from the start). Names
// are never removed, so a name once accepted stays valid.
std::error_code register_congestion_controller(std::string_view name, CongestionControllerFactory factory);
// A new controller of that name; an empty name means the default (below).
// Null when no controller has that name.
std::unique_ptr<CongestionController> make_congestion_controller(std::string_view name);
// Whether make_congestion_controller(name) would make one.
bool congestion_controller_known(std::string_view name);
// The registered names, sorted.
std::vector<std::string> congestion_controller_names();
// VIASTACK_UTCP_CC, or "bbr" when it is unset (Linux's default on this
// machine; under random loss a loss-based controller collapses, issue 23) (a value that is not a
// built-in name stops the process with one line, as every VIASTACK_* variable).
std::string default_congestion_control();

// ---- Tracing cwnd ----

// Where the sender stands, as a trace shows it.
enum class CongestionPhase : std::uint8_t {
  slow_start,            // cwnd < ssthresh
  congestion_avoidance,  // cwnd >= ssthresh
  fast_recovery,         // after the third duplicate ACK, until what was outstanding is acknowledged
  timeout_recovery,      // after a retransmission timeout, until what was outstanding is acknowledged
};
// "slow_start", "congestion_avoidance", "fast_recovery", "timeout_recovery".
std::string_view to_string(CongestionPhase phase);

struct CongestionSample {
  Instant time;
  std::uint32_t cwnd = 0;      // the window the sender fills (inflated in fast recovery)
  std::uint32_t ssthresh = 0;
  CongestionPhase phase = CongestionPhase::slow_start;
};
// Called with the state when the trace is set, then each time cwnd,
// ssthresh or the phase changes.
using CongestionTrace = std::function<void(const CongestionSample&)>;

// A trace that writes CSV to `out`: the header "time_us,cwnd,ssthresh,state",
// then one line per sample, time_us counted from the first sample, cwnd and
// ssthresh in bytes, state as to_string(CongestionPhase). The trace shares
// the stream, so it may outlive the caller's handle (a connection goes on
// after its socket is closed).
CongestionTrace csv_congestion_trace(std::shared_ptr<std::ostream> out);
// The same into a file, created or truncated; the error if it cannot be opened.
Result<CongestionTrace> csv_congestion_trace(const std::filesystem::path& file);

}  // namespace utcp
