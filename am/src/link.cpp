#include "link.hpp"

#include <via/bootstrap.hpp>

#include <algorithm>
#include <cstdio>
#include <string>


namespace am::detail {

namespace {

// RDMA descriptors a VI's send queue may hold besides its messages.
constexpr std::uint32_t kRdmaDescs = 64;
// Receives per peer beyond the 2 x depth it may fill. A handler's reply
// returns the credit before its own receive is re-posted, so each receive
// being handled (handlers may poll, and handle more) needs a spare.
constexpr std::uint32_t kLateReposts = 4;

Status check(via::Result r, const char* what) {
  std::string why = "am_enable: ";
  why += what;
  why += ": ";
  why += via::describe(r);
  return r == via::Result::success ? Status::ok : error(Status::enable_failed, why);
}

}  // namespace

Link::~Link() {
  if (segment_handle_) mesh_->deregister_exposed(segment_, segment_bytes_, segment_handle_);
  mesh_.reset();  // its VIs first: nothing may still send from the buffers
  for (std::size_t peer = 0; peer < handles_.size(); ++peer)
    if (handles_[peer]) nic_->deregister_memory(buffers_[peer].get(), handles_[peer]);
  nic_.reset();
}

std::byte* Link::make_buffers(int peer) const {
  auto& block = buffers_[std::size_t(peer)];
  const std::size_t bytes = std::size_t(per_peer()) * kBufBytes;
  block = std::make_unique_for_overwrite<std::byte[]>(bytes);
  // Unregistered, its messages are copied out (send_registered falls back to send).
  if (nic_->register_memory(block.get(), bytes, via::MemAttributes{mesh_->ptag(), false, false},
                            handles_[std::size_t(peer)]) != via::Result::success)
    handles_[std::size_t(peer)] = 0;
  return block.get();
}

// ---- set-up ----

Status Link::open() {
  std::string why;
  job_ = via::job_bootstrap(why);
  if (!job_) return error(Status::enable_failed, "am_enable: " + why);
  size_ = job_->size();
  rank_ = job_->rank();
  static unsigned enables = 0;  // the same count on every rank: enabling is collective
  // Unique in the job (the store's rule): the enable's number, then the rank.
  segment_key_ = "am.segment." + std::to_string(enables++) + ".";
  if (size_ > 4096) return error(Status::enable_failed, "am_enable: more than 4096 ranks");
  Status s;
  if ((s = check(via::Nic::open("", nic_), "open NIC")) != Status::ok) return s;
  // A VI's sends: its request, reply and acknowledgement buffers, and at
  // most every RDMA descriptor; its receives: every receive buffer.
  const std::uint32_t max_sends = 2u * depth_ + kAckBuffers + kRdmaDescs, max_receives = 2u * depth_ + kLateReposts;
  VIP_NIC_ATTRIBUTES nic_attributes{};
  nic_->query(nic_attributes);
  if (const std::uint32_t queue = std::uint32_t(nic_attributes.MaxDescriptorsPerQueue);
      std::max(max_sends, max_receives) > queue)
    return error(Status::enable_failed,
                 "am_enable: VIASTACK_AM_DEPTH=" + std::to_string(depth_) + " needs " +
                     std::to_string(std::max(max_sends, max_receives)) + " descriptors per VI queue, and this NIC's hold " +
                     std::to_string(queue) + ": use a depth of at most " +
                     std::to_string((queue - std::max(kAckBuffers + kRdmaDescs, kLateReposts)) / 2));
  via::MeshOptions options;
  options.service = "am";
  options.reliability =
      reliability_ == Reliability::reliable ? VIP_SERVICE_RELIABLE_DELIVERY : VIP_SERVICE_UNRELIABLE;
  options.flow_control = false;  // the window is AM's
  // Reliable VIs hand a message over where it arrived (the shm ring), not
  // copied into a receive buffer first: a store's bytes are copied once, into
  // the segment. A message that may run the program's code is copied out and
  // released first (Core::on_message): a handler may wait for that peer.
  options.consume_in_place = reliability_ == Reliability::reliable;
  options.rdma_write = true;
  options.rdma_read = reliability_ == Reliability::reliable;
  options.message_bytes = wire::kMaxMessage;
  options.receives_per_peer = max_receives;
  options.send_descriptors = max_sends;
  options.bounce_buffers = 2u * depth_ + kAckBuffers;
  if ((s = check(via::Mesh::open(*nic_, rank_, size_, options, client_, mesh_), "open the mesh")) != Status::ok)
    return s;
  buffers_.resize(std::size_t(size_));
  handles_.resize(std::size_t(size_));
  posted_.resize(std::size_t(per_peer()) * std::size_t(size_));
  return Status::ok;
}

Status Link::register_segment(std::byte* segment, std::size_t bytes) {
  segment_ = segment;
  segment_bytes_ = bytes;
  if (!bytes) return Status::ok;
  return check(mesh_->register_exposed(segment, bytes, segment_handle_), "register the segment");
}

Status Link::publish_segment(std::uint16_t depth) {
  std::string why;
  const std::string value = std::to_string(std::uintptr_t(segment_)) + " " + std::to_string(segment_bytes_) + " " +
                            std::to_string(segment_handle_) + " " + std::to_string(depth);
  if (!job_->put(segment_key_ + std::to_string(rank_), value, why) || !job_->fence(why))
    return error(Status::enable_failed, "am_enable: publishing the segment: " + why);
  return Status::ok;
}

bool Link::lookup_segment(int peer, PeerSegment& out, std::string& why) {
  std::string value;
  if (!job_->get(peer, segment_key_ + std::to_string(peer), value, why)) return false;
  unsigned long long base, bytes, handle, depth;
  char rest;
  if (std::sscanf(value.c_str(), "%llu %llu %llu %llu %c", &base, &bytes, &handle, &depth, &rest) != 4) {
    why = "its published segment \"" + value + "\" is malformed";
    return false;
  }
  out = PeerSegment{base, bytes, via::MemHandle(handle), depth};
  return true;
}

// ---- I/O ----

void Link::rdma(int peer, bool write, std::byte* local, std::uint64_t remote, via::MemHandle remote_handle,
                std::uint32_t bytes, std::uint32_t tag) {
  if (write)
    mesh_->write(peer, local, bytes, remote, remote_handle, tag);
  else
    mesh_->read(peer, local, bytes, remote, remote_handle, tag);
}

}  // namespace am::detail
