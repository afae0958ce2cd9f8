/* Requests by MPI-3.1 3.7-3.9 and 12.2: persistent sends of every mode and
 * receives, started again and again (MPI_Start, MPI_Startall) around a ring,
 * below and above the eager limit; inactive persistent requests in Wait,
 * Test and Request_free; MPI_Request_get_status, which leaves the request
 * alone; MPI_Cancel of receives (persistent ones too) and of sends (a send
 * cancelled is never received; one that cannot be is received once);
 * statuses set by hand (MPI_Status_set_elements(_x), set_cancelled,
 * MPI_Get_elements_x); generalized requests with their query, free and cancel
 * callbacks called as the standard says; bad arguments returning their error
 * class under MPI_ERRORS_RETURN. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size, next, prev;

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* ---- persistent requests ---- */

enum Mode { standard, synchronous, ready, buffered, modes };

static int init_send(enum Mode mode, const int* buf, int count, int dest, int tag, MPI_Request* request) {
  switch (mode) {
    case standard: return MPI_Send_init(buf, count, MPI_INT, dest, tag, MPI_COMM_WORLD, request);
    case synchronous: return MPI_Ssend_init(buf, count, MPI_INT, dest, tag, MPI_COMM_WORLD, request);
    case ready: return MPI_Rsend_init(buf, count, MPI_INT, dest, tag, MPI_COMM_WORLD, request);
    default: return MPI_Bsend_init(buf, count, MPI_INT, dest, tag, MPI_COMM_WORLD, request);
  }
}

/* Each round: the buffer rewritten, both requests started, both completed. */
static void persistent_ring(enum Mode mode, int count, int rounds) {
  int* out = malloc(sizeof(int) * (size_t)(count + 1));
  int* in = malloc(sizeof(int) * (size_t)(count + 1));
  void* attached = NULL;
  if (mode == buffered) {
    int bytes;
    MPI_Pack_size(count, MPI_INT, MPI_COMM_WORLD, &bytes);
    /* Room for every round's message: one may stay until its receiver reads it, rounds later. */
    bytes = rounds * (bytes + MPI_BSEND_OVERHEAD);
    attached = malloc((size_t)bytes);
    MPI_Buffer_attach(attached, bytes);
  }
  MPI_Request requests[2];
  CHECK(MPI_Recv_init(in, count, MPI_INT, prev, 5, MPI_COMM_WORLD, &requests[0]) == MPI_SUCCESS);
  CHECK(init_send(mode, out, count, next, 5, &requests[1]) == MPI_SUCCESS);
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < count; ++i) out[i] = rank * 100000 + round * 100 + i % 97;
    for (int i = 0; i < count; ++i) in[i] = -1;
    if (mode == ready) {
      /* A ready send needs its receive posted: every receive is started before any send. */
      CHECK(MPI_Start(&requests[0]) == MPI_SUCCESS);
      MPI_Barrier(MPI_COMM_WORLD);
      CHECK(MPI_Start(&requests[1]) == MPI_SUCCESS);
    } else {
      const int rc = MPI_Startall(2, requests);
      if (rc != MPI_SUCCESS) fprintf(stderr, "rank %d: mode %d count %d round %d: MPI_Startall: error class %d\n", rank, mode, count, round, error_class(rc));
      CHECK(rc == MPI_SUCCESS);
    }
    MPI_Status statuses[2];
    if (round % 2) {
      CHECK(MPI_Waitall(2, requests, statuses) == MPI_SUCCESS);
    } else {
      int flag = 0;
      while (!flag) CHECK(MPI_Testall(2, requests, &flag, statuses) == MPI_SUCCESS);
    }
    /* Still there, inactive. */
    CHECK(requests[0] != MPI_REQUEST_NULL && requests[1] != MPI_REQUEST_NULL);
    CHECK(statuses[0].MPI_SOURCE == prev && statuses[0].MPI_TAG == 5);
    int got = -1;
    MPI_Get_count(&statuses[0], MPI_INT, &got);
    CHECK(got == count);
    int bad = 0;
    for (int i = 0; i < count; ++i) bad += in[i] != prev * 100000 + round * 100 + i % 97;
    CHECK(bad == 0);
  }
  /* An inactive request: Wait and Test return at once with an empty status. */
  MPI_Status status;
  status.MPI_SOURCE = 1234;
  CHECK(MPI_Wait(&requests[0], &status) == MPI_SUCCESS);
  CHECK(status.MPI_SOURCE == MPI_ANY_SOURCE && status.MPI_TAG == MPI_ANY_TAG);
  CHECK(requests[0] != MPI_REQUEST_NULL);
  int flag = 0;
  CHECK(MPI_Test(&requests[1], &flag, &status) == MPI_SUCCESS);
  CHECK(flag && requests[1] != MPI_REQUEST_NULL);
  int index = 7;
  CHECK(MPI_Waitany(2, requests, &index, &status) == MPI_SUCCESS);
  CHECK(index == MPI_UNDEFINED);
  CHECK(MPI_Request_free(&requests[0]) == MPI_SUCCESS && requests[0] == MPI_REQUEST_NULL);
  CHECK(MPI_Request_free(&requests[1]) == MPI_SUCCESS && requests[1] == MPI_REQUEST_NULL);
  if (mode == buffered) {
    int bytes;
    MPI_Buffer_detach(&attached, &bytes);
    free(attached);
  }
  free(out);
  free(in);
}

/* A started receive freed before its message comes still receives it; a persistent receive cancelled starts again. */
static void persistent_free_and_cancel(void) {
  int word = -1, other = -1;
  MPI_Request r;
  CHECK(MPI_Recv_init(&word, 1, MPI_INT, prev, 9, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
  CHECK(MPI_Start(&r) == MPI_SUCCESS);
  CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
  MPI_Status status;
  CHECK(MPI_Wait(&r, &status) == MPI_SUCCESS);
  int cancelled = 0;
  MPI_Test_cancelled(&status, &cancelled);
  CHECK(cancelled);
  CHECK(r != MPI_REQUEST_NULL);
  MPI_Barrier(MPI_COMM_WORLD);  /* nobody sends before every rank has cancelled */
  /* Started again, it receives. */
  CHECK(MPI_Start(&r) == MPI_SUCCESS);
  const int value = rank + 40;
  MPI_Send(&value, 1, MPI_INT, next, 9, MPI_COMM_WORLD);
  CHECK(MPI_Wait(&r, &status) == MPI_SUCCESS);
  MPI_Test_cancelled(&status, &cancelled);
  CHECK(!cancelled && word == prev + 40);
  /* Freed while active: the message still lands. */
  CHECK(MPI_Start(&r) == MPI_SUCCESS);
  CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
  MPI_Send(&value, 1, MPI_INT, next, 9, MPI_COMM_WORLD);
  MPI_Sendrecv(&value, 1, MPI_INT, next, 10, &other, 1, MPI_INT, prev, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  /* Everything sent before the barrier has been received by the freed request (nothing is left to probe). */
  int flag = 1;
  MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  CHECK(!flag);
}

/* ---- MPI_Request_get_status ---- */

static void get_status(void) {
  int flag = 0, word = -1;
  MPI_Status status;
  MPI_Request null_request = MPI_REQUEST_NULL;
  CHECK(MPI_Request_get_status(null_request, &flag, &status) == MPI_SUCCESS);
  CHECK(flag && status.MPI_SOURCE == MPI_ANY_SOURCE && status.MPI_TAG == MPI_ANY_TAG);

  MPI_Request r;
  MPI_Irecv(&word, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &r);
  CHECK(MPI_Request_get_status(r, &flag, &status) == MPI_SUCCESS);
  CHECK(!flag);
  MPI_Barrier(MPI_COMM_WORLD);
  const int value = rank * 3;
  MPI_Send(&value, 1, MPI_INT, next, 11, MPI_COMM_WORLD);
  flag = 0;
  while (!flag) CHECK(MPI_Request_get_status(r, &flag, &status) == MPI_SUCCESS);
  CHECK(status.MPI_SOURCE == prev && status.MPI_TAG == 11 && word == prev * 3);
  /* The request is still there, and asking again gives the same. */
  CHECK(r != MPI_REQUEST_NULL);
  CHECK(MPI_Request_get_status(r, &flag, &status) == MPI_SUCCESS && flag && status.MPI_SOURCE == prev);
  MPI_Status final;
  CHECK(MPI_Wait(&r, &final) == MPI_SUCCESS);
  CHECK(r == MPI_REQUEST_NULL && final.MPI_SOURCE == prev && final.MPI_TAG == 11);
}

/* ---- MPI_Cancel of sends ---- */

static void cancel_sends(void) {
  /* A synchronous send to this rank, not received yet, can be taken back: nothing arrives. */
  int word = rank, flag = 0;
  MPI_Request r;
  MPI_Status status;
  CHECK(MPI_Issend(&word, 1, MPI_INT, rank, 21, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
  CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
  CHECK(MPI_Wait(&r, &status) == MPI_SUCCESS);
  int cancelled = 0;
  CHECK(MPI_Test_cancelled(&status, &cancelled) == MPI_SUCCESS);
  CHECK(cancelled);
  MPI_Iprobe(rank, 21, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  CHECK(!flag);

  /* To another rank: whatever the answer, the message arrives exactly when it was not cancelled. */
  int big[5000];
  for (int i = 0; i < 5000; ++i) big[i] = rank + i;
  for (int count = 1; count <= 5000; count += 4999) {
    CHECK(MPI_Isend(big, count, MPI_INT, next, 22, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, &status) == MPI_SUCCESS);
    MPI_Test_cancelled(&status, &cancelled);
    int theirs = -1;
    MPI_Sendrecv(&cancelled, 1, MPI_INT, next, 23, &theirs, 1, MPI_INT, prev, 23, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!theirs) {
      int in[5000];
      MPI_Recv(in, count, MPI_INT, prev, 22, MPI_COMM_WORLD, &status);
      CHECK(in[count - 1] == prev + count - 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Iprobe(prev, 22, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    CHECK(!flag);
    /* Not before every rank has probed: prev's next message would be seen here. */
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

/* ---- statuses by hand ---- */

static void statuses(void) {
  MPI_Status s;
  memset(&s, 0, sizeof s);
  int n = -1;
  MPI_Count x = -1;
  CHECK(MPI_Status_set_elements(&s, MPI_INT, 5) == MPI_SUCCESS);
  CHECK(MPI_Get_count(&s, MPI_INT, &n) == MPI_SUCCESS && n == 5);
  CHECK(MPI_Get_elements(&s, MPI_INT, &n) == MPI_SUCCESS && n == 5);
  CHECK(MPI_Get_elements_x(&s, MPI_INT, &x) == MPI_SUCCESS && x == 5);
  CHECK(MPI_Get_count(&s, MPI_DOUBLE, &n) == MPI_SUCCESS && n == MPI_UNDEFINED);

  /* Elements of a derived type: 3 ints are one and a half pairs. */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  CHECK(MPI_Status_set_elements(&s, MPI_INT, 3) == MPI_SUCCESS);
  CHECK(MPI_Get_count(&s, pair, &n) == MPI_SUCCESS && n == MPI_UNDEFINED);
  CHECK(MPI_Get_elements_x(&s, pair, &x) == MPI_SUCCESS && x == 3);
  CHECK(MPI_Status_set_elements(&s, pair, 4) == MPI_SUCCESS);
  CHECK(MPI_Get_elements_x(&s, MPI_INT, &x) == MPI_SUCCESS && x == 8);
  CHECK(MPI_Get_count(&s, pair, &n) == MPI_SUCCESS && n == 4);
  MPI_Type_free(&pair);

  /* Beyond an int: the _x calls carry it, the int ones say MPI_UNDEFINED. */
  const MPI_Count huge = (MPI_Count)3 << 30;
  CHECK(MPI_Status_set_elements_x(&s, MPI_CHAR, huge) == MPI_SUCCESS);
  CHECK(MPI_Get_elements_x(&s, MPI_CHAR, &x) == MPI_SUCCESS && x == huge);
  CHECK(MPI_Get_elements(&s, MPI_CHAR, &n) == MPI_SUCCESS && n == MPI_UNDEFINED);
  CHECK(MPI_Get_count(&s, MPI_CHAR, &n) == MPI_SUCCESS && n == MPI_UNDEFINED);

  int flag = -1;
  CHECK(MPI_Status_set_cancelled(&s, 1) == MPI_SUCCESS);
  CHECK(MPI_Test_cancelled(&s, &flag) == MPI_SUCCESS && flag == 1);
  CHECK(MPI_Status_set_cancelled(&s, 0) == MPI_SUCCESS);
  CHECK(MPI_Test_cancelled(&s, &flag) == MPI_SUCCESS && flag == 0);

  CHECK(error_class(MPI_Status_set_elements(&s, MPI_INT, -1)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Status_set_elements_x(&s, MPI_INT, -1)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Status_set_elements(&s, MPI_DATATYPE_NULL, 1)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Status_set_elements(NULL, MPI_INT, 1)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Status_set_cancelled(NULL, 1)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Get_elements_x(&s, MPI_DATATYPE_NULL, &x)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Get_elements_x(&s, MPI_INT, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Test_cancelled(NULL, &flag)) == MPI_ERR_ARG);
}

/* ---- generalized requests ---- */

typedef struct {
  int queries, frees, cancels, last_cancel_complete;
  int query_error;
  int cancelled;
} Calls;

static int query(void* extra_state, MPI_Status* status) {
  Calls* c = extra_state;
  ++c->queries;
  MPI_Status_set_elements(status, MPI_INT, 6);
  MPI_Status_set_cancelled(status, c->cancelled);
  status->MPI_SOURCE = 42;
  status->MPI_TAG = 43;
  return c->query_error;
}
static int free_state(void* extra_state) {
  ++((Calls*)extra_state)->frees;
  return MPI_SUCCESS;
}
static int cancel_op(void* extra_state, int complete) {
  Calls* c = extra_state;
  ++c->cancels;
  c->last_cancel_complete = complete;
  if (!complete) c->cancelled = 1;
  return MPI_SUCCESS;
}

static void generalized(void) {
  Calls c = {0};
  MPI_Request r;
  CHECK(MPI_Grequest_start(query, free_state, cancel_op, &c, &r) == MPI_SUCCESS);
  int flag = 1;
  CHECK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag);
  CHECK(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag);
  CHECK(c.queries == 0 && c.frees == 0);
  CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS);
  MPI_Status status;
  /* get_status asks query_fn but frees nothing. */
  CHECK(MPI_Request_get_status(r, &flag, &status) == MPI_SUCCESS && flag);
  CHECK(c.queries == 1 && c.frees == 0 && status.MPI_SOURCE == 42);
  CHECK(MPI_Wait(&r, &status) == MPI_SUCCESS);
  CHECK(r == MPI_REQUEST_NULL && c.queries == 2 && c.frees == 1 && c.cancels == 0);
  int n = -1;
  MPI_Get_count(&status, MPI_INT, &n);
  CHECK(status.MPI_SOURCE == 42 && status.MPI_TAG == 43 && n == 6);
  /* query_fn is called even when the status is ignored. */
  Calls d = {0};
  MPI_Grequest_start(query, free_state, cancel_op, &d, &r);
  MPI_Grequest_complete(r);
  CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS && d.queries == 1 && d.frees == 1);

  /* Cancelled before it completes: cancel_fn is told so; the status says cancelled. */
  Calls e = {0};
  MPI_Grequest_start(query, free_state, cancel_op, &e, &r);
  CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
  CHECK(e.cancels == 1 && e.last_cancel_complete == 0);
  MPI_Grequest_complete(r);
  CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
  CHECK(e.cancels == 2 && e.last_cancel_complete == 1);
  CHECK(MPI_Wait(&r, &status) == MPI_SUCCESS);
  int cancelled = 0;
  MPI_Test_cancelled(&status, &cancelled);
  CHECK(cancelled && e.frees == 1);

  /* query_fn's error is the call's. */
  Calls f = {0};
  f.query_error = MPI_ERR_INTERN;
  MPI_Grequest_start(query, free_state, cancel_op, &f, &r);
  MPI_Grequest_complete(r);
  CHECK(error_class(MPI_Wait(&r, &status)) == MPI_ERR_INTERN);
  CHECK(r == MPI_REQUEST_NULL && f.frees == 1);
  /* In Waitall it is the status's MPI_ERROR. */
  Calls g = {0}, h = {0};
  g.query_error = MPI_ERR_INTERN;
  MPI_Request two[2];
  MPI_Grequest_start(query, free_state, cancel_op, &g, &two[0]);
  MPI_Grequest_start(query, free_state, cancel_op, &h, &two[1]);
  MPI_Grequest_complete(two[1]);
  MPI_Grequest_complete(two[0]);
  MPI_Status both[2];
  CHECK(error_class(MPI_Waitall(2, two, both)) == MPI_ERR_IN_STATUS);
  CHECK(both[0].MPI_ERROR == MPI_ERR_INTERN && both[1].MPI_ERROR == MPI_SUCCESS);
  CHECK(g.frees == 1 && h.frees == 1);

  /* Freed before it completes: free_fn runs at once, never query_fn; completing it later is still allowed. */
  Calls k = {0};
  MPI_Grequest_start(query, free_state, cancel_op, &k, &r);
  MPI_Request handle = r;
  CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
  CHECK(k.frees == 1 && k.queries == 0);
  CHECK(MPI_Grequest_complete(handle) == MPI_SUCCESS);
  CHECK(k.frees == 1 && k.queries == 0);

  /* Bad arguments. */
  CHECK(error_class(MPI_Grequest_start(query, free_state, cancel_op, &c, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Grequest_complete(MPI_REQUEST_NULL)) == MPI_ERR_REQUEST);
  MPI_Request plain;
  int word = 0;
  MPI_Isend(&word, 1, MPI_INT, rank, 30, MPI_COMM_WORLD, &plain);
  CHECK(error_class(MPI_Grequest_complete(plain)) == MPI_ERR_REQUEST);
  MPI_Recv(&word, 1, MPI_INT, rank, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&plain, MPI_STATUS_IGNORE);
}

/* ---- bad arguments to the persistent calls ---- */

static void bad_arguments(void) {
  int buf[4] = {0};
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Comm w = MPI_COMM_WORLD;
  CHECK(error_class(MPI_Send_init(buf, -1, MPI_INT, next, 0, w, &r)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Ssend_init(buf, 1, MPI_INT, size, 0, w, &r)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Rsend_init(buf, 1, MPI_INT, next, -3, w, &r)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Bsend_init(buf, 1, MPI_DATATYPE_NULL, next, 0, w, &r)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Send_init(buf, 1, MPI_INT, next, 0, MPI_COMM_NULL, &r)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Send_init(buf, 1, MPI_INT, next, 0, w, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Send_init(NULL, 1, MPI_INT, next, 0, w, &r)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Recv_init(buf, 1, MPI_INT, -7, 0, w, &r)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Recv_init(buf, 1, MPI_INT, prev, -7, w, &r)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Recv_init(buf, -1, MPI_INT, prev, 0, w, &r)) == MPI_ERR_COUNT);

  CHECK(error_class(MPI_Start(NULL)) == MPI_ERR_ARG);
  r = MPI_REQUEST_NULL;
  CHECK(error_class(MPI_Start(&r)) == MPI_ERR_REQUEST);
  CHECK(error_class(MPI_Startall(-1, &r)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Startall(1, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Startall(1, &r)) == MPI_ERR_REQUEST);
  CHECK(MPI_Startall(0, NULL) == MPI_SUCCESS);
  /* A request that is not persistent cannot be started. */
  MPI_Request plain;
  MPI_Irecv(buf, 1, MPI_INT, rank, 31, w, &plain);
  CHECK(error_class(MPI_Start(&plain)) == MPI_ERR_REQUEST);
  /* Nor can an active one be started again. */
  MPI_Request p;
  CHECK(MPI_Send_init(buf, 1, MPI_INT, rank, 31, w, &p) == MPI_SUCCESS);
  CHECK(MPI_Start(&p) == MPI_SUCCESS);
  CHECK(error_class(MPI_Start(&p)) == MPI_ERR_REQUEST);
  MPI_Wait(&plain, MPI_STATUS_IGNORE);
  MPI_Wait(&p, MPI_STATUS_IGNORE);
  MPI_Request_free(&p);
  int flag;
  CHECK(error_class(MPI_Request_get_status(MPI_REQUEST_NULL, NULL, MPI_STATUS_IGNORE)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Request_get_status((MPI_Request)buf, &flag, MPI_STATUS_IGNORE)) == MPI_ERR_REQUEST);
  r = MPI_REQUEST_NULL;
  CHECK(error_class(MPI_Cancel(&r)) == MPI_ERR_REQUEST);
  CHECK(error_class(MPI_Request_free(&r)) == MPI_ERR_REQUEST);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  next = (rank + 1) % size;
  prev = (rank + size - 1) % size;

  for (int mode = 0; mode < modes; ++mode) {
    persistent_ring((enum Mode)mode, 3, 200);
    persistent_ring((enum Mode)mode, 6000, 20);  /* above the eager limit */
    persistent_ring((enum Mode)mode, 0, 3);
  }
  persistent_free_and_cancel();
  get_status();
  cancel_sends();
  statuses();
  generalized();
  bad_arguments();
  return finish("requests_test");
}
