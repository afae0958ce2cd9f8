// The VIA layer's trace (VIASTACK_TRACE=via:FILE, via/trace.hpp): every frame
// a VI sends or receives, the RDMA moved by single copy without frames, and
// the connection events, one pcap record each, in one file per process
// (per rank). The engine calls the hooks below where frames are built and
// consumed and where connections change, so every provider is traced alike.
//
// Each hook is inline and tests one pointer: while tracing is off (the
// pointer is null, the branch always the same way) the hot path makes no call.
//
// The file: pcap with nanosecond timestamps, link type DLT_USER0 (147),
// which no registered protocol uses; tools/wireshark/viastack.lua decodes it.
// Every record, little-endian:
//
//   offset  size  field
//   0       1     version, 1
//   1       1     event (Event below)
//   2       1     the VI's reliability level (VIP_SERVICE_*: 1, 2 or 4; 0 for a request with no VI yet)
//   3       1     service length: bytes of `service` in use
//   4       4     NIC number: this process's NIC (its rank in the job)
//   8       4     VI number on that NIC (0xFFFFFFFF: none yet)
//   12      4     code: the VIP_ERROR_CODE of vi_error, the VIP_RETURN of connect_failed, else 0
//   16      16    service: the discriminator the VI's connection request was addressed to
//                 ("am", "mpi", "utcp" for the mesh's layers), zero-padded
//   32      ...   body:
//     frame_sent, frame_received: the 40-byte frame header (engine/frame.hpp, in field order),
//                                 then the frame's payload (cut at the snap length)
//     direct_write, direct_read:  remote address (8), length (8), remote memory handle (4), 0 (4)
//     other events:               a line of text (addresses, the cause of an error)
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/frame.hpp"
#include "via/via.hpp"

namespace via {

class NicImpl;
class ViImpl;
struct ConnRequestImpl;

namespace trace {

enum class Event : std::uint8_t {
  frame_sent = 1,
  frame_received = 2,
  direct_write = 3,     // RDMA write by single copy: no frame carries the data
  direct_read = 4,      // RDMA read by single copy
  connect_request = 5,  // a client's connection request (VipConnectRequest)
  peer_request = 6,     // a peer-to-peer request (VipConnectPeerRequest)
  request_arrived = 7,  // a server found a client's request (VipConnectWait)
  accepted = 8,         // the server accepted it on a VI (VipConnectAccept)
  rejected = 9,         // the server rejected it (VipConnectReject)
  connected = 10,       // the VI's connection is up, on either side
  connect_failed = 11,  // a request ended without a connection (rejected, timed out, ...)
  disconnected = 12,    // this side disconnected (VipDisconnect)
  vi_error = 13,        // the VI broke: an asynchronous error
};

inline constexpr std::uint32_t kLinkType = 147;  // DLT_USER0
inline constexpr std::size_t kRecordHeaderBytes = 32;
inline constexpr std::size_t kServiceBytes = 16;
inline constexpr std::uint32_t kNoVi = 0xFFFFFFFF;

class Tracer;
// The process's tracer while VIASTACK_TRACE selects via; null otherwise. Set
// once, by the first NIC opened, before that NIC moves a frame.
extern Tracer* active __attribute__((visibility("hidden")));

// Opens the process's trace when VIASTACK_TRACE selects via and it is not
// open yet: this rank's file, named as via/trace.hpp says. False (and an
// error in the log naming the file) when the file cannot be written.
bool start();
// Writes buffered records to the file (a NIC closing: a reader may look now).
void flush();

// What the hooks call when tracing is on.
void record_frame(Event event, const ViImpl& vi, const FrameHeader& h, const iovec* iov, std::size_t iovcnt);
void record_direct(const ViImpl& vi, bool write, std::uint64_t remote_address, std::uint64_t length,
                   MemHandle remote_handle);
void record_connect_request(const ViImpl& vi, const NetAddress& local, const NetAddress& remote, bool client);
void record_request(Event event, NicImpl& nic, const ConnRequestImpl& request, const ViImpl* vi);
void record_vi_event(Event event, const ViImpl& vi, std::uint32_t code, std::string_view text);

// ---- the hooks ----

inline void frame_sent(const ViImpl& vi, const FrameHeader& h, const iovec* iov, std::size_t iovcnt) {
  if (active) [[unlikely]]
    record_frame(Event::frame_sent, vi, h, iov, iovcnt);
}
inline void frame_received(const ViImpl& vi, const FrameHeader& h, const std::byte* payload) {
  if (active) [[unlikely]] {
    const iovec iov{const_cast<std::byte*>(payload), h.length};
    record_frame(Event::frame_received, vi, h, &iov, h.length && payload ? 1 : 0);  // null: placed by the link
  }
}
inline void direct_transfer(const ViImpl& vi, bool write, std::uint64_t remote_address, std::uint64_t length,
                            MemHandle remote_handle) {
  if (active) [[unlikely]]
    record_direct(vi, write, remote_address, length, remote_handle);
}
inline void connect_requested(const ViImpl& vi, const NetAddress& local, const NetAddress& remote, bool client) {
  if (active) [[unlikely]]
    record_connect_request(vi, local, remote, client);
}
// request_arrived and rejected have no VI; accepted has the VI it was accepted on.
inline void request_event(Event event, NicImpl& nic, const ConnRequestImpl& request, const ViImpl* vi = nullptr) {
  if (active) [[unlikely]]
    record_request(event, nic, request, vi);
}
inline void vi_event(Event event, const ViImpl& vi, std::uint32_t code = 0, std::string_view text = {}) {
  if (active) [[unlikely]]
    record_vi_event(event, vi, code, text);
}

}  // namespace trace
}  // namespace via
