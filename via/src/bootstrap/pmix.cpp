// The PMIx client (Open MPI's mpirun, Slurm's srun --mpi=pmix), through
// libpmix: the job's size and each rank's node come from the job data the
// server hands every client; puts are PMIX_GLOBAL, a fence collects them.
#include <pmix.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "bootstrap/bootstrap_impl.hpp"
#include "via/log.hpp"

namespace via::bootstrap {
namespace {

std::string describe(const char* call, pmix_status_t rc) {
  std::string text = call;
  text += ": ";
  text += PMIx_Error_string(rc);
  return text;
}

// Frees a value PMIx_Get handed out.
struct ValueDeleter {
  void operator()(pmix_value_t* v) const { PMIX_VALUE_RELEASE(v); }
};
using Value = std::unique_ptr<pmix_value_t, ValueDeleter>;

class PmixBootstrap final : public Bootstrap {
 public:
  bool open(std::string& error) {
    if (const pmix_status_t rc = PMIx_Init(&me_, nullptr, 0); rc != PMIX_SUCCESS) {
      error = describe("PMIx_Init", rc);
      error += " (PMIX_NAMESPACE=" + environment("PMIX_NAMESPACE").value_or("") +
               ", PMIX_SERVER_URI*: is the process manager still there?)";
      return false;
    }
    initialized_ = true;
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    const auto size = get_uint(job, PMIX_JOB_SIZE, error);
    if (!size) return false;
    if (*size == 0 || *size > (1u << 24)) {  // bounds the node map below
      error = "PMIx says the job has " + std::to_string(*size) + " ranks";
      return false;
    }
    std::vector<int> node_of_rank;
    node_map(int(*size), node_of_rank);
    return set_layout(int(me_.rank), int(*size), std::move(node_of_rank), me_.nspace, error);
  }

  ~PmixBootstrap() override {
    // Not in a forked child: the client library's connection is the parent's.
    if (initialized_ && owner_ == getpid()) PMIx_Finalize(nullptr, 0);
  }

  const char* name() const override { return "pmix"; }

  bool put(const std::string& key, const std::string& value, std::string& error) override {
    if (key.empty() || key.size() >= PMIX_MAX_KEYLEN) {
      error = "key '" + key + "' is not 1.." + std::to_string(PMIX_MAX_KEYLEN - 1) + " bytes long";
      return false;
    }
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, value.c_str(), PMIX_STRING);
    const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc != PMIX_SUCCESS) {
      error = describe("PMIx_Put", rc);
      return false;
    }
    return true;
  }

  bool fence(std::string& error) override {
    if (const pmix_status_t rc = PMIx_Commit(); rc != PMIX_SUCCESS) {
      error = describe("PMIx_Commit", rc);
      return false;
    }
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info;
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    const pmix_status_t rc = PMIx_Fence(&all, 1, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
      error = describe("PMIx_Fence", rc);
      return false;
    }
    return true;
  }

  bool get(int rank, const std::string& key, std::string& value, std::string& error) override {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, me_.nspace, pmix_rank_t(rank));
    // The fence collected every put into this process's store: a key that is
    // not there was not put before it, and the answer comes at once, as from
    // the PMI-1 and PMI-2 stores (without PMIX_OPTIONAL PMIx would ask the
    // owner's server and wait for the key to appear).
    pmix_value_t* raw = nullptr;
    const pmix_status_t rc = lookup(proc, key.c_str(), raw);
    Value got(raw);
    if (rc != PMIX_SUCCESS || !got || got->type != PMIX_STRING) {
      error = "no value '" + key + "' from rank " + std::to_string(rank) + ": " +
              (rc != PMIX_SUCCESS ? describe("PMIx_Get", rc) : std::string("not a string"));
      return false;
    }
    value = got->data.string ? got->data.string : "";
    return true;
  }

  [[noreturn]] void abort(int status, const std::string& message) override {
    VIA_LOG(error, "via", "%s", message.c_str());
    // The launcher forwards this rank's output; the job it is about to end
    // must not take the message with it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    PMIx_Abort(status ? status : 1, message.c_str(), nullptr, 0);
    std::_Exit(status ? status : 1);
  }

 private:
  // Looks only in this process's store: job data is there after PMIx_Init,
  // and every rank's puts after a fence.
  static pmix_status_t lookup(const pmix_proc_t& proc, const char* key, pmix_value_t*& raw) {
    pmix_info_t info;
    bool optional = true;
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    const pmix_status_t rc = PMIx_Get(&proc, key, &info, 1, &raw);
    PMIX_INFO_DESTRUCT(&info);
    return rc;
  }

  static Value lookup(const pmix_proc_t& proc, const char* key) {
    pmix_value_t* raw = nullptr;
    const pmix_status_t rc = lookup(proc, key, raw);
    Value got(raw);
    return rc == PMIX_SUCCESS ? std::move(got) : nullptr;
  }

  std::optional<std::uint32_t> get_uint(const pmix_proc_t& proc, const char* key, std::string& error) {
    Value v = lookup(proc, key);
    if (v && v->type == PMIX_UINT32) return v->data.uint32;
    error = "PMIx has no ";
    error += key;
    error += " for this job";
    return std::nullopt;
  }

  // Each rank's node: PMIX_NODEID where the server gives it, else the ranks'
  // host names, else (no data at all) every peer taken as remote.
  void node_map(int size, std::vector<int>& node_of_rank) {
    node_of_rank.assign(std::size_t(size), 0);
    std::map<std::string, int> hosts;
    auto by_id = [&](const pmix_proc_t& proc) -> std::optional<int> {
      Value v = lookup(proc, PMIX_NODEID);
      if (!v || v->type != PMIX_UINT32 || v->data.uint32 >= (1u << 24)) return std::nullopt;
      return int(v->data.uint32);
    };
    auto by_host = [&](const pmix_proc_t& proc) -> std::optional<int> {
      Value v = lookup(proc, PMIX_HOSTNAME);
      if (!v || v->type != PMIX_STRING || !v->data.string) return std::nullopt;
      return hosts.try_emplace(v->data.string, int(hosts.size())).first->second;
    };
    auto fill = [&](auto node_of) {
      for (int r = 0; r < size; ++r) {
        pmix_proc_t proc;
        PMIX_LOAD_PROCID(&proc, me_.nspace, pmix_rank_t(r));
        const auto node = node_of(proc);
        if (!node) return false;
        node_of_rank[std::size_t(r)] = *node;
      }
      return true;
    };
    if (fill(by_id) || fill(by_host)) return;
    for (int r = 0; r < size; ++r) node_of_rank[std::size_t(r)] = r;
  }

  pmix_proc_t me_{};
  bool initialized_ = false;
  const pid_t owner_ = getpid();
};

}  // namespace

std::unique_ptr<Bootstrap> open_pmix(std::string& error) {
  auto b = std::make_unique<PmixBootstrap>();
  if (!b->open(error)) return nullptr;
  return b;
}

}  // namespace via::bootstrap
