// The shm provider: NICs on one machine, each a shared segment; connections
// set up through the segments' inboxes and slot states; sleeping on a futex
// in the segment header.
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "engine/clock.hpp"
#include "providers/shm/shm_link.hpp"
#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"

namespace via::shm {

namespace {

constexpr std::size_t kMaxHeldMessages = 4096;

std::vector<std::uint8_t> host_of(std::uint32_t nic) {
  return {std::uint8_t(nic), std::uint8_t(nic >> 8), std::uint8_t(nic >> 16), std::uint8_t(nic >> 24)};
}

std::optional<std::uint32_t> nic_of(const std::vector<std::uint8_t>& host) {
  if (host.size() != 4) return std::nullopt;
  return std::uint32_t(host[0]) | std::uint32_t(host[1]) << 8 | std::uint32_t(host[2]) << 16 |
         std::uint32_t(host[3]) << 24;
}

std::optional<std::uint32_t> parse_number(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + std::uint32_t(c - '0');
  }
  return v;
}

bool cma_disabled() { return !config::boolean("VIASTACK_SHM_CMA"); }

bool disc_equal(const std::uint8_t* a, std::uint8_t alen, const std::vector<std::uint8_t>& b) {
  return alen == b.size() && std::equal(b.begin(), b.end(), a);
}

class ShmProvider final : public Provider {
 public:
  ShmProvider(std::string job, std::uint32_t nic, Segment* self, int self_fd)
      : job_(std::move(job)), nic_(nic), self_(self), self_fd_(self_fd), self_mapping_(self, [](Segment*) {}),
        host_(host_of(nic)) {}

  ~ShmProvider() override {
    peers_.clear();
    self_->header.magic.store(0, std::memory_order_release);  // no peer maps a closing NIC anew
    unmap_segment(self_);
    close(self_fd_);
    remove_segment(job_, nic_);
  }

  const char* name() const override { return "shm"; }
  const std::vector<std::uint8_t>& host_address() const override { return host_; }
  std::uint32_t nic_number() const override { return nic_; }

  Result resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const override {
    std::optional<std::uint32_t> nic;
    char hostname[256] = {};
    gethostname(hostname, sizeof hostname - 1);
    if (name.substr(0, 4) == "rank")
      nic = parse_number(name.substr(4));
    else if (name == "localhost" || name == hostname)
      nic = index;
    else
      nic = parse_number(name);
    if (!nic) return Result::error_nameservice;
    host = host_of(*nic);
    return Result::success;
  }

  std::string describe_address(const std::vector<std::uint8_t>& host) const override {
    auto nic = nic_of(host);
    return nic ? "shm:" + std::to_string(*nic) : "shm:<malformed address>";
  }

  void fill_attributes(VIP_NIC_ATTRIBUTES& a) const override {
    std::snprintf(a.Name, sizeof a.Name, "viastack-shm:%u", nic_);
    a.HardwareVersion = 1;
    a.ProviderVersion = kVersion;
    a.MaxDiscriminatorLen = kMaxDiscriminator;
    a.NativeMTU = self_->header.rings.max_frame_payload();
  }

  RegionTable& regions() override { return self_->regions; }
  std::uint32_t max_vis() const override { return kMaxVi; }

  Result add_vi(ViImpl& vi) override {
    auto free_slot = std::find(slot_in_use_.begin(), slot_in_use_.end(), false);
    const auto i = std::uint32_t(free_slot - slot_in_use_.begin());
    if (free_slot == slot_in_use_.end()) {
      // Slots are backed by memory as they are first needed, in order.
      if (i == kMaxVi) return Result::error_resource;
      std::string error;
      if (!reserve_slot(self_fd_, self_->header.rings, i, error)) {
        VIA_LOG(error, "via", "shm: %s", error.c_str());
        return Result::error_resource;
      }
      slot_in_use_.push_back(false);
    }
    const Ring slot = self_->ring(i);
    ++slot->generation;
    reset_rings(slot);
    slot->state_word.store(slot_word(kSlotIdle, 0), std::memory_order_release);
    slot_in_use_[i] = true;
    vi.provider_slot = i;
    return Result::success;
  }

  void remove_vi(ViImpl& vi) override {
    pending_.erase(vi.provider_slot);
    std::atomic<std::uint64_t>& word = self_->ring(vi.provider_slot)->state_word;
    word.store(slot_word_after(word.load(std::memory_order_relaxed), kSlotFree), std::memory_order_release);
    slot_in_use_[vi.provider_slot] = false;
  }

  void publish_vi_attributes(ViImpl& vi) override {
    ViSlot& slot = *self_->ring(vi.provider_slot).slot;
    slot.ptag = vi.attributes().ptag;
    slot.rdma_write = vi.attributes().rdma_write;
    slot.rdma_read = vi.attributes().rdma_read;
  }

  void reset_vi(ViImpl& vi) override {
    pending_.erase(vi.provider_slot);
    const Ring slot = self_->ring(vi.provider_slot);
    reset_rings(slot);
    slot->state_word.store(slot_word_after(slot->state_word.load(std::memory_order_relaxed), kSlotIdle),
                           std::memory_order_release);
  }

  // ---- connection set-up ----

  Result connect(ViImpl& vi, const NetAddress& local, const NetAddress& remote, ConnectMode mode) override {
    auto remote_nic = nic_of(remote.host);
    if (!remote_nic || remote.discriminator.size() > kMaxDiscriminator ||
        local.discriminator.size() > kMaxDiscriminator || (!local.host.empty() && local.host != host_))
      return Result::invalid_parameter;
    // Nobody may write into this slot before the request is out: clear what a
    // former peer left (a late close, late frames) for the new connection.
    reset_rings(self_->ring(vi.provider_slot));
    Pending p{mode, local, remote, *remote_nic, ++last_request_, request_message(vi, mode, local, remote)};
    p.message.request = p.request;
    // The slot names the request it waits for, so the other side can tell a
    // live request from one that was withdrawn (or from an earlier life of the slot).
    self_->ring(vi.provider_slot)->state_word.store(slot_word(kSlotPending, p.request), std::memory_order_release);
    send_request(pending_[vi.provider_slot] = p);
    return Result::success;
  }

  Result poll_connect(ViImpl& vi) override {
    if (vi.state() == ViState::connected) return Result::success;
    auto it = pending_.find(vi.provider_slot);
    if (it == pending_.end()) return Result::invalid_state;
    Pending& p = it->second;
    return p.mode == ConnectMode::client ? poll_client(vi, p) : poll_peer(vi, p);
  }

  bool cancel_connect(ViImpl& vi) override {
    auto it = pending_.find(vi.provider_slot);
    if (it == pending_.end()) return vi.state() != ViState::connected;
    if (it->second.mode == ConnectMode::client) {
      std::uint64_t expected = slot_word(kSlotPending, it->second.request);
      if (!self_->ring(vi.provider_slot)->state_word.compare_exchange_strong(
              expected, slot_word(kSlotIdle, 0), std::memory_order_acq_rel) &&
          slot_state(expected) == kSlotConnected)
        return false;  // accepted just now: let poll_connect finish the job
    }
    pending_.erase(it);
    self_->ring(vi.provider_slot)->state_word.store(slot_word(kSlotIdle, 0), std::memory_order_release);
    return true;
  }

  std::unique_ptr<ConnRequestImpl> take_request(const NetAddress& local) override {
    if (!local.host.empty() && local.host != host_) return nullptr;
    for (auto it = held_connects_.begin(); it != held_connects_.end(); ++it) {
      if (!disc_equal(it->target_disc, it->target_disc_len, local.discriminator)) continue;
      auto request = std::make_unique<ConnRequestImpl>();
      request->local = NetAddress{host_, local.discriminator};
      request->remote = NetAddress{host_of(it->from_nic),
                                   std::vector<std::uint8_t>(it->local_disc, it->local_disc + it->local_disc_len)};
      request->remote_attrs = attributes_of(*it);
      request->provider_cookie = ++last_cookie_;
      accepted_[last_cookie_] = *it;
      held_connects_.erase(it);
      return request;
    }
    return nullptr;
  }

  Result accept(const ConnRequestImpl& request, ViImpl& vi) override {
    auto it = accepted_.find(request.provider_cookie);
    if (it == accepted_.end()) return Result::invalid_parameter;
    ControlMessage m = it->second;
    accepted_.erase(it);
    std::shared_ptr<Segment> peer = peer_segment(m.from_nic);
    if (!peer || m.from_slot >= kMaxVi) return Result::no_match;
    ViSlot& client = *peer->ring(m.from_slot).slot;
    if (client.generation != m.from_generation) return Result::timeout;
    const Ring mine = self_->ring(vi.provider_slot);
    reset_rings(mine);
    mine->state_word.store(slot_word(kSlotConnected, 0), std::memory_order_release);
    // Tell the client who we are, then flip its slot; it may have given up meanwhile.
    client.peer_nic = nic_;
    client.peer_slot = vi.provider_slot;
    client.peer_reliability = vi.attributes().reliability;
    client.peer_rdma_write = vi.attributes().rdma_write;
    client.peer_rdma_read = vi.attributes().rdma_read;
    client.peer_max_transfer = vi.attributes().max_transfer;
    std::uint64_t expected = slot_word(kSlotPending, m.request);
    if (!client.state_word.compare_exchange_strong(expected, slot_word(kSlotConnected, m.request),
                                                   std::memory_order_acq_rel)) {
      mine->state_word.store(slot_word(kSlotIdle, 0), std::memory_order_release);
      return Result::timeout;
    }
    vi.attach(make_link(mine, peer, m.from_slot), attributes_of(m));
    wake(*peer);
    return Result::success;
  }

  void reject(const ConnRequestImpl& request) override {
    auto it = accepted_.find(request.provider_cookie);
    if (it == accepted_.end()) return;
    ControlMessage m = it->second;
    accepted_.erase(it);
    std::shared_ptr<Segment> peer = peer_segment(m.from_nic);
    if (!peer || m.from_slot >= kMaxVi) return;
    std::uint64_t expected = slot_word(kSlotPending, m.request);
    peer->ring(m.from_slot)->state_word.compare_exchange_strong(expected, slot_word(kSlotRejected, m.request),
                                                                std::memory_order_acq_rel);
    wake(*peer);
  }

  void progress_control() override {
    drain_inbox();
    // Requests that found the peer's inbox full (or the peer not there yet)
    // are retried from here, whichever VI the program waits on: a rank that
    // waits for one peer must still get its requests to the others out.
    const std::uint64_t now = now_ns();
    for (auto& [slot, p] : pending_)
      if (!p.sent && now >= p.next_attempt_ns) send_request(p, now);
  }

  void drain_inbox() {
    for (;;) {
      InboxEntry& e = self_->inbox[inbox_read_ % kInboxEntries];
      if (e.seq.load(std::memory_order_acquire) != inbox_read_ + 1) return;
      ControlMessage m = e.message;
      e.seq.store(inbox_read_ + kInboxEntries, std::memory_order_release);
      ++inbox_read_;
      if (m.local_disc_len > kMaxDiscriminator || m.target_disc_len > kMaxDiscriminator) continue;
      auto& held = m.type == kControlConnect ? held_connects_ : held_peers_;
      if (m.type != kControlConnect && m.type != kControlPeer) continue;
      if (held.size() >= kMaxHeldMessages) held.erase(held.begin());
      held.push_back(m);
    }
  }

  // ---- sleeping ----

  std::uint32_t arm_sleep() override {
    std::uint32_t token = self_->header.doorbell.load(std::memory_order_acquire);
    self_->header.sleeping.store(1, std::memory_order_relaxed);
    fence_before_sleep();
    return token;
  }

  void sleep(std::uint32_t token, std::chrono::nanoseconds max) override {
    // Peers that leave their fences to our membarrier may go unseen if it
    // failed: wake up often enough to look.
    if (sleeper_fences_failed()) max = std::min<std::chrono::nanoseconds>(max, std::chrono::milliseconds(1));
    timespec ts{time_t(max.count() / 1000000000), long(max.count() % 1000000000)};
    syscall(SYS_futex, &self_->header.doorbell, FUTEX_WAIT, token, &ts, nullptr, 0);
  }

  void disarm_sleep() override { self_->header.sleeping.store(0, std::memory_order_relaxed); }
  bool rang_since(std::uint32_t token) override {
    return self_->header.doorbell.load(std::memory_order_acquire) != token;
  }

  // As a peer rings: the doorbell moves past the sleeper's token.
  void interrupt_sleep() override {
    self_->header.doorbell.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, &self_->header.doorbell, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }

 private:
  struct Pending {
    ConnectMode mode;
    NetAddress local, remote;
    std::uint32_t remote_nic;
    std::uint64_t request;
    ControlMessage message;  // what goes into the remote NIC's inbox
    bool sent = false;
    // The mapping the request went into. Its owner may accept, send what it
    // had and exit (removing its file) before we look again: the outcome is
    // read through this mapping, not through the name.
    std::shared_ptr<Segment> remote_segment{};
    // Back-off between attempts to reach an inbox that is full or not there yet.
    std::uint64_t next_attempt_ns = 0;
    std::uint64_t backoff_ns = kFirstRetryNs;
  };
  static constexpr std::uint64_t kFirstRetryNs = 50'000;
  static constexpr std::uint64_t kMaxRetryNs = 10'000'000;

  static ViAttributes attributes_of(const ControlMessage& m) {
    return ViAttributes{m.reliability, m.max_transfer, 0, m.rdma_write != 0, m.rdma_read != 0};
  }

  // The mapping of a peer NIC's segment. A cached one is used while it is still
  // the file behind the name (the NIC may have been closed and opened again);
  // links keep their own reference, so dropping it here never unmaps memory a
  // link still uses.
  std::shared_ptr<Segment> peer_segment(std::uint32_t nic) {
    if (nic == nic_) return self_mapping_;
    const std::uint64_t inode = segment_inode(job_, nic);
    auto it = peers_.find(nic);
    if (it != peers_.end()) {
      const SegmentHeader& h = it->second.segment->header;
      if (inode != 0 && inode == it->second.inode && process_alive(h.owner_pid, h.owner_start_time))
        return it->second.segment;
      peers_.erase(it);
    }
    if (inode == 0) return nullptr;
    std::uint64_t opened_inode = 0;
    Segment* s = open_segment(job_, nic, opened_inode);
    if (!s) return nullptr;
    std::shared_ptr<Segment> mapping(s, unmap_segment);
    peers_[nic] = PeerMapping{mapping, opened_inode};
    cma_.erase(nic);  // a new incarnation: probe again
    return mapping;
  }

  ControlMessage request_message(ViImpl& vi, ConnectMode mode, const NetAddress& local,
                                 const NetAddress& remote) const {
    ControlMessage m{};
    m.type = mode == ConnectMode::client ? kControlConnect : kControlPeer;
    m.local_disc_len = std::uint8_t(local.discriminator.size());
    m.target_disc_len = std::uint8_t(remote.discriminator.size());
    std::copy(local.discriminator.begin(), local.discriminator.end(), m.local_disc);
    std::copy(remote.discriminator.begin(), remote.discriminator.end(), m.target_disc);
    m.reliability = vi.attributes().reliability;
    m.rdma_write = vi.attributes().rdma_write;
    m.rdma_read = vi.attributes().rdma_read;
    m.max_transfer = vi.attributes().max_transfer;
    m.from_nic = nic_;
    m.from_slot = vi.provider_slot;
    m.from_generation = self_->ring(vi.provider_slot)->generation;
    return m;
  }

  // Posts the connect or peer request into the remote NIC's inbox if the NIC
  // exists and its inbox has room; else schedules the next attempt.
  void send_request(Pending& p, std::uint64_t now = now_ns()) {
    if (std::shared_ptr<Segment> peer = peer_segment(p.remote_nic); peer && post_to_inbox(*peer, p.message)) {
      p.sent = true;
      p.remote_segment = peer;
      wake(*peer);
      return;
    }
    p.next_attempt_ns = now + p.backoff_ns;
    p.backoff_ns = std::min(p.backoff_ns * 2, kMaxRetryNs);
  }

  // Claims an entry of a peer's inbox; false when it is full. The peer's
  // counters are not trusted to be sane: the claim gives up after a bounded
  // number of tries instead of spinning on a corrupt inbox.
  static bool post_to_inbox(Segment& peer, const ControlMessage& m) {
    std::atomic<std::uint64_t>& write = peer.header.inbox_write;
    std::uint64_t pos = write.load(std::memory_order_relaxed);
    for (int attempt = 0; attempt < 64; ++attempt) {
      InboxEntry& e = peer.inbox[pos % kInboxEntries];
      std::uint64_t seq = e.seq.load(std::memory_order_acquire);
      if (seq == pos) {
        if (write.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          e.message = m;
          e.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (seq < pos) {
        return false;  // full
      } else {
        pos = write.load(std::memory_order_relaxed);
      }
    }
    return false;
  }

  Result poll_client(ViImpl& vi, Pending& p) {
    const Ring ring = self_->ring(vi.provider_slot);
    ViSlot& mine = *ring.slot;
    const std::uint64_t word = mine.state_word.load(std::memory_order_acquire);
    if ((word >> 8) != p.request) return Result::not_done;
    switch (slot_state(word)) {
      case kSlotConnected: {
        // Only the NIC whose inbox took the request can have accepted it.
        const std::shared_ptr<Segment>& peer = p.remote_segment;
        if (!peer || mine.peer_nic != p.remote_nic || mine.peer_slot >= kMaxVi) {
          pending_.erase(vi.provider_slot);
          mine.state_word.store(slot_word(kSlotIdle, 0), std::memory_order_release);
          return Result::no_match;
        }
        ViAttributes remote{mine.peer_reliability, mine.peer_max_transfer, 0, mine.peer_rdma_write != 0,
                            mine.peer_rdma_read != 0};
        vi.attach(make_link(ring, peer, mine.peer_slot), remote);
        pending_.erase(vi.provider_slot);
        return Result::success;
      }
      case kSlotRejected:
        pending_.erase(vi.provider_slot);
        mine.state_word.store(slot_word(kSlotIdle, 0), std::memory_order_release);
        return Result::reject;
      default:
        return Result::not_done;
    }
  }

  Result poll_peer(ViImpl& vi, Pending& p) {
    // The peer learns of the match only from our request: match once it is out.
    if (!p.sent) return Result::not_done;
    for (auto it = held_peers_.begin(); it != held_peers_.end(); ++it) {
      const ControlMessage& m = *it;
      if (m.from_nic != p.remote_nic || !disc_equal(m.local_disc, m.local_disc_len, p.remote.discriminator) ||
          !disc_equal(m.target_disc, m.target_disc_len, p.local.discriminator))
        continue;
      ControlMessage matched = m;
      held_peers_.erase(it);
      // The peer may have matched ours, sent and exited: then the mapping
      // our request went into is the one its slot lives in.
      std::shared_ptr<Segment> peer = peer_segment(matched.from_nic);
      if (!peer) peer = p.remote_segment;
      if (!peer || matched.from_slot >= kMaxVi) {
        pending_.erase(vi.provider_slot);
        return Result::no_match;
      }
      if (!request_still_open(*peer, matched)) return poll_peer(vi, p);  // withdrawn: look for a newer one
      if (matched.reliability != vi.attributes().reliability) {
        pending_.erase(vi.provider_slot);
        return Result::invalid_reliability_level;
      }
      const Ring mine = self_->ring(vi.provider_slot);
      mine->state_word.store(slot_word(kSlotConnected, p.request), std::memory_order_release);
      vi.attach(make_link(mine, peer, matched.from_slot), attributes_of(matched));
      pending_.erase(vi.provider_slot);
      return Result::success;
    }
    return Result::not_done;
  }

  // A peer-to-peer request is still open while the requesting slot, in the
  // same life, still names it: pending, or connected by matching ours (and
  // maybe closed since).
  static bool request_still_open(Segment& peer, const ControlMessage& m) {
    const ViSlot& slot = *peer.ring(m.from_slot).slot;
    const std::uint64_t word = slot.state_word.load(std::memory_order_acquire);
    const SlotState state = slot_state(word);
    return slot.generation == m.from_generation && (word >> 8) == m.request &&
           (state == kSlotPending || state == kSlotConnected || state == kSlotClosed);
  }

  std::unique_ptr<Link> make_link(const Ring& mine, const std::shared_ptr<Segment>& peer, std::uint32_t peer_slot) {
    auto cma = cma_.find(peer->header.nic_id);
    if (cma == cma_.end()) cma = cma_.emplace(peer->header.nic_id, !cma_disabled() && cma_works(*peer)).first;
    return std::make_unique<ShmLink>(*self_, mine, peer, peer->ring(peer_slot), cma->second);
  }

  struct PeerMapping {
    std::shared_ptr<Segment> segment;
    std::uint64_t inode;
  };

  const std::string job_;
  const std::uint32_t nic_;
  Segment* const self_;
  const int self_fd_;  // kept to reserve VI slots' space as they are first used
  std::vector<bool> slot_in_use_;  // one entry per slot reserved so far
  const std::shared_ptr<Segment> self_mapping_;  // for links to VIs of this same NIC; owns nothing
  const std::vector<std::uint8_t> host_;
  std::map<std::uint32_t, PeerMapping> peers_;
  std::map<std::uint32_t, bool> cma_;
  std::map<std::uint32_t, Pending> pending_;  // by VI slot
  std::vector<ControlMessage> held_connects_, held_peers_;
  std::map<std::uint64_t, ControlMessage> accepted_;  // requests handed out by take_request
  std::uint64_t inbox_read_ = 0;
  std::uint64_t last_request_ = 0;
  std::uint64_t last_cookie_ = 0;
};

}  // namespace

Result open_shm_provider(std::string_view device, Bootstrap& job, std::unique_ptr<Provider>& out) {
  std::uint32_t nic = std::uint32_t(job.rank());
  if (auto colon = device.find(':'); colon != std::string_view::npos) {
    auto n = parse_number(device.substr(colon + 1));
    if (!n) {
      VIA_LOG(error, "via", "bad device name '%.*s' (expected shm:N)", int(device.size()), device.data());
      return Result::invalid_parameter;
    }
    nic = *n;
  }
  // Peers in sibling processes pull and push data with process_vm_readv/writev;
  // allow it where the Yama LSM would otherwise restrict ptrace to descendants.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::string error;
  int fd = -1;
  Segment* self = create_segment(job.job_id(), nic, RingGeometry::for_local_ranks(job.local_size()), fd, error);
  if (!self) {
    VIA_LOG(error, "via", "shm: %s", error.c_str());
    return Result::error_resource;
  }
  out = std::make_unique<ShmProvider>(job.job_id(), nic, self, fd);
  return Result::success;
}

}  // namespace via::shm
