// Split-C as a C++ library over Active Messages (am/).
//
// SPMD: every rank of a viarun job runs the same program, calls init() (or
// holds a splitc::session) and addresses the others' memory through global
// pointers (processor, address). Small operations are one Active Message
// each (a request with the value in its words, a reply); bulk operations are
// AM stores and gets. Nothing happens behind the program's back: handlers run
// while a rank waits (sync, store_sync, barrier, read, ...) or calls poll().
//
//   splitc::session s;
//   splitc::spread_array<long> a(4 * PROCS);        // cyclic: a[i] lives on i % PROCS
//   splitc::put(a[MYPROC + 1], 42L);                 // split-phase
//   splitc::sync();
//   splitc::barrier();
#pragma once

#include <am/am.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace splitc {

// A communication failure (a dead or unreachable rank, a remote address
// outside the memory Split-C may reach there: see register_memory) or
// running out of global memory.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Collective start-up and shut-down (am::enable / am::disable). The AM
// segment, from which all global memory comes, defaults to 64 MiB here
// unless VIASTACK_AM_SEGMENT says otherwise.
void init();
void finalize();
struct session {
  session() { init(); }
  // Skipped while an exception unwinds: the job is failing anyway. Otherwise
  // a failing finalize (a rank gone) throws, as every Split-C call does.
  ~session() noexcept(false) {
    if (std::uncaught_exceptions() == 0) finalize();
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
};

int my_proc();
int procs();

// What other ranks' gets, puts, stores and atomics may touch on this rank:
// its global memory (the AM segment: spread arrays, allocate, all_allocate)
// and the regions registered here. Each access is checked by its target,
// whole (a value that starts inside and ends outside is refused); a refused
// one throws splitc::error at the rank that made it, by its next sync (or
// the call that waits for it), and the target carries on. Bulk transfers
// reach global memory only. Registering (not collective) and unregistering
// are this rank's own: others may reach the region once told of it (a
// barrier, say) and must stop before it is unregistered. Regions may not
// overlap one another; init and finalize start with none.
void register_memory(void* address, std::size_t bytes);
void unregister_memory(void* address);

// (processor, address). Arithmetic moves the address on the same processor,
// as in Split-C; comparison orders by processor, then address.
template <class T>
class global_ptr {
 public:
  using element_type = T;
  constexpr global_ptr() = default;
  global_ptr(int proc, T* address) : proc_(proc), address_(reinterpret_cast<std::uintptr_t>(address)) {}

  int where() const { return proc_; }
  bool is_local() const { return proc_ == my_proc(); }
  // The address in the owner's address space (dereference it only there).
  T* raw() const { return reinterpret_cast<T*>(address_); }
  T* local() const {
    if (!is_local()) throw error("global_ptr::local() on a pointer to another processor");
    return raw();
  }
  explicit operator bool() const { return address_ != 0; }

  global_ptr& operator+=(std::ptrdiff_t n) {
    address_ += std::uintptr_t(n * std::ptrdiff_t(sizeof(T)));
    return *this;
  }
  global_ptr& operator-=(std::ptrdiff_t n) { return *this += -n; }
  global_ptr& operator++() { return *this += 1; }
  global_ptr& operator--() { return *this -= 1; }
  friend global_ptr operator+(global_ptr p, std::ptrdiff_t n) { return p += n; }
  friend global_ptr operator+(std::ptrdiff_t n, global_ptr p) { return p += n; }
  friend global_ptr operator-(global_ptr p, std::ptrdiff_t n) { return p -= n; }
  // Elements between two pointers to the same processor.
  friend std::ptrdiff_t operator-(global_ptr a, global_ptr b) {
    return (std::ptrdiff_t(a.address_) - std::ptrdiff_t(b.address_)) / std::ptrdiff_t(sizeof(T));
  }
  friend bool operator==(const global_ptr&, const global_ptr&) = default;
  friend auto operator<=>(const global_ptr&, const global_ptr&) = default;

 private:
  int proc_ = 0;
  std::uintptr_t address_ = 0;
};

namespace detail {
template <class T>
concept Transferable = std::is_trivially_copyable_v<T>;
// Values up to two words travel in the words of one request.
inline constexpr std::size_t kMaxSmall = 2 * sizeof(am::Word);
template <class T>
concept Small = Transferable<T> && sizeof(T) <= kMaxSmall;

// Memory from the local heap (any rank may address it) or the symmetric heap
// (collective: the same offset in every rank's segment).
void* allocate(std::size_t bytes);
void deallocate(void* p);
void* all_allocate(std::size_t bytes);
void all_deallocate(void* p);
// What the inline paths (addresses of symmetric memory, puts and stores)
// share with the runtime, which sets it at init.
struct InlineState {
  int me = -1;     // MYPROC; -1 before init sends every operation the library's way
  int procs = 0;   // PROCS; 0 before init
  std::byte* const* segments = nullptr;  // each rank's AM segment, where that rank has it
  am::DeferredRoom* const* rooms = nullptr;  // each rank's am::deferred_room
  bool puts_unsynced = false;            // puts or stores sent since the last sync
};
extern InlineState inline_state;

// Writes a deferred request to `proc` into AM's open bundle there, in the
// caller's code (am/deferred.hpp); false when it must take AM's library
// call instead (am::request_deferred): no bundle open there or none with
// room, this rank, a rank that does not exist, or Split-C not initialised.
inline bool write_deferred(int proc, int handler, const am::Word* args, unsigned nargs) {
  return unsigned(proc) < unsigned(inline_state.procs) &&
         am::write_deferred(*inline_state.rooms[proc], handler, args, nargs);
}

[[noreturn]] void no_rank(int proc);
// Where `mine` (symmetric memory of this rank) lies on `proc`: at the same
// offset in its segment. Inline: every spread_array element access asks.
inline void* symmetric_address(int proc, void* mine) {
  if (unsigned(proc) >= unsigned(inline_state.procs)) no_rank(proc);
  return inline_state.segments[proc] + (static_cast<std::byte*>(mine) - inline_state.segments[inline_state.me]);
}

void get(int proc, std::uintptr_t remote, void* local, std::size_t bytes);
void put(int proc, std::uintptr_t remote, const void* value, std::size_t bytes);
void store(int proc, std::uintptr_t remote, const void* value, std::size_t bytes);

// AM handler indices: Split-C reserves 224..239 (am::reserve_handlers at
// init, so that am::set_handler refuses them to the program) and uses 224..235.
enum : int {
  kFirstHandler = 224,
  kGet = kFirstHandler,
  kGetReply,
  kPut,
  kStore,
  kBulkStored,
  kAtomic,
  kAtomicReply,
  kReduce,
  kReduceResult,
  kPutCompact,
  kStoreCompact,
  kRefused,  // the answer to an access outside what the target lets Split-C reach
  kLastHandler = 239,
};

// An address and a small value's length in one AM argument: user-space
// addresses fit in 56 bits, and a length of at most kMaxSmall in the top 8.
// A store of a 4-byte key is then one 24-byte item of a bundle, not 32.
inline constexpr int kLengthShift = 56;
inline am::Word with_length(std::uintptr_t address, std::size_t bytes) {
  return am::Word(address) | am::Word(bytes) << kLengthShift;
}

// A value of at most one word as the low bytes of a word, read at its own
// width: copied into a word in memory and read back as 8 bytes, it would
// stall the CPU (a load cannot take its bytes from a narrower store still
// in the store buffer).
template <class T>
am::Word value_word(const T& value) {
  static_assert(sizeof(T) <= sizeof(am::Word));
  if constexpr (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
    using Bits = std::conditional_t<
        sizeof(T) == 1, std::uint8_t,
        std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
    Bits bits;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
  } else {
    am::Word word = 0;
    std::memcpy(&word, &value, sizeof(T));
    return word;
  }
}

// A value of 1, 2 or 4 bytes at an offset below 2^30 in the destination's
// segment (every spread array's element) travels in one AM argument: the
// offset, log2 of the width above it, the value in the high half. A stream
// of stores of 4-byte keys then takes 8 bytes of a bundle each (one word
// of an AM run), not 24: less to copy through the shared-memory rings and
// to read at the destination.
inline constexpr int kCompactOffsetBits = 30;
template <class T>
inline constexpr bool kCompactWidth = sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4;
inline am::Word compact_word(std::uintptr_t offset, std::size_t bytes, am::Word value) {
  return am::Word(offset) | am::Word(std::bit_width(bytes) - 1) << kCompactOffsetBits | value << 32;
}

// A put or store (`signaling`) of at most one word to another rank, written
// here into AM's bundle to that rank (write_deferred) without a call into
// the library: the path of every key of the small-message sorts.
// False when it takes the library's way: a local address, a larger value,
// no bundle open or none with room, a rank that does not exist, Split-C not
// initialised (procs 0).
template <class T>
bool deferred_inline(bool signaling, global_ptr<T> dst, const T& value) {
  if constexpr (sizeof(T) > sizeof(am::Word)) {
    return false;
  } else {
    const int proc = dst.where();
    if (proc == inline_state.me || unsigned(proc) >= unsigned(inline_state.procs)) return false;
    const auto address = reinterpret_cast<std::uintptr_t>(dst.raw());
    auto written = [](bool w) {
      if (w) inline_state.puts_unsynced = true;
      return w;
    };
    if constexpr (kCompactWidth<T>) {
      const std::uintptr_t offset = address - reinterpret_cast<std::uintptr_t>(inline_state.segments[proc]);
      if (offset < (std::uintptr_t(1) << kCompactOffsetBits)) {
        const am::Word arg = compact_word(offset, sizeof(T), value_word(value));
        return written(write_deferred(proc, signaling ? kStoreCompact : kPutCompact, &arg, 1));
      }
    }
    const am::Word args[2] = {with_length(address, sizeof(T)), value_word(value)};
    return written(write_deferred(proc, signaling ? kStore : kPut, args, 2));
  }
}
enum class Bulk { get, put, store };
void bulk(Bulk kind, int proc, std::uintptr_t remote, void* local, std::size_t bytes);
void bulk_wait(Bulk kind, int proc, std::uintptr_t remote, void* local, std::size_t bytes);

// Runs `call`(fn, target, args, result) at `proc` (target: an object of
// target_bytes there) and copies the result back.
using AtomicCall = void (*)(std::uintptr_t fn, std::uintptr_t target, const std::byte* args, void* result);
void atomic(int proc, AtomicCall call, std::uintptr_t fn, std::uintptr_t target, std::size_t target_bytes,
            const std::byte* args, std::size_t args_bytes, void* result, std::size_t result_bytes);

// Arguments laid end to end in bytes (std::tuple is not trivially copyable).
template <class... A>
struct Packed {
  static constexpr std::size_t bytes = (sizeof(A) + ... + 0);
  static constexpr std::array<std::size_t, sizeof...(A)> offsets = [] {
    std::array<std::size_t, sizeof...(A)> at{};
    [[maybe_unused]] std::size_t next = 0, i = 0;
    ((at[i++] = next, next += sizeof(A)), ...);
    return at;
  }();
  static void pack([[maybe_unused]] std::byte* out, const A&... args) {
    [[maybe_unused]] std::size_t i = 0;
    (std::memcpy(out + offsets[i++], &args, sizeof(A)), ...);
  }
  template <std::size_t I>
  static auto unpack(const std::byte* in) {
    std::tuple_element_t<I, std::tuple<A...>> value;
    std::memcpy(&value, in + offsets[I], sizeof value);
    return value;
  }
};

enum class Kind : std::uint8_t { i64, u64, f64 };
enum class Op : std::uint8_t { sum, min, max, bcast };
am::Word all_reduce(am::Word value, Kind kind, Op op, int root);

template <class T>
constexpr Kind kind_of() {
  if constexpr (std::is_floating_point_v<T>)
    return Kind::f64;
  else if constexpr (std::is_signed_v<T>)
    return Kind::i64;
  else
    return Kind::u64;
}
// A value of an arithmetic type as a word of its kind_of<T>(), and back.
template <class T>
am::Word to_word(T value) {
  if constexpr (kind_of<T>() == Kind::f64)
    return std::bit_cast<am::Word>(static_cast<double>(value));
  else
    return static_cast<am::Word>(value);
}
template <class T>
T from_word(am::Word word) {
  if constexpr (kind_of<T>() == Kind::f64)
    return static_cast<T>(std::bit_cast<double>(word));
  else
    return static_cast<T>(word);
}
}  // namespace detail

// Global barrier; it does not wait for outstanding operations: sync() first.
void barrier();
// Handles what has arrived (the handlers of others' operations on our memory).
void poll();

// ---- global memory ----

// Memory in this rank's part of the global address space, for others to
// reach through the returned pointer. Not collective.
template <detail::Transferable T>
global_ptr<T> allocate(std::size_t count) {
  return global_ptr<T>(my_proc(), static_cast<T*>(detail::allocate(count * sizeof(T))));
}
template <class T>
void deallocate(global_ptr<T> p) {
  detail::deallocate(p.local());
}

// Collective: a global pointer to the same-offset storage on `proc` of a
// block every rank allocated with all_allocate.
template <detail::Transferable T>
T* all_allocate(std::size_t count) {
  return static_cast<T*>(detail::all_allocate(count * sizeof(T)));
}
template <class T>
void all_deallocate(T* mine) {
  detail::all_deallocate(mine);
}
template <class T>
global_ptr<T> on(int proc, T* symmetric) {
  return global_ptr<T>(proc, static_cast<T*>(detail::symmetric_address(proc, symmetric)));
}

enum class layout { cyclic, blocked };

// A spread array of `size` elements over all ranks, block-cyclic: blocks of
// `block` consecutive elements dealt to the ranks in turn. cyclic = blocks of
// one (element i on rank i % PROCS); blocked = one block per rank.
// Construction and destruction are collective (each ends in a barrier, so no
// rank touches the array before it exists or after it is gone; the
// destructor's throws splitc::error if a rank is gone, unless an exception
// is already on its way); the elements start value-initialised.
template <detail::Transferable T>
class spread_array {
 public:
  explicit spread_array(std::size_t size, layout l = layout::cyclic)
      : spread_array(size, l == layout::cyclic ? 1 : (size + std::size_t(procs()) - 1) / std::size_t(procs())) {}
  spread_array(std::size_t size, std::size_t block)
      : size_(size), block_(std::max<std::size_t>(block, 1)), procs_(std::size_t(procs())) {
    const std::size_t round = block_ * procs_;
    local_size_ = (size_ + round - 1) / round * block_;
    mine_ = all_allocate<T>(std::max<std::size_t>(local_size_, 1));
    std::fill_n(mine_, local_size_, T{});
    barrier();
  }
  ~spread_array() noexcept(false) {
    if (!mine_) return;
    if (std::uncaught_exceptions() == 0) barrier();
    all_deallocate(mine_);
  }
  spread_array(const spread_array&) = delete;
  spread_array& operator=(const spread_array&) = delete;
  spread_array(spread_array&& o) noexcept
      : size_(o.size_),
        block_(o.block_),
        procs_(o.procs_),
        local_size_(o.local_size_),
        mine_(std::exchange(o.mine_, nullptr)) {}

  std::size_t size() const { return size_; }
  std::size_t block() const { return block_; }
  int owner(std::size_t i) const { return int((i / block_) % procs_); }
  global_ptr<T> operator[](std::size_t i) const {
    const std::size_t blk = i / block_, round = blk / procs_;
    return base(owner(i)) + std::ptrdiff_t(round * block_ + i % block_);
  }
  // The start of `proc`'s part (its elements in index order).
  global_ptr<T> base(int proc) const { return on(proc, mine_); }
  // This rank's part: local elements in index order.
  std::span<T> local() const { return {mine_, local_size_}; }

 private:
  std::size_t size_, block_, procs_, local_size_ = 0;
  T* mine_ = nullptr;
};

// ---- split-phase and blocking access ----

// Starts fetching *src into `local`; the value is there after sync().
template <detail::Small T>
void get(T& local, global_ptr<T> src) {
  detail::get(src.where(), reinterpret_cast<std::uintptr_t>(src.raw()), &local, sizeof(T));
}
// Starts writing `value` to *dst; done (remotely visible) after sync().
template <detail::Small T>
void put(global_ptr<T> dst, const std::type_identity_t<T>& value) {
  if (detail::deferred_inline(false, dst, value)) return;
  detail::put(dst.where(), reinterpret_cast<std::uintptr_t>(dst.raw()), &value, sizeof(T));
}
// Signaling store: the owner counts the bytes (store_sync); the sender
// learns of completion only at sync() / all_store_sync().
template <detail::Small T>
void store(global_ptr<T> dst, const std::type_identity_t<T>& value) {
  if (detail::deferred_inline(true, dst, value)) return;
  detail::store(dst.where(), reinterpret_cast<std::uintptr_t>(dst.raw()), &value, sizeof(T));
}
// Waits for every get, put and store this rank started.
void sync();
// Waits until `bytes` bytes of stores (from anyone) have arrived here since
// the previous store_sync took its bytes, and takes them.
void store_sync(std::size_t bytes);
// Collective: every store by every rank has arrived; the counts store_sync
// waits on start again from zero.
void all_store_sync();

template <detail::Small T>
T read(global_ptr<T> src) {
  T value;
  get(value, src);
  sync();
  return value;
}
template <detail::Small T>
void write(global_ptr<T> dst, const std::type_identity_t<T>& value) {
  put(dst, value);
  sync();
}

// Bulk copies of `count` elements; the remote side must be global memory
// (spread_array, allocate). get/put/store are split-phase (sync();
// `local` must stay untouched until then), read/write block.
template <detail::Transferable T>
void bulk_get(T* local, global_ptr<T> src, std::size_t count) {
  detail::bulk(detail::Bulk::get, src.where(), reinterpret_cast<std::uintptr_t>(src.raw()), local, count * sizeof(T));
}
template <detail::Transferable T>
void bulk_put(global_ptr<T> dst, const T* local, std::size_t count) {
  detail::bulk(detail::Bulk::put, dst.where(), reinterpret_cast<std::uintptr_t>(dst.raw()), const_cast<T*>(local),
               count * sizeof(T));
}
template <detail::Transferable T>
void bulk_store(global_ptr<T> dst, const T* local, std::size_t count) {
  detail::bulk(detail::Bulk::store, dst.where(), reinterpret_cast<std::uintptr_t>(dst.raw()), const_cast<T*>(local),
               count * sizeof(T));
}
template <detail::Transferable T>
void bulk_read(T* local, global_ptr<T> src, std::size_t count) {
  detail::bulk_wait(detail::Bulk::get, src.where(), reinterpret_cast<std::uintptr_t>(src.raw()), local,
                    count * sizeof(T));
}
template <detail::Transferable T>
void bulk_write(global_ptr<T> dst, const T* local, std::size_t count) {
  detail::bulk_wait(detail::Bulk::put, dst.where(), reinterpret_cast<std::uintptr_t>(dst.raw()), const_cast<T*>(local),
                    count * sizeof(T));
}

// ---- synchronisation and collectives ----

enum class reduce_op { sum, min, max };
// Collective: the sum/min/max of every rank's `value`, on every rank.
template <class T>
  requires std::is_arithmetic_v<T>
T all_reduce_to_all(T value, reduce_op op) {
  const auto kind = detail::kind_of<T>();
  const auto dop = op == reduce_op::sum ? detail::Op::sum : op == reduce_op::min ? detail::Op::min : detail::Op::max;
  return detail::from_word<T>(detail::all_reduce(detail::to_word(value), kind, dop, 0));
}
template <class T>
T all_reduce_to_all_add(T v) { return all_reduce_to_all(v, reduce_op::sum); }
template <class T>
T all_reduce_to_all_min(T v) { return all_reduce_to_all(v, reduce_op::min); }
template <class T>
T all_reduce_to_all_max(T v) { return all_reduce_to_all(v, reduce_op::max); }

// Collective: `root`'s value on every rank (any type of up to one word).
template <detail::Transferable T>
  requires(sizeof(T) <= sizeof(am::Word))
T all_bcast(T value, int root = 0) {
  am::Word w = 0;
  std::memcpy(&w, &value, sizeof(T));
  w = detail::all_reduce(w, detail::Kind::u64, detail::Op::bcast, root);
  std::memcpy(&value, &w, sizeof(T));
  return value;
}

// Runs fn(*target, args...) at the target's owner, atomically with respect
// to every other operation there, and returns its result. fn must be a plain
// function (or a captureless lambda with a leading +) that does not
// communicate; it is named to the owner by its offset in its module, so it
// works across ranks whose code is loaded at different addresses.
template <class R, class T, class... A>
  requires(detail::Transferable<A> && ...) && (std::is_void_v<R> || detail::Transferable<R>)
R atomic(R (*fn)(T&, A...), global_ptr<T> target, std::type_identity_t<A>... args) {
  using Args = detail::Packed<A...>;
  std::array<std::byte, Args::bytes> packed;
  Args::pack(packed.data(), args...);
  const detail::AtomicCall call = [](std::uintptr_t f, std::uintptr_t t, [[maybe_unused]] const std::byte* a,
                                     [[maybe_unused]] void* result) {
    auto* function = reinterpret_cast<R (*)(T&, A...)>(f);
    T& object = *reinterpret_cast<T*>(t);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      if constexpr (std::is_void_v<R>) {
        function(object, Args::template unpack<I>(a)...);
      } else {
        const R r = function(object, Args::template unpack<I>(a)...);
        std::memcpy(result, &r, sizeof(R));
      }
    }(std::index_sequence_for<A...>{});
  };
  const auto where = reinterpret_cast<std::uintptr_t>(target.raw());
  if constexpr (std::is_void_v<R>) {
    detail::atomic(target.where(), call, reinterpret_cast<std::uintptr_t>(fn), where, sizeof(T), packed.data(),
                   packed.size(), nullptr, 0);
  } else {
    R result;
    detail::atomic(target.where(), call, reinterpret_cast<std::uintptr_t>(fn), where, sizeof(T), packed.data(),
                   packed.size(), &result, sizeof(R));
    return result;
  }
}

}  // namespace splitc

// Split-C's names for this rank and the rank count (define
// SPLITC_NO_MACROS to keep them out).
#ifndef SPLITC_NO_MACROS
#define MYPROC (::splitc::my_proc())
#define PROCS (::splitc::procs())
#endif
