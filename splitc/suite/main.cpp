// splitc_suite: the Split-C benchmark suite (U-Net's Split-C table).
//
//   viarun -n 4 -- splitc_suite [--bench mm,ssort_sm,...] [--size test|paper|large] [--total] [--json]
//                               [--baseline FILE]
//
// Each benchmark checks its own answer; the exit status is 1 if any fails.
// Problem sizes are per processor (weak scaling) unless --total makes them
// the whole job's (strong scaling); the table names the whole job's problem.
// The speed-up over 1 rank is P * T1 / TP (weak: the scaled speed-up) or
// T1 / TP (strong), T1 taken from a 1-rank run's --json lines (--baseline),
// or this run's own time when P is 1.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <via/bootstrap.hpp>
#include <via/config.hpp>
#include <viastack.h>

#include "suite.hpp"

namespace {

struct Benchmark {
  const char* name;
  std::function<suite::Outcome(const suite::Problem&)> run;
};

const std::vector<Benchmark>& benchmarks() {
  static const std::vector<Benchmark> all = {
      {"mm", suite::matrix_multiply},
      {"ssort_sm", [](const suite::Problem& p) { return suite::sample_sort(p, false); }},
      {"ssort_bulk", [](const suite::Problem& p) { return suite::sample_sort(p, true); }},
      {"rsort_sm", [](const suite::Problem& p) { return suite::radix_sort(p, false); }},
      {"rsort_bulk", [](const suite::Problem& p) { return suite::radix_sort(p, true); }},
      {"cc", suite::connected_components},
      {"cg", suite::conjugate_gradient},
  };
  return all;
}

const char* size_name(suite::Size size) {
  return size == suite::Size::test ? "test" : size == suite::Size::paper ? "paper" : "large";
}

const char* scaling_name(suite::Scaling scaling) { return scaling == suite::Scaling::weak ? "weak" : "strong"; }

void print_usage(std::FILE* to) {
  std::fputs(
      "usage: viarun -n N -- splitc_suite [--bench mm,ssort_sm,ssort_bulk,rsort_sm,rsort_bulk,cc,cg]\n"
      "                                   [--size test|paper|large] [--total] [--json] [--baseline FILE]\n"
      "  the Split-C benchmark suite; each benchmark checks its own answer\n"
      "  --bench a,b,...  the benchmarks to run (default: all)\n"
      "  --size S         test (small, the default), paper (the U-Net paper's per-rank sizes) or\n"
      "                   large (each program 0.5 s or more on one rank of a 2-core machine)\n"
      "  --total          strong scaling: the sizes are the whole job's problem, dealt to the ranks;\n"
      "                   without it they are per rank (weak scaling: P ranks solve P times as much)\n"
      "  --json           one JSON object per benchmark (bench, name, ranks, size, scaling: weak or\n"
      "                   strong, seconds, verified)\n"
      "  --baseline FILE  a 1-rank run's --json lines of the same --size: the speed-up against them\n"
      "                   is P * T1 / TP (weak, the scaled speed-up) or T1 / TP (strong)\n"
      "  -h, --help       show this help;  --version  show the library's version\n"
      "sizes (one rank's problem: per rank, or the whole job's with --total)      test / paper / large\n",
      to);
  const suite::Sizes &t = suite::sizes(suite::Size::test), &p = suite::sizes(suite::Size::paper),
                     &l = suite::sizes(suite::Size::large);
  auto row = [to](const char* what, std::size_t test, std::size_t paper, std::size_t large) {
    std::fprintf(to, "  %-70s %zu / %zu / %zu\n", what, test, paper, large);
  };
  row("mm: side of the 4 x 4 blocks of doubles of A, B and C (per rank: A, C)", t.mm_block, p.mm_block, l.mm_block);
  row("ssort_sm, ssort_bulk: 32-bit keys", t.ssort_keys, p.ssort_keys, l.ssort_keys);
  row("rsort_sm, rsort_bulk: 32-bit keys", t.rsort_keys, p.rsort_keys, l.rsort_keys);
  row("cc: vertices", t.cc_vertices, p.cc_vertices, l.cc_vertices);
  row("cg: grid width (fixed)", t.cg_width, p.cg_width, l.cg_width);
  row("cg: grid rows (with --total, at most one rank per row)", t.cg_rows, p.cg_rows, l.cg_rows);
  std::fputs(
      "environment: VIASTACK_PROVIDER (set by viarun) and the VIASTACK_* variables of the\n"
      "  library (viarun --info lists them); at --size large the suite sets\n"
      "  VIASTACK_AM_SEGMENT (the global memory of each rank) to what the programs need\n"
      "  unless it is set\n"
      "exit status: 0 when every benchmark verified its answer; 1 when one did not or a\n"
      "  peer failed; 2 for a bad command line\n",
      to);
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "splitc_suite: %s\n", why.c_str());
  print_usage(stderr);
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
// Weak and strong lines both count: one rank solves the same problem in both.
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
  suite::Problem problem{suite::Size::test, suite::Scaling::weak};
  bool json = false;
  std::string baseline_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      print_usage(stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("splitc_suite (viastack) %s\n", viastack_version());
      return 0;
    } else if (arg == "--bench") {
      chosen = select(value());
    } else if (arg == "--size") {
      const std::string s = value();
      if (s == "test") problem.size = suite::Size::test;
      else if (s == "paper") problem.size = suite::Size::paper;
      else if (s == "large") problem.size = suite::Size::large;
      else usage("--size is test, paper or large, not '" + s + "'");
    } else if (arg == "--total") {
      problem.scaling = suite::Scaling::strong;
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
  if (const std::size_t segment = suite::sizes(problem.size).segment_bytes;
      segment && !via::config::text_if_set("VIASTACK_AM_SEGMENT"))
    setenv("VIASTACK_AM_SEGMENT", std::to_string(segment).c_str(), 1);

  bool all_verified = true;
  try {
    splitc::session session;
    const bool talk = MYPROC == 0;
    // cg deals its grid's rows to the ranks in bands of at least one row.
    // Checked once the job is up (the rank count is known), the job then
    // ended as usual: every rank comes to the same answer.
    const std::size_t cg_rows = suite::sizes(problem.size).cg_rows;
    if (problem.scaling == suite::Scaling::strong && std::size_t(PROCS) > cg_rows &&
        std::ranges::any_of(chosen, [](const Benchmark* b) { return std::string_view(b->name) == "cg"; })) {
      const std::string why = "cg --total --size " + std::string(size_name(problem.size)) + " runs on at most " +
                              std::to_string(cg_rows) + " ranks (one grid row each), not " + std::to_string(PROCS);
      if (talk) {  // before finalize: viarun may end the job once one rank has left
        std::fprintf(stderr, "splitc_suite: %s\n", why.c_str());
        print_usage(stderr);
      }
      splitc::finalize();
      return 2;
    }
    const bool weak = problem.scaling == suite::Scaling::weak;
    const auto provider = via::config::text_if_set("VIASTACK_PROVIDER");
    std::map<std::string, double> baseline;
    if (talk && !baseline_path.empty()) baseline = read_baseline(baseline_path, size_name(problem.size));
    if (talk && !json) {
      std::printf("Split-C suite: %d ranks, provider %s, size %s, %s scaling (", PROCS,
                  provider.value_or("shm").c_str(), size_name(problem.size), scaling_name(problem.scaling));
      if (weak)
        std::printf("per processor: the job's problem is %d times one rank's; speed-up = P * T1 / TP)\n", PROCS);
      else
        std::printf("--total: the job's problem is one rank's, dealt to the ranks; speed-up = T1 / TP)\n");
      if (PROCS > 1 && baseline.empty())
        std::printf("(speed-up over 1 rank: give a 1-rank run's --json lines with --baseline FILE)\n");
      std::printf("%-12s %12s  %9s  %-8s  %s\n", "benchmark", "seconds", "speed-up", "verified",
                  "problem (whole job)");
    }
    for (const Benchmark* b : chosen) {
      const suite::Outcome out = b->run(problem);
      all_verified = all_verified && out.verified;
      if (!talk) continue;
      if (json)
        std::printf("{\"bench\":\"splitc\",\"name\":\"%s\",\"ranks\":%d,\"size\":\"%s\",\"scaling\":\"%s\","
                    "\"seconds\":%.6f,\"verified\":%s}\n",
                    b->name, PROCS, size_name(problem.size), scaling_name(problem.scaling), out.seconds,
                    out.verified ? "true" : "false");
      else {
        // Weak: the scaled speed-up, the P-rank job doing P times the 1-rank
        // job's work. Strong: both jobs do the same work.
        const auto t1 = baseline.find(b->name);
        const double one_rank = PROCS == 1 ? out.seconds : t1 == baseline.end() ? 0 : t1->second;
        const double work = weak ? PROCS : 1;
        char speedup[32] = "-";
        if (one_rank > 0 && out.seconds > 0) std::snprintf(speedup, sizeof speedup, "%.2f", work * one_rank / out.seconds);
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
