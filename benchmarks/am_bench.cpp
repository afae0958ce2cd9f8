// am_bench: Active Messages micro-benchmarks between ranks 0 and 1 of a
// viarun job (other ranks only take part in set-up): U-Net's UAM figures.
//   rtt    round trip of a request and its reply (short up to 32 bytes, a
//          payload up to am_max_size, above that a store and its acknowledgement)
//   store  store bandwidth (a window of stores in flight)
//   get    get bandwidth
//
//   am_bench [--test rtt|store|get] [--sizes a,b,...] [--iters N] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <am/am.hpp>

#include "bench_job.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRepetitions = 5;
constexpr std::size_t kWindow = 32;  // stores/gets in flight: the default depth, a credit each
constexpr std::size_t kShortBytes = 32;  // up to 4 words: a short message
enum { kPing = 1, kPong = 2, kPingPayload = 3, kPongPayload = 4, kStop = 5 };

long pongs = 0;
bool stop = false;

void die(const char* what) {
  std::fprintf(stderr, "am_bench: %s: %s\n", what, am::last_error());
  std::exit(1);
}

void one_rtt(int peer, std::size_t bytes, std::span<const std::byte> payload, std::byte* remote) {
  const long before = pongs;
  am::Status s;
  if (bytes <= kShortBytes) {
    const am::Word w = 1;
    switch ((bytes + 7) / 8) {
      case 0: s = am::request(peer, kPing); break;
      case 1: s = am::request(peer, kPing, w); break;
      case 2: s = am::request(peer, kPing, w, w); break;
      case 3: s = am::request(peer, kPing, w, w, w); break;
      default: s = am::request(peer, kPing, w, w, w, w); break;
    }
  } else if (bytes <= am::max_size()) {
    s = am::request_payload(peer, kPingPayload, payload.first(bytes));
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

double run_bandwidth(bool store, int peer, std::size_t bytes, long iters, std::byte* local, std::byte* remote) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(1l, iters / kRepetitions);
    std::deque<am::Future> in_flight;
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      if (in_flight.size() == kWindow) {
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

long default_iters(const std::string& test, std::size_t bytes) {
  const long n = long(400'000'000 / std::max<std::size_t>(bytes, 1024));
  return std::clamp(n, 200l, test == "rtt" ? 100000l : 20000l);
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 am_bench [--test rtt|store|get] [--sizes a,b,...] [--iters N] [--json]\n"
    "  Active Messages between ranks 0 and 1 (other ranks only take part in set-up)\n"
    "  --test rtt       round trip of a request and its reply (default)\n"
    "         store     store bandwidth, a window of stores in flight\n"
    "         get       get bandwidth\n"
    "  --sizes a,b,...  sizes in bytes, k/M suffixes allowed (default 1 B to 4 MiB)\n"
    "  --iters N        operations per size (default: by size)\n"
    "  --json           one JSON object per line\n"
    "  -h, --help       show this help;  --version  show the library's version\n"
    "environment: VIASTACK_PROVIDER (set by viarun) and the VIASTACK_* variables of\n"
    "  the library (viarun --info lists them)\n"
    BENCH_EXIT_STATUSES;

int main(int argc, char** argv) {
  bench::start("am_bench", {kUsage, bench::library_version}, argc, argv);
  std::string test = "rtt";
  std::vector<std::size_t> sizes;
  long iters = 0;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) bench::usage_error("am_bench", std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--test") {
      test = value("--test");
      if (test != "rtt" && test != "store" && test != "get") bench::usage_error("am_bench", "--test must be rtt, store or get");
    } else if (a == "--sizes") {
      sizes = bench::parse_sizes("am_bench", value("--sizes"));
    } else if (a == "--iters") {
      iters = bench::parse_count("am_bench", value("--iters"));
    } else if (a == "--json") {
      json = true;
    } else {
      bench::usage_error("am_bench", "unknown option " + a);
    }
  }
  const bench::Job job = bench::job_from_env("am_bench");
  if (job.size < 2) bench::usage_error("am_bench", "needs at least 2 ranks (run it under viarun -n 2)");
  if (sizes.empty()) sizes = bench::default_sizes();
  const std::size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());

  am::set_handler(kPing, [](am::Token t) { t.reply(kPong); });
  am::set_handler(kPong, [](am::Token) { ++pongs; });
  am::set_handler(kPingPayload, [](am::Token t, std::span<std::byte> p) { t.reply_payload(kPongPayload, p); });
  am::set_handler(kPongPayload, [](am::Token, std::span<std::byte>) { ++pongs; });
  am::set_handler(kStop, [](am::Token) { stop = true; });
  am::Config config = am::Config::from_env();
  config.segment_bytes = std::max(config.segment_bytes, 2 * max_bytes + 4096);
  if (am::enable(config) != am::Status::ok) die("am_enable");

  if (job.rank == 0) {
    // Sources in our own segment (registered once, as via_pingpong's buffers), targets in the peer's.
    auto* local = static_cast<std::byte*>(am::segment(0));
    auto* remote = static_cast<std::byte*>(am::segment(1));
    std::memset(local, 1, 2 * max_bytes);
    if (!json) bench::table_header("test");
    for (std::size_t bytes : sizes) {
      const long n = iters ? iters : default_iters(test, bytes);
      double lat_us, bw;
      if (test == "rtt") {
        lat_us = run_rtt(1, bytes, n, std::span<const std::byte>(local, max_bytes), remote);
        bw = double(bytes) / lat_us;
      } else {
        bw = run_bandwidth(test == "store", 1, bytes, n, local, remote);
        lat_us = bw > 0 ? double(bytes) / bw : 0;
      }
      bench::print_result({"am_bench", bench::provider_from_env(), "test", test, bytes, n, lat_us, bw}, json);
    }
    if (am::request(1, kStop) != am::Status::ok) die("stop");
  } else if (job.rank == 1) {
    am::wait_until([] { return stop; });
  }
  if (am::disable() != am::Status::ok) die("am_disable");
  return 0;
}
