/*
 * harness.c: the driver of exercise lock_server (given: do not change).
 *
 *   VIASTACK_AM_RELIABILITY=unreliable VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1 \
 *     viarun -n 3 lock_server [--rounds N]
 *
 * Every rank, N times: acquires your lock (lock.c), updates a counter that
 * lives in rank 0's AM segment the slow way (an am_get of its value, then an
 * am_store of the value plus one: a read-modify-write that loses updates
 * unless the lock keeps the ranks apart), and releases the lock. Around the
 * update it tells rank 0 that it enters and leaves the critical section, by
 * requests whose replies it waits for; rank 0 counts the times it saw two
 * ranks inside at once.
 *
 * At the end rank 0 checks that the counter is ranks × N and that no two
 * ranks were ever inside together, and every rank prints how many of its AM
 * messages were retransmitted (the loss the run met).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am.h>

#include "example_options.h"
#include "lock.h"

/* The harness's handler indices, below the lock's. */
enum { ENTER = 1, ENTERED = 2, LEAVE = 3, LEFT = 4, COUNTER_FETCHED = 5, COUNTER_STORED = 6 };

static int me;
/* Rank 0: who is inside the critical section now, and what went wrong. */
static int inside = -1, overlaps, first_overlap[2];
/* This rank: the answers it waits for. */
static volatile int entered, left, fetched, failed;

static void on_enter(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)a0, (void)a1, (void)a2, (void)a3;
  if (inside >= 0 && overlaps++ == 0) {
    first_overlap[0] = inside;
    first_overlap[1] = src;
  }
  inside = src;
  am_reply_0(src, ENTERED);
}
static void on_leave(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)a0, (void)a1, (void)a2, (void)a3;
  if (inside == src) inside = -1;
  am_reply_0(src, LEFT);
}
static void on_entered(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)src, (void)a0, (void)a1, (void)a2, (void)a3;
  entered = 1;
}
static void on_left(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)src, (void)a0, (void)a1, (void)a2, (void)a3;
  left = 1;
}
static void on_counter_fetched(int src, void *addr, size_t nbytes, am_word_t arg) {
  (void)src, (void)addr, (void)nbytes, (void)arg;
  fetched = 1;
}
static void on_counter_stored(int src, void *addr, size_t nbytes, am_word_t arg) {
  (void)src, (void)addr, (void)nbytes, (void)arg;
}
static void on_returned(const am_returned_t *returned) {
  fprintf(stderr, "lock_server rank %d: a message to rank %d came back: %s\n", me, returned->dest,
          returned->description);
  failed = 1;
}

static int is_set(void *flag) { return failed || *(volatile int *)flag; }

static void check(int rc, const char *what) {
  if (rc == AM_OK) return;
  fprintf(stderr, "lock_server rank %d: %s failed (%d): %s\n", me, what, rc, am_last_error());
  exit(EXAMPLE_FAILED);
}

/* Sends `request` to rank 0 and waits for the reply that sets *flag. */
static void tell_rank0(int request, volatile int *flag, const char *what) {
  *flag = 0;
  check(am_request_0(0, request), what);
  check(am_wait_until(is_set, (void *)flag), what);
}

/* The critical section: counter = counter + 1, in two steps. */
static void update_counter(uint64_t *counter_at_rank0) {
  uint64_t value;
  fetched = 0;
  check(am_get(0, counter_at_rank0, &value, sizeof value, COUNTER_FETCHED, 0), "am_get of the counter");
  check(am_wait_until(is_set, (void *)&fetched), "waiting for the counter");
  ++value;
  check(am_store(0, &value, counter_at_rank0, sizeof value, COUNTER_STORED, 0), "am_store of the counter");
  check(am_wait_acknowledged(), "waiting for the store to land"); /* its handler ran: the value is there */
}

int main(int argc, char **argv) {
  long rounds = 200;
  usage_text =
      "usage: viarun -n N lock_server [--rounds N]\n"
      "\n"
      "Exercise lock_server: your lock (lock.c) over Active Messages. Every rank\n"
      "acquires it N times and, holding it, adds one to a counter at rank 0 by an\n"
      "am_get and an am_store; rank 0 checks that the counter is right and that no\n"
      "two ranks ever held the lock at once. Run it over lossy VIs too:\n"
      "  VIASTACK_AM_RELIABILITY=unreliable VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1 \\\n"
      "    viarun -n 3 lock_server\n"
      "\n"
      "  --rounds N  times each rank takes the lock (1..1000000, default 200)\n"
      "  --help      this text\n"
      "\n"
      "Exit status: 0 the counter is right and the lock was never held twice;\n"
      "1 otherwise, or an AM error; 2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--rounds", 1, 1000000, &rounds)) usage_error("unknown option", argv[i]);
  }

  check(am_set_handler(ENTER, on_enter), "am_set_handler");
  check(am_set_handler(ENTERED, on_entered), "am_set_handler");
  check(am_set_handler(LEAVE, on_leave), "am_set_handler");
  check(am_set_handler(LEFT, on_left), "am_set_handler");
  check(am_set_mem_handler(COUNTER_FETCHED, on_counter_fetched), "am_set_mem_handler");
  check(am_set_mem_handler(COUNTER_STORED, on_counter_stored), "am_set_mem_handler");
  am_set_error_handler(on_returned);
  check(lock_register_handlers(), "lock_register_handlers");
  check(am_enable(), "am_enable");
  me = am_my_proc();
  const int procs = am_procs();
  /* The counter: the first word of rank 0's segment, zero before anyone starts. */
  uint64_t *counter_at_rank0 = am_segment(0);
  if (me == 0) *counter_at_rank0 = 0;
  check(lock_init(), "lock_init");
  check(am_barrier(), "am_barrier");

  for (long round = 0; round < rounds && !failed; ++round) {
    check(lock_acquire(), "lock_acquire");
    tell_rank0(ENTER, &entered, "entering");
    update_counter(counter_at_rank0);
    tell_rank0(LEAVE, &left, "leaving");
    check(lock_release(), "lock_release");
  }
  /* Every rank's last release has been handled at the server, then lock_finish. */
  check(am_wait_acknowledged(), "am_wait_acknowledged");
  check(am_barrier(), "am_barrier");
  check(lock_finish(), "lock_finish");

  int status = failed ? EXAMPLE_FAILED : EXAMPLE_OK;
  if (me == 0) {
    const uint64_t counter = *counter_at_rank0, expected = (uint64_t)procs * (uint64_t)rounds;
    if (overlaps)
      fprintf(stderr,
              "lock_server rank 0: two ranks held the lock at once %d times (first: rank %d was inside when rank %d "
              "entered)\n",
              overlaps, first_overlap[0], first_overlap[1]);
    if (counter != expected)
      fprintf(stderr, "lock_server rank 0: the counter is %llu, not %llu: updates were lost\n",
              (unsigned long long)counter, (unsigned long long)expected);
    if (overlaps || counter != expected) status = EXAMPLE_FAILED;
  }
  am_counters_t counters;
  am_get_counters(&counters);
  printf("lock_server rank %d: retransmitted=%llu duplicates_dropped=%llu\n", me,
         (unsigned long long)counters.retransmitted, (unsigned long long)counters.duplicates_dropped);
  check(am_disable(), "am_disable");
  if (me == 0 && status == EXAMPLE_OK)
    printf("lock_server: %d ranks took the lock %ld times each; the counter is %llu, the lock never held twice\n",
           procs, rounds, (unsigned long long)((uint64_t)procs * (uint64_t)rounds));
  return status;
}
