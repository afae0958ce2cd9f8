// mpi_pingpong: MPI one-way latency (ping-pong), streaming bandwidth and
// message rate between ranks 0 and 1, written against the MPI C API only, so
// the same program measures viastack's MPI or any other libmpi.so.40.
//
//   mpi_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw|rate] [--window W] [--nhalf] [--json]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.hpp"

namespace {

constexpr int kDefaultWindow = 64;  // messages in flight in bw and rate modes (as osu_bw)
constexpr int kMaxWindow = 4096;
constexpr int kRepetitions = 5;

double run_latency(int rank, std::vector<char>& buf, std::size_t bytes, long iters) {
  std::vector<double> reps;
  const long n = std::max(1l, iters / kRepetitions);
  for (int rep = 0; rep < kRepetitions; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (long i = 0; i < n; ++i) {
      if (rank == 0) {
        MPI_Send(buf.data(), int(bytes), MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), int(bytes), MPI_BYTE, 0, 1, MPI_COMM_WORLD);
      }
    }
    reps.push_back((MPI_Wtime() - start) * 1e6 / double(n) / 2.0);
  }
  return bench::median(reps);
}

// As osu_bw and osu_mbw_mr: rank 0 posts a window of Isends, rank 1 a window
// of Irecvs, each side Waitall, then a zero-byte reply closes the window.
// Returns messages per second.
double run_windowed(int rank, std::vector<char>& buf, std::size_t bytes, long iters, int window) {
  std::vector<double> reps;
  const long windows = std::max(1l, iters / kRepetitions / window);
  std::vector<MPI_Request> requests(window);
  for (int rep = 0; rep < kRepetitions; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (long w = 0; w < windows; ++w) {
      for (int i = 0; i < window; ++i) {
        if (rank == 0)
          MPI_Isend(buf.data(), int(bytes), MPI_BYTE, 1, 2, MPI_COMM_WORLD, &requests[i]);
        else
          MPI_Irecv(buf.data(), int(bytes), MPI_BYTE, 0, 2, MPI_COMM_WORLD, &requests[i]);
      }
      MPI_Waitall(window, requests.data(), MPI_STATUSES_IGNORE);
      if (rank == 0)
        MPI_Recv(nullptr, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Send(nullptr, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    const double seconds = MPI_Wtime() - start;
    reps.push_back(double(windows * window) / seconds);
  }
  return bench::median(reps);
}

long default_iters(const std::string& mode, std::size_t bytes, int window) {
  const long n = long(200'000'000 / std::max<std::size_t>(bytes, 1024));
  return std::clamp(n, mode == "lat" ? 200l : long(window * kRepetitions), mode == "rate" ? 200000l : 50000l);
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 mpi_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw|rate] [--window W]\n"
    "                                [--nhalf] [--json]\n"
    "       mpirun -np 2 mpi_pingpong ...   (the same program on any libmpi.so.40)\n"
    "  MPI between ranks 0 and 1 (other ranks take no part)\n"
    "  --sizes a,b,...  message sizes in bytes, k/M suffixes allowed (default 1 B to 4 MiB)\n"
    "  --iters N        round trips or messages per size (default: by size)\n"
    "  --mode lat       one-way latency (ping-pong; the default)\n"
    "         bw        streaming bandwidth, as osu_bw: a window of Isends (Irecvs on\n"
    "                   rank 1), Waitall, a zero-byte reply per window\n"
    "         rate      message rate, the same windows (as osu_mbw_mr); msg_rate_Mps\n"
    "  --window W       messages in flight in bw and rate modes (default 64, at most 4096)\n"
    "  --nhalf          after a bw (the default with it) or rate sweep, one more line:\n"
    "                   N-half, the size that reaches half of the sweep's peak bandwidth\n"
    "                   (mode \"nhalf\": nhalf_bytes, peak_bw_MBps, peak_bytes)\n"
    "  --json           one JSON object per line (rate adds msg_rate_Mps, window)\n"
    "  -h, --help       show this help;  --version  show the MPI library it runs on\n"
    "environment: the MPI library's (viastack's: viarun --info lists them)\n"
    BENCH_EXIT_STATUSES;

// MPI_Get_library_version may be called before MPI_Init.
std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "MPI library: unknown";
  return std::string("MPI library: ") + text;
}

int main(int argc, char** argv) {
  bench::start("mpi_pingpong", {kUsage, mpi_library_version}, argc, argv);
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::size_t> sizes;
  long iters = 0;
  std::string mode = "lat";
  bool mode_given = false, nhalf = false, json = false;
  int window = kDefaultWindow;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) bench::usage_error("mpi_pingpong", std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes")
      sizes = bench::parse_sizes("mpi_pingpong", value("--sizes"));
    else if (a == "--iters")
      iters = bench::parse_count("mpi_pingpong", value("--iters"));
    else if (a == "--mode") {
      mode = value("--mode");
      mode_given = true;
      if (mode != "lat" && mode != "bw" && mode != "rate")
        bench::usage_error("mpi_pingpong", "--mode must be lat, bw or rate");
    } else if (a == "--window") {
      const long w = bench::parse_count("mpi_pingpong", value("--window"));
      if (w > kMaxWindow) bench::usage_error("mpi_pingpong", "--window must be at most " + std::to_string(kMaxWindow));
      window = int(w);
    } else if (a == "--nhalf")
      nhalf = true;
    else if (a == "--json")
      json = true;
    else
      bench::usage_error("mpi_pingpong", "unknown option " + a);
  }
  if (nhalf && !mode_given) mode = "bw";
  if (nhalf && mode == "lat") bench::usage_error("mpi_pingpong", "--nhalf needs --mode bw or rate");
  if (size < 2) bench::usage_error("mpi_pingpong", "needs at least 2 ranks (run it under viarun -n 2)");
  if (sizes.empty()) sizes = bench::default_sizes();
  std::vector<char> buf(std::max<std::size_t>(*std::max_element(sizes.begin(), sizes.end()), 1), 'x');
  if (rank == 0 && !json) bench::table_header("mode");
  std::vector<std::pair<std::size_t, double>> sweep;
  for (std::size_t bytes : sizes) {
    const long n = iters ? iters : default_iters(mode, bytes, window);
    bench::Result r{"mpi_pingpong", bench::provider_from_env(), "mode", mode, bytes, n, 0, 0};
    if (rank <= 1) {
      if (mode == "lat") {
        r.lat_us = run_latency(rank, buf, bytes, n);
        r.bw_MBps = double(bytes) / r.lat_us;
      } else {
        const double per_second = run_windowed(rank, buf, bytes, n, window);
        r.bw_MBps = double(bytes) * per_second / 1e6;
        r.lat_us = 1e6 / per_second;  // time per message
        if (mode == "rate") {
          r.msg_rate_Mps = per_second / 1e6;
          r.window = window;
        }
      }
    }
    sweep.emplace_back(bytes, r.bw_MBps);
    if (rank == 0) bench::print_result(r, json);
  }
  if (nhalf && rank == 0)
    bench::print_n_half("mpi_pingpong", bench::provider_from_env(), "mode", mode, bench::n_half(sweep), json);
  MPI_Finalize();
  return 0;
}
