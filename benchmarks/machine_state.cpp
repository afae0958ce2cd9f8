// machine_state: how fast this machine moves a buffer from one core to
// another right now. Two threads, pinned to two CPUs, take turns: one fills a
// buffer, the other copies it out, so its cache lines cross between the cores
// each turn, as a message between two ranks (or loopback TCP's data between
// sender and receiver) does. On the KVM guests the project measures on, this
// figure drops for a minute at a time from ~11 GB/s to ~2 GB/s while a copy on
// one core stays fast, and every two-process benchmark drops with it (ours and
// the anchors alike): benchmarks/compare records it beside each step, so that
// a table can say which state a run saw.
//
//   machine_state [--cpus A,B] [--bytes N] [--turns N] [--json]
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    std::fprintf(stderr, "machine_state: cannot run on CPU %d\n", cpu);
    std::exit(1);
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: machine_state [--cpus A,B] [--bytes N] [--turns N] [--json]\n");
  std::exit(2);
}

long number(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value <= 0) usage();
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  int writer_cpu = 0, reader_cpu = 1;
  std::size_t bytes = 1 << 20;
  int turns = 200;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--json") {
      json = true;
    } else if (i + 1 < argc && option == "--cpus") {
      if (std::sscanf(argv[++i], "%d,%d", &writer_cpu, &reader_cpu) != 2 || writer_cpu < 0 || reader_cpu < 0) usage();
    } else if (i + 1 < argc && option == "--bytes") {
      bytes = static_cast<std::size_t>(number(argv[++i]));
    } else if (i + 1 < argc && option == "--turns") {
      turns = static_cast<int>(number(argv[++i]));
    } else {
      usage();
    }
  }
  std::vector<unsigned char> shared(bytes), copy(bytes);
  std::atomic<int> turn{0};  // 0: the writer's, 1: the reader's
  std::thread reader([&] {
    pin_to(reader_cpu);
    for (int t = 0; t < turns; ++t) {
      while (turn.load(std::memory_order_acquire) != 1) {
      }
      std::memcpy(copy.data(), shared.data(), bytes);
      turn.store(0, std::memory_order_release);
    }
  });
  pin_to(writer_cpu);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < turns; ++t) {
    while (turn.load(std::memory_order_acquire) != 0) {
    }
    std::memset(shared.data(), t, bytes);
    turn.store(1, std::memory_order_release);
  }
  reader.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gbps = static_cast<double>(bytes) * turns / seconds / 1e9;
  if (json)
    std::printf("{\"bench\":\"machine_state\",\"cpus\":\"%d,%d\",\"bytes\":%zu,\"turns\":%d,\"handoff_GBps\":%.2f}\n",
                writer_cpu, reader_cpu, bytes, turns, gbps);
  else
    std::printf("CPU %d -> CPU %d, %zu B a turn: %.2f GB/s\n", writer_cpu, reader_cpu, bytes, gbps);
  return 0;
}
