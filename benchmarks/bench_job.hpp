// The rank's place in the job, for the benchmarks that run on the VIA
// engine directly (mpi_pingpong asks MPI instead).
#pragma once

#include <string>
#include <string_view>

#include <via/bootstrap.hpp>
#include <viastack.h>

#include "bench_util.hpp"

namespace bench {

// What --version prints for a benchmark of viastack's own layers.
inline std::string library_version() { return viastack_version(); }

struct Job {
  int rank = 0;
  int size = 1;
};

// The rank's place in the job, from whichever launcher started it.
inline Job job_from_env(const char* prog) {
  std::string why;
  const auto bootstrap = via::job_bootstrap(why);
  if (!bootstrap) usage_error(prog, why);
  if (std::string_view(bootstrap->name()) == "singleton")
    usage_error(prog, "not started by a launcher (run it as: viarun -n 2 " + std::string(prog) + ")");
  return Job{bootstrap->rank(), bootstrap->size()};
}

}  // namespace bench
