// am_bench: Active Messages micro-benchmarks between ranks 0 and 1 of a
// viarun job (other ranks only take part in set-up): U-Net's UAM figures.
//   rtt    round trip of a request and its reply (short up to 32 bytes, a
//          payload up to am_max_size, above that a store and its acknowledgement)
//   store  store bandwidth (a window of stores in flight)
//   get    get bandwidth
//   rate   message rate: one-way requests with a window in flight
//
//   am_bench [--test rtt|store|get|rate] [--sizes a,b,...] [--iters N] [--window W] [--nhalf] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <am/am.hpp>

#include "bench_job.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRepetitions = 5;
constexpr std::size_t kShortBytes = 32;  // up to 4 words: a short message
enum { kPing = 1, kPong = 2, kPingPayload = 3, kPongPayload = 4, kStop = 5, kSink = 6, kSinkPayload = 7 };

long pongs = 0;
bool stop = false;
long sunk = 0;           // requests the rate test's one-way handlers took (rank 1)
long expected_sunk = 0;  // how many rank 0 says it sent, with kStop

void die(const char* what) {
  std::fprintf(stderr, "am_bench: %s: %s\n", what, am::last_error());
  std::exit(1);
}

// A request of `bytes`: up to 32 bytes as words (a short message), else a payload.
am::Status request_of(int peer, std::size_t bytes, int short_handler, int payload_handler,
                      std::span<const std::byte> payload) {
  if (bytes > kShortBytes) return am::request_payload(peer, payload_handler, payload.first(bytes));
  const am::Word w = 1;
  switch ((bytes + 7) / 8) {
    case 0: return am::request(peer, short_handler);
    case 1: return am::request(peer, short_handler, w);
    case 2: return am::request(peer, short_handler, w, w);
    case 3: return am::request(peer, short_handler, w, w, w);
    default: return am::request(peer, short_handler, w, w, w, w);
  }
}

void one_rtt(int peer, std::size_t bytes, std::span<const std::byte> payload, std::byte* remote) {
  const long before = pongs;
  am::Status s;
  if (bytes <= am::max_size()) {
    s = request_of(peer, bytes, kPing, kPingPayload, payload);
  } else {
    s = am::store(peer, payload.data(), remote, bytes).wait();
    ++pongs;
  }
  if (s != am::Status::ok) die("request");
  // As via_pingpong waits in VipRecvWait: spin, then yield, then sleep in the NIC.
  am::wait_until([&] { return pongs != before; });
}

double run_rtt(int peer, std::size_t bytes, long iters, std::span<const std::byte> payload, std::byte* remote) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(1l, iters / kRepetitions);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) one_rtt(peer, bytes, payload, remote);
    std::chrono::duration<double, std::micro> us = Clock::now() - start;
    reps.push_back(us.count() / double(n) / 2.0);
  }
  return bench::median(reps);
}

double run_bandwidth(bool store, int peer, std::size_t bytes, long iters, std::size_t window, std::byte* local,
                     std::byte* remote) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(1l, iters / kRepetitions);
    std::deque<am::Future> in_flight;
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      if (in_flight.size() == window) {
        if (in_flight.front().wait() != am::Status::ok) die("store/get");
        in_flight.pop_front();
      }
      in_flight.push_back(store ? am::store(peer, local, remote, bytes) : am::get(peer, remote, local, bytes));
    }
    for (auto& f : in_flight)
      if (f.wait() != am::Status::ok) die("store/get");
    std::chrono::duration<double> s = Clock::now() - start;
    reps.push_back(double(bytes) * double(n) / s.count() / 1e6);
  }
  return bench::median(reps);
}

// Message rate, as UCX's am_bw and GASNet's testam do: requests to a handler
// that does not reply, sent back to back; AM's credits keep at most a window
// (its depth) unanswered, and each repetition ends when every request has been
// answered, its handler having run at the peer. Returns messages per second.
double run_rate(int peer, std::size_t bytes, long iters, std::span<const std::byte> payload, long& sent) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(1l, iters / kRepetitions);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i)
      if (request_of(peer, bytes, kSink, kSinkPayload, payload) != am::Status::ok) die("request");
    if (am::wait_acknowledged() != am::Status::ok) die("wait for the answers");
    std::chrono::duration<double> s = Clock::now() - start;
    sent += n;
    reps.push_back(double(n) / s.count());
  }
  return bench::median(reps);
}

long default_iters(const std::string& test, std::size_t bytes) {
  const long n = long(400'000'000 / std::max<std::size_t>(bytes, 1024));
  return std::clamp(n, 200l, test == "rtt" ? 100000l : test == "rate" ? 500000l : 20000l);
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 am_bench [--test rtt|store|get|rate] [--sizes a,b,...] [--iters N] [--window W]\n"
    "                            [--nhalf] [--json]\n"
    "  Active Messages between ranks 0 and 1 (other ranks only take part in set-up)\n"
    "  --test rtt       round trip of a request and its reply (default)\n"
    "         store     store bandwidth, a window of stores in flight\n"
    "         get       get bandwidth\n"
    "         rate      message rate: requests to a handler that does not reply, back\n"
    "                   to back (as UCX's am_bw); a window of them unanswered at most;\n"
    "                   sizes up to am_max_size; msg_rate_Mps in the JSON\n"
    "  --sizes a,b,...  sizes in bytes, k/M suffixes allowed (default 1 B to 4 MiB;\n"
    "                   rate: to am_max_size)\n"
    "  --iters N        operations per size (default: by size)\n"
    "  --window W       requests, stores or gets in flight: AM's depth, its credits per\n"
    "                   peer (default VIASTACK_AM_DEPTH, 32; at most 1024)\n"
    "  --nhalf          after a store (the default with it), get or rate sweep, one more\n"
    "                   line: N-half, the size that reaches half of the sweep's peak\n"
    "                   bandwidth (test \"nhalf\": nhalf_bytes, peak_bw_MBps, peak_bytes)\n"
    "  --json           one JSON object per line (rate adds msg_rate_Mps, window)\n"
    "  -h, --help       show this help;  --version  show the library's version\n"
    "environment: VIASTACK_PROVIDER (set by viarun) and the VIASTACK_* variables of\n"
    "  the library (viarun --info lists them)\n"
    BENCH_EXIT_STATUSES;

int main(int argc, char** argv) {
  bench::start("am_bench", {kUsage, bench::library_version}, argc, argv);
  std::string test = "rtt";
  std::vector<std::size_t> sizes;
  long iters = 0;
  long window = 0;  // 0: AM's depth
  bool test_given = false, nhalf = false, json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) bench::usage_error("am_bench", std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--test") {
      test = value("--test");
      test_given = true;
      if (test != "rtt" && test != "store" && test != "get" && test != "rate")
        bench::usage_error("am_bench", "--test must be rtt, store, get or rate");
    } else if (a == "--sizes") {
      sizes = bench::parse_sizes("am_bench", value("--sizes"));
    } else if (a == "--iters") {
      iters = bench::parse_count("am_bench", value("--iters"));
    } else if (a == "--window") {
      window = bench::parse_count("am_bench", value("--window"));
      if (window > 1024) bench::usage_error("am_bench", "--window must be at most 1024 (AM's largest depth)");
    } else if (a == "--nhalf") {
      nhalf = true;
    } else if (a == "--json") {
      json = true;
    } else {
      bench::usage_error("am_bench", "unknown option " + a);
    }
  }
  if (nhalf && !test_given) test = "store";
  if (nhalf && test == "rtt") bench::usage_error("am_bench", "--nhalf needs --test store, get or rate");
  const bench::Job job = bench::job_from_env("am_bench");
  if (job.size < 2) bench::usage_error("am_bench", "needs at least 2 ranks (run it under viarun -n 2)");
  const bool sizes_given = !sizes.empty();
  if (!sizes_given) sizes = bench::default_sizes();
  const std::size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());

  am::set_handler(kPing, [](am::Token t) { t.reply(kPong); });
  am::set_handler(kPong, [](am::Token) { ++pongs; });
  am::set_handler(kPingPayload, [](am::Token t, std::span<std::byte> p) { t.reply_payload(kPongPayload, p); });
  am::set_handler(kPongPayload, [](am::Token, std::span<std::byte>) { ++pongs; });
  am::set_handler(kStop, [](am::Token, long sent) {
    expected_sunk = sent;
    stop = true;
  });
  am::set_handler(kSink, [](am::Token) { ++sunk; });
  am::set_handler(kSinkPayload, [](am::Token, std::span<std::byte>) { ++sunk; });
  am::Config config = am::Config::from_env();
  config.segment_bytes = std::max(config.segment_bytes, 2 * max_bytes + 4096);
  if (window) config.depth = unsigned(window);
  if (am::enable(config) != am::Status::ok) die("am_enable");
  if (test == "rate") {
    if (!sizes_given) std::erase_if(sizes, [](std::size_t bytes) { return bytes > am::max_size(); });
    if (*std::max_element(sizes.begin(), sizes.end()) > am::max_size()) {
      const std::string why = "--test rate takes sizes up to am_max_size, " + std::to_string(am::max_size());
      // Every rank finds the same, and leaves AM as it would at the end: an
      // exit with AM enabled is left to static destructors, which run it
      // after the VIA library's own are gone.
      am::disable();
      bench::usage_error("am_bench", why);
    }
  }

  if (job.rank == 0) {
    // Sources in our own segment (registered once, as via_pingpong's buffers), targets in the peer's.
    auto* local = static_cast<std::byte*>(am::segment(0));
    auto* remote = static_cast<std::byte*>(am::segment(1));
    std::memset(local, 1, 2 * max_bytes);
    const std::span<const std::byte> payload(local, max_bytes);
    long sent = 0;  // by the rate test, for rank 1 to check
    if (!json) bench::table_header("test");
    std::vector<std::pair<std::size_t, double>> sweep;
    for (std::size_t bytes : sizes) {
      const long n = iters ? iters : default_iters(test, bytes);
      bench::Result r{"am_bench", bench::provider_from_env(), "test", test, bytes, n, 0, 0};
      if (test == "rtt") {
        r.lat_us = run_rtt(1, bytes, n, payload, remote);
        r.bw_MBps = double(bytes) / r.lat_us;
      } else if (test == "rate") {
        const double per_second = run_rate(1, bytes, n, payload, sent);
        r.bw_MBps = double(bytes) * per_second / 1e6;
        r.lat_us = 1e6 / per_second;  // time per message
        r.msg_rate_Mps = per_second / 1e6;
        r.window = int(config.depth);
      } else {
        r.bw_MBps = run_bandwidth(test == "store", 1, bytes, n, config.depth, local, remote);
        r.lat_us = r.bw_MBps > 0 ? double(bytes) / r.bw_MBps : 0;
      }
      sweep.emplace_back(bytes, r.bw_MBps);
      bench::print_result(r, json);
    }
    if (nhalf) bench::print_n_half("am_bench", bench::provider_from_env(), "test", test, bench::n_half(sweep), json);
    if (am::request(1, kStop, sent) != am::Status::ok) die("stop");
  } else if (job.rank == 1) {
    am::wait_until([] { return stop; });
    if (sunk != expected_sunk) {
      std::fprintf(stderr, "am_bench: the rate test's handler ran %ld times for %ld requests\n", sunk, expected_sunk);
      std::exit(1);
    }
  }
  if (am::disable() != am::Status::ok) die("am_disable");
  return 0;
}
