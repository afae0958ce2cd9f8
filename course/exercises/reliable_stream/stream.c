/*
 * stream.c: YOUR stream for exercise reliable_stream (see README.md).
 *
 * As given, it compiles and moves messages, but only as well as the VI does:
 * each message goes out once, in one frame, and whatever arrives is handed to
 * the harness. Over an unreliable VI under the fault injector, messages are
 * lost, delivered twice and out of order, and the checker fails it. Make it
 * deliver every message exactly once, in order: the TODOs say where.
 *
 * The VIPL part is done for you: one registered region holding the
 * descriptors and their frames, receives posted before the VI connects (an
 * unreliable VI drops a frame that finds none), a send that waits until its
 * descriptor is free again.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "stream_errors.h"

#define NUM_RECVS 64 /* receive descriptors kept posted: a frame that finds none is lost */
#define FRAME_BYTES ((STREAM_MAX_FRAME + 63) / 64 * 64)

enum { FRAME_DATA = 1 };

/* Every frame starts with this header. TODO: a sequence number, so that the
 * receiver can put messages in order and recognise copies; acknowledgement
 * frames and what they carry; a frame that says the stream has ended. */
struct frame_header {
  uint32_t type;
  uint32_t length; /* DATA: the payload's bytes */
};

struct stream {
  VIP_NIC_HANDLE nic;
  VIP_VI_HANDLE vi;
  VIP_MEM_HANDLE mh;
  unsigned char *memory; /* one registered region: the descriptors, then the frames */
  VIP_DESCRIPTOR *send_desc, *recv_desc;
  unsigned char *send_frame, *recv_frames;
  /* TODO: the sender's window (the messages sent and not yet acknowledged,
   * kept for retransmission, and when each went out) and the receiver's (the
   * next number to deliver, what arrived ahead of it). */
};

static int post_receive(stream *s, VIP_DESCRIPTOR *d) {
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->DS[0].Local.Data.Address = s->recv_frames + (size_t)(d - s->recv_desc) * FRAME_BYTES;
  d->DS[0].Local.Handle = s->mh;
  d->DS[0].Local.Length = FRAME_BYTES;
  VIP_RETURN r = VipPostRecv(s->vi, d, s->mh);
  return r == VIP_SUCCESS ? 0 : vipl_failed(r, "VipPostRecv");
}

/* Sends one frame (the header and `length` bytes of payload) and waits until
 * its descriptor is free: on an unreliable VI, as soon as the frame has left,
 * whether or not it will arrive. */
static int transmit(stream *s, const struct frame_header *h, const void *payload, size_t length) {
  memcpy(s->send_frame, h, sizeof *h);
  if (length) memcpy(s->send_frame + sizeof *h, payload, length);
  VIP_DESCRIPTOR *d = s->send_desc;
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->CS.Length = (VIP_UINT32)(sizeof *h + length);
  d->DS[0].Local.Data.Address = s->send_frame;
  d->DS[0].Local.Handle = s->mh;
  d->DS[0].Local.Length = d->CS.Length;
  VIP_RETURN r = VipPostSend(s->vi, d, s->mh);
  if (r != VIP_SUCCESS) return vipl_failed(r, "VipPostSend");
  r = VipSendWait(s->vi, 5000, &d);
  if (r != VIP_SUCCESS) return vipl_failed(r, "VipSendWait");
  return (d->CS.Status & VIP_STATUS_ERROR_MASK) ? descriptor_failed(d, "a send") : 0;
}

stream *stream_open(VIP_NIC_HANDLE nic, VIP_PROTECTION_HANDLE ptag, VIP_VI_HANDLE vi) {
  stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->nic = nic;
  s->vi = vi;
  size_t descriptors = (1 + NUM_RECVS) * sizeof(VIP_DESCRIPTOR);
  size_t total = descriptors + (1 + NUM_RECVS) * (size_t)FRAME_BYTES;
  s->memory = aligned_alloc(VIP_DESCRIPTOR_ALIGNMENT, total);
  if (!s->memory) {
    free(s);
    return NULL;
  }
  memset(s->memory, 0, total);
  s->send_desc = (VIP_DESCRIPTOR *)s->memory;
  s->recv_desc = s->send_desc + 1;
  s->send_frame = s->memory + descriptors;
  s->recv_frames = s->send_frame + FRAME_BYTES;
  VIP_MEM_ATTRIBUTES attrs = {.Ptag = ptag, .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE};
  VIP_RETURN r = VipRegisterMem(nic, s->memory, total, &attrs, &s->mh);
  if (r != VIP_SUCCESS) {
    vipl_failed(r, "VipRegisterMem");
    free(s->memory);
    free(s);
    return NULL;
  }
  for (int i = 0; i < NUM_RECVS; ++i)
    if (post_receive(s, &s->recv_desc[i]) != 0) {
      stream_destroy(s);
      return NULL;
    }
  return s;
}

int stream_send(stream *s, const void *data, size_t length) {
  if (length > STREAM_MAX_MESSAGE) return STREAM_ERROR;
  /* TODO: number the message and keep a copy until it is acknowledged; wait
   * (handling acknowledgements, retransmitting what timed out) while the
   * window is full. Sending one message and waiting for its acknowledgement
   * before the next (stop-and-wait) is correct but too slow for the checker. */
  struct frame_header h = {FRAME_DATA, (uint32_t)length};
  return transmit(s, &h, data, length);
}

long stream_recv(stream *s, void *buffer, size_t capacity, int timeout_ms) {
  /* TODO: acknowledge every frame (also copies of what was delivered: the
   * first acknowledgement may have been lost); deliver only the next message
   * in order, keeping those that arrive early; drop copies; return
   * STREAM_END once the sender's end-of-stream frame is next in order. And
   * keep retransmitting here too if this side also sends. */
  VIP_DESCRIPTOR *d;
  VIP_RETURN r = VipRecvWait(s->vi, (VIP_ULONG)timeout_ms, &d);
  if (r == VIP_TIMEOUT) return STREAM_TIMEOUT;
  if (r != VIP_SUCCESS) return vipl_failed(r, "VipRecvWait");
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) return descriptor_failed(d, "a receive");
  struct frame_header h;
  const unsigned char *frame = s->recv_frames + (size_t)(d - s->recv_desc) * FRAME_BYTES;
  memcpy(&h, frame, sizeof h);
  if (h.length > capacity || d->CS.Length != sizeof h + h.length) return STREAM_ERROR;
  memcpy(buffer, frame + sizeof h, h.length);
  long length = (long)h.length;
  return post_receive(s, d) == 0 ? length : STREAM_ERROR;
}

int stream_close(stream *s) {
  /* TODO: the sender sends the end of the stream and waits until everything
   * is acknowledged; the receiver answers retransmitted frames until the
   * sender disconnects or has been quiet for a while. */
  (void)s;
  return 0;
}

void stream_destroy(stream *s) {
  VIP_DESCRIPTOR *d;
  while (VipRecvDone(s->vi, &d) == VIP_SUCCESS) { /* the receives, flushed by the disconnection */
  }
  VipDeregisterMem(s->nic, s->memory, s->mh);
  free(s->memory);
  free(s);
}
