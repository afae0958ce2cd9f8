/*
 * lock.h: the interface of exercise lock_server (given: do not change).
 *
 * One lock for the whole job, kept by a server: rank LOCK_SERVER holds its
 * state, and every rank (the server too) acquires and releases it through
 * Active Messages. At most one rank may hold it at a time, and every rank
 * that asks must get it in the end.
 *
 * The harness (harness.c) calls, on every rank:
 *   lock_register_handlers   before am_enable (handlers are registered first,
 *                            with the same indices on every rank)
 *   lock_init                after am_enable, before any rank acquires (a
 *                            barrier follows it)
 *   lock_acquire, lock_release, in turn, any number of times
 *   lock_finish              once every rank's last release has been handled
 *                            at the server, before am_disable
 *
 * Your handlers take indices LOCK_FIRST_HANDLER to LOCK_LAST_HANDLER; the
 * harness's are below those. Each function returns AM_OK, or an AM error code
 * after saying on stderr what went wrong.
 */
#ifndef COURSE_LOCK_H
#define COURSE_LOCK_H

#include <am.h>

#define LOCK_SERVER 0
#define LOCK_FIRST_HANDLER 20
#define LOCK_LAST_HANDLER 39

int lock_register_handlers(void);
int lock_init(void);
/* Returns once this rank holds the lock, handling messages meanwhile. */
int lock_acquire(void);
/* Gives the lock up; it may return before the server has heard of it. */
int lock_release(void);
int lock_finish(void);

#endif
