// The registry of congestion controllers, the default from VIASTACK_UTCP_CC,
// and the CSV trace of cwnd.
#include "utcp/congestion.hpp"

#include <via/config.hpp>

#include "utcp/bbr.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>

namespace utcp {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, CongestionControllerFactory, std::less<>> factories{
      {"newreno", [] { return std::make_unique<NewRenoController>(); }},
      {"cubic", [] { return std::make_unique<CubicController>(); }},
      {"bbr", [] { return std::make_unique<BbrController>(); }},
  };
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

std::uint32_t initial_window(std::uint32_t mss) { return std::min(10 * mss, std::max(2 * mss, 14600u)); }

std::uint32_t pacing_burst(double rate, std::uint32_t mss) {
  const double millisecond_worth = rate / 1000;
  return std::max(2 * mss, static_cast<std::uint32_t>(std::min<double>(millisecond_worth, 1u << 30)));
}

std::error_code register_congestion_controller(std::string_view name, CongestionControllerFactory factory) {
  if (name.empty() || !factory) return std::make_error_code(std::errc::invalid_argument);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (!r.factories.emplace(std::string(name), std::move(factory)).second)
    return std::make_error_code(std::errc::file_exists);
  return {};
}

std::unique_ptr<CongestionController> make_congestion_controller(std::string_view name) {
  const std::string chosen = name.empty() ? default_congestion_control() : std::string(name);
  CongestionControllerFactory factory;
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    const auto it = r.factories.find(chosen);
    if (it == r.factories.end()) return nullptr;
    factory = it->second;
  }
  return factory();  // outside the lock: a factory may look at the registry itself
}

bool congestion_controller_known(std::string_view name) {
  const std::string chosen = name.empty() ? default_congestion_control() : std::string(name);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.factories.contains(chosen);
}

std::vector<std::string> congestion_controller_names() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& entry : r.factories) names.push_back(entry.first);
  return names;
}

std::string default_congestion_control() { return via::config::text("VIASTACK_UTCP_CC"); }

std::string_view to_string(CongestionPhase phase) {
  switch (phase) {
    case CongestionPhase::slow_start: return "slow_start";
    case CongestionPhase::congestion_avoidance: return "congestion_avoidance";
    case CongestionPhase::fast_recovery: return "fast_recovery";
    case CongestionPhase::timeout_recovery: return "timeout_recovery";
  }
  return "?";
}

CongestionTrace csv_congestion_trace(std::shared_ptr<std::ostream> out) {
  *out << "time_us,cwnd,ssthresh,state\n";
  return [out = std::move(out), first = std::optional<Instant>()](const CongestionSample& sample) mutable {
    if (!first) first = sample.time;
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(sample.time - *first);
    *out << elapsed.count() << ',' << sample.cwnd << ',' << sample.ssthresh << ',' << to_string(sample.phase) << '\n';
  };
}

Result<CongestionTrace> csv_congestion_trace(const std::filesystem::path& file) {
  auto out = std::make_shared<std::ofstream>(file, std::ios::trunc);
  if (!*out) {
    const int error = errno;  // what opening the file left
    return std::error_code(error != 0 ? error : EIO, std::generic_category());
  }
  return csv_congestion_trace(std::shared_ptr<std::ostream>(std::move(out)));
}

}  // namespace utcp
