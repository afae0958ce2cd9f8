// What Split-C refuses, and what it survives. One mode per run:
//
//   viarun -n 2 -- splitc_safety bad_access
//       rank 0 gets, puts, stores and runs atomics at addresses of rank 1 that
//       Split-C may not touch (address 8, an unmapped address, just past the
//       segment, memory not registered); each comes back as splitc::error,
//       and rank 1 keeps running (it answers afterwards).
//   viarun -n 2 -- splitc_safety reserved_handlers
//       am::set_handler and am_set_handler refuse Split-C's handler indices,
//       naming Split-C; Split-C's puts still land.
//   viarun -n 2 -- splitc_safety handler_taken_before_init
//       a handler the program set in Split-C's range makes init fail, naming it.
//   viarun -n 2 -- splitc_safety peer_leaves
//       rank 1 leaves without finalize while rank 0 destroys a spread array
//       (its barrier) and ends its session: both throw splitc::error, neither
//       terminates the process.
//
// Exit 0 only if every check passes.
#include <splitc/splitc.hpp>

#include "check.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using splitc_test::failures;

// Whether `op` (completed by sync) throws splitc::error saying the range is
// outside what Split-C may reach at the target.
template <class Op>
bool refused(const char* what, Op op) {
  try {
    op();
    splitc::sync();
  } catch (const splitc::error& e) {
    if (std::strstr(e.what(), "outside")) return true;
    std::fprintf(stderr, "%s: refused for another reason: %s\n", what, e.what());
    return false;
  }
  std::fprintf(stderr, "%s: not refused\n", what);
  return false;
}

long add(long& x, long d) { return x += d; }

int bad_access() {
  splitc::session session;
  const int me = MYPROC;
  // Rank 1's addresses: the end of its segment, a heap value outside it.
  splitc::spread_array<std::uintptr_t> where(2 * std::size_t(PROCS));
  std::vector<long> heap(4, 7);
  splitc::spread_array<long> element(std::size_t(PROCS));
  *where[std::size_t(me)].local() = reinterpret_cast<std::uintptr_t>(am::segment(me)) + am::segment_size(me);
  *where[std::size_t(PROCS + me)].local() = reinterpret_cast<std::uintptr_t>(heap.data());
  splitc::barrier();
  if (me == 0) {
    const auto segment_end = splitc::read(where[1]);
    auto* const heap_of_1 = reinterpret_cast<long*>(splitc::read(where[std::size_t(PROCS + 1)]));
    auto* const eight = reinterpret_cast<long*>(8);
    auto* const unmapped = reinterpret_cast<long*>(std::uintptr_t(0x7a5a00000000));
    long value = 0;
    struct Pair {
      long a, b;
    } pair{};
    CHECK(refused("get at 8", [&] { splitc::get(value, splitc::global_ptr<long>(1, eight)); }));
    CHECK(refused("put at 8", [&] { splitc::put(splitc::global_ptr<long>(1, eight), 1L); }));
    CHECK(refused("store at 8", [&] { splitc::store(splitc::global_ptr<int>(1, reinterpret_cast<int*>(8)), 1); }));
    CHECK(refused("get of two words, unmapped",
                  [&] { splitc::get(pair, splitc::global_ptr<Pair>(1, reinterpret_cast<Pair*>(unmapped))); }));
    CHECK(refused("put, unmapped", [&] { splitc::put(splitc::global_ptr<long>(1, unmapped), 2L); }));
    // Values of 4 bytes or less just past the segment travel as an offset in it.
    CHECK(refused("put of 4 bytes past the segment",
                  [&] { splitc::put(splitc::global_ptr<int>(1, reinterpret_cast<int*>(segment_end)), 3); }));
    CHECK(refused("store of 1 byte far past the segment",
                  [&] { splitc::store(splitc::global_ptr<char>(1, reinterpret_cast<char*>(segment_end + 4096)), 'x'); }));
    // A value that starts inside the segment and ends outside it.
    CHECK(refused("put across the segment's end",
                  [&] { splitc::put(splitc::global_ptr<long>(1, reinterpret_cast<long*>(segment_end - 4)), 4L); }));
    CHECK(refused("atomic at 8", [&] { (void)splitc::atomic(add, splitc::global_ptr<long>(1, eight), 1L); }));
    // Memory outside the segment that rank 1 did not register.
    CHECK(refused("get from the heap, unregistered", [&] { splitc::get(value, splitc::global_ptr<long>(1, heap_of_1)); }));
    CHECK(refused("store to the heap, unregistered", [&] { splitc::store(splitc::global_ptr<long>(1, heap_of_1), 5L); }));
    // Rank 1 is alive and still answers: an ordinary get and put.
    splitc::put(element[1], 41L);
    splitc::sync();
    CHECK(splitc::read(element[1]) == 41);
  }
  return splitc::all_reduce_to_all(failures, splitc::reduce_op::sum) == 0 ? 0 : 1;
}

int registered_memory() {
  splitc::session session;
  const int me = MYPROC;
  std::vector<long> heap(4, 7);
  splitc::spread_array<std::uintptr_t> where(std::size_t(PROCS));
  *where[std::size_t(me)].local() = reinterpret_cast<std::uintptr_t>(heap.data());
  // Registered memory is reachable, whole and only whole; no longer once unregistered.
  if (me == 1) splitc::register_memory(heap.data(), heap.size() * sizeof(long));
  splitc::barrier();
  auto* const heap_of_1 = reinterpret_cast<long*>(splitc::read(where[1]));
  if (me == 0) {
    CHECK(splitc::read(splitc::global_ptr<long>(1, heap_of_1 + 3)) == 7);
    splitc::write(splitc::global_ptr<long>(1, heap_of_1 + 1), 9L);
    CHECK(splitc::atomic(add, splitc::global_ptr<long>(1, heap_of_1 + 2), 5L) == 12);
    CHECK(refused("put just past a registered region", [&] { splitc::put(splitc::global_ptr<long>(1, heap_of_1 + 4), 1L); }));
  }
  splitc::barrier();
  if (me == 1) {
    CHECK(heap[1] == 9 && heap[2] == 12 && heap[0] == 7 && heap[3] == 7);
    splitc::unregister_memory(heap.data());
  }
  splitc::barrier();
  if (me == 0) CHECK(refused("put to an unregistered region", [&] { splitc::put(splitc::global_ptr<long>(1, heap_of_1), 1L); }));
  // Registration's own mistakes.
  for (auto bad : {+[](long* p) { splitc::register_memory(p, 0); },
                   +[](long* p) { splitc::register_memory(p + 1, sizeof(long)); },  // overlaps the one below
                   +[](long*) { splitc::unregister_memory(reinterpret_cast<void*>(16)); }}) {
    std::vector<long> mine(2);
    splitc::register_memory(mine.data(), sizeof mine[0] * 2);
    bool threw = false;
    try {
      bad(mine.data());
    } catch (const splitc::error&) {
      threw = true;
    }
    CHECK(threw);
    splitc::unregister_memory(mine.data());
  }
  return splitc::all_reduce_to_all(failures, splitc::reduce_op::sum) == 0 ? 0 : 1;
}

void ignore(int, am_word_t, am_word_t, am_word_t, am_word_t) {}

int reserved_handlers() {
  splitc::session session;
  for (int index : {224, 233, 239}) {
    CHECK(am::set_handler(index, [](am::Token) {}) == am::Status::bad_arg);
    CHECK(std::strstr(am::last_error(), "Split-C") != nullptr);
    CHECK(am_set_handler(index, ignore) == AM_ERR_BAD_ARG);
    CHECK(std::strstr(am_last_error(), "Split-C") != nullptr);
    CHECK(am::set_mem_handler(index, [](int, void*, std::size_t, am::Word) {}) == am::Status::bad_arg);
  }
  CHECK(am::set_handler(223, [](am::Token) {}) == am::Status::ok);
  CHECK(am::set_handler(240, [](am::Token) {}) == am::Status::ok);
  // Split-C's own handlers are still in place: puts of every path land.
  splitc::spread_array<long> words(std::size_t(PROCS));
  splitc::spread_array<int> ints(std::size_t(PROCS));
  const int right = (MYPROC + 1) % PROCS, left = (MYPROC + PROCS - 1) % PROCS;
  for (int i = 0; i < 10; ++i) {
    splitc::put(words[std::size_t(right)], long(100 + MYPROC + i));
    splitc::put(ints[std::size_t(right)], 200 + MYPROC + i);
  }
  splitc::sync();
  splitc::barrier();
  CHECK(*words[std::size_t(MYPROC)].local() == 109 + left);
  CHECK(*ints[std::size_t(MYPROC)].local() == 209 + left);
  return splitc::all_reduce_to_all(failures, splitc::reduce_op::sum) == 0 ? 0 : 1;
}

int handler_taken_before_init() {
  if (am::set_handler(233, [](am::Token) {}) != am::Status::ok) return 1;
  try {
    splitc::init();
  } catch (const splitc::error& e) {
    std::fprintf(stderr, "init refused as expected: %s\n", e.what());
    return std::strstr(e.what(), "233") ? 0 : 1;
  }
  std::fprintf(stderr, "init took handler 233, which the program had set\n");
  return 1;
}

int peer_leaves() {
  bool array_threw = false, session_threw = false;
  try {
    splitc::session session;
    try {
      splitc::spread_array<long> a(std::size_t(PROCS));
      if (MYPROC == 1) {
        std::fflush(stdout);
        _exit(0);  // no finalize: rank 0's barriers find it gone
      }
    } catch (const splitc::error& e) {
      std::fprintf(stderr, "rank 0: the spread array's barrier threw: %s\n", e.what());
      array_threw = true;
    }
  } catch (const splitc::error& e) {
    std::fprintf(stderr, "rank 0: finalize threw: %s\n", e.what());
    session_threw = true;
  }
  return array_threw && session_threw ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "bad_access") return bad_access();
    if (mode == "registered_memory") return registered_memory();
    if (mode == "reserved_handlers") return reserved_handlers();
    if (mode == "handler_taken_before_init") return handler_taken_before_init();
    if (mode == "peer_leaves") return peer_leaves();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", MYPROC, e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: splitc_safety bad_access|registered_memory|reserved_handlers|handler_taken_before_init|peer_leaves\n");
  return 2;
}
