#include "node_collectives.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <via/bootstrap.hpp>
#include <via/config.hpp>
#include <via/copy.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives.hpp"
#include "comm.hpp"
#include "datatype.hpp"
#include "errors.hpp"
#include "internal_p2p.hpp"
#include "ops.hpp"
#include "runtime.hpp"
#include "window_memory.hpp"

namespace viastack::mpi {

using node_collectives::kLargeBytes;
using node_collectives::kMaxRanks;
using node_collectives::kSlotBytes;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kLineBytes = 128;

// Calls in flight per slot: a root may run this many calls ahead of its
// slowest reader (bcast, scatter, reduce's leaves back to back) before it
// waits, as point-to-point eager messages let it run ahead by their credits;
// with ranks sharing a core, each such wait costs a context switch (at 8,
// a bcast of 4 B on 4 ranks on 2 cores took 50 us a call against 1-3 us of
// point-to-point's; at 64, 2-3 us). A member's slot is then 512 KiB, of which
// only the pages calls touch are backed by memory (one per buffer for small calls).
constexpr std::uint64_t kBuffers = 64;

// One member's part of the segment, written by that member only (but for the
// buffers a scatter's root fills for it).
struct alignas(kLineBytes) MemberControl {
  std::atomic<std::uint64_t> done;  // the last call this member has finished reading for
  // Waiting long: whoever raises a flag must wake it. Read at every post, written
  // only around a long wait: on a line of its own, which the flags written at
  // every call do not take away from the readers' caches.
  alignas(kLineBytes) std::atomic<std::uint32_t> may_sleep;
  // Set once, before this member first says it may sleep: kFencesBeforeSleep
  // if its process is registered for via::fence_before_sleep's membarrier
  // (a registered raiser of a flag then needs no fence of its own for it,
  // wake_sleepers), kFencesNot if not; 0 until then.
  std::atomic<std::uint32_t> sleeper_fences;
  std::int32_t pid;
  std::uint64_t start_time;     // with pid: this process, not a later one of the same pid
  std::uint64_t pid_namespace;  // pids mean something only within one namespace
  const std::uint64_t* probe;   // a word of this process's own memory that others try to read (kProbeValue)
};
enum : std::uint32_t { kFencesBeforeSleep = 1, kFencesNot = 2 };

// The flag that says a call's data is in place, its size and the data itself
// begin on one line: a reader of a small call takes one line from the
// writer's cache, not three (flag, size, data).
struct alignas(kLineBytes) Buffer {
  std::atomic<std::uint64_t> posted;  // the call whose data is here (a scatter's: put here by its root)
  std::uint64_t bytes;                // how many bytes (per block) the data has
  alignas(16) std::byte data[kSlotBytes];  // aligned for any type the reductions work on in place
};
// Large calls (bcast, allreduce and allgather(v) above kSlotBytes) stage their
// data in areas of kLargeBytes, taken in turn; a member writes one again once
// every member has finished the large call that used it before. With two
// areas that costs allreduce and allgather(v) no wait: to take an area again a
// member has seen every member post the large call in between, which each does
// only after finishing the one before (with one area, a member would wait for
// the slowest reader of the last call). A bcast's root waits there when it is
// two pieces ahead of its slowest reader.
constexpr std::size_t kLargeAreas = 2;
constexpr std::size_t kPageBytes = 4096;
struct Member {
  MemberControl control;
  Buffer buffers[kBuffers];  // calls use them in turn
  alignas(kPageBytes) std::byte large[kLargeAreas][kLargeBytes];  // backed by memory only once a large call touches it
};
static_assert(sizeof(Member) % kPageBytes == 0, "every member's part starts on a page (and a line)");
static_assert(offsetof(Buffer, data) + 8 <= 64, "a small call's data shares a line with its flag");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// The message that wakes a member asleep in a wait, in the communicator's
// collective context with a tag the point-to-point algorithms' step tags
// (collective_task.hpp's Call::tag) leave alone.
constexpr int kWakeTag = 0x7ffc0000;

// Gather(v) and scatter(v): a block above kSlotBytes goes as a message of its
// own (tag kBlockTag), and the size posted for it says so; only the side that
// knows a block's size (a gatherv's sender, a scatterv's root) decides.
constexpr std::uint64_t kByMessage = ~std::uint64_t{0};
constexpr int kBlockTag = kWakeTag + 1;

// What every process's probe word holds: another member that reads this
// through process_vm_readv may read the others' buffers that way too.
constexpr std::uint64_t kProbeValue = 0x76696173'74616b21;  // "viastak!"
const std::uint64_t probe_word = kProbeValue;

// Bytes `bytes` at `remote` in process `pid` into `local` (single copy, through
// the kernel): false if the kernel refused or the range was not all there.
bool read_from_process(int pid, void* local, const void* remote, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    iovec to{static_cast<std::byte*>(local) + done, bytes - done};
    iovec from{const_cast<std::byte*>(static_cast<const std::byte*>(remote)) + done, bytes - done};
    const ssize_t n = process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (n <= 0) return false;
    done += std::size_t(n);
  }
  return true;
}

// How often a long wait checks that every member's process still lives.
constexpr auto kLivenessInterval = std::chrono::milliseconds(100);

// A process's start time (clock ticks after boot, field 22 of /proc/<pid>/stat),
// 0 when it does not exist or has ended (a zombie).
std::uint64_t start_time_of(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[1024];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* after_name = std::strrchr(text, ')');  // the name may hold spaces and parentheses
  if (!after_name || after_name[1] != ' ') return 0;
  const char state = after_name[2];
  if (state == 'Z' || state == 'X') return 0;
  int field = 3;  // the state's
  for (const char* p = after_name + 2; *p; ++p)
    if (*p == ' ' && ++field == 22) return std::strtoull(p + 1, nullptr, 10);
  return 0;
}

std::uint64_t own_pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? std::uint64_t(st.st_ino) : 0;
}

// All members on one node, over a provider that reaches them through shared memory.
bool qualifies(const Communicator& comm) {
  if (comm.is_inter() || comm.size() < 2 || comm.size() > kMaxRanks) return false;
  if (via::config::text("VIASTACK_PROVIDER") == "tcp") return false;
  std::string error;
  const auto job = via::job_bootstrap(error);
  if (!job) return false;
  const int node = job->node_of(comm.world_rank(0));
  for (int r = 1; r < comm.size(); ++r)
    if (job->node_of(comm.world_rank(r)) != node) return false;
  return true;
}

// count elements of type at buf into a slot, and back.
void to_slot(const void* buf, std::size_t count, const Datatype& type, std::byte* slot) {
  if (type.contiguous())
    via::copy_memory(slot, buf, count * type.size());
  else
    type.pack(buf, count, slot);
}
void from_slot(const std::byte* slot, std::size_t bytes, const Datatype& type, void* buf) {
  if (type.contiguous())
    via::copy_memory(buf, slot, bytes);
  else
    type.unpack(slot, bytes, buf);
}

}  // namespace

class NodeCollectives {
 public:
  explicit NodeCollectives(const Communicator& comm) : comm_(comm), me_(comm.rank()), n_(comm.size()) {
    if (!qualifies(comm)) return;
    try {
      memory_ = WindowMemory::shared_segment(sizeof(Member), comm);
    } catch (const Error&) {
      return;  // every member failed alike (the segment's making ends in an agreement): point-to-point it is
    }
    for (int r = 0; r < n_; ++r) members_.push_back(reinterpret_cast<Member*>(memory_->base(r)));
    MemberControl& mine = control(me_);
    mine.pid = int(getpid());
    mine.start_time = start_time_of(mine.pid);
    mine.pid_namespace = own_pid_namespace();
    mine.probe = &probe_word;
    mine.sleeper_fences.store(via::sleeper_fences() ? kFencesBeforeSleep : kFencesNot, std::memory_order_relaxed);
    // The point-to-point wait sleeps once it has spun and then yielded for
    // at least via::wait_yield_time() (where ranks outnumber cores, its phase
    // may grow past that: via's yield_phase.hpp): a waiter says it may sleep
    // well before the shortest, so that it is always rung; one that sleeps
    // later costs its raisers an empty message each.
    may_sleep_after_ = std::chrono::duration_cast<Clock::duration>(via::wait_yield_time() / 2);
  }

  // The communicator's, made at its first call that qualifies; null when it is not for shared memory.
  static NodeCollectives* of(const Communicator& comm) {
    std::shared_ptr<NodeCollectives>& state = comm.node_collectives();
    if (!state) state = std::make_shared<NodeCollectives>(comm);
    return state->members_.empty() ? nullptr : state.get();
  }

  int rank() const { return me_; }
  int size() const { return n_; }

  // A new call: its number, the same on every member.
  std::uint64_t begin() { return ++calls_; }
  // Member `rank`'s buffer for `call`.
  std::byte* buffer(int rank, std::uint64_t call) const { return slot(rank, call).data; }
  // How many bytes (per block) were posted into member `rank`'s buffer for `call`.
  std::uint64_t posted_bytes(int rank, std::uint64_t call) const { return slot(rank, call).bytes; }

  // Before this member writes a buffer of `call` (its own, or a scatter's
  // into others'): every member is done with the call that used it last.
  // The members' `done` numbers, written at every call, are read only when
  // the least of them seen last is not recent enough: about once every
  // kBuffers calls rather than at every call, each read a cache miss.
  void wait_buffers_free(std::uint64_t call) {
    if (call > kBuffers) wait_all_done_through(call - kBuffers);
  }
  // A large call (bcast, allreduce, allgather(v) above kSlotBytes): the large area it
  // stages its data in, the same on every member (each counts its large calls
  // alike), once every member has finished the call that used it before. The
  // call's buffer (for its flag) is free too. Member `rank`'s part of it is
  // large_area(rank, area).
  std::size_t take_large_area(std::uint64_t call) {
    wait_buffers_free(call);
    const std::uint64_t last_used_by = large_area_used_by_[large_calls_ % kLargeAreas];
    const std::size_t area = count_large_call(call);
    wait_all_done_through(last_used_by);
    return area;
  }
  // A large call in which this member only reads another's large area (a
  // bcast's receivers): the area, counted as take_large_area counts it, with no wait.
  std::size_t count_large_call(std::uint64_t call) {
    const std::size_t area = large_calls_++ % kLargeAreas;
    large_area_used_by_[area] = call;
    return area;
  }
  std::byte* large_area(int rank, std::size_t area) const { return members_[std::size_t(rank)]->large[area]; }

  // Whether a large allgather lends its blocks to be read in place: every
  // member can read every other's memory with process_vm_readv (ptrace rules,
  // VIASTACK_SHM_CMA), and no node is oversubscribed. Lending costs a second
  // wait (for the readers), which costs a context switch when ranks share a
  // core: 4 ranks on 2 cores, 64 KiB-1 MiB, took 0.9-1.0x Open MPI's time
  // lending against 0.4-0.85x through the large areas; 2 ranks 0.9-1.0x
  // against 4-9x. Asked of all members at the first call that wants to know
  // (a collective point: every member makes that call), agreed on by all, and kept.
  bool single_copy() {
    if (single_copy_ == Unknown) {
      std::uint32_t no_lending = !via::config::boolean("VIASTACK_SHM_CMA") || via::job_outnumbers_cpus_on_this_host();
      std::uint32_t ignored = 0;
      // A barrier: every member has filled in its control (in its constructor) before it takes part in this.
      allreduce_max_u32(comm_, 0, ignored);
      for (int r = 0; r < n_ && !no_lending; ++r) {
        std::uint64_t value = 0;
        no_lending = r != me_ && !(read_from_process(control(r).pid, &value, control(r).probe, sizeof value) &&
                                    value == kProbeValue);
      }
      std::uint32_t no_lending_anywhere = 1;
      allreduce_max_u32(comm_, no_lending, no_lending_anywhere);
      single_copy_ = no_lending_anywhere ? No : Yes;
    }
    return single_copy_ == Yes;
  }
  int pid(int rank) const { return control(rank).pid; }
  // Every member has finished `call`: what this member lent for it (its buffer, read by the others) is its own again.
  void wait_all_finished(std::uint64_t call) { wait_all_done_through(call); }
  // This member's data for `call` (bytes of it per block) is in place; with
  // `finished`, it has nothing to read in this call either.
  void post(std::uint64_t call, std::uint64_t bytes, bool finished) {
    if (finished) control(me_).done.store(call, std::memory_order_relaxed);
    deliver(me_, call, bytes);
    wake_sleepers();
  }
  // A scatter's root: member `rank`'s block (bytes of it) is in that member's
  // buffer for `call` (the flag is raised by finish or post).
  void deliver(int rank, std::uint64_t call, std::uint64_t bytes) {
    Buffer& buffer = slot(rank, call);
    buffer.bytes = bytes;
    buffer.posted.store(call, std::memory_order_release);
  }
  void finish(std::uint64_t call) {
    control(me_).done.store(call, std::memory_order_release);
    wake_sleepers();
  }
  void wait_posted(int rank, std::uint64_t call) {
    wait_until([&] { return slot(rank, call).posted.load(std::memory_order_acquire) >= call; });
  }
  void wait_all_posted(std::uint64_t call) {
    wait_until([&] {
      for (int r = 0; r < n_; ++r)
        if (r != me_ && slot(r, call).posted.load(std::memory_order_acquire) < call) return false;
      return true;
    });
  }

 private:
  MemberControl& control(int rank) const { return members_[std::size_t(rank)]->control; }
  // Every member has finished `call` (and so every call before it).
  void wait_all_done_through(std::uint64_t call) {
    if (call <= all_done_through_) return;
    wait_until([&] {
      std::uint64_t least = ~std::uint64_t{0};
      for (int r = 0; r < n_; ++r) least = std::min(least, control(r).done.load(std::memory_order_acquire));
      all_done_through_ = least;
      return least >= call;
    });
  }
  Buffer& slot(int rank, std::uint64_t call) const { return members_[std::size_t(rank)]->buffers[call % kBuffers]; }

  template <class Ready>
  void wait_until(Ready&& ready) {
    if (ready()) return;
    P2P& p2p = runtime().p2p();
    const Clock::time_point start = Clock::now();
    Clock::time_point next_liveness_check{};
    bool may_sleep = false;
    p2p.wait_until([&] {
      if (ready()) return true;
      const Clock::time_point now = Clock::now();
      if (!may_sleep) {
        if (now - start < may_sleep_after_) return false;
        // Said before the flag is read again: whoever raises it after this read sees it and wakes us.
        control(me_).may_sleep.store(1, std::memory_order_relaxed);
        // The membarrier, unless some member's raises fence on their own anyway.
        if (raise_fence() == RaiseFence::needed)
          std::atomic_thread_fence(std::memory_order_seq_cst);
        else
          via::fence_before_sleep();
        may_sleep = true;
        next_liveness_check = now + kLivenessInterval;
        return ready();
      }
      if (now >= next_liveness_check) {
        check_members_alive();
        next_liveness_check = now + kLivenessInterval;
      }
      return false;
    });
    if (!may_sleep) return;
    control(me_).may_sleep.store(0, std::memory_order_relaxed);
    // The wake-ups sent meanwhile (or about to arrive, from a member that saw
    // the word just before it was cleared: the next long wait takes those).
    while (p2p.take_arrived(MPI_ANY_SOURCE, kWakeTag, comm_.collective_context())) {
    }
  }

  // After a flag is raised: a member that may be asleep gets a message, whose
  // arrival wakes it. The raise must be ordered before the look at may_sleep:
  // by a full fence here, unless every member runs the sleeper's membarrier
  // (via::sleeper_fences). That fence waited for the raise's line to reach
  // the other core at every call: a scatter of 4 B on 2 ranks took 0.166 us
  // a call against Open MPI's 0.098 where a line takes 400 ns to go to the
  // other core and back.
  void wake_sleepers() {
    if (raise_fence() == RaiseFence::not_needed)
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the look after the raise
    else
      std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int r = 0; r < n_; ++r)
      if (r != me_ && control(r).may_sleep.load(std::memory_order_relaxed))
        runtime().p2p().try_send_eager(nullptr, 0, datatype_of(MPI_BYTE), r, kWakeTag, comm_,
                                       comm_.collective_context());
  }

  // Whether a raise needs a fence of its own: not_needed once every member
  // said it runs the membarrier, needed for good once one (this one first)
  // said it does not; unknown while a member has not said yet (its flag is
  // 0 until its constructor runs), and a raise then fences.
  enum class RaiseFence { unknown, needed, not_needed };
  RaiseFence raise_fence() {
    if (raise_fence_ != RaiseFence::unknown) return raise_fence_;
    RaiseFence known = RaiseFence::not_needed;
    for (int r = 0; r < n_; ++r) {
      const std::uint32_t said = control(r).sleeper_fences.load(std::memory_order_relaxed);
      if (said == kFencesNot) return raise_fence_ = RaiseFence::needed;
      if (said != kFencesBeforeSleep) known = RaiseFence::unknown;
    }
    return raise_fence_ = known;
  }

  void check_members_alive() const {
    const std::uint64_t pid_namespace = control(me_).pid_namespace;
    for (int r = 0; r < n_; ++r) {
      const MemberControl& c = control(r);
      if (r == me_ || c.pid == 0 || c.start_time == 0 || c.pid_namespace != pid_namespace) continue;
      if (start_time_of(c.pid) == c.start_time) continue;
      abort_job("shared-memory collective", "rank " + std::to_string(comm_.world_rank(r)) + " (pid " +
                                                std::to_string(c.pid) + ") ended while this rank waited for it");
    }
  }

  const Communicator& comm_;
  int me_, n_;
  std::unique_ptr<WindowMemory> memory_;
  std::vector<Member*> members_;  // empty: not for shared memory
  std::uint64_t calls_ = 0;
  RaiseFence raise_fence_ = RaiseFence::unknown;
  std::uint64_t all_done_through_ = 0;  // every member had finished this call when last looked at
  std::uint64_t large_calls_ = 0;
  std::uint64_t large_area_used_by_[kLargeAreas] = {};  // the call that last staged its data in each large area
  Clock::duration may_sleep_after_{};
  enum { Unknown, Yes, No } single_copy_ = Unknown;
};

namespace {

// The blocks of a gather(v) or scatter(v) that go as messages (kByMessage),
// all in flight at once; nothing allocated, nothing polled when there are none.
class BlockMessages {
 public:
  explicit BlockMessages(const Communicator& comm) : comm_(comm) {}
  void send(const void* buf, std::size_t count, const Datatype& type, int dest) {
    runtime().p2p().post_send(posted(Request::Type::send), buf, count, type, dest, kBlockTag,
                              comm_.collective_context(), SendMode::standard);
  }
  void recv(void* buf, std::size_t count, const Datatype& type, int source) {
    runtime().p2p().post_recv(posted(Request::Type::recv), buf, count, type, source, kBlockTag,
                              comm_.collective_context());
  }
  // Waits for every one; false when a received one did not fit its block.
  bool wait_all() {
    if (requests_.empty()) return true;
    runtime().p2p().wait_until([&] {
      return std::all_of(requests_.begin(), requests_.end(), [](const auto& r) { return r->complete; });
    });
    return std::all_of(requests_.begin(), requests_.end(), [](const auto& r) { return r->error == MPI_SUCCESS; });
  }

 private:
  Request& posted(Request::Type type) { return *requests_.emplace_back(std::make_unique<Request>(type, &comm_)); }
  const Communicator& comm_;
  std::vector<std::unique_ptr<Request>> requests_;
};

}  // namespace

namespace node_collectives {

bool barrier(const Communicator& comm) {
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  const std::uint64_t call = node->begin();
  node->post(call, 0, true);
  node->wait_all_posted(call);
  return true;
}

// Between two members a large bcast goes as one message (kByMessage), where
// staging costs two copies with the data crossing between the cores dirty,
// one after the other while the data is one large area (2 ranks, 1 MiB:
// 120-340 us a call staged, 37-55 us as a message). From 64 KiB where its
// rendezvous read goes the way that measured faster (the rings or single
// copy, VIASTACK_ADAPTIVE_READ_MIN: every rank has a CPU and CMA is on):
// on a machine whose cores passed dirty data at 2-4 GB/s in some runs,
// 64 / 256 KiB staged took 16 / 60 us a call in those runs, as a message 12
// / 31; in its other runs 4-6 / 17-32 against 7-8 / 20-24, Open MPI's 8-11 /
// 28-36 (docs/PERFORMANCE.md). Elsewhere from 512 KiB, where either way
// took as long. Only the root decides (it posts kByMessage).
bool by_message_between_two(int members, std::size_t bytes) {
  static const std::size_t from =
      via::config::boolean("VIASTACK_SHM_CMA") && !via::job_outnumbers_cpus_on_this_host() ? 64 * 1024
                                                                                            : kLargeBytes / 2 + 1;
  return members == 2 && bytes >= from;
}

// Only the root's size decides the way (a receiver's may differ, in an
// erroneous call that must end in MPI_ERR_TRUNCATE, not a hang): the root
// posts its size with every call. Up to kSlotBytes the data is in its slot;
// above, in its large areas, in pieces of kLargeBytes, a call each: the root
// stages the next piece while the members copy the last one out, and only it
// waits, for an area to be free (the members count the large calls alike, so
// that their take_large_area stays in step). A rank whose buffer is shorter
// copies out what it takes and goes through every piece all the same.
bool bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& comm) {
  const std::size_t bytes = count * type.size();
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  std::uint64_t call = node->begin();
  if (node->rank() == root) {
    if (bytes <= kSlotBytes) {
      node->wait_buffers_free(call);
      to_slot(buf, count, type, node->buffer(root, call));
      node->post(call, bytes, true);
      return true;
    }
    if (by_message_between_two(node->size(), bytes)) {
      node->wait_buffers_free(call);
      node->post(call, kByMessage, true);
      send_typed(buf, count, type, 1 - root, kBlockTag, comm, comm.collective_context());
      return true;
    }
    // A non-contiguous type's data in more than one piece: packed once, then staged piece by piece.
    std::vector<std::byte> packed;
    if (!type.contiguous() && bytes > kLargeBytes) {
      packed.resize(bytes);
      type.pack(buf, count, packed.data());
    }
    const auto* source = packed.empty() ? static_cast<const std::byte*>(buf) : packed.data();
    for (std::size_t first = 0; first < bytes; first += kLargeBytes) {
      if (first > 0) call = node->begin();
      std::byte* const area = node->large_area(root, node->take_large_area(call));
      if (type.contiguous() || !packed.empty())
        via::copy_memory(area, source + first, std::min(kLargeBytes, bytes - first));
      else
        type.pack(buf, count, area);  // the only piece
      node->post(call, bytes, true);
    }
    return true;
  }
  node->wait_posted(root, call);
  const std::uint64_t sent = node->posted_bytes(root, call);
  if (sent == kByMessage) {
    node->finish(call);
    recv_typed(buf, count, type, root, kBlockTag, comm, comm.collective_context());
    return true;
  }
  const std::size_t taken = std::min<std::uint64_t>(sent, bytes);
  if (sent <= kSlotBytes) {
    from_slot(node->buffer(root, call), taken, type, buf);
    node->finish(call);  // before the error, so that the root is not held up by it
  } else {
    // A non-contiguous type's share of more than one piece: gathered, then unpacked once.
    std::vector<std::byte> packed(!type.contiguous() && taken > kLargeBytes ? taken : 0);
    for (std::size_t first = 0; first < sent; first += kLargeBytes) {
      if (first > 0) {
        call = node->begin();
        node->wait_posted(root, call);
      }
      const std::byte* const area = node->large_area(root, node->count_large_call(call));
      if (first < taken) {
        const std::size_t length = std::min(kLargeBytes, taken - first);
        if (type.contiguous())
          via::copy_memory(static_cast<std::byte*>(buf) + first, area, length);
        else if (packed.empty())
          type.unpack(area, length, buf);  // the only piece it takes
        else
          via::copy_memory(packed.data() + first, area, length);
      }
      node->finish(call);
    }
    if (!packed.empty()) type.unpack(packed.data(), taken, buf);
  }
  require(sent <= bytes, MPI_ERR_TRUNCATE, "the root broadcast more data than this rank's buffer holds");
  return true;
}

namespace {

// recv = x(0) op x(1) op ... op x(n-1), folded from the last so that any op
// keeps rank order and every member that folds gets the same bits.
template <class Contribution>
void fold_in_rank_order(int n, Contribution&& contribution, void* recv, std::size_t count, const Datatype& type,
                        const Op& op) {
  via::move_memory(recv, contribution(n - 1), count * type.size());
  for (int r = n - 2; r >= 0; --r) op.apply(contribution(r), recv, count, type);
}

// The op works on the slots in place, so the type must be contiguous. A
// non-commutative op stays with the point-to-point algorithms, whose
// bracketing MPI_Ireduce and MPI_Iallreduce share: the blocking and the
// non-blocking call then agree bit for bit even for an op that is not quite
// associative (as floating-point arithmetic is not).
// `limit`: the most bytes the call takes here (kSlotBytes but for allreduce).
bool reduces_here(std::size_t bytes, std::size_t limit, const Datatype& type, const Op& op) {
  return bytes <= limit && type.contiguous() && op.commutative();
}

// The node's collectives for a reduction of `bytes` of `type` by `op`, the
// op checked against the type; null when they do not take it (the caller's
// algorithm runs instead).
NodeCollectives* node_for_reduction(std::size_t bytes, const Datatype& type, const Op& op, const Communicator& comm,
                                    std::size_t limit = kSlotBytes) {
  if (!reduces_here(bytes, limit, type, op)) return nullptr;
  NodeCollectives* node = NodeCollectives::of(comm);
  if (node) op.check_applies_to(type);
  return node;
}

}  // namespace

bool reduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, int root,
            const Communicator& comm) {
  const std::size_t bytes = count * type.size();
  NodeCollectives* node = node_for_reduction(bytes, type, op, comm);
  if (!node) return false;
  if (bytes == 0) return true;
  const std::uint64_t call = node->begin();
  const int me = node->rank();
  // The root's own data goes into its slot too when it is the result's buffer (in place).
  const bool in_place = send == recv;
  if (me != root || in_place) {
    node->wait_buffers_free(call);
    via::copy_memory(node->buffer(me, call), send, bytes);
  }
  if (me != root) {
    node->post(call, bytes, true);
    return true;
  }
  node->wait_all_posted(call);
  fold_in_rank_order(
      node->size(), [&](int r) -> const void* { return r == me && !in_place ? send : node->buffer(r, call); }, recv,
      count, type, op);
  node->finish(call);
  return true;
}

namespace {

// Above kSlotBytes, in pieces of at most kLargeBytes: every member copies its
// piece of the vector into its large area; member r reduces part r of the
// piece, in place in its own area, from part r of every other area (the one
// rank that reads those bytes); then every member copies the n reduced parts
// out of the n areas into recv. Two waits per piece, however many ranks (a
// ring waits 2(n-1) times, each a context switch when ranks share a core),
// and every member gets the same bits (each part is reduced once).
void allreduce_large(NodeCollectives& node, const std::byte* send, std::byte* recv, std::size_t count,
                     const Datatype& type, const Op& op) {
  const int n = node.size(), me = node.rank();
  const std::size_t element = type.size(), piece_elements = kLargeBytes / element;
  for (std::size_t first = 0; first < count; first += piece_elements) {
    const std::size_t elements = std::min(piece_elements, count - first);
    const std::uint64_t copied_in = node.begin(), reduced = node.begin();
    const std::size_t area = node.take_large_area(copied_in);
    node.wait_buffers_free(reduced);
    // In place, send is recv: read here, before anything lands in recv (only this rank writes it).
    via::copy_memory(node.large_area(me, area), send + first * element, elements * element);
    node.post(copied_in, elements * element, false);
    node.wait_all_posted(copied_in);
    const auto [part_first, part_length] = block_range(elements, n, me);
    std::byte* const acc = node.large_area(me, area) + part_first * element;
    for (int step = 1; step < n; ++step) {  // from the next rank on: the ranks read different areas at a time
      const int r = (me + step) % n;
      op.apply(node.large_area(r, area) + part_first * element, acc, part_length, type);
    }
    node.post(reduced, elements * element, false);
    node.wait_all_posted(reduced);
    for (int step = 0; step < n; ++step) {
      const int r = (me + step) % n;
      const auto [first_of_r, length_of_r] = block_range(elements, n, r);
      via::copy_memory(recv + (first + first_of_r) * element, node.large_area(r, area) + first_of_r * element,
                  length_of_r * element);
    }
    node.finish(reduced);
  }
}

}  // namespace

bool allreduce(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op,
               const Communicator& comm) {
  const std::size_t bytes = count * type.size();
  const bool large = bytes > kSlotBytes && type.size() <= kLargeBytes;
  NodeCollectives* node = node_for_reduction(bytes, type, op, comm, large ? bytes : kSlotBytes);
  if (!node) return false;
  if (bytes == 0) return true;
  if (large) {
    allreduce_large(*node, static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), count, type, op);
    return true;
  }
  const std::uint64_t call = node->begin();
  node->wait_buffers_free(call);
  via::copy_memory(node->buffer(node->rank(), call), send, bytes);
  node->post(call, bytes, false);
  node->wait_all_posted(call);
  fold_in_rank_order(node->size(), [&](int r) -> const void* { return node->buffer(r, call); }, recv, count, type, op);
  node->finish(call);
  return true;
}

bool gather(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv, int root,
            const Communicator& comm) {
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  const std::uint64_t call = node->begin();
  const int me = node->rank();
  if (me != root) {
    const std::size_t bytes = send_count * send_type.size();
    const bool by_message = bytes > kSlotBytes;
    node->wait_buffers_free(call);
    if (!by_message) to_slot(send, send_count, send_type, node->buffer(me, call));
    node->post(call, by_message ? kByMessage : bytes, true);
    if (by_message) send_typed(send, send_count, send_type, root, kBlockTag, comm, comm.collective_context());
    return true;
  }
  copy_typed(send, send_count, send_type, writable_block(recv, me), block_count(recv, me), block_type(recv, me));
  node->wait_all_posted(call);
  bool truncated = false;
  BlockMessages messages(comm);
  for (int r = 0; r < node->size(); ++r) {
    if (r == me) continue;
    const std::uint64_t sent = node->posted_bytes(r, call);
    if (sent == kByMessage) {
      messages.recv(writable_block(recv, r), block_count(recv, r), block_type(recv, r), r);
      continue;
    }
    truncated |= sent > block_bytes(recv, r);
    from_slot(node->buffer(r, call), std::min<std::uint64_t>(sent, block_bytes(recv, r)), block_type(recv, r),
              writable_block(recv, r));
  }
  node->finish(call);
  truncated |= !messages.wait_all();
  require(!truncated, MPI_ERR_TRUNCATE, "a rank sent more data than the root's block for it holds");
  return true;
}

bool scatter(const Blocks& send, void* recv, std::size_t recv_count, const Datatype& recv_type, int root,
             const Communicator& comm) {
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  const std::uint64_t call = node->begin();
  const int me = node->rank();
  if (me == root) {
    // Each block straight into its member's own buffer of this call, or as a message.
    node->wait_buffers_free(call);
    BlockMessages messages(comm);
    for (int r = 0; r < node->size(); ++r) {
      if (r == me) continue;
      const std::size_t bytes = block_bytes(send, r);
      if (bytes <= kSlotBytes)
        to_slot(block_address(send, r), block_count(send, r), block_type(send, r), node->buffer(r, call));
      node->deliver(r, call, bytes <= kSlotBytes ? bytes : kByMessage);
    }
    node->finish(call);
    for (int r = 0; r < node->size(); ++r)
      if (r != me && block_bytes(send, r) > kSlotBytes)
        messages.send(block_address(send, r), block_count(send, r), block_type(send, r), r);
    copy_typed(block_address(send, me), block_count(send, me), block_type(send, me), recv, recv_count, recv_type);
    messages.wait_all();
    return true;
  }
  node->wait_posted(me, call);  // the root's block for this member, in its own buffer
  const std::uint64_t sent = node->posted_bytes(me, call);
  const std::size_t bytes = recv_count * recv_type.size();
  if (sent != kByMessage) from_slot(node->buffer(me, call), std::min<std::uint64_t>(sent, bytes), recv_type, recv);
  node->finish(call);
  if (sent == kByMessage) {
    recv_typed(recv, recv_count, recv_type, root, kBlockTag, comm, comm.collective_context());
    return true;
  }
  require(sent <= bytes, MPI_ERR_TRUNCATE, "the root sent more data than this rank's buffer holds");
  return true;
}

bool allgatherv(const void* send, std::size_t send_count, const Datatype& send_type, const Blocks& recv,
                const Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  std::size_t largest = 0, total = 0;  // the same on every member: all know every block's size
  for (int r = 0; r < n; ++r) {
    largest = std::max(largest, block_bytes(recv, r));
    total += block_bytes(recv, r);
  }
  if (largest > kLargeBytes) return false;
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  if (total == 0) return true;
  const std::uint64_t call = node->begin();
  const std::size_t bytes = send_count * send_type.size();
  // Blocks above kSlotBytes: where the members can read each other's memory,
  // a contiguous block is lent, its address posted, and every reader copies it
  // straight into its own block (process_vm_readv: one copy); otherwise it goes
  // through a large area (one copy in, one out per reader). One wait for the
  // data either way (a ring of messages waits n-1 times), and a lender waits
  // for its readers before its buffer is the caller's again.
  const bool large = largest > kSlotBytes;
  const std::size_t area = large ? node->take_large_area(call) : 0;
  if (!large) node->wait_buffers_free(call);
  const bool lent = large && node->single_copy() && send_type.contiguous();
  const auto staged = [&](int r) { return large ? node->large_area(r, area) : node->buffer(r, call); };
  // Where member r's block is in its own memory; null: staged.
  const auto lent_by = [&](int r) { return *reinterpret_cast<const void* const*>(node->buffer(r, call)); };
  if (large) {
    const void* address = lent ? send : nullptr;
    std::memcpy(node->buffer(me, call), &address, sizeof address);
  }
  // More than its block (an erroneous call) does not fit the slot: the others
  // see the size alone and fail with MPI_ERR_TRUNCATE, after the call, as this rank does.
  if (!lent && bytes <= (large ? kLargeBytes : kSlotBytes)) to_slot(send, send_count, send_type, staged(me));
  node->post(call, bytes, false);
  copy_typed(send, send_count, send_type, writable_block(recv, me), block_count(recv, me), block_type(recv, me));
  node->wait_all_posted(call);
  bool truncated = false, unreadable = false;
  for (int step = 1; step < n; ++step) {  // from the next rank on: the readers of one block spread out
    const int r = (me + step) % n;
    const std::uint64_t sent = node->posted_bytes(r, call);
    truncated |= sent > block_bytes(recv, r);
    const std::size_t taken = std::min<std::uint64_t>(sent, block_bytes(recv, r));
    const void* const remote = large ? lent_by(r) : nullptr;
    if (!remote) {
      from_slot(staged(r), taken, block_type(recv, r), writable_block(recv, r));
    } else if (block_type(recv, r).contiguous()) {
      unreadable |= !read_from_process(node->pid(r), writable_block(recv, r), remote, taken);
    } else {
      std::vector<std::byte> packed(taken);
      unreadable |= !read_from_process(node->pid(r), packed.data(), remote, taken);
      from_slot(packed.data(), taken, block_type(recv, r), writable_block(recv, r));
    }
  }
  node->finish(call);
  if (lent) node->wait_all_finished(call);
  require(!unreadable, MPI_ERR_OTHER, "MPI_Allgather(v): a rank's block could not be read from its process");
  require(!truncated && bytes <= block_bytes(recv, me), MPI_ERR_TRUNCATE,
          "a rank sent more data than its block holds");
  return true;
}

bool alltoall(const Blocks& send, const Blocks& recv, const Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const std::size_t block = block_bytes(recv, 0);  // every rank's, on every rank
  if (block * std::size_t(n) > kSlotBytes) return false;
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  if (block == 0) return true;
  const std::uint64_t call = node->begin();
  // This rank's block for rank r at r * sent in its buffer. More than the
  // receive blocks (an erroneous call) may not fit: as in allgatherv, the
  // others then see the size alone and fail with MPI_ERR_TRUNCATE.
  const std::size_t sent_here = block_bytes(send, 0);
  node->wait_buffers_free(call);
  if (sent_here * std::size_t(n) <= kSlotBytes)
    for (int r = 0; r < n; ++r)
      if (r != me)
        to_slot(block_address(send, r), block_count(send, r), block_type(send, r),
                node->buffer(me, call) + std::size_t(r) * sent_here);
  node->post(call, sent_here, false);
  copy_typed(block_address(send, me), block_count(send, me), block_type(send, me), writable_block(recv, me),
             block_count(recv, me), block_type(recv, me));
  node->wait_all_posted(call);
  bool truncated = false;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const std::uint64_t sent = node->posted_bytes(r, call);
    truncated |= sent > block;
    if (sent * std::uint64_t(n) > kSlotBytes) continue;
    from_slot(node->buffer(r, call) + std::size_t(me) * sent, std::min<std::uint64_t>(sent, block),
              block_type(recv, r), writable_block(recv, r));
  }
  node->finish(call);
  require(!truncated && sent_here <= block, MPI_ERR_TRUNCATE, "a rank sent more data than its block holds");
  return true;
}

namespace {
// Where an alltoallv's block for one member is in the sender's buffer: a
// table of these at the buffer's start, the blocks after it.
struct BlockPlace {
  std::uint64_t offset, bytes;  // bytes kByMessage: sent as a message
};
constexpr std::size_t kPlacesBytes = sizeof(BlockPlace) * kMaxRanks;
}  // namespace

bool alltoallv(const Blocks& send, const Blocks& recv, const Communicator& comm) {
  NodeCollectives* node = NodeCollectives::of(comm);
  if (!node) return false;
  const int n = node->size(), me = node->rank();
  const std::uint64_t call = node->begin();
  node->wait_buffers_free(call);
  std::byte* mine = node->buffer(me, call);
  auto* places = reinterpret_cast<BlockPlace*>(mine);
  // In rank order while they fit; a block that does not goes as a message.
  std::size_t offset = kPlacesBytes;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const std::size_t bytes = block_bytes(send, r);
    if (bytes > kSlotBytes - offset) {
      places[r] = {0, kByMessage};
      continue;
    }
    to_slot(block_address(send, r), block_count(send, r), block_type(send, r), mine + offset);
    places[r] = {offset, bytes};
    offset += bytes;
  }
  node->post(call, 0, false);
  BlockMessages messages(comm);
  for (int r = 0; r < n; ++r)
    if (r != me && places[r].bytes == kByMessage)
      messages.send(block_address(send, r), block_count(send, r), block_type(send, r), r);
  bool truncated = block_bytes(send, me) > block_bytes(recv, me);
  copy_typed(block_address(send, me), block_count(send, me), block_type(send, me), writable_block(recv, me),
             block_count(recv, me), block_type(recv, me));
  node->wait_all_posted(call);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const BlockPlace place = reinterpret_cast<const BlockPlace*>(node->buffer(r, call))[me];
    if (place.bytes == kByMessage) {
      messages.recv(writable_block(recv, r), block_count(recv, r), block_type(recv, r), r);
      continue;
    }
    truncated |= place.bytes > block_bytes(recv, r);
    from_slot(node->buffer(r, call) + place.offset, std::min<std::uint64_t>(place.bytes, block_bytes(recv, r)),
              block_type(recv, r), writable_block(recv, r));
  }
  node->finish(call);
  truncated |= !messages.wait_all();
  require(!truncated, MPI_ERR_TRUNCATE, "a rank sent more data than its block holds");
  return true;
}

bool reduce_scatter(const void* send, void* recv, std::span<const int> counts, const Datatype& type, const Op& op,
                    const Communicator& comm) {
  const int me = comm.rank();
  std::size_t total = 0, before_mine = 0;  // elements, the same on every rank: all know every count
  for (int r = 0; r < comm.size(); ++r) {
    if (r == me) before_mine = total;
    total += std::size_t(counts[std::size_t(r)]);
  }
  NodeCollectives* node = node_for_reduction(total * type.size(), type, op, comm);
  if (!node) return false;
  if (total == 0) return true;
  const std::uint64_t call = node->begin();
  // The whole vector into the slot (in place, recv is the input: read before the result lands).
  node->wait_buffers_free(call);
  via::copy_memory(node->buffer(me, call), send, total * type.size());
  node->post(call, total * type.size(), false);
  node->wait_all_posted(call);
  const std::size_t offset = before_mine * type.size();
  fold_in_rank_order(
      node->size(), [&](int r) -> const void* { return node->buffer(r, call) + offset; }, recv,
      std::size_t(counts[std::size_t(me)]), type, op);
  node->finish(call);
  return true;
}

// Rank r folds in rank order as allreduce does; the non-blocking calls' chain
// and recursive doubling bracket otherwise, which a commutative op allows.
bool scan(const void* send, void* recv, std::size_t count, const Datatype& type, const Op& op, bool inclusive,
          const Communicator& comm) {
  const std::size_t bytes = count * type.size();
  NodeCollectives* node = node_for_reduction(bytes, type, op, comm);
  if (!node) return false;
  if (bytes == 0) return true;
  const std::uint64_t call = node->begin();
  const int me = node->rank();
  // Each rank's vector into its slot for the ranks after it (in place, before the result overwrites it).
  if (me < node->size() - 1) {
    node->wait_buffers_free(call);
    via::copy_memory(node->buffer(me, call), send, bytes);
  }
  node->post(call, bytes, me == 0);
  const int folded = inclusive ? me + 1 : me;  // ranks 0..folded-1 make this rank's result
  if (me == 0) {
    if (inclusive) std::memmove(recv, send, bytes);
    return true;  // exscan's rank 0: recv is left alone
  }
  for (int r = 0; r < me; ++r) node->wait_posted(r, call);
  // This rank's own vector, when folded in, is read first (fold_in_rank_order starts from the last): in place too.
  fold_in_rank_order(
      folded, [&](int r) -> const void* { return r == me ? send : node->buffer(r, call); }, recv, count, type, op);
  node->finish(call);
  return true;
}

}  // namespace node_collectives

}  // namespace viastack::mpi
