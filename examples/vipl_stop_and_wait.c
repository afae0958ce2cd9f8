/*
 * vipl_stop_and_wait.c: a protocol of your own over unreliable VIs. An
 * unreliable VI (VIP_SERVICE_UNRELIABLE) may lose a message, deliver it twice
 * or deliver it late; this program makes delivery reliable the simplest way
 * there is, stop-and-wait with sequence numbers:
 *
 *   rank 0 (sender)    sends message `seq` and waits for the acknowledgement
 *                      of `seq`; each time the retransmission timeout passes
 *                      without it, sends the message again.
 *   rank 1 (receiver)  delivers message `seq` only if it is the next one it
 *                      expects, acknowledges every copy it gets (the sender
 *                      may have missed the acknowledgement of an earlier
 *                      copy), and drops copies it has delivered already.
 *
 * The last message is a FIN. Its acknowledgement can be lost too, so the
 * receiver stays (as TCP's TIME-WAIT) answering repeated FINs until it has
 * heard nothing for a while or the sender has disconnected.
 *
 * Run it with the fault injector dropping, duplicating and reordering frames
 * (it touches unreliable VIs only):
 *
 *   VIASTACK_FAULTS=drop=0.2,dup=0.05,reorder=0.05,seed=1 \
 *     viarun -n 2 build/bin/vipl_stop_and_wait --messages 300
 *
 * The receiver checks every message's sequence number, length and bytes, and
 * the job exits 0 only if each message was delivered exactly once, in order.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vipl.h>

#include "example_options.h"
#include "vipl_check.h"

#define CONNECT_TIMEOUT_MS 30000
#define SILENCE_LIMIT_MS 30000 /* the receiver gives up after this long without a message */
#define MAX_TRIES 100          /* the sender gives up on a message sent this often without an answer */
#define NUM_RECVS 8            /* receive descriptors kept posted: a frame that finds none is dropped */

enum { MSG_DATA = 1, MSG_ACK = 2, MSG_FIN = 3 };

/* Every message starts with this header; DATA carries `length` bytes after it. */
struct header {
  uint32_t type;
  uint32_t seq;
  uint32_t length;
  uint32_t reserved;
};

/* Byte j of message seq. */
static unsigned char pattern(uint32_t seq, size_t j) { return (unsigned char)(seq * 31u + j * 7u + 1u); }

static long messages = 200, bytes = 256, rto_ms = 10;

/* One registered region: the descriptors (64-byte aligned, as VIA requires),
 * then one buffer for the send and one per receive. */
static VIP_VI_HANDLE vi;
static VIP_MEM_HANDLE mh;
static VIP_DESCRIPTOR *send_desc, *recv_desc; /* recv_desc[NUM_RECVS] */
static unsigned char *buffers;
static size_t frame_bytes; /* header + the largest payload, rounded up to 64 */

static unsigned char *recv_buffer(const VIP_DESCRIPTOR *d) { return buffers + (size_t)(d - recv_desc + 1) * frame_bytes; }

static long elapsed_ms(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long)(now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static void post_receive(VIP_DESCRIPTOR *d) {
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->DS[0].Local.Data.Address = recv_buffer(d);
  d->DS[0].Local.Handle = mh;
  d->DS[0].Local.Length = (VIP_UINT32)frame_bytes;
  check(VipPostRecv(vi, d, mh), "VipPostRecv");
}

/* Sends one message (and waits until the descriptor is free again: on an
 * unreliable VI that is as soon as the frame has left, delivered or not). */
static void send_message(uint32_t type, uint32_t seq, uint32_t length) {
  unsigned char *frame = buffers;
  struct header h = {type, seq, length, 0};
  memcpy(frame, &h, sizeof h);
  for (uint32_t j = 0; j < length; ++j) frame[sizeof h + j] = pattern(seq, j);
  memset(send_desc, 0, sizeof *send_desc);
  send_desc->CS.SegCount = 1;
  send_desc->CS.Length = (VIP_UINT32)(sizeof h + length);
  send_desc->DS[0].Local.Data.Address = frame;
  send_desc->DS[0].Local.Handle = mh;
  send_desc->DS[0].Local.Length = send_desc->CS.Length;
  check(VipPostSend(vi, send_desc, mh), "VipPostSend");
  VIP_DESCRIPTOR *d;
  check(VipSendWait(vi, CONNECT_TIMEOUT_MS, &d), "VipSendWait");
  check_status(d, "send");
}

enum { GOT_MESSAGE = 1, GOT_NOTHING = 0, PEER_GONE = -1 };

/* The next message within timeout_ms, copied into *h and (for DATA) its
 * payload checked, and the receive posted again: GOT_MESSAGE. GOT_NOTHING when
 * none came in time; PEER_GONE when the peer disconnected (the engine flushes
 * the receives still posted). */
static int receive_message(long timeout_ms, struct header *h) {
  VIP_DESCRIPTOR *d;
  VIP_RETURN r = VipRecvWait(vi, (VIP_ULONG)(timeout_ms > 0 ? timeout_ms : 0), &d);
  if (r == VIP_TIMEOUT) return GOT_NOTHING;
  check(r, "VipRecvWait");
  if (d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR) return PEER_GONE;
  check_status(d, "receive");
  const unsigned char *frame = recv_buffer(d);
  if (d->CS.Length < sizeof *h) {
    fprintf(stderr, "%s rank %d: a message of %u bytes, shorter than its header\n", program, rank,
            (unsigned)d->CS.Length);
    die();
  }
  memcpy(h, frame, sizeof *h);
  if (d->CS.Length != sizeof *h + h->length) {
    fprintf(stderr, "%s rank %d: message %u: %u bytes, its header says %u\n", program, rank, (unsigned)h->seq,
            (unsigned)d->CS.Length, (unsigned)(sizeof *h + h->length));
    die();
  }
  for (uint32_t j = 0; j < h->length; ++j)
    if (frame[sizeof *h + j] != pattern(h->seq, j)) {
      fprintf(stderr, "%s rank %d: message %u: byte %u is wrong\n", program, rank, (unsigned)h->seq, (unsigned)j);
      die();
    }
  post_receive(d);
  return GOT_MESSAGE;
}

/* Sends message seq until its acknowledgement comes back; the number of
 * retransmissions it took. Stale acknowledgements (of an earlier copy of an
 * earlier message, duplicated or delayed by the network) are ignored. */
static long send_reliably(uint32_t type, uint32_t seq, uint32_t length) {
  for (long tries = 0; tries < MAX_TRIES; ++tries) {
    send_message(type, seq, length);
    struct timespec sent;
    clock_gettime(CLOCK_MONOTONIC, &sent);
    struct header h;
    long left;
    while ((left = rto_ms - elapsed_ms(&sent)) > 0) {
      int got = receive_message(left, &h);
      if (got == PEER_GONE) {
        fprintf(stderr, "%s rank 0: the receiver disconnected before acknowledging message %u\n", program,
                (unsigned)seq);
        die();
      }
      if (got == GOT_NOTHING) break;
      if (h.type == MSG_ACK && h.seq == seq) return tries;
    }
  }
  fprintf(stderr, "%s rank 0: message %u sent %d times without an acknowledgement: the receiver is gone\n", program,
          (unsigned)seq, MAX_TRIES);
  die();
  return 0;
}

static void run_sender(void) {
  long retransmissions = 0;
  for (uint32_t seq = 0; seq < (uint32_t)messages; ++seq) retransmissions += send_reliably(MSG_DATA, seq, (uint32_t)bytes);
  retransmissions += send_reliably(MSG_FIN, (uint32_t)messages, 0);
  printf("sender: %ld messages and a FIN acknowledged, %ld retransmissions\n", messages, retransmissions);
}

static void run_receiver(void) {
  uint32_t expected = 0; /* the next sequence number to deliver */
  long duplicates = 0;
  struct header h;
  int finished = 0;
  while (!finished) {
    int got = receive_message(SILENCE_LIMIT_MS, &h);
    if (got == PEER_GONE) {
      fprintf(stderr, "%s rank 1: the sender disconnected before message %u\n", program, (unsigned)expected);
      die();
    }
    if (got == GOT_NOTHING) {
      fprintf(stderr, "%s rank 1: nothing from the sender for %d ms before message %u\n", program, SILENCE_LIMIT_MS,
              (unsigned)expected);
      die();
    }
    if (h.seq == expected && h.type == MSG_DATA && h.length == (uint32_t)bytes) {
      ++expected; /* delivered: a real program would hand the payload on here */
    } else if (h.seq == expected && h.type == MSG_FIN && expected == (uint32_t)messages) {
      finished = 1;
    } else if (h.seq < expected) {
      ++duplicates; /* delivered already: acknowledge it again, deliver nothing */
    } else {
      fprintf(stderr, "%s rank 1: message %u of type %u while expecting %u: the protocol is broken\n", program,
              (unsigned)h.seq, (unsigned)h.type, (unsigned)expected);
      die();
    }
    send_message(MSG_ACK, h.seq, 0);
  }
  /* TIME-WAIT: a FIN seen again means our acknowledgement was lost. It ends
   * when the sender disconnects (it has the acknowledgement), or after quiet
   * for many retransmission timeouts (it has it, or stopped trying). */
  long linger_ms = 20 * rto_ms < 200 ? 200 : 20 * rto_ms;
  while (receive_message(linger_ms, &h) == GOT_MESSAGE) {
    ++duplicates;
    send_message(MSG_ACK, h.seq, 0);
  }
  printf("receiver: %u messages delivered exactly once, in order, every byte checked; %ld duplicates dropped\n",
         (unsigned)expected, duplicates);
}

int main(int argc, char **argv) {
  program = "vipl_stop_and_wait";
  usage_text =
      "usage: viarun -n 2 vipl_stop_and_wait [--messages N] [--bytes N] [--rto-ms N]\n"
      "\n"
      "Reliable, ordered delivery built by the program itself over an unreliable VI:\n"
      "stop-and-wait with sequence numbers, acknowledgements and retransmission.\n"
      "Rank 0 sends, rank 1 receives and checks. Meant to run under the fault injector:\n"
      "  VIASTACK_FAULTS=drop=0.2,dup=0.05,reorder=0.05,seed=1 viarun -n 2 vipl_stop_and_wait\n"
      "\n"
      "  --messages N  messages to deliver (1..1000000, default 200)\n"
      "  --bytes N     payload bytes per message (0..65536, default 256)\n"
      "  --rto-ms N    retransmission timeout in milliseconds (1..10000, default 10)\n"
      "  --help        this text\n"
      "\n"
      "Exit status: 0 every message delivered exactly once, in order; 1 a VIPL error,\n"
      "a wrong message, or a peer that stopped answering; 2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--messages", 1, 1000000, &messages) &&
        !number_option(argc, argv, &i, "--bytes", 0, 65536, &bytes) &&
        !number_option(argc, argv, &i, "--rto-ms", 1, 10000, &rto_ms))
      usage_error("unknown option", argv[i]);
  }
  const char *rank_env = getenv("VIASTACK_RANK"), *size_env = getenv("VIASTACK_SIZE");
  if (!rank_env || !size_env || atoi(size_env) < 2) usage_error("needs 2 ranks under viarun; VIASTACK_SIZE is",
                                                                size_env ? size_env : "unset");
  rank = atoi(rank_env);
  if (rank > 1) return EXAMPLE_OK; /* only ranks 0 and 1 take part */

  /* The NIC, a protection tag and one registered region for everything. */
  VIP_NIC_ATTRIBUTES nic_attrs;
  VIP_PROTECTION_HANDLE ptag;
  check(VipOpenNic(NULL, &nic), "VipOpenNic");
  check(VipQueryNic(nic, &nic_attrs), "VipQueryNic");
  check(VipCreatePtag(nic, &ptag), "VipCreatePtag");
  frame_bytes = (sizeof(struct header) + (size_t)bytes + 63) & ~(size_t)63;
  size_t descriptors_bytes = (1 + NUM_RECVS) * sizeof(VIP_DESCRIPTOR);
  size_t total = descriptors_bytes + (1 + NUM_RECVS) * frame_bytes;
  unsigned char *mem = aligned_alloc(VIP_DESCRIPTOR_ALIGNMENT, total);
  if (!mem) check(VIP_ERROR_RESOURCE, "allocate memory");
  memset(mem, 0, total);
  send_desc = (VIP_DESCRIPTOR *)mem;
  recv_desc = send_desc + 1;
  buffers = mem + descriptors_bytes;
  VIP_MEM_ATTRIBUTES mem_attrs = {.Ptag = ptag, .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE};
  check(VipRegisterMem(nic, mem, total, &mem_attrs, &mh), "VipRegisterMem");

  /* An UNRELIABLE VI: no acknowledgements below us, no retransmission, and a
   * message that finds no receive posted is dropped instead of breaking the VI. */
  VIP_VI_ATTRIBUTES vi_attrs = {
      .ReliabilityLevel = VIP_SERVICE_UNRELIABLE, .MaxTransferSize = (VIP_ULONG)frame_bytes, .Ptag = ptag};
  check(VipCreateVi(nic, &vi_attrs, NULL, NULL, &vi), "VipCreateVi");
  for (int i = 0; i < NUM_RECVS; ++i) post_receive(&recv_desc[i]);
  VIP_NET_ADDRESS *local = make_address(&nic_attrs, NULL, "stopwait");
  VIP_NET_ADDRESS *remote = make_address(&nic_attrs, rank == 0 ? "rank1" : "rank0", "stopwait");
  check(VipConnectPeerRequest(vi, local, remote, CONNECT_TIMEOUT_MS), "VipConnectPeerRequest");
  check(VipConnectPeerWait(vi, NULL), "VipConnectPeerWait");
  free(local);
  free(remote);

  if (rank == 0)
    run_sender();
  else
    run_receiver();

  /* Disconnecting flushes the receives still posted; then release everything. */
  VIP_DESCRIPTOR *d;
  check(VipDisconnect(vi), "VipDisconnect");
  while (VipRecvDone(vi, &d) == VIP_SUCCESS) {
  }
  check(VipDestroyVi(vi), "VipDestroyVi");
  check(VipDeregisterMem(nic, mem, mh), "VipDeregisterMem");
  check(VipDestroyPtag(nic, ptag), "VipDestroyPtag");
  check(VipCloseNic(nic), "VipCloseNic");
  free(mem);
  return EXAMPLE_OK;
}
