// Every Split-C operation across the ranks of a viarun job (run it on 3, so
// that neighbours differ on each side). Exit 0 only if every check passes
// on every rank.
//
//   viarun -n 3 -- splitc_features
#include <splitc/splitc.hpp>

#include "check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using splitc_test::failures;

int me, procs, right, left;

struct Pair {  // two words: the largest value a small operation carries
  long a;
  double b;
  bool operator==(const Pair&) const = default;
};
struct Triple {  // 12 bytes: not a whole number of words
  int x, y, z;
  bool operator==(const Triple&) const = default;
};

long value_of(std::size_t i) { return long(i) * 31 + 7; }

void global_pointers() {
  splitc::spread_array<long> a(10 * std::size_t(procs));
  const splitc::global_ptr<long> p = a.base(me);
  CHECK(p.where() == me && p.is_local());
  CHECK((p + 3) - p == 3);
  CHECK((p + 3).where() == me);  // arithmetic stays on the processor
  splitc::global_ptr<long> q = p;
  ++q;
  CHECK(q == p + 1 && q != p && p < q && q > p);
  --q;
  CHECK(q == p);
  CHECK((p + 5) - 5 == p);
  CHECK(p.local() == a.local().data());
  const splitc::global_ptr<long> r = a.base(right);
  CHECK((p < r) == (me < right));  // processors order first
  if (procs > 1) {
    CHECK(!r.is_local());
    bool threw = false;
    try {
      (void)r.local();
    } catch (const splitc::error&) {
      threw = true;
    }
    CHECK(threw);
  }
  CHECK(!splitc::global_ptr<long>() && bool(p));
  // Symmetric memory on another rank: the same offset in its segment; a
  // rank that does not exist is refused.
  CHECK(splitc::on(right, a.local().data() + 2) == r + 2);
  for (int bad : {-1, procs}) {
    bool refused = false;
    try {
      (void)splitc::on(bad, a.local().data());
    } catch (const splitc::error&) {
      refused = true;
    }
    CHECK(refused);
  }
}

void layouts() {
  const std::size_t n = 7 * std::size_t(procs) + 2;
  splitc::spread_array<long> cyclic(n), blocked(n, splitc::layout::blocked), chunks(n, std::size_t(3));
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(cyclic.owner(i) == int(i % std::size_t(procs)));
    CHECK(cyclic[i] == cyclic.base(cyclic.owner(i)) + std::ptrdiff_t(i / std::size_t(procs)));
    CHECK(blocked.owner(i) == int(i / blocked.block()));
    CHECK(chunks.owner(i) == int((i / 3) % std::size_t(procs)));
  }
  // Everyone writes the elements its right neighbour owns; each checks its own.
  for (auto* array : {&cyclic, &blocked, &chunks})
    for (std::size_t i = 0; i < n; ++i)
      if (array->owner(i) == right) splitc::put((*array)[i], value_of(i));
  splitc::sync();
  splitc::barrier();
  for (auto* array : {&cyclic, &blocked, &chunks})
    for (std::size_t i = 0; i < n; ++i)
      if (array->owner(i) == me) CHECK(*(*array)[i].local() == value_of(i));
}

void get_put_sync() {
  constexpr std::size_t kPer = 500;
  splitc::spread_array<long> src(kPer * std::size_t(procs), kPer), dst(kPer * std::size_t(procs), kPer);
  for (std::size_t i = 0; i < kPer; ++i) src.local()[i] = value_of(std::size_t(me) * kPer + i);
  splitc::barrier();
  // Gets from the right neighbour race with puts to the left one's other array.
  std::vector<long> got(kPer, -1);
  for (std::size_t i = 0; i < kPer; ++i) {
    splitc::get(got[i], src.base(right) + std::ptrdiff_t(i));
    splitc::put(dst.base(left) + std::ptrdiff_t(i), long(me) * 1000 + long(i));
  }
  splitc::sync();
  for (std::size_t i = 0; i < kPer; ++i) CHECK(got[i] == value_of(std::size_t(right) * kPer + i));
  splitc::barrier();
  for (std::size_t i = 0; i < kPer; ++i) CHECK(dst.local()[i] == long(right) * 1000 + long(i));

  // Values of every width up to a word, which a put or store to another
  // rank writes into AM's bundle inline (value_word), and one of 3 bytes.
  struct Bytes3 {
    char c[3];
    bool operator==(const Bytes3&) const = default;
  };
  splitc::spread_array<char> chars{std::size_t(procs)};
  splitc::spread_array<short> shorts{std::size_t(procs)};
  splitc::spread_array<float> floats{std::size_t(procs)};
  splitc::spread_array<double> doubles{std::size_t(procs)};
  splitc::spread_array<Bytes3> threes{std::size_t(procs)};
  splitc::put(chars[std::size_t(right)], char('a' + me));
  splitc::store(shorts[std::size_t(right)], short(-1000 - me));
  splitc::put(floats[std::size_t(right)], 0.25f + float(me));
  splitc::store(doubles[std::size_t(right)], -1.5 * me);
  splitc::put(threes[std::size_t(right)], Bytes3{{char(me), char(2 * me), char(-me)}});
  splitc::sync();
  splitc::barrier();
  CHECK(*chars[std::size_t(me)].local() == char('a' + left));
  CHECK(*shorts[std::size_t(me)].local() == short(-1000 - left));
  CHECK(*floats[std::size_t(me)].local() == 0.25f + float(left));
  CHECK(*doubles[std::size_t(me)].local() == -1.5 * left);
  CHECK(*threes[std::size_t(me)].local() == (Bytes3{{char(left), char(2 * left), char(-left)}}));
  splitc::all_store_sync();  // the stores above counted their bytes

  // Negative values of 1, 2 and 4 bytes (compact_word) land whole and leave
  // their neighbours alone.
  {
    splitc::spread_array<signed char> sc(8 * std::size_t(procs), 8);
    splitc::spread_array<short> ss(8 * std::size_t(procs), 8);
    splitc::spread_array<int> si(8 * std::size_t(procs), 8);
    for (int k = 0; k < 8; ++k) {
      sc.local()[k] = 0x55;
      ss.local()[k] = 0x5555;
      si.local()[k] = 0x55555555;
    }
    splitc::barrier();
    splitc::store(sc.base(right) + 3, static_cast<signed char>(-128 + me));
    splitc::store(sc.base(right) + 4, static_cast<signed char>(-1));
    splitc::put(ss.base(right) + 3, short(-32768 + me));
    splitc::put(ss.base(right) + 4, short(-1));
    splitc::store(si.base(right) + 3, int(-2147483647 - 1 + me));
    splitc::store(si.base(right) + 4, -1);
    splitc::sync();
    splitc::store_sync(2 + 8);
    splitc::barrier();
    for (int k = 0; k < 8; ++k) {
      CHECK(sc.local()[k] == (k == 3 ? -128 + left : k == 4 ? -1 : 0x55));
      CHECK(ss.local()[k] == (k == 3 ? short(-32768 + left) : k == 4 ? short(-1) : short(0x5555)));
      CHECK(si.local()[k] == (k == 3 ? int(-2147483647 - 1 + left) : k == 4 ? -1 : 0x55555555));
    }
    splitc::barrier();
  }

  // Memory outside the segment (here the heap), registered for the others:
  // values of up to 4 bytes to the segment travel as an offset in it
  // (compact_word), these by address.
  std::vector<int> outside(2, -1);
  std::vector<char> outside_chars(1, 0);
  splitc::register_memory(outside.data(), outside.size() * sizeof(int));
  splitc::register_memory(outside_chars.data(), outside_chars.size());
  splitc::spread_array<std::uintptr_t> where{2 * std::size_t(procs)};
  *where[std::size_t(me)].local() = reinterpret_cast<std::uintptr_t>(outside.data());
  *where[std::size_t(procs + me)].local() = reinterpret_cast<std::uintptr_t>(outside_chars.data());
  splitc::barrier();
  auto* right_ints = reinterpret_cast<int*>(splitc::read(where[std::size_t(right)]));
  auto* right_chars = reinterpret_cast<char*>(splitc::read(where[std::size_t(procs + right)]));
  splitc::put(splitc::global_ptr<int>(right, right_ints), 70 + me);
  splitc::store(splitc::global_ptr<int>(right, right_ints + 1), 80 + me);
  splitc::store(splitc::global_ptr<char>(right, right_chars), char('k' + me));
  splitc::sync();
  splitc::store_sync(sizeof(int) + sizeof(char));  // both stores counted their bytes
  CHECK(outside[0] == 70 + left && outside[1] == 80 + left);
  CHECK(outside_chars[0] == char('k' + left));
  splitc::barrier();
  splitc::unregister_memory(outside.data());
  splitc::unregister_memory(outside_chars.data());

  // Values of two words and of an odd size.
  splitc::spread_array<Pair> pairs{std::size_t(procs)};
  splitc::spread_array<Triple> triples{std::size_t(procs)};
  splitc::put(pairs[std::size_t(right)], Pair{me, me + 0.5});
  splitc::put(triples[std::size_t(right)], Triple{me, -me, 3 * me});
  splitc::sync();
  splitc::barrier();
  CHECK(*pairs[std::size_t(me)].local() == (Pair{left, left + 0.5}));
  CHECK(*triples[std::size_t(me)].local() == (Triple{left, -left, 3 * left}));
  Pair p{};
  splitc::get(p, pairs[std::size_t(right)]);
  splitc::sync();
  CHECK(p == (Pair{me, me + 0.5}));

  // Blocking read and write.
  splitc::write(src.base(right), -5L);
  splitc::barrier();
  CHECK(src.local()[0] == -5);
  CHECK(splitc::read(src.base(left)) == -5);
  splitc::barrier();
}

void stores() {
  constexpr std::size_t kPer = 300;
  splitc::spread_array<int> box(kPer * std::size_t(procs), kPer);
  // Small stores to the right; the receiver knows how many bytes to expect.
  for (std::size_t i = 0; i < kPer; ++i) splitc::store(box.base(right) + std::ptrdiff_t(i), int(i) + me);
  splitc::store_sync(kPer * sizeof(int));
  for (std::size_t i = 0; i < kPer; ++i) CHECK(box.local()[i] == int(i) + left);
  splitc::sync();
  splitc::barrier();

  // A bulk store counts its bytes too; halves arriving separately are taken separately.
  std::vector<int> mine(kPer);
  std::iota(mine.begin(), mine.end(), 100 * me);
  splitc::bulk_store(box.base(right), mine.data(), kPer / 2);
  splitc::store_sync(kPer / 2 * sizeof(int));
  splitc::bulk_store(box.base(right) + std::ptrdiff_t(kPer / 2), mine.data() + kPer / 2, kPer - kPer / 2);
  splitc::store_sync((kPer - kPer / 2) * sizeof(int));
  for (std::size_t i = 0; i < kPer; ++i) CHECK(box.local()[i] == 100 * left + int(i));

  // all_store_sync: everybody to everybody, then the count starts from zero.
  splitc::spread_array<int> all(std::size_t(procs * procs), std::size_t(procs));
  for (int q = 0; q < procs; ++q) splitc::store(all[std::size_t(q * procs + me)], q * 10 + me);
  splitc::all_store_sync();
  for (int p = 0; p < procs; ++p) CHECK(all.local()[std::size_t(p)] == me * 10 + p);
  splitc::store(box.base(right), 1);
  splitc::store_sync(sizeof(int));  // only the store after all_store_sync counts
  CHECK(box.local()[0] == 1);
  splitc::all_store_sync();
}

void bulk() {
  // Large enough for RDMA on reliable VIs, and chunked messages otherwise.
  constexpr std::size_t kCount = 40000;
  splitc::spread_array<double> a(kCount * std::size_t(procs), kCount);
  for (std::size_t i = 0; i < kCount; ++i) a.local()[i] = double(me) * 1e6 + double(i);
  splitc::barrier();
  std::vector<double> from_right(kCount), from_left(kCount);
  splitc::bulk_get(from_right.data(), a.base(right), kCount);
  splitc::bulk_read(from_left.data(), a.base(left), kCount);
  splitc::sync();
  for (std::size_t i = 0; i < kCount; i += 997) {
    CHECK(from_right[i] == double(right) * 1e6 + double(i));
    CHECK(from_left[i] == double(left) * 1e6 + double(i));
  }
  CHECK(from_right.back() == double(right) * 1e6 + double(kCount - 1));
  splitc::barrier();

  std::vector<double> mine(kCount, double(me) + 0.25);
  splitc::bulk_put(a.base(right), mine.data(), kCount / 2);
  splitc::bulk_write(a.base(right) + std::ptrdiff_t(kCount / 2), mine.data(), kCount - kCount / 2);
  splitc::sync();
  splitc::barrier();
  CHECK(std::all_of(a.local().begin(), a.local().end(), [](double v) { return v == double(left) + 0.25; }));

  // A remote range outside global memory is refused, not followed.
  bool threw = false;
  try {
    double x;
    splitc::bulk_read(&x, splitc::global_ptr<double>(right, reinterpret_cast<double*>(64)), 1);
  } catch (const splitc::error&) {
    threw = true;
  }
  CHECK(threw);
  splitc::barrier();
}

long fetch_add(long& x, long d) {
  const long old = x;
  x += d;
  return old;
}
void scale_add(double& x, double m, Triple t) { x = x * m + t.x + t.y + t.z; }

void atomics() {
  constexpr long kRounds = 50;
  splitc::spread_array<long> counter{std::size_t(procs)};
  splitc::spread_array<double> cell{std::size_t(procs)};
  std::vector<long> seen;
  for (long i = 0; i < kRounds; ++i) seen.push_back(splitc::atomic(fetch_add, counter[0], 1L));
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  splitc::barrier();
  if (me == 0) CHECK(*counter[0].local() == kRounds * procs);
  // Every value 0 .. kRounds*procs-1 handed out exactly once.
  const long sum = splitc::all_reduce_to_all(std::accumulate(seen.begin(), seen.end(), 0L), splitc::reduce_op::sum);
  const long n = kRounds * procs;
  CHECK(sum == n * (n - 1) / 2);

  splitc::atomic(scale_add, cell[std::size_t(right)], 2.0, Triple{1, 2, 3});
  splitc::atomic(+[](double& x) { x += 0.5; }, cell[std::size_t(right)]);
  splitc::barrier();
  CHECK(*cell[std::size_t(me)].local() == 6.5);
  splitc::barrier();
}

void collectives() {
  CHECK(splitc::all_reduce_to_all(me + 1, splitc::reduce_op::sum) == procs * (procs + 1) / 2);
  CHECK(splitc::all_reduce_to_all(long(me) - 5, splitc::reduce_op::min) == -5L);
  CHECK(splitc::all_reduce_to_all(-me, splitc::reduce_op::max) == 0);
  CHECK(splitc::all_reduce_to_all(me * 0.5, splitc::reduce_op::max) == (procs - 1) * 0.5);
  CHECK(splitc::all_reduce_to_all(-1.5 * me, splitc::reduce_op::min) == -1.5 * (procs - 1));
  CHECK(splitc::all_reduce_to_all(0.25, splitc::reduce_op::sum) == 0.25 * procs);
  const std::uint64_t top = std::uint64_t(1) << 63;  // unsigned sums wrap
  CHECK(splitc::all_reduce_to_all_add(top) == (procs % 2 ? top : 0));
  CHECK(splitc::all_reduce_to_all_max(std::uint64_t(me) << 40) == std::uint64_t(procs - 1) << 40);
  for (int root = 0; root < procs; ++root) {
    CHECK(splitc::all_bcast(me * 100 + 1, root) == root * 100 + 1);
    CHECK(splitc::all_bcast(me + 0.5, root) == root + 0.5);
  }
  // Memory of one rank, found by everyone through a broadcast address.
  splitc::global_ptr<long> mine = splitc::allocate<long>(procs);
  std::fill_n(mine.local(), procs, 0L);
  const auto address = splitc::all_bcast(reinterpret_cast<std::uintptr_t>(mine.raw()), 0);
  splitc::global_ptr<long> on_zero(0, reinterpret_cast<long*>(address));
  splitc::store(on_zero + me, long(me) + 1);
  splitc::all_store_sync();
  if (me == 0)
    for (int r = 0; r < procs; ++r) CHECK(mine.local()[r] == r + 1);
  splitc::barrier();
  splitc::deallocate(mine);
}

// sync() waits for this rank's own gets, puts and stores, not for a peer that
// computes without polling: after a barrier, rank 1 sleeps (no Split-C or AM
// call) while the others get in bulk from one another (not from rank 1: over
// tcp a read is served by its target) and sync. AM acknowledges the barrier's
// release (rank 0 sends it) only when rank 1 next polls; a sync that waited
// for every AM request to be acknowledged would wait out the sleep on rank 0.
void sync_does_not_wait_for_a_busy_peer() {
  constexpr auto kBusy = std::chrono::milliseconds(1500);
  splitc::spread_array<long> data(std::size_t(procs) * 1024, 1024);
  for (std::size_t i = 0; i < 1024; ++i) data.local()[i] = value_of(i) + me;
  splitc::barrier();
  if (me == 1) {
    std::this_thread::sleep_for(kBusy);
  } else {
    int partner = (me + 1) % procs;
    if (partner == 1) partner = (partner + 1) % procs;  // with 2 ranks: rank 0 itself
    std::vector<long> got(1024);
    const auto start = std::chrono::steady_clock::now();
    splitc::bulk_get(got.data(), data.base(partner), 1024);
    splitc::sync();
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took < kBusy / 2);
    CHECK(got[1023] == value_of(1023) + partner);
  }
  splitc::barrier();
}

}  // namespace

// Before init, a store or put to another rank is refused, not written into
// a bundle (the inline path leaves it to the library, which says why).
bool refused_before_init() {
  int target = 0;
  const splitc::global_ptr<int> elsewhere(1, &target);
  int refusals = 0;
  try {
    splitc::store(elsewhere, 1);
  } catch (const splitc::error&) {
    ++refusals;
  }
  try {
    splitc::put(elsewhere, 2);
  } catch (const splitc::error&) {
    ++refusals;
  }
  return refusals == 2 && target == 0;
}

int main() {
  const bool refused = refused_before_init();
  try {
    splitc::session session;
    me = MYPROC;
    procs = PROCS;
    CHECK(refused);
    right = (me + 1) % procs;
    left = (me + procs - 1) % procs;
    global_pointers();
    layouts();
    get_put_sync();
    stores();
    bulk();
    atomics();
    collectives();
    sync_does_not_wait_for_a_busy_peer();
    const int all = splitc::all_reduce_to_all(failures, splitc::reduce_op::sum);
    if (me == 0) std::printf("splitc_features: %d ranks, %s\n", procs, all ? "FAILED" : "all checks passed");
    return all ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", me, e.what());
    return 1;
  }
}
