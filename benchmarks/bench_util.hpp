// Small helpers shared by the benchmark programs: option parsing, the job's
// rank and size, medians, the output format.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// What --help prints, and a usage error after its reason: the synopsis, the
// options, the environment and the exit statuses.
struct Program {
  const char* usage = "";
  std::string (*version)() = nullptr;  // the library measured: "0.1.0"
};
inline Program program;

// Every benchmark's exit statuses, for the end of its usage.
#define BENCH_EXIT_STATUSES \
  "exit status: 0 when every measurement ran; 1 when one failed (the reason is\n" \
  "  printed); 2 for a bad command line\n"

// --help and --version, before the job starts: print and exit 0.
inline void start(const char* name, const Program& p, int argc, char** argv) {
  program = p;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(p.usage, stdout);
      std::exit(0);
    }
    if (a == "--version") {
      std::printf("%s (viastack) %s\n", name, p.version ? p.version().c_str() : "");
      std::exit(0);
    }
  }
}

[[noreturn]] inline void usage_error(const char* prog, const std::string& why) {
  std::fprintf(stderr, "%s: %s\n%s", prog, why.c_str(), program.usage);
  std::exit(2);
}

// Parses "8,1k,64K,1M" (k/K = 1024, m/M = 1048576).
inline std::vector<std::size_t> parse_sizes(const char* prog, const std::string& text) {
  std::vector<std::size_t> sizes;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || end == item.c_str()) usage_error(prog, "bad size '" + item + "' in --sizes");
    std::string suffix = end;
    if (suffix == "k" || suffix == "K")
      v <<= 10;
    else if (suffix == "m" || suffix == "M")
      v <<= 20;
    else if (!suffix.empty())
      usage_error(prog, "bad size '" + item + "' in --sizes");
    if (v > (1ull << 30)) usage_error(prog, "size '" + item + "' exceeds 1 GiB");
    sizes.push_back(std::size_t(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return sizes;
}

inline long parse_count(const char* prog, const std::string& text) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v <= 0) usage_error(prog, "'" + text + "' is not a positive count");
  return v;
}

// 1 B to 4 MiB in powers of two.
inline std::vector<std::size_t> default_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t s = 1; s <= (4u << 20); s *= 2) sizes.push_back(s);
  return sizes;
}

// One measurement, as CONTRACTS.md gives it: a JSON object per line with
// --json, else a row under table_header(). `kind_key` names the column that
// says what was measured ("mode" for ping-pongs, "test" for am_bench).
struct Result {
  const char* bench;
  const char* provider;
  const char* kind_key;
  std::string kind;
  std::size_t bytes;
  long iters;
  double lat_us;
  double bw_MBps;
  // Message-rate modes only (0 elsewhere, and then not printed): millions of
  // messages per second, and the messages kept in flight to reach it.
  double msg_rate_Mps = 0;
  int window = 0;
};

inline void table_header(const char* kind_key) {
  std::printf("%-6s %10s %10s %12s %12s %12s\n", kind_key, "bytes", "iters", "lat_us", "bw_MBps", "msg_rate_Mps");
}

inline void print_result(const Result& r, bool json) {
  if (json) {
    std::printf("{\"bench\":\"%s\",\"provider\":\"%s\",\"%s\":\"%s\",\"bytes\":%zu,\"iters\":%ld,"
                "\"lat_us\":%.4f,\"bw_MBps\":%.2f",
                r.bench, r.provider, r.kind_key, r.kind.c_str(), r.bytes, r.iters, r.lat_us, r.bw_MBps);
    if (r.msg_rate_Mps > 0) std::printf(",\"msg_rate_Mps\":%.4f,\"window\":%d", r.msg_rate_Mps, r.window);
    std::printf("}\n");
  } else if (r.msg_rate_Mps > 0) {
    std::printf("%-6s %10zu %10ld %12.3f %12.1f %12.3f\n", r.kind.c_str(), r.bytes, r.iters, r.lat_us, r.bw_MBps,
                r.msg_rate_Mps);
  } else {
    std::printf("%-6s %10zu %10ld %12.3f %12.1f\n", r.kind.c_str(), r.bytes, r.iters, r.lat_us, r.bw_MBps);
  }
  std::fflush(stdout);
}

// N-half (Hockney's n_1/2): the message size at which a sweep first reaches
// half of its peak bandwidth. Between the last size below half and the first
// at or above it, the size is interpolated linearly in log2(size), as the
// sweep's sizes are powers of two; a sweep whose smallest size already
// reaches half gives that size (N-half is at most that).
struct NHalf {
  double nhalf_bytes = 0;
  double peak_bw_MBps = 0;
  std::size_t peak_bytes = 0;
};

inline NHalf n_half(std::vector<std::pair<std::size_t, double>> sweep) {  // (bytes, bw_MBps)
  std::erase_if(sweep, [](const auto& p) { return p.first == 0; });  // no log2(0): 0 B moves nothing
  std::sort(sweep.begin(), sweep.end());
  NHalf r;
  for (const auto& [bytes, bw] : sweep)
    if (bw > r.peak_bw_MBps) r = {0, bw, bytes};
  const double half = r.peak_bw_MBps / 2;
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    if (sweep[i].second < half) continue;
    if (i == 0) {
      r.nhalf_bytes = double(sweep[0].first);
    } else {
      const auto [b0, w0] = sweep[i - 1];
      const auto [b1, w1] = sweep[i];
      const double t = (half - w0) / (w1 - w0);
      r.nhalf_bytes = std::exp2(std::log2(double(b0)) + t * (std::log2(double(b1)) - std::log2(double(b0))));
    }
    break;
  }
  return r;
}

// The N-half summary after a sweep: one more JSON line, whose `kind` is
// "nhalf" and which names the sweep it came from, or a line of text.
inline void print_n_half(const char* bench, const char* provider, const char* kind_key, const std::string& sweep_kind,
                         const NHalf& h, bool json) {
  if (json)
    std::printf("{\"bench\":\"%s\",\"provider\":\"%s\",\"%s\":\"nhalf\",\"sweep\":\"%s\","
                "\"nhalf_bytes\":%.0f,\"peak_bw_MBps\":%.2f,\"peak_bytes\":%zu}\n",
                bench, provider, kind_key, sweep_kind.c_str(), h.nhalf_bytes, h.peak_bw_MBps, h.peak_bytes);
  else
    std::printf("N-half (%s): %.0f bytes reach half of the peak %.1f MB/s (peak at %zu bytes)\n", sweep_kind.c_str(),
                h.nhalf_bytes, h.peak_bw_MBps, h.peak_bytes);
  std::fflush(stdout);
}

// The provider a rank runs on, as viarun names it (shm when unset).
inline const char* provider_from_env() {
  const char* provider = std::getenv("VIASTACK_PROVIDER");
  return provider && *provider ? provider : "shm";
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace bench
