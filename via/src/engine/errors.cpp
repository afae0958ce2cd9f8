// Error names and the wording of the engine's error messages.
#include "engine/errors.hpp"

#include <cinttypes>
#include <cstdio>

#include "via/via.hpp"

namespace via {

const char* error_name(VIP_ERROR_CODE code) {
  switch (code) {
    case VIP_ERROR_POST_DESC: return "VIP_ERROR_POST_DESC";
    case VIP_ERROR_CONN_LOST: return "VIP_ERROR_CONN_LOST";
    case VIP_ERROR_RECVQ_EMPTY: return "VIP_ERROR_RECVQ_EMPTY";
    case VIP_ERROR_VI_OVERRUN: return "VIP_ERROR_VI_OVERRUN";
    case VIP_ERROR_RDMAW_PROT: return "VIP_ERROR_RDMAW_PROT";
    case VIP_ERROR_RDMAW_DATA: return "VIP_ERROR_RDMAW_DATA";
    case VIP_ERROR_RDMAW_ABORT: return "VIP_ERROR_RDMAW_ABORT";
    case VIP_ERROR_RDMAR_PROT: return "VIP_ERROR_RDMAR_PROT";
    case VIP_ERROR_COMP_PROT: return "VIP_ERROR_COMP_PROT";
    case VIP_ERROR_RDMA_TRANSPORT: return "VIP_ERROR_RDMA_TRANSPORT";
    case VIP_ERROR_CATASTROPHIC: return "VIP_ERROR_CATASTROPHIC";
  }
  return "an unknown VIP_ERROR code";
}

std::string describe_range(std::uint64_t address, std::uint64_t length, std::uint32_t handle) {
  char text[96];
  std::snprintf(text, sizeof text, "[0x%" PRIx64 ", +%" PRIu64 ") with memory handle 0x%" PRIx32, address, length,
                handle);
  return text;
}

}  // namespace via
