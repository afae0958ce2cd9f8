// splitc_suite: the Split-C benchmark suite (U-Net's Split-C table).
//
//   viarun -n 4 -- splitc_suite [--bench mm,ssort_sm,...] [--size test|paper] [--json] [--baseline FILE]
//
// Each benchmark checks its own answer; the exit status is 1 if any fails.
// Problem sizes are per processor (weak scaling) at both sizes: P ranks
// solve a problem P times one rank's, and the table names the whole job's.
// The speed-up over 1 rank is P * T1 / TP, T1 taken from a 1-rank run's
// --json lines (--baseline), or this run's own time when P is 1.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <via/bootstrap.hpp>
#include <via/config.hpp>
#include <viastack.h>

#include "suite.hpp"

namespace {

struct Benchmark {
  const char* name;
  std::function<suite::Outcome(suite::Size)> run;
};

const std::vector<Benchmark>& benchmarks() {
  static const std::vector<Benchmark> all = {
      {"mm", suite::matrix_multiply},
      {"ssort_sm", [](suite::Size s) { return suite::sample_sort(s, false); }},
      {"ssort_bulk", [](suite::Size s) { return suite::sample_sort(s, true); }},
      {"rsort_sm", [](suite::Size s) { return suite::radix_sort(s, false); }},
      {"rsort_bulk", [](suite::Size s) { return suite::radix_sort(s, true); }},
      {"cc", suite::connected_components},
      {"cg", suite::conjugate_gradient},
  };
  return all;
}

constexpr const char* kUsage =
    "usage: viarun -n N -- splitc_suite [--bench mm,ssort_sm,ssort_bulk,rsort_sm,rsort_bulk,cc,cg]\n"
    "                                   [--size test|paper] [--json] [--baseline FILE]\n"
    "  the Split-C benchmark suite; each benchmark checks its own answer\n"
    "  --bench a,b,...  the benchmarks to run (default: all)\n"
    "  --size S         test (small, the default) or paper (the U-Net paper's per-rank sizes)\n"
    "  --json           one JSON object per benchmark (bench, name, ranks, size, seconds, verified)\n"
    "  --baseline FILE  a 1-rank run's --json lines: the speed-up is P * T1 / TP against them\n"
    "  -h, --help       show this help;  --version  show the library's version\n"
    "environment: VIASTACK_PROVIDER (set by viarun) and the VIASTACK_* variables of the\n"
    "  library (viarun --info lists them)\n"
    "exit status: 0 when every benchmark verified its answer; 1 when one did not or a\n"
    "  peer failed; 2 for a bad command line\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "splitc_suite: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

std::vector<const Benchmark*> select(const std::string& list) {
  std::vector<const Benchmark*> chosen;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = list.find(',', pos);
    const std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const Benchmark* found = nullptr;
    for (const Benchmark& b : benchmarks())
      if (name == b.name) found = &b;
    if (!found) usage("no benchmark '" + name + "'");
    chosen.push_back(found);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return chosen;
}

// The text after `"key":` in a JSON line, up to the next ',' or '}' (quotes
// stripped): enough for splitc_suite's own flat lines.
std::string field(const std::string& line, const char* key) {
  std::string quoted = "\"";
  quoted += key;
  quoted += "\":";
  const std::size_t at = line.find(quoted);
  if (at == std::string::npos) return {};
  const std::size_t from = at + quoted.size(), to = line.find_first_of(",}", from);
  std::string value = line.substr(from, to == std::string::npos ? std::string::npos : to - from);
  std::erase(value, '"');
  return value;
}

// Each benchmark's 1-rank seconds at `size` in a file of --json lines: the
// median where the file holds several verified runs; unverified ones count not.
std::map<std::string, double> read_baseline(const std::string& path, const char* size) {
  std::ifstream in(path);
  if (!in) {
    std::string why = "cannot read the baseline file ";
    why += path;
    usage(why);
  }
  std::map<std::string, std::vector<double>> runs;
  for (std::string line; std::getline(in, line);) {
    if (field(line, "bench") != "splitc" || field(line, "ranks") != "1" || field(line, "size") != size ||
        field(line, "verified") != "true")
      continue;
    runs[field(line, "name")].push_back(std::strtod(field(line, "seconds").c_str(), nullptr));
  }
  std::map<std::string, double> median;
  for (auto& [name, seconds] : runs) {
    std::sort(seconds.begin(), seconds.end());
    const std::size_t n = seconds.size();
    median[name] = n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
  }
  return median;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const Benchmark*> chosen;
  for (const Benchmark& b : benchmarks()) chosen.push_back(&b);
  suite::Size size = suite::Size::test;
  bool json = false;
  std::string baseline_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("splitc_suite (viastack) %s\n", viastack_version());
      return 0;
    } else if (arg == "--bench") {
      chosen = select(value());
    } else if (arg == "--size") {
      const std::string s = value();
      if (s != "test" && s != "paper") usage("--size is test or paper");
      size = s == "test" ? suite::Size::test : suite::Size::paper;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--baseline") {
      baseline_path = value();
    } else {
      usage("unknown option " + arg);
    }
  }
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) usage(why);
  if (std::string_view(job->name()) == "singleton")
    usage("not started by a launcher (run it as: viarun -n 4 -- splitc_suite)");

  bool all_verified = true;
  try {
    splitc::session session;
    const bool talk = MYPROC == 0;
    const char* size_name = size == suite::Size::test ? "test" : "paper";
    const auto provider = via::config::text_if_set("VIASTACK_PROVIDER");
    std::map<std::string, double> baseline;
    if (talk && !baseline_path.empty()) baseline = read_baseline(baseline_path, size_name);
    if (talk && !json) {
      std::printf("Split-C suite: %d ranks, provider %s, size %s (per processor: the job's problem is %d times one "
                  "rank's)\n",
                  PROCS, provider.value_or("shm").c_str(), size_name, PROCS);
      if (PROCS > 1 && baseline.empty())
        std::printf("(speed-up over 1 rank: give a 1-rank run's --json lines with --baseline FILE)\n");
      std::printf("%-12s %12s  %9s  %-8s  %s\n", "benchmark", "seconds", "speed-up", "verified",
                  "problem (whole job)");
    }
    for (const Benchmark* b : chosen) {
      const suite::Outcome out = b->run(size);
      all_verified = all_verified && out.verified;
      if (!talk) continue;
      if (json)
        std::printf("{\"bench\":\"splitc\",\"name\":\"%s\",\"ranks\":%d,\"size\":\"%s\",\"seconds\":%.6f,\"verified\":%s}\n",
                    b->name, PROCS, size_name, out.seconds, out.verified ? "true" : "false");
      else {
        // Scaled speed-up: the P-rank job does P times the 1-rank job's work.
        const auto t1 = baseline.find(b->name);
        const double one_rank = PROCS == 1 ? out.seconds : t1 == baseline.end() ? 0 : t1->second;
        char speedup[32] = "-";
        if (one_rank > 0 && out.seconds > 0) std::snprintf(speedup, sizeof speedup, "%.2f", PROCS * one_rank / out.seconds);
        std::printf("%-12s %12.4f  %9s  %-8s  %s\n", b->name, out.seconds, speedup, out.verified ? "yes" : "NO",
                    out.problem.c_str());
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "splitc_suite: %s\n", e.what());
    return 1;
  }
  return all_verified ? 0 : 1;
}
