/*
 * harness.c: the driver of exercise reliable_stream (given: do not change).
 *
 *   VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1,seed=1 \
 *     viarun -n 2 reliable_stream [--messages N] [--silence-ms N]
 *
 * Makes an UNRELIABLE VI between ranks 0 and 1 and runs your stream
 * (stream.c) over it: rank 0 sends N messages of varying lengths (0 to
 * STREAM_MAX_MESSAGE bytes, some empty), rank 1 receives them and checks each
 * one's length and every byte. The first message out of place ends the job
 * with a line saying what came instead (a copy of an earlier message, a later
 * one, wrong bytes). The sender prints how long the whole transfer took, from
 * its first stream_send to the return of stream_close.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vipl.h>

#include "example_options.h"
#include "stream.h"
#include "vipl_check.h"

#define CONNECT_TIMEOUT_MS 30000

static long messages = 1000, silence_ms = 5000;

/* Message i: its length (every 50th empty), its first four bytes its number
 * (when it has four), then a pattern of i and the position. */
static size_t message_length(uint32_t i) { return i % 50 == 7 ? 0 : (i * 37u + 5u) % (STREAM_MAX_MESSAGE + 1); }
static unsigned char pattern(uint32_t i, size_t j) { return (unsigned char)(i * 31u + j * 7u + 1u); }

static void fill_message(uint32_t i, unsigned char *out) {
  size_t length = message_length(i);
  for (size_t j = 0; j < length; ++j) out[j] = pattern(i, j);
  if (length >= sizeof i) memcpy(out, &i, sizeof i);
}

/* Why `got` (length bytes) is not message `expected`: names what it is if it can. */
static void explain_wrong_message(uint32_t expected, const unsigned char *got, long length) {
  fprintf(stderr, "reliable_stream rank 1: message %u should have %zu bytes; got %ld bytes", (unsigned)expected,
          message_length(expected), length);
  uint32_t number;
  if (length >= (long)sizeof number) {
    memcpy(&number, got, sizeof number);
    unsigned char copy[STREAM_MAX_MESSAGE];
    if (number < (uint32_t)messages && message_length(number) == (size_t)length &&
        (fill_message(number, copy), memcmp(copy, got, (size_t)length) == 0)) {
      if (number < expected)
        fprintf(stderr, " that are message %u again: a duplicate was delivered\n", (unsigned)number);
      else
        fprintf(stderr, " that are message %u: message %u was lost or delivered out of order\n", (unsigned)number,
                (unsigned)expected);
      return;
    }
  }
  fprintf(stderr, " that are not any message sent whole (a frame's header delivered as data, or bytes mixed up)\n");
}

static long elapsed_ms(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long)(now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static int run_sender(stream *s) {
  unsigned char message[STREAM_MAX_MESSAGE];
  long bytes = 0;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (uint32_t i = 0; i < (uint32_t)messages; ++i) {
    fill_message(i, message);
    if (stream_send(s, message, message_length(i)) != 0) {
      fprintf(stderr, "reliable_stream rank 0: stream_send of message %u failed\n", (unsigned)i);
      return EXAMPLE_FAILED;
    }
    bytes += (long)message_length(i);
  }
  if (stream_close(s) != 0) {
    fprintf(stderr, "reliable_stream rank 0: stream_close failed: not every message was acknowledged\n");
    return EXAMPLE_FAILED;
  }
  printf("reliable_stream sender: %ld messages (%ld bytes) sent and acknowledged in %ld ms\n", messages, bytes,
         elapsed_ms(&start));
  return EXAMPLE_OK;
}

static int run_receiver(stream *s) {
  unsigned char got[STREAM_MAX_MESSAGE], expected[STREAM_MAX_MESSAGE];
  for (uint32_t i = 0;; ++i) {
    long length = stream_recv(s, got, sizeof got, (int)silence_ms);
    if (length == STREAM_END) {
      if (i == (uint32_t)messages) break;
      fprintf(stderr, "reliable_stream rank 1: the stream ended after %u of %ld messages\n", (unsigned)i, messages);
      return EXAMPLE_FAILED;
    }
    if (length == STREAM_TIMEOUT) {
      fprintf(stderr, "reliable_stream rank 1: nothing delivered for %ld ms while waiting for %s %u\n", silence_ms,
              i < (uint32_t)messages ? "message" : "the end of the stream after message", (unsigned)i);
      return EXAMPLE_FAILED;
    }
    if (length < 0) {
      fprintf(stderr, "reliable_stream rank 1: stream_recv failed (%ld) waiting for message %u\n", length, (unsigned)i);
      return EXAMPLE_FAILED;
    }
    if (i >= (uint32_t)messages) {
      fprintf(stderr, "reliable_stream rank 1: %u messages delivered, only %ld were sent: ", i + 1, messages);
      explain_wrong_message(i, got, length);
      return EXAMPLE_FAILED;
    }
    fill_message(i, expected);
    if ((size_t)length != message_length(i) || memcmp(got, expected, (size_t)length) != 0) {
      explain_wrong_message(i, got, length);
      return EXAMPLE_FAILED;
    }
  }
  if (stream_close(s) != 0) {
    fprintf(stderr, "reliable_stream rank 1: stream_close failed\n");
    return EXAMPLE_FAILED;
  }
  printf("reliable_stream receiver: %ld messages delivered exactly once, in order, every byte checked\n", messages);
  return EXAMPLE_OK;
}

int main(int argc, char **argv) {
  program = "reliable_stream";
  usage_text =
      "usage: viarun -n 2 reliable_stream [--messages N] [--silence-ms N]\n"
      "\n"
      "Exercise reliable_stream: your stream (stream.c) over an unreliable VI. Rank 0\n"
      "sends N messages, rank 1 checks that each arrives exactly once, whole, in order.\n"
      "Run it under the fault injector:\n"
      "  VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1,seed=1 viarun -n 2 reliable_stream\n"
      "\n"
      "  --messages N    messages to send (1..1000000, default 1000)\n"
      "  --silence-ms N  the receiver fails after this long without a message (1..600000, default 5000)\n"
      "  --help          this text\n"
      "\n"
      "Exit status: 0 every message delivered exactly once, in order; 1 a wrong,\n"
      "missing or repeated message, or an error; 2 bad usage.\n";
  for (int i = 1; i < argc; ++i) {
    help_option(argv[i]);
    if (!number_option(argc, argv, &i, "--messages", 1, 1000000, &messages) &&
        !number_option(argc, argv, &i, "--silence-ms", 1, 600000, &silence_ms))
      usage_error("unknown option", argv[i]);
  }
  const char *rank_env = getenv("VIASTACK_RANK"), *size_env = getenv("VIASTACK_SIZE");
  if (!rank_env || !size_env || atoi(size_env) != 2)
    usage_error("needs exactly 2 ranks under viarun; VIASTACK_SIZE is", size_env ? size_env : "unset");
  rank = atoi(rank_env);

  VIP_NIC_ATTRIBUTES nic_attrs;
  VIP_PROTECTION_HANDLE ptag;
  check(VipOpenNic(NULL, &nic), "VipOpenNic");
  check(VipQueryNic(nic, &nic_attrs), "VipQueryNic");
  check(VipCreatePtag(nic, &ptag), "VipCreatePtag");
  VIP_VI_ATTRIBUTES vi_attrs = {
      .ReliabilityLevel = VIP_SERVICE_UNRELIABLE, .MaxTransferSize = STREAM_MAX_FRAME, .Ptag = ptag};
  VIP_VI_HANDLE vi;
  check(VipCreateVi(nic, &vi_attrs, NULL, NULL, &vi), "VipCreateVi");
  stream *s = stream_open(nic, ptag, vi);
  if (!s) {
    fprintf(stderr, "reliable_stream rank %d: stream_open failed\n", rank);
    die();
  }
  VIP_NET_ADDRESS *local = make_address(&nic_attrs, NULL, "stream");
  VIP_NET_ADDRESS *remote = make_address(&nic_attrs, rank == 0 ? "rank1" : "rank0", "stream");
  check(VipConnectPeerRequest(vi, local, remote, CONNECT_TIMEOUT_MS), "VipConnectPeerRequest");
  check(VipConnectPeerWait(vi, NULL), "VipConnectPeerWait");
  free(local);
  free(remote);

  int status = rank == 0 ? run_sender(s) : run_receiver(s);

  check(VipDisconnect(vi), "VipDisconnect");
  stream_destroy(s);
  check(VipDestroyVi(vi), "VipDestroyVi");
  check(VipDestroyPtag(nic, ptag), "VipDestroyPtag");
  check(VipCloseNic(nic), "VipCloseNic");
  return status;
}
