// harness.cpp: the driver of exercise congestion (given: do not change).
//
//   viarun -n 2 congestion [--controller aimd|newreno|cubic] [--kib N] [--trace FILE]
//
// Rank 0 connects to rank 1 over utcp and sends N KiB of a byte sequence
// both know, with the congestion controller named (default: yours, "aimd");
// rank 1 checks every byte and the count. Run it with VIASTACK_FAULTS set
// (check.sh does) to lose segments on the link.
//
// Your AimdController (aimd.cpp) is registered as "aimd" inside a wrapper
// that checks each call against the rules of aimd.hpp with the values the
// connection passed: the first call that breaks a rule is reported, and so is
// a run whose congestion avoidance grew cwnd by much more or much less than
// the rules say. --trace writes rank 0's cwnd trace (csv_congestion_trace:
// time_us,cwnd,ssthresh,state), which plot_cwnd.py draws.
#include <utcp/congestion.hpp>
#include <utcp/tcp_socket.hpp>
#include <utcp/via_host.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "aimd.hpp"
#include "example_options.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::uint16_t port = 5301;
constexpr auto io_timeout = 30s;

// The byte at `offset` of the stream.
std::uint8_t stream_byte(std::uint64_t offset) {
  std::uint64_t x = (offset >> 3) * 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x >> (8 * (offset & 7)));
}

// What the wrapper saw, and the first rule broken.
struct RuleReport {
  unsigned long slow_start_acks = 0, avoidance_acks = 0, recoveries = 0, timeouts = 0;
  double avoidance_growth = 0;           // bytes cwnd grew in congestion avoidance
  double avoidance_growth_by_rules = 0;  // bytes the rules would have grown it
  std::uint32_t mss = 0;
  std::optional<std::string> broken;
};

// Checks every call into the student's controller against aimd.hpp's rules.
class RuleChecker final : public utcp::CongestionController {
 public:
  RuleChecker(std::unique_ptr<utcp::CongestionController> checked, std::shared_ptr<RuleReport> report)
      : checked_(std::move(checked)), report_(std::move(report)) {}

  std::string_view name() const override { return checked_->name(); }

  void start(std::uint32_t mss, utcp::Instant now) override {
    checked_->start(mss, now);
    report_->mss = mss_ = mss;
    const std::uint32_t expected = utcp::initial_window(mss);
    if (cwnd() != expected) broken("start(mss " + std::to_string(mss) + ")", "cwnd", expected);
    if (ssthresh() != AimdController::no_threshold)
      broken("start(mss " + std::to_string(mss) + ")", "ssthresh", AimdController::no_threshold);
  }

  void on_ack(const utcp::AckSample& ack) override {
    const std::uint32_t before = cwnd(), threshold = ssthresh();
    checked_->on_ack(ack);
    const std::string call = "on_ack(" + std::to_string(ack.bytes_acknowledged) + " bytes acknowledged) with cwnd " +
                             std::to_string(before) + ", ssthresh " + std::to_string(threshold);
    if (ssthresh() != threshold) broken(call, "ssthresh (an ACK does not move it)", threshold);
    if (before < threshold) {
      ++report_->slow_start_acks;
      const std::uint32_t expected = before + std::min(ack.bytes_acknowledged, mss_);
      if (cwnd() != expected) broken(call + " (slow start)", "cwnd", expected);
      return;
    }
    ++report_->avoidance_acks;
    // At most the rule's growth for this ACK and the byte the fractions
    // carried from earlier ACKs may add. Not one segment: an ACK may cover
    // more than a window (a receiver that acknowledges a batch at once, the
    // ACK that ends a recovery), and the rule then gives more.
    const double due = AimdController::alpha * mss_ * ack.bytes_acknowledged / before;
    if (cwnd() < before || cwnd() > before + static_cast<std::uint32_t>(std::ceil(due)) + 1)
      broken(call + " (congestion avoidance: cwnd grows by alpha * mss * bytes acknowledged / cwnd)", "cwnd",
             before + static_cast<std::uint32_t>(due));
    report_->avoidance_growth += cwnd() - before;
    report_->avoidance_growth_by_rules += due;
  }

  void on_enter_recovery(std::uint32_t bytes_in_flight, utcp::Instant now) override {
    checked_->on_enter_recovery(bytes_in_flight, now);
    ++report_->recoveries;
    check_decrease("on_enter_recovery(" + std::to_string(bytes_in_flight) + " bytes in flight)", bytes_in_flight,
                   ssthresh());
  }

  void on_recovery_exit(std::uint32_t bytes_in_flight, utcp::Instant now) override {
    const std::uint32_t threshold = ssthresh();
    checked_->on_recovery_exit(bytes_in_flight, now);
    const std::string call = "on_recovery_exit(" + std::to_string(bytes_in_flight) + " bytes in flight) with ssthresh " +
                             std::to_string(threshold);
    if (ssthresh() != threshold) broken(call, "ssthresh (recovery's end does not move it)", threshold);
    const std::uint32_t expected = std::min(threshold, std::max(bytes_in_flight, mss_) + mss_);
    if (cwnd() != expected) broken(call, "cwnd", expected);
  }

  void on_rto(std::uint32_t bytes_in_flight, bool within_episode, utcp::Instant now) override {
    checked_->on_rto(bytes_in_flight, within_episode, now);
    ++report_->timeouts;
    const std::string call = "on_rto(" + std::to_string(bytes_in_flight) + " bytes in flight)";
    check_decrease(call, bytes_in_flight, mss_);
  }

  std::uint32_t cwnd() const override { return checked_->cwnd(); }
  std::uint32_t ssthresh() const override { return checked_->ssthresh(); }

 private:
  // ssthresh = max(β · flight, 2 · mss) (within 1 %, for the rounding), and
  // cwnd as given.
  void check_decrease(const std::string& call, std::uint32_t bytes_in_flight, std::uint32_t expected_cwnd) {
    const double expected = std::max(AimdController::beta * bytes_in_flight, 2.0 * mss_);
    if (std::fabs(ssthresh() - expected) > 1 + expected / 100)
      broken(call, "ssthresh", static_cast<std::uint32_t>(expected));
    else if (cwnd() != expected_cwnd)
      broken(call, "cwnd", expected_cwnd);
  }

  void broken(const std::string& call, const std::string& what, std::uint32_t expected) {
    if (report_->broken) return;  // the first one says the most
    const std::uint32_t got = what.starts_with("ssthresh") ? ssthresh() : cwnd();
    report_->broken = "after " + call + ": " + what + " is " + std::to_string(got) + ", the rules give " +
                      std::to_string(expected) + " (mss " + std::to_string(mss_) + ")";
  }

  std::unique_ptr<utcp::CongestionController> checked_;
  std::shared_ptr<RuleReport> report_;
  std::uint32_t mss_ = 0;
};

[[noreturn]] void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "congestion rank %d: %s\n", rank, what.c_str());
  std::exit(EXAMPLE_FAILED);
}

// Waits for the close handshake to finish; the side left in TIME-WAIT
// lingers, to acknowledge the peer's FIN again if that ACK was lost.
void finish_close(utcp::ViaHost& host, utcp::TcpSocket& socket) {
  if (!host.wait_until(
          [&] { return socket.state() == utcp::TcpState::time_wait || socket.state() == utcp::TcpState::closed; },
          io_timeout))
    fail(host.rank(), "the close did not finish: " + std::string(utcp::to_string(socket.state())));
  if (socket.state() == utcp::TcpState::time_wait) host.wait_until([] { return false; }, 1500ms);
  socket.close();
}

// Rank 1: accepts, checks every byte, closes after the sender's FIN.
void receive_stream(utcp::ViaHost& host, std::uint64_t size) {
  utcp::TcpListener listener(host.stack());
  if (const std::error_code failed = listener.listen({{}, port})) fail(1, "listen: " + failed.message());
  listener.set_accept_timeout(io_timeout);
  auto accepted = listener.accept();
  if (!accepted) fail(1, "accept: " + accepted.error().message());
  utcp::TcpSocket socket = std::move(*accepted);
  socket.set_receive_timeout(io_timeout);
  std::vector<std::uint8_t> buffer(64 << 10);
  std::uint64_t received = 0;
  for (;;) {
    const auto n = socket.receive(buffer);
    if (!n) fail(1, "receive after " + std::to_string(received) + " bytes: " + n.error().message());
    if (*n == 0) break;
    for (std::size_t i = 0; i < *n; ++i)
      if (buffer[i] != stream_byte(received + i))
        fail(1, "byte " + std::to_string(received + i) + " of the stream is wrong");
    received += *n;
  }
  if (received != size)
    fail(1, "the stream held " + std::to_string(received) + " bytes, not " + std::to_string(size));
  if (const std::error_code failed = socket.shutdown(utcp::Shutdown::write)) fail(1, "shutdown: " + failed.message());
  finish_close(host, socket);
  std::printf("congestion rank 1: received all %llu bytes, each one checked\n", static_cast<unsigned long long>(size));
}

utcp::TcpSocket connect_to_rank_1(utcp::ViaHost& host, const std::string& controller,
                                  const std::optional<std::string>& trace_file) {
  for (int attempt = 0; attempt < 300; ++attempt) {
    utcp::TcpSocket socket(host.stack());
    if (const std::error_code failed = socket.set_congestion_control(controller))
      fail(0, "set_congestion_control(\"" + controller + "\"): " + failed.message());
    if (trace_file) {
      auto trace = utcp::csv_congestion_trace(*trace_file);
      if (!trace) fail(0, "the trace " + *trace_file + ": " + trace.error().message());
      socket.set_congestion_trace(std::move(*trace));
    }
    const std::error_code failed = socket.connect({host.address_of(1), port});
    if (!failed) return socket;
    if (failed != std::make_error_code(std::errc::connection_refused)) fail(0, "connect: " + failed.message());
    host.wait_until([] { return false; }, 100ms);  // rank 1 is not listening yet
  }
  fail(0, "connect: still refused after 30 s");
}

// Rank 0: sends the stream, then waits for the receiver's FIN, which comes
// once it has checked every byte.
void send_stream(utcp::ViaHost& host, std::uint64_t size, const std::string& controller,
                 const std::optional<std::string>& trace_file, const RuleReport& report) {
  utcp::TcpSocket socket = connect_to_rank_1(host, controller, trace_file);
  socket.set_send_timeout(io_timeout);
  socket.set_receive_timeout(io_timeout);
  const Clock::time_point started = Clock::now();
  std::vector<std::uint8_t> chunk(64 << 10);
  for (std::uint64_t sent = 0; sent < size;) {
    const std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), size - sent));
    for (std::size_t i = 0; i < length; ++i) chunk[i] = stream_byte(sent + i);
    for (std::size_t done = 0; done < length;) {
      const auto n = socket.send(std::span(chunk).subspan(done, length - done));
      if (!n) fail(0, "send after " + std::to_string(sent + done) + " bytes: " + n.error().message());
      done += *n;
    }
    sent += length;
  }
  if (const std::error_code failed = socket.shutdown(utcp::Shutdown::write)) fail(0, "shutdown: " + failed.message());
  std::uint8_t byte;
  const auto end = socket.receive(std::span(&byte, 1));
  if (!end) fail(0, "waiting for the receiver's end of stream: " + end.error().message());
  if (*end != 0) fail(0, "the receiver sent data");
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const utcp::TcpCounters counters = *socket.counters();
  finish_close(host, socket);

  std::printf(
      "congestion rank 0: %s sent %llu bytes in %.3f s (%.1f MB/s); segments out %llu, retransmitted %llu "
      "(fast %llu, timeouts %llu); faults dropped %llu frames here\n",
      controller.c_str(), static_cast<unsigned long long>(size), seconds, static_cast<double>(size) / seconds / 1e6,
      static_cast<unsigned long long>(counters.segments_out),
      static_cast<unsigned long long>(counters.retransmitted_segments),
      static_cast<unsigned long long>(counters.fast_retransmits), static_cast<unsigned long long>(counters.timeouts),
      static_cast<unsigned long long>(host.nic().counters().faults_dropped));
  if (controller != "aimd") return;
  std::printf(
      "aimd rules: %lu slow-start ACKs, %lu congestion-avoidance ACKs (cwnd grew %.0f bytes there, the rules say "
      "%.0f), %lu recoveries, %lu timeouts\n",
      report.slow_start_acks, report.avoidance_acks, report.avoidance_growth, report.avoidance_growth_by_rules,
      report.recoveries, report.timeouts);
  if (report.broken) fail(0, "aimd broke a rule: " + *report.broken);
  // Each ACK is allowed its rounding; over the run the sum must match.
  const double slack = report.mss + report.avoidance_growth_by_rules / 10;
  if (std::fabs(report.avoidance_growth - report.avoidance_growth_by_rules) > slack)
    fail(0, "aimd's congestion avoidance grew cwnd by " + std::to_string(std::lround(report.avoidance_growth)) +
                " bytes in all, the rules by " + std::to_string(std::lround(report.avoidance_growth_by_rules)) +
                " (α = " + std::to_string(AimdController::alpha) + " segments per window acknowledged)");
}

}  // namespace

int main(int argc, char** argv) {
  long kib = 4096;
  std::string controller = "aimd";
  std::optional<std::string> trace_file;
  usage_text =
      "usage: viarun -n 2 congestion [--controller NAME] [--kib N] [--trace FILE]\n"
      "\n"
      "Exercise congestion: rank 0 sends a stream to rank 1 over utcp with the congestion\n"
      "controller NAME; rank 1 checks every byte. Your controller (aimd.cpp) is \"aimd\",\n"
      "each of its calls checked against the rules of aimd.hpp.\n"
      "\n"
      "  --controller NAME  aimd (default), newreno or cubic\n"
      "  --kib N            KiB to send (1..1048576, default 4096)\n"
      "  --trace FILE       write rank 0's cwnd trace (CSV: time_us,cwnd,ssthresh,state)\n"
      "  --help             this text\n"
      "\n"
      "Exit status: 0 delivered and the rules kept; 1 a wrong byte, a broken rule or an error; 2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (number_option(argc, argv, &i, "--kib", 1, 1 << 20, &kib)) continue;
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--controller") == 0 || std::strcmp(argv[i], "--trace") == 0) {
      if (!has_value) usage_error("a value is missing after", argv[i]);
      (argv[i][2] == 'c' ? controller : trace_file.emplace()) = argv[i + 1];
      ++i;
      continue;
    }
    usage_error("unknown option", argv[i]);
  }
  try {
    auto report = std::make_shared<RuleReport>();
    if (const std::error_code failed = utcp::register_congestion_controller(
            "aimd", [report] { return std::make_unique<RuleChecker>(std::make_unique<AimdController>(), report); }))
      fail(-1, "register_congestion_controller(\"aimd\"): " + failed.message());
    if (!utcp::congestion_controller_known(controller)) usage_error("no congestion controller is named", controller.c_str());

    utcp::ViaHostConfig config = utcp::ViaHostConfig::from_environment();
    if (config.size != 2) fail(config.rank, "needs exactly 2 ranks (viarun -n 2)");
    // Room at the link for a whole window of segments, so that what is lost
    // is what the faults drop.
    config.link.receive_buffers_per_peer = 256;
    config.link.send_buffers = 256;
    utcp::ViaHost host(config);
    const std::uint64_t size = static_cast<std::uint64_t>(kib) << 10;
    if (host.rank() == 1)
      receive_stream(host, size);
    else
      send_stream(host, size, controller, trace_file, *report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "congestion: %s\n", e.what());
    return EXAMPLE_FAILED;
  }
  return EXAMPLE_OK;
}
