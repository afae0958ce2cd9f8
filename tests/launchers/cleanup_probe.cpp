// cleanup_probe: an MPI job that ends in a way the test picks, so that the
// test can check that the job's shared memory is gone afterwards. Every rank
// connects to every other one (an all-to-all over shm; a process alone opens
// a VIA NIC itself, as MPI opens none for one rank), then prints where its
// segment is and its pid:
//
//   cleanup_probe: rank R pid P folder /dev/shm/viastack.<job>
//
// and ends as MODE says:
//   end        every rank finalizes and exits 0
//   exit R     rank R exits with status 3 without finalizing
//   abort R    rank R calls MPI_Abort with code 4
//   refuse R   rank R calls MPIX_Query_cuda_support, a function outside viastack's subset
//   wait       every rank waits for the test to signal it
// The other ranks wait for a message that never comes (under
// MPI_ERRORS_ARE_FATAL: a peer's death ends them), a rank alone sleeps; after
// 60 s a rank gives up with status 1.
#include <mpi.h>
#include <mpi-ext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <via/via.hpp>

namespace {

// The folder of this process's own segment, from its mappings; "" if none.
std::string segment_folder() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto path = line.find("/dev/shm/viastack.");
    const auto nic = line.find("/nic.", path == std::string::npos ? line.size() : path);
    if (nic != std::string::npos) return line.substr(path, nic - path);
  }
  return "";
}

[[noreturn]] void wait_to_be_ended(int size) {
  int never = 0;
  if (size > 1) MPI_Recv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int second = 0; second < 60; ++second) sleep(1);
  std::fprintf(stderr, "cleanup_probe: nobody ended this rank within 60 s\n");
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int target = argc > 2 ? std::atoi(argv[2]) : 0;
  if (!(mode == "end" || mode == "wait" || (argc > 2 && (mode == "exit" || mode == "abort" || mode == "refuse")))) {
    std::fprintf(stderr, "usage: cleanup_probe end|wait|exit R|abort R|refuse R\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<via::Nic> own_nic;
  if (size > 1) {
    std::vector<int> sent(std::size_t(size), rank), received(std::size_t(size), -1);
    MPI_Alltoall(sent.data(), 1, MPI_INT, received.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r)
      if (received[std::size_t(r)] != r) {
        std::fprintf(stderr, "cleanup_probe: rank %d received %d from rank %d\n", rank, received[std::size_t(r)], r);
        return 1;
      }
  } else if (via::Nic::open("", own_nic) != via::Result::success) {
    std::fprintf(stderr, "cleanup_probe: cannot open a NIC\n");
    return 1;
  }
  const std::string folder = segment_folder();
  std::printf("cleanup_probe: rank %d pid %d folder %s\n", rank, int(getpid()), folder.empty() ? "(none)" : folder.c_str());
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);

  if (mode == "end") {
    own_nic.reset();
    MPI_Finalize();
    return 0;
  }
  if (mode == "wait" || rank != target) wait_to_be_ended(size);
  if (mode == "exit") std::exit(3);
  if (mode == "abort") MPI_Abort(MPI_COMM_WORLD, 4);
  MPIX_Query_cuda_support();
  return 1;  // not reached: the refused call ends the job
}
