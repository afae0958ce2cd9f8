// The Split-C runtime over Active Messages, the way Split-C ran over GAM:
// get = request -> reply carrying the value; put = request carrying the
// value, whose handler does not reply (AM acknowledges it, in batches);
// store = the same, and the owner counts the bytes; bulk operations are AM
// stores and gets; reductions gather at rank 0 and come back as one request
// per rank.
#include <link.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <via/config.hpp>

#include "heap.hpp"
#include "splitc/splitc.hpp"

namespace splitc {
namespace detail {

InlineState inline_state;

namespace {

using am::Word;

// Copies a small value (at most kMaxSmall bytes) with fixed-size copies for
// the usual sizes: a memcpy of a variable length is a library call, on the
// path of every small get, put and store.
void copy_small(void* to, const void* from, std::size_t bytes) {
  switch (bytes) {
    case 4: std::memcpy(to, from, 4); break;
    case 8: std::memcpy(to, from, 8); break;
    case 16: std::memcpy(to, from, 16); break;
    default: std::memcpy(to, from, std::min(bytes, kMaxSmall)); break;
  }
}

// A small value in the one or two words it travels in, and back. Each word
// is read and written at the value's own width, never through a word
// array in memory: the CPU cannot forward a load from narrower stores
// still in its store buffer (a 4-byte value read back as a word), nor one
// spanning two stores (two argument words just written, read back as one
// 16-byte load, as the compiler does for a Word[2] built from them), and
// either load waits.
struct SmallValue {
  Word w0 = 0, w1 = 0;
};
SmallValue read_small(const void* from, std::size_t bytes) {
  SmallValue v;
  switch (bytes) {
    case 4: {
      std::uint32_t low;
      std::memcpy(&low, from, 4);
      v.w0 = low;
      break;
    }
    case 8: std::memcpy(&v.w0, from, 8); break;
    case 16:
      std::memcpy(&v.w0, from, 8);
      std::memcpy(&v.w1, static_cast<const std::byte*>(from) + 8, 8);
      break;
    default: {
      Word words[2] = {0, 0};
      std::memcpy(words, from, std::min(bytes, kMaxSmall));
      v = {words[0], words[1]};
    }
  }
  return v;
}
void write_small(void* to, std::size_t bytes, Word w0, Word w1) {
  switch (bytes) {
    case 4: {
      const auto low = std::uint32_t(w0);
      std::memcpy(to, &low, 4);
      break;
    }
    case 8: std::memcpy(to, &w0, 8); break;
    case 16:
      std::memcpy(to, &w0, 8);
      std::memcpy(static_cast<std::byte*>(to) + 8, &w1, 8);
      break;
    default: {
      const Word words[2] = {w0, w1};
      std::memcpy(to, words, std::min(bytes, kMaxSmall));
    }
  }
}

std::uintptr_t address_of(Word w) { return std::uintptr_t(w & ((Word(1) << kLengthShift) - 1)); }
std::size_t length_of(Word w) { return std::size_t(w >> kLengthShift); }

constexpr std::size_t kDefaultSegment = 64u << 20;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kPruneFutures = 256;  // completed bulk operations are dropped past this many
constexpr int kModuleShift = 48;             // code addresses: module index above, offset below
constexpr const char* kOwner = "Split-C";    // of AM handlers kFirstHandler..kLastHandler

// A module (executable or shared object) as loaded here. Every rank runs the
// same program with the same libraries in the same order, so the index names
// the same module everywhere, whatever address it was loaded at.
struct Module {
  std::uintptr_t bias, low, high;
};

struct AtomicWait {
  bool done = false;
  void* result = nullptr;
  std::size_t result_bytes = 0;
};

// What travels in an atomic request's payload before the arguments.
struct AtomicHeader {
  Word call, fn, target, target_bytes, result_bytes;
};

// What another rank asked for, in a refusal (kRefused).
enum class Access : Word { get, put, store, atomic };

// Memory the program registered for other ranks' small accesses (register_memory).
struct Region {
  std::uintptr_t begin, end;
};

// Frees a segment AM no longer uses. A process that ends without finalize
// destroys this library's state before AM's runtime, which still has the
// segment registered (a peer's RDMA may still reach it): then it is left
// to the process's end.
struct FreeSegment {
  void operator()(std::byte* p) const {
    if (am::segment(am::my_proc()) != p) std::free(p);
  }
};

struct State {
  bool enabled = false;
  int me = 0, procs = 1;
  // This rank's AM segment, allocated here and given to am::enable: compact
  // stores (compact_word) from faster ranks may arrive before it returns.
  std::unique_ptr<std::byte[], FreeSegment> segment;
  std::size_t segment_bytes = 0;
  std::vector<Region> regions;  // by address, none overlapping
  Heap local_heap, symmetric_heap;
  std::size_t in_flight = 0;             // small gets not yet answered
  std::vector<am::Future> bulk_in_flight;
  std::uint64_t stored_bytes = 0;        // store bytes arrived here, not yet taken by store_sync
  unsigned local_ops = 0;                // local gets, puts and stores (poll_now_and_then)
  std::string failure;                   // a returned message: the next wait throws it
  unsigned contributions = 0;            // rank 0: reduction inputs received
  Word accumulator = 0;
  bool result_ready = false;             // ranks > 0: the reduction's result arrived
  Word result = 0;
  std::vector<Module> modules;
  std::vector<std::byte*> segments;  // inline_state.segments
  std::vector<am::DeferredRoom*> rooms;  // inline_state.rooms
};
State state;

// The rule for what other ranks' accesses may touch here (register_memory
// in splitc.hpp): a range within this rank's segment, or within one region
// the program registered. Bulk transfers, here and at other ranks (AM checks
// them the same way), reach the segment only.
bool in_segment(std::uintptr_t address, std::size_t bytes) {
  // An address below the base wraps to more than the segment's size.
  const std::uintptr_t offset = address - reinterpret_cast<std::uintptr_t>(state.segment.get());
  return bytes <= state.segment_bytes && offset <= state.segment_bytes - bytes;
}
bool in_registered_region(std::uintptr_t address, std::size_t bytes) {
  // The last region that starts at or below the address.
  const auto after = std::upper_bound(state.regions.begin(), state.regions.end(), address,
                                      [](std::uintptr_t a, const Region& r) { return a < r.begin; });
  if (after == state.regions.begin()) return false;
  const Region& r = *std::prev(after);
  return bytes <= r.end - r.begin && address - r.begin <= r.end - r.begin - bytes;
}
bool reachable(std::uintptr_t address, std::size_t bytes) {
  return in_segment(address, bytes) || in_registered_region(address, bytes);
}

// Answers an access outside what reachable() allows, instead of making it.
[[gnu::cold, gnu::noinline]] void refuse(am::Token t, Access access, std::uintptr_t address, std::size_t bytes,
                                         Word waiter) {
  (void)t.reply(kRefused, Word(access), Word(address), Word(bytes), waiter);
}

// Writes the value of a compact_word (a put or store) at its offset in this
// rank's segment, or refuses it if it does not fit there: its offset is
// below 2^30, not necessarily below the segment's size. (A width of 8,
// which no sender makes, writes the value zero-extended.) The refusal is
// the last call, so that the handler needs no stack frame of its own.
void write_compact(am::Token t, Access access, Word w) {
  const std::size_t bytes = std::size_t(1) << ((w >> kCompactOffsetBits) & 3);
  const std::size_t offset = w & ((Word(1) << kCompactOffsetBits) - 1);
  if (offset + bytes > state.segment_bytes) [[unlikely]]
    return refuse(t, access, reinterpret_cast<std::uintptr_t>(state.segment.get()) + offset, bytes, 0);
  write_small(state.segment.get() + offset, bytes, w >> 32, 0);
  if (access == Access::store) state.stored_bytes += bytes;
}

[[noreturn]] void fail(const std::string& what) { throw error("splitc: " + what); }

void check(am::Status s, const char* what) {
  if (s == am::Status::ok) return;
  std::string why = what;
  why += ": ";
  why += am::last_error();
  fail(why);
}

void check_failure() {
  if (!state.failure.empty()) fail(std::exchange(state.failure, {}));
}

// Keeps the first failure for the next wait to throw.
void note_failure(std::string why) {
  if (state.failure.empty()) state.failure = std::move(why);
}

void check_enabled() {
  if (!state.enabled) fail("not initialised (call splitc::init)");
}

// Handles messages until pred() holds, sleeping in AM's wait between
// messages. Throws if a message came back or was refused, or if AM gives up
// on a rank first: what we wait for may be that rank's to do, and it may
// fail with nothing of ours outstanding to it, so that nothing comes back.
template <class Pred>
void wait_until(Pred pred) {
  check(am::wait_until([&] { return pred() || !state.failure.empty() || am::failed_peers() != 0; }), "wait");
  check_failure();
  if (!pred()) fail("a rank is unreachable (it died, left or stopped answering)");
}

int load_modules(dl_phdr_info* info, std::size_t, void* out) {
  Module m{info->dlpi_addr, UINTPTR_MAX, 0};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    m.low = std::min<std::uintptr_t>(m.low, info->dlpi_addr + ph.p_vaddr);
    m.high = std::max<std::uintptr_t>(m.high, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  static_cast<std::vector<Module>*>(out)->push_back(m);
  return 0;
}

void refresh_modules() {
  state.modules.clear();
  dl_iterate_phdr(load_modules, &state.modules);
}

Word encode_code(std::uintptr_t address) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (std::size_t i = 0; i < state.modules.size(); ++i) {
      const Module& m = state.modules[i];
      if (address >= m.low && address < m.high) return Word(i) << kModuleShift | Word(address - m.bias);
    }
    refresh_modules();  // loaded since init
  }
  fail("atomic: the function lies in no loaded module");
}

std::uintptr_t decode_code(Word code) {
  const std::size_t index = std::size_t(code >> kModuleShift);
  if (index >= state.modules.size()) refresh_modules();
  if (index >= state.modules.size()) fail("atomic: a rank named a module not loaded here");
  return state.modules[index].bias + std::uintptr_t(code & ((Word(1) << kModuleShift) - 1));
}

Word combine(Kind kind, Op op, Word a, Word b) {
  if (kind == Kind::i64 && op == Op::sum) kind = Kind::u64;  // the same bits, without signed overflow
  auto apply = [op](auto x, auto y) {
    switch (op) {
      case Op::sum: return x + y;
      case Op::min: return std::min(x, y);
      default: return std::max(x, y);
    }
  };
  switch (kind) {
    case Kind::i64: return Word(apply(std::int64_t(a), std::int64_t(b)));
    case Kind::u64: return apply(a, b);
    case Kind::f64: return std::bit_cast<Word>(apply(std::bit_cast<double>(a), std::bit_cast<double>(b)));
  }
  return a;
}

// Rank 0 folds one rank's input into the reduction in progress.
void contribute(int src, Word code, Word value) {
  const auto kind = Kind(code & 0xff);
  const auto op = Op((code >> 8) & 0xff);
  const int root = int(code >> 16);
  if (op == Op::bcast) {
    if (src == root) state.accumulator = value;
  } else {
    state.accumulator = state.contributions == 0 ? value : combine(kind, op, state.accumulator, value);
  }
  ++state.contributions;
}

void install_handlers() {
  // Small operations: an address with the value's length (with_length), then the value's words.
  // Every access is checked against what others may reach here (reachable).
  am::set_handler(kGet, [](am::Token t, Word target, Word local) {
    const std::size_t bytes = length_of(target);
    if (!reachable(address_of(target), bytes)) [[unlikely]]
      return refuse(t, Access::get, address_of(target), bytes, 0);
    const SmallValue value = read_small(reinterpret_cast<const void*>(address_of(target)), bytes);
    if (bytes <= sizeof(Word))
      t.reply(kGetReply, with_length(std::uintptr_t(local), bytes), value.w0);
    else
      t.reply(kGetReply, with_length(std::uintptr_t(local), bytes), value.w0, value.w1);
  }, kOwner);
  am::set_handler(kGetReply, [](am::Token, Word target, Word v0, Word v1) {
    write_small(reinterpret_cast<void*>(address_of(target)), length_of(target), v0, v1);
    --state.in_flight;
  }, kOwner);
  // Puts and stores are one-way: no reply (but a refusal); sync() waits for AM's acknowledgements.
  am::set_handler(kPut, [](am::Token t, Word target, Word v0, Word v1) {
    if (!reachable(address_of(target), length_of(target))) [[unlikely]]
      return refuse(t, Access::put, address_of(target), length_of(target), 0);
    write_small(reinterpret_cast<void*>(address_of(target)), length_of(target), v0, v1);
  }, kOwner);
  am::set_handler(kStore, [](am::Token t, Word target, Word v0, Word v1) {
    if (!reachable(address_of(target), length_of(target))) [[unlikely]]
      return refuse(t, Access::store, address_of(target), length_of(target), 0);
    write_small(reinterpret_cast<void*>(address_of(target)), length_of(target), v0, v1);
    state.stored_bytes += length_of(target);
  }, kOwner);
  am::set_handler(kPutCompact, [](am::Token t, Word w) { write_compact(t, Access::put, w); }, kOwner);
  am::set_handler(kStoreCompact, [](am::Token t, Word w) { write_compact(t, Access::store, w); }, kOwner);
  am::set_mem_handler(kBulkStored, [](int, void*, std::size_t bytes, Word) { state.stored_bytes += bytes; }, kOwner);
  am::set_handler(kAtomic, [](am::Token t, std::span<std::byte> payload, std::uintptr_t waiter) {
    AtomicHeader h;
    std::memcpy(&h, payload.data(), sizeof h);
    if (!reachable(std::uintptr_t(h.target), std::size_t(h.target_bytes))) [[unlikely]]
      return refuse(t, Access::atomic, std::uintptr_t(h.target), std::size_t(h.target_bytes), waiter);
    std::vector<std::byte> result(std::min<std::size_t>(h.result_bytes, am::max_size()));
    const auto call = reinterpret_cast<AtomicCall>(decode_code(h.call));
    call(decode_code(h.fn), std::uintptr_t(h.target), payload.data() + sizeof h, result.data());
    t.reply_payload(kAtomicReply, result, waiter);
  }, kOwner);
  am::set_handler(kAtomicReply, [](am::Token, std::span<std::byte> payload, std::uintptr_t waiter) {
    auto* w = reinterpret_cast<AtomicWait*>(waiter);
    if (w->result_bytes) std::memcpy(w->result, payload.data(), std::min(payload.size(), w->result_bytes));
    w->done = true;
  }, kOwner);
  am::set_handler(kRefused, [](am::Token t, Word access, Word address, Word bytes, Word waiter) {
    static constexpr const char* kWhat[] = {"get from", "put to", "store to", "atomic at"};
    char why[256];
    std::snprintf(why, sizeof why,
                  "%s rank %d at %#llx (%llu bytes) refused: outside the memory Split-C may reach there (its "
                  "global memory and the regions it registered)",
                  kWhat[std::min<Word>(access, 3)], t.src(), static_cast<unsigned long long>(address),
                  static_cast<unsigned long long>(bytes));
    note_failure(why);
    if (Access(access) == Access::get) --state.in_flight;
    if (Access(access) == Access::atomic) reinterpret_cast<AtomicWait*>(waiter)->done = true;
  }, kOwner);
  am::set_handler(kReduce, [](am::Token t, Word code, Word value) { contribute(t.src(), code, value); }, kOwner);
  am::set_handler(kReduceResult, [](am::Token, Word value) {
    state.result = value;
    state.result_ready = true;
  }, kOwner);
  am::set_error_handler([](const am::Returned& r) {
    std::string why = "a message to rank " + std::to_string(r.dest);
    why += " came back: ";
    why += r.description;
    note_failure(std::move(why));
  });
}

am::Future start_bulk(Bulk kind, int proc, std::uintptr_t remote, void* local, std::size_t bytes) {
  check_enabled();
  if (bytes == 0) return am::Future();
  if (proc == state.me) {
    // The same rule as for other ranks: bulk transfers reach global memory only.
    if (!in_segment(remote, bytes)) fail("bulk transfer: the range lies outside this rank's global memory");
    auto* mine = reinterpret_cast<void*>(remote);
    if (kind == Bulk::get)
      std::memmove(local, mine, bytes);
    else
      std::memmove(mine, local, bytes);
    if (kind == Bulk::store) state.stored_bytes += bytes;
    return am::Future();
  }
  am::Future f = kind == Bulk::get ? am::get(proc, reinterpret_cast<const void*>(remote), local, bytes)
                                   : am::store(proc, local, reinterpret_cast<void*>(remote), bytes,
                                               kind == Bulk::store ? kBulkStored : am::kNoHandler);
  if (f.ready()) check(f.status(), kind == Bulk::get ? "bulk get" : "bulk put/store");
  return f;
}

}  // namespace

void* allocate(std::size_t bytes) {
  check_enabled();
  void* p = state.local_heap.allocate(bytes);
  if (!p) fail("out of global memory (" + std::to_string(bytes) + " bytes wanted; raise VIASTACK_AM_SEGMENT)");
  return p;
}

void deallocate(void* p) {
  if (!state.local_heap.release(p)) fail("deallocate: not memory from splitc::allocate");
}

void* all_allocate(std::size_t bytes) {
  check_enabled();
  void* p = state.symmetric_heap.allocate(bytes);
  if (!p) fail("out of symmetric memory (" + std::to_string(bytes) + " bytes wanted; raise VIASTACK_AM_SEGMENT)");
  return p;
}

void all_deallocate(void* p) {
  if (!state.symmetric_heap.release(p)) fail("all_deallocate: not memory from splitc::all_allocate");
}

void no_rank(int proc) {
  check_enabled();
  fail("no rank " + std::to_string(proc));
}

namespace {
std::string hex(std::uintptr_t address) {
  char text[24];
  std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(address));
  return text;
}
}  // namespace

}  // namespace detail

void register_memory(void* address, std::size_t bytes) {
  using namespace detail;
  check_enabled();
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  if (!address || bytes == 0 || begin + bytes < begin)
    fail("register_memory: needs a non-null address and a size above 0 that does not wrap around");
  auto& regions = state.regions;
  const auto after = std::upper_bound(regions.begin(), regions.end(), begin,
                                      [](std::uintptr_t a, const Region& r) { return a < r.begin; });
  if ((after != regions.end() && after->begin < begin + bytes) ||
      (after != regions.begin() && std::prev(after)->end > begin))
    fail("register_memory: " + hex(begin) + " (" + std::to_string(bytes) + " bytes) overlaps a registered region");
  regions.insert(after, Region{begin, begin + bytes});
}

void unregister_memory(void* address) {
  using namespace detail;
  check_enabled();
  auto& regions = state.regions;
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  const auto at = std::lower_bound(regions.begin(), regions.end(), begin,
                                   [](const Region& r, std::uintptr_t a) { return r.begin < a; });
  if (at == regions.end() || at->begin != begin)
    fail("unregister_memory: no region registered at " + hex(begin));
  regions.erase(at);
}

namespace detail {

namespace {
// Local gets, puts and stores are plain memory accesses; every so often one
// also polls, so that a rank busy with its own part of the data still answers
// the others (whose requests wait for its acknowledgements).
constexpr unsigned kLocalOpsPerPoll = 256;
void poll_now_and_then() {
  if (++state.local_ops % kLocalOpsPerPoll == 0) am::poll();
}

void send_value(int handler, int proc, std::uintptr_t remote, const void* value, std::size_t bytes) {
  inline_state.puts_unsynced = true;
  const SmallValue v = read_small(value, bytes);
  // Deferred: a put or store is complete only at sync (or the owner's
  // store_sync), which waits and so sends it; until then it may wait for
  // others to the same rank and leave with them in one frame.
  // A value of one word travels in 2 arguments (the handler's third is 0 then).
  // Written here into the open bundle when it has room, as the inline path
  // (deferred_inline) does; AM's call otherwise.
  const Word target = with_length(remote, bytes);
  const Word args[3] = {target, v.w0, v.w1};
  const bool one_word = bytes <= sizeof(Word);
  if (write_deferred(proc, handler, args, one_word ? 2 : 3)) return;
  const am::Status s = one_word ? am::request_deferred(proc, handler, target, v.w0)
                                : am::request_deferred(proc, handler, target, v.w0, v.w1);
  check(s, handler == kPut ? "put" : "store");
}
}  // namespace

void get(int proc, std::uintptr_t remote, void* local, std::size_t bytes) {
  check_enabled();
  if (proc == state.me) {
    copy_small(local, reinterpret_cast<const void*>(remote), bytes);
    poll_now_and_then();
    return;
  }
  ++state.in_flight;
  // Deferred, as puts and stores: sync waits for the reply, and so sends it.
  const Word args[2] = {with_length(remote, bytes), reinterpret_cast<std::uintptr_t>(local)};
  if (!write_deferred(proc, kGet, args, 2)) check(am::request_deferred(proc, kGet, args[0], args[1]), "get");
}

void put(int proc, std::uintptr_t remote, const void* value, std::size_t bytes) {
  check_enabled();
  if (proc == state.me) {
    copy_small(reinterpret_cast<void*>(remote), value, bytes);
    poll_now_and_then();
  } else {
    send_value(kPut, proc, remote, value, bytes);
  }
}

void store(int proc, std::uintptr_t remote, const void* value, std::size_t bytes) {
  check_enabled();
  if (proc == state.me) {
    copy_small(reinterpret_cast<void*>(remote), value, bytes);
    state.stored_bytes += bytes;
    poll_now_and_then();
  } else {
    send_value(kStore, proc, remote, value, bytes);
  }
}

void bulk(Bulk kind, int proc, std::uintptr_t remote, void* local, std::size_t bytes) {
  am::Future f = start_bulk(kind, proc, remote, local, bytes);
  if (f.ready()) return;
  auto& pending = state.bulk_in_flight;
  if (pending.size() >= kPruneFutures) {
    for (const am::Future& done : pending)
      if (done.ready()) check(done.status(), "bulk operation");
    std::erase_if(pending, [](const am::Future& p) { return p.ready(); });
  }
  pending.push_back(std::move(f));
}

void bulk_wait(Bulk kind, int proc, std::uintptr_t remote, void* local, std::size_t bytes) {
  check(start_bulk(kind, proc, remote, local, bytes).wait(), kind == Bulk::get ? "bulk read" : "bulk write");
  check_failure();
}

void atomic(int proc, AtomicCall call, std::uintptr_t fn, std::uintptr_t target, std::size_t target_bytes,
            const std::byte* args, std::size_t args_bytes, void* result, std::size_t result_bytes) {
  check_enabled();
  if (proc == state.me) {
    call(fn, target, args, result);
    return;
  }
  const AtomicHeader h{encode_code(reinterpret_cast<std::uintptr_t>(call)), encode_code(fn), target, target_bytes,
                       result_bytes};
  if (sizeof h + args_bytes > am::max_size() || result_bytes > am::max_size())
    fail("atomic: arguments or result larger than one Active Message");
  std::vector<std::byte> payload(sizeof h + args_bytes);
  std::memcpy(payload.data(), &h, sizeof h);
  if (args_bytes) std::memcpy(payload.data() + sizeof h, args, args_bytes);
  AtomicWait w{false, result, result_bytes};
  check(am::request_payload(proc, kAtomic, payload, reinterpret_cast<std::uintptr_t>(&w)), "atomic");
  wait_until([&] { return w.done; });
}

Word all_reduce(Word value, Kind kind, Op op, int root) {
  check_enabled();
  if (root < 0 || root >= state.procs) fail("all_bcast: no rank " + std::to_string(root));
  const Word code = Word(kind) | Word(op) << 8 | Word(root) << 16;
  if (state.me != 0) {
    check(am::request(0, kReduce, code, value), "reduction");
    wait_until([] { return state.result_ready; });
    state.result_ready = false;
    return state.result;
  }
  contribute(0, code, value);
  wait_until([] { return state.contributions == unsigned(state.procs); });
  // Reset before releasing anyone: the next reduction's inputs may follow at once.
  const Word result = state.accumulator;
  state.contributions = 0;
  for (int r = 1; r < state.procs; ++r) check(am::request(r, kReduceResult, result), "reduction");
  return result;
}

}  // namespace detail

using detail::state;

void init() {
  if (state.enabled) throw error("splitc: init called twice");
  am::Config config = am::Config::from_env();
  if (!via::config::integer_if_set("VIASTACK_AM_SEGMENT")) config.segment_bytes = detail::kDefaultSegment;
  // Reset first: faster ranks' first requests may arrive while am::enable waits for the slower ones.
  state = detail::State{};
  config.segment_bytes = (config.segment_bytes + detail::kPage - 1) / detail::kPage * detail::kPage;
  state.segment.reset(static_cast<std::byte*>(std::aligned_alloc(detail::kPage, config.segment_bytes)));
  if (!state.segment)
    throw error("splitc: init: cannot allocate a segment of " + std::to_string(config.segment_bytes) + " bytes");
  config.segment = state.segment.get();
  state.segment_bytes = config.segment_bytes;
  detail::check(am::reserve_handlers(detail::kFirstHandler, detail::kLastHandler, detail::kOwner), "init");
  detail::install_handlers();
  detail::check(am::enable(config), "init");
  state.enabled = true;
  state.me = am::my_proc();
  state.procs = am::procs();
  for (int r = 0; r < state.procs; ++r) state.segments.push_back(static_cast<std::byte*>(am::segment(r)));
  for (int r = 0; r < state.procs; ++r) state.rooms.push_back(am::deferred_room(r));
  detail::inline_state = detail::InlineState{state.me, state.procs, state.segments.data(), state.rooms.data(), false};
  // A quarter for memory of one rank, the rest for symmetric (collective) memory.
  const std::size_t bytes = am::segment_size(state.me);
  const std::size_t local = bytes / 4 / detail::Heap::kAlign * detail::Heap::kAlign;
  state.local_heap.reset(state.segment.get(), local);
  state.symmetric_heap.reset(state.segment.get() + local, bytes - local);
  detail::refresh_modules();
}

void finalize() {
  if (!state.enabled) return;
  sync();
  detail::check(am::disable(), "finalize");
  state = detail::State{};
  detail::inline_state = detail::InlineState{};
}

int my_proc() { return state.me; }
int procs() { return state.procs; }

void sync() {
  detail::check_enabled();
  for (const am::Future& f : state.bulk_in_flight) detail::check(f.wait(), "bulk operation");
  state.bulk_in_flight.clear();
  detail::wait_until([] { return state.in_flight == 0; });
  // Puts and stores: handled at their owners once AM acknowledged them. Only
  // if any were sent: AM's other requests (a barrier's, say) are acknowledged
  // whenever their destination next polls, which a rank busy computing may
  // not do for a long time.
  if (std::exchange(detail::inline_state.puts_unsynced, false)) detail::check(am::wait_acknowledged(), "sync");
  detail::check_failure();
}

void store_sync(std::size_t bytes) {
  detail::check_enabled();
  detail::wait_until([bytes] { return state.stored_bytes >= bytes; });
  state.stored_bytes -= bytes;
}

void all_store_sync() {
  sync();
  barrier();  // every store issued so far has arrived everywhere
  state.stored_bytes = 0;
  barrier();  // nobody stores anew before everyone has cleared its count
}

void barrier() {
  detail::check_enabled();
  detail::check(am::barrier(), "barrier");
  detail::check_failure();
}

void poll() {
  detail::check_enabled();
  am::poll();
  detail::check_failure();
}

}  // namespace splitc
