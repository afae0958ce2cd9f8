// am_futures.cpp: Active Messages from C++ (am/am.hpp): what am_counter.c
// does, with lambdas as handlers and futures for bulk transfers.
//
//   1. Request and reply: every rank asks rank 0, N times, to add 1 to a
//      counter. Handlers are lambdas taking (am::Token, arguments...), and
//      the token's reply() answers the requester.
//   2. Store: every rank stores a block into every other rank's segment, all
//      at once. am::store returns an am::Future, ready once the store handler
//      has run at the destination: when all of them are, the blocks are there,
//      with no barrier.
//   3. Get: every rank reads its blocks back from all the others at once.
//      am::get's future is ready once the bytes are here; futures can be
//      waited for (wait()) or polled (ready()) while the program does other work.
//
//   viarun -n 3 build/bin/am_futures [--requests N] [--bytes N]
//
// Handlers run only inside AM calls (am::poll, am::wait_until, Future::wait,
// and every other call). Each rank checks what it receives; any failure
// prints a line on stderr and exits 1.
#include <am/am.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "example_options.h"

namespace {

enum : int { kCounterAdd = 1, kCounterReply = 2, kBlockStored = 3 };

// Byte j of the block rank `from` stores on rank `to`.
std::byte pattern(int from, int to, std::size_t j) { return std::byte((from * 37 + to * 13 + j * 11 + 5) & 0xff); }

void require(am::Status status, const char* what) {
  if (status == am::Status::ok) return;
  std::fprintf(stderr, "am_futures rank %d: %s failed: %s (%s)\n", am::my_proc(), what, am::describe(status),
               am::last_error());
  std::exit(EXAMPLE_FAILED);
}

}  // namespace

int main(int argc, char** argv) {
  long requests = 1000, bytes = 4096;
  usage_text =
      "usage: viarun -n N am_futures [--requests N] [--bytes N]\n"
      "\n"
      "Active Messages from C++ (am/am.hpp) on any number of ranks: lambdas as\n"
      "handlers; every rank sends N requests to rank 0, whose handler adds to a\n"
      "counter and replies; every rank stores a block into every other rank's\n"
      "segment and gets it back, with all transfers outstanding at once and an\n"
      "am::Future for each. Every byte and the final count are checked.\n"
      "\n"
      "  --requests N  adds each rank asks rank 0 for (1..1000000, default 1000)\n"
      "  --bytes N     each block's size (1..1048576, default 4096)\n"
      "  --help        this text\n"
      "\n"
      "Environment: VIASTACK_AM_RELIABILITY=unreliable runs AM over unreliable VIs\n"
      "(try it with VIASTACK_FAULTS=drop=0.1); the other VIASTACK_AM_* in am.h.\n"
      "\n"
      "Exit status: 0 everything arrived and checked; 1 an AM error or a wrong\n"
      "value; 2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--requests", 1, 1000000, &requests) &&
        !number_option(argc, argv, &i, "--bytes", 1, 1 << 20, &bytes))
      usage_error("unknown option", argv[i]);
  }
  const auto block_bytes = static_cast<std::size_t>(bytes);

  // What the handlers change. They run on this thread, inside AM calls.
  am::Word counter = 0;        // rank 0's
  long replies = 0;            // to this rank's adds
  am::Word largest_reply = 0;  // the largest counter value a reply carried
  int stores_arrived = 0;      // blocks other ranks stored here
  bool failed = false;         // something came back undelivered, or arrived wrong

  // Handlers first, the same indices on every rank; then the collective start.
  require(am::set_handler(kCounterAdd,
                          [&](am::Token token, am::Word amount) {
                            counter += amount;
                            if (token.reply(kCounterReply, counter) != am::Status::ok) failed = true;
                          }),
          "am::set_handler");
  require(am::set_handler(kCounterReply,
                          [&](am::Token, am::Word value) {
                            ++replies;
                            largest_reply = std::max(largest_reply, value);
                          }),
          "am::set_handler");
  require(am::set_mem_handler(kBlockStored,
                              [&](int src, void* address, std::size_t size, am::Word sender) {
                                const auto* block = static_cast<const std::byte*>(address);
                                bool ok = size == block_bytes && sender == am::Word(src);
                                for (std::size_t j = 0; ok && j < size; ++j)
                                  ok = block[j] == pattern(src, am::my_proc(), j);
                                if (!ok) {
                                  std::fprintf(stderr, "am_futures rank %d: the block rank %d stored is wrong\n",
                                               am::my_proc(), src);
                                  failed = true;
                                }
                                ++stores_arrived;
                              }),
          "am::set_mem_handler");
  am::set_error_handler([&](const am::Returned& returned) {
    std::fprintf(stderr, "am_futures rank %d: a message to rank %d came back: %s\n", am::my_proc(), returned.dest,
                 returned.description);
    failed = true;
  });
  require(am::enable(), "am::enable");
  const int me = am::my_proc(), procs = am::procs();
  if (std::size_t(procs) * block_bytes > am::segment_size(me)) {
    std::fprintf(stderr, "am_futures: %d blocks of %zu bytes do not fit in a segment of %zu (VIASTACK_AM_SEGMENT)\n",
                 procs, block_bytes, am::segment_size(me));
    return EXAMPLE_FAILED;
  }

  // 1. Request/reply.
  for (long i = 0; i < requests; ++i) require(am::request(0, kCounterAdd, am::Word(1)), "am::request");
  require(am::wait_until([&] { return failed || replies == requests; }), "am::wait_until");
  require(am::barrier(), "am::barrier");  // every rank's adds are in
  const am::Word total = am::Word(procs) * am::Word(requests);
  if (!failed && (me == 0 ? counter != total : largest_reply > total)) {
    std::fprintf(stderr, "am_futures rank %d: the counter is %llu, the replies went up to %llu; expected %llu\n", me,
                 static_cast<unsigned long long>(counter), static_cast<unsigned long long>(largest_reply),
                 static_cast<unsigned long long>(total));
    failed = true;
  }

  // 2. Store a block into every other rank's segment, at slot `me`: all
  // outstanding at once, each block untouched until its future is ready.
  auto slot_on = [&](int rank) { return static_cast<std::byte*>(am::segment(rank)) + std::size_t(me) * block_bytes; };
  std::vector<std::vector<std::byte>> blocks(std::size_t(procs), std::vector<std::byte>(block_bytes, std::byte{0}));
  std::vector<am::Future> stores;
  for (int p = 0; p < procs; ++p) {
    if (p == me) continue;
    for (std::size_t j = 0; j < block_bytes; ++j) blocks[std::size_t(p)][j] = pattern(me, p, j);
    stores.push_back(am::store(p, blocks[std::size_t(p)].data(), slot_on(p), block_bytes, kBlockStored, am::Word(me)));
  }
  // Ready = the store handler ran there: our blocks are in place everywhere.
  for (const am::Future& store : stores) require(store.wait(), "am::store");

  // 3. Get every block back, all at once, and poll until all have arrived.
  std::vector<std::vector<std::byte>> back(std::size_t(procs), std::vector<std::byte>(block_bytes, std::byte{0}));
  std::vector<am::Future> gets;
  for (int p = 0; p < procs; ++p)
    if (p != me) gets.push_back(am::get(p, slot_on(p), back[std::size_t(p)].data(), block_bytes));
  while (!std::all_of(gets.begin(), gets.end(), [](const am::Future& get) { return get.ready(); }))
    am::poll();  // a program would do useful work here
  for (const am::Future& get : gets) require(get.status(), "am::get");
  for (int p = 0; p < procs; ++p)
    if (p != me && back[std::size_t(p)] != blocks[std::size_t(p)]) {
      std::fprintf(stderr, "am_futures rank %d: the block got back from rank %d differs from the one stored\n", me, p);
      failed = true;
    }

  // The others' stores into this rank: every one ran its handler here.
  require(am::wait_until([&] { return failed || stores_arrived == procs - 1; }), "am::wait_until");
  require(am::disable(), "am::disable");  // collective: a barrier, then the connections close
  if (failed) return EXAMPLE_FAILED;
  if (me == 0)
    std::printf("am_futures: %d ranks; rank 0's counter reached %llu (%ld requests from each rank, each replied to); "
                "%zu-byte blocks stored into every other rank and got back, every byte checked\n",
                procs, static_cast<unsigned long long>(counter), requests, block_bytes);
  return EXAMPLE_OK;
}
