/* Point-to-point semantics: ordering, wildcards, sizes across the eager /
 * rendezvous threshold (0 bytes included), truncation, PROC_NULL, self
 * sends, probe, non-blocking completion calls, cancel, derived datatypes,
 * buffered sends, many messages that arrive before their receives, what
 * the eager way's short cuts step around, and a large message whose sender
 * is away from MPI. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static int rank, size;

static unsigned char pattern(size_t i, int seed) { return (unsigned char)(i * 7 + seed * 13 + (i >> 9)); }

static void ordering(void) {
  if (size < 2) return;
  enum { n = 200 };
  if (rank == 0) {
    for (int i = 0; i < n; ++i) MPI_Send(&i, 1, MPI_INT, 1, i % 3, MPI_COMM_WORLD);
  } else if (rank == 1) {
    for (int i = 0; i < n; ++i) {
      int v = -1;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      CHECK(v == i);
      CHECK(st.MPI_TAG == i % 3 && st.MPI_SOURCE == 0);
    }
  }
  /* A specific tag overtakes earlier messages with other tags. */
  if (rank == 0) {
    int a = 1, b = 2;
    MPI_Send(&a, 1, MPI_INT, 1, 10, MPI_COMM_WORLD);
    MPI_Send(&b, 1, MPI_INT, 1, 11, MPI_COMM_WORLD);
  } else if (rank == 1) {
    int a = 0, b = 0;
    MPI_Recv(&b, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&a, 1, MPI_INT, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(a == 1 && b == 2);
  }
}

static void any_source(void) {
  if (rank == 0) {
    int seen = 0;
    for (int i = 1; i < size; ++i) {
      int v;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
      CHECK(v == st.MPI_SOURCE * 100);
      seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == ((1 << size) - 2));
  } else {
    int v = rank * 100;
    MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
  }
}

static void sizes(void) {
  const size_t list[] = {0, 1, 100, 16383, 16384, 16385, 65536, 1 << 20, (4 << 20) + 3};
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  unsigned char* out = malloc((4 << 20) + 3);
  unsigned char* in = malloc((4 << 20) + 3);
  for (size_t k = 0; k < sizeof list / sizeof list[0]; ++k) {
    const size_t n = list[k];
    for (size_t i = 0; i < n; ++i) out[i] = pattern(i, rank);
    memset(in, 0, n);
    MPI_Status st;
    MPI_Sendrecv(out, (int)n, MPI_BYTE, next, 3, in, (int)n, MPI_BYTE, prev, 3, MPI_COMM_WORLD, &st);
    int count = -1;
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(count == (int)n);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; ++i)
      if (in[i] != pattern(i, prev)) bad = i;
    CHECK(bad == n);
    /* Synchronous mode too. */
    MPI_Request r;
    MPI_Irecv(in, (int)n, MPI_BYTE, prev, 4, MPI_COMM_WORLD, &r);
    MPI_Ssend(out, (int)n, MPI_BYTE, next, 4, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(n == 0 || in[n - 1] == pattern(n - 1, prev));
  }
  free(out);
  free(in);
}

static void truncation(void) {
  if (size < 2) return;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int lengths[] = {100, 100000};
  for (int k = 0; k < 2; ++k) {
    const int n = lengths[k];
    int* buf = calloc((size_t)n, sizeof(int));
    if (rank == 0) {
      MPI_Send(buf, n, MPI_INT, 1, 20, MPI_COMM_WORLD);
    } else if (rank == 1) {
      MPI_Status st;
      int rc = MPI_Recv(buf, 10, MPI_INT, 0, 20, MPI_COMM_WORLD, &st);
      int cls = -1;
      MPI_Error_class(rc, &cls);
      CHECK(cls == MPI_ERR_TRUNCATE);
    }
    free(buf);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void proc_null_and_self(void) {
  int v = 5;
  MPI_Status st;
  CHECK(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && v == 5);
  int count = -1;
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(count == 0);

  /* To self: large, synchronous, and unexpected before the receive. */
  const int n = 300000;
  int* out = malloc(n * sizeof(int));
  int* in = calloc(n, sizeof(int));
  for (int i = 0; i < n; ++i) out[i] = i ^ rank;
  MPI_Request r;
  MPI_Isend(out, n, MPI_INT, rank, 9, MPI_COMM_WORLD, &r);
  MPI_Recv(in, n, MPI_INT, rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  CHECK(in[n - 1] == ((n - 1) ^ rank));
  MPI_Issend(out, 1, MPI_INT, rank, 10, MPI_COMM_WORLD, &r);
  int flag = 1;
  MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  CHECK(!flag); /* synchronous: not before the receive matched */
  MPI_Recv(in, 1, MPI_INT, rank, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  CHECK(r == MPI_REQUEST_NULL);
  free(out);
  free(in);
}

static void probe_and_nonblocking(void) {
  if (size < 2) return;
  if (rank == 0) {
    double d[37];
    for (int i = 0; i < 37; ++i) d[i] = i * 0.5;
    MPI_Send(d, 37, MPI_DOUBLE, 1, 30, MPI_COMM_WORLD);
    int vals[4] = {1, 2, 3, 4};
    MPI_Request rs[4];
    for (int i = 0; i < 4; ++i) MPI_Isend(&vals[i], 1, MPI_INT, 1, 40 + i, MPI_COMM_WORLD, &rs[i]);
    MPI_Waitall(4, rs, MPI_STATUSES_IGNORE);
  } else if (rank == 1) {
    MPI_Status st;
    MPI_Probe(0, 30, MPI_COMM_WORLD, &st);
    int count;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(count == 37);
    double* d = malloc(count * sizeof(double));
    MPI_Recv(d, count, MPI_DOUBLE, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(d[36] == 18.0);
    free(d);

    int got[4] = {0};
    MPI_Request rs[4];
    for (int i = 3; i >= 0; --i) MPI_Irecv(&got[i], 1, MPI_INT, 0, 40 + i, MPI_COMM_WORLD, &rs[i]);
    int index, done = 0;
    MPI_Waitany(4, rs, &index, MPI_STATUS_IGNORE);
    CHECK(index >= 0 && index < 4 && rs[index] == MPI_REQUEST_NULL);
    ++done;
    while (done < 4) {
      int outcount, indices[4];
      MPI_Status sts[4];
      MPI_Waitsome(4, rs, &outcount, indices, sts);
      CHECK(outcount >= 1);
      for (int k = 0; k < outcount; ++k) CHECK(sts[k].MPI_TAG == 40 + indices[k]);
      done += outcount;
    }
    CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3 && got[3] == 4);
    int flag = 0;
    MPI_Testall(4, rs, &flag, MPI_STATUSES_IGNORE);
    CHECK(flag);
  }
  /* A receive that never matches can be cancelled. */
  MPI_Request r;
  int v;
  MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r);
  MPI_Cancel(&r);
  MPI_Status st;
  MPI_Wait(&r, &st);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  CHECK(cancelled);
}

static void derived(void) {
  /* A column of a 6x5 matrix (vector), and a struct {int; double}. */
  enum { rows = 6, cols = 5 };
  MPI_Datatype column, pair;
  MPI_Type_vector(rows, 1, cols, MPI_INT, &column);
  MPI_Type_commit(&column);
  int size_bytes;
  MPI_Type_size(column, &size_bytes);
  CHECK(size_bytes == rows * (int)sizeof(int));
  struct item { int a; double b; };
  int lens[2] = {1, 1};
  MPI_Aint displs[2] = {offsetof(struct item, a), offsetof(struct item, b)};
  MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, lens, displs, types, &pair);
  MPI_Type_commit(&pair);
  MPI_Aint lb, extent;
  MPI_Type_get_extent(pair, &lb, &extent);
  CHECK(lb == 0 && extent == sizeof(struct item));

  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int m[rows][cols], got[rows][cols];
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m[r][c] = 100 * r + c + rank, got[r][c] = -1;
  MPI_Sendrecv(&m[0][2], 1, column, next, 50, &got[0][3], 1, column, prev, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int r = 0; r < rows; ++r) {
    CHECK(got[r][3] == 100 * r + 2 + prev);
    CHECK(got[r][2] == -1);
  }
  struct item items[3] = {{1, 1.5}, {2, 2.5}, {3, 3.5}}, back[3];
  memset(back, 0, sizeof back);
  MPI_Sendrecv(items, 3, pair, next, 51, back, 3, pair, prev, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(back[2].a == 3 && back[2].b == 3.5);
  MPI_Type_free(&column);
  MPI_Type_free(&pair);
  CHECK(column == MPI_DATATYPE_NULL);
}

/* Buffered sends larger than the eager limit return before the receiver has
 * posted its receive; a full buffer gives MPI_ERR_BUFFER; detaching waits
 * until they have gone and gives the buffer back. */
static void buffered(void) {
  if (size < 2) return;
  enum { n = 100000 };
  int packed = 0;
  MPI_Pack_size(n, MPI_INT, MPI_COMM_WORLD, &packed);
  CHECK(packed == n * (int)sizeof(int));
  if (rank == 0) {
    const int bytes = 2 * (packed + MPI_BSEND_OVERHEAD);
    char* attached = malloc(bytes);
    int* data = malloc(n * sizeof(int));
    MPI_Buffer_attach(attached, bytes);
    for (int i = 0; i < n; ++i) data[i] = i * 3;
    MPI_Bsend(data, n, MPI_INT, 1, 60, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) data[i] = i * 3 + 1;
    MPI_Request r;
    MPI_Ibsend(data, n, MPI_INT, 1, 61, MPI_COMM_WORLD, &r);
    int flag = 0;
    MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    CHECK(flag); /* complete once the message is in the buffer */
    memset(data, 0, n * sizeof(int));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int cls = -1;
    MPI_Error_class(MPI_Bsend(data, 1, MPI_INT, 1, 62, MPI_COMM_WORLD), &cls);
    CHECK(cls == MPI_ERR_BUFFER); /* both messages still wait for rank 1 */
    int go = 1;
    MPI_Send(&go, 1, MPI_INT, 1, 63, MPI_COMM_WORLD);
    void* back = NULL;
    int back_bytes = 0;
    MPI_Buffer_detach(&back, &back_bytes);
    CHECK(back == attached && back_bytes == bytes);
    cls = -1;
    MPI_Error_class(MPI_Bsend(data, 1, MPI_INT, 1, 62, MPI_COMM_WORLD), &cls);
    CHECK(cls == MPI_ERR_BUFFER); /* nothing attached */
    CHECK(MPI_Bsend(data, 1, MPI_INT, MPI_PROC_NULL, 62, MPI_COMM_WORLD) == MPI_SUCCESS);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    free(attached);
    free(data);
  } else if (rank == 1) {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, 0, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int* got = malloc(n * sizeof(int));
    for (int k = 0; k < 2; ++k) {
      MPI_Recv(got, n, MPI_INT, 0, 60 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      int bad = 0;
      for (int i = 0; i < n; ++i) bad |= got[i] != i * 3 + k;
      CHECK(!bad);
    }
    free(got);
  }
  /* A strided type is packed into the buffer; this one stays attached until MPI_Finalize delivers it. */
  if (rank < 2) {
    static char small[10 * sizeof(int) + MPI_BSEND_OVERHEAD];
    MPI_Buffer_attach(small, sizeof small);
    MPI_Datatype every_other;
    MPI_Type_vector(10, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int strided[20], got[10];
    for (int i = 0; i < 20; ++i) strided[i] = i + rank;
    MPI_Bsend(strided, 1, every_other, 1 - rank, 64, MPI_COMM_WORLD);
    MPI_Recv(got, 10, MPI_INT, 1 - rank, 64, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 10; ++i) CHECK(got[i] == 2 * i + 1 - rank);
    MPI_Type_free(&every_other);
  }
}

/* Many messages that arrive before their receives, taken out of order, in two
 * rounds of different sizes, from a peer and from this rank itself: the
 * unexpected queue keeps delivered entries and their buffers for later
 * messages, and each later message must still get exactly its own bytes. */
static void unexpected_reuse(void) {
  enum { n = 150, most = 3000 };
  const int peer = (rank ^ 1) < size ? rank ^ 1 : rank; /* in pairs; the last rank of an odd count with itself */
  unsigned char* out = malloc((size_t)n * most);
  unsigned char* in = malloc(most);
  MPI_Request requests[n];
  for (int round = 0; round < 2; ++round) {
    for (int pass = 0; pass < 2; ++pass) { /* pass 0: with the peer, pass 1: with this rank */
      const int to = pass == 0 ? peer : rank;
      for (int i = 0; i < n; ++i) {
        const size_t bytes = round == 0 ? (size_t)(i * 37 % most) : (size_t)((n - i) * 53 % most);
        for (size_t b = 0; b < bytes; ++b) out[(size_t)i * most + b] = pattern(b, i + round * n + pass);
        MPI_Isend(out + (size_t)i * most, (int)bytes, MPI_BYTE, to, i, MPI_COMM_WORLD, &requests[i]);
      }
      /* Messages from one sender arrive in order: once the last is here, all are. */
      MPI_Status st;
      MPI_Probe(to, n - 1, MPI_COMM_WORLD, &st);
      for (int k = 0; k < n; ++k) {
        const int i = round == 0 ? n - 1 - k : (k * 7) % n; /* backwards, then scattered (7 and 150 coprime) */
        const size_t bytes = round == 0 ? (size_t)(i * 37 % most) : (size_t)((n - i) * 53 % most);
        memset(in, 0xEE, most);
        MPI_Recv(in, most, MPI_BYTE, to, i, MPI_COMM_WORLD, &st);
        int count = -1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK(count == (int)bytes);
        int good = 1;
        for (size_t b = 0; b < bytes; ++b) good &= in[b] == pattern(b, i + round * n + pass);
        for (size_t b = bytes; b < most; ++b) good &= in[b] == 0xEE;
        CHECK(good);
      }
      MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    }
  }
  free(out);
  free(in);
}

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* What the eager way's short cuts step around (issue 25): MPI_PROC_NULL and
 * the argument errors of the non-blocking calls; receives posted before their
 * message arrives, with wildcards, both tag bounds and a truncation; messages
 * that wait unmatched while other receives are posted, and a truncated one
 * among them; Waitall over more requests than it keeps on the stack, with
 * MPI_REQUEST_NULL among them. */
static void eager_short_cuts(void) {
  int* tag_ub = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  CHECK(flag);
  const int top_tag = *tag_ub;

  /* MPI_PROC_NULL: complete at once; the receive's status is the empty one of MPI_PROC_NULL. */
  int v = 3;
  MPI_Request two[2];
  MPI_Status two_st[2];
  CHECK(MPI_Irecv(&v, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &two[0]) == MPI_SUCCESS);
  CHECK(MPI_Isend(&v, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &two[1]) == MPI_SUCCESS);
  CHECK(MPI_Waitall(2, two, two_st) == MPI_SUCCESS);
  CHECK(two[0] == MPI_REQUEST_NULL && two[1] == MPI_REQUEST_NULL && v == 3);
  CHECK(two_st[0].MPI_SOURCE == MPI_PROC_NULL && two_st[0].MPI_TAG == MPI_ANY_TAG);
  int count = -1;
  MPI_Get_count(&two_st[0], MPI_INT, &count);
  CHECK(count == 0);

  /* Bad arguments: an error, and nothing sent or posted. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Request bad = MPI_REQUEST_NULL;
  CHECK(error_class(MPI_Isend(&v, 1, MPI_INT, 0, -1, MPI_COMM_WORLD, &bad)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Irecv(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD, &bad)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Isend(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &bad)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Irecv(&v, 1, MPI_INT, -7, 0, MPI_COMM_WORLD, &bad)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Send(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Isend(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, &bad)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Irecv(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &bad)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Isend(&v, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD, &bad)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Irecv(&v, 1, MPI_INT, 0, 0, MPI_COMM_NULL, &bad)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Isend(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, NULL)) == MPI_ERR_ARG);
  CHECK(bad == MPI_REQUEST_NULL);

  if (size >= 2 && rank < 2) {
    /* Posted before arrival: rank 1 posts, then tells rank 0 to send. */
    if (rank == 1) {
      int a = 0, b = 0, c = 0, small[2] = {0, 0};
      MPI_Request rq[4];
      MPI_Status st[4];
      MPI_Irecv(&a, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &rq[0]);
      MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, top_tag, MPI_COMM_WORLD, &rq[1]);
      MPI_Irecv(&c, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[2]);
      MPI_Irecv(small, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[3]);
      MPI_Send(NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
      CHECK(error_class(MPI_Waitall(4, rq, st)) == MPI_ERR_IN_STATUS);
      CHECK(a == 11 && st[0].MPI_TAG == 0 && st[0].MPI_SOURCE == 0 && st[0].MPI_ERROR == MPI_SUCCESS);
      CHECK(b == 22 && st[1].MPI_TAG == top_tag && st[1].MPI_SOURCE == 0 && st[1].MPI_ERROR == MPI_SUCCESS);
      CHECK(c == 33 && st[2].MPI_TAG == 7 && st[2].MPI_ERROR == MPI_SUCCESS);
      CHECK(st[3].MPI_TAG == 8 && st[3].MPI_SOURCE == 0 && st[3].MPI_ERROR == MPI_ERR_TRUNCATE);
      CHECK(small[0] == 44 && small[1] == 45);
    } else {
      int a = 11, b = 22, c = 33, d[3] = {44, 45, 46};
      MPI_Recv(NULL, 0, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
      MPI_Send(&b, 1, MPI_INT, 1, top_tag, MPI_COMM_WORLD);
      MPI_Send(&c, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
      MPI_Send(d, 3, MPI_INT, 1, 8, MPI_COMM_WORLD);
    }

    /* Unexpected: once rank 1 has rank 0's tag-4 message, the four sent before
     * it wait unmatched; a receive posted then that matches none of them waits
     * for a later message. */
    if (rank == 0) {
      int x = 1, y = 2, z = 3, t[3] = {5, 6, 7}, w = 4;
      MPI_Send(&x, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
      MPI_Send(&y, 1, MPI_INT, 1, top_tag, MPI_COMM_WORLD);
      MPI_Send(&z, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
      MPI_Send(t, 3, MPI_INT, 1, 9, MPI_COMM_WORLD);
      MPI_Send(NULL, 0, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
      MPI_Recv(NULL, 0, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&w, 1, MPI_INT, 1, 6, MPI_COMM_WORLD);
    } else {
      int x = 0, y = 0, z = 0, t = 0, w = 0;
      MPI_Status st;
      MPI_Recv(NULL, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Request late;
      MPI_Irecv(&w, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, &late);
      int done = 1;
      MPI_Test(&late, &done, MPI_STATUS_IGNORE);
      CHECK(!done);
      MPI_Recv(&y, 1, MPI_INT, MPI_ANY_SOURCE, top_tag, MPI_COMM_WORLD, &st);
      CHECK(y == 2 && st.MPI_TAG == top_tag && st.MPI_SOURCE == 0);
      MPI_Recv(&z, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &st);
      CHECK(z == 3 && st.MPI_TAG == 3);
      CHECK(error_class(MPI_Recv(&t, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &st)) == MPI_ERR_TRUNCATE);
      CHECK(t == 5 && st.MPI_TAG == 9);
      MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      CHECK(x == 1 && st.MPI_TAG == 2 && st.MPI_SOURCE == 0);
      MPI_Test(&late, &done, MPI_STATUS_IGNORE);
      CHECK(!done && w == 0);
      MPI_Send(NULL, 0, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
      MPI_Wait(&late, &st);
      CHECK(w == 4 && st.MPI_TAG == 6 && st.MPI_SOURCE == 0);
    }

    /* More requests than Waitall keeps on the stack, every tenth MPI_REQUEST_NULL. */
    enum { many = 150 };
    MPI_Request rq[many];
    MPI_Status st[many];
    int values[many];
    for (int i = 0; i < many; ++i) {
      values[i] = rank == 0 ? i * 3 : -1;
      if (i % 10 == 9)
        rq[i] = MPI_REQUEST_NULL;
      else if (rank == 1)
        MPI_Irecv(&values[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD, &rq[i]);
      else
        MPI_Isend(&values[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &rq[i]);
    }
    CHECK(MPI_Waitall(many, rq, st) == MPI_SUCCESS);
    int good = 1;
    for (int i = 0; i < many; ++i) {
      good &= rq[i] == MPI_REQUEST_NULL;
      if (i % 10 == 9)
        good &= st[i].MPI_SOURCE == MPI_ANY_SOURCE && st[i].MPI_TAG == MPI_ANY_TAG && st[i].MPI_ERROR == MPI_SUCCESS;
      else if (rank == 1)
        good &= values[i] == i * 3 && st[i].MPI_TAG == i && st[i].MPI_SOURCE == 0 && st[i].MPI_ERROR == MPI_SUCCESS;
    }
    CHECK(good);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* A large message whose sender leaves MPI between MPI_Isend and MPI_Wait (to
 * compute, here to sleep) arrives at its receiver without waiting for the
 * sender to come back: over shared memory the receiver copies what the
 * sender's engine has not sent by single copy once that engine has been
 * silent for a moment (VIASTACK_READ_TAKEOVER_US). The sender leaves at once
 * (its engine never sees the read), or after polling for 100 us (it has
 * begun to send a 4 MiB message through the rings, and stops part-way).
 * Over tcp, or without CMA, the sender must serve it. */
static void rendezvous_while_the_sender_is_away(void) {
  const double away = 1.0;
  const struct { int bytes; double polls_us; } cases[] = {{256 * 1024, 0}, {4 << 20, 100}};
  for (int c = 0; c < 2; ++c) {
    const int n = cases[c].bytes;
    MPI_Barrier(MPI_COMM_WORLD);
    if (size < 2 || rank > 1) continue;
    unsigned char* buf = malloc(n);
    if (rank == 0) {
      for (int i = 0; i < n; ++i) buf[i] = (unsigned char)(i * 7 + c);
      const struct timespec posted = {0, 2000000}; /* the receive is posted by then */
      nanosleep(&posted, NULL);
      MPI_Request request;
      MPI_Isend(buf, n, MPI_BYTE, 1, 77, MPI_COMM_WORLD, &request);
      int done = 0;
      for (const double start = MPI_Wtime(); !done && MPI_Wtime() - start < cases[c].polls_us * 1e-6;)
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      const struct timespec pause = {(time_t)away, 0};
      nanosleep(&pause, NULL);
      if (!done) MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
      memset(buf, 0, n);
      const double start = MPI_Wtime();
      MPI_Recv(buf, n, MPI_BYTE, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double took = MPI_Wtime() - start;
      int good = 1;
      for (int i = 0; i < n; ++i) good &= buf[i] == (unsigned char)(i * 7 + c);
      CHECK(good);
      const char* provider = getenv("VIASTACK_PROVIDER");
      const char* cma = getenv("VIASTACK_SHM_CMA");
      if ((!provider || strcmp(provider, "tcp") != 0) && !(cma && strcmp(cma, "0") == 0)) {
        if (took >= away / 2)
          fprintf(stderr, "rank 1: %d B took %.3f s, its sender away for %.1f s\n", n, took, away);
        CHECK(took < away / 2);
      }
    }
    free(buf);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ordering();
  any_source();
  sizes();
  truncation();
  proc_null_and_self();
  probe_and_nonblocking();
  derived();
  buffered();
  unexpected_reuse();
  eager_short_cuts();
  rendezvous_while_the_sender_is_away();
  return finish("p2p_test");
}
