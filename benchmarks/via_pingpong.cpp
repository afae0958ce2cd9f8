// via_pingpong: raw VIA one-way latency (ping-pong), streaming bandwidth and
// message rate between ranks 0 and 1 of a viarun job; other ranks take no part.
//
//   via_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw|rate] [--window W]
//                [--cold] [--nhalf] [--json] [--summary]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench_job.hpp"
#include "via/via.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultWindow = 64;  // messages in flight in bandwidth and rate modes
constexpr int kRepetitions = 5;
constexpr std::size_t kMinColdPool = 64u << 20;

struct Options {
  std::vector<std::size_t> sizes;
  long iters = 0;  // 0: chosen per size
  std::string mode = "lat";
  bool mode_given = false;
  int window = kDefaultWindow;
  bool cold = false;
  bool nhalf = false;
  bool json = false;
  bool summary = false;
};

void die(const char* what, via::Result r) {
  std::fprintf(stderr, "via_pingpong: %s: %s\n", what, via::describe(r));
  std::exit(1);
}
void check(via::Result r, const char* what) {
  if (r != via::Result::success) die(what, r);
}

// "32768K" (sysfs's cache sizes) in bytes; 0 when it cannot be read.
std::size_t parse_cache_size(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return 0;
  switch (*end) {
    case 'K': return std::size_t(v) << 10;
    case 'M': return std::size_t(v) << 20;
    case 'G': return std::size_t(v) << 30;
    default: return std::size_t(v);
  }
}

// The largest data or unified cache of CPU 0 (the last level), from sysfs; 0 if unknown.
std::size_t last_level_cache_bytes() {
  std::size_t largest = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream type_file(dir + "type"), size_file(dir + "size");
    std::string type, size;
    if (!(type_file >> type) || !(size_file >> size)) continue;
    if (type != "Instruction") largest = std::max(largest, parse_cache_size(size));
  }
  return largest;
}

// Where messages are sent from and received into.
// Warm: one send buffer and one receive buffer for every message, as osu_bw,
// NetPIPE and ucx_perftest do: the figures are about the transport, not about
// how the caches hold a large working set.
// Cold (--cold): every message, sent or received, takes the next slot of a
// pool of 4x the last-level cache (at least 64 MiB), so that a buffer comes
// back round only after the whole pool has gone through the caches: neither
// side's buffer is in cache, as for an application streaming through its data.
class Buffers {
 public:
  Buffers(std::size_t max_bytes, bool cold) : max_bytes_(std::max<std::size_t>(max_bytes, 64)) {
    if (cold) pool_bytes_ = std::max(kMinColdPool, 4 * last_level_cache_bytes());
    // The pool, then room for one receive of the largest size at its end: a
    // receive is posted for max_bytes wherever its slot starts. (Zeroed, so
    // every page is in place before anything is timed.)
    memory_.resize(cold ? pool_bytes_ + max_bytes_ : 2 * max_bytes_);
  }
  std::span<std::byte> memory() { return memory_; }
  std::size_t pool_bytes() const { return pool_bytes_; }
  std::size_t max_bytes() const { return max_bytes_; }
  // Cold: slots of this size (rounded up to a cache line) from now on.
  void set_message_bytes(std::size_t bytes) { stride_ = (std::max<std::size_t>(bytes, 1) + 63) & ~std::size_t(63); }
  std::byte* send_buffer() { return pool_bytes_ ? next_slot() : memory_.data(); }
  std::byte* recv_buffer() { return pool_bytes_ ? next_slot() : memory_.data() + max_bytes_; }

 private:
  std::byte* next_slot() {
    if (next_ + stride_ > pool_bytes_) next_ = 0;
    std::byte* slot = memory_.data() + next_;
    next_ += stride_;
    return slot;
  }
  std::vector<std::byte> memory_;
  std::size_t max_bytes_;
  std::size_t pool_bytes_ = 0;  // 0: warm
  std::size_t stride_ = 64, next_ = 0;
};

// Everything one side needs: a NIC, one VI connected to the other rank, and
// registered buffers with one descriptor per buffer.
struct Endpoint {
  std::unique_ptr<via::Nic> nic;
  via::Vi* vi = nullptr;
  via::Ptag ptag = 0;
  int window;
  Buffers buffers;
  // Sends use descriptors 0 .. 2*window-1, receives the next 2*window.
  std::vector<VIP_DESCRIPTOR> descs;
  via::MemHandle buffer_handle = 0, desc_handle = 0;

  Endpoint(int rank, std::size_t max_bytes, int window_, bool cold) : window(window_), buffers(max_bytes, cold) {
    check(via::Nic::open("", nic), "open NIC");
    check(nic->create_ptag(ptag), "create ptag");
    // Two windows of receives are posted at once: the NIC's queues must hold them.
    VIP_NIC_ATTRIBUTES nic_attrs;
    nic->query(nic_attrs);
    if (2ul * std::size_t(window) > nic_attrs.MaxDescriptorsPerQueue)
      bench::usage_error("via_pingpong", "--window must be at most " +
                                             std::to_string(nic_attrs.MaxDescriptorsPerQueue / 2) +
                                             " (half of the NIC's descriptors per queue)");
    descs.resize(4 * window + 1);
    via::MemAttributes attrs{ptag, false, false};
    check(nic->register_memory(buffers.memory().data(), buffers.memory().size(), attrs, buffer_handle),
          "register buffers");
    check(nic->register_memory(descs.data(), descs.size() * sizeof(VIP_DESCRIPTOR), attrs, desc_handle),
          "register descriptors");
    via::ViAttributes vattrs;
    vattrs.ptag = ptag;
    check(nic->create_vi(vattrs, nullptr, nullptr, vi), "create VI");
    // Receives first, so nothing the peer sends finds the queue empty.
    for (int i = 0; i < 2 * window; ++i) post_recv(i);
    via::NetAddress local{{}, {'p', 'p'}}, remote;
    check(nic->resolve("rank" + std::to_string(1 - rank), 0, remote.host), "resolve peer");
    remote.discriminator = {'p', 'p'};
    check(vi->connect_peer_request(local, remote, 30000), "peer connect request");
    check(vi->connect_peer_wait(), "peer connect");
  }

  VIP_DESCRIPTOR* desc(int i) {
    // VIP_DESCRIPTOR_ALIGNMENT: vector<VIP_DESCRIPTOR> is 64-byte sized, align the base by hand.
    auto base = reinterpret_cast<std::uintptr_t>(descs.data());
    base = (base + 63) & ~std::uintptr_t(63);
    return reinterpret_cast<VIP_DESCRIPTOR*>(base) + i;
  }

  void fill(VIP_DESCRIPTOR* d, std::byte* buf, std::size_t bytes) {
    std::memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->CS.Length = std::uint32_t(bytes);
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = buffer_handle;
    d->DS[0].Local.Length = std::uint32_t(bytes);
  }
  // Room for a message of any size of the run.
  void post_recv(int i) {
    VIP_DESCRIPTOR* d = desc(2 * window + i);
    fill(d, buffers.recv_buffer(), buffers.max_bytes());
    check(vi->post_recv(d, desc_handle), "post receive");
  }
  void post_send(int i, std::size_t bytes) {
    VIP_DESCRIPTOR* d = desc(i);
    fill(d, buffers.send_buffer(), bytes);
    check(vi->post_send(d, desc_handle), "post send");
  }
  // Waits for the next receive, checks it, and re-posts its descriptor.
  void recv_one() {
    VIP_DESCRIPTOR* d;
    check(vi->recv_wait(60000, d), "wait for receive");
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
      std::fprintf(stderr, "via_pingpong: receive failed, status 0x%x\n", d->CS.Status);
      std::exit(1);
    }
    post_recv(int(d - desc(2 * window)));
  }
  void reap_sends(bool block) {
    VIP_DESCRIPTOR* d;
    while ((block ? vi->send_wait(60000, d) : vi->send_done(d)) == via::Result::success) {
      if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
        std::fprintf(stderr, "via_pingpong: send failed, status 0x%x\n", d->CS.Status);
        std::exit(1);
      }
      if (block) return;
    }
  }
  // Nothing may be left over from one measurement for the next.
  void expect_nothing_received() {
    VIP_DESCRIPTOR* extra;
    if (vi->recv_done(extra) == via::Result::success) {
      std::fprintf(stderr, "via_pingpong: protocol out of step (an unexpected message arrived)\n");
      std::exit(1);
    }
  }
};

double run_latency(Endpoint& ep, int rank, std::size_t bytes, long iters) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(1l, iters / kRepetitions);
    auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      if (rank == 0) {
        ep.post_send(0, bytes);
        ep.recv_one();
      } else {
        ep.recv_one();
        ep.post_send(0, bytes);
      }
      ep.reap_sends(true);
    }
    std::chrono::duration<double, std::micro> us = Clock::now() - start;
    reps.push_back(us.count() / double(n) / 2.0);
  }
  return bench::median(reps);
}

// Messages per repetition: a multiple of the window, at least one window.
long messages_per_repetition(long iters, int window) {
  return std::max(long(window), iters / kRepetitions / window * window);
}

// Streaming: rank 1 starts with 2*window receives posted and returns a credit
// message after every window of messages (having re-posted their receives);
// rank 0 sends while it has credits. The last credit says everything arrived.
// Returns messages per second.
double run_bandwidth(Endpoint& ep, int rank, std::size_t bytes, long iters) {
  const int window = ep.window;
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = messages_per_repetition(iters, window);
    const long credit_messages = n / window;
    auto start = Clock::now();
    if (rank == 0) {
      long credits = 2 * window, received = 0;
      for (long sent = 0; sent < n; ++sent) {
        if (credits == 0) {
          ep.recv_one();
          ++received;
          credits += window;
        }
        ep.post_send(int(sent % (2 * window)), bytes);
        --credits;
        ep.reap_sends(false);
      }
      for (; received < credit_messages; ++received) ep.recv_one();
      while (!ep.vi->send_queue_empty()) ep.reap_sends(true);
      ep.expect_nothing_received();
    } else {
      for (long i = 1; i <= n; ++i) {
        ep.recv_one();
        if (i % window == 0) {
          ep.post_send(0, 0);
          ep.reap_sends(true);
        }
      }
    }
    std::chrono::duration<double> s = Clock::now() - start;
    reps.push_back(double(n) / s.count());
  }
  return bench::median(reps);
}

// Message rate, as OSU's osu_mbw_mr: rank 0 posts a window of sends back to
// back and waits for them to complete; rank 1, which keeps a window of
// receives posted, takes them (re-posting each receive at once) and then
// answers with a zero-byte message that rank 0 awaits before the next window.
// Returns messages per second.
double run_rate(Endpoint& ep, int rank, std::size_t bytes, long iters) {
  const int window = ep.window;
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long windows = messages_per_repetition(iters, window) / window;
    auto start = Clock::now();
    for (long w = 0; w < windows; ++w) {
      if (rank == 0) {
        for (int i = 0; i < window; ++i) ep.post_send(i, bytes);
        for (int i = 0; i < window; ++i) ep.reap_sends(true);
        ep.recv_one();
      } else {
        for (int i = 0; i < window; ++i) ep.recv_one();
        ep.post_send(0, 0);
        ep.reap_sends(true);
      }
    }
    std::chrono::duration<double> s = Clock::now() - start;
    reps.push_back(double(windows * window) / s.count());
  }
  if (rank == 0) ep.expect_nothing_received();
  return bench::median(reps);
}

long default_iters(const std::string& mode, std::size_t bytes, bool summary) {
  long budget = summary ? 40'000'000 : 400'000'000;  // bytes moved per size, roughly
  long n = long(budget / std::max<std::size_t>(bytes, 1024));
  long cap = summary ? 20000 : (mode == "rate" ? 500000 : 100000);
  return std::clamp(n, 200l, cap);
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 via_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw|rate] [--window W]\n"
    "                                [--cold] [--nhalf] [--json] [--summary]\n"
    "  raw VIA between ranks 0 and 1 (other ranks take no part)\n"
    "  --sizes a,b,...  message sizes in bytes, k/M suffixes allowed (default 1 B to 4 MiB)\n"
    "  --iters N        round trips or messages per size (default: by size)\n"
    "  --mode lat       one-way latency (ping-pong; the default)\n"
    "         bw        streaming bandwidth: the receiver returns a credit per window\n"
    "         rate      message rate, as osu_mbw_mr: a window of W sends posted back to\n"
    "                   back, the receiver keeping W receives posted and answering each\n"
    "                   window with a zero-byte message; msg_rate_Mps in the JSON\n"
    "  --window W       messages in flight in bw and rate modes (default 64; at most half\n"
    "                   of the NIC's descriptors per queue, 512)\n"
    "  --cold           buffers not in cache: each message, sent or received, takes the\n"
    "                   next slot of a pool of 4x the last-level cache (read from\n"
    "                   /sys/devices/system/cpu/cpu0/cache; at least 64 MiB) on each rank;\n"
    "                   without it every message uses the same send and receive buffer\n"
    "  --nhalf          after a bw (the default with it) or rate sweep, one more line:\n"
    "                   N-half, the size that reaches half of the sweep's peak bandwidth\n"
    "                   (mode \"nhalf\": nhalf_bytes, peak_bw_MBps, peak_bytes)\n"
    "  --summary        lat and bw at a few sizes, fewer iterations\n"
    "  --json           one JSON object per line (docs/CONTRACTS: bench, provider, mode,\n"
    "                   bytes, iters, lat_us, bw_MBps; rate adds msg_rate_Mps, window)\n"
    "  -h, --help       show this help;  --version  show the library's version\n"
    "environment: VIASTACK_PROVIDER (set by viarun) and the VIASTACK_* variables of\n"
    "  the library (viarun --info lists them; VIASTACK_SHM_CMA and\n"
    "  VIASTACK_DIRECT_THRESHOLD choose between the rings and CMA on shm)\n"
    BENCH_EXIT_STATUSES;

int main(int argc, char** argv) {
  bench::start("via_pingpong", {kUsage, bench::library_version}, argc, argv);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) bench::usage_error("via_pingpong", std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") {
      opt.sizes = bench::parse_sizes("via_pingpong", value("--sizes"));
    } else if (a == "--iters") {
      opt.iters = bench::parse_count("via_pingpong", value("--iters"));
    } else if (a == "--mode") {
      opt.mode = value("--mode");
      opt.mode_given = true;
      if (opt.mode != "lat" && opt.mode != "bw" && opt.mode != "rate")
        bench::usage_error("via_pingpong", "--mode must be lat, bw or rate");
    } else if (a == "--window") {
      opt.window = int(std::min(bench::parse_count("via_pingpong", value("--window")), 1l << 20));
    } else if (a == "--cold") {
      opt.cold = true;
    } else if (a == "--nhalf") {
      opt.nhalf = true;
    } else if (a == "--json") {
      opt.json = true;
    } else if (a == "--summary") {
      opt.summary = true;
    } else {
      bench::usage_error("via_pingpong", "unknown option " + a);
    }
  }
  if (opt.nhalf) {
    if (opt.summary) bench::usage_error("via_pingpong", "--nhalf comes from one sweep, not with --summary");
    if (!opt.mode_given) opt.mode = "bw";
    if (opt.mode == "lat") bench::usage_error("via_pingpong", "--nhalf needs --mode bw or rate");
  }
  const bench::Job job = bench::job_from_env("via_pingpong");
  if (job.size < 2) bench::usage_error("via_pingpong", "needs at least 2 ranks (run it under viarun -n 2)");
  if (job.rank > 1) return 0;

  std::vector<std::string> modes = opt.summary ? std::vector<std::string>{"lat", "bw"} : std::vector{opt.mode};
  if (opt.sizes.empty())
    opt.sizes = opt.summary ? std::vector<std::size_t>{8, 1024, 65536, 1 << 20} : bench::default_sizes();
  const std::size_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  Endpoint ep(job.rank, max_bytes, opt.window, opt.cold);
  if (opt.cold && job.rank == 0 && !opt.json)
    std::printf("cold buffers: a pool of %zu MiB on each rank\n", ep.buffers.pool_bytes() >> 20);

  if (job.rank == 0 && !opt.json) bench::table_header("mode");
  std::vector<std::pair<std::size_t, double>> sweep;
  for (const std::string& mode : modes) {
    for (std::size_t bytes : opt.sizes) {
      const long iters = opt.iters ? opt.iters : default_iters(mode, bytes, opt.summary);
      ep.buffers.set_message_bytes(bytes);
      bench::Result r{"via_pingpong", ep.nic->provider_name(), "mode", mode, bytes, iters, 0, 0};
      if (mode == "lat") {
        r.lat_us = run_latency(ep, job.rank, bytes, iters);
        r.bw_MBps = double(bytes) / r.lat_us;  // bytes per microsecond = MB/s
      } else {
        const double per_second = mode == "bw" ? run_bandwidth(ep, job.rank, bytes, iters)
                                               : run_rate(ep, job.rank, bytes, iters);
        r.bw_MBps = double(bytes) * per_second / 1e6;
        r.lat_us = 1e6 / per_second;  // time per message
        if (mode == "rate") {
          r.msg_rate_Mps = per_second / 1e6;
          r.window = opt.window;
        }
      }
      sweep.emplace_back(bytes, r.bw_MBps);
      if (job.rank == 0) bench::print_result(r, opt.json);
    }
  }
  if (opt.nhalf && job.rank == 0)
    bench::print_n_half("via_pingpong", ep.nic->provider_name(), "mode", opt.mode, bench::n_half(sweep), opt.json);
  ep.vi->disconnect();
  return 0;
}
