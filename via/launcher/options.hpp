// Command line of viarun:
//   viarun -n N [--provider shm|tcp] [--hosts h1,h2,...] [--launcher TEMPLATE]
//          [--listen-address A] [--timeout S] [--tag-output] [--bind-to core|socket|none]
//          [--map-by core|socket] [--report-bindings] [--] prog args...
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "binding.hpp"

namespace viarun {

inline constexpr int kMaxRanks = 1024;

// A bad command line or environment; viarun prints it with the usage and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct JobTimeout {
  std::chrono::duration<double> seconds;
  std::string text;  // as the user wrote it, for messages
};

struct LaunchOptions {
  int ranks = 0;
  std::string provider;
  std::optional<JobTimeout> timeout;
  bool tag_output = false;
  BindTo bind_to = BindTo::automatic;
  MapBy map_by = MapBy::core;
  bool report_bindings = false;
  // Ranks go round-robin over these hosts, each started through the launcher
  // command template ({host} replaced); empty: all ranks on this machine.
  std::vector<std::string> hosts;
  std::string launcher = "ssh {host}";
  // Where the job's directory listens (the ranks must reach it); empty: a default.
  std::string listen_address;
  bool show_help = false;
  bool show_info = false;
  bool show_version = false;
  std::vector<std::string> command;  // program and its arguments
};

// Parses argv; defaults come from VIASTACK_PROVIDER and VIASTACK_TIMEOUT.
// Throws UsageError naming the problem, or the first VIASTACK_* variable
// with a bad value.
LaunchOptions parse_options(int argc, char** argv);

const char* usage_text();

}  // namespace viarun
