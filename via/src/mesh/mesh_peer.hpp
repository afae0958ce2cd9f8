// The mesh's private parts, shared by its two files: mesh.cpp (messages,
// RDMA, completions) and mesh_connections.cpp (making and losing peers).
#pragma once

#include <cstdlib>

#include "via/mesh.hpp"

namespace via {

// With flow control, every message on a mesh VI starts with this header;
// without, a message is the client's bytes alone.
struct MeshFrameHeader {
  enum Kind : std::uint8_t { data, credit };
  std::uint16_t credits;  // receive buffers the sender has re-posted for the destination
  Kind kind;
  std::uint8_t reserved[5];  // keeps the message that follows 8-byte aligned
};
static_assert(sizeof(MeshFrameHeader) == 8);

struct Mesh::PendingRdma {
  bool write;
  void* local;
  std::size_t len;
  std::uint64_t remote_address;
  MemHandle remote_handle;
  std::uint64_t id;
};

// A message or an RDMA operation waiting for its peer, in the order issued:
// a message sent after a write arrives after the written data.
struct Mesh::Queued {
  std::vector<std::byte> bytes;  // a message: head and body
  bool is_rdma = false;
  PendingRdma rdma{};
};

// A peer this rank talks to: made on first use, by either side.
struct Mesh::Peer {
  Peer(int rank, std::uint32_t receives, std::uint32_t sends) : rank(rank), receives(receives), sends(sends) {
    reposts.reserve(receives);
  }
  int rank;
  Vi* vi = nullptr;
  bool connected = false;
  bool closed = false;  // the peer disconnected in order (it finished)
  bool failed = false;  // reported to the client; what is sent to it is dropped
  std::uint64_t connect_deadline_ns = 0;  // until when a connection may take
  std::unique_ptr<std::byte, FreeBytes> receive_block;  // its receive descriptors, then their buffers
  MemHandle receive_handle = 0;
  std::uint32_t send_credits = 0;
  std::uint32_t owed_credits = 0;  // receive buffers re-posted since we last told the peer
  PostedQueue receives;  // receive slots posted to the VI, oldest first
  PostedQueue sends;     // send descriptors posted to the VI, oldest first
  std::vector<VIP_DESCRIPTOR*> reposts;  // receive descriptors of handled messages, waiting to be re-posted
  std::deque<Queued> backlog;  // waiting for the connection, credits, a bounce buffer or descriptors
};

// What a posted send-queue descriptor is doing.
struct Mesh::SendSlot {
  static constexpr std::uint32_t kNoBounce = ~0u;
  std::uint32_t bounce = kNoBounce;  // a message: the bounce buffer it sends from
  std::uint64_t rdma_id = 0;         // RDMA: reported when the last chunk completes; send_registered: its token
  bool reports_rdma = false;
  bool reports_sent = false;  // send_registered: the client hears when its memory is free
  MemHandle local_handle = 0;  // RDMA: released with the report
};

inline void Mesh::FreeBytes::operator()(std::byte* bytes) const { std::free(bytes); }

namespace mesh_detail {
constexpr std::size_t kDescriptorBytes = 64;  // VIP_DESCRIPTOR_ALIGNMENT; a descriptor with two segments fits
// send_registered copies a message of up to this many bytes as send() does:
// for so few bytes a descriptor and the client's on_sent cost more than the copy.
constexpr std::size_t kCopiedRegisteredSend = 256;
constexpr std::size_t kDeferredReposts = 4;  // without credits: handled receives re-posted together once this many wait
constexpr unsigned kAcceptEvery = 256;  // polls between looks for connection requests, when none of ours is pending (each look runs the provider's control traffic)
std::uint64_t now_ns();
std::size_t round_up(std::size_t n, std::size_t to);
// Page-aligned memory for descriptors and buffers; null when there is none.
std::byte* allocate_pages(std::size_t bytes);
}  // namespace mesh_detail

}  // namespace via
