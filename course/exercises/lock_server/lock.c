/*
 * lock.c: YOUR lock for exercise lock_server (see README.md).
 *
 * As given, it compiles and runs, but it does not lock anything: every
 * lock_acquire returns at once, so ranks update the counter at the same time,
 * and the checker fails it. Make rank LOCK_SERVER keep the lock's state and
 * the other ranks ask it through Active Messages: the TODOs say where.
 *
 * Reminders (am.h): handlers run only inside AM calls; a request handler may
 * reply once, to the requester, and may also send requests; am_wait_until
 * handles messages until a condition holds, and may not be called from a
 * handler.
 */
#include <stdio.h>
#include <stdlib.h>

#include <am.h>

#include "lock.h"

/* TODO: your handlers, e.g. ACQUIRE (a rank asks the server), GRANT (the
 * server gives the lock to a rank), RELEASE (a rank gives it back). */
enum { ACQUIRE = LOCK_FIRST_HANDLER };

/* TODO: the server's state (is the lock held? who waits for it, in which
 * order?) and each rank's (has my grant come?). */

static void on_acquire(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  (void)src, (void)a0, (void)a1, (void)a2, (void)a3;
  /* TODO: runs at the server. Grant the lock at once if it is free, else
   * remember that `src` waits. */
}

int lock_register_handlers(void) { return am_set_handler(ACQUIRE, on_acquire); }

int lock_init(void) {
  /* TODO: set up the server's state (am_procs() says how many ranks may wait). */
  return AM_OK;
}

int lock_acquire(void) {
  /* TODO: ask the server and wait until it grants the lock. */
  return AM_OK;
}

int lock_release(void) {
  /* TODO: tell the server, which hands the lock to the next waiting rank. */
  return AM_OK;
}

int lock_finish(void) {
  /* TODO: release what lock_init took. */
  return AM_OK;
}
