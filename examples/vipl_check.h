/*
 * vipl_check.h: what the VIPL examples share. Error handling: every VIPL call
 * returns a VIP_RETURN, and every completed descriptor carries its outcome in
 * CS.Status; the examples stop at the first thing that is not a success,
 * saying what it was. And VI addresses: a host from the name service plus a
 * discriminator.
 */
#ifndef VIPL_CHECK_H
#define VIPL_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vipl.h>

static const char *program; /* set by main, for messages */
static int rank;
static VIP_NIC_HANDLE nic;

/* Ends the program with status 1. Closing the NIC releases everything that was
 * created on it (VIs, memory registrations, tags), whatever state it is in. */
static inline void die(void) {
  if (nic) VipCloseNic(nic);
  exit(1);
}

/* Anything but VIP_SUCCESS ends the program. */
static inline void check(VIP_RETURN r, const char *what) {
  if (r == VIP_SUCCESS) return;
  fprintf(stderr, "%s rank %d: %s failed: VIP_RETURN 0x%x (%s)\n", program, rank, what, (unsigned)r, VipReturnName(r));
  die();
}

/* A completed descriptor must say DONE and no error bit. */
static inline void check_status(const VIP_DESCRIPTOR *d, const char *what) {
  if ((d->CS.Status & VIP_STATUS_DONE) && !(d->CS.Status & VIP_STATUS_ERROR_MASK)) return;
  char names[512];
  VipStatusErrorNames(d->CS.Status, names, sizeof names);
  fprintf(stderr, "%s rank %d: %s completed with an error: Status 0x%x: %s\n", program, rank, what,
          (unsigned)d->CS.Status, (d->CS.Status & VIP_STATUS_DONE) ? names : "not done");
  die();
}

/* A VIP_NET_ADDRESS is HostAddressLen bytes of host address followed by
 * DiscriminatorLen bytes of discriminator (the "port"). host NULL means this NIC
 * (HostAddressLen 0); otherwise the name service fills in the host part
 * ("rank1": rank 1 of the job). The caller frees it. */
static inline VIP_NET_ADDRESS *make_address(const VIP_NIC_ATTRIBUTES *attrs, const char *host, const char *discriminator) {
  size_t dlen = strlen(discriminator);
  VIP_NET_ADDRESS *a = calloc(1, sizeof *a + attrs->NicAddressLen + attrs->MaxDiscriminatorLen);
  if (!a) check(VIP_ERROR_RESOURCE, "allocate an address");
  if (host) check(VipNSGetHostByName(nic, (VIP_CHAR *)host, a, 0), "look up the peer's address");
  a->DiscriminatorLen = (VIP_UINT16)dlen;
  memcpy(a->HostAddress + a->HostAddressLen, discriminator, dlen);
  return a;
}

#endif
