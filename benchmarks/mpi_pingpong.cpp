// mpi_pingpong: MPI one-way latency (ping-pong) and streaming bandwidth
// between ranks 0 and 1, written against the MPI C API only, so the same
// program measures viastack's MPI or any other libmpi.so.40.
//
//   mpi_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw] [--json]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

constexpr int kWindow = 64;  // messages in flight in bandwidth mode (as osu_bw)
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

// Rank 0 posts kWindow sends, rank 1 kWindow receives, then a zero-byte reply closes the window.
double run_bandwidth(int rank, std::vector<char>& buf, std::size_t bytes, long iters) {
  std::vector<double> reps;
  const long windows = std::max(1l, iters / kRepetitions / kWindow);
  MPI_Request requests[kWindow];
  for (int rep = 0; rep < kRepetitions; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (long w = 0; w < windows; ++w) {
      for (int i = 0; i < kWindow; ++i) {
        if (rank == 0)
          MPI_Isend(buf.data(), int(bytes), MPI_BYTE, 1, 2, MPI_COMM_WORLD, &requests[i]);
        else
          MPI_Irecv(buf.data(), int(bytes), MPI_BYTE, 0, 2, MPI_COMM_WORLD, &requests[i]);
      }
      MPI_Waitall(kWindow, requests, MPI_STATUSES_IGNORE);
      if (rank == 0)
        MPI_Recv(nullptr, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Send(nullptr, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    const double seconds = MPI_Wtime() - start;
    reps.push_back(double(bytes) * double(windows * kWindow) / seconds / 1e6);
  }
  return bench::median(reps);
}

long default_iters(const std::string& mode, std::size_t bytes) {
  const long n = long(200'000'000 / std::max<std::size_t>(bytes, 1024));
  return std::clamp(n, mode == "lat" ? 200l : long(kWindow * kRepetitions), 50000l);
}

}  // namespace

constexpr const char* kUsage =
    "usage: viarun -n 2 mpi_pingpong [--sizes a,b,...] [--iters N] [--mode lat|bw] [--json]\n"
    "       mpirun -np 2 mpi_pingpong ...   (the same program on any libmpi.so.40)\n"
    "  MPI between ranks 0 and 1 (other ranks take no part)\n"
    "  --sizes a,b,...  message sizes in bytes, k/M suffixes allowed (default 1 B to 4 MiB)\n"
    "  --iters N        round trips or messages per size (default: by size)\n"
    "  --mode lat|bw    one-way latency (ping-pong) or streaming bandwidth (default lat)\n"
    "  --json           one JSON object per line\n"
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
  bool json = false;
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
      if (mode != "lat" && mode != "bw") bench::usage_error("mpi_pingpong", "--mode must be lat or bw");
    } else if (a == "--json")
      json = true;
    else
      bench::usage_error("mpi_pingpong", "unknown option " + a);
  }
  if (size < 2) bench::usage_error("mpi_pingpong", "needs at least 2 ranks (run it under viarun -n 2)");
  if (sizes.empty()) sizes = bench::default_sizes();
  std::vector<char> buf(std::max<std::size_t>(*std::max_element(sizes.begin(), sizes.end()), 1), 'x');
  if (rank == 0 && !json) bench::table_header("mode");
  for (std::size_t bytes : sizes) {
    const long n = iters ? iters : default_iters(mode, bytes);
    double lat_us = 0, bw = 0;
    if (rank <= 1) {
      if (mode == "lat") {
        lat_us = run_latency(rank, buf, bytes, n);
        bw = double(bytes) / lat_us;
      } else {
        bw = run_bandwidth(rank, buf, bytes, n);
        lat_us = bw > 0 ? double(bytes) / bw : 0;
      }
    }
    if (rank != 0) continue;
    bench::print_result({"mpi_pingpong", bench::provider_from_env(), "mode", mode, bytes, n, lat_us, bw}, json);
  }
  MPI_Finalize();
  return 0;
}
