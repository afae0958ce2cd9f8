// Congestion control behind its interface, on virtual time: CUBIC's window
// against RFC 9438's formulas (driven event by event, then inside a
// connection that loses a segment), the Reno-friendly region, fast
// convergence and timeouts; the registry (a controller a program registers
// is the one used), VIASTACK_UTCP_CC, bad names refused, and the cwnd trace.
// NewReno's own behaviour is checked packet by packet in
// tcp_connection_timers_test.cpp (CongestionTest), unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "tcp_connection_harness.hpp"
#include "utcp/congestion.hpp"

namespace utcp::testing {
namespace {

constexpr std::uint32_t mss = 1000;
constexpr auto rtt = 100ms;

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }
double segments(std::uint32_t bytes) { return static_cast<double>(bytes) / mss; }

// RFC 9438 Figure 1 and Figure 2, written out here apart from the controller.
double w_cubic(double t, double w_max, double cwnd_epoch) {
  const double k = std::cbrt((w_max - cwnd_epoch) / 0.4);
  return 0.4 * std::pow(t - k, 3) + w_max;
}

// A sender behind `controller` whose segments are each acknowledged on
// their own, cwnd of them per round trip: the ACK clock of a path of that RTT.
class AckClock {
 public:
  explicit AckClock(CongestionController& controller) : controller_(controller) {}

  void ack_one() {
    controller_.on_ack({mss, controller_.cwnd(), std::chrono::microseconds(rtt), std::chrono::microseconds(rtt), now});
    now += std::chrono::nanoseconds(rtt) / std::max<std::uint32_t>(1, controller_.cwnd() / mss);
  }
  void run_until(Instant end) {
    while (now < end) ack_one();
  }
  // Slow start from the initial window to `window` segments.
  void grow_to(double window) {
    while (segments(controller_.cwnd()) < window) ack_one();
  }

  Instant now = Instant{} + std::chrono::hours(1);

 private:
  CongestionController& controller_;
};

TEST(CubicTest, ReductionOnLossIsBetaOfTheFlight) {
  CubicController cubic;
  AckClock clock(cubic);
  cubic.start(mss, clock.now);
  EXPECT_EQ(cubic.cwnd(), 10 * mss);  // RFC 6928, as NewReno
  clock.grow_to(100);
  ASSERT_EQ(cubic.cwnd(), 100 * mss);  // slow start: one MSS per MSS acknowledged
  cubic.on_enter_recovery(100 * mss, clock.now);
  EXPECT_EQ(cubic.ssthresh(), 70 * mss);  // β = 0.7 of the flight (§4.6)
  EXPECT_EQ(cubic.cwnd(), 70 * mss);
  EXPECT_DOUBLE_EQ(cubic.w_max(), 100);
  cubic.on_recovery_exit(60 * mss, clock.now);
  EXPECT_EQ(cubic.cwnd(), 70 * mss);  // the window recovery began with
}

// A recovery D-SACK showed spurious is undone: the window, the threshold
// and (CUBIC) W_max and the stage go back to what they were before it.
TEST(CubicTest, SpuriousRecoveryIsUndone) {
  CubicController cubic;
  AckClock clock(cubic);
  cubic.start(mss, clock.now);
  clock.grow_to(40);
  cubic.on_enter_recovery(40 * mss, clock.now);
  cubic.on_recovery_exit(30 * mss, clock.now);
  clock.run_until(clock.now + 2s);  // congestion avoidance: a stage with W_max 40
  const std::uint32_t cwnd = cubic.cwnd(), ssthresh = cubic.ssthresh();
  const double k = *cubic.k();
  cubic.on_enter_recovery(cwnd, clock.now);
  ASSERT_LT(cubic.cwnd(), cwnd);
  ASSERT_FALSE(cubic.k());  // the stage ended
  cubic.on_recovery_exit(cwnd / 2, clock.now);
  cubic.on_spurious_recovery(clock.now);
  EXPECT_EQ(cubic.cwnd(), cwnd);
  EXPECT_EQ(cubic.ssthresh(), ssthresh);
  EXPECT_DOUBLE_EQ(cubic.w_max(), 40);
  ASSERT_TRUE(cubic.k());
  EXPECT_DOUBLE_EQ(*cubic.k(), k);  // the stage goes on
  clock.ack_one();
  EXPECT_GE(cubic.cwnd(), cwnd);
}

TEST(NewRenoTest, SpuriousRecoveryIsUndone) {
  NewRenoController reno;
  AckClock clock(reno);
  reno.start(mss, clock.now);
  clock.grow_to(40);
  reno.on_enter_recovery(40 * mss, clock.now);
  EXPECT_EQ(reno.cwnd(), 20 * mss);
  reno.on_recovery_exit(10 * mss, clock.now);
  reno.on_spurious_recovery(clock.now);
  EXPECT_EQ(reno.cwnd(), 40 * mss);
  EXPECT_EQ(reno.ssthresh(), 1u << 30);  // slow start's "arbitrarily high" again
}

// A timeout is a loss episode too (Eifel's RFC 4015 undoes it); a timeout
// during a recovery, or a second one, goes on with the episode: the undo
// restores the window from before its first reduction, not the reduced one.
TEST(UndoTest, ATimeoutWithinAnEpisodeKeepsWhatTheUndoRestores) {
  NewRenoController reno;
  CubicController cubic;
  for (CongestionController* controller : {static_cast<CongestionController*>(&reno),
                                           static_cast<CongestionController*>(&cubic)}) {
    AckClock clock(*controller);
    controller->start(mss, clock.now);
    clock.grow_to(40);
    const std::uint32_t cwnd = controller->cwnd(), ssthresh = controller->ssthresh();
    controller->on_rto(40 * mss, false, clock.now);
    controller->on_rto(mss, true, clock.now);
    controller->on_spurious_recovery(clock.now);
    EXPECT_EQ(controller->cwnd(), cwnd) << controller->name();
    EXPECT_EQ(controller->ssthresh(), ssthresh) << controller->name();
    controller->on_enter_recovery(40 * mss, clock.now);
    controller->on_rto(20 * mss, true, clock.now);
    controller->on_spurious_recovery(clock.now);
    EXPECT_EQ(controller->cwnd(), cwnd) << controller->name();
    EXPECT_EQ(controller->ssthresh(), ssthresh) << controller->name();
  }
}

// RFC 5681 §3.1: in congestion avoidance cwnd grows by one SMSS per window
// of bytes acknowledged (the recommended byte counting), however many ACKs
// carry them. A receiver that acknowledges every second segment (RFC 5681
// §4.2, as Linux does) must not halve the growth, as counting ACKs did.
TEST(NewRenoTest, CongestionAvoidanceCountsBytesNotAcks) {
  NewRenoController reno;
  Instant now = Instant{} + std::chrono::hours(1);
  reno.start(mss, now);
  reno.on_enter_recovery(40 * mss, now);
  reno.on_recovery_exit(20 * mss, now);
  ASSERT_EQ(reno.cwnd(), 20 * mss);
  ASSERT_EQ(reno.ssthresh(), 20 * mss);
  for (int round = 1; round <= 3; ++round) {
    const std::uint32_t window = reno.cwnd();
    for (std::uint32_t acked = 0; acked < window; acked += 2 * mss) {
      reno.on_ack({2 * mss, window, std::chrono::microseconds(rtt), std::chrono::microseconds(rtt), now});
      now += rtt / (window / (2 * mss));
    }
    EXPECT_EQ(reno.cwnd(), window + mss) << "round " << round;
  }
}

TEST(CubicTest, WindowFollowsWCubicAfterALoss) {
  CubicController cubic;
  AckClock clock(cubic);
  cubic.start(mss, clock.now);
  clock.grow_to(100);
  cubic.on_enter_recovery(100 * mss, clock.now);
  cubic.on_recovery_exit(70 * mss, clock.now);
  EXPECT_FALSE(cubic.k());  // the stage begins with its first ACK

  // The first ACK of congestion avoidance: t_epoch, K = cbrt((W_max - cwnd_epoch) / C).
  const Instant epoch = clock.now;
  clock.ack_one();
  ASSERT_TRUE(cubic.k());
  EXPECT_NEAR(*cubic.k(), std::cbrt(30 / 0.4), 1e-12);
  // §4.4: one ACK of one segment moves cwnd by (target - cwnd) / cwnd, the
  // target W_cubic(t + RTT), where W_cubic(t) is above W_est.
  clock.run_until(epoch + 500ms);
  const double before = segments(cubic.cwnd());
  const double t = seconds(clock.now - epoch);
  ASSERT_GT(w_cubic(t, 100, 70), *cubic.w_est() + CubicController::alpha / before);
  const double target = w_cubic(t + seconds(rtt), 100, 70);
  clock.ack_one();
  EXPECT_NEAR(segments(cubic.cwnd()), before + (target - before) / before, 1.0 / mss);

  // Then the window tracks W_cubic(t), within what W_cubic moves in one
  // round trip (cwnd reaches each target over one): concave up to W_max at
  // t = K, a plateau there, convex past it (until W_est, growing by one
  // segment per round trip once it passed 100, overtakes it at about 6 s).
  const double k = std::cbrt(30 / 0.4);
  for (const double t : {0.5, 1.0, 2.0, 3.0, 4.0, k, 4.6, 5.0}) {
    clock.run_until(epoch + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(t)));
    const double window = segments(cubic.cwnd());
    const double formula = w_cubic(t, 100, 70);
    const double one_rtt = std::abs(w_cubic(t + seconds(rtt), 100, 70) - formula);
    EXPECT_NEAR(window, formula, one_rtt + 0.5) << "t = " << t;
    EXPECT_GT(formula, *cubic.w_est()) << "t = " << t;  // not the Reno-friendly region here
  }
  EXPECT_GT(segments(cubic.cwnd()), 100);  // convex: past W_max
}

TEST(CubicTest, RenoFriendlyRegionGrowsAsAimd) {
  // A small window on a long round trip: W_cubic climbs 6 segments in K =
  // 2.47 s, AIMD(α = 3(1 - β)/(1 + β)) about 5 a second; from about 0.8 s
  // W_est is the larger and cwnd follows it (§4.3).
  CubicController cubic;
  AckClock clock(cubic);
  cubic.start(mss, clock.now);
  clock.grow_to(20);
  cubic.on_enter_recovery(20 * mss, clock.now);
  cubic.on_recovery_exit(14 * mss, clock.now);
  const Instant epoch = clock.now;
  auto at = [&](double t) {
    return epoch + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t));
  };

  // α per round trip while W_est is below cwnd_prior (20 segments).
  clock.run_until(at(0.2));
  ASSERT_TRUE(cubic.w_est());
  const Instant from_1 = clock.now;
  const double w1 = *cubic.w_est();
  clock.run_until(at(1.0));
  EXPECT_NEAR((*cubic.w_est() - w1) / (seconds(clock.now - from_1) / seconds(rtt)), CubicController::alpha, 0.05);
  ASSERT_LT(*cubic.w_est(), 20);
  EXPECT_LT(w_cubic(seconds(clock.now - epoch), 20, 14), *cubic.w_est());
  EXPECT_NEAR(segments(cubic.cwnd()), *cubic.w_est(), 1.0 / mss);  // cwnd is W_est

  // Past cwnd_prior, α = 1: one segment per round trip, as Reno.
  clock.run_until(at(3.0));
  ASSERT_GT(*cubic.w_est(), 20);
  const double w2 = *cubic.w_est();
  const Instant from = clock.now;
  clock.run_until(at(4.0));
  EXPECT_NEAR((*cubic.w_est() - w2) / (seconds(clock.now - from) / seconds(rtt)), 1.0, 0.1);
  EXPECT_NEAR(segments(cubic.cwnd()), *cubic.w_est(), 1.0 / mss);
  EXPECT_LT(w_cubic(seconds(clock.now - epoch), 20, 14), *cubic.w_est());
}

TEST(CubicTest, FastConvergenceLowersWMaxWhenTheWindowShrinks) {
  CubicController cubic;
  AckClock clock(cubic);
  cubic.start(mss, clock.now);
  clock.grow_to(100);
  cubic.on_enter_recovery(100 * mss, clock.now);
  EXPECT_DOUBLE_EQ(cubic.w_max(), 100);
  cubic.on_recovery_exit(70 * mss, clock.now);
  clock.run_until(clock.now + 1s);  // congestion avoidance, still below W_max
  const double window = segments(cubic.cwnd());
  ASSERT_LT(window, 100);
  cubic.on_enter_recovery(cubic.cwnd(), clock.now);
  // §4.7: the saturation point fell; W_max = cwnd (1 + β) / 2.
  EXPECT_NEAR(cubic.w_max(), window * 1.7 / 2, 1.0 / mss);
}

TEST(CubicTest, TimeoutRestartsFromOneSegmentWithKZero) {
  CubicController cubic;
  AckClock clock(cubic);
  cubic.start(mss, clock.now);
  clock.grow_to(50);
  cubic.on_rto(50 * mss, false, clock.now);
  EXPECT_EQ(cubic.cwnd(), mss);           // RFC 5681
  EXPECT_EQ(cubic.ssthresh(), 35 * mss);  // β of the flight (§4.8)
  clock.grow_to(35);                       // slow start up to ssthresh
  clock.ack_one();                         // the first ACK of congestion avoidance
  ASSERT_TRUE(cubic.k());
  EXPECT_EQ(*cubic.k(), 0);               // §4.8: K = 0, W_max the window where it begins
  EXPECT_DOUBLE_EQ(cubic.w_max(), 35);
}

// ---- Inside a connection: a segment lost at a known window ----

TEST(CubicConnectionTest, WindowAfterALossFollowsRfc9438) {
  TcpConfig config;
  config.max_segment_size = 1460;
  config.congestion_control = "cubic";
  Loopback::Options options{config, config};
  options.delay = 50ms;  // a 100 ms round trip
  Loopback* path = nullptr;
  bool dropped = false;
  // One data segment from the client is lost once its window reaches 120
  // segments: large enough that W_cubic stays above the Reno-friendly
  // W_est for the 8 s that follow on this round trip (the test above shows
  // the other case).
  options.drop = [&](int to, const wire::TcpHeader&, std::span<const std::uint8_t> payload) {
    if (dropped || to != 1 || payload.empty()) return false;
    const TcpInfo info = path->client->info();
    dropped = info.congestion_window >= 120u * info.max_segment_size;
    return dropped;
  };
  Loopback loopback(options);
  path = &loopback;
  std::vector<CongestionSample> trace;
  loopback.connect();
  loopback.client->set_congestion_trace([&](const CongestionSample& sample) { trace.push_back(sample); });
  const auto data = pattern(1 << 20, 3);
  std::vector<std::uint8_t> buffer(1 << 20);
  Instant stop = Instant::max();
  const bool ran = loopback.run_until([&] {
    TcpConnection& client = *loopback.client;
    if (client.state() == TcpState::established) (void)client.send(data, loopback.now);
    if (loopback.server && loopback.server->readable()) (void)loopback.server->receive(buffer, loopback.now);
    if (dropped && stop == Instant::max() && !client.info().in_recovery && client.counters().fast_retransmits == 1)
      stop = loopback.now + 8s;
    return loopback.now >= stop;
  }, 60s);
  ASSERT_TRUE(ran);
  EXPECT_EQ(loopback.client->counters().fast_retransmits, 1u);
  EXPECT_EQ(loopback.client->counters().timeouts, 0u);
  EXPECT_EQ(loopback.client->info().congestion_control, "cubic");

  // The trace: slow start, fast recovery with ssthresh = β flight, then
  // congestion avoidance from ssthresh.
  const double segment = loopback.client->info().max_segment_size;
  auto recovery = std::find_if(trace.begin(), trace.end(),
                               [](const CongestionSample& s) { return s.phase == CongestionPhase::fast_recovery; });
  ASSERT_NE(recovery, trace.end());
  ASSERT_NE(recovery, trace.begin());
  const double w_max = std::prev(recovery)->cwnd / segment;
  EXPECT_EQ(std::prev(recovery)->phase, CongestionPhase::slow_start);
  EXPECT_GE(w_max, 120);
  const double cwnd_epoch = recovery->ssthresh / segment;
  EXPECT_NEAR(cwnd_epoch, 0.7 * w_max, 1.5);  // 0.7 of the flight, about the window in slow start
  auto avoidance = std::find_if(recovery, trace.end(), [](const CongestionSample& s) {
    return s.phase == CongestionPhase::congestion_avoidance;
  });
  ASSERT_NE(avoidance, trace.end());
  EXPECT_EQ(avoidance->cwnd, recovery->ssthresh);
  const Instant epoch = avoidance->time;
  // Each later sample against W_cubic(t), within what it moves in two round
  // trips (the ACKs of one round trip come in one burst on this pipe).
  int checked = 0;
  for (auto it = avoidance; it != trace.end(); ++it) {
    const double t = seconds(it->time - epoch);
    const double formula = w_cubic(t, w_max, cwnd_epoch);
    const double band = std::abs(w_cubic(t + 2 * seconds(rtt), w_max, cwnd_epoch) - formula) + 1;
    EXPECT_NEAR(it->cwnd / segment, formula, band) << "t = " << t;
    EXPECT_EQ(it->phase, CongestionPhase::congestion_avoidance);
    ++checked;
  }
  EXPECT_GT(checked, 50);
  EXPECT_GT(trace.back().cwnd / segment, w_max);  // 8 s is past K: convex, above W_max
}

// ---- Choosing a controller ----

// A controller a program brings: a fixed window, its events counted.
struct FixedWindowEvents {
  int acks = 0;
  int recoveries = 0;
  int exits = 0;
  int timeouts = 0;
};
FixedWindowEvents fixed_window_events;

class FixedWindow final : public CongestionController {
 public:
  std::string_view name() const override { return "fixed3"; }
  void start(std::uint32_t segment, Instant) override { mss_ = segment; }
  void on_ack(const AckSample&) override { ++fixed_window_events.acks; }
  void on_enter_recovery(std::uint32_t, Instant) override { ++fixed_window_events.recoveries; }
  void on_recovery_exit(std::uint32_t, Instant) override { ++fixed_window_events.exits; }
  void on_rto(std::uint32_t, bool, Instant) override { ++fixed_window_events.timeouts; }
  std::uint32_t cwnd() const override { return 3 * mss_; }
  std::uint32_t ssthresh() const override { return 3 * mss_; }

 private:
  std::uint32_t mss_ = 0;
};

class RegistryTest : public ConnectionTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(register_congestion_controller("fixed3", [] { return std::make_unique<FixedWindow>(); }),
              std::error_code());
  }
};

TEST_F(RegistryTest, BuiltInsAndRegisteredNamesAreListed) {
  const std::vector<std::string> names = congestion_controller_names();
  EXPECT_EQ(names, (std::vector<std::string>{"bbr", "cubic", "fixed3", "newreno"}));
  EXPECT_TRUE(congestion_controller_known("cubic"));
  EXPECT_FALSE(congestion_controller_known("vegas"));
  EXPECT_EQ(make_congestion_controller("vegas"), nullptr);
  EXPECT_EQ(make_congestion_controller("cubic")->name(), "cubic");
}

TEST_F(RegistryTest, ANameIsRegisteredOnce) {
  auto factory = [] { return std::make_unique<NewRenoController>(); };
  EXPECT_EQ(register_congestion_controller("newreno", factory), std::make_error_code(std::errc::file_exists));
  EXPECT_EQ(register_congestion_controller("fixed3", factory), std::make_error_code(std::errc::file_exists));
  EXPECT_EQ(register_congestion_controller("", factory), std::make_error_code(std::errc::invalid_argument));
  EXPECT_EQ(register_congestion_controller("none", nullptr), std::make_error_code(std::errc::invalid_argument));
  EXPECT_FALSE(congestion_controller_known("none"));
}

TEST_F(RegistryTest, ARegisteredControllerDrivesTheConnection) {
  config.congestion_control = "fixed3";
  open_active();
  fixed_window_events = {};  // the SYN's acknowledgment was the first ACK
  EXPECT_EQ(connection->info().congestion_control, "fixed3");
  send(pattern(10000));
  EXPECT_EQ(sent.size(), 3u);  // its window, three segments
  sent.clear();
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  EXPECT_EQ(fixed_window_events.acks, 1);
  ASSERT_EQ(sent.size(), 1u);  // one acknowledged, one more
  EXPECT_EQ(next_sent().header.sequence, SeqNumber(iss + 3001));
  for (int i = 0; i < 3; ++i) feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));
  EXPECT_EQ(fixed_window_events.recoveries, 1);
  EXPECT_EQ(connection->counters().fast_retransmits, 1u);
  // The first two duplicates each sent one new segment (limited transmit,
  // RFC 3042): recovery ends once those are acknowledged too.
  feed(from_peer(peer_iss + 1, iss + 4001, flag::ack));
  EXPECT_EQ(fixed_window_events.exits, 0);
  feed(from_peer(peer_iss + 1, iss + 6001, flag::ack));
  EXPECT_EQ(fixed_window_events.exits, 1);
  sent.clear();
  run_for(*connection->next_timer() - now);
  EXPECT_EQ(fixed_window_events.timeouts, 1);
}

TEST_F(RegistryTest, AnUnknownNameMakesNoConnection) {
  config.congestion_control = "vegas";
  EXPECT_EQ(TcpConnection::connect(ports, config, SeqNumber(iss), now, capture()), nullptr);
  EXPECT_TRUE(sent.empty());  // not even a SYN
}

// VIASTACK_UTCP_CC, set for the one test.
class EnvironmentTest : public ConnectionTest {
 protected:
  void TearDown() override { unsetenv("VIASTACK_UTCP_CC"); }
};

TEST_F(EnvironmentTest, TheVariableChoosesTheDefault) {
  config.congestion_control.clear();
  open_active();
  EXPECT_EQ(connection->info().congestion_control, "bbr");  // Linux's default here
  setenv("VIASTACK_UTCP_CC", "newreno", 1);
  open_active();
  EXPECT_EQ(connection->info().congestion_control, "newreno");
  setenv("VIASTACK_UTCP_CC", "bbr", 1);
  open_active();
  EXPECT_EQ(connection->info().congestion_control, "bbr");
  setenv("VIASTACK_UTCP_CC", "cubic", 1);
  EXPECT_EQ(default_congestion_control(), "cubic");
  open_active();
  EXPECT_EQ(connection->info().congestion_control, "cubic");
  // A connection that names its own is not moved by it.
  config.congestion_control = "newreno";
  open_active();
  EXPECT_EQ(connection->info().congestion_control, "newreno");
}

TEST_F(EnvironmentTest, ABadValueStopsTheProcessNamingTheVariable) {
  EXPECT_EXIT(
      {
        setenv("VIASTACK_UTCP_CC", "vegas", 1);
        (void)make_congestion_controller("");
      },
      ::testing::ExitedWithCode(1), "VIASTACK_UTCP_CC=vegas: expected one of: newreno cubic");
}

// ---- The trace ----

TEST_F(ConnectionTest, CsvTraceFollowsTheWindowThroughALoss) {
  auto out = std::make_shared<std::ostringstream>();
  open_active();
  connection->set_congestion_trace(csv_congestion_trace(out));
  send(pattern(10000));
  sent.clear();
  now += 10ms;
  feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));  // slow start: cwnd + 1 MSS
  now += 1ms;
  for (int i = 0; i < 3; ++i) feed(from_peer(peer_iss + 1, iss + 1001, flag::ack));  // the second segment lost
  now += 5ms;
  feed(from_peer(peer_iss + 1, iss + 10001, flag::ack));  // recovery over
  EXPECT_EQ(out->str(),
            "time_us,cwnd,ssthresh,state\n"
            "0,10000,1073741824,slow_start\n"
            "10000,11000,1073741824,slow_start\n"
            "11000,7500,4500,fast_recovery\n"  // ssthresh half of the 9000 in flight, + 3 MSS
            "16000,2000,4500,slow_start\n");   // RFC 6582: min(ssthresh, flight + MSS)
}

TEST(CsvTraceTest, AFileThatCannotBeOpenedIsAnError) {
  const Result<CongestionTrace> trace = csv_congestion_trace(std::filesystem::path("/nonexistent/dir/cwnd.csv"));
  ASSERT_FALSE(trace);
  EXPECT_EQ(trace.error(), std::make_error_code(std::errc::no_such_file_or_directory));
}

}  // namespace
}  // namespace utcp::testing
