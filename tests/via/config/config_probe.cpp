// Opens a NIC the way every program does at start-up, and closes it: the
// subject of the configuration tests (config_* in CMakeLists.txt), which set a
// VIASTACK_* variable and check that the program stops, or runs.
#include <cstdio>
#include <memory>

#include "via/via.hpp"

int main() {
  std::unique_ptr<via::Nic> nic;
  if (const via::Result opened = via::Nic::open("", nic); opened != via::Result::success) {
    std::fprintf(stderr, "config_probe: cannot open the NIC: %s\n", via::describe(opened));
    return 3;
  }
  return 0;
}
