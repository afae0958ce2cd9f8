// via_pingpong: raw VIA one-way latency (ping-pong) and streaming bandwidth
// between ranks 0 and 1 of a viarun job; other ranks take no part.
//
//   via_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw] [--json] [--summary]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_job.hpp"
#include "via/via.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::size_t> sizes;
  long iters = 0;  // 0: chosen per size
  std::string mode = "lat";
  bool json = false;
  bool summary = false;
};

constexpr int kWindow = 64;  // messages in flight in bandwidth mode
constexpr int kRepetitions = 5;

void die(const char* what, via::Result r) {
  std::fprintf(stderr, "via_pingpong: %s: %s\n", what, via::describe(r));
  std::exit(1);
}
void check(via::Result r, const char* what) {
  if (r != via::Result::success) die(what, r);
}

// Everything one side needs: a NIC, one VI connected to the other rank, and
// registered buffers with one descriptor per buffer.
struct Endpoint {
  std::unique_ptr<via::Nic> nic;
  via::Vi* vi = nullptr;
  via::Ptag ptag = 0;
  // One send buffer and one receive buffer that every descriptor points at, as
  // osu_bw, NetPIPE and ucx_perftest do: the figures are about the transport,
  // not about how the caches hold a large working set.
  std::vector<std::byte> buffers;
  std::vector<VIP_DESCRIPTOR> descs;
  via::MemHandle buffer_handle = 0, desc_handle = 0;
  std::size_t slot_bytes = 0;

  Endpoint(int rank, std::size_t max_bytes) {
    check(via::Nic::open("", nic), "open NIC");
    check(nic->create_ptag(ptag), "create ptag");
    slot_bytes = std::max<std::size_t>(max_bytes, 64);
    buffers.resize(slot_bytes * 2);
    descs.resize(4 * kWindow + 1);
    via::MemAttributes attrs{ptag, false, false};
    check(nic->register_memory(buffers.data(), buffers.size(), attrs, buffer_handle), "register buffers");
    check(nic->register_memory(descs.data(), descs.size() * sizeof(VIP_DESCRIPTOR), attrs, desc_handle),
          "register descriptors");
    via::ViAttributes vattrs;
    vattrs.ptag = ptag;
    check(nic->create_vi(vattrs, nullptr, nullptr, vi), "create VI");
    // Receives first, so nothing the peer sends finds the queue empty.
    for (int i = 0; i < 2 * kWindow; ++i) post_recv(i, slot_bytes);
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
  std::byte* send_buf() { return buffers.data(); }
  std::byte* recv_buf() { return buffers.data() + slot_bytes; }

  void fill(VIP_DESCRIPTOR* d, std::byte* buf, std::size_t bytes) {
    std::memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->CS.Length = std::uint32_t(bytes);
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = buffer_handle;
    d->DS[0].Local.Length = std::uint32_t(bytes);
  }
  void post_recv(int i, std::size_t bytes) {
    VIP_DESCRIPTOR* d = desc(2 * kWindow + i);
    fill(d, recv_buf(), bytes);
    check(vi->post_recv(d, desc_handle), "post receive");
  }
  void post_send(int i, std::size_t bytes) {
    VIP_DESCRIPTOR* d = desc(i);
    fill(d, send_buf(), bytes);
    check(vi->post_send(d, desc_handle), "post send");
  }
  // Waits for the next receive, checks it, and re-posts its descriptor.
  void recv_one(std::size_t bytes) {
    VIP_DESCRIPTOR* d;
    check(vi->recv_wait(60000, d), "wait for receive");
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
      std::fprintf(stderr, "via_pingpong: receive failed, status 0x%x\n", d->CS.Status);
      std::exit(1);
    }
    int i = int(d - desc(2 * kWindow));
    post_recv(i, bytes);
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
};

double run_latency(Endpoint& ep, int rank, std::size_t bytes, long iters) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(1l, iters / kRepetitions);
    auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      if (rank == 0) {
        ep.post_send(0, bytes);
        ep.recv_one(ep.slot_bytes);
      } else {
        ep.recv_one(ep.slot_bytes);
        ep.post_send(0, bytes);
      }
      ep.reap_sends(true);
    }
    std::chrono::duration<double, std::micro> us = Clock::now() - start;
    reps.push_back(us.count() / double(n) / 2.0);
  }
  return bench::median(reps);
}

// Streaming: rank 1 starts with 2*kWindow receives posted and returns a credit
// message after every kWindow messages (having re-posted their receives);
// rank 0 sends while it has credits. The last credit says everything arrived.
double run_bandwidth(Endpoint& ep, int rank, std::size_t bytes, long iters) {
  std::vector<double> reps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const long n = std::max(long(kWindow), iters / kRepetitions / kWindow * kWindow);  // a multiple of kWindow
    const long credit_messages = n / kWindow;
    auto start = Clock::now();
    if (rank == 0) {
      long credits = 2 * kWindow, received = 0;
      for (long sent = 0; sent < n; ++sent) {
        if (credits == 0) {
          ep.recv_one(ep.slot_bytes);
          ++received;
          credits += kWindow;
        }
        ep.post_send(int(sent % (2 * kWindow)), bytes);
        --credits;
        ep.reap_sends(false);
      }
      for (; received < credit_messages; ++received) ep.recv_one(ep.slot_bytes);
      while (!ep.vi->send_queue_empty()) ep.reap_sends(true);
      VIP_DESCRIPTOR* extra;
      if (ep.vi->recv_done(extra) == via::Result::success) {
        std::fprintf(stderr, "via_pingpong: credit protocol out of step (an unexpected credit arrived)\n");
        std::exit(1);
      }
    } else {
      for (long i = 1; i <= n; ++i) {
        ep.recv_one(ep.slot_bytes);
        if (i % kWindow == 0) {
          ep.post_send(0, 0);
          ep.reap_sends(true);
        }
      }
    }
    std::chrono::duration<double> s = Clock::now() - start;
    reps.push_back(double(bytes) * double(n) / s.count() / 1e6);
  }
  return bench::median(reps);
}

long default_iters(const std::string& mode, std::size_t bytes, bool summary) {
  long budget = summary ? 40'000'000 : 400'000'000;  // bytes moved per size, roughly
  long n = long(budget / std::max<std::size_t>(bytes, 1024));
  long cap = mode == "lat" ? (summary ? 20000 : 100000) : (summary ? 20000 : 100000);
  return std::clamp(n, 200l, cap);
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 via_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw] [--json] [--summary]\n"
    "  raw VIA between ranks 0 and 1 (other ranks take no part)\n"
    "  --sizes a,b,...  message sizes in bytes, k/M suffixes allowed (default 1 B to 4 MiB)\n"
    "  --iters N        round trips or messages per size (default: by size)\n"
    "  --mode lat|bw    one-way latency (ping-pong) or streaming bandwidth (default lat)\n"
    "  --summary        both modes at a few sizes, fewer iterations\n"
    "  --json           one JSON object per line (docs/CONTRACTS: bench, provider, mode,\n"
    "                   bytes, iters, lat_us, bw_MBps)\n"
    "  -h, --help       show this help;  --version  show the library's version\n"
    "environment: VIASTACK_PROVIDER (set by viarun) and the VIASTACK_* variables of\n"
    "  the library (viarun --info lists them)\n"
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
    if (a == "--sizes")
      opt.sizes = bench::parse_sizes("via_pingpong", value("--sizes"));
    else if (a == "--iters")
      opt.iters = bench::parse_count("via_pingpong", value("--iters"));
    else if (a == "--mode") {
      opt.mode = value("--mode");
      if (opt.mode != "lat" && opt.mode != "bw") bench::usage_error("via_pingpong", "--mode must be lat or bw");
    } else if (a == "--json")
      opt.json = true;
    else if (a == "--summary")
      opt.summary = true;
    else
      bench::usage_error("via_pingpong", "unknown option " + a);
  }
  const bench::Job job = bench::job_from_env("via_pingpong");
  if (job.size < 2) bench::usage_error("via_pingpong", "needs at least 2 ranks (run it under viarun -n 2)");
  if (job.rank > 1) return 0;

  std::vector<std::string> modes = opt.summary ? std::vector<std::string>{"lat", "bw"} : std::vector{opt.mode};
  if (opt.sizes.empty())
    opt.sizes = opt.summary ? std::vector<std::size_t>{8, 1024, 65536, 1 << 20} : bench::default_sizes();
  const std::size_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  Endpoint ep(job.rank, max_bytes);

  if (job.rank == 0 && !opt.json) bench::table_header("mode");
  for (const std::string& mode : modes) {
    for (std::size_t bytes : opt.sizes) {
      const long iters = opt.iters ? opt.iters : default_iters(mode, bytes, opt.summary);
      double lat_us, bw;
      if (mode == "lat") {
        lat_us = run_latency(ep, job.rank, bytes, iters);
        bw = double(bytes) / lat_us;  // bytes per microsecond = MB/s
      } else {
        bw = run_bandwidth(ep, job.rank, bytes, iters);
        lat_us = bw > 0 ? double(bytes) / bw : 0;
      }
      if (job.rank != 0) continue;
      bench::print_result({"via_pingpong", ep.nic->provider_name(), "mode", mode, bytes, iters, lat_us, bw}, opt.json);
    }
  }
  ep.vi->disconnect();
  return 0;
}
