#include "binding.hpp"

#include <algorithm>
#include <fstream>
#include <map>

#include "options.hpp"

namespace viarun {
namespace {

int read_topology_number(int cpu, const char* name) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + name);
  int value = 0;
  return in >> value ? value : 0;
}

}  // namespace

int CpuTopology::cpus() const {
  int n = 0;
  for (const Core& core : cores) n += int(core.cpus.size());
  return n;
}

CpuTopology this_machine() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_SET(0, &allowed);
  std::map<std::pair<int, int>, std::vector<int>> by_socket_and_core;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed))
      by_socket_and_core[{read_topology_number(cpu, "physical_package_id"), read_topology_number(cpu, "core_id")}]
          .push_back(cpu);
  CpuTopology topology;
  std::map<int, int> socket_index;  // package ids need not be 0..n-1
  for (auto& [where, cpus] : by_socket_and_core) {
    const auto [it, added] = socket_index.emplace(where.first, int(socket_index.size()));
    topology.cores.push_back({it->second, std::move(cpus)});
  }
  topology.sockets = int(socket_index.size());
  return topology;
}

std::vector<std::optional<cpu_set_t>> plan_bindings(const CpuTopology& topology, int local_ranks, BindTo bind_to,
                                                    MapBy map_by) {
  const int cores = int(topology.cores.size());
  if (bind_to == BindTo::automatic) bind_to = local_ranks <= cores ? BindTo::core : BindTo::none;
  std::vector<std::optional<cpu_set_t>> plan(static_cast<std::size_t>(local_ranks));
  if (bind_to == BindTo::none || cores == 0) return plan;
  if (bind_to == BindTo::core && local_ranks > cores)
    throw UsageError("--bind-to core: " + std::to_string(local_ranks) + " ranks on this machine but " +
                     std::to_string(cores) + " cores viarun may use (--bind-to none lets them share)");
  // The order ranks take cores in: core by core, or one core of each socket in turn.
  std::vector<int> order;
  if (map_by == MapBy::core) {
    for (int c = 0; c < cores; ++c) order.push_back(c);
  } else {
    std::vector<std::vector<int>> per_socket(std::size_t(topology.sockets));
    for (int c = 0; c < cores; ++c) per_socket[std::size_t(topology.cores[std::size_t(c)].socket)].push_back(c);
    for (std::size_t round = 0; order.size() < std::size_t(cores); ++round)
      for (const auto& socket_cores : per_socket)
        if (round < socket_cores.size()) order.push_back(socket_cores[round]);
  }
  for (int rank = 0; rank < local_ranks; ++rank) {
    const CpuTopology::Core& core = topology.cores[std::size_t(order[std::size_t(rank % cores)])];
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const CpuTopology::Core& other : topology.cores)
      if (bind_to == BindTo::core ? &other == &core : other.socket == core.socket)
        for (int cpu : other.cpus) CPU_SET(cpu, &set);
    plan[std::size_t(rank)] = set;
  }
  return plan;
}

std::string cpu_list(const cpu_set_t& set) {
  std::string text;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpu);
    if (last > cpu) text += '-' + std::to_string(last);
    cpu = last;
  }
  return text;
}

BindTo parse_bind_to(const std::string& text) {
  if (text == "core") return BindTo::core;
  if (text == "socket") return BindTo::socket;
  if (text == "none") return BindTo::none;
  throw UsageError("--bind-to: '" + text + "' is not core, socket or none");
}

MapBy parse_map_by(const std::string& text) {
  if (text == "core") return MapBy::core;
  if (text == "socket") return MapBy::socket;
  throw UsageError("--map-by: '" + text + "' is not core or socket");
}

}  // namespace viarun
