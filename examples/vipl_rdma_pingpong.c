/*
 * vipl_rdma_pingpong.c: ping-pong by RDMA write with immediate data. Ranks 0
 * and 1 connect peer-to-peer, tell each other where their receive buffer is,
 * then write each message straight into the peer's buffer, checking every byte.
 *
 *   viarun -n 2 build/bin/vipl_rdma_pingpong [iterations] [bytes]
 *
 * RDMA write needs no receive at the target to place the data, but a write
 * WITH IMMEDIATE DATA also consumes a posted receive descriptor there: it
 * completes with OP_REMOTE_RDMA_WRITE | IMMEDIATE, ImmediateData and Length set
 * (its data segments stay untouched). That is how the target learns the data
 * has arrived. Any failure prints the VIP_RETURN code or the descriptor's Status
 * in hex and exits 1.
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
#define NUM_RECVS 2      /* receive descriptors kept posted (see post_receive) */

static void fail(const char *message, long iter) {
  fprintf(stderr, "%s rank %d: message %ld: %s\n", program, rank, iter, message);
  die();
}

/* Byte j of message `iter` written by rank `from`. */
static unsigned char pattern(long iter, size_t j, int from) {
  return (unsigned char)(iter * 7 + (long)j * 13 + from * 101);
}

/* What a rank tells its peer in the first (send/receive) message. */
struct buffer_info {
  VIP_UINT64 address;    /* where RDMA writes to this rank go */
  VIP_MEM_HANDLE handle; /* the handle of that region, registered with EnableRdmaWrite */
  VIP_UINT32 length;
};

/* Registered memory, two regions: `mem` (descriptors, the source buffer, the
 * buffer_info messages) and `target` (the RDMA write target, write-enabled). */
struct memory { /* allocated 64-byte aligned; descriptors are 64 bytes, so each one is too */
  VIP_DESCRIPTOR send_desc;
  VIP_DESCRIPTOR recv_desc[NUM_RECVS];
  struct buffer_info info_out;
  struct buffer_info info_in[NUM_RECVS];
};

static VIP_VI_HANDLE vi;
static struct memory *mem;
static VIP_MEM_HANDLE mem_handle, target_handle;
static unsigned char *source, *target; /* `bytes` long each */
static long bytes;
static struct buffer_info peer; /* the peer's target buffer */

/* Receive descriptor i scatters into info_in[i]: only the first message uses
 * it; RDMA writes with immediate data just consume the descriptor. Two stay
 * posted, because the peer's first RDMA write can follow its buffer_info
 * message before this rank has taken that message off the queue. */
static void post_receive(int i) {
  VIP_DESCRIPTOR *d = &mem->recv_desc[i];
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->DS[0].Local.Data.Address = &mem->info_in[i];
  d->DS[0].Local.Handle = mem_handle;
  d->DS[0].Local.Length = sizeof(struct buffer_info);
  check(VipPostRecv(vi, d, mem_handle), "VipPostRecv");
}

/* Takes the next completed receive off the queue and checks its status; the
 * caller posts it again (post_receive) once it has read what it needs. */
static VIP_DESCRIPTOR *receive(const char *what) {
  VIP_DESCRIPTOR *d;
  check(VipRecvWait(vi, TIMEOUT_MS, &d), "VipRecvWait");
  check_status(d, what);
  return d;
}

static void wait_send(const char *what) {
  VIP_DESCRIPTOR *d;
  check(VipSendWait(vi, TIMEOUT_MS, &d), "VipSendWait");
  check_status(d, what);
}

/* RDMA write with immediate: an address segment naming the peer's buffer,
 * then a data segment naming our source bytes. */
static void rdma_write(long iter) {
  VIP_DESCRIPTOR *d = &mem->send_desc;
  for (long j = 0; j < bytes; ++j) source[j] = pattern(iter, (size_t)j, rank);
  memset(d, 0, sizeof *d);
  d->CS.Control = VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE;
  d->CS.ImmediateData = (VIP_UINT32)iter;
  d->CS.SegCount = 2;
  d->CS.Length = (VIP_UINT32)bytes;
  d->DS[0].Remote.Data.AddressBits = peer.address;
  d->DS[0].Remote.Handle = peer.handle;
  d->DS[1].Local.Data.Address = source;
  d->DS[1].Local.Handle = mem_handle;
  d->DS[1].Local.Length = (VIP_UINT32)bytes;
  check(VipPostSend(vi, d, mem_handle), "VipPostSend (RDMA write)");
  wait_send("RDMA write");
}

/* Waits for the peer's RDMA write `iter` and checks what it put in `target`. */
static void await_rdma_write(long iter) {
  VIP_DESCRIPTOR *d = receive("RDMA write notification");
  VIP_UINT32 op = d->CS.Status & VIP_STATUS_OP_MASK;
  if (op != VIP_STATUS_OP_REMOTE_RDMA_WRITE || !(d->CS.Status & VIP_STATUS_IMMEDIATE))
    fail("the receive did not complete as a remote RDMA write with immediate data", iter);
  if (d->CS.ImmediateData != (VIP_UINT32)iter) fail("wrong immediate data", iter);
  if (d->CS.Length != (VIP_UINT32)bytes) fail("wrong length", iter);
  for (long j = 0; j < bytes; ++j)
    if (target[j] != pattern(iter, (size_t)j, 1 - rank)) fail("wrong payload", iter);
  post_receive((int)(d - mem->recv_desc));
}

int main(int argc, char **argv) {
  program = "vipl_rdma_pingpong";
  const char *rank_env = getenv("VIASTACK_RANK"), *size_env = getenv("VIASTACK_SIZE");
  rank = rank_env ? atoi(rank_env) : 0;
  usage_text =
      "usage: viarun -n 2 vipl_rdma_pingpong [ITERATIONS] [BYTES]\n"
      "  ranks 0 and 1: a RDMA-write ping-pong, every byte checked\n"
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
    fprintf(stderr, "vipl_rdma_pingpong needs 2 ranks: run it under viarun -n 2\n\n%s", usage_text);
    return EXAMPLE_USAGE;
  }
  if (rank > 1) return 0; /* only ranks 0 and 1 take part */

  /* 1. NIC, protection tag, and the two registered regions. */
  VIP_NIC_ATTRIBUTES nic_attrs;
  VIP_PROTECTION_HANDLE ptag;
  check(VipOpenNic(NULL, &nic), "VipOpenNic");
  check(VipQueryNic(nic, &nic_attrs), "VipQueryNic");
  check(VipCreatePtag(nic, &ptag), "VipCreatePtag");

  size_t buf_bytes = ((size_t)bytes + 63) & ~(size_t)63;
  size_t mem_bytes = (sizeof(struct memory) + buf_bytes + 63) & ~(size_t)63;
  mem = aligned_alloc(VIP_DESCRIPTOR_ALIGNMENT, mem_bytes); /* descriptors: 64-byte aligned */
  target = aligned_alloc(64, buf_bytes);
  if (!mem || !target) check(VIP_ERROR_RESOURCE, "allocate memory");
  memset(mem, 0, mem_bytes);
  memset(target, 0, buf_bytes);
  source = (unsigned char *)(mem + 1);

  VIP_MEM_ATTRIBUTES plain = {.Ptag = ptag, .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE};
  VIP_MEM_ATTRIBUTES writable = {.Ptag = ptag, .EnableRdmaWrite = VIP_TRUE, .EnableRdmaRead = VIP_FALSE};
  check(VipRegisterMem(nic, mem, mem_bytes, &plain, &mem_handle), "VipRegisterMem (descriptors)");
  check(VipRegisterMem(nic, target, buf_bytes, &writable, &target_handle), "VipRegisterMem (RDMA target)");

  /* 2. A reliable VI that accepts RDMA writes (the region must allow them too).
   * Its largest transfer: a message, or the buffer_info if that is bigger. */
  VIP_ULONG max_transfer = (VIP_ULONG)bytes;
  if (max_transfer < sizeof(struct buffer_info)) max_transfer = sizeof(struct buffer_info);
  VIP_VI_ATTRIBUTES vi_attrs = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                                .MaxTransferSize = max_transfer,
                                .Ptag = ptag,
                                .EnableRdmaWrite = VIP_TRUE};
  check(VipCreateVi(nic, &vi_attrs, NULL, NULL, &vi), "VipCreateVi");

  /* 3. Receives first, then the peer-to-peer connection: both ranks ask for
   * the other one on discriminator "rdma", and wait until both asked. */
  for (int i = 0; i < NUM_RECVS; ++i) post_receive(i);
  VIP_NET_ADDRESS *local = make_address(&nic_attrs, NULL, "rdma");
  VIP_NET_ADDRESS *remote = make_address(&nic_attrs, rank == 0 ? "rank1" : "rank0", "rdma");
  check(VipConnectPeerRequest(vi, local, remote, TIMEOUT_MS), "VipConnectPeerRequest");
  check(VipConnectPeerWait(vi, NULL), "VipConnectPeerWait");
  free(local);
  free(remote);

  /* 4. Exchange buffer addresses and memory handles with send/receive. */
  mem->info_out = (struct buffer_info){(VIP_UINT64)(uintptr_t)target, target_handle, (VIP_UINT32)bytes};
  VIP_DESCRIPTOR *d = &mem->send_desc;
  d->CS.SegCount = 1;
  d->CS.Length = sizeof(struct buffer_info);
  d->DS[0].Local.Data.Address = &mem->info_out;
  d->DS[0].Local.Handle = mem_handle;
  d->DS[0].Local.Length = sizeof(struct buffer_info);
  check(VipPostSend(vi, d, mem_handle), "VipPostSend (buffer info)");
  wait_send("buffer info send");
  d = receive("buffer info receive");
  peer = mem->info_in[d - mem->recv_desc];
  if (d->CS.Length != sizeof peer || peer.length != (VIP_UINT32)bytes) fail("bad buffer info", -1);
  post_receive((int)(d - mem->recv_desc));

  /* 5. Ping-pong: rank 0 writes message i into rank 1's buffer, rank 1 answers. */
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < iters; ++i) {
    if (rank == 0) {
      rdma_write(i);
      await_rdma_write(i);
    } else {
      await_rdma_write(i);
      rdma_write(i);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double us = (double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3;
  if (rank == 0)
    printf("vipl_rdma_pingpong: %ld RDMA-write round trips of %ld bytes, all verified; average round trip %.2f us\n",
           iters, bytes, us / (double)iters);

  /* 6. Tear down: disconnect (flushing the posted receives), empty the queue,
   * then release the VI, the memory, the tag and the NIC. */
  check(VipDisconnect(vi), "VipDisconnect");
  while (VipRecvDone(vi, &d) == VIP_SUCCESS) {
  }
  check(VipDestroyVi(vi), "VipDestroyVi");
  check(VipDeregisterMem(nic, target, target_handle), "VipDeregisterMem");
  check(VipDeregisterMem(nic, mem, mem_handle), "VipDeregisterMem");
  check(VipDestroyPtag(nic, ptag), "VipDestroyPtag");
  check(VipCloseNic(nic), "VipCloseNic");
  free(target);
  free(mem);
  return 0;
}
