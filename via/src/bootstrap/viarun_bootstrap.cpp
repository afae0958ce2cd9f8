// viarun's bootstrap: the layout comes from the variables viarun sets
// (VIASTACK_RANK, VIASTACK_SIZE, VIASTACK_NODES, VIASTACK_JOB) and the
// key-value store is viarun's directory (VIASTACK_DIRECTORY), whose gets wait until the value is there, so a fence has nothing to do.
#include <cstdlib>
#include <mutex>

#include "bootstrap/bootstrap_impl.hpp"
#include "bootstrap/directory.hpp"
#include "via/config.hpp"
#include "via/log.hpp"
#include "providers/tcp/wire.hpp"

namespace via::bootstrap {
namespace {

std::chrono::milliseconds get_timeout() {
  return std::chrono::milliseconds(config::integer("VIASTACK_TCP_RESOLVE_TIMEOUT_MS"));
}

class ViarunBootstrap final : public Bootstrap {
 public:
  bool open(std::string& error) {
    const int rank = int(config::integer("VIASTACK_RANK"));
    const int size = int(config::integer("VIASTACK_SIZE"));
    // VIASTACK_NODES: how many hosts viarun placed the ranks on, round-robin.
    const int nodes = int(config::integer("VIASTACK_NODES"));
    std::vector<int> node_of_rank(static_cast<std::size_t>(size));
    for (std::size_t r = 0; r < node_of_rank.size(); ++r) node_of_rank[r] = int(r) % nodes;
    if (!set_layout(rank, size, std::move(node_of_rank), config::text_if_set("VIASTACK_JOB").value_or(""), error))
      return false;
    // Connected now rather than on first use: whatever it sets up exists
    // before job_bootstrap() registers the exit handler that closes it.
    return !config::text_if_set("VIASTACK_DIRECTORY") || connect(error);
  }

  const char* name() const override { return "viarun"; }

  // Keys are scoped by job, not by rank: NICs of several ranks may live in one
  // test process, and each publishes under its own key.
  bool put(const std::string& key, const std::string& value, std::string& error) override {
    return connect(error) && directory_->put(scoped(key), value, error);
  }

  bool fence(std::string&) override { return true; }

  bool get(int, const std::string& key, std::string& value, std::string& error) override {
    if (!connect(error)) return false;
    auto found = directory_->get(scoped(key), get_timeout(), error);
    if (!found) return false;
    value = std::move(*found);
    return true;
  }

  std::string reachable_address() override {
    std::string ignored;
    return connect(ignored) ? directory_->local_address().to_string() : std::string();
  }

  [[noreturn]] void abort(int status, const std::string& message) override {
    // viarun ends the job when a rank exits with a failure status.
    VIA_LOG(error, "via", "%s", message.c_str());
    std::_Exit(status ? status : 1);
  }

  bool connect(std::string& error) {
    std::lock_guard guard(connect_lock_);
    if (directory_) return true;
    const auto address = config::text_if_set("VIASTACK_DIRECTORY");
    if (!address) {
      error = "no job directory (VIASTACK_DIRECTORY is not set: start the job with viarun)";
      return false;
    }
    auto key = tcp::job_key_from_environment(error);
    if (!key) return false;
    directory_ = tcp::DirectoryClient::connect(*address, *key, error);
    return directory_ != nullptr;
  }

 private:
  std::string scoped(const std::string& key) const {
    std::string scoped = job_id();
    scoped += '.';
    scoped += key;
    return scoped;
  }

  std::mutex connect_lock_;
  std::unique_ptr<tcp::DirectoryClient> directory_;  // set once, then used by any thread
};

}  // namespace

std::unique_ptr<Bootstrap> open_viarun(std::string& error) {
  auto b = std::make_unique<ViarunBootstrap>();
  if (!b->open(error)) return nullptr;
  return b;
}

}  // namespace via::bootstrap
