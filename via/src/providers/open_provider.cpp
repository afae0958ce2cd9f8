// Picks the provider for a VipOpenNic device name and VIASTACK_PROVIDER.
#include <string>

#include "providers/provider.hpp"
#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"

namespace via {

Result open_provider(std::string_view device, std::unique_ptr<Provider>& out) {
  std::string error;
  const auto job = job_bootstrap(error);
  if (!job) {
    VIA_LOG(error, "via", "cannot join the job: %s", error.c_str());
    return Result::error_resource;
  }
  const std::string configured = config::text("VIASTACK_PROVIDER");
  std::string_view kind = device.substr(0, device.find(':'));
  if (kind.empty() || kind == "via0") kind = configured;
  // auto: shared memory within a node, and tcp between nodes when the job spans several.
  if (kind == "auto") kind = job->node_count() > 1 ? "mixed" : "shm";
  if (kind == "shm") return shm::open_shm_provider(device, *job, out);
  if (kind == "tcp") return tcp::open_tcp_provider(device, job, out);
  if (kind == "mixed") return mixed::open_mixed_provider(device, job, out);
  VIA_LOG(error, "via", "unknown provider '%.*s' (available: shm, tcp, mixed, auto)", int(kind.size()), kind.data());
  return Result::error_resource;
}

}  // namespace via
