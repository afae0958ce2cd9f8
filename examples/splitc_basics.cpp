// splitc_basics.cpp: Split-C (splitc/splitc.hpp) in one program: a spread
// array, split-phase gets and puts, barriers, bulk transfers and reductions.
//
//   viarun -n 3 build/bin/splitc_basics [--elements N]
//
// Every rank runs this same program (SPMD) and reaches the others' memory
// through global pointers. Split-phase operations (get, put) only start:
// many are in flight at once, and sync() waits for all of them; barrier()
// does not wait for them, so a program calls sync() before it.
//
//   1. A cyclic spread array: element i lives on rank i % PROCS. Each rank
//      fills its own elements, where they are plain local memory.
//   2. Split-phase gets: each rank starts a get of every element its right
//      neighbour holds, then syncs once.
//   3. Split-phase puts: each rank writes the elements of a second array that
//      its left neighbour holds, syncs, and after a barrier each checks its own.
//   4. Bulk transfers: a blocked spread array (one block per rank); each rank
//      reads its right neighbour's whole block in one bulk_read, and writes
//      it back negated with one bulk_put.
//   5. Reductions: the sum and the largest of every rank's values, on every rank.
//
// Each rank checks what it gets; any failure prints a line on stderr and
// exits 1 (splitc::error, thrown by a failed operation, included).
#include <splitc/splitc.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include "example_options.h"

namespace {

// The value of element i.
long value_of(std::size_t i) { return 3 * long(i) + 1; }

// A problem found by this rank; the job goes on to the end, then exits 1.
bool failed = false;
void fail_if(bool wrong, const char* what, std::size_t index) {
  if (!wrong) return;
  if (!failed) std::fprintf(stderr, "splitc_basics rank %d: %s, first at element %zu\n", MYPROC, what, index);
  failed = true;
}

void run(std::size_t per_rank) {
  const std::size_t procs = std::size_t(PROCS), me = std::size_t(MYPROC), n = per_rank * procs;
  const std::size_t right = (me + 1) % procs, left = (me + procs - 1) % procs;

  // 1. A cyclic spread array. Construction is collective and ends in a
  // barrier. Local elements of a cyclic array: i = me, me + P, me + 2P, ...
  splitc::spread_array<long> values(n);
  std::span<long> mine = values.local();
  for (std::size_t k = 0; k < per_rank; ++k) mine[k] = value_of(me + k * procs);
  splitc::barrier();  // everyone's elements are written before anyone reads

  // 2. Split-phase gets of the right neighbour's elements: all started, then one sync.
  std::vector<long> fetched(per_rank);
  for (std::size_t k = 0; k < per_rank; ++k) splitc::get(fetched[k], values[right + k * procs]);
  splitc::sync();
  for (std::size_t k = 0; k < per_rank; ++k)
    fail_if(fetched[k] != value_of(right + k * procs), "a get returned a wrong value", right + k * procs);

  // 3. Split-phase puts into the left neighbour's elements of another array.
  splitc::spread_array<long> negatives(n);
  for (std::size_t k = 0; k < per_rank; ++k) splitc::put(negatives[left + k * procs], -value_of(left + k * procs));
  splitc::sync();     // our puts are done...
  splitc::barrier();  // ...and everyone's: each rank's elements are all written
  for (std::size_t k = 0; k < per_rank; ++k)
    fail_if(negatives.local()[k] != -value_of(me + k * procs), "a put left a wrong value", me + k * procs);

  // 4. Bulk transfers on a blocked array: rank r's block is elements r*B .. r*B+B-1.
  splitc::spread_array<double> blocks(n, splitc::layout::blocked);
  std::span<double> my_block = blocks.local();
  for (std::size_t k = 0; k < per_rank; ++k) my_block[k] = double(me * per_rank + k) / 2;
  splitc::barrier();
  std::vector<double> copy(per_rank);
  splitc::bulk_read(copy.data(), blocks.base(int(right)), per_rank);  // one transfer, blocking
  for (std::size_t k = 0; k < per_rank; ++k)
    fail_if(copy[k] != double(right * per_rank + k) / 2, "bulk_read returned a wrong value", right * per_rank + k);
  // Write it back negated: split-phase, `copy` must stay untouched until sync().
  for (double& value : copy) value = -value;
  splitc::bulk_put(blocks.base(int(right)), copy.data(), per_rank);
  splitc::sync();
  splitc::barrier();
  // Our left neighbour did the same to our block.
  for (std::size_t k = 0; k < per_rank; ++k)
    fail_if(my_block[k] != -double(me * per_rank + k) / 2, "bulk_put left a wrong value", me * per_rank + k);

  // 5. Reductions: collective, the result on every rank.
  long local_sum = 0, local_max = 0;
  for (long value : mine) {
    local_sum += value;
    local_max = std::max(local_max, value);
  }
  const long sum = splitc::all_reduce_to_all_add(local_sum);
  const long largest = splitc::all_reduce_to_all_max(local_max);
  const long expected_sum = 3 * long(n) * long(n - 1) / 2 + long(n);  // value_of(0) + ... + value_of(n - 1)
  fail_if(sum != expected_sum, "the sum of the values is wrong", 0);
  fail_if(largest != value_of(n - 1), "the largest value is wrong", n - 1);
  if (MYPROC == 0 && !failed)
    std::printf("splitc_basics: %d ranks, %zu elements per array; gets, puts, bulk transfers and reductions all "
                "checked (sum of the values %ld)\n",
                PROCS, n, sum);
}

}  // namespace

int main(int argc, char** argv) {
  long per_rank = 1000;
  usage_text =
      "usage: viarun -n N splitc_basics [--elements N]\n"
      "\n"
      "Split-C (splitc/splitc.hpp) on any number of ranks: a cyclic and a blocked\n"
      "spread array, split-phase gets and puts with sync(), barriers, bulk_read and\n"
      "bulk_put, and reductions to every rank. Every value is checked.\n"
      "\n"
      "  --elements N  elements of each array per rank (1..1000000, default 1000)\n"
      "  --help        this text\n"
      "\n"
      "Environment: VIASTACK_AM_SEGMENT (default 64 MiB here): the global memory\n"
      "of each rank, from which the spread arrays come.\n"
      "\n"
      "Exit status: 0 every value checked; 1 a wrong value or a failed operation;\n"
      "2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--elements", 1, 1000000, &per_rank)) usage_error("unknown option", argv[i]);
  }
  try {
    splitc::session session;  // collective: init now, finalize at the end of the scope
    run(std::size_t(per_rank));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "splitc_basics: %s\n", e.what());
    return EXAMPLE_FAILED;
  }
  return failed ? EXAMPLE_FAILED : EXAMPLE_OK;
}
