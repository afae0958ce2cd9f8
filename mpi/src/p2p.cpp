#include "p2p.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include <via/config.hpp>
#include <via/copy.hpp>

#include "comm.hpp"
#include "datatype.hpp"
#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

// VIASTACK_MPI_EAGER_LIMIT: messages up to this many bytes go eagerly. Its
// declared range keeps a message and its header within one shm frame.
// Unset, over tcp alone: the most that range allows, near the 64 KiB up to
// which Open MPI's tcp BTL sends eagerly. A rendezvous costs a round trip
// more, which over loopback TCP is most of a 16-64 KiB message's time: at
// 32 KiB, a send took 2.7x and a sendrecv 1.9x Open MPI's time by
// rendezvous, 1.0x and 0.8x eagerly. The price: the mesh's receive slots
// (68 a peer) and its 128 bounce buffers grow with the limit, ~4 MiB a
// peer and 7.5 MiB at most, touched only where messages do not go straight
// between the link and the user's buffers (2-6 ranks: 1-7 MiB more RSS).
std::size_t eager_limit_setting() {
  constexpr std::size_t kTcpEagerLimit = 60 * 1024;
  if (!via::config::integer_if_set("VIASTACK_MPI_EAGER_LIMIT") && via::config::text("VIASTACK_PROVIDER") == "tcp")
    return kTcpEagerLimit;
  return std::size_t(via::config::integer("VIASTACK_MPI_EAGER_LIMIT"));
}

Request::Free* Request::free_list = nullptr;

P2P::P2P(int world_rank, int world_size)
    : world_rank_(world_rank), eager_limit_(eager_limit_setting()), posted_(world_size), unexpected_(world_size) {
  if (world_size > 1) transport_ = std::make_unique<Transport>(world_rank, world_size, eager_limit_, *this);
}

P2P::~P2P() = default;

void P2P::post_send(Request& r, const void* buf, std::size_t count, const Datatype& type, int dest, int tag,
                    std::uint32_t context, SendMode mode) {
  const Communicator& comm = *r.comm;
  if (dest == MPI_PROC_NULL) {
    r.status_source = MPI_PROC_NULL;
    r.complete = true;
    return;
  }
  const std::size_t bytes = count * type.size();
  std::span<const std::byte> data{static_cast<const std::byte*>(buf), bytes};
  if (!type.contiguous()) {
    r.staging.resize(bytes);
    type.pack(buf, count, r.staging.data());
    data = r.staging;
  }
  const int peer = comm.world_rank(dest);
  if (peer == world_rank_) return deliver_to_self(r, data, context, comm.rank(), tag, mode);
  WireHeader h = eager_header(context, comm.rank(), tag, bytes);
  if (mode == SendMode::standard && bytes <= eager_limit_) {
    transport_->send(peer, h, data);
    r.complete = true;
    return;
  }
  // Rendezvous: the receiver reads the message from our memory once it matched; a FIN completes the send.
  h.type = WireType::rts;
  r.token = h.token = next_token_++;
  r.peer = peer;
  if (bytes > 0) {
    r.registration = transport_->acquire_buffer(data.data(), bytes);
    r.registered = true;
    h.address = reinterpret_cast<std::uintptr_t>(data.data());
    h.handle = r.registration;
  }
  rendezvous_sends_[r.token] = &r;
  transport_->send(peer, h, {});
}

void P2P::deliver_to_self(Request& send, std::span<const std::byte> data, std::uint32_t context, int source, int tag,
                          SendMode mode) {
  if (Request* recv = posted_.match(context, source, tag)) {
    deliver(*recv, Message{source, tag, -1, data.size(), data, false, 0, 0, 0});
    send.complete = true;
    return;
  }
  Incoming& in = unexpected_.append(source, data);
  in.context = context;
  in.tag = tag;
  in.peer = -1;
  in.size = data.size();
  if (mode == SendMode::synchronous)
    in.sync_sender = &send;
  else
    send.complete = true;
}

void P2P::match_or_post(Request& r) {
  if (r.source == MPI_PROC_NULL) {
    r.status_source = MPI_PROC_NULL;
    r.complete = true;
    return;
  }
  if (const auto at = unexpected_.find(r.source, r.tag, r.context)) {
    deliver_unexpected(r, *at->entry);
    unexpected_.recycle(*at);
    return;
  }
  posted_.append(r);
}

void P2P::receive_matched(Request& r, void* buf, std::size_t count, const Datatype& type, Incoming message) {
  set_receive_buffer(r, buf, count, type);
  r.context = message.context;
  r.source = message.source;
  r.tag = message.tag;
  deliver_unexpected(r, message);
}

void P2P::deliver_unexpected(Request& recv, const Incoming& in) {
  deliver(recv, Message{in.source, in.tag, in.peer, in.size, in.data, in.rendezvous, in.token, in.address, in.handle});
  if (in.sync_sender) complete(*in.sync_sender);
}

std::optional<Incoming> P2P::take_unexpected(int source, int tag, std::uint32_t context) {
  if (const auto at = unexpected_.find(source, tag, context)) return unexpected_.take(*at);
  return std::nullopt;
}

std::size_t P2P::set_receive_status(Request& recv, int source, int tag, std::size_t size) {
  recv.status_source = source;
  recv.status_tag = tag;
  if (size > recv.capacity) recv.error = MPI_ERR_TRUNCATE;
  return recv.bytes = std::min(size, recv.capacity);
}

void P2P::deliver_eager(Request& recv, int source, int tag, std::span<const std::byte> data) {
  if (data.size() > recv.capacity && recv.keep_whole) [[unlikely]]
    recv.staging.assign(data.begin(), data.end());
  if (const std::size_t bytes = set_receive_status(recv, source, tag, data.size()); bytes > 0) {
    // with nothing to copy the buffer may be null
    if (recv.datatype->contiguous())
      via::copy_memory(recv.buffer, data.data(), bytes);
    else
      recv.datatype->unpack(data.data(), bytes, recv.buffer);
  }
  complete(recv);
}

void P2P::deliver(Request& recv, const Message& message) {
  if (!message.rendezvous) return deliver_eager(recv, message.source, message.tag, message.data);
  set_receive_status(recv, message.source, message.tag, message.size);
  start_read(recv, message);
}

void P2P::start_read(Request& recv, const Message& message) {
  recv.peer = message.peer;
  recv.token = message.token;
  const std::size_t read_bytes = recv.keep_whole ? message.size : recv.bytes;
  if (read_bytes == 0) {
    WireHeader fin{WireType::fin};
    fin.token = recv.token;
    transport_->send(recv.peer, fin, {});
    complete(recv);
    return;
  }
  void* landing = recv.buffer;
  if (lands_in_staging(recv)) {
    recv.staging.resize(read_bytes);
    landing = recv.staging.data();
  }
  const std::uint64_t read_id = next_token_++;
  reads_[read_id] = &recv;
  transport_->read(recv.peer, landing, read_bytes, message.address, message.handle, read_id);
}

void P2P::on_rdma_complete(std::uint64_t id) {
  auto it = reads_.find(id);
  if (it == reads_.end()) return rma_->on_rdma_complete(id);
  Request& recv = *it->second;
  reads_.erase(it);
  if (lands_in_staging(recv) && recv.bytes > 0) {
    if (recv.datatype->contiguous())
      via::copy_memory(recv.buffer, recv.staging.data(), recv.bytes);
    else
      recv.datatype->unpack(recv.staging.data(), recv.bytes, recv.buffer);
  }
  WireHeader fin{WireType::fin};
  fin.token = recv.token;
  transport_->send(recv.peer, fin, {});
  complete(recv);
}

void P2P::on_message(int peer, const WireHeader& h, std::span<const std::byte> payload) {
  if (h.type == WireType::eager && payload.size() == h.size) [[likely]] {
    if (Request* recv = posted_.match(h.context, h.source, h.tag)) return deliver_eager(*recv, h.source, h.tag, payload);
    return keep_unexpected(peer, h, payload);
  }
  on_other_message(peer, h, payload);
}

// on_message's less common ways, out of line: the eager way then saves no registers for them.
[[gnu::noinline]] void P2P::on_other_message(int peer, const WireHeader& h, std::span<const std::byte> payload) {
  if (h.type == WireType::accumulate || h.type == WireType::rma) return rma_->on_rma_message(peer, h, payload);
  if (h.type == WireType::cancel_send) return on_cancel_send(peer, h.token);
  if (h.type == WireType::cancel_reply) return on_cancel_reply(h.token, h.size == 1);
  if (h.type == WireType::fin) {
    auto it = rendezvous_sends_.find(h.token);
    if (it == rendezvous_sends_.end()) return;
    Request& send = *it->second;
    rendezvous_sends_.erase(it);
    if (send.registered) transport_->release_buffer(send.registration);
    complete(send);
    return;
  }
  // An eager message whose payload is not the size its header says, or a type unknown here.
  if (h.type != WireType::rts) {
    std::string why = "a message from rank ";
    why += std::to_string(peer);
    why += " does not match its header";
    abort_job("progress", why);
  }
  Message m{h.source, h.tag, peer, std::size_t(h.size), payload, true, h.token, h.address, h.handle};
  if (Request* recv = posted_.match(h.context, h.source, h.tag)) return deliver(*recv, m);
  keep_unexpected(peer, h, payload);
}

void P2P::keep_unexpected(int peer, const WireHeader& h, std::span<const std::byte> payload) {
  Incoming& in = unexpected_.append(h.source, payload);
  in.context = h.context;
  in.tag = h.tag;
  in.peer = peer;
  in.size = std::size_t(h.size);
  in.rendezvous = h.type == WireType::rts;
  in.token = h.token;
  in.address = h.address;
  in.handle = h.handle;
}

void P2P::complete(Request& request) {
  request.complete = true;
  if (request.detached) delete &request;
}

std::optional<ProbeResult> P2P::iprobe(int source, int tag, std::uint32_t context) {
  std::optional<ProbeResult> found;
  test([&] { return (found = find_unexpected(source, tag, context)).has_value(); });
  return found;
}

std::optional<ProbeResult> P2P::find_unexpected(int source, int tag, std::uint32_t context) {
  const auto at = unexpected_.find(source, tag, context);
  if (!at) return std::nullopt;
  const Incoming& in = *at->entry;
  return ProbeResult{in.source, in.tag, in.size};
}

ProbeResult P2P::probe(int source, int tag, std::uint32_t context) {
  std::optional<ProbeResult> found;
  wait_until([&] {
    found = find_unexpected(source, tag, context);
    return found.has_value();
  });
  return *found;
}

std::optional<Incoming> P2P::improbe(int source, int tag, std::uint32_t context) {
  std::optional<Incoming> taken;
  test([&] { return (taken = take_unexpected(source, tag, context)).has_value(); });
  return taken;
}

Incoming P2P::mprobe(int source, int tag, std::uint32_t context) {
  std::optional<Incoming> found;
  wait_until([&] {
    found = take_unexpected(source, tag, context);
    return found.has_value();
  });
  return std::move(*found);
}

bool P2P::cancel(Request& request) {
  if (!posted_.holds(request)) return false;  // matched, or never posted
  posted_.remove(request);
  request.cancelled = true;
  complete(request);
  return true;
}

void P2P::cancel_send(Request& request) {
  if (request.complete) return;
  if (request.peer == -1) {  // to this rank: a synchronous send waits in the unexpected queue until matched
    const auto waiting = unexpected_.find_if([&](const Incoming& in) { return in.sync_sender == &request; });
    if (!waiting) return;
    unexpected_.take(*waiting);
    request.cancelled = true;
    complete(request);
    return;
  }
  WireHeader ask{WireType::cancel_send};
  ask.token = request.token;
  transport_->send(request.peer, ask, {});
}

void P2P::on_cancel_send(int peer, std::uint64_t token) {
  const auto waiting = unexpected_.find_if(
      [&](const Incoming& in) { return in.rendezvous && in.peer == peer && in.token == token; });
  const bool taken_back = waiting.has_value();
  if (taken_back) unexpected_.take(*waiting);
  WireHeader reply{WireType::cancel_reply};
  reply.token = token;
  reply.size = taken_back ? 1 : 0;
  transport_->send(peer, reply, {});
}

// A refusal needs nothing: the receiver matched the message, and its FIN completes the send.
void P2P::on_cancel_reply(std::uint64_t token, bool cancelled) {
  const auto it = rendezvous_sends_.find(token);
  if (!cancelled || it == rendezvous_sends_.end()) return;
  Request& send = *it->second;
  rendezvous_sends_.erase(it);
  if (send.registered) transport_->release_buffer(send.registration);
  send.cancelled = true;
  complete(send);
}

void P2P::would_wait_forever() {
  abort_job("wait", "deadlock: a single-process job waits for a message nobody will send");
}

void P2P::poll() {
  if (transport_) transport_->poll();
  if (progress_client_) progress_client_->progress();
}

void P2P::shutdown() {
  if (transport_) transport_->shutdown();
}

}  // namespace viastack::mpi
