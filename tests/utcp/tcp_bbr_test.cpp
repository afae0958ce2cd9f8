// BBR (utcp/bbr.hpp) and what it stands on, on virtual time: the delivery
// rate sampler on a known ACK sequence (cumulative, SACKed, app-limited,
// retransmitted), the windowed max filter, BBR's state machine driven round
// by round (STARTUP's exit after three rounds without 25 % growth, DRAIN,
// PROBE_BW's gain cycle, PROBE_RTT after 10 s without a new minimum RTT),
// pacing in the connection (segments spaced at the controller's rate), and
// a connection through a bottleneck with 5 % random loss: BBR keeps the
// bottleneck's rate where CUBIC collapses.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "tcp_connection_harness.hpp"
#include "utcp/bbr.hpp"
#include "utcp/congestion.hpp"
#include "utcp/delivery_rate.hpp"

namespace utcp::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr std::uint32_t segment = 1000;

SeqNumber seq(std::uint32_t offset) { return SeqNumber(1) + offset; }

// ---- The delivery rate sampler ----

// One segment a millisecond, each acknowledged on its own 10 ms after it
// was sent: once the first round trip is over the samples measure exactly
// one segment per millisecond; before it, the interval runs from the first
// transmission (the draft's worked start).
TEST(DeliveryRateSamplerTest, SamplesOfASteadyStreamMeasureItsRate) {
  DeliveryRateSampler sampler;
  const Instant start = Instant{} + std::chrono::hours(1);
  std::vector<RateSample> samples;
  for (std::uint32_t t = 0; t < 40; ++t) {
    const Instant now = start + milliseconds(t);
    if (t >= 10) {  // the ACK of the segment sent at t - 10 (before this millisecond's segment goes)
      sampler.on_cumulative_ack(seq((t - 9) * segment), now);
      const auto sample = sampler.take_sample(now);
      ASSERT_TRUE(sample.has_value());
      samples.push_back(*sample);
    }
    if (t < 30) sampler.on_transmit(seq(t * segment), seq((t + 1) * segment), now, t == 0);
  }
  ASSERT_EQ(samples.size(), 30u);
  // The first: one segment over the 10 ms since the stream began.
  EXPECT_EQ(samples[0].delivered, segment);
  EXPECT_EQ(samples[0].interval, milliseconds(10));
  EXPECT_EQ(samples[0].rtt, milliseconds(10));
  EXPECT_EQ(samples[0].prior_delivered, 0u);
  // The second: two segments since the first went, the ACK interval (11 ms) the longer.
  EXPECT_EQ(samples[1].delivered, 2 * segment);
  EXPECT_EQ(samples[1].interval, milliseconds(11));
  // From the segment sent at 10 ms on (its ACK at 20 ms): ten segments in 10 ms.
  for (std::size_t i = 10; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].delivered, 10 * segment) << i;
    EXPECT_EQ(samples[i].interval, milliseconds(10)) << i;
    EXPECT_DOUBLE_EQ(samples[i].delivery_rate(), segment * 1000.0) << i;
    EXPECT_EQ(samples[i].rtt, milliseconds(10)) << i;
    EXPECT_FALSE(samples[i].is_app_limited);
  }
  EXPECT_EQ(samples.back().total_delivered, 30u * segment);
  EXPECT_EQ(sampler.segments_remembered(), 0u);
}

TEST(DeliveryRateSamplerTest, SackedSegmentsCountOnceAndAnAckThatDeliversNothingGivesNoSample) {
  DeliveryRateSampler sampler;
  const Instant start = Instant{} + std::chrono::hours(1);
  for (std::uint32_t i = 0; i < 4; ++i) sampler.on_transmit(seq(i * segment), seq((i + 1) * segment), start, i == 0);
  // Segment 0 is lost: 1 and 2 arrive and are SACKed at 10 ms.
  const Instant sacked_at = start + milliseconds(10);
  sampler.on_sack_block(seq(segment), seq(3 * segment), sacked_at);
  auto sample = sampler.take_sample(sacked_at);
  ASSERT_TRUE(sample.has_value());
  EXPECT_EQ(sample->newly_delivered, 2 * segment);
  EXPECT_EQ(sample->total_delivered, 2 * segment);
  // The same block again delivers nothing.
  sampler.on_sack_block(seq(segment), seq(3 * segment), sacked_at + milliseconds(1));
  EXPECT_FALSE(sampler.take_sample(sacked_at + milliseconds(1)).has_value());
  // Segment 0 resent at 12 ms; its ACK at 22 ms covers 0-2 and 3: 0 and 3
  // are new (1 and 2 were counted), and the newest sent (0, again) gives
  // the sample but no RTT (either transmission may have been answered).
  sampler.on_transmit(seq(0), seq(segment), start + milliseconds(12), false);
  const Instant acked_at = start + milliseconds(22);
  sampler.on_cumulative_ack(seq(4 * segment), acked_at);
  sample = sampler.take_sample(acked_at);
  ASSERT_TRUE(sample.has_value());
  EXPECT_EQ(sample->newly_delivered, 2 * segment);
  EXPECT_EQ(sample->total_delivered, 4 * segment);
  EXPECT_EQ(sample->prior_delivered, 2 * segment);  // what had been delivered when 0 went again
  EXPECT_EQ(sample->delivered, 2 * segment);
  EXPECT_FALSE(sample->rtt.has_value());
  EXPECT_EQ(sampler.delivered(), 4u * segment);
}

TEST(DeliveryRateSamplerTest, SamplesAreAppLimitedUntilWhatWasInFlightIsDelivered) {
  DeliveryRateSampler sampler;
  const Instant start = Instant{} + std::chrono::hours(1);
  sampler.on_transmit(seq(0), seq(segment), start, true);
  sampler.on_transmit(seq(segment), seq(2 * segment), start, false);
  sampler.on_app_limited(2 * segment);  // nothing more to send, cwnd has room
  EXPECT_TRUE(sampler.app_limited());
  sampler.on_transmit(seq(2 * segment), seq(3 * segment), start + milliseconds(5), false);
  // The first two were sent before the mark: not app-limited.
  sampler.on_cumulative_ack(seq(2 * segment), start + milliseconds(10));
  auto sample = sampler.take_sample(start + milliseconds(10));
  ASSERT_TRUE(sample.has_value());
  EXPECT_FALSE(sample->is_app_limited);
  EXPECT_TRUE(sampler.app_limited());  // 2 segments delivered: not past the mark yet
  // The third was sent in the app-limited period; delivered, it ends it.
  sampler.on_cumulative_ack(seq(3 * segment), start + milliseconds(15));
  sample = sampler.take_sample(start + milliseconds(15));
  ASSERT_TRUE(sample.has_value());
  EXPECT_TRUE(sample->is_app_limited);
  EXPECT_FALSE(sampler.app_limited());
}

// ---- The windowed max filter ----

TEST(WindowedMaxFilterTest, KeepsTheBestOfTheWindowThenTheBestOfWhatFollowed) {
  WindowedMaxFilter filter(10);
  EXPECT_EQ(filter.update(0, 100), 100);
  EXPECT_EQ(filter.update(1, 50), 100);
  EXPECT_EQ(filter.update(3, 60), 100);
  EXPECT_EQ(filter.update(6, 80), 100);
  EXPECT_EQ(filter.update(10, 10), 100);  // 100 is 10 rounds old: still in the window
  EXPECT_EQ(filter.update(11, 10), 80);   // out: the best of the later sub-windows takes over
  EXPECT_EQ(filter.update(12, 90), 90);   // a new best replaces everything
  EXPECT_EQ(filter.update(30, 5), 5);     // nothing left in the window
}

// ---- BBR's state machine, one rate sample a round ----

// A path of `rtt` at `bandwidth` bytes per second: each round trip's data
// acknowledged by `acks` ACKs spread evenly over it (one: all at its end),
// the first of them starting a round; each ACK's sample measures the path.
class Rounds {
 public:
  explicit Rounds(BbrController& bbr) : bbr_(bbr) { bbr_.start(segment, now); }

  void round(double bandwidth, microseconds rtt, std::uint32_t in_flight, int acks = 1) {
    const auto per_round = static_cast<std::uint64_t>(bandwidth * std::chrono::duration<double>(rtt).count());
    const std::uint64_t delivered = per_round / static_cast<std::uint64_t>(acks);
    for (int ack = 0; ack < acks; ++ack) {
      now += rtt / acks;
      total_ += delivered;
      RateSample sample;
      // The first ACK's segment was sent when the last round ended (it
      // starts a round); the others' a round trip before they arrive.
      sample.prior_delivered = ack == 0 ? total_ - delivered : total_ - std::min(total_, per_round);
      sample.total_delivered = total_;
      sample.delivered = total_ - sample.prior_delivered;
      sample.newly_delivered = static_cast<std::uint32_t>(delivered);
      sample.interval = rtt;
      sample.rtt = rtt;
      sample.bytes_in_flight = in_flight;
      sample.now = now;
      bbr_.on_rate_sample(sample);
    }
  }

  Instant now = Instant{} + std::chrono::hours(1);

 private:
  BbrController& bbr_;
  std::uint64_t total_ = 0;
};

constexpr double bottleneck = 10e6;  // bytes per second
constexpr microseconds path_rtt = milliseconds(20);
constexpr std::uint32_t bdp = 200000;  // bottleneck × path_rtt

// The bandwidth doubles each round up to the bottleneck, then stays: STARTUP
// ends on the third round without 25 % growth, DRAIN on the flight down to
// a BDP, then PROBE_BW.
TEST(BbrStateTest, StartupEndsAfterThreeRoundsWithoutGrowthThenDrainThenProbeBw) {
  BbrController bbr;
  Rounds rounds(bbr);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::startup);
  EXPECT_DOUBLE_EQ(bbr.pacing_gain(), BbrController::high_gain);
  double rate = bottleneck / 32;
  while (rate < bottleneck) {
    rounds.round(rate, path_rtt, 2 * bdp);
    EXPECT_EQ(bbr.mode(), BbrController::Mode::startup);
    rate *= 2;
  }
  rounds.round(bottleneck, path_rtt, 2 * bdp);  // still growing (from half)
  rounds.round(bottleneck, path_rtt, 2 * bdp);  // one round without growth
  rounds.round(bottleneck * 1.2, path_rtt, 2 * bdp);  // two: 20 % is not 25 %
  EXPECT_EQ(bbr.mode(), BbrController::Mode::startup);
  EXPECT_FALSE(bbr.filled_pipe());
  rounds.round(bottleneck, path_rtt, 2 * bdp);  // three
  EXPECT_TRUE(bbr.filled_pipe());
  EXPECT_EQ(bbr.mode(), BbrController::Mode::drain);
  EXPECT_DOUBLE_EQ(bbr.pacing_gain(), BbrController::drain_gain);
  EXPECT_NEAR(bbr.max_bandwidth(), bottleneck * 1.2, 1);
  EXPECT_NEAR(*bbr.pacing_rate(), BbrController::drain_gain * bottleneck * 1.2 * BbrController::pacing_margin, 1);
  // The queue STARTUP built drains; at one BDP (and the pacing bursts), PROBE_BW.
  rounds.round(bottleneck, path_rtt, 2 * bdp);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::drain);
  rounds.round(bottleneck, path_rtt, bbr.target_inflight(1));
  EXPECT_EQ(bbr.mode(), BbrController::Mode::probe_bw);
  EXPECT_DOUBLE_EQ(bbr.pacing_gain(), 1);
  EXPECT_DOUBLE_EQ(bbr.current_cwnd_gain(), BbrController::cwnd_gain);
}

BbrController& in_probe_bw(BbrController& bbr, Rounds& rounds) {
  for (double rate = bottleneck / 8; rate < bottleneck; rate *= 2) rounds.round(rate, path_rtt, bdp);
  for (int i = 0; i < 4 && bbr.mode() != BbrController::Mode::probe_bw; ++i) rounds.round(bottleneck, path_rtt, bdp);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::probe_bw);
  return bbr;
}

// Each phase lasts a minimum RTT: six at gain 1, then 5/4 (until the flight
// reaches 5/4 of the BDP), then 3/4; cwnd is capped at twice the BDP (and
// the pacing bursts), and a loss does not lower the model.
TEST(BbrStateTest, ProbeBwCyclesItsGainsAndCwndIsTwiceTheBdp) {
  BbrController bbr;
  Rounds rounds(bbr);
  in_probe_bw(bbr, rounds);
  std::vector<double> gains;
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t in_flight = bbr.pacing_gain() > 1 ? bbr.target_inflight(1.25) : bdp;
    rounds.round(bottleneck, path_rtt + microseconds(20), in_flight, 20);
    gains.push_back(bbr.pacing_gain());
  }
  const std::vector<double> expected{1, 1, 1, 1, 1, 1.25, 0.75, 1, 1, 1, 1, 1, 1, 1.25, 0.75, 1};
  EXPECT_EQ(gains, expected);
  const std::uint32_t quantization = 3 * pacing_burst(*bbr.pacing_rate(), segment);
  EXPECT_NEAR(bbr.target_inflight(1), bdp + quantization, 2);
  // ACKs as smooth as the path: what aggregation adds is one ACK's worth.
  EXPECT_LE(bbr.ack_aggregation_allowance(), 2 * bdp / 20);
  EXPECT_NEAR(bbr.cwnd(), 2 * bdp + quantization + bbr.ack_aggregation_allowance(), 2);

  // Fast recovery and a loss: the window and the model stay.
  const std::uint32_t cwnd = bbr.cwnd();
  bbr.on_enter_recovery(cwnd, rounds.now);
  rounds.round(bottleneck, path_rtt + microseconds(20), bdp, 20);
  EXPECT_GE(bbr.cwnd(), cwnd);
  EXPECT_NEAR(bbr.max_bandwidth(), bottleneck, 1);
  bbr.on_recovery_exit(bdp, rounds.now);
  EXPECT_GE(bbr.cwnd(), cwnd);
}

// ACKs that come in bursts (here all of a round's at once): the window
// covers what a burst delivers beyond BtlBw's prediction, as Linux's.
TEST(BbrStateTest, AckAggregationWidensTheWindow) {
  BbrController bbr;
  Rounds rounds(bbr);
  in_probe_bw(bbr, rounds);
  for (int i = 0; i < 20; ++i) rounds.round(bottleneck, path_rtt, bdp, 20);
  EXPECT_LE(bbr.ack_aggregation_allowance(), bdp / 20 + 1);
  const std::uint32_t smooth = bbr.cwnd();
  for (int i = 0; i < 10; ++i) rounds.round(bottleneck, path_rtt, bdp, 1);
  EXPECT_NEAR(bbr.ack_aggregation_allowance(), bdp, 1);
  EXPECT_NEAR(bbr.cwnd(), smooth - bdp / 20 + bdp, bdp / 20 + 2);
  EXPECT_EQ(bbr.cwnd(), bbr.target_inflight(BbrController::cwnd_gain) + bbr.ack_aggregation_allowance());
  // Smooth ACKs again: the excess of the epoch the bursts began stays until
  // it has delivered a megabyte (five rounds), then both windows of five
  // rounds forget it.
  for (int i = 0; i < 16; ++i) rounds.round(bottleneck, path_rtt, bdp, 20);
  EXPECT_LE(bbr.ack_aggregation_allowance(), bdp / 20 + 1);
}

// No RTT below the minimum for 10 s: PROBE_RTT holds cwnd at four segments
// until the flight is down there, then 200 ms and a round trip, and goes
// back to PROBE_BW with the window it had; the minimum is measured anew.
TEST(BbrStateTest, ProbeRttAfterTenSecondsWithoutANewMinimum) {
  BbrController bbr;
  Rounds rounds(bbr);
  const Instant measured = rounds.now + path_rtt;  // the first sample's: none lower since
  in_probe_bw(bbr, rounds);
  ASSERT_EQ(bbr.min_rtt(), path_rtt);
  const std::uint32_t cwnd = bbr.cwnd();
  const microseconds queued = path_rtt + milliseconds(5);
  while (rounds.now + queued <= measured + BbrController::min_rtt_window) {
    rounds.round(bottleneck, queued, bdp);
    ASSERT_NE(bbr.mode(), BbrController::Mode::probe_rtt) << "at " << std::chrono::duration<double>(rounds.now - measured).count();
  }
  rounds.round(bottleneck, queued, bdp);  // past 10 s
  EXPECT_EQ(bbr.mode(), BbrController::Mode::probe_rtt);
  EXPECT_EQ(bbr.cwnd(), 4 * segment);
  EXPECT_EQ(bbr.min_rtt(), queued);  // the expired minimum gave way to what was measured
  // The flight comes down to four segments; 200 ms (and the rounds) later it is over.
  const Instant drained = rounds.now + path_rtt;
  while (rounds.now < drained + BbrController::probe_rtt_duration) {
    rounds.round(4.0 * segment / std::chrono::duration<double>(path_rtt).count(), path_rtt, 4 * segment);
    if (rounds.now < drained + BbrController::probe_rtt_duration) {
      EXPECT_EQ(bbr.mode(), BbrController::Mode::probe_rtt);
      EXPECT_EQ(bbr.cwnd(), 4 * segment);
    }
  }
  rounds.round(bottleneck, path_rtt, 4 * segment);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::probe_bw);
  EXPECT_GE(bbr.cwnd(), cwnd);
  EXPECT_EQ(bbr.min_rtt(), path_rtt);
}

TEST(BbrStateTest, ANewMinimumWithinTenSecondsPutsProbeRttOff) {
  BbrController bbr;
  Rounds rounds(bbr);
  in_probe_bw(bbr, rounds);
  for (int i = 0; i < 1600; ++i) {  // 40 s; every 8.75 s a round at a new minimum
    const bool lower = i % 350 == 0;
    rounds.round(bottleneck, lower ? path_rtt - microseconds(1 + i / 350) : path_rtt + milliseconds(5), bdp);
    ASSERT_EQ(bbr.mode(), BbrController::Mode::probe_bw) << i;
  }
}

// A timeout drops cwnd to one segment; what is delivered grows it back to
// the model's target; an undo restores the window from before.
TEST(BbrStateTest, TimeoutRestartsFromOneSegmentAndUndoRestores) {
  BbrController bbr;
  Rounds rounds(bbr);
  in_probe_bw(bbr, rounds);
  const std::uint32_t cwnd = bbr.cwnd();
  bbr.on_rto(cwnd, false, rounds.now);
  EXPECT_EQ(bbr.cwnd(), segment);
  bbr.on_spurious_recovery(rounds.now);
  EXPECT_EQ(bbr.cwnd(), cwnd);
  bbr.on_rto(cwnd, false, rounds.now);
  rounds.round(bottleneck, path_rtt, segment);
  EXPECT_LT(bbr.cwnd(), cwnd);
  for (int i = 0; i < 4; ++i) rounds.round(bottleneck, path_rtt, bdp);
  EXPECT_EQ(bbr.cwnd(), bbr.target_inflight(BbrController::cwnd_gain) + bbr.ack_aggregation_allowance());
}

// ---- In a connection ----

// A controller for the pacing test: a window that never limits, a fixed rate.
class FixedRate final : public CongestionController {
 public:
  static constexpr double rate = 1e6;  // bytes per second
  std::string_view name() const override { return "fixed_rate"; }
  void start(std::uint32_t, Instant) override {}
  void on_ack(const AckSample&) override {}
  void on_enter_recovery(std::uint32_t, Instant) override {}
  void on_recovery_exit(std::uint32_t, Instant) override {}
  void on_rto(std::uint32_t, bool, Instant) override {}
  std::optional<double> pacing_rate() const override { return rate; }
  std::uint32_t cwnd() const override { return 1u << 30; }
  std::uint32_t ssthresh() const override { return 1u << 30; }
};

struct SentData {
  Instant at;
  std::size_t bytes;
};

// Sends `total` bytes from client to server over the loopback; returns the
// client's data segments as they left.
std::vector<SentData> transfer(Loopback::Options options, std::size_t total, Loopback*& path,
                               std::chrono::seconds limit = 600s) {
  std::vector<SentData> sent;
  Loopback* self = nullptr;
  auto drop = options.drop;
  options.drop = [&](int to, const TcpHeader& header, std::span<const std::uint8_t> payload) {
    if (to == 1 && !payload.empty()) sent.push_back({self->now, payload.size()});
    return drop && drop(to, header, payload);
  };
  auto loopback = std::make_unique<Loopback>(options);
  self = path = loopback.get();
  loopback->connect();
  const auto data = pattern(total, 5);
  std::vector<std::uint8_t> buffer(1 << 20);
  std::size_t offered = 0, received = 0;
  const bool done = loopback->run_until([&] {
    TcpConnection& client = *loopback->client;
    if (client.state() == TcpState::established && offered < total) {
      const auto taken = client.send(std::span(data).subspan(offered), loopback->now);
      if (taken) offered += *taken;
    }
    while (loopback->server && loopback->server->readable()) {
      const auto got = loopback->server->receive(buffer, loopback->now);
      if (!got || *got == 0) break;
      EXPECT_TRUE(std::equal(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(*got),
                             data.begin() + static_cast<std::ptrdiff_t>(received)));
      received += *got;
    }
    return received == total;
  }, limit);
  EXPECT_TRUE(done) << received << " of " << total;
  static std::vector<std::unique_ptr<Loopback>> kept;  // the caller reads its connections' state
  kept.push_back(std::move(loopback));
  return sent;
}

TEST(PacingTest, SegmentsAreSpacedAtThePacingRate) {
  ASSERT_EQ(register_congestion_controller("fixed_rate", [] { return std::make_unique<FixedRate>(); }),
            std::error_code());
  TcpConfig config;
  config.max_segment_size = 1012;  // 1000 bytes of payload with timestamps
  config.congestion_control = "fixed_rate";
  Loopback::Options options{config, config};
  options.delay = 5ms;
  Loopback* path = nullptr;
  const std::vector<SentData> sent = transfer(options, 500000, path);
  ASSERT_GT(sent.size(), 400u);
  EXPECT_EQ(path->client->info().pacing_rate, static_cast<std::uint64_t>(FixedRate::rate));
  // A token bucket of one burst: between any two segments no more went
  // than the rate allows, plus the burst.
  const double burst = pacing_burst(FixedRate::rate, 1000);
  for (std::size_t i = 0; i < sent.size(); ++i) {
    std::size_t bytes = 0;
    for (std::size_t j = i; j < sent.size(); ++j) {
      bytes += sent[j].bytes;
      const double allowed = burst + FixedRate::rate * std::chrono::duration<double>(sent[j].at - sent[i].at).count();
      ASSERT_LE(bytes, allowed + 1000) << "segments " << i << " to " << j;
    }
  }
  // And no slower: the whole went at the rate.
  const double elapsed = std::chrono::duration<double>(sent.back().at - sent.front().at).count();
  EXPECT_NEAR(500000 / elapsed, FixedRate::rate, FixedRate::rate * 0.01);
}

// Goodput through a 10 MB/s bottleneck with a 20 ms round trip and 5 %
// random loss both ways.
double goodput_under_loss(std::string_view controller, Loopback*& path) {
  TcpConfig config;
  config.congestion_control = std::string(controller);
  config.max_segment_size = 1460;
  config.receive_buffer = config.send_buffer = 4u << 20;
  Loopback::Options options{config, config};
  options.delay = 10ms;
  options.bandwidth = bottleneck;
  options.loss = 0.05;
  options.seed = 7;
  constexpr std::size_t total = 20'000'000;
  const std::vector<SentData> sent = transfer(options, total, path);
  if (sent.empty()) return 0;
  return total / std::chrono::duration<double>(path->now - sent.front().at).count();
}

TEST(BbrConnectionTest, UnderFivePercentLossItKeepsTheBottleneckRateWhereCubicCollapses) {
  Loopback* path = nullptr;
  const double bbr = goodput_under_loss("bbr", path);
  const TcpInfo info = path->client->info();
  EXPECT_EQ(info.congestion_control, "bbr");
  EXPECT_GT(info.pacing_rate, 0u);
  EXPECT_GT(path->client->counters().retransmitted_segments, 500u);  // of about 14,000
  const double cubic = goodput_under_loss("cubic", path);
  std::cout << "goodput through 10 MB/s with 5 % loss: bbr " << bbr / 1e6 << " MB/s, cubic " << cubic / 1e6 << " MB/s\n";
  EXPECT_GE(bbr, 0.7 * bottleneck * 0.95) << "cubic " << cubic;  // 5 % of what is sent is lost
  EXPECT_LT(cubic, 0.3 * bottleneck);
  EXPECT_GT(bbr, 3 * cubic);
}

}  // namespace
}  // namespace utcp::testing
