// The frame protocol between two connected VIs, shared by every provider.
// A message larger than a link's frame payload travels as several frames
// (fragments) carrying their offset in the message.
#pragma once

#include <cstdint>

namespace via {

enum FrameType : std::uint8_t {
  kFrameSend = 1,          // send/receive data
  kFrameRdmaWrite = 2,     // RDMA write data (raddr, rhandle name the target)
  kFrameReadRequest = 3,   // RDMA read: please send me [raddr, raddr+total)
  kFrameReadResponse = 4,  // RDMA read data, or an error (kFlagError)
  kFrameDirectSend = 5,    // a send whose payload is the sender's iovec list, pulled by single copy
  kFrameAck = 6,           // `total` earlier frames were placed in memory (reliable reception, direct sends)
  kFrameMax = kFrameAck,
};

enum FrameFlags : std::uint8_t {
  kFlagLast = 1,       // last fragment of the message
  kFlagImmediate = 2,  // carries immediate data (`imm`)
  kFlagError = 4,      // read response: the target refused; `imm` holds the status bits
  kFlagNoData = 8,     // RDMA write already placed directly; this frame only consumes a receive
};

struct FrameHeader {
  std::uint8_t type;
  std::uint8_t flags;
  std::uint16_t message;  // send frames: the sender's message number, the same in every fragment
  std::uint32_t length;  // payload bytes in this frame
  std::uint64_t total;   // bytes in the whole message (for kFrameAck: number of acks)
  std::uint64_t offset;  // offset of this fragment in the message
  std::uint64_t raddr;   // RDMA: remote address of the message start
  std::uint32_t rhandle; // RDMA: remote memory handle
  std::uint32_t imm;     // immediate data
};
static_assert(sizeof(FrameHeader) == 40);

// Structural validity of a frame, before its fields are used.
inline bool frame_well_formed(const FrameHeader& h, std::uint64_t max_payload) {
  if (h.type == 0 || h.type > kFrameMax) return false;
  if (h.length > max_payload) return false;
  if (h.type == kFrameSend || h.type == kFrameRdmaWrite || h.type == kFrameReadResponse)
    return h.offset <= h.total && h.length <= h.total - h.offset;
  return true;
}

}  // namespace via
