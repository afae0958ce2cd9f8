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

static inline const char *vip_return_name(VIP_RETURN r) {
  /* In vipl.h's order: VIP_SUCCESS is 0. */
  static const char *const names[] = {
      "VIP_SUCCESS", "VIP_NOT_DONE", "VIP_INVALID_PARAMETER", "VIP_ERROR_RESOURCE", "VIP_TIMEOUT", "VIP_REJECT",
      "VIP_INVALID_RELIABILITY_LEVEL", "VIP_INVALID_MTU", "VIP_INVALID_QOS", "VIP_INVALID_PTAG",
      "VIP_INVALID_RDMAREAD", "VIP_DESCRIPTOR_ERROR", "VIP_INVALID_STATE", "VIP_ERROR_NAMESERVICE", "VIP_NO_MATCH"};
  return (unsigned)r < sizeof names / sizeof *names ? names[r] : "an unknown VIP_RETURN";
}

static inline int vipl_failed(VIP_RETURN r, const char *what) {
  fprintf(stderr, "stream: %s failed: %s\n", what, vip_return_name(r));
  return STREAM_ERROR;
}

/* A descriptor completed with error bits in its status: each one by name. */
static inline int descriptor_failed(const VIP_DESCRIPTOR *d, const char *what) {
  static const struct {
    VIP_UINT32 bit;
    const char *name;
  } errors[] = {
      {VIP_STATUS_FORMAT_ERROR, "VIP_STATUS_FORMAT_ERROR"},
      {VIP_STATUS_PROTECTION_ERROR, "VIP_STATUS_PROTECTION_ERROR"},
      {VIP_STATUS_LENGTH_ERROR, "VIP_STATUS_LENGTH_ERROR (the frame was longer than the receive's buffer)"},
      {VIP_STATUS_PARTIAL_ERROR, "VIP_STATUS_PARTIAL_ERROR"},
      {VIP_STATUS_DESC_FLUSHED_ERROR,
       "VIP_STATUS_DESC_FLUSHED_ERROR (the VI was disconnected: the peer closed it or left)"},
      {VIP_STATUS_TRANSPORT_ERROR, "VIP_STATUS_TRANSPORT_ERROR"},
      {VIP_STATUS_RDMA_PROT_ERROR, "VIP_STATUS_RDMA_PROT_ERROR"},
      {VIP_STATUS_REMOTE_DESC_ERROR, "VIP_STATUS_REMOTE_DESC_ERROR"},
  };
  char names[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof errors / sizeof *errors; ++i)
    if ((d->CS.Status & errors[i].bit) && used < sizeof names)
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", errors[i].name);
  /* One write, so that the line stays whole beside the other rank's output. */
  fprintf(stderr, "stream: %s completed with status 0x%x: %s\n", what, (unsigned)d->CS.Status, names);
  return STREAM_ERROR;
}

#endif
