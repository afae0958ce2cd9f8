/*
 * solution/stream.c: a reference solution of exercise reliable_stream.
 *
 * Selective repeat. Every message gets a sequence number; the sender keeps up
 * to WINDOW messages unacknowledged, each with its own retransmission timer.
 * The receiver buffers what arrives out of order and acknowledges every frame
 * with the first number it has not received (all before it arrived) and a
 * bitmap of the WINDOW numbers after that which it holds already (a selective
 * acknowledgement), so that one lost frame costs one retransmission. The
 * sender also retransmits a message at once when later ones were
 * acknowledged and it has been out longer than a round trip (a fast
 * retransmission), without waiting for its timer. The timeout follows the
 * measured round trip (RFC 6298's estimator, samples only from messages sent
 * once: Karn's rule) and doubles on every timeout.
 *
 * The end of the stream is a FIN frame that takes the next sequence number,
 * so it is retransmitted and acknowledged like a message and delivered after
 * all of them. The receiver lingers after it (as TCP's TIME-WAIT): its
 * acknowledgement of the FIN may be lost, and the sender then sends it again.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream.h"
#include "stream_errors.h"

#define WINDOW 32        /* messages sent and not yet acknowledged, at most (<= 32: the bitmap) */
#define NUM_SENDS 64     /* send descriptors, each with its own frame */
#define NUM_RECVS 64     /* receive descriptors kept posted: a frame that finds none is lost */
#define FRAME_BYTES ((STREAM_MAX_FRAME + 63) / 64 * 64)
#define RTO_INITIAL_MS 50.0
#define RTO_MIN_MS 5.0
#define RTO_MAX_MS 1000.0
#define GIVE_UP_MS 5000   /* the sender gives up after this long without a frame from the receiver */
#define LINGER_MS 2000    /* the receiver's quiet time after the FIN (twice the largest timeout) */

enum { FRAME_DATA = 1, FRAME_FIN = 2, FRAME_ACK = 3 };

struct frame_header {
  uint32_t type;
  uint32_t seq;    /* DATA, FIN: the message's number. ACK: the first number not received */
  uint32_t length; /* DATA: the payload's bytes */
  uint32_t sack;   /* ACK: bit i set when message seq + 1 + i has been received */
};

/* A message in a window: the sender's unacknowledged ones, the receiver's not yet delivered. */
struct slot {
  int used;
  int retransmitted; /* sender: sent more than once, so its acknowledgement times nothing */
  uint32_t type;
  uint32_t length;
  uint64_t sent_ns; /* sender: when it last went out */
  unsigned char data[STREAM_MAX_MESSAGE];
};

struct stream {
  VIP_NIC_HANDLE nic;
  VIP_VI_HANDLE vi;
  VIP_MEM_HANDLE mh;
  unsigned char *memory; /* one registered region: the descriptors, then the frames */
  VIP_DESCRIPTOR *send_desc, *recv_desc;
  unsigned char *send_frames, *recv_frames;
  int send_free[NUM_SENDS];
  int peer_gone; /* the VI was disconnected: its receives came back flushed */
  uint64_t last_heard_ns;

  /* Sender: messages base..next-1 are out; out[seq % WINDOW] holds seq. */
  uint32_t base, next;
  struct slot out[WINDOW];
  double srtt_ms, rttvar_ms, rto_ms;
  int have_rtt;

  /* Receiver: delivered..received_next-1 arrived in order and wait for
   * stream_recv; later ones arrived out of order; in[seq % WINDOW] holds seq. */
  uint32_t delivered, received_next;
  struct slot in[WINDOW];
  int ended;
};

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double ms_since(uint64_t then) { return (double)(now_ns() - then) / 1e6; }

static int post_receive(stream *s, VIP_DESCRIPTOR *d) {
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->DS[0].Local.Data.Address = s->recv_frames + (size_t)(d - s->recv_desc) * FRAME_BYTES;
  d->DS[0].Local.Handle = s->mh;
  d->DS[0].Local.Length = FRAME_BYTES;
  VIP_RETURN r = VipPostRecv(s->vi, d, s->mh);
  return r == VIP_SUCCESS ? 0 : vipl_failed(r, "VipPostRecv");
}

/* Marks the send descriptors that have completed free again. */
static int reap_sends(stream *s) {
  VIP_DESCRIPTOR *d;
  while (VipSendDone(s->vi, &d) == VIP_SUCCESS) {
    s->send_free[d - s->send_desc] = 1;
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) return descriptor_failed(d, "a send");
  }
  return 0;
}

/* Sends one frame: the header and `length` bytes of payload. A free send
 * descriptor is waited for if all are in flight. */
static int transmit(stream *s, const struct frame_header *h, const void *payload, size_t length) {
  if (reap_sends(s) != 0) return STREAM_ERROR;
  int i = 0;
  while (i < NUM_SENDS && !s->send_free[i]) ++i;
  if (i == NUM_SENDS) {
    VIP_DESCRIPTOR *d;
    VIP_RETURN r = VipSendWait(s->vi, GIVE_UP_MS, &d);
    if (r != VIP_SUCCESS) return vipl_failed(r, "VipSendWait");
    i = (int)(d - s->send_desc);
  }
  unsigned char *frame = s->send_frames + (size_t)i * FRAME_BYTES;
  memcpy(frame, h, sizeof *h);
  if (length) memcpy(frame + sizeof *h, payload, length);
  VIP_DESCRIPTOR *d = &s->send_desc[i];
  memset(d, 0, sizeof *d);
  d->CS.SegCount = 1;
  d->CS.Length = (VIP_UINT32)(sizeof *h + length);
  d->DS[0].Local.Data.Address = frame;
  d->DS[0].Local.Handle = s->mh;
  d->DS[0].Local.Length = d->CS.Length;
  s->send_free[i] = 0;
  VIP_RETURN r = VipPostSend(s->vi, d, s->mh);
  return r == VIP_SUCCESS ? 0 : vipl_failed(r, "VipPostSend");
}

static int send_message_frame(stream *s, uint32_t seq) {
  struct slot *m = &s->out[seq % WINDOW];
  struct frame_header h = {m->type, seq, m->length, 0};
  m->sent_ns = now_ns();
  return transmit(s, &h, m->data, m->length);
}

static int send_ack(stream *s) {
  struct frame_header h = {FRAME_ACK, s->received_next, 0, 0};
  for (uint32_t i = 0; i < WINDOW - 1; ++i) {
    uint32_t seq = s->received_next + 1 + i;
    if (s->in[seq % WINDOW].used && seq - s->delivered < WINDOW) h.sack |= 1u << i;
  }
  return transmit(s, &h, NULL, 0);
}

/* RFC 6298: the smoothed round trip and its variation give the timeout. */
static void sample_rtt(stream *s, double rtt_ms) {
  if (!s->have_rtt) {
    s->srtt_ms = rtt_ms;
    s->rttvar_ms = rtt_ms / 2;
    s->have_rtt = 1;
  } else {
    double error = rtt_ms > s->srtt_ms ? rtt_ms - s->srtt_ms : s->srtt_ms - rtt_ms;
    s->rttvar_ms = 0.75 * s->rttvar_ms + 0.25 * error;
    s->srtt_ms = 0.875 * s->srtt_ms + 0.125 * rtt_ms;
  }
  s->rto_ms = s->srtt_ms + 4 * s->rttvar_ms;
  if (s->rto_ms < RTO_MIN_MS) s->rto_ms = RTO_MIN_MS;
  if (s->rto_ms > RTO_MAX_MS) s->rto_ms = RTO_MAX_MS;
}

static int handle_ack(stream *s, const struct frame_header *h) {
  if ((int32_t)(h->seq - s->base) < 0) return 0; /* older than one already handled: a copy or late */
  if (h->seq - s->base > s->next - s->base) {
    fprintf(stderr, "stream: an acknowledgement up to %u, but only %u messages were sent\n", (unsigned)h->seq,
            (unsigned)s->next);
    return STREAM_ERROR;
  }
  for (; s->base != h->seq; ++s->base) { /* everything before h->seq arrived */
    struct slot *m = &s->out[s->base % WINDOW];
    if (m->used && !m->retransmitted) sample_rtt(s, ms_since(m->sent_ns));
    m->used = 0;
  }
  uint32_t highest_sacked = s->base;
  for (uint32_t i = 0; i < WINDOW - 1; ++i) {
    uint32_t seq = h->seq + 1 + i;
    if (!(h->sack & (1u << i)) || seq - s->base >= s->next - s->base) continue;
    s->out[seq % WINDOW].used = 0;
    highest_sacked = seq;
  }
  /* Fast retransmission: a message still missing below one that arrived, out
   * for longer than a round trip, was most likely lost. */
  double round_trip = s->have_rtt ? s->srtt_ms : RTO_INITIAL_MS;
  for (uint32_t seq = s->base; seq != highest_sacked; ++seq) {
    struct slot *m = &s->out[seq % WINDOW];
    if (m->used && ms_since(m->sent_ns) > round_trip) {
      m->retransmitted = 1;
      if (send_message_frame(s, seq) != 0) return STREAM_ERROR;
    }
  }
  return 0;
}

static int handle_message(stream *s, const struct frame_header *h, const unsigned char *payload) {
  /* Room for seq: not delivered yet and within WINDOW of the oldest undelivered.
   * A message further ahead is dropped (the sender will send it again): a
   * receiver slower than its sender would advertise a window, as TCP does. */
  if (h->seq - s->delivered < WINDOW) {
    struct slot *m = &s->in[h->seq % WINDOW];
    if (!m->used) {
      m->used = 1;
      m->type = h->type;
      m->length = h->length;
      memcpy(m->data, payload, h->length);
      while (s->received_next - s->delivered < WINDOW && s->in[s->received_next % WINDOW].used) ++s->received_next;
    }
  }
  return send_ack(s); /* every copy: the acknowledgement of an earlier one may have been lost */
}

/* One received frame, checked and handled; its descriptor is posted again. */
static int handle_frame(stream *s, VIP_DESCRIPTOR *d) {
  if (d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR) {
    s->peer_gone = 1; /* disconnected: the receives come back flushed */
    return 0;
  }
  if (d->CS.Status & VIP_STATUS_ERROR_MASK) return descriptor_failed(d, "a receive");
  struct frame_header h;
  const unsigned char *frame = s->recv_frames + (size_t)(d - s->recv_desc) * FRAME_BYTES;
  if (d->CS.Length < sizeof h) {
    fprintf(stderr, "stream: a frame of %u bytes, shorter than a header\n", (unsigned)d->CS.Length);
    return STREAM_ERROR;
  }
  memcpy(&h, frame, sizeof h);
  if ((h.type == FRAME_DATA && (h.length > STREAM_MAX_MESSAGE || d->CS.Length != sizeof h + h.length)) ||
      (h.type != FRAME_DATA && h.type != FRAME_FIN && h.type != FRAME_ACK)) {
    fprintf(stderr, "stream: a malformed frame (type %u, %u bytes)\n", (unsigned)h.type, (unsigned)d->CS.Length);
    return STREAM_ERROR;
  }
  s->last_heard_ns = now_ns();
  int rc = h.type == FRAME_ACK ? handle_ack(s, &h) : handle_message(s, &h, frame + sizeof h);
  if (rc != 0) return rc;
  return post_receive(s, d);
}

/* Retransmits every message whose timer ran out; doubles the timeout if any did. */
static int run_timers(stream *s) {
  int expired = 0;
  for (uint32_t seq = s->base; seq != s->next; ++seq) {
    struct slot *m = &s->out[seq % WINDOW];
    if (!m->used || ms_since(m->sent_ns) < s->rto_ms) continue;
    m->retransmitted = 1;
    expired = 1;
    if (send_message_frame(s, seq) != 0) return STREAM_ERROR;
  }
  if (expired) s->rto_ms = s->rto_ms * 2 > RTO_MAX_MS ? RTO_MAX_MS : s->rto_ms * 2;
  return 0;
}

/* The progress engine: timers, then the frames that arrived, waiting up to
 * wait_ms for the first (no longer than the next timer). */
static int progress(stream *s, double wait_ms) {
  if (run_timers(s) != 0) return STREAM_ERROR;
  for (uint32_t seq = s->base; seq != s->next; ++seq) {
    const struct slot *m = &s->out[seq % WINDOW];
    double left = s->rto_ms - ms_since(m->sent_ns);
    if (m->used && left < wait_ms) wait_ms = left;
  }
  VIP_DESCRIPTOR *d;
  VIP_RETURN r = wait_ms >= 1 ? VipRecvWait(s->vi, (VIP_ULONG)wait_ms, &d) : VipRecvDone(s->vi, &d);
  while (r == VIP_SUCCESS) {
    if (handle_frame(s, d) != 0) return STREAM_ERROR;
    r = VipRecvDone(s->vi, &d);
  }
  if (r != VIP_NOT_DONE && r != VIP_TIMEOUT) return vipl_failed(r, "VipRecvWait");
  return reap_sends(s);
}

/* Progress until the sender has at most `outstanding` messages unacknowledged. */
static int wait_for_acks(stream *s, uint32_t outstanding) {
  while (s->next - s->base > outstanding) {
    if (s->peer_gone || ms_since(s->last_heard_ns) > GIVE_UP_MS) {
      fprintf(stderr, "stream: message %u unacknowledged, the receiver %s\n", (unsigned)s->base,
              s->peer_gone ? "disconnected" : "silent for too long");
      return STREAM_ERROR;
    }
    if (progress(s, GIVE_UP_MS) != 0) return STREAM_ERROR;
  }
  return 0;
}

static int send_in_window(stream *s, uint32_t type, const void *data, size_t length) {
  if (wait_for_acks(s, WINDOW - 1) != 0) return STREAM_ERROR;
  struct slot *m = &s->out[s->next % WINDOW];
  m->used = 1;
  m->retransmitted = 0;
  m->type = type;
  m->length = (uint32_t)length;
  if (length) memcpy(m->data, data, length);
  if (send_message_frame(s, s->next++) != 0) return STREAM_ERROR;
  return progress(s, 0); /* take in the acknowledgements that came meanwhile */
}

stream *stream_open(VIP_NIC_HANDLE nic, VIP_PROTECTION_HANDLE ptag, VIP_VI_HANDLE vi) {
  stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->nic = nic;
  s->vi = vi;
  s->rto_ms = RTO_INITIAL_MS;
  s->last_heard_ns = now_ns();
  size_t descriptors = (NUM_SENDS + NUM_RECVS) * sizeof(VIP_DESCRIPTOR);
  size_t total = descriptors + (NUM_SENDS + NUM_RECVS) * (size_t)FRAME_BYTES;
  s->memory = aligned_alloc(VIP_DESCRIPTOR_ALIGNMENT, total);
  if (!s->memory) {
    free(s);
    return NULL;
  }
  memset(s->memory, 0, total);
  s->send_desc = (VIP_DESCRIPTOR *)s->memory;
  s->recv_desc = s->send_desc + NUM_SENDS;
  s->send_frames = s->memory + descriptors;
  s->recv_frames = s->send_frames + NUM_SENDS * (size_t)FRAME_BYTES;
  VIP_MEM_ATTRIBUTES attrs = {.Ptag = ptag, .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE};
  VIP_RETURN r = VipRegisterMem(nic, s->memory, total, &attrs, &s->mh);
  if (r != VIP_SUCCESS) {
    vipl_failed(r, "VipRegisterMem");
    free(s->memory);
    free(s);
    return NULL;
  }
  for (int i = 0; i < NUM_SENDS; ++i) s->send_free[i] = 1;
  for (int i = 0; i < NUM_RECVS; ++i)
    if (post_receive(s, &s->recv_desc[i]) != 0) {
      stream_destroy(s);
      return NULL;
    }
  return s;
}

int stream_send(stream *s, const void *data, size_t length) {
  if (length > STREAM_MAX_MESSAGE) {
    fprintf(stderr, "stream: a message of %zu bytes, more than %d\n", length, STREAM_MAX_MESSAGE);
    return STREAM_ERROR;
  }
  return send_in_window(s, FRAME_DATA, data, length);
}

long stream_recv(stream *s, void *buffer, size_t capacity, int timeout_ms) {
  uint64_t start = now_ns();
  for (;;) {
    if (s->ended) return STREAM_END;
    if (s->delivered != s->received_next) {
      struct slot *m = &s->in[s->delivered++ % WINDOW];
      m->used = 0;
      if (m->type == FRAME_FIN) {
        s->ended = 1;
        return STREAM_END;
      }
      if (m->length > capacity) {
        fprintf(stderr, "stream: a message of %u bytes for a buffer of %zu\n", (unsigned)m->length, capacity);
        return STREAM_ERROR;
      }
      memcpy(buffer, m->data, m->length);
      return (long)m->length;
    }
    double left = timeout_ms - ms_since(start);
    if (left <= 0) return STREAM_TIMEOUT;
    if (s->peer_gone) {
      fprintf(stderr, "stream: the sender disconnected before the end of the stream\n");
      return STREAM_ERROR;
    }
    if (progress(s, left) != 0) return STREAM_ERROR;
  }
}

int stream_close(stream *s) {
  if (s->next != 0) { /* the sender (a stream that sent nothing receives): the FIN, acknowledged like any message */
    if (send_in_window(s, FRAME_FIN, NULL, 0) != 0) return STREAM_ERROR;
    return wait_for_acks(s, 0);
  }
  /* The receiver: answers FINs sent again until the sender disconnects (it has
   * our acknowledgement) or stays quiet for longer than its largest timeout. */
  while (!s->peer_gone && ms_since(s->last_heard_ns) < LINGER_MS)
    if (progress(s, LINGER_MS - ms_since(s->last_heard_ns)) != 0) return STREAM_ERROR;
  return 0;
}

void stream_destroy(stream *s) {
  VIP_DESCRIPTOR *d;
  while (VipRecvDone(s->vi, &d) == VIP_SUCCESS) { /* the flushed receives */
  }
  while (VipSendDone(s->vi, &d) == VIP_SUCCESS) {
  }
  VipDeregisterMem(s->nic, s->memory, s->mh);
  free(s->memory);
  free(s);
}
