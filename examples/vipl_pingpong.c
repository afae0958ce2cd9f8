/*
 * vipl_pingpong.c: a complete VIPL program. Ranks 0 and 1 connect client/server
 * style, then bounce a message back and forth with send/receive, checking every
 * byte that arrives.
 *
 *   viarun -n 2 build/bin/vipl_pingpong [iterations] [bytes]
 *
 * The VIA steps, in order: open the NIC, create a protection tag, register the
 * memory that holds the descriptors and the buffers, create a VI, post a receive,
 * connect (rank 1 waits and accepts, rank 0 requests), exchange messages,
 * disconnect, and release everything. Any failure prints the VIP_RETURN code or
 * the descriptor's Status in hex and exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vipl.h>

#include "example_options.h"
#include "vipl_check.h"

#define TIMEOUT_MS 30000 /* no single wait here should ever take this long */

/* Byte j of message `iter` sent by rank `from`. */
static unsigned char pattern(long iter, size_t j, int from) {
  return (unsigned char)(iter * 7 + (long)j * 13 + from * 101);
}

/* What the ping-pong loop works with (set up in main). */
static VIP_VI_HANDLE vi;
static VIP_MEM_HANDLE mh; /* the registered region holding descriptors and buffers */
static VIP_DESCRIPTOR *send_desc, *recv_desc;
static unsigned char *send_buf, *recv_buf;
static long bytes;

static void send_message(long iter) {
  VIP_DESCRIPTOR *d;
  for (long j = 0; j < bytes; ++j) send_buf[j] = pattern(iter, (size_t)j, rank);
  check(VipPostSend(vi, send_desc, mh), "VipPostSend");
  check(VipSendWait(vi, TIMEOUT_MS, &d), "VipSendWait");
  check_status(d, "send");
}

/* Waits for the peer's message `iter`, checks it, and posts the receive again
 * before this rank sends anything, so the peer's next message finds it. */
static void receive_message(long iter) {
  VIP_DESCRIPTOR *d;
  check(VipRecvWait(vi, TIMEOUT_MS, &d), "VipRecvWait");
  check_status(d, "receive");
  if (d->CS.Length != (VIP_UINT32)bytes) {
    fprintf(stderr, "%s rank %d: message %ld has %u bytes, expected %ld\n", program, rank, iter,
            (unsigned)d->CS.Length, bytes);
    die();
  }
  for (long j = 0; j < bytes; ++j)
    if (recv_buf[j] != pattern(iter, (size_t)j, 1 - rank)) {
      fprintf(stderr, "%s rank %d: message %ld, byte %ld is 0x%02x, expected 0x%02x\n", program, rank, iter, j,
              recv_buf[j], pattern(iter, (size_t)j, 1 - rank));
      die();
    }
  check(VipPostRecv(vi, recv_desc, mh), "VipPostRecv");
}

int main(int argc, char **argv) {
  program = "vipl_pingpong";
  const char *rank_env = getenv("VIASTACK_RANK"), *size_env = getenv("VIASTACK_SIZE");
  rank = rank_env ? atoi(rank_env) : 0;
  usage_text =
      "usage: viarun -n 2 vipl_pingpong [ITERATIONS] [BYTES]\n"
      "  ranks 0 and 1: a send/receive ping-pong, every byte checked\n"
      "  ITERATIONS  round trips, at least 1 (default 1000)\n"
      "  BYTES       message size, 1 to 16777216 (default 64)\n"
      "  -h, --help  show this help;  --version  show viastack's version\n"
      "exit status: 0 when every message arrived intact, 1 on a VIA error or a\n"
      "  wrong byte, 2 for a bad command line or when not run under viarun\n";
  for (int i = 1; i < argc; ++i) help_option(argv[i]);
  long iters = positional_number(argc, argv, 1, "ITERATIONS", 1000, 1, LONG_MAX);
  bytes = positional_number(argc, argv, 2, "BYTES", 64, 1, 1l << 24);
  if (argc > 3) usage_error("one argument too many:", argv[3]);
  if (!size_env || atoi(size_env) < 2) {
    fprintf(stderr, "vipl_pingpong needs 2 ranks: run it under viarun -n 2\n\n%s", usage_text);
    return EXAMPLE_USAGE;
  }
  if (rank > 1) return 0; /* only ranks 0 and 1 take part */

  /* 1. The NIC (NULL: this rank's own), a protection tag, and registered memory.
   * Descriptors must be 64-byte aligned and lie in registered memory too. */
  VIP_NIC_ATTRIBUTES nic_attrs;
  VIP_PROTECTION_HANDLE ptag;
  check(VipOpenNic(NULL, &nic), "VipOpenNic");
  check(VipQueryNic(nic, &nic_attrs), "VipQueryNic");
  check(VipCreatePtag(nic, &ptag), "VipCreatePtag");

  size_t buf_bytes = ((size_t)bytes + 63) & ~(size_t)63;
  size_t total = 2 * sizeof(VIP_DESCRIPTOR) + 2 * buf_bytes;
  unsigned char *mem = aligned_alloc(VIP_DESCRIPTOR_ALIGNMENT, total);
  if (!mem) check(VIP_ERROR_RESOURCE, "allocate memory");
  memset(mem, 0, total);
  send_desc = (VIP_DESCRIPTOR *)mem;
  recv_desc = send_desc + 1;
  send_buf = mem + 2 * sizeof(VIP_DESCRIPTOR);
  recv_buf = send_buf + buf_bytes;

  VIP_MEM_ATTRIBUTES mem_attrs = {.Ptag = ptag, .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE};
  check(VipRegisterMem(nic, mem, total, &mem_attrs, &mh), "VipRegisterMem");

  /* 2. A reliable VI with no completion queues: we poll its own queues. */
  VIP_VI_ATTRIBUTES vi_attrs = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                                .MaxTransferSize = (VIP_ULONG)bytes,
                                .Ptag = ptag};
  check(VipCreateVi(nic, &vi_attrs, NULL, NULL, &vi), "VipCreateVi");

  /* A receive descriptor: one data segment naming recv_buf. */
  recv_desc->CS.SegCount = 1;
  recv_desc->DS[0].Local.Data.Address = recv_buf;
  recv_desc->DS[0].Local.Handle = mh;
  recv_desc->DS[0].Local.Length = (VIP_UINT32)bytes;
  /* A send descriptor: one data segment naming send_buf. */
  send_desc->CS.SegCount = 1;
  send_desc->CS.Length = (VIP_UINT32)bytes;
  send_desc->DS[0].Local.Data.Address = send_buf;
  send_desc->DS[0].Local.Handle = mh;
  send_desc->DS[0].Local.Length = (VIP_UINT32)bytes;

  /* 3. Post the first receive BEFORE connecting: on a reliable VI, a message
   * that finds no receive posted breaks the connection. */
  check(VipPostRecv(vi, recv_desc, mh), "VipPostRecv");

  /* 4. Connect. Rank 1 is the server, listening on discriminator "pingpong". */
  VIP_NET_ADDRESS *local = make_address(&nic_attrs, NULL, "pingpong");
  VIP_VI_ATTRIBUTES remote_attrs;
  if (rank == 1) {
    VIP_NET_ADDRESS *remote = make_address(&nic_attrs, NULL, "");
    VIP_CONN_HANDLE conn;
    check(VipConnectWait(nic, local, TIMEOUT_MS, remote, &remote_attrs, &conn), "VipConnectWait");
    check(VipConnectAccept(conn, vi), "VipConnectAccept");
    free(remote);
  } else {
    VIP_NET_ADDRESS *server = make_address(&nic_attrs, "rank1", "pingpong");
    check(VipConnectRequest(vi, local, server, TIMEOUT_MS, &remote_attrs), "VipConnectRequest");
    free(server);
  }
  free(local);

  /* 5. Ping-pong: rank 0 sends message i and rank 1 answers it. */
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < iters; ++i) {
    if (rank == 0) {
      send_message(i);
      receive_message(i);
    } else {
      receive_message(i);
      send_message(i);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double us = (double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3;
  if (rank == 0)
    printf("vipl_pingpong: %ld round trips of %ld bytes, all verified; average round trip %.2f us\n", iters,
           bytes, us / (double)iters);

  /* 6. Tear down. Disconnecting flushes the receive still posted (it completes
   * with DESC_FLUSHED); a VI can only be destroyed once its queues are empty. */
  VIP_DESCRIPTOR *d;
  check(VipDisconnect(vi), "VipDisconnect");
  while (VipRecvDone(vi, &d) == VIP_SUCCESS) {
  }
  check(VipDestroyVi(vi), "VipDestroyVi");
  check(VipDeregisterMem(nic, mem, mh), "VipDeregisterMem");
  check(VipDestroyPtag(nic, ptag), "VipDestroyPtag");
  check(VipCloseNic(nic), "VipCloseNic");
  free(mem);
  return 0;
}
