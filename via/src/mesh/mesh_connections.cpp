// Making peers, on first use by either side, and losing them.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "engine/engine.hpp"
#include "mesh_peer.hpp"

namespace via {

namespace mesh_detail {

std::uint64_t now_ns() {
  return std::uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::byte* allocate_pages(std::size_t bytes) {
  return static_cast<std::byte*>(std::aligned_alloc(4096, round_up(bytes, 4096)));
}

}  // namespace mesh_detail

using namespace mesh_detail;

namespace {

// A request comes from the service's discriminator followed by the
// requester's rank (4 bytes, little-endian).
std::vector<std::uint8_t> requester_discriminator(const std::vector<std::uint8_t>& service, int rank) {
  std::vector<std::uint8_t> d = service;
  for (int shift = 0; shift < 32; shift += 8) d.push_back(std::uint8_t(std::uint32_t(rank) >> shift));
  return d;
}

// The rank a request comes from, or -1 when its discriminator names none of the job's.
int requester_rank(const std::vector<std::uint8_t>& d, const std::vector<std::uint8_t>& service, int size) {
  const std::size_t n = service.size();
  if (d.size() != n + 4 || !std::equal(service.begin(), service.end(), d.begin())) return -1;
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < 4; ++i) rank |= std::uint32_t(d[n + i]) << (8 * i);
  return rank < std::uint32_t(size) ? int(rank) : -1;
}

// The meshes open on each NIC: the NIC has one error handler, which tells
// them all (each takes what concerns its own VIs). NICs may live in several
// threads, hence the lock. Never destroyed: a mesh kept in another
// library's static object (AM's, when a program exits without am_disable)
// is destroyed after this library's statics, and still unregisters here.
std::mutex& meshes_lock = *new std::mutex;
std::map<const Nic*, std::vector<Mesh*>>& meshes_of_nics() {
  static auto& meshes = *new std::map<const Nic*, std::vector<Mesh*>>;
  return meshes;
}

}  // namespace

void Mesh::tell_meshes(const Nic& nic, const AsyncError& error) {
  std::vector<Mesh*> meshes;
  {
    std::lock_guard lock(meshes_lock);
    meshes = meshes_of_nics()[&nic];
  }
  for (Mesh* mesh : meshes) mesh->on_async_error(error);
}

Mesh::Mesh(Nic& nic, int rank, int size, const MeshOptions& options, MeshClient& client)
    : nic_(nic), nic_counters_(nic.counters()), rank_(rank), options_(options), client_(client),
      receives_per_peer_(options.receives_per_peer + (options.flow_control ? 4 : 0)),
      header_bytes_(options.flow_control ? sizeof(MeshFrameHeader) : 0),
      slot_bytes_(round_up(header_bytes_ + options.message_bytes, 64)),
      copied_registered_limit_(options.flow_control ? 0 : std::min(kCopiedRegisteredSend, options.message_bytes) + 1),
      service_{{}, {options.service.begin(), options.service.end()}}, peers_(std::size_t(size)) {}

Result Mesh::open(Nic& nic, int rank, int size, const MeshOptions& options, MeshClient& client,
                  std::unique_ptr<Mesh>& out) {
  VIP_NIC_ATTRIBUTES attributes{};
  nic.query(attributes);
  // Requests name the service and the requester's rank in one discriminator.
  const bool service_fits = options.service.size() + sizeof(std::uint32_t) <= attributes.MaxDiscriminatorLen;
  if (size < 1 || rank < 0 || rank >= size || options.service.empty() || !service_fits ||
      options.message_bytes == 0 || options.receives_per_peer == 0 || options.send_descriptors == 0 ||
      options.bounce_buffers == 0 || options.message_bytes > (1u << 30))
    return Result::invalid_parameter;
  std::unique_ptr<Mesh> mesh(new Mesh(nic, rank, size, options, client));
  if (const Result r = mesh->start(); r != Result::success) return r;
  out = std::move(mesh);
  return Result::success;
}

Result Mesh::start() {
  if (const Result r = nic_.create_ptag(ptag_); r != Result::success) return r;
  registrations_ =
      std::make_unique<RegistrationCache>(nic_, ptag_, options_.registration_entries, options_.registration_bytes);
  {
    std::lock_guard lock(meshes_lock);
    meshes_of_nics()[&nic_].push_back(this);
  }
  nic_.set_error_handler([nic = &nic_](const AsyncError& e) { tell_meshes(*nic, e); });
  // Send descriptors, then bounce buffers. Only the descriptors are cleared:
  // a buffer's pages are touched when it is first used.
  const std::size_t descriptor_bytes = options_.send_descriptors * kDescriptorBytes;
  const std::size_t bytes = round_up(descriptor_bytes + options_.bounce_buffers * slot_bytes_, 4096);
  arena_.reset(allocate_pages(bytes));
  if (!arena_) return Result::error_resource;
  std::memset(arena_.get(), 0, descriptor_bytes);
  if (const Result r = nic_.register_memory(arena_.get(), bytes, MemAttributes{ptag_, false, false}, arena_handle_);
      r != Result::success)
    return r;
  send_slots_.resize(options_.send_descriptors);
  for (std::uint32_t i = options_.send_descriptors; i-- > 0;) free_send_descriptors_.push_back(i);
  for (std::uint32_t i = options_.bounce_buffers; i-- > 0;) free_bounces_.push_back(i);
  return Result::success;
}

Mesh::~Mesh() {
  bool last = false;
  {
    std::lock_guard lock(meshes_lock);
    auto it = meshes_of_nics().find(&nic_);
    if (it != meshes_of_nics().end()) {
      std::erase(it->second, this);
      if (it->second.empty()) {
        meshes_of_nics().erase(it);
        last = true;
      }
    }
  }
  if (last) nic_.set_error_handler(nullptr);
  for (auto& p : peers_) {
    if (!p || !p->vi) continue;
    if (p->vi->state() != ViState::idle) p->vi->disconnect();
    VIP_DESCRIPTOR* done;
    while (p->vi->send_done(done) == Result::success) {
    }
    while (p->vi->recv_done(done) == Result::success) {
    }
    nic_.destroy_vi(p->vi);
    if (p->receive_handle) nic_.deregister_memory(p->receive_block.get(), p->receive_handle);
  }
  registrations_.reset();
  if (arena_handle_) nic_.deregister_memory(arena_.get(), arena_handle_);
  if (ptag_) nic_.destroy_ptag(ptag_);
}

bool Mesh::reachable(int rank) const {
  if (rank < 0 || rank >= size() || rank == rank_) return false;
  const Peer* p = peers_[std::size_t(rank)].get();
  return !p || (!p->failed && !p->closed);
}

bool Mesh::connected(int rank) const {
  const Peer* p = rank >= 0 && rank < size() ? peers_[std::size_t(rank)].get() : nullptr;
  return p && p->connected && !p->failed && !p->closed;
}

void Mesh::connect(int rank) {
  if (reachable(rank)) peer(rank);
}

Mesh::Peer& Mesh::peer(int rank) {
  if (Peer* p = peers_[std::size_t(rank)].get()) return *p;
  Peer* p = add_peer(rank);
  if (p->failed) return *p;
  NetAddress local{{}, requester_discriminator(service_.discriminator, rank_)};
  NetAddress remote = service_;
  Result r = nic_.resolve("rank" + std::to_string(rank), 0, remote.host);
  if (r == Result::success) r = p->vi->connect_request_start(local, remote, options_.connect_timeout_ms);
  if (r != Result::success)
    fail_peer(*p, std::string("requesting a connection: ") + describe(r));
  else
    ++counters_.connects;
  return *p;
}

// A VI for the peer with its receives posted (so that nothing the peer sends
// once connected finds none), on its way to being connected. A peer that
// cannot have one is failed.
Mesh::Peer* Mesh::add_peer(int rank) {
  auto& slot = peers_[std::size_t(rank)];
  slot = std::make_unique<Peer>(rank, receives_per_peer_, options_.send_descriptors);
  Peer& p = *slot;
  ViAttributes attrs;
  attrs.reliability = options_.reliability;
  attrs.ptag = ptag_;
  attrs.rdma_read = options_.rdma_read;
  attrs.rdma_write = options_.rdma_write;
  if (const Result r = nic_.create_vi(attrs, nullptr, nullptr, p.vi); r != Result::success) {
    p.vi = nullptr;
    fail_peer(p, std::string("creating a VI: ") + describe(r));
    return &p;
  }
  p.vi->user_handle = reinterpret_cast<void*>(std::intptr_t(rank));
  impl(*p.vi).set_in_place(options_.consume_in_place);

  const std::size_t descriptor_bytes = receives_per_peer_ * kDescriptorBytes;
  const std::size_t bytes = round_up(descriptor_bytes + receives_per_peer_ * slot_bytes_, 4096);
  p.receive_block.reset(allocate_pages(bytes));
  if (!p.receive_block) {
    fail_peer(p, "out of memory for its receive buffers");
    return &p;
  }
  std::memset(p.receive_block.get(), 0, descriptor_bytes);
  if (const Result r =
          nic_.register_memory(p.receive_block.get(), bytes, MemAttributes{ptag_, false, false}, p.receive_handle);
      r != Result::success) {
    p.receive_handle = 0;
    fail_peer(p, std::string("registering its receive buffers: ") + describe(r));
    return &p;
  }
  p.send_credits = options_.receives_per_peer;
  for (std::uint32_t s = 0; s < receives_per_peer_; ++s)
    if (!post_receive(p, s)) {
      fail_peer(p, "posting its receives");
      return &p;
    }
  p.connect_deadline_ns = now_ns() + std::uint64_t(options_.connect_timeout_ms) * 1000000u;
  connecting_.push_back(&p);
  return &p;
}

void Mesh::advance_connects() {
  for (std::size_t i = 0; i < connecting_.size();) {
    Peer& p = *connecting_[i];
    if (p.vi->state() != ViState::connect_pending) {
      // Refused by a lower rank that asks us at the same time: its request is on its way.
      if (now_ns() >= p.connect_deadline_ns)
        fail_peer(p, "it asked for a connection and never sent its request");  // leaves connecting_
      else
        ++i;
      continue;
    }
    const Result r = p.vi->connect_request_done();
    if (r == Result::success) {
      on_connected(p);  // leaves connecting_: the next one is at i now
      continue;
    }
    if (r == Result::not_done || (r == Result::reject && p.rank < rank_)) {
      ++i;
      continue;
    }
    fail_peer(p, std::string("connecting: ") + describe(r));
  }
}

void Mesh::accept_requests() {
  ConnRequest* request;
  while (nic_.connect_wait(service_, 0, request) == Result::success) accept(request);
}

void Mesh::accept(ConnRequest* request) {
  const int rank = requester_rank(request->remote.discriminator, service_.discriminator, size());
  Peer* p = rank < 0 || rank == rank_ ? nullptr : peers_[std::size_t(rank)].get();
  // Refused: what names no other rank of the job, a peer we are connected to
  // (a request it withdrew) or have lost, and a higher rank while our own
  // request to it is out: ours wins, and the peer accepts it.
  if (rank < 0 || rank == rank_ || (p && (p->connected || p->failed || p->closed)) ||
      (p && p->vi->state() == ViState::connect_pending && rank > rank_)) {
    nic_.connect_reject(request);
    return;
  }
  if (!p) {
    p = add_peer(rank);
    if (p->failed) {
      nic_.connect_reject(request);
      return;
    }
  } else if (p->vi->state() == ViState::connect_pending) {
    p->vi->disconnect();  // a lower rank's request wins: ours is withdrawn, its VI (and receives) serve this one
  }
  if (const Result r = nic_.connect_accept(request, *p->vi); r != Result::success) {
    fail_peer(*p, std::string("accepting its request: ") + describe(r));
    return;
  }
  ++counters_.accepts;
  on_connected(*p);
}

void Mesh::on_connected(Peer& p) {
  p.connected = true;
  connecting_.erase(std::find(connecting_.begin(), connecting_.end(), &p));
  connected_.push_back(&p);
  if (!p.backlog.empty()) backlogged_ = true;
}

// What was waiting for the peer is dropped (its RDMA reported failed) and
// the client hears of it from the next poll. A peer that finished in order
// is not failed by the breakage that follows.
void Mesh::fail_peer(Peer& p, const std::string& why) {
  if (p.failed || p.closed) return;
  p.failed = true;
  for (const Queued& q : p.backlog) {
    if (q.is_rdma)
      notices_.push_back(Notice{Notice::rdma_failed, p.rank, q.rdma.id, {}});
    else
      ++counters_.dropped;
  }
  p.backlog.clear();
  if (auto it = std::find(connecting_.begin(), connecting_.end(), &p); it != connecting_.end()) connecting_.erase(it);
  notices_.push_back(Notice{Notice::failed, p.rank, 0, why});
}

// Called from inside the NIC's progress: noted here, acted on by drain().
void Mesh::on_async_error(const AsyncError& error) {
  const int rank = error.vi ? int(reinterpret_cast<std::intptr_t>(error.vi->user_handle)) : -1;
  Peer* p = rank >= 0 && rank < size() ? peers_[std::size_t(rank)].get() : nullptr;
  if (!p || p->vi != error.vi) return;  // not one of ours
  if (error.orderly) {
    if (!p->closed && !p->failed) notices_.push_back(Notice{Notice::closed, rank, 0, {}});
    p->closed = true;
    return;
  }
  fail_peer(*p, std::string("connection lost (") + error_name(error.code) + "): " + error.cause);
}

void Mesh::deliver_notices() {
  // Taken out first: a client's handler may send (a failed send adds a
  // notice) or poll (which delivers what is new), and each is told once.
  std::vector<Notice> notices;
  notices.swap(notices_);
  for (const Notice& n : notices) {
    switch (n.kind) {
      case Notice::failed: client_.on_peer_failed(n.peer, n.why); break;
      case Notice::closed: client_.on_peer_closed(n.peer); break;
      case Notice::rdma_failed: client_.on_rdma_complete(n.id, false); break;
    }
  }
}

}  // namespace via
