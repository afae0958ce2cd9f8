// The NIC: protection tags, memory registration, object lifetimes, connection
// acceptance, and the progress/wait loop every blocking call goes through.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "engine/clock.hpp"
#include "engine/engine.hpp"
#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"
#include "engine/faults.hpp"
#include "providers/provider.hpp"
#include "trace/frame_trace.hpp"

namespace via {

namespace {

constexpr std::size_t kQueueDepth = 1024;
constexpr std::size_t kMaxCqEntries = 1u << 20;

// A waiter first spins, then keeps polling but yields the core between polls
// (so that ranks sharing a core with it can run), then sleeps in the kernel.
// The yielding phase matters on a machine with as many ranks as cores: once
// both ends of a ping-pong slept, each wake-up takes longer than a short spin,
// and without it they would stay in that slow regime.
std::uint64_t spin_ns() {
  static const std::uint64_t value =
      wait_spin_ns(config::integer_if_set("VIASTACK_SPIN_US"), job_ranks_on_this_host(), job_cpus_on_this_host());
  return value;
}

// Without a handler of the program's own, errors are logged by their VIPL
// name; a peer's orderly disconnect is not an error worth a line.
void default_error_handler(const AsyncError& e) {
  if (e.orderly) return;
  char descriptor[48] = "";
  if (e.descriptor) std::snprintf(descriptor, sizeof descriptor, " (descriptor %p)", static_cast<void*>(e.descriptor));
  VIA_LOG(error, "via", "asynchronous VIA error %s: %s%s", error_name(e.code), e.cause.c_str(), descriptor);
}

// A wait phase's length in ns: configured_us (its variable) when set; else
// outnumbered_us where the host's ranks outnumber the job's CPUs, else the
// variable's declared default.
std::uint64_t phase_ns(const char* variable, std::optional<std::int64_t> configured_us, bool outnumbered,
                       std::uint64_t outnumbered_us) {
  if (configured_us) return std::uint64_t(*configured_us) * 1000;
  if (outnumbered) return outnumbered_us * 1000;
  return std::strtoull(std::string(config::find(variable)->default_value).c_str(), nullptr, 10) * 1000;
}

}  // namespace

std::uint64_t wait_spin_ns(std::optional<std::int64_t> configured_us, int local_ranks, int job_cpus) {
  // Outnumbered, a spinning waiter would take the core its peer needs.
  return phase_ns("VIASTACK_SPIN_US", configured_us, local_ranks > job_cpus, 0);
}

std::uint64_t wait_yield_ns(std::optional<std::int64_t> configured_us, int local_ranks, int job_cpus) {
  return phase_ns("VIASTACK_YIELD_US", configured_us, local_ranks > job_cpus, kOversubscribedYieldUs);
}

std::uint64_t read_takeover_wait_ns(std::optional<std::int64_t> configured_us, int local_ranks, int job_cpus) {
  return phase_ns("VIASTACK_READ_TAKEOVER_US", configured_us, local_ranks > job_cpus, kOversubscribedReadTakeoverUs);
}

std::uint64_t wait_yield_longest_ns(std::optional<std::int64_t> configured_us) {
  return phase_ns("VIASTACK_YIELD_US", configured_us, false, 0);
}

std::chrono::nanoseconds wait_yield_time() {
  static const std::uint64_t value =
      wait_yield_ns(config::integer_if_set("VIASTACK_YIELD_US"), job_ranks_on_this_host(), job_cpus_on_this_host());
  return std::chrono::nanoseconds(value);
}

int job_cpus_on_this_host() {
  if (const auto cpus = config::integer_if_set("VIASTACK_NODE_CPUS")) return int(*cpus);
  const long online = std::max(1l, sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t mine;
  // A process bound to one CPU was most likely bound by its launcher, one
  // rank a CPU: its mask says nothing of the job's share, the host's count does.
  if (sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_COUNT(&mine) > 1)
    return int(std::min<long>(CPU_COUNT(&mine), online));
  return int(online);
}

int job_ranks_on_this_host() {
  std::string error;
  const auto job = job_bootstrap(error);
  return job ? job->local_size() : 1;
}

bool job_outnumbers_cpus_on_this_host() { return job_ranks_on_this_host() > job_cpus_on_this_host(); }

const char* describe(Result r) {
  switch (r) {
    case Result::success: return "success";
    case Result::not_done: return "not done";
    case Result::invalid_parameter: return "invalid parameter";
    case Result::error_resource: return "out of resources";
    case Result::timeout: return "timed out";
    case Result::reject: return "connection rejected";
    case Result::invalid_reliability_level: return "invalid reliability level";
    case Result::invalid_mtu: return "invalid transfer size";
    case Result::invalid_qos: return "invalid quality of service";
    case Result::invalid_ptag: return "invalid protection tag";
    case Result::invalid_rdmaread: return "RDMA read not supported or not enabled";
    case Result::descriptor_error: return "descriptor error";
    case Result::invalid_state: return "invalid VI state";
    case Result::error_nameservice: return "name service error";
    case Result::no_match: return "no matching connection";
  }
  return "unknown result";
}

// The public Nic's methods are the engine's: each reaches the state of the
// NicImpl it is through `self` (no call in between).

Result Nic::open(std::string_view device, std::unique_ptr<Nic>& out) {
  auto nic = std::make_unique<NicImpl>();
  // The first configuration read: a bad VIASTACK_* value stops the program
  // here, before any provider resource exists.
  if (const auto faults = config::text_if_set("VIASTACK_FAULTS")) {
    auto plan = std::make_unique<FaultPlan>();
    std::string error;
    if (!parse_fault_plan(*faults, *plan, error)) return Result::invalid_parameter;  // checked by the table
    if (plan->any()) nic->fault_plan_ = std::move(plan);
  }
  if (!trace::start()) return Result::invalid_parameter;  // the log names the file
  Result r = open_provider(device, nic->provider_);
  if (r != Result::success) return r;
  nic->regions_ = &nic->provider_->regions();
  nic->error_handler_ = default_error_handler;
  out = std::move(nic);
  return Result::success;
}

Nic::~Nic() = default;

namespace {

// A NIC's yield phase (yield_phase.hpp), its bounds read once by the process.
YieldPhase new_yield_phase() {
  static const std::uint64_t longest = wait_yield_longest_ns(config::integer_if_set("VIASTACK_YIELD_US"));
  return YieldPhase(std::uint64_t(wait_yield_time().count()), longest);
}

}  // namespace

NicImpl::NicImpl() : yield_phase_(new_yield_phase()) {}

NicImpl::~NicImpl() {
  // VIs first: they own links into the provider.
  for (auto& vi : vis_) {
    vi->close_link();
    provider_->remove_vi(*vi);
  }
  vis_.clear();
  trace::flush();
}

bool NicImpl::has_unreliable_vi() const {
  return std::any_of(vis_.begin(), vis_.end(),
                     [](const auto& vi) { return vi->attributes().reliability == VIP_SERVICE_UNRELIABLE; });
}

void Nic::query(VIP_NIC_ATTRIBUTES& out) const {
  const Provider& provider = *impl(*this).provider_;
  out = VIP_NIC_ATTRIBUTES{};
  provider.fill_attributes(out);
  // What the engine gives on every provider.
  out.NicAddressLen = VIP_ULONG(provider.host_address().size());
  out.LocalNicAddress = provider.host_address().data();
  out.MaxRegisterBytes = ~0ul >> 1;
  out.MaxRegisterBlockBytes = ~0ul >> 1;
  out.MaxSegmentsPerDesc = 252;
  out.MaxTransferSize = 1ul << 30;
  out.ReliabilityLevelSupport = VIP_SERVICE_UNRELIABLE | VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
  out.RDMAReadSupport = VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
  out.ThreadSafe = VIP_FALSE;
  out.MaxRegisterRegions = RegionTable::kMaxRegions - 1;
  out.MaxVI = provider.max_vis();
  out.MaxDescriptorsPerQueue = kQueueDepth;
  out.MaxCQ = 1024;
  out.MaxCQEntries = kMaxCqEntries;
  out.MaxPtags = 1024;
}

const char* Nic::provider_name() const { return impl(*this).provider_->name(); }

const std::vector<std::uint8_t>& Nic::host_address() const { return impl(*this).provider_->host_address(); }

Result Nic::resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const {
  return impl(*this).provider_->resolve(name, index, host);
}

std::string Nic::describe_address(const std::vector<std::uint8_t>& host) const {
  return impl(*this).provider_->describe_address(host);
}

const NicCounters& Nic::counters() const { return impl(*this).counters_; }

void Nic::set_error_handler(std::function<void(const AsyncError&)> handler) {
  impl(*this).error_handler_ = std::move(handler);
}

// ---- protection tags ----

Result Nic::create_ptag(Ptag& out) {
  NicImpl& self = impl(*this);
  if (self.ptags_.size() >= 1024) return Result::error_resource;
  out = self.next_ptag_++;
  self.ptags_.push_back(out);
  return Result::success;
}

bool Nic::ptag_valid(Ptag ptag) const {
  const std::vector<Ptag>& ptags = impl(*this).ptags_;
  return std::find(ptags.begin(), ptags.end(), ptag) != ptags.end();
}

Result Nic::destroy_ptag(Ptag ptag) {
  NicImpl& self = impl(*this);
  auto it = std::find(self.ptags_.begin(), self.ptags_.end(), ptag);
  if (it == self.ptags_.end()) return Result::invalid_ptag;
  // A tag still used by a VI or a region cannot go.
  for (auto& vi : self.vis_)
    if (vi->attributes().ptag == ptag) return Result::invalid_state;
  const RegionTable& table = *self.regions_;
  for (std::uint32_t i = 1; i < RegionTable::kMaxRegions; ++i)
    if (table.entries[i].handle.load(std::memory_order_relaxed) != 0 && table.entries[i].ptag == ptag)
      return Result::invalid_state;
  self.ptags_.erase(it);
  return Result::success;
}

// ---- memory registration ----

Result Nic::register_memory(const void* addr, std::size_t len, const MemAttributes& attrs, MemHandle& out) {
  if (addr == nullptr || len == 0) return Result::invalid_parameter;
  if (std::uintptr_t(addr) + len < std::uintptr_t(addr)) return Result::invalid_parameter;
  if (!ptag_valid(attrs.ptag)) return Result::invalid_ptag;
  RegionTable& table = *impl(*this).regions_;
  for (std::uint32_t i = 1; i < RegionTable::kMaxRegions; ++i) {
    RegionEntry& e = table.entries[i];
    if (e.handle.load(std::memory_order_relaxed) != 0) continue;
    e.ptag = attrs.ptag;
    e.addr = std::uintptr_t(addr);
    e.len = len;
    e.rdma_write = attrs.rdma_write;
    e.rdma_read = attrs.rdma_read;
    std::uint32_t generation = (table.generation[i] + 1) & 0xFFFFu;
    if (generation == 0) generation = 1;
    table.generation[i] = generation;
    out = (generation << 16) | i;
    e.handle.store(out, std::memory_order_release);
    return Result::success;
  }
  return Result::error_resource;
}

Result Nic::deregister_memory(const void* addr, MemHandle handle) {
  RegionTable& table = *impl(*this).regions_;
  RegionEntry e;
  if (!table.lookup(handle, e) || e.addr != std::uintptr_t(addr)) return Result::invalid_parameter;
  table.entries[RegionTable::index_of(handle)].handle.store(0, std::memory_order_release);
  for (auto& vi : impl(*this).vis_) vi->forget_region(handle);
  return Result::success;
}

Result Nic::query_memory(const void* addr, MemHandle handle, MemAttributes& out) const {
  RegionEntry e;
  if (!impl(*this).regions_->lookup(handle, e) || e.addr != std::uintptr_t(addr)) return Result::invalid_parameter;
  out = MemAttributes{e.ptag, e.rdma_write != 0, e.rdma_read != 0};
  return Result::success;
}

Result Nic::set_memory_attributes(const void* addr, MemHandle handle, const MemAttributes& attrs) {
  RegionTable& table = *impl(*this).regions_;
  RegionEntry e;
  if (!table.lookup(handle, e) || e.addr != std::uintptr_t(addr)) return Result::invalid_parameter;
  if (!ptag_valid(attrs.ptag)) return Result::invalid_ptag;
  RegionEntry& live = table.entries[RegionTable::index_of(handle)];
  // An odd version takes the entry out of service while it changes, so a peer
  // checking it never passes on half an update.
  const std::uint32_t version = live.version.load(std::memory_order_relaxed);
  live.version.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  live.ptag = attrs.ptag;
  live.rdma_write = attrs.rdma_write;
  live.rdma_read = attrs.rdma_read;
  live.version.store(version + 2, std::memory_order_release);
  for (auto& vi : impl(*this).vis_) vi->forget_region(handle);
  return Result::success;
}

// ---- objects ----

Result Nic::create_cq(std::size_t entries, Cq*& out) {
  NicImpl& self = impl(*this);
  if (entries == 0 || entries > kMaxCqEntries) return Result::invalid_parameter;
  self.cqs_.push_back(std::make_unique<CqImpl>(self, entries));
  out = self.cqs_.back().get();
  return Result::success;
}

Result Nic::destroy_cq(Cq* cq) {
  NicImpl& self = impl(*this);
  auto it = std::find_if(self.cqs_.begin(), self.cqs_.end(), [&](auto& p) { return p.get() == cq; });
  if (it == self.cqs_.end()) return Result::invalid_parameter;
  for (auto& vi : self.vis_)
    if (vi->send_cq() == cq || vi->recv_cq() == cq) return Result::invalid_state;
  self.cqs_.erase(it);
  return Result::success;
}

Result Nic::check_vi_attributes(const ViAttributes& attrs) const {
  VIP_NIC_ATTRIBUTES nic_attrs;
  query(nic_attrs);
  const VIP_RELIABILITY_LEVEL level = attrs.reliability;
  if (level != VIP_SERVICE_UNRELIABLE && level != VIP_SERVICE_RELIABLE_DELIVERY &&
      level != VIP_SERVICE_RELIABLE_RECEPTION)
    return Result::invalid_reliability_level;
  if (!(nic_attrs.ReliabilityLevelSupport & level)) return Result::invalid_reliability_level;
  if (attrs.max_transfer > nic_attrs.MaxTransferSize) return Result::invalid_mtu;
  if (!ptag_valid(attrs.ptag)) return Result::invalid_ptag;
  if (attrs.rdma_read && !(nic_attrs.RDMAReadSupport & level)) return Result::invalid_rdmaread;
  return Result::success;
}

Result Nic::create_vi(const ViAttributes& attrs, Cq* send_cq, Cq* recv_cq, Vi*& out) {
  NicImpl& self = impl(*this);
  if (Result r = check_vi_attributes(attrs); r != Result::success) return r;
  for (Cq* cq : {send_cq, recv_cq})
    if (cq && &cq->nic() != this) return Result::invalid_parameter;
  VIP_NIC_ATTRIBUTES nic_attrs;
  query(nic_attrs);
  ViAttributes effective = attrs;
  if (effective.max_transfer == 0) effective.max_transfer = std::uint32_t(nic_attrs.MaxTransferSize);
  auto vi = std::make_unique<ViImpl>(self, effective, static_cast<CqImpl*>(send_cq), static_cast<CqImpl*>(recv_cq),
                                     kQueueDepth);
  Result r = self.provider_->add_vi(*vi);
  if (r != Result::success) return r;
  self.provider_->publish_vi_attributes(*vi);
  self.vis_.push_back(std::move(vi));
  out = self.vis_.back().get();
  return Result::success;
}

Result Nic::destroy_vi(Vi* vi) {
  NicImpl& self = impl(*this);
  auto it = std::find_if(self.vis_.begin(), self.vis_.end(), [&](auto& p) { return p.get() == vi; });
  if (it == self.vis_.end()) return Result::invalid_parameter;
  ViImpl& doomed = **it;
  if (doomed.state() != ViState::idle) return Result::invalid_state;
  if (!doomed.send_queue_empty() || !doomed.recv_queue_empty()) return Result::invalid_state;
  for (CqImpl* cq : {doomed.send_cq(), doomed.recv_cq()})
    if (cq) cq->forget(vi);
  self.provider_->remove_vi(doomed);
  self.vis_.erase(it);
  return Result::success;
}

// ---- server side of client/server connections ----

// A timeout of 0 looks once, without the spinning and sleeping of a wait: a
// program that accepts from its progress loop calls it on every poll.
Result Nic::connect_wait(const NetAddress& local, std::uint32_t timeout_ms, ConnRequest*& out) {
  NicImpl& self = impl(*this);
  std::unique_ptr<ConnRequestImpl> request;
  auto arrived = [&] {
    self.provider_->progress_control();
    request = self.provider_->take_request(local);
    return request != nullptr;
  };
  const Result r = timeout_ms == 0 ? (arrived() ? Result::success : Result::timeout) : wait(arrived, timeout_ms);
  if (r != Result::success) return r;
  request->nic = this;
  trace::request_event(trace::Event::request_arrived, self, *request);
  self.requests_.push_back(std::move(request));
  out = self.requests_.back().get();
  return Result::success;
}

Result Nic::connect_accept(ConnRequest* request, Vi& public_vi) {
  NicImpl& self = impl(*this);
  auto it = std::find_if(self.requests_.begin(), self.requests_.end(), [&](auto& p) { return p.get() == request; });
  ViImpl& vi = impl(public_vi);
  if (it == self.requests_.end() || &vi.nic() != &self) return Result::invalid_parameter;
  if (vi.state() != ViState::idle) return Result::invalid_state;
  if (vi.attributes().reliability != request->remote_attrs.reliability) return Result::invalid_reliability_level;
  Result r = self.provider_->accept(**it, vi);
  if (r == Result::success) trace::request_event(trace::Event::accepted, self, **it, &vi);
  self.requests_.erase(it);
  return r;
}

Result Nic::connect_reject(ConnRequest* request) {
  NicImpl& self = impl(*this);
  auto it = std::find_if(self.requests_.begin(), self.requests_.end(), [&](auto& p) { return p.get() == request; });
  if (it == self.requests_.end()) return Result::invalid_parameter;
  self.provider_->reject(**it);
  trace::request_event(trace::Event::rejected, self, **it);
  self.requests_.erase(it);
  return Result::success;
}

void NicImpl::report(const AsyncError& error) {
  if (error_handler_) error_handler_(error);
}

// ---- progress ----

void Nic::progress() { impl(*this).advance(); }

void Nic::yield_when_idle() {
  if (spin_ns() != 0) return;
  NicImpl& self = impl(*this);
  const std::uint64_t now = now_ns(), frames = self.counters_.frames_received;
  if (frames != self.idle_tests_frames_) {  // something came: the clock starts again
    self.idle_tests_frames_ = frames;
    self.idle_tests_since_ = now;
    return;
  }
  if (now - self.idle_tests_since_ < kIdleTestsBeforeYieldNs) return;
  // Under MPI_THREAD_MULTIPLE the caller holds the library's lock meanwhile;
  // a yield is short, and the lock is let go right after.
  sched_yield();
  ++self.counters_.yields;
}

// ViImpl's, here for the loop below, its one caller.
inline bool ViImpl::progress() {
  if (state_ != ViState::connected) return false;
  const FrameHeader* h;
  const std::byte* payload;
  if (!holding_ && link_->peek(h, payload)) return receive_and_transmit(h, payload);
  if (!faults_ && !transmit_waiting() && !withdrawable_reads_) return false;
  return receive_and_transmit(nullptr, nullptr);
}

bool NicImpl::advance() {
  bool moved = false;
  for (auto& vi : vis_)
    if (vi->has_link()) moved |= vi->progress();
  while (!deferred_.empty()) {
    std::vector<std::function<void()>> work;
    work.swap(deferred_);
    for (auto& w : work) w();
    moved = true;
  }
  // Programs that only ever poll (VipRecvDone in a loop) must still learn of dead peers.
  if ((++progress_calls_ & 0xFFFF) == 0) {
    slow_progress(true);
    moved = true;
  }
  return moved;
}

// Work that need not run on every poll: connection control traffic, and
// noticing peers that closed or died.
void NicImpl::slow_progress(bool check_peers) {
  provider_->progress_control();
  if (check_peers)
    for (std::size_t i = 0; i < vis_.size(); ++i) vis_[i]->check_link();
}

std::uint64_t NicImpl::next_takeover() const {
  std::uint64_t next = UINT64_MAX;
  for (const auto& vi : vis_) next = std::min(next, vi->next_takeover());
  return next;
}

// Nic::wait's loop.
Result Nic::wait_impl(const std::function<bool()>& done, std::uint32_t timeout_ms) {
  NicImpl& self = impl(*this);
  Provider& provider = *self.provider_;
  // Most waits end at the first look (the message was on its way): the
  // clock is read only for those that go on.
  self.advance();
  if (done()) return Result::success;
  const std::uint64_t start = now_ns();
  // However it ends, the wait's length is remembered for the next ones' yield phase.
  struct Remember {
    YieldPhase& phase;
    std::uint64_t start;
    ~Remember() { phase.waited(now_ns() - start); }
  } remember{self.yield_phase_, start};
  const std::uint64_t deadline =
      timeout_ms == kInfinite ? UINT64_MAX : start + std::uint64_t(timeout_ms) * 1000000ull;
  // Work found while waiting starts the spin and yield phases again (from
  // `phase`): a rank that waits while its peers keep asking things of it (a
  // target serving gets or RDMA reads) then answers at a poll's pace rather
  // than a wake-up's, and sleeps once they have been quiet that long.
  // Work is frames sent or received (not a message held in place for its
  // taker, nor the periodic look at peers, which report progress too).
  const NicCounters& counters = self.counters_;
  const std::uint64_t yield_ns = self.yield_phase_.length();
  auto work_done = [&] { return counters.frames_sent + counters.frames_received; };
  std::uint64_t work_seen = work_done();
  // Peers' liveness is looked at every kPeerCheck while the phases keep
  // starting again (not in a wait's first kPeerCheck: most waits are short,
  // and a look at /proc would be most of them), and at every slice of a
  // sleep. The time of the next look is the NIC's, not the wait's, so that
  // neither short waits (they sleep at their deadline) nor work found while
  // waiting put the look off.
  constexpr std::uint64_t kPeerCheck = 10'000'000;
  std::uint64_t& next_peer_check = self.next_peer_check_;
  const std::uint64_t first_peer_check = start + kPeerCheck;
  for (std::uint64_t phase = start;;) {
    std::uint64_t spin_until = phase + spin_ns();
    std::uint64_t yield_until = spin_until + yield_ns;
    // Spin, then yield between polls: progress only, checking the clock now and
    // then. While spinning, done() is asked only after a progress that moved
    // something, and every 16th time (another thread's progress, or the time,
    // may be what it waits for): a step that finds nothing is then as short as
    // a poll of the links, and a message is seen that much sooner.
    // Not spinning at all (ranks outnumber cores): yield from the first empty
    // look, not after the 254 polls before the clock is first read.
    bool yielding = spin_until == phase;
    for (unsigned i = 2;; ++i) {
      if ((self.advance() || yielding || (i & 15) == 0) && done()) return Result::success;
      if (yielding) {
        sched_yield();
        ++self.counters_.yields;
      }
      if (yielding || (i & 255) == 0) {
        const std::uint64_t now = now_ns();
        if (const std::uint64_t work = work_done(); work != work_seen) {
          work_seen = work;
          spin_until = now + spin_ns();
          yield_until = spin_until + yield_ns;
        }
        if (now >= next_peer_check && now >= first_peer_check) {
          next_peer_check = now + kPeerCheck;
          self.slow_progress(true);
          if (done()) return Result::success;
        }
        // Past the deadline too: the sleep's first step looks at everything
        // once more (connection control, peers' liveness when due) and then times out.
        if (now >= yield_until || now >= deadline) break;
        yielding = now >= spin_until;
        if ((i & 255) == 0) {
          self.slow_progress(false);
          if (done()) return Result::success;
        }
      }
    }
    // Sleep: announce it, check once more, then block until a doorbell or a time
    // slice ends. The slice is also how often peers' liveness is checked (on shm a
    // read of /proc per peer): it doubles while the wait goes on, so that hundreds
    // of idle processes on a few cores do not keep the machine busy checking. A
    // sleep within kPeerCheck of the NIC's last look does not look again (4 ranks
    // on 2 cores, 1 MiB collectives: a few sleeps a call, each of which read
    // /proc three times).
    constexpr std::uint64_t kFirstSlice = 10'000'000, kLongestSlice = 1'000'000'000;
    static_assert(kFirstSlice >= kPeerCheck);
    for (std::uint64_t slice = kFirstSlice;; slice = std::min(2 * slice, kLongestSlice)) {
      const std::uint64_t before = now_ns();
      const bool check_peers = before >= next_peer_check;
      if (check_peers) next_peer_check = before + slice;
      self.slow_progress(check_peers);
      progress();
      if (done()) return Result::success;
      std::uint64_t now = now_ns();
      if (now >= deadline) return Result::timeout;
      std::uint32_t token = provider.arm_sleep();
      progress();
      if (done()) {
        provider.disarm_sleep();
        return Result::success;
      }
      ++self.counters_.sleeps;
      // A read waiting on a silent target is taken back on time, not at the slice's end.
      const std::uint64_t takeover = self.next_takeover();
      const std::uint64_t until_takeover = takeover > now ? takeover - now : 0;
      const std::uint64_t length = std::min({slice, deadline - now, until_takeover});
      provider.sleep(token, std::chrono::nanoseconds(length));
      const bool slept_whole_slice = length != until_takeover && now_ns() - now >= length;
      self.advance();
      // A sleep that ran its whole slice and ends with its wait over, though
      // nothing rang: its wake-up was lost. Judged before the sleep is
      // disarmed, while a peer that acts still rings.
      if (slept_whole_slice && done()) {
        if (!provider.rang_since(token)) ++self.counters_.late_wakeups;
        provider.disarm_sleep();
        return Result::success;
      }
      provider.disarm_sleep();
      if (const std::uint64_t work = work_done(); work != work_seen) {
        if (done()) return Result::success;
        work_seen = work;
        phase = now_ns();
        break;
      }
    }
  }
}

}  // namespace via
