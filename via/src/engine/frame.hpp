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
  kFlagShared = 16,    // read request: the target may write [offset, total) itself, by single copy,
                       // into the reader's iovec list (the payload), once it claims the read's word
  kFlagWithdrawable = 32,  // read request served through the rings: only once the target claims its word
                           // (Link::peer_ring_read_claims); the reader may take it back and copy it itself
};

// The word through which the two ends of a shared single-copy read (kFlagShared)
// agree on who copies the part offered to the target: the read's number
// (`imm` of its request) and a state. The reader offers; whoever moves it
// from kClaimOffered first copies that part, so the target never writes
// into memory the reader has already handed back to its program. A read
// served through the rings (kFlagWithdrawable) has a word of its own, by which
// the same race decides whether the target sends it or the reader, tired of
// waiting for a target that computes elsewhere, copies it by single copy.
enum ReadClaimState : std::uint8_t {
  kClaimOffered = 1,  // by the reader, before its request goes out
  kClaimWriting = 2,  // the target took it and is copying
  kClaimDone = 3,     // the target copied it all
  kClaimFailed = 4,   // the target could not: the reader copies it
  kClaimTaken = 5,    // the reader took it back and copies it itself
  kClaimServing = 6,  // kFlagWithdrawable: the target took it and sends it through the rings
};
inline std::uint64_t read_claim_word(std::uint32_t read, ReadClaimState state) {
  return (std::uint64_t(read) << 8) | state;
}

// The word of a read served through the rings (kFlagWithdrawable): its
// number (24 bits, its request's `imm`), its state (kClaimOffered, then
// kClaimServing or kClaimTaken) and how much of it the target has committed
// to the rings, in kCommitUnit steps (rounded up once the last part is). The
// target commits each part before it sends it, and only once the ring has
// room for it, so a committed part is always on its way; a reader taking the
// read back copies the rest itself and still takes the committed part from
// the rings.
inline constexpr std::uint32_t kRingReadNumbers = 1u << 24;
inline constexpr std::uint64_t kCommitUnit = 4096;
inline std::uint64_t ring_claim_word(std::uint32_t read, ReadClaimState state, std::uint64_t committed_bytes) {
  const std::uint64_t units = (committed_bytes + kCommitUnit - 1) / kCommitUnit;
  return units << 32 | std::uint64_t(read % kRingReadNumbers) << 8 | state;
}
inline std::uint32_t ring_claim_read(std::uint64_t word) { return std::uint32_t(word >> 8) % kRingReadNumbers; }
inline ReadClaimState ring_claim_state(std::uint64_t word) { return ReadClaimState(word & 0xFF); }
inline std::uint64_t ring_claim_committed(std::uint64_t word) { return (word >> 32) * kCommitUnit; }

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
