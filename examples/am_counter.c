/*
 * am_counter.c: Active Messages from C (am.h), the three things AM does.
 *
 *   1. Request and reply: every rank asks rank 0, N times, to add 1 to a
 *      counter. Rank 0's request handler adds and replies with the new value;
 *      the reply handler back at the asker counts the replies.
 *   2. Store: every rank copies a block of bytes into its right neighbour's AM
 *      segment; the store handler runs there once the bytes have landed.
 *   3. Get: every rank reads the block back out of its neighbour's segment;
 *      the get handler runs here once the bytes have arrived.
 *
 *   viarun -n 2 build/bin/am_counter [--requests N] [--bytes N]
 *
 * Handlers run only inside AM calls (am_poll, am_wait_until, and every other
 * call): nothing happens behind the program's back. Handler indices are
 * registered the same way on every rank, before am_enable. Each rank checks
 * what it receives; any failure prints a line on stderr and exits 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am.h>

#include "example_options.h"

enum { COUNTER_ADD = 1, COUNTER_REPLY = 2, BLOCK_STORED = 3, BLOCK_FETCHED = 4 };

static int me, procs;
static am_word_t counter;            /* rank 0's: the sum of every rank's adds */
static long replies;                 /* replies to this rank's adds */
static am_word_t largest_reply;      /* the largest counter value a reply carried */
static int stores_arrived;           /* blocks stored into this rank's segment */
static int fetched;                  /* this rank's get has completed */
static int failed;                   /* something came back undelivered, or arrived wrong */
static long block_bytes = 4096;

static unsigned char pattern(int owner, size_t j) { return (unsigned char)(owner * 37 + j * 11 + 5); }

/* 1. Request handler (runs on rank 0): add, and answer the requester. */
static void counter_add(int src, am_word_t amount, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)a1, (void)a2, (void)a3;
  counter += amount;
  if (am_reply_1(src, COUNTER_REPLY, counter) != AM_OK) {
    fprintf(stderr, "am_counter rank %d: reply failed: %s\n", me, am_last_error());
    failed = 1;
  }
}

/* Reply handler (runs on the requester). */
static void counter_reply(int src, am_word_t value, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)src, (void)a1, (void)a2, (void)a3;
  ++replies;
  if (value > largest_reply) largest_reply = value;
}

/* 2. Store handler (runs where the bytes landed, once they are all there). */
static void block_stored(int src, void *addr, size_t nbytes, am_word_t sender) {
  const unsigned char *bytes = addr;
  int ok = nbytes == (size_t)block_bytes && sender == (am_word_t)src;
  for (size_t j = 0; ok && j < nbytes; ++j) ok = bytes[j] == pattern(src, j);
  if (!ok) {
    fprintf(stderr, "am_counter rank %d: the block rank %d stored here is wrong\n", me, src);
    failed = 1;
  }
  ++stores_arrived;
}

/* 3. Get handler (runs here, once the bytes have arrived). */
static void block_fetched(int src, void *addr, size_t nbytes, am_word_t arg) {
  (void)src, (void)addr, (void)nbytes, (void)arg;
  fetched = 1;
}

/* A message AM could not deliver comes back here (a dead rank, a bad
 * handler index, an address outside the segment). */
static void on_returned(const am_returned_t *returned) {
  fprintf(stderr, "am_counter rank %d: a message to rank %d came back: %s\n", me, returned->dest,
          returned->description);
  failed = 1;
}

/* Predicates for am_wait_until: each also ends the wait on a failure. */
static int all_replies_in(void *requests) { return failed || replies == *(long *)requests; }
static int block_arrived(void *unused) { return (void)unused, failed || stores_arrived == 1; }
static int block_fetched_back(void *unused) { return (void)unused, failed || fetched; }

static void check(int rc, const char *what) {
  if (rc == AM_OK) return;
  fprintf(stderr, "am_counter rank %d: %s failed (%d): %s\n", me, what, rc, am_last_error());
  exit(EXAMPLE_FAILED);
}

int main(int argc, char **argv) {
  long requests = 1000;
  usage_text =
      "usage: viarun -n N am_counter [--requests N] [--bytes N]\n"
      "\n"
      "Active Messages from C (am.h) on any number of ranks: every rank sends N\n"
      "requests to rank 0, whose handler adds to a counter and replies; every rank\n"
      "stores a block into its right neighbour's segment (am_store) and gets it back\n"
      "(am_get). Every byte and the final count are checked.\n"
      "\n"
      "  --requests N  adds each rank asks rank 0 for (1..1000000, default 1000)\n"
      "  --bytes N     the block's size (1..1048576, default 4096)\n"
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
        !number_option(argc, argv, &i, "--bytes", 1, 1 << 20, &block_bytes))
      usage_error("unknown option", argv[i]);
  }

  /* Handlers first, the same indices on every rank; then the collective start. */
  check(am_set_handler(COUNTER_ADD, counter_add), "am_set_handler");
  check(am_set_handler(COUNTER_REPLY, counter_reply), "am_set_handler");
  check(am_set_mem_handler(BLOCK_STORED, block_stored), "am_set_mem_handler");
  check(am_set_mem_handler(BLOCK_FETCHED, block_fetched), "am_set_mem_handler");
  am_set_error_handler(on_returned);
  check(am_enable(), "am_enable");
  me = am_my_proc();
  procs = am_procs();
  const int right = (me + 1) % procs;

  /* 1. Request/reply. am_request_* waits for a credit when too many requests
   * to rank 0 are unanswered, handling messages meanwhile. */
  for (long i = 0; i < requests; ++i) check(am_request_1(0, COUNTER_ADD, 1), "am_request_1");
  check(am_wait_until(all_replies_in, &requests), "am_wait_until");
  check(am_barrier(), "am_barrier"); /* every rank's adds are in */
  const am_word_t total = (am_word_t)procs * (am_word_t)requests;
  if (!failed && (me == 0 ? counter != total : largest_reply > total)) {
    fprintf(stderr, "am_counter rank %d: the counter is %llu, the replies went up to %llu; expected %llu\n", me,
            (unsigned long long)counter, (unsigned long long)largest_reply, (unsigned long long)total);
    failed = 1;
  }

  /* 2. Store: into the right neighbour's segment, at its start. am_segment(p)
   * is where rank p's segment lies, as an address on rank p. */
  unsigned char *block = malloc((size_t)block_bytes), *back = calloc(1, (size_t)block_bytes);
  if (!block || !back) check(AM_ERR_RESOURCE, "malloc");
  for (size_t j = 0; j < (size_t)block_bytes; ++j) block[j] = pattern(me, j);
  void *remote = am_segment(right);
  check(am_store(right, block, remote, (size_t)block_bytes, BLOCK_STORED, (am_word_t)me), "am_store");
  check(am_wait_until(block_arrived, NULL), "am_wait_until");
  /* am_store returned once `block` could be reused, not once the bytes were
   * there: the barrier says every rank's block has arrived. */
  check(am_barrier(), "am_barrier");

  /* 3. Get it back and compare. */
  check(am_get(right, remote, back, (size_t)block_bytes, BLOCK_FETCHED, 0), "am_get");
  check(am_wait_until(block_fetched_back, NULL), "am_wait_until");
  if (!failed && memcmp(block, back, (size_t)block_bytes) != 0) {
    fprintf(stderr, "am_counter rank %d: the block got back from rank %d differs from the one stored\n", me, right);
    failed = 1;
  }
  free(block);
  free(back);

  check(am_disable(), "am_disable"); /* collective: a barrier, then the connections close */
  if (failed) return EXAMPLE_FAILED;
  if (me == 0)
    printf("am_counter: %d ranks; rank 0's counter reached %llu (%ld requests from each rank, each replied to); "
           "%ld-byte blocks stored to the right neighbour and got back, every byte checked\n",
           procs, (unsigned long long)counter, requests, block_bytes);
  return EXAMPLE_OK;
}
