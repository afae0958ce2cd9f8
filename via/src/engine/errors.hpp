// What the engine's error messages say about memory: addresses and handles in
// hex, as a debugger and /proc/PID/maps show them.
#pragma once

#include <cstdint>
#include <string>

namespace via {

// "[0x7f3a12340000, +4096) with memory handle 0x10003"
std::string describe_range(std::uint64_t address, std::uint64_t length, std::uint32_t handle);

}  // namespace via
