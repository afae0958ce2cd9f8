/*
 * stream_errors.h: how stream.c says that VIPL failed it (given): by VIPL's
 * names, not numbers, so that the message names the cause.
 *
 *   return vipl_failed(r, "VipPostRecv");
 *       "stream: VipPostRecv failed: VIP_INVALID_PARAMETER"
 *   if (d->CS.Status & VIP_STATUS_ERROR_MASK) return descriptor_failed(d, "a receive");
 *       "stream: a receive completed with status 0x10021: VIP_STATUS_DESC_FLUSHED_ERROR
 *        (the VI was disconnected: the peer closed it or left)"
 *
 * Both return STREAM_ERROR.
 */
#ifndef COURSE_STREAM_ERRORS_H
#define COURSE_STREAM_ERRORS_H

#include <stdio.h>

#include <vipl.h>

#include "stream.h"

static inline int vipl_failed(VIP_RETURN r, const char *what) {
  fprintf(stderr, "stream: %s failed: %s\n", what, VipReturnName(r));
  return STREAM_ERROR;
}

/* A descriptor completed with error bits in its status: each one by name. */
static inline int descriptor_failed(const VIP_DESCRIPTOR *d, const char *what) {
  char names[512];
  VipStatusErrorNames(d->CS.Status, names, sizeof names);
  /* One write, so that the line stays whole beside the other rank's output. */
  fprintf(stderr, "stream: %s completed with status 0x%x: %s\n", what, (unsigned)d->CS.Status, names);
  return STREAM_ERROR;
}

#endif
