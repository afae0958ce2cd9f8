#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "bootstrap/bootstrap_impl.hpp"
#include "log/rank.hpp"
#include "via/config.hpp"
#include "via/log.hpp"

namespace via {

namespace {

std::string random_hex(std::size_t bytes) {
  std::string hex;
  while (hex.size() < 2 * bytes) {
    unsigned char byte = 0;
    if (getrandom(&byte, 1, 0) != 1) continue;
    constexpr char kDigits[] = "0123456789abcdef";
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 15];
  }
  return hex;
}

}  // namespace

bool Bootstrap::set_layout(int rank, int size, std::vector<int> node_of_rank, std::string job_id,
                           std::string& error) {
  if (size < 1 || rank < 0 || rank >= size) {
    error = "rank " + std::to_string(rank) + " of " + std::to_string(size) + " is not a place in a job";
    return false;
  }
  if (node_of_rank.size() != std::size_t(size)) {
    error = "the node map names " + std::to_string(node_of_rank.size()) + " ranks, the job has " + std::to_string(size);
    return false;
  }
  // Renumber nodes 0, 1, ... in order of their first rank, whatever the
  // process manager called them.
  std::map<int, int> renumbered;
  for (int& node : node_of_rank) node = renumbered.try_emplace(node, int(renumbered.size())).first->second;
  // Without a job of its own a process gets a name nobody can guess and hold
  // first (a fixed name would let another user block it for ever).
  if (job_id.empty()) job_id = "u" + std::to_string(getuid()) + "-" + random_hex(8);
  for (char& c : job_id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  rank_ = rank;
  size_ = size;
  node_of_rank_ = std::move(node_of_rank);
  job_id_ = std::move(job_id);
  return true;
}

int Bootstrap::node_count() const { return *std::max_element(node_of_rank_.begin(), node_of_rank_.end()) + 1; }

int Bootstrap::local_rank() const {
  return int(std::count(node_of_rank_.begin(), node_of_rank_.begin() + rank_, node_of_rank_[std::size_t(rank_)]));
}

int Bootstrap::local_size() const {
  return int(std::count(node_of_rank_.begin(), node_of_rank_.end(), node_of_rank_[std::size_t(rank_)]));
}

namespace bootstrap {

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

std::optional<int> parse_count(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

namespace {

// No process manager: a job of one.
class Singleton final : public Bootstrap {
 public:
  explicit Singleton(std::string& error) {
    set_layout(0, 1, {0}, config::text_if_set("VIASTACK_JOB").value_or(""), error);
  }
  const char* name() const override { return "singleton"; }
  bool put(const std::string& key, const std::string& value, std::string&) override {
    std::lock_guard guard(lock_);
    store_[key] = value;
    return true;
  }
  bool fence(std::string&) override { return true; }
  bool get(int rank, const std::string& key, std::string& value, std::string& error) override {
    std::lock_guard guard(lock_);
    auto it = store_.find(key);
    if (rank != 0 || it == store_.end()) {
      error = "no rank published '" + key + "'";
      return false;
    }
    value = it->second;
    return true;
  }
  [[noreturn]] void abort(int status, const std::string& message) override {
    VIA_LOG(error, "via", "%s", message.c_str());
    std::_Exit(status);
  }

 private:
  std::mutex lock_;  // NICs of several threads share the store
  std::map<std::string, std::string> store_;
};

using Opener = std::unique_ptr<Bootstrap> (*)(std::string&);

struct Choice {
  const char* name;
  Opener open;
};
constexpr Choice kChoices[] = {
    {"viarun", open_viarun}, {"pmix", open_pmix}, {"pmi1", open_pmi1}, {"pmi2", open_pmi2},
    {"singleton", open_singleton},
};

// Which process manager started us, by the variables each one sets.
const char* detect() {
  if (config::text_if_set("VIASTACK_RANK") || config::text_if_set("VIASTACK_DIRECTORY")) return "viarun";
  if (environment("PMIX_NAMESPACE") && environment("PMIX_RANK")) return "pmix";
  if (environment("PMI_FD") || environment("PMI_PORT")) {
    // Slurm's pmi2 plugin hands out a PMI_FD too; only PMI-2 is spoken on it.
    const auto mpi = environment("SLURM_MPI_TYPE");
    return mpi && *mpi == "pmi2" ? "pmi2" : "pmi1";
  }
  return "singleton";
}

}  // namespace

std::unique_ptr<Bootstrap> open_singleton(std::string& error) {
  auto b = std::make_unique<Singleton>(error);
  return error.empty() ? std::move(b) : nullptr;
}

}  // namespace bootstrap

namespace {

std::mutex bootstraps_lock;
// On the heap, so that no static destructor runs them down at exit; the
// exit handler below does, registered after each is made: exit handlers run
// in reverse order, so this one runs before the destructors of statics the
// bootstrap's libraries (Asio, libpmix) set up while it was made, which it
// still uses as it closes.
std::shared_ptr<Bootstrap>& instance = *new std::shared_ptr<Bootstrap>;
// Kept, not destroyed, when replaced: NICs may still hold them, and a
// parent's process-manager client is the parent's to close.
std::vector<std::shared_ptr<Bootstrap>>& replaced = *new std::vector<std::shared_ptr<Bootstrap>>;

void close_bootstraps() {
  std::lock_guard guard(bootstraps_lock);
  instance.reset();
  replaced.clear();
}

}  // namespace

std::shared_ptr<Bootstrap> job_bootstrap(std::string& error) {
  static std::string made_from;
  // What the choice and the viarun/singleton layouts depend on; the process
  // id too, since a forked child is a process of its own.
  std::string environment_now = std::to_string(getpid());
  for (const char* name : {"VIASTACK_BOOTSTRAP", "VIASTACK_RANK", "VIASTACK_SIZE", "VIASTACK_NODES", "VIASTACK_JOB",
                           "VIASTACK_DIRECTORY", "VIASTACK_JOB_KEY"}) {
    environment_now += '\n';
    environment_now += config::text_if_set(name).value_or("");
  }
  std::lock_guard guard(bootstraps_lock);
  if (instance && made_from == environment_now) return instance;
  if (instance) replaced.push_back(std::move(instance));
  const auto forced = config::text_if_set("VIASTACK_BOOTSTRAP");
  const std::string wanted = forced ? *forced : bootstrap::detect();
  for (const auto& choice : bootstrap::kChoices) {
    if (wanted != choice.name) continue;
    std::string why;
    std::unique_ptr<Bootstrap> made = choice.open(why);
    if (!made) {
      error = "bootstrap ";
      error += wanted;
      error += ": ";
      error += why;
      return nullptr;
    }
    instance = std::move(made);
    made_from = environment_now;
    log::set_rank(instance->rank());
    std::atexit(close_bootstraps);
    return instance;
  }
  error = "VIASTACK_BOOTSTRAP='" + wanted + "' names no bootstrap (viarun, pmix, pmi1, pmi2, singleton)";
  return nullptr;
}

}  // namespace via
