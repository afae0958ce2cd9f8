// Where viarun's ranks run on this machine: --bind-to core|socket|none and
// --map-by core|socket, as mpirun's options of the same names do.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

namespace viarun {

enum class BindTo { automatic, core, socket, none };
enum class MapBy { core, socket };

// The CPUs viarun may use, grouped: each core's CPUs (its hardware
// threads) and the socket it is on, cores ordered by socket then core.
struct CpuTopology {
  struct Core {
    int socket;
    std::vector<int> cpus;
  };
  std::vector<Core> cores;
  int sockets = 0;
  int cpus() const;
};

// viarun's own affinity mask, laid out by /sys/devices/system/cpu/cpuN/topology
// (a CPU the folder does not describe counts as a core of socket 0).
CpuTopology this_machine();

// Each local rank's CPUs, or nullopt for a rank left unbound. automatic is
// mpirun's default: core when every rank has a core of its own, else none.
// Throws UsageError when core binding has fewer cores than ranks.
std::vector<std::optional<cpu_set_t>> plan_bindings(const CpuTopology& topology, int local_ranks, BindTo bind_to,
                                                    MapBy map_by);

// "0-3,8" for a CPU set.
std::string cpu_list(const cpu_set_t& set);

BindTo parse_bind_to(const std::string& text);  // throws UsageError
MapBy parse_map_by(const std::string& text);    // throws UsageError

}  // namespace viarun
