/*
 * stream.h: the interface of exercise reliable_stream (given: do not change).
 *
 * A stream carries messages of 0 to STREAM_MAX_MESSAGE bytes from one rank to
 * another over an UNRELIABLE VI, which may lose a frame, deliver it twice or
 * deliver it late and out of order. The stream must deliver every message
 * exactly once, whole, and in the order it was sent.
 *
 * The harness (harness.c) makes the VI and connects it; you write stream.c.
 * The order of calls on each rank:
 *
 *   stream_open      after the VI is created, before it is connected: register
 *                    your memory, post your receives
 *   stream_send      (the sending rank) any number of times
 *   stream_recv      (the receiving rank) until it returns STREAM_END
 *   stream_close     both ranks: the sender waits until the receiver has
 *                    everything, the receiver lingers to answer late frames
 *   (the harness disconnects the VI)
 *   stream_destroy   release what stream_open took
 */
#ifndef COURSE_STREAM_H
#define COURSE_STREAM_H

#include <stddef.h>

#include <vipl.h>

/* The largest message; a frame (your header plus a message) may take up to
 * STREAM_MAX_FRAME bytes: the VI's MaxTransferSize. */
#define STREAM_MAX_MESSAGE 1024
#define STREAM_MAX_FRAME (STREAM_MAX_MESSAGE + 64)

/* What stream_recv returns besides a message's length. */
#define STREAM_ERROR (-1)   /* a VIPL error or a broken protocol (say why on stderr) */
#define STREAM_TIMEOUT (-2) /* nothing arrived within the timeout */
#define STREAM_END (-3)     /* the sender closed the stream: every message was delivered */

typedef struct stream stream; /* yours: defined in stream.c */

/* A stream over `vi` (created UNRELIABLE with tag `ptag` on `nic`, not yet
 * connected). NULL on a failure, said on stderr. */
stream *stream_open(VIP_NIC_HANDLE nic, VIP_PROTECTION_HANDLE ptag, VIP_VI_HANDLE vi);

/* Sends `length` bytes (0..STREAM_MAX_MESSAGE). May return before the peer
 * has them (the data is copied); may wait while too much is unacknowledged.
 * 0, or STREAM_ERROR. */
int stream_send(stream *s, const void *data, size_t length);

/* The next message in order, copied into `buffer` (`capacity` bytes, at least
 * STREAM_MAX_MESSAGE): its length; or STREAM_END once the sender has closed
 * and everything before was delivered; STREAM_TIMEOUT after `timeout_ms`
 * without one; STREAM_ERROR. */
long stream_recv(stream *s, void *buffer, size_t capacity, int timeout_ms);

/* The sender: returns once the receiver has acknowledged every message and
 * the end of the stream. The receiver: answers the sender's retransmissions
 * for a while (its last acknowledgements may have been lost), then returns.
 * 0, or STREAM_ERROR. */
int stream_close(stream *s);

/* After the harness disconnected the VI: releases the memory and descriptors. */
void stream_destroy(stream *s);

#endif
