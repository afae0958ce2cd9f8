// bootstrap_probe: what a process manager told this process, through
// via/bootstrap.hpp alone. Every rank prints its place, puts a value with
// the bytes the PMI wire formats cannot carry as they are (spaces, ';', '=',
// '%', '\'), fences, and checks every other rank's value; twice, so that a
// second fence and keys put after the first one work too. Exits 0 when all
// is well, 1 otherwise.
//
//   bootstrap_probe [--fail-rank R]   rank R exits with status 3 after the
//                                     first fence; the others wait in the
//                                     next fence for the launcher to end the
//                                     job
//                   [--abort-rank R]  rank R ends the job through abort(4)
//                                     after the first fence; the others
//                                     compute (sleep) until the launcher
//                                     ends the job
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <via/bootstrap.hpp>

namespace {

std::string expected(int rank, int round) {
  std::string v = "rank ";
  v += std::to_string(rank);
  v += " round ";
  v += std::to_string(round);
  v += ": a;b=c 100% \\ done";
  return v;
}

std::string key(int round) {
  std::string k = "probe.";
  k += std::to_string(round);
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  int fail_rank = -1, abort_rank = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--fail-rank" || a == "--abort-rank") && i + 1 < argc) {
      (a == "--fail-rank" ? fail_rank : abort_rank) = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bootstrap_probe [--fail-rank R] [--abort-rank R]\n");
      return 2;
    }
  }
  std::string error;
  const auto b = via::job_bootstrap(error);
  if (!b) {
    std::fprintf(stderr, "bootstrap_probe: %s\n", error.c_str());
    return 1;
  }
  const int me = b->rank();
  std::printf("bootstrap_probe: %s job %s: rank %d of %d, node %d of %d, local rank %d of %d\n", b->name(),
              b->job_id().c_str(), me, b->size(), b->node_of(me), b->node_count(), b->local_rank(), b->local_size());
  std::fflush(stdout);
  bool ok = !b->job_id().empty() && b->local_rank() < b->local_size() && b->node_of(me) < b->node_count();
  if (!ok) std::fprintf(stderr, "bootstrap_probe: rank %d: an inconsistent layout\n", me);

  for (int round = 0; round < 2; ++round) {
    if (!b->put(key(round), expected(me, round), error) || !b->fence(error)) {
      std::fprintf(stderr, "bootstrap_probe: rank %d: %s\n", me, error.c_str());
      return 1;
    }
    if (me == fail_rank) {
      std::fprintf(stderr, "bootstrap_probe: rank %d exits with status 3 as asked\n", me);
      std::exit(3);
    }
    if (me == abort_rank) b->abort(4, "bootstrap_probe aborts the job as asked");
    // Straight into the next fence, with no request of the launcher's
    // outstanding when the failed rank's launcher kills this one: Hydra
    // 4.0.2's proxy, answering a get to a rank it has just killed, dies of
    // the broken pipe before it passes on the failed rank's stderr.
    if (fail_rank >= 0) {
      if (!b->fence(error)) std::fprintf(stderr, "bootstrap_probe: rank %d: %s\n", me, error.c_str());
      return 1;
    }
    // Not in a fence: with ranks waiting in PMIx_Fence when another aborts,
    // Open MPI 4.1's mpirun now and then deadlocks in its own
    // PMIx_server_finalize after every rank is gone (Open MPI's MPI_Abort
    // with the others in MPI_Barrier never does). Ranks that outlive the
    // launcher's bound fail the test.
    if (abort_rank >= 0) {
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return 1;
    }
    for (int r = 0; r < b->size(); ++r) {
      if (r == me) continue;
      std::string value;
      if (!b->get(r, key(round), value, error)) {
        std::fprintf(stderr, "bootstrap_probe: rank %d: %s\n", me, error.c_str());
        ok = false;
      } else if (value != expected(r, round)) {
        std::fprintf(stderr, "bootstrap_probe: rank %d: rank %d's value is '%s', not '%s'\n", me, r, value.c_str(),
                     expected(r, round).c_str());
        ok = false;
      }
    }
  }
  // A key nobody put is an error, not a hang.
  std::string value;
  if (b->get((me + 1) % b->size(), "never.put", value, error)) {
    std::fprintf(stderr, "bootstrap_probe: rank %d: a key nobody put has the value '%s'\n", me, value.c_str());
    ok = false;
  }
  std::printf("bootstrap_probe: rank %d: %s\n", me, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
