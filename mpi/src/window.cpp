#include "window.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include <via/copy.hpp>

#include "collectives.hpp"
#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

namespace {

// A request of a request-based operation is complete (or, freed by
// MPI_Request_free before, gone).
void finish(Request* done) {
  if (done == nullptr) return;
  if (done->detached)
    delete done;
  else
    done->complete = true;
}

int flavor_constant(WindowFlavor flavor) {
  switch (flavor) {
    case WindowFlavor::create: return MPI_WIN_FLAVOR_CREATE;
    case WindowFlavor::allocate: return MPI_WIN_FLAVOR_ALLOCATE;
    case WindowFlavor::shared: return MPI_WIN_FLAVOR_SHARED;
    case WindowFlavor::dynamic: return MPI_WIN_FLAVOR_DYNAMIC;
  }
  return MPI_WIN_FLAVOR_CREATE;
}

[[noreturn]] void out_of_window(int target, MPI_Aint displacement, std::size_t bytes, const std::string& where) {
  std::string why = std::to_string(bytes);
  why += " bytes at displacement ";
  why += std::to_string(displacement);
  why += " are outside rank ";
  why += std::to_string(target);
  why += "'s ";
  why += where;
  fail(MPI_ERR_RMA_RANGE, why);
}

}  // namespace

Window::Window(void* base, std::size_t size, int disp_unit, const Communicator& comm, WindowFlavor flavor,
               std::unique_ptr<WindowMemory> memory)
    : runtime_(runtime()),
      flavor_(flavor),
      memory_(std::move(memory)),
      base_(static_cast<std::byte*>(base)),
      size_(size),
      size_attribute_(MPI_Aint(size)),
      disp_unit_(disp_unit),
      create_flavor_(flavor_constant(flavor)),
      members_(std::size_t(comm.size())),
      access_(std::size_t(comm.size())),
      start_group_(std::size_t(comm.size())),
      posts_(std::size_t(comm.size())),
      remote_regions_(flavor == WindowFlavor::dynamic ? std::size_t(comm.size()) : 0),
      region_list_expected_(remote_regions_.size()) {
  comm_ = std::make_unique<Communicator>(comm.shared_group(), runtime_.agree_on_context(comm), ErrhandlerKind::fatal);
  comm_->set_window(&handle);
  if (size > 0 && comm.size() > 1) registration_ = runtime_.p2p().transport().register_window(base, size);
  const Member mine{reinterpret_cast<std::uintptr_t>(base), size, registration_, disp_unit};
  // Known to the transport before anyone learns of this rank's window: a
  // member may ask for a lock as soon as its own creation returns.
  runtime_.windows().add(*this);
  try {
    const Datatype& bytes = datatype_of(MPI_BYTE);
    std::vector<int> counts(members_.size(), int(sizeof(Member))), displs(members_.size());
    for (std::size_t r = 0; r < members_.size(); ++r) displs[r] = int(r * sizeof(Member));
    allgatherv(&mine, sizeof mine, bytes, Blocks{members_.data(), counts, displs, &bytes}, *comm_);
  } catch (...) {
    runtime_.windows().remove(*this);
    throw;
  }
}

Window::~Window() {
  runtime_.windows().remove(*this);
  handle.kind = HandleKind{};  // a stale handle is then recognised as invalid
  Transport* transport = comm_->size() > 1 ? &runtime_.p2p().transport() : nullptr;
  if (registration_) transport->deregister_window(base_, size_, registration_);
  for (const Region& r : attached_)
    if (r.handle) transport->deregister_window(reinterpret_cast<void*>(r.base), r.size, via::MemHandle(r.handle));
}

// ---- where an access lands ----

void Window::check_target(int target) const { comm_->check_rank(target, false, false); }

bool Window::in_passive_epoch(int target) const {
  return lock_all_ || access_[std::size_t(target)].held != Held::none;
}

Window::Place Window::place_of(int target, MPI_Aint displacement, std::size_t bytes) {
  check_target(target);
  require(fence_epoch_ || in_passive_epoch(target) || (access_epoch_ && start_group_[std::size_t(target)]),
          MPI_ERR_RMA_SYNC,
          "no access epoch to the target is open (MPI_Win_fence, MPI_Win_start, MPI_Win_lock or MPI_Win_lock_all "
          "opens one)");
  if (flavor_ == WindowFlavor::dynamic) {
    const auto address = std::uint64_t(displacement);
    if (target == comm_->rank()) {
      if (!attached_contains(address, bytes)) out_of_window(target, displacement, bytes, "attached memory");
      return Place{address, 0};
    }
    const Region* region = find_region(target, address, bytes);
    if (region == nullptr) {
      fetch_regions(target);  // it may have attached memory since this rank last asked
      region = find_region(target, address, bytes);
    }
    if (region == nullptr) out_of_window(target, displacement, bytes, "attached memory");
    return Place{address, via::MemHandle(region->handle)};
  }
  const Member& m = members_[std::size_t(target)];
  const auto unit = std::uint64_t(m.disp_unit);
  if (displacement < 0 || std::uint64_t(displacement) > m.size / unit ||
      bytes > m.size - std::uint64_t(displacement) * unit)
    out_of_window(target, displacement, bytes, "window of " + std::to_string(m.size) + " bytes");
  return Place{m.base + std::uint64_t(displacement) * unit, m.handle};
}

bool Window::attached_contains(std::uint64_t address, std::size_t bytes) const {
  return std::any_of(attached_.begin(), attached_.end(), [&](const Region& r) {
    return address >= r.base && bytes <= r.size && address - r.base <= r.size - bytes;
  });
}

const Window::Region* Window::find_region(int target, std::uint64_t address, std::size_t bytes) const {
  for (const Region& r : remote_regions_[std::size_t(target)])
    if (address >= r.base && bytes <= r.size && address - r.base <= r.size - bytes && r.handle != 0) return &r;
  return nullptr;
}

void Window::fetch_regions(int target) {
  remote_regions_[std::size_t(target)].clear();
  region_list_expected_[std::size_t(target)] = SIZE_MAX;  // until the first answer says how many
  send_control(target, RmaKind::regions);
  runtime_.p2p().wait_until([&] { return region_list_expected_[std::size_t(target)] == 0; });
}

void Window::forget_regions() {
  for (auto& regions : remote_regions_) regions.clear();
}

std::byte* Window::local_bytes(int peer, std::uint64_t address, std::size_t bytes) const {
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  const bool inside = flavor_ == WindowFlavor::dynamic
                          ? attached_contains(address, bytes)
                          : address >= base && bytes <= size_ && address - base <= size_ - bytes;
  if (!inside) {
    std::string why = "an access from rank ";
    why += std::to_string(peer);
    why += " does not fit the window";
    abort_job("progress", why);
  }
  return reinterpret_cast<std::byte*>(address);
}

// ---- data movement ----

std::uint64_t Window::track(Request* done) {
  ++outstanding_;
  return runtime_.windows().track(*this, done);
}

void Window::put(const void* origin, std::size_t bytes, int target, MPI_Aint displacement, Request* done) {
  const Place place = place_of(target, displacement, bytes);
  if (bytes > 0 && target == comm_->rank()) std::memmove(reinterpret_cast<void*>(place.address), origin, bytes);
  if (bytes == 0 || target == comm_->rank()) return finish(done);
  runtime_.p2p().transport().write(comm_->world_rank(target), origin, bytes, place.address, place.handle, track(done));
}

void Window::get(void* origin, std::size_t bytes, int target, MPI_Aint displacement, Request* done) {
  const Place place = place_of(target, displacement, bytes);
  if (bytes > 0 && target == comm_->rank()) std::memmove(origin, reinterpret_cast<void*>(place.address), bytes);
  if (bytes == 0 || target == comm_->rank()) return finish(done);
  runtime_.p2p().transport().read(comm_->world_rank(target), origin, bytes, place.address, place.handle, track(done));
}

void Window::accumulate(const void* origin, std::size_t bytes, Basic basic, const Op& op, int target,
                        MPI_Aint displacement, Request* done) {
  const Place place = place_of(target, displacement, bytes);
  const std::span<const std::byte> data{static_cast<const std::byte*>(origin), bytes};
  if (bytes > 0 && target == comm_->rank())
    combine(op.builtin(), basic, reinterpret_cast<std::byte*>(place.address), data);
  // The data is copied into messages: the origin buffer is free at once.
  finish(done);
  if (bytes == 0 || target == comm_->rank()) return;
  // Messages of whole elements, each within the eager limit.
  const std::size_t element = basic_size(basic);
  const std::size_t chunk = runtime_.p2p().eager_limit() / element * element;
  require(chunk > 0, MPI_ERR_OTHER, "VIASTACK_MPI_EAGER_LIMIT is too small for an accumulate message");
  WireHeader h{WireType::accumulate};
  h.context = comm_->p2p_context();
  h.source = comm_->rank();
  h.tag = int(op.builtin());
  h.handle = std::uint32_t(basic);
  for (std::size_t sent = 0; sent < bytes; sent += chunk) {
    h.size = std::min(chunk, bytes - sent);
    h.address = place.address + sent;
    runtime_.p2p().transport().send(comm_->world_rank(target), h, data.subspan(sent, h.size));
  }
}

void Window::get_accumulate(const void* origin, void* result, std::size_t bytes, Basic basic, Builtin op, int target,
                            MPI_Aint displacement, Request* done) {
  const Place place = place_of(target, displacement, bytes);
  const auto* data = static_cast<const std::byte*>(origin);
  if (bytes > 0 && target == comm_->rank()) {
    auto* at = reinterpret_cast<std::byte*>(place.address);
    std::memmove(result, at, bytes);
    if (op != Builtin::no_op) combine(op, basic, at, {data, bytes});
  }
  if (bytes == 0 || target == comm_->rank()) return finish(done);
  const std::size_t element = basic_size(basic);
  const std::size_t chunk = runtime_.p2p().eager_limit() / element * element;
  require(chunk > 0, MPI_ERR_OTHER, "VIASTACK_MPI_EAGER_LIMIT is too small for an accumulate message");
  const std::uint64_t token = runtime_.p2p().new_rdma_id();
  fetches_[token] = Fetch{static_cast<std::byte*>(result), place.address, bytes, done};
  WireHeader h{WireType::rma};
  h.tag = int(op);
  h.handle = std::uint32_t(basic);
  h.token = token;
  for (std::size_t sent = 0; sent < bytes; sent += chunk) {
    h.size = std::min(chunk, bytes - sent);
    h.address = place.address + sent;
    // MPI_NO_OP only reads: no origin data travels.
    const std::span<const std::byte> payload =
        op == Builtin::no_op ? std::span<const std::byte>{} : std::span<const std::byte>{data + sent, h.size};
    send_control(target, RmaKind::fetch, h, payload);
  }
}

void Window::compare_and_swap(const void* origin, const void* compare, void* result, std::size_t element_bytes,
                              int target, MPI_Aint displacement) {
  const Place place = place_of(target, displacement, element_bytes);
  if (target == comm_->rank()) {
    auto* at = reinterpret_cast<std::byte*>(place.address);
    std::memmove(result, at, element_bytes);
    if (std::memcmp(at, compare, element_bytes) == 0) std::memmove(at, origin, element_bytes);
    return;
  }
  std::vector<std::byte> payload(2 * element_bytes);
  std::memcpy(payload.data(), origin, element_bytes);
  std::memcpy(payload.data() + element_bytes, compare, element_bytes);
  const std::uint64_t token = runtime_.p2p().new_rdma_id();
  fetches_[token] = Fetch{static_cast<std::byte*>(result), place.address, element_bytes, nullptr};
  WireHeader h{WireType::rma};
  h.size = element_bytes;
  h.address = place.address;
  h.token = token;
  send_control(target, RmaKind::compare_and_swap, h, payload);
}

// data, as elements of kind `basic`, combined by op into the window's bytes at `into`.
void Window::combine(Builtin op, Basic basic, std::byte* into, std::span<const std::byte> data) {
  const std::size_t size = basic_size(basic);
  const Datatype element(contiguous_layout(size), size, 0, std::ptrdiff_t(size), 1, basic);
  Op{op, nullptr}.apply(data.data(), into, data.size() / size, element);
}

void Window::send_control(int target, RmaKind kind, WireHeader header, std::span<const std::byte> payload) {
  header.type = WireType::rma;
  header.rma = std::uint8_t(kind);
  header.context = comm_->p2p_context();
  header.source = comm_->rank();
  runtime_.p2p().transport().send(comm_->world_rank(target), header, payload);
}

void Window::wait_local_completion() {
  runtime_.p2p().wait_until([&] { return outstanding_ == 0 && fetches_.empty(); });
}

void Window::on_rdma_complete(Request* done) {
  --outstanding_;
  finish(done);
}

// ---- what arrives ----

void Window::on_message(int peer, const WireHeader& h, std::span<const std::byte> payload) {
  if (h.type == WireType::accumulate) {
    if (payload.size() != h.size) abort_job("progress", "an accumulate message is shorter than it says");
    return combine(Builtin(h.tag), Basic(h.handle), local_bytes(peer, h.address, h.size), payload);
  }
  const int origin = h.source;
  switch (RmaKind(h.rma)) {
    case RmaKind::lock: return request_lock(origin, h.tag);
    case RmaKind::lock_granted: ++grants_; return;
    case RmaKind::unlock:
      release_lock(origin);
      return send_control(origin, RmaKind::done);
    case RmaKind::flush: return send_control(origin, RmaKind::done);
    case RmaKind::done: ++answers_; return;
    case RmaKind::fetch:
    case RmaKind::compare_and_swap: {
      std::byte* at = local_bytes(peer, h.address, h.size);
      WireHeader reply{WireType::rma};
      reply.address = h.address;
      reply.size = h.size;
      reply.token = h.token;
      // The old contents go back before they change.
      send_control(origin, RmaKind::fetched, reply, {at, h.size});
      if (RmaKind(h.rma) == RmaKind::compare_and_swap) {
        if (payload.size() != 2 * h.size) abort_job("progress", "a compare-and-swap message is malformed");
        if (std::memcmp(at, payload.data() + h.size, h.size) == 0) std::memcpy(at, payload.data(), h.size);
      } else if (Builtin(h.tag) != Builtin::no_op) {
        if (payload.size() != h.size) abort_job("progress", "a fetching accumulate message is shorter than it says");
        combine(Builtin(h.tag), Basic(h.handle), at, payload);
      }
      return;
    }
    case RmaKind::fetched: {
      auto it = fetches_.find(h.token);
      if (it == fetches_.end() || payload.size() != h.size || h.address < it->second.address)
        abort_job("progress", "an answer to a fetching operation matches none");
      Fetch& f = it->second;
      via::copy_memory(f.result + (h.address - f.address), payload.data(), payload.size());
      f.bytes_left -= std::min(f.bytes_left, payload.size());
      if (f.bytes_left == 0) {
        finish(f.done);
        fetches_.erase(it);
      }
      return;
    }
    case RmaKind::regions: {
      // As many entries a message as fit the eager limit; at least one message, which says how many in all.
      const std::size_t per_message = std::max<std::size_t>(1, runtime_.p2p().eager_limit() / sizeof(Region));
      std::size_t first = 0;
      do {
        const std::size_t n = std::min(per_message, attached_.size() - first);
        WireHeader reply{WireType::rma};
        reply.token = attached_.size();
        reply.address = first;
        send_control(origin, RmaKind::region_list, reply,
                     std::as_bytes(std::span(attached_.data() + first, n)));
        first += n;
      } while (first < attached_.size());
      return;
    }
    case RmaKind::region_list: {
      auto& regions = remote_regions_.at(std::size_t(origin));
      std::size_t& expected = region_list_expected_.at(std::size_t(origin));
      const std::size_t n = payload.size() / sizeof(Region);
      if (expected == SIZE_MAX) {
        expected = h.token;
        regions.resize(h.token);
      }
      if (h.address > regions.size() || n > regions.size() - h.address || n > expected)
        abort_job("progress", "a list of attached regions is malformed");
      std::memcpy(regions.data() + h.address, payload.data(), n * sizeof(Region));
      expected -= n;
      return;
    }
    case RmaKind::post: ++posts_.at(std::size_t(origin)); return;
    case RmaKind::complete: ++completes_; return;
  }
  abort_job("progress", "an unknown one-sided message arrived");
}

// ---- fence ----

void Window::fence(int assertion) {
  wait_local_completion();
  // An empty message to every member, behind this rank's RDMA writes and
  // accumulate messages to it; hearing from every member means that every
  // update aimed at this window has been applied.
  const Datatype& bytes = datatype_of(MPI_BYTE);
  const std::vector<int> none(std::size_t(comm_->size()), 0);
  const Blocks empty{nullptr, none, none, &bytes};
  alltoallv(empty, empty, *comm_);
  // Nobody reads a window (or updates it again) before its owner has heard from everyone.
  barrier(*comm_);
  fence_epoch_ = !(assertion & MPI_MODE_NOSUCCEED);
  forget_regions();
}

// ---- post / start / complete / wait ----

namespace {

// The window ranks of a group's members; MPI_ERR_GROUP for one outside the window.
std::vector<int> window_ranks(const Group& group, const Communicator& comm) {
  std::vector<int> ranks;
  for (int world : group.world_ranks()) {
    const int r = comm.group().rank_of_world(world);
    require(r != MPI_UNDEFINED, MPI_ERR_GROUP, "a member of the group is not a member of the window");
    ranks.push_back(r);
  }
  return ranks;
}

}  // namespace

void Window::post(const Group& group, int assertion) {
  require(!exposure_epoch_, MPI_ERR_RMA_SYNC, "an exposure epoch is already open (MPI_Win_wait ends it)");
  post_group_ = window_ranks(group, *comm_);
  exposure_epoch_ = true;
  completes_ = 0;
  // With MPI_MODE_NOCHECK the origins' MPI_Win_start does not wait for a post (and must say so too).
  if (assertion & MPI_MODE_NOCHECK) return;
  for (int origin : post_group_) {
    if (origin == comm_->rank())
      ++posts_[std::size_t(origin)];
    else
      send_control(origin, RmaKind::post);
  }
}

void Window::start(const Group& group, int assertion) {
  require(!access_epoch_, MPI_ERR_RMA_SYNC, "an access epoch is already open (MPI_Win_complete ends it)");
  const std::vector<int> targets = window_ranks(group, *comm_);
  if (!(assertion & MPI_MODE_NOCHECK)) {
    runtime_.p2p().wait_until([&] {
      return std::all_of(targets.begin(), targets.end(), [&](int t) { return posts_[std::size_t(t)] > 0; });
    });
    for (int t : targets) --posts_[std::size_t(t)];
  }
  std::fill(start_group_.begin(), start_group_.end(), false);
  for (int t : targets) start_group_[std::size_t(t)] = true;
  access_epoch_ = true;
  forget_regions();
}

void Window::complete() {
  require(access_epoch_, MPI_ERR_RMA_SYNC, "no access epoch is open (MPI_Win_start opens one)");
  wait_local_completion();
  for (int t = 0; t < comm_->size(); ++t) {
    if (!start_group_[std::size_t(t)]) continue;
    if (t == comm_->rank())
      ++completes_;
    else
      send_control(t, RmaKind::complete);  // behind this rank's updates to t
  }
  access_epoch_ = false;
}

void Window::wait() {
  require(exposure_epoch_, MPI_ERR_RMA_SYNC, "no exposure epoch is open (MPI_Win_post opens one)");
  runtime_.p2p().wait_until([&] { return completes_ >= post_group_.size(); });
  exposure_epoch_ = false;
}

bool Window::test() {
  require(exposure_epoch_, MPI_ERR_RMA_SYNC, "no exposure epoch is open (MPI_Win_post opens one)");
  if (!runtime_.p2p().test([&] { return completes_ >= post_group_.size(); })) return false;
  exposure_epoch_ = false;
  return true;
}

// ---- passive target ----

void Window::request_lock(int origin, int lock_type) {
  const bool free = lock_type == MPI_LOCK_EXCLUSIVE ? locks_.exclusive_holder < 0 && locks_.shared_holders == 0
                                                    : locks_.exclusive_holder < 0;
  if (!free || !locks_.waiting.empty()) {
    locks_.waiting.emplace_back(origin, lock_type);
    return;
  }
  if (lock_type == MPI_LOCK_EXCLUSIVE)
    locks_.exclusive_holder = origin;
  else
    ++locks_.shared_holders;
  grant(origin);
}

void Window::release_lock(int origin) {
  if (locks_.exclusive_holder == origin)
    locks_.exclusive_holder = -1;
  else if (locks_.shared_holders > 0)
    --locks_.shared_holders;
  // Grant in arrival order while the next in line fits.
  while (!locks_.waiting.empty() && locks_.exclusive_holder < 0) {
    const auto [next, type] = locks_.waiting.front();
    if (type == MPI_LOCK_EXCLUSIVE && locks_.shared_holders > 0) break;
    locks_.waiting.pop_front();
    if (type == MPI_LOCK_EXCLUSIVE)
      locks_.exclusive_holder = next;
    else
      ++locks_.shared_holders;
    grant(next);
  }
}

void Window::grant(int origin) {
  if (origin == comm_->rank())
    ++grants_;
  else
    send_control(origin, RmaKind::lock_granted);
}

void Window::acquire(int target, int lock_type) {
  if (target == comm_->rank()) {
    request_lock(target, lock_type);
  } else {
    WireHeader h{WireType::rma};
    h.tag = lock_type;
    send_control(target, RmaKind::lock, h);
  }
}

void Window::lock(int lock_type, int target, int assertion) {
  check_target(target);
  require(!lock_all_ && access_[std::size_t(target)].held == Held::none, MPI_ERR_RMA_SYNC,
          "this rank already holds a lock on the target");
  const bool nocheck = assertion & MPI_MODE_NOCHECK;
  if (!nocheck) {
    acquire(target, lock_type);
    runtime_.p2p().wait_until([&] { return grants_ > 0; });
    --grants_;
  }
  access_[std::size_t(target)] = Access{lock_type == MPI_LOCK_EXCLUSIVE ? Held::exclusive : Held::shared, nocheck};
  if (!remote_regions_.empty()) remote_regions_[std::size_t(target)].clear();
}

void Window::ask_and_wait(std::span<const int> targets, RmaKind kind) {
  std::size_t asked = 0;
  for (int t : targets) {
    if (t == comm_->rank()) continue;  // this rank's own operations are complete already
    send_control(t, kind);
    ++asked;
  }
  runtime_.p2p().wait_until([&] { return answers_ >= asked; });
  answers_ -= asked;
}

void Window::unlock(int target) {
  check_target(target);
  const Access access = access_[std::size_t(target)];
  require(access.held != Held::none, MPI_ERR_RMA_SYNC, "this rank holds no lock on the target");
  wait_local_completion();
  const int targets[] = {target};
  // The unlock travels behind this rank's updates; its answer says they landed and the lock is free.
  ask_and_wait(targets, access.nocheck ? RmaKind::flush : RmaKind::unlock);
  if (target == comm_->rank() && !access.nocheck) release_lock(target);
  access_[std::size_t(target)] = Access{};
}

void Window::lock_all(int assertion) {
  require(!lock_all_ && std::none_of(access_.begin(), access_.end(), [](Access a) { return a.held != Held::none; }),
          MPI_ERR_RMA_SYNC, "this rank already holds a lock on the window");
  lock_all_nocheck_ = assertion & MPI_MODE_NOCHECK;
  if (!lock_all_nocheck_) {
    for (int t = 0; t < comm_->size(); ++t) acquire(t, MPI_LOCK_SHARED);
    runtime_.p2p().wait_until([&] { return grants_ >= std::size_t(comm_->size()); });
    grants_ -= std::size_t(comm_->size());
  }
  lock_all_ = true;
  forget_regions();
}

namespace {

std::vector<int> every_rank(int size) {
  std::vector<int> ranks(std::size_t(size), 0);
  for (int r = 0; r < size; ++r) ranks[std::size_t(r)] = r;
  return ranks;
}

}  // namespace

void Window::unlock_all() {
  require(lock_all_, MPI_ERR_RMA_SYNC, "no MPI_Win_lock_all epoch is open");
  wait_local_completion();
  ask_and_wait(every_rank(comm_->size()), lock_all_nocheck_ ? RmaKind::flush : RmaKind::unlock);
  if (!lock_all_nocheck_) release_lock(comm_->rank());
  lock_all_ = false;
}

void Window::flush(int target) {
  check_target(target);
  require(in_passive_epoch(target), MPI_ERR_RMA_SYNC, "flush needs a lock on the target");
  wait_local_completion();
  const int targets[] = {target};
  ask_and_wait(targets, RmaKind::flush);
}

void Window::flush_all() {
  std::vector<int> targets;
  for (int t = 0; t < comm_->size(); ++t)
    if (in_passive_epoch(t)) targets.push_back(t);
  require(!targets.empty(), MPI_ERR_RMA_SYNC, "flush needs a lock on the window");
  wait_local_completion();
  ask_and_wait(targets, RmaKind::flush);
}

void Window::flush_local(int target) {
  check_target(target);
  require(in_passive_epoch(target), MPI_ERR_RMA_SYNC, "flush needs a lock on the target");
  wait_local_completion();
}

void Window::flush_local_all() {
  bool any = false;
  for (int t = 0; t < comm_->size(); ++t) any = any || in_passive_epoch(t);
  require(any, MPI_ERR_RMA_SYNC, "flush needs a lock on the window");
  wait_local_completion();
}

void Window::sync() {
  // The window's memory is the same for loads, stores and RMA (MPI_WIN_UNIFIED): a full barrier orders them.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  forget_regions();
}

void Window::check_no_epoch() const {
  require(!lock_all_ && !access_epoch_ && !exposure_epoch_ &&
              std::none_of(access_.begin(), access_.end(), [](Access a) { return a.held != Held::none; }),
          MPI_ERR_RMA_SYNC, "an epoch is still open on the window");
}

// ---- dynamic and shared windows ----

void Window::attach(void* base, std::size_t size) {
  require(flavor_ == WindowFlavor::dynamic, MPI_ERR_RMA_FLAVOR, "only a window of MPI_Win_create_dynamic attaches memory");
  require(base != nullptr || size == 0, MPI_ERR_ARG, "null base with a non-zero size");
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  for (const Region& r : attached_)
    require(address + size <= r.base || address >= r.base + r.size, MPI_ERR_RMA_ATTACH,
            "the memory overlaps memory already attached to the window");
  via::MemHandle registration = 0;
  if (size > 0 && comm_->size() > 1) registration = runtime_.p2p().transport().register_window(base, size);
  attached_.push_back(Region{address, size, registration});
}

void Window::detach(const void* base) {
  require(flavor_ == WindowFlavor::dynamic, MPI_ERR_RMA_FLAVOR, "only a window of MPI_Win_create_dynamic detaches memory");
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  auto it = std::find_if(attached_.begin(), attached_.end(), [&](const Region& r) { return r.base == address; });
  require(it != attached_.end(), MPI_ERR_ARG, "no memory attached to the window starts at that address");
  if (it->handle)
    runtime_.p2p().transport().deregister_window(reinterpret_cast<void*>(it->base), it->size,
                                                 via::MemHandle(it->handle));
  attached_.erase(it);
}

void Window::shared_query(int rank, MPI_Aint* size, int* disp_unit, void* baseptr) const {
  require(flavor_ == WindowFlavor::shared, MPI_ERR_RMA_FLAVOR,
          "only a window of MPI_Win_allocate_shared can be queried for shared memory");
  if (rank == MPI_PROC_NULL) {
    rank = 0;
    for (int r = 0; r < comm_->size(); ++r)
      if (memory_->size(r) > 0) {
        rank = r;
        break;
      }
  } else {
    check_target(rank);
  }
  *size = MPI_Aint(memory_->size(rank));
  *disp_unit = members_[std::size_t(rank)].disp_unit;
  *static_cast<void**>(baseptr) = memory_->base(rank);
}

// ---- the process's windows ----

void Windows::add(Window& window) {
  by_context_[window.comm().p2p_context()] = &window;
  if (window.comm().size() > 1 && !agent_)
    agent_ = std::make_unique<ProgressAgent>([this] {
      const std::uint64_t before = handled_;
      p2p_.poll();
      return handled_ != before;
    });
}

void Windows::remove(Window& window) {
  by_context_.erase(window.comm().p2p_context());
  if (by_context_.empty()) agent_.reset();
}

std::uint64_t Windows::track(Window& window, Request* done) {
  const std::uint64_t id = p2p_.new_rdma_id();
  rdma_[id] = Tracked{&window, done};
  return id;
}

void Windows::on_rma_message(int peer, const WireHeader& header, std::span<const std::byte> payload) {
  ++handled_;
  auto it = by_context_.find(header.context);
  if (it == by_context_.end()) {
    std::string why = "a one-sided message from rank ";
    why += std::to_string(peer);
    why += " is for a window this rank does not have";
    abort_job("progress", why);
  }
  it->second->on_message(peer, header, payload);
}

void Windows::on_rdma_complete(std::uint64_t id) {
  ++handled_;
  auto it = rdma_.find(id);
  if (it == rdma_.end()) return;
  it->second.window->on_rdma_complete(it->second.done);
  rdma_.erase(it);
}

Window& window_of(MPI_Win handle) {
  if (handle == nullptr || handle->kind != HandleKind::win || handle->impl == nullptr)
    fail(MPI_ERR_WIN, "invalid window (MPI_WIN_NULL, freed, or not a window)");
  return *handle->impl;
}

}  // namespace viastack::mpi
