// Picks the provider for a VipOpenNic device name and VIASTACK_PROVIDER.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "providers/provider.hpp"

namespace via {
namespace shm {
Result open_shm_provider(std::string_view device, std::unique_ptr<Provider>& out);
}
namespace tcp {
Result open_tcp_provider(std::string_view device, std::unique_ptr<Provider>& out);
}

Result open_provider(std::string_view device, std::unique_ptr<Provider>& out) {
  std::string_view kind = device.substr(0, device.find(':'));
  if (kind.empty() || kind == "via0") {
    const char* env = std::getenv("VIASTACK_PROVIDER");
    kind = env && *env ? env : "shm";
  }
  if (kind == "shm") return shm::open_shm_provider(device, out);
  if (kind == "tcp") return tcp::open_tcp_provider(device, out);
  std::fprintf(stderr, "viastack: unknown provider '%.*s' (available: shm, tcp)\n",
               int(kind.size()), kind.data());
  return Result::error_resource;
}

}  // namespace via
