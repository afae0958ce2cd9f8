// A provider plugin for provider_registry_test: loaded through
// VIASTACK_PROVIDER_PLUGIN, it registers "plugin_probe", which opens shm
// NICs.
#include <string>

#include "providers/provider.hpp"

namespace {

const bool registered = via::register_provider(
    "plugin_probe",
    [](std::string_view device, const std::shared_ptr<via::Bootstrap>& job, std::unique_ptr<via::Provider>& out) {
      const auto colon = device.find(':');
      const std::string shm_device = colon == std::string_view::npos ? "shm" : "shm" + std::string(device.substr(colon));
      return via::shm::open_shm_provider(shm_device, *job, out);
    });

}  // namespace
