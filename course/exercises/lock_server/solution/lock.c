/*
 * solution/lock.c: a reference solution of exercise lock_server.
 *
 * A queue lock kept by the server (rank LOCK_SERVER). A rank asks for the
 * lock with an ACQUIRE request. If the lock is free, the server's handler
 * takes it for the rank and replies GRANT at once; if not, it appends the
 * rank to a FIFO queue and does not reply (AM acknowledges the request). A
 * RELEASE request hands the lock to the first rank in the queue with a GRANT
 * *request* (a reply can only go back to the rank that asked, the releaser),
 * or marks it free. Each rank waits in am_wait_until for its GRANT.
 *
 * Exactly once matters here: a GRANT or RELEASE handled twice would let two
 * ranks in, or free the lock under its holder. On unreliable VIs it is AM
 * that retransmits lost messages and drops the copies, so this code needs
 * nothing more.
 */
#include <stdio.h>
#include <stdlib.h>

#include <am.h>

#include "lock.h"

enum { ACQUIRE = LOCK_FIRST_HANDLER, GRANT, RELEASE };

/* The server: the holder (-1: free) and the ranks waiting, oldest first, in a
 * ring of one place per rank (a rank waits at most once at a time). */
static int holder = -1;
static int *waiting, first_waiting, waiting_count, procs;
/* Every rank: its grant has come. */
static volatile int granted;
static volatile int failed;

static void on_acquire(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)a0, (void)a1, (void)a2, (void)a3;
  if (holder < 0) {
    holder = src;
    if (am_reply_0(src, GRANT) != AM_OK) failed = 1;
    return;
  }
  if (waiting_count == procs) { /* a rank asked twice without a release: a broken client */
    fprintf(stderr, "lock: rank %d asks while %d ranks wait already\n", src, waiting_count);
    failed = 1;
    return;
  }
  waiting[(first_waiting + waiting_count++) % procs] = src;
}

static void on_release(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)a0, (void)a1, (void)a2, (void)a3;
  if (src != holder) {
    fprintf(stderr, "lock: rank %d releases a lock held by %d\n", src, holder);
    failed = 1;
    return;
  }
  if (waiting_count == 0) {
    holder = -1;
    return;
  }
  holder = waiting[first_waiting];
  first_waiting = (first_waiting + 1) % procs;
  --waiting_count;
  if (am_request_0(holder, GRANT) != AM_OK) failed = 1;
}

/* As the reply to ACQUIRE or as a request from a RELEASE's handler. */
static void on_grant(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)src, (void)a0, (void)a1, (void)a2, (void)a3;
  granted = 1;
}

static int granted_or_failed(void *unused) {
  (void)unused;
  return granted || failed;
}

int lock_register_handlers(void) {
  int rc = am_set_handler(ACQUIRE, on_acquire);
  if (rc == AM_OK) rc = am_set_handler(GRANT, on_grant);
  if (rc == AM_OK) rc = am_set_handler(RELEASE, on_release);
  return rc;
}

int lock_init(void) {
  procs = am_procs();
  if (am_my_proc() != LOCK_SERVER) return AM_OK;
  waiting = malloc((size_t)procs * sizeof *waiting);
  return waiting ? AM_OK : AM_ERR_RESOURCE;
}

int lock_acquire(void) {
  granted = 0;
  int rc = am_request_0(LOCK_SERVER, ACQUIRE);
  if (rc == AM_OK) rc = am_wait_until(granted_or_failed, NULL);
  return rc == AM_OK && failed ? AM_ERR_RESOURCE : rc;
}

int lock_release(void) { return failed ? AM_ERR_RESOURCE : am_request_0(LOCK_SERVER, RELEASE); }

int lock_finish(void) {
  free(waiting);
  waiting = NULL;
  return failed ? AM_ERR_RESOURCE : AM_OK;
}
