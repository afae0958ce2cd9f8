/* Generic Active Messages (GAM 1.1 style) over the VIA engine.
 *
 * Every rank of a viarun job calls am_enable(); requests run a handler, named
 * by its index in a table every rank fills the same way, at the destination;
 * a request handler may answer with one reply. Bulk am_store/am_get move data
 * to and from the destination's AM segment. Nothing happens behind the
 * program's back: messages are handled inside am_poll(), the waits, and the
 * other AM calls (a request, store or get polls once in 8, and whenever it
 * waits for a credit). All functions return AM_OK or a negative AM_ERR_* code;
 * am_last_error() describes the last failure. One thread at a time. */
#ifndef VIASTACK_AM_H
#define VIASTACK_AM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t am_word_t;

enum {
  AM_OK = 0,
  AM_ERR_NOT_INIT = -1,        /* am_enable() not called, or am_disable() already */
  AM_ERR_BAD_ARG = -2,         /* bad rank, handler index, address range or length */
  AM_ERR_RESOURCE = -3,        /* out of memory, registration or descriptors */
  AM_ERR_NOT_IN_HANDLER = -4,  /* am_reply_* outside a request handler, or a second reply */
  AM_ERR_UNREACHABLE = -5,     /* the destination failed or timed out earlier */
  AM_ERR_TOO_LARGE = -6,       /* payload larger than am_max_size() */
  AM_ERR_ENABLE = -7           /* am_enable could not open the NIC or reach a peer */
};

/* Why a message came back to the sender (am_returned_t.cause). */
enum {
  AM_E_BADHANDLER = 1,  /* no handler of the right kind at that index on the destination */
  AM_E_BADSEGOFF = 2,   /* the remote range lies outside the destination's segment */
  AM_E_BADLENGTH = 3,   /* malformed or oversized message */
  AM_E_TIMEOUT = 4,     /* no answer within the peer timeout (VIASTACK_AM_TIMEOUT_MS) */
  AM_E_UNREACHABLE = 5  /* the destination's VI broke: the process died or left */
};

/* What a returned message was. */
enum { AM_OP_REQUEST = 1, AM_OP_STORE = 2, AM_OP_GET = 3, AM_OP_BARRIER = 4 };

typedef struct {
  int cause;               /* AM_E_* */
  const char* description; /* human-readable cause, valid during the call */
  int dest;                /* the rank the message was for */
  int op;                  /* AM_OP_* */
  int handler;             /* handler index the message named */
  int nargs;
  am_word_t args[4];
} am_returned_t;

/* Short request/reply handler: unused arguments are 0. */
typedef void (*am_handler_t)(int src, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3);
/* Request/reply with a payload, valid only during the call. */
typedef void (*am_medium_handler_t)(int src, void* buf, size_t nbytes, am_word_t a0, am_word_t a1, am_word_t a2,
                                    am_word_t a3);
/* Store handler (runs at the destination once the data is there) and get
 * handler (runs at the initiator once the data is there). */
typedef void (*am_mem_handler_t)(int src, void* addr, size_t nbytes, am_word_t arg);
typedef void (*am_error_handler_t)(const am_returned_t* returned);
typedef void (*am_completion_t)(void* arg);

#define AM_MAX_HANDLERS 256

/* Set-up. Configuration comes from the environment:
 *   VIASTACK_AM_RELIABILITY=reliable|unreliable  VI reliability (default reliable)
 *   VIASTACK_AM_DEPTH=N              outstanding requests per peer (default 32)
 *   VIASTACK_AM_TIMEOUT_MS=N         peer timeout (default 10000)
 *   VIASTACK_AM_RETRANSMIT_MS=N      first retransmission (default 20; doubles)
 *   VIASTACK_AM_SEGMENT=bytes        size of the AM segment (default 16 MiB)
 * am_enable is collective: it returns once every rank is reachable. */
int am_enable(void);
/* Uses `base`/`bytes` as this rank's segment instead of allocating one. */
int am_enable_segment(void* base, size_t bytes);
/* Collective: a barrier, then the connections close. */
int am_disable(void);
int am_procs(void);
int am_my_proc(void);
size_t am_max_size(void);
/* This rank's view of rank `proc`'s segment. */
void* am_segment(int proc);
size_t am_segment_size(int proc);

/* Indices a library built on AM reserved for itself (am::reserve_handlers;
 * Split-C: 224..239) are refused: AM_ERR_BAD_ARG, am_last_error() naming the owner. */
int am_set_handler(int index, am_handler_t handler);
int am_set_medium_handler(int index, am_medium_handler_t handler);
int am_set_mem_handler(int index, am_mem_handler_t handler);
/* Receives every message that could not be delivered; the default prints it. */
void am_set_error_handler(am_error_handler_t handler);

int am_request_0(int dest, int handler);
int am_request_1(int dest, int handler, am_word_t a0);
int am_request_2(int dest, int handler, am_word_t a0, am_word_t a1);
int am_request_3(int dest, int handler, am_word_t a0, am_word_t a1, am_word_t a2);
int am_request_4(int dest, int handler, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3);
int am_request_medium(int dest, int handler, const void* buf, size_t nbytes, int nargs, const am_word_t* args);

/* Only inside a request handler, at most once, to `dest` = the requester. */
int am_reply_0(int dest, int handler);
int am_reply_1(int dest, int handler, am_word_t a0);
int am_reply_2(int dest, int handler, am_word_t a0, am_word_t a1);
int am_reply_3(int dest, int handler, am_word_t a0, am_word_t a1, am_word_t a2);
int am_reply_4(int dest, int handler, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3);
int am_reply_medium(int dest, int handler, const void* buf, size_t nbytes, int nargs, const am_word_t* args);

/* Copies n bytes from lva to rva on dest (rva inside dest's segment), then
 * runs mem handler `handler`(src, rva, n, arg) there. Returns when lva may be
 * reused. */
int am_store(int dest, const void* lva, void* rva, size_t n, int handler, am_word_t arg);
/* As am_store, but returns without waiting for dest; `done`(done_arg) runs
 * here when lva may be reused. Like any request it waits for a credit when
 * AM_DEPTH requests to dest are unanswered; and a store of more than
 * am_max_size() and up to 16 KiB on a reliable VI, which goes whole in one
 * message straight from lva into the link, waits for room there when the
 * link is full (handling messages meanwhile): lva is then free at return. */
int am_store_async(int dest, const void* lva, void* rva, size_t n, int handler, am_word_t arg, am_completion_t done,
                   void* done_arg);
/* Copies n bytes from rva on dest (inside its segment) to lva, then runs mem
 * handler `handler`(dest, lva, n, arg) here. Returns at once. */
int am_get(int dest, void* rva, void* lva, size_t n, int handler, am_word_t arg);

/* Handles what has arrived; returns the number of messages handled (>= 0). */
int am_poll(void);
/* Handles messages until pred(arg) returns nonzero: polls, and between
 * messages sleeps in the NIC's wait rather than spinning. pred usually reads
 * what handlers set. Returns AM_OK once it holds; AM_ERR_BAD_ARG for a null
 * pred or a call from inside a handler. Returned messages reach the error
 * handler during the wait: for the wait to end on such a failure, let the
 * error handler set something pred reads. */
int am_wait_until(int (*pred)(void* arg), void* arg);
int am_barrier(void);
/* Handles messages until every request this rank sent so far has been
 * answered: replied to, or acknowledged (a handler that does not reply is
 * acknowledged after it ran). Not from inside a handler (AM_ERR_BAD_ARG). */
int am_wait_acknowledged(void);

typedef struct {
  uint64_t requests_sent;
  uint64_t replies_sent;
  uint64_t messages_received;
  uint64_t retransmitted;
  uint64_t duplicates_dropped;
  uint64_t credit_stalls;
  uint64_t returned;
  uint64_t rdma_writes;
  uint64_t rdma_reads;
  uint64_t bytes_stored;
  uint64_t bytes_got;
  uint64_t acks_sent; /* acknowledgements of requests whose handlers did not reply */
  uint64_t ack_messages_sent; /* messages sent only to carry acknowledgements */
  uint64_t bundles_sent; /* bundles of deferred requests sent, each one message and one credit */
} am_counters_t;
void am_get_counters(am_counters_t* out);

const char* am_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
