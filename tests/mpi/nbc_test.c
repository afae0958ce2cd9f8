/* Non-blocking collectives (MPI-3.1 5.12) against the blocking ones: every
 * MPI_I... collective, its MPI_IN_PLACE forms and the non-blocking
 * neighbourhood collectives give byte for byte what the blocking call gives,
 * on counts below and above the eager limit; all of them outstanding at once
 * on one communicator with point-to-point traffic in between, completed by
 * MPI_Waitall in reverse order; completed by MPI_Test loops; progressing
 * inside other calls (a blocking receive, MPI_Iprobe, a synchronous send,
 * MPI_Wait on another request) while the rank that started them never waits
 * for them; bad arguments returning their error class under MPI_ERRORS_RETURN. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* ---- one collective, called blocking or non-blocking into its own buffers ---- */

enum Which {
  barrier, bcast, reduce, allreduce, gather, gatherv, scatter, scatterv, allgather, allgatherv, alltoall, alltoallv,
  alltoallw, reduce_scatter, reduce_scatter_block, scan, exscan, allreduce_user_op, allreduce_sum,
  /* MPI_IN_PLACE */
  allreduce_ip, reduce_ip, gather_ip, gatherv_ip, scatter_ip, scatterv_ip, allgather_ip, allgatherv_ip, alltoall_ip,
  alltoallv_ip, reduce_scatter_ip, reduce_scatter_block_ip, scan_ip, exscan_ip,
  /* over a periodic ring (a Cartesian communicator) */
  neighbor_allgather, neighbor_allgatherv, neighbor_alltoall, neighbor_alltoallv, neighbor_alltoallw,
  collective_count
};

typedef struct {
  int* send;
  int* recv;
  size_t ints;  /* of each buffer */
} Buffers;

static int count;  /* elements per rank in this round */
static int counts[64], displs[64];
/* alltoall(v/w): what this rank exchanges with rank j, the same both ways (pair_counts[j] depends on rank + j). */
static int pair_counts[64], pair_displs[64], pair_byte_displs[64];
static MPI_Datatype types[64];
static MPI_Comm ring;  /* 1-D periodic grid over every rank */
static MPI_Op user_op;

/* A non-commutative user operation: inout = in - 2*inout. */
static void subtract_twice(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) b[i] = a[i] - 2 * b[i];
}

/* Per-rank counts that differ (some zero) with gaps between the blocks. */
static void set_layout(void) {
  int at = 0, pair_at = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = r % 3 == 1 ? 0 : count + r;
    displs[r] = at;
    at += counts[r] + 2;
    pair_counts[r] = (rank + r) % 3 == 1 ? 0 : count + rank + r;
    pair_displs[r] = pair_at;
    pair_byte_displs[r] = pair_at * (int)sizeof(int);
    pair_at += pair_counts[r] + 2;
    types[r] = MPI_INT;
  }
}

/* Room for every rank's block, and for the ring's two neighbours' blocks on one rank. */
static size_t buffer_ints(void) { return (size_t)(size < 2 ? 2 : size) * (size_t)(count + 2 * size + 8) + 16; }

static void fill(Buffers* b, int which) {
  for (size_t i = 0; i < b->ints; ++i) {
    b->send[i] = (int)((size_t)rank * 7919 + (size_t)which * 131 + i) % 1000003;
    b->recv[i] = (int)((size_t)rank * 31 + (size_t)which * 17 + i * 3) % 999983;
  }
}

/* request NULL: the blocking call. */
static int run(int which, Buffers* b, MPI_Request* request) {
  const int nb = request != NULL;
  const int root = (which * 5 + 1) % size;
  int* s = b->send;
  int* r = b->recv;
  const int mine = counts[rank];
  MPI_Comm w = MPI_COMM_WORLD;
  switch (which) {
    case barrier: return nb ? MPI_Ibarrier(w, request) : MPI_Barrier(w);
    case bcast: return nb ? MPI_Ibcast(r, count, MPI_INT, root, w, request) : MPI_Bcast(r, count, MPI_INT, root, w);
    case reduce:
      return nb ? MPI_Ireduce(s, r, count, MPI_INT, MPI_SUM, root, w, request)
                : MPI_Reduce(s, r, count, MPI_INT, MPI_SUM, root, w);
    case allreduce:
      return nb ? MPI_Iallreduce(s, r, count, MPI_INT, MPI_MAX, w, request)
                : MPI_Allreduce(s, r, count, MPI_INT, MPI_MAX, w);
    case allreduce_user_op:
      return nb ? MPI_Iallreduce(s, r, count, MPI_INT, user_op, w, request)
                : MPI_Allreduce(s, r, count, MPI_INT, user_op, w);
    case allreduce_sum: /* a fold that counts each rank's part once: halving and doubling, the ring */
      return nb ? MPI_Iallreduce(s, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Allreduce(s, r, count, MPI_INT, MPI_SUM, w);
    case gather:
      return nb ? MPI_Igather(s, count, MPI_INT, r, count, MPI_INT, root, w, request)
                : MPI_Gather(s, count, MPI_INT, r, count, MPI_INT, root, w);
    case gatherv:
      return nb ? MPI_Igatherv(s, mine, MPI_INT, r, counts, displs, MPI_INT, root, w, request)
                : MPI_Gatherv(s, mine, MPI_INT, r, counts, displs, MPI_INT, root, w);
    case scatter:
      return nb ? MPI_Iscatter(s, count, MPI_INT, r, count, MPI_INT, root, w, request)
                : MPI_Scatter(s, count, MPI_INT, r, count, MPI_INT, root, w);
    case scatterv:
      return nb ? MPI_Iscatterv(s, counts, displs, MPI_INT, r, mine, MPI_INT, root, w, request)
                : MPI_Scatterv(s, counts, displs, MPI_INT, r, mine, MPI_INT, root, w);
    case allgather:
      return nb ? MPI_Iallgather(s, count, MPI_INT, r, count, MPI_INT, w, request)
                : MPI_Allgather(s, count, MPI_INT, r, count, MPI_INT, w);
    case allgatherv:
      return nb ? MPI_Iallgatherv(s, mine, MPI_INT, r, counts, displs, MPI_INT, w, request)
                : MPI_Allgatherv(s, mine, MPI_INT, r, counts, displs, MPI_INT, w);
    case alltoall:
      return nb ? MPI_Ialltoall(s, count, MPI_INT, r, count, MPI_INT, w, request)
                : MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, w);
    case alltoallv:
      return nb ? MPI_Ialltoallv(s, pair_counts, pair_displs, MPI_INT, r, pair_counts, pair_displs, MPI_INT, w, request)
                : MPI_Alltoallv(s, pair_counts, pair_displs, MPI_INT, r, pair_counts, pair_displs, MPI_INT, w);
    case alltoallw:
      return nb ? MPI_Ialltoallw(s, pair_counts, pair_byte_displs, types, r, pair_counts, pair_byte_displs, types, w,
                                 request)
                : MPI_Alltoallw(s, pair_counts, pair_byte_displs, types, r, pair_counts, pair_byte_displs, types, w);
    case reduce_scatter:
      return nb ? MPI_Ireduce_scatter(s, r, counts, MPI_INT, MPI_SUM, w, request)
                : MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, w);
    case reduce_scatter_block:
      return nb ? MPI_Ireduce_scatter_block(s, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Reduce_scatter_block(s, r, count, MPI_INT, MPI_SUM, w);
    case scan:
      return nb ? MPI_Iscan(s, r, count, MPI_INT, MPI_SUM, w, request) : MPI_Scan(s, r, count, MPI_INT, MPI_SUM, w);
    case exscan:
      return nb ? MPI_Iexscan(s, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Exscan(s, r, count, MPI_INT, MPI_SUM, w);
    case allreduce_ip:
      return nb ? MPI_Iallreduce(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Allreduce(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w);
    case reduce_ip: {
      const void* in = rank == root ? MPI_IN_PLACE : s;
      return nb ? MPI_Ireduce(in, r, count, MPI_INT, MPI_SUM, root, w, request)
                : MPI_Reduce(in, r, count, MPI_INT, MPI_SUM, root, w);
    }
    case gather_ip: {
      const void* in = rank == root ? MPI_IN_PLACE : s;
      return nb ? MPI_Igather(in, count, MPI_INT, r, count, MPI_INT, root, w, request)
                : MPI_Gather(in, count, MPI_INT, r, count, MPI_INT, root, w);
    }
    case gatherv_ip: {
      const void* in = rank == root ? MPI_IN_PLACE : s;
      return nb ? MPI_Igatherv(in, mine, MPI_INT, r, counts, displs, MPI_INT, root, w, request)
                : MPI_Gatherv(in, mine, MPI_INT, r, counts, displs, MPI_INT, root, w);
    }
    case scatter_ip: {
      void* out = rank == root ? MPI_IN_PLACE : r;
      return nb ? MPI_Iscatter(s, count, MPI_INT, out, count, MPI_INT, root, w, request)
                : MPI_Scatter(s, count, MPI_INT, out, count, MPI_INT, root, w);
    }
    case scatterv_ip: {
      void* out = rank == root ? MPI_IN_PLACE : r;
      return nb ? MPI_Iscatterv(s, counts, displs, MPI_INT, out, mine, MPI_INT, root, w, request)
                : MPI_Scatterv(s, counts, displs, MPI_INT, out, mine, MPI_INT, root, w);
    }
    case allgather_ip:
      return nb ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, count, MPI_INT, w, request)
                : MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, count, MPI_INT, w);
    case allgatherv_ip:
      return nb ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, counts, displs, MPI_INT, w, request)
                : MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, counts, displs, MPI_INT, w);
    case alltoall_ip:
      return nb ? MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, count, MPI_INT, w, request)
                : MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, count, MPI_INT, w);
    case alltoallv_ip:
      return nb ? MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r, pair_counts, pair_displs, MPI_INT, w,
                                 request)
                : MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r, pair_counts, pair_displs, MPI_INT, w);
    case reduce_scatter_ip:
      return nb ? MPI_Ireduce_scatter(MPI_IN_PLACE, r, counts, MPI_INT, MPI_SUM, w, request)
                : MPI_Reduce_scatter(MPI_IN_PLACE, r, counts, MPI_INT, MPI_SUM, w);
    case reduce_scatter_block_ip:
      return nb ? MPI_Ireduce_scatter_block(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Reduce_scatter_block(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w);
    case scan_ip:
      return nb ? MPI_Iscan(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Scan(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w);
    case exscan_ip:
      return nb ? MPI_Iexscan(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w, request)
                : MPI_Exscan(MPI_IN_PLACE, r, count, MPI_INT, MPI_SUM, w);
    /* On the ring every rank has 2 neighbours (the same one twice on 1 or 2 ranks). */
    case neighbor_allgather:
      return nb ? MPI_Ineighbor_allgather(s, count, MPI_INT, r, count, MPI_INT, ring, request)
                : MPI_Neighbor_allgather(s, count, MPI_INT, r, count, MPI_INT, ring);
    case neighbor_allgatherv: {
      const int c[2] = {count, count}, d[2] = {count + 4, 1};
      return nb ? MPI_Ineighbor_allgatherv(s, count, MPI_INT, r, c, d, MPI_INT, ring, request)
                : MPI_Neighbor_allgatherv(s, count, MPI_INT, r, c, d, MPI_INT, ring);
    }
    case neighbor_alltoall:
      return nb ? MPI_Ineighbor_alltoall(s, count, MPI_INT, r, count, MPI_INT, ring, request)
                : MPI_Neighbor_alltoall(s, count, MPI_INT, r, count, MPI_INT, ring);
    case neighbor_alltoallv: {
      /* Blocks of two sizes out; room for the larger one in each block in. */
      const int c[2] = {count, count + 1}, d[2] = {0, count + 3}, rc[2] = {count + 1, count + 1};
      return nb ? MPI_Ineighbor_alltoallv(s, c, d, MPI_INT, r, rc, d, MPI_INT, ring, request)
                : MPI_Neighbor_alltoallv(s, c, d, MPI_INT, r, rc, d, MPI_INT, ring);
    }
    case neighbor_alltoallw: {
      const int c[2] = {count, count};
      const MPI_Aint d[2] = {0, (MPI_Aint)((count + 5) * (int)sizeof(int))};
      const MPI_Datatype t[2] = {MPI_INT, MPI_INT};
      return nb ? MPI_Ineighbor_alltoallw(s, c, d, t, r, c, d, t, ring, request)
                : MPI_Neighbor_alltoallw(s, c, d, t, r, c, d, t, ring);
    }
  }
  return MPI_ERR_OTHER;
}

static Buffers expected[collective_count], got[collective_count];

static void alloc_buffers(Buffers* b) {
  b->ints = buffer_ints();
  b->send = malloc(b->ints * sizeof(int));
  b->recv = malloc(b->ints * sizeof(int));
}

static void free_buffers(Buffers* b) {
  free(b->send);
  free(b->recv);
}

static int same(const Buffers* a, const Buffers* b) {
  return memcmp(a->send, b->send, a->ints * sizeof(int)) == 0 && memcmp(a->recv, b->recv, a->ints * sizeof(int)) == 0;
}

static void compute_expected(void) {
  for (int k = 0; k < collective_count; ++k) {
    alloc_buffers(&expected[k]);
    alloc_buffers(&got[k]);
    fill(&expected[k], k);
    const int rc = run(k, &expected[k], NULL);
    if (rc != MPI_SUCCESS) fprintf(stderr, "rank %d: blocking collective %d (count %d) failed: %d\n", rank, k, count, error_class(rc));
    CHECK(rc == MPI_SUCCESS);
  }
}

/* Each one alone, completed by MPI_Wait. */
static void each_alone(void) {
  for (int k = 0; k < collective_count; ++k) {
    fill(&got[k], k);
    MPI_Request request = MPI_REQUEST_NULL;
    CHECK(run(k, &got[k], &request) == MPI_SUCCESS);
    CHECK(request != MPI_REQUEST_NULL);
    MPI_Status status;
    CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS);
    CHECK(request == MPI_REQUEST_NULL);
    if (!same(&got[k], &expected[k])) {
      fprintf(stderr, "rank %d: collective %d (count %d) differs from the blocking one\n", rank, k, count);
      CHECK(0);
    }
  }
}

/* Each one alone, completed by an MPI_Test loop (and MPI_Request_get_status on the way). */
static void each_tested(void) {
  for (int k = 0; k < collective_count; ++k) {
    fill(&got[k], k);
    MPI_Request request = MPI_REQUEST_NULL;
    CHECK(run(k, &got[k], &request) == MPI_SUCCESS);
    int flag = 0;
    long spins = 0;
    while (!flag) {
      CHECK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      ++spins;
    }
    CHECK(request == MPI_REQUEST_NULL);
    CHECK(same(&got[k], &expected[k]));
  }
}

/* All at once on one communicator, point-to-point messages around a ring
 * posted between them, everything completed by one MPI_Waitall in reverse order. */
static void all_outstanding(void) {
  MPI_Request requests[2 * collective_count + 2];
  int n = 0;
  int token_out[collective_count], token_in[collective_count];
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int k = 0; k < collective_count; ++k) {
    fill(&got[k], k);
    token_out[k] = rank * 1000 + k;
    token_in[k] = -1;
    CHECK(MPI_Irecv(&token_in[k], 1, MPI_INT, prev, k, MPI_COMM_WORLD, &requests[n++]) == MPI_SUCCESS);
    CHECK(run(k, &got[k], &requests[n++]) == MPI_SUCCESS);
    MPI_Send(&token_out[k], 1, MPI_INT, next, k, MPI_COMM_WORLD);
  }
  /* Reverse order. */
  MPI_Request reversed[2 * collective_count + 2];
  for (int i = 0; i < n; ++i) reversed[i] = requests[n - 1 - i];
  MPI_Status statuses[2 * collective_count + 2];
  CHECK(MPI_Waitall(n, reversed, statuses) == MPI_SUCCESS);
  for (int i = 0; i < n; ++i) CHECK(reversed[i] == MPI_REQUEST_NULL);
  for (int k = 0; k < collective_count; ++k) {
    CHECK(token_in[k] == prev * 1000 + k);
    if (!same(&got[k], &expected[k])) {
      fprintf(stderr, "rank %d: collective %d (count %d) outstanding with others differs\n", rank, k, count);
      CHECK(0);
    }
  }
}

/* Rank 0 starts a barrier and never waits for it until the others have
 * finished theirs, which needs rank 0 to take part in every round: its
 * barrier progresses inside whatever other call it makes. With 3 or more
 * ranks a dissemination barrier has a second round that rank 0 sends in
 * only after its first round's message arrived. */
enum Progress { in_recv, in_iprobe, in_ssend, in_wait_other, in_test_other, progress_kinds };

static void progress_elsewhere(void) {
  if (size < 2) return;
  for (int kind = 0; kind < progress_kinds; ++kind) {
    MPI_Request barrier_request, bcast_request;
    int word = 0;
    int big[3000];
    for (int i = 0; i < 3000; ++i) big[i] = rank == 0 ? i * 3 + kind : -1;
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &barrier_request) == MPI_SUCCESS);
    /* A bcast from rank 0 over a binomial tree: with 4 or more ranks the inner ranks forward. */
    CHECK(MPI_Ibcast(big, 3000, MPI_INT, 0, MPI_COMM_WORLD, &bcast_request) == MPI_SUCCESS);
    if (rank == 0) {
      /* Rank 1 says when every other rank has completed both. */
      switch (kind) {
        case in_recv: MPI_Recv(&word, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE); break;
        case in_iprobe: {
          int flag = 0;
          while (!flag) MPI_Iprobe(1, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
          MPI_Recv(&word, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          break;
        }
        case in_ssend: MPI_Ssend(&word, 1, MPI_INT, 1, 78, MPI_COMM_WORLD); break;
        case in_wait_other:
        case in_test_other: {
          MPI_Request r;
          MPI_Irecv(&word, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, &r);
          if (kind == in_wait_other) {
            MPI_Wait(&r, MPI_STATUS_IGNORE);
          } else {
            int flag = 0;
            while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
          }
          break;
        }
      }
      /* The others are done: ours completed inside the call above. */
      int flag = 0;
      CHECK(MPI_Test(&barrier_request, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      CHECK(flag);
      if (!flag) MPI_Wait(&barrier_request, MPI_STATUS_IGNORE);
      MPI_Wait(&bcast_request, MPI_STATUS_IGNORE);
    } else {
      MPI_Wait(&barrier_request, MPI_STATUS_IGNORE);
      MPI_Wait(&bcast_request, MPI_STATUS_IGNORE);
      for (int i = 0; i < 3000; ++i) CHECK(big[i] == i * 3 + kind);
      /* Everyone but rank 0 is done once rank 1 has heard from them. */
      if (rank == 1) {
        for (int r = 2; r < size; ++r) MPI_Recv(&word, 1, MPI_INT, r, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (kind == in_ssend)
          MPI_Recv(&word, 1, MPI_INT, 0, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
          MPI_Send(&word, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
      } else {
        MPI_Send(&word, 1, MPI_INT, 1, 79, MPI_COMM_WORLD);
      }
    }
  }
}

/* An erroneous MPI_Iallgather whose rank 0 sends more than its block (the
 * ring's sizes, 128 KiB blocks): every rank's call still ends, and every
 * well-formed block arrives whole. The ring's first step once sent the whole
 * send buffer: the next rank's receive failed with MPI_ERR_TRUNCATE, that rank
 * left the ring, and the one after it waited forever for the block it
 * should have passed on. */
static void oversized_own_block(void) {
  enum { kBlock = 32768, kExtra = 16 };
  int* mine = malloc(sizeof(int) * (kBlock + kExtra));
  int* all = malloc(sizeof(int) * kBlock * (size_t)size);
  CHECK(mine != NULL && all != NULL);
  for (int i = 0; i < kBlock + kExtra; ++i) mine[i] = rank * 1000003 + i;
  MPI_Request request;
  const int sent = rank == 0 ? kBlock + kExtra : kBlock;
  MPI_Iallgather(mine, sent, MPI_INT, all, kBlock, MPI_INT, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  int wrong = 0;
  for (int r = 1; r < size; ++r)
    for (int i = 0; i < kBlock; ++i) wrong += all[(size_t)r * kBlock + (size_t)i] != r * 1000003 + i;
  CHECK(wrong == 0);
  free(mine);
  free(all);
}

/* A request freed or cancelled while the collective runs is erroneous (MPI-3.1 5.12). */
static void bad_arguments(void) {
  MPI_Request request = MPI_REQUEST_NULL;
  int x[8] = {0};
  CHECK(error_class(MPI_Ibarrier(MPI_COMM_NULL, &request)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Ibarrier(MPI_COMM_WORLD, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Ibcast(x, 1, MPI_INT, size, MPI_COMM_WORLD, &request)) == MPI_ERR_ROOT);
  CHECK(error_class(MPI_Ibcast(x, 1, MPI_INT, -1, MPI_COMM_WORLD, &request)) == MPI_ERR_ROOT);
  CHECK(error_class(MPI_Ireduce(x, x + 4, 1, MPI_INT, MPI_SUM, size, MPI_COMM_WORLD, &request)) == MPI_ERR_ROOT);
  CHECK(error_class(MPI_Iallreduce(x, x + 4, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Iallreduce(x, x + 4, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, &request)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Iallreduce(x, x + 4, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, &request)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Iscan(x, x + 4, 1, MPI_DOUBLE_INT, MPI_SUM, MPI_COMM_WORLD, &request)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Igather(x, 1, MPI_INT, x, 1, MPI_INT, size + 3, MPI_COMM_WORLD, &request)) == MPI_ERR_ROOT);
  /* The root alone reads the counts. */
  CHECK(error_class(MPI_Iscatterv(x, NULL, x, MPI_INT, x, 1, MPI_INT, 0, MPI_COMM_SELF, &request)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Igatherv(x, 1, MPI_INT, x, x, NULL, MPI_INT, 0, MPI_COMM_SELF, &request)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Ialltoallv(x, NULL, x, MPI_INT, x, x, x, MPI_INT, MPI_COMM_WORLD, &request)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Ialltoallw(x, x, x, NULL, x, x, x, NULL, MPI_COMM_WORLD, &request)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Ireduce_scatter(x, x, NULL, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Ireduce_scatter_block(x, x, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Iallgather(x, -1, MPI_INT, x, 1, MPI_INT, MPI_COMM_WORLD, &request)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Ineighbor_allgather(x, 1, MPI_INT, x, 1, MPI_INT, MPI_COMM_WORLD, &request)) ==
        MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Ineighbor_alltoall(MPI_IN_PLACE, 1, MPI_INT, x, 1, MPI_INT, ring, &request)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Ineighbor_alltoallw(x, NULL, NULL, NULL, x, NULL, NULL, NULL, ring, &request)) == MPI_ERR_ARG);

  /* A running collective's request can be neither freed nor cancelled; it is still waited for. */
  CHECK(MPI_Iallreduce(x, x + 4, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request) == MPI_SUCCESS);
  MPI_Request copy = request;
  CHECK(error_class(MPI_Request_free(&copy)) == MPI_ERR_REQUEST);
  CHECK(error_class(MPI_Cancel(&request)) == MPI_ERR_REQUEST);
  MPI_Status status;
  CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS);
  CHECK(request == MPI_REQUEST_NULL);
  int cancelled = 1;
  MPI_Test_cancelled(&status, &cancelled);
  CHECK(!cancelled);
  CHECK(x[4] == 0 && x[5] == 0);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  const int periodic = 1;
  MPI_Cart_create(MPI_COMM_WORLD, 1, &size, &periodic, 0, &ring);
  MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN);
  MPI_Op_create(subtract_twice, 0, &user_op);

  /* Below the eager limit, and above it (rendezvous; the long-message algorithms by default). */
  const int round_counts[] = {0, 1, 7, 300, 5000};
  for (size_t c = 0; c < sizeof round_counts / sizeof *round_counts; ++c) {
    count = round_counts[c];
    set_layout();
    compute_expected();
    each_alone();
    each_tested();
    all_outstanding();
    for (int k = 0; k < collective_count; ++k) {
      free_buffers(&expected[k]);
      free_buffers(&got[k]);
    }
  }
  progress_elsewhere();
  oversized_own_block();
  bad_arguments();

  MPI_Op_free(&user_op);
  MPI_Comm_free(&ring);
  return finish("nbc_test");
}
