// The registry of providers, and the choice of one for a VipOpenNic device
// name and VIASTACK_PROVIDER.
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <utility>

#include "providers/provider.hpp"
#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"

namespace via {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<std::string, ProviderOpener>> providers;
};

// Built on first use: a plugin's static initializer may register before
// this file's own have run.
Registry& registry() {
  static Registry instance;
  return instance;
}

std::string joined_names() {
  std::string names;
  for (const std::string& name : registered_providers()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

// The built-in providers come in through the registry like any other.
const bool builtins_registered = [] {
  register_provider("shm", [](std::string_view device, const std::shared_ptr<Bootstrap>& job,
                              std::unique_ptr<Provider>& out) { return shm::open_shm_provider(device, *job, out); });
  register_provider("tcp", tcp::open_tcp_provider);
  register_provider("mixed", mixed::open_mixed_provider);
  return true;
}();

// Loads VIASTACK_PROVIDER_PLUGIN once per process; false when it is set and
// cannot be loaded. The library registers its providers as it loads.
bool load_plugin() {
  static const bool loaded = [] {
    const auto path = config::text_if_set("VIASTACK_PROVIDER_PLUGIN");
    if (!path) return true;
    // Never unloaded: the providers it registered live as long as the process.
    if (!dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL)) {
      VIA_LOG(error, "via", "cannot load the provider plugin VIASTACK_PROVIDER_PLUGIN=%s: %s", path->c_str(),
              dlerror());
      return false;
    }
    return true;
  }();
  return loaded;
}

}  // namespace

bool register_provider(std::string name, ProviderOpener opener) {
  if (name.empty() || name == "auto" || name == "via0" || name.find(':') != std::string::npos || !opener) {
    VIA_LOG(error, "via", "cannot register a provider named '%s': not a provider name", name.c_str());
    return false;
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& [known, ignored] : r.providers) {
    if (known == name) {
      VIA_LOG(error, "via", "cannot register a provider named '%s': one is registered already", name.c_str());
      return false;
    }
  }
  r.providers.emplace_back(std::move(name), std::move(opener));
  return true;
}

std::vector<std::string> registered_providers() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, ignored] : r.providers) names.push_back(name);
  return names;
}

Result open_provider(std::string_view device, std::unique_ptr<Provider>& out) {
  if (!load_plugin()) return Result::error_resource;
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
  ProviderOpener opener;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const auto& [name, registered] : r.providers)
      if (name == kind) opener = registered;
  }
  if (!opener) {
    VIA_LOG(error, "via", "unknown provider '%.*s' (registered: %s; or auto%s)", int(kind.size()), kind.data(),
            joined_names().c_str(),
            config::text_if_set("VIASTACK_PROVIDER_PLUGIN") ? "" : "; a plugin's with VIASTACK_PROVIDER_PLUGIN=path.so");
    return Result::error_resource;
  }
  return opener(device, job, out);
}

}  // namespace via
