/* mpi_bench: MPI point-to-point and collective performance, written against
 * the MPI C API only and built with Open MPI's mpicc, so that the very same
 * binary measures Open MPI (mpirun) and viastack (viarun, with viastack's
 * libmpi.so.40 first on LD_LIBRARY_PATH) side by side.
 *
 * Point-to-point runs between ranks 0 and 1 (the other ranks wait):
 *   lat   ping-pong, one-way latency = round trip / 2
 *   bw    a window of non-blocking sends from 0 to 1, then a reply (osu_bw)
 *   bibw  the same window both ways at once (osu_bibw)
 *   rate  the bandwidth window, reported as messages per second (osu_mbw_mr)
 * Collectives on every rank: each blocking collective and its non-blocking
 * form (MPI_I..., waited for at once); `bytes` is each rank's block (the
 * vector of a reduction, the block of each pair in alltoall).
 * Every measurement is checked once for the right result before it is timed.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_library.h"

#define MAX_SIZES 64
#define MAX_WINDOW 64          /* messages in flight in bw, bibw and rate (as the OSU benchmarks) */
#define WINDOW_BYTES (32 << 20) /* ... fewer for large messages: each has a receive buffer of its own */
#define SMALL_BYTES 8192       /* above this, fewer iterations in proportion to the size */

static const char *const usage_text =
    "usage: mpirun -np N mpi_bench [options]     (Open MPI)\n"
    "       viarun -n N mpi_bench [options]      (viastack: its libmpi.so.40 first on LD_LIBRARY_PATH)\n"
    "MPI latency, bandwidth, bidirectional bandwidth, message rate (between ranks 0 and 1)\n"
    "and every blocking and non-blocking collective (on all ranks), over sizes.\n"
    "options:\n"
    "  --test LIST      comma-separated tests (default: all; the last --test counts): lat, bw, bibw, rate, p2p (those four),\n"
    "                   coll (every collective), or a collective by name: barrier, bcast, reduce,\n"
    "                   allreduce, gather, gatherv, scatter, scatterv, allgather, allgatherv, alltoall,\n"
    "                   alltoallv, alltoallw, reduce_scatter, reduce_scatter_block, scan, exscan,\n"
    "                   and each with an i in front (ibarrier, ibcast, ...)\n"
    "  --sizes LIST     message sizes in bytes, k and M suffixes allowed (default: the powers of two\n"
    "                   from 1 B, 4 B for collectives, to 4 MiB)\n"
    "  --max-bytes N    leave out sizes above N bytes (k and M suffixes allowed)\n"
    "  --iters N        iterations at sizes up to 8 KiB (default 10000 for lat, 100 windows of up to\n"
    "                   64 messages for bw, bibw and rate, 1000 for collectives); fewer in\n"
    "                   proportion above 8 KiB, at least N/100 and 2\n"
    "  --reps N         timed repetitions of each measurement, the median reported (default 3)\n"
    "  --thread LEVEL   MPI_Init_thread at single (default), funneled, serialized or multiple; the\n"
    "                   library must provide it (what MPI_THREAD_MULTIPLE costs a single thread)\n"
    "  --json           one JSON object per line on stdout (rank 0), nothing else:\n"
    "                   {\"bench\":\"mpi_bench\",\"test\":\"allreduce\",\"ranks\":2,\"bytes\":1024,...,\"lat_us\":...}\n"
    "                   (\"thread\":\"multiple\" too when --thread is not single)\n"
    "                   lat_us: one-way latency (lat), mean time per call (collectives), or time\n"
    "                   per message (bw, bibw, rate); bw_MBps in 10^6 bytes/s; msg_rate_Mps in\n"
    "                   10^6 messages/s\n"
    "  --help, --version\n"
    "environment: none of its own (the MPI library reads its own)\n"
    "exit status: 0 done; 1 a result was wrong; 2 bad usage; an MPI error ends the job (MPI's default)\n";

enum kind { P2P, COLLECTIVE };
enum test_id {
  T_LAT, T_BW, T_BIBW, T_RATE,
  T_BARRIER, T_BCAST, T_REDUCE, T_ALLREDUCE, T_GATHER, T_GATHERV, T_SCATTER, T_SCATTERV, T_ALLGATHER,
  T_ALLGATHERV, T_ALLTOALL, T_ALLTOALLV, T_ALLTOALLW, T_REDUCE_SCATTER, T_REDUCE_SCATTER_BLOCK, T_SCAN, T_EXSCAN,
  T_COUNT
};
static const char *const test_names[T_COUNT] = {
    "lat", "bw", "bibw", "rate",
    "barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv", "allgather",
    "allgatherv", "alltoall", "alltoallv", "alltoallw", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"};

/* What runs: a test, blocking or not (collectives only). */
struct selection {
  int blocking[T_COUNT];
  int nonblocking[T_COUNT];
};

struct options {
  struct selection chosen;
  size_t sizes[MAX_SIZES];
  int nsizes;
  size_t max_bytes;
  long iters;      /* 0: each test's default */
  long coll_iters; /* 0: as iters */
  int reps;
  int json;
};

static int rank, nranks;
static const char *const thread_levels[] = {"single", "funneled", "serialized", "multiple"};
static int thread_level; /* index in thread_levels: MPI_THREAD_SINGLE + thread_level is what was asked */
/* Buffers for the largest size: send and receive, nranks blocks each (or a window of messages). */
static unsigned char *send_buf, *recv_buf;
static int *counts, *displs, *byte_displs;
static MPI_Datatype *types;

static void usage_error(const char *what, const char *arg) {
  if (rank == 0) fprintf(stderr, "mpi_bench: %s%s%s\n%s", what, arg ? ": " : "", arg ? arg : "", usage_text);
  MPI_Finalize();
  exit(2);
}

/* "4096", "4k", "1M" */
static int parse_size(const char *text, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno || text[0] == '-') return 0;
  if (*end == 'k' || *end == 'K') v <<= 10, ++end;
  else if (*end == 'm' || *end == 'M') v <<= 20, ++end;
  if (*end != '\0' || v > ((size_t)1 << 30)) return 0;
  *out = (size_t)v;
  return 1;
}

static void select_test(struct selection *s, const char *name) {
  int any = 0;
  for (int t = 0; t < T_COUNT; ++t) {
    const int coll = t >= T_BARRIER;
    if (strcmp(name, test_names[t]) == 0 || (strcmp(name, "p2p") == 0 && !coll) || (strcmp(name, "coll") == 0 && coll))
      s->blocking[t] = any = 1;
    if ((coll && name[0] == 'i' && strcmp(name + 1, test_names[t]) == 0) || (strcmp(name, "coll") == 0 && coll))
      s->nonblocking[t] = any = 1;
  }
  if (!any) usage_error("unknown test", name);
}

static void parse_options(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof *o);
  o->max_bytes = (size_t)4 << 20;
  o->reps = 3;
  int tests_given = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      if (rank == 0) fputs(usage_text, stdout);
      MPI_Finalize();
      exit(0);
    } else if (strcmp(a, "--version") == 0) {
      if (rank == 0) printf("mpi_bench 1.0\n");
      MPI_Finalize();
      exit(0);
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--test") == 0 && value) {
      char *list = strdup(value);
      memset(&o->chosen, 0, sizeof o->chosen); /* the last --test counts */
      for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) select_test(&o->chosen, name);
      free(list);
      tests_given = 1;
      ++i;
    } else if (strcmp(a, "--sizes") == 0 && value) {
      char *list = strdup(value);
      for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
        if (o->nsizes == MAX_SIZES) usage_error("too many sizes", value);
        if (!parse_size(item, &o->sizes[o->nsizes++])) usage_error("bad size (bytes, up to 1G)", item);
      }
      free(list);
      if (o->nsizes == 0) usage_error("no sizes", value);
      ++i;
    } else if (strcmp(a, "--max-bytes") == 0 && value) {
      if (!parse_size(value, &o->max_bytes)) usage_error("bad --max-bytes", value);
      ++i;
    } else if (strcmp(a, "--thread") == 0 && value) {
      ++i; /* read before MPI_Init_thread (requested_thread_level) */
    } else if ((strcmp(a, "--iters") == 0 || strcmp(a, "--coll-iters") == 0 || strcmp(a, "--reps") == 0) && value) {
      char *end;
      const long v = strtol(value, &end, 10);
      if (*end || v < 1 || v > 100000000) usage_error("needs a positive number", a);
      if (strcmp(a, "--iters") == 0) o->iters = v;
      else if (strcmp(a, "--coll-iters") == 0) o->coll_iters = v;
      else o->reps = (int)v;
      ++i;
    } else {
      const int takes_value = strcmp(a, "--test") == 0 || strcmp(a, "--sizes") == 0 || strcmp(a, "--max-bytes") == 0 ||
                              strcmp(a, "--iters") == 0 || strcmp(a, "--coll-iters") == 0 || strcmp(a, "--reps") == 0 ||
                              strcmp(a, "--thread") == 0;
      usage_error(takes_value ? "missing value for" : "unknown option", a);
    }
  }
  if (!tests_given) {
    select_test(&o->chosen, "p2p");
    select_test(&o->chosen, "coll");
  }
  if (o->nsizes == 0)
    for (size_t s = 1; s <= o->max_bytes && s <= ((size_t)4 << 20); s *= 2) o->sizes[o->nsizes++] = s;
}

static long iterations(long small, long given, size_t bytes) {
  long n = given ? given : small;
  if (bytes > SMALL_BYTES) {
    const long floor = n / 100 > 2 ? n / 100 : 2;
    n = (long)((double)n * SMALL_BYTES / (double)bytes);
    if (n < floor) n = floor;
  }
  return n;
}

static int window_for(size_t bytes) {
  const size_t fit = bytes ? WINDOW_BYTES / bytes : MAX_WINDOW;
  return fit < 1 ? 1 : fit > MAX_WINDOW ? MAX_WINDOW : (int)fit;
}

/* ------------------------------------------------------------------ point-to-point */

/* One timed run of `iters` ping-pongs or windows; returns the seconds rank 0 measured. */
static double p2p_run(int test, size_t bytes, long iters) {
  const int me = rank, peer = 1 - rank;
  const int window = window_for(bytes), bytes_i = (int)bytes;
  MPI_Request requests[2 * MAX_WINDOW];
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  if (me > 1) {
    /* no part in it */
  } else if (test == T_LAT) {
    for (long i = 0; i < iters; ++i) {
      if (me == 0) {
        MPI_Send(send_buf, bytes_i, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(recv_buf, bytes_i, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(recv_buf, bytes_i, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(send_buf, bytes_i, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
      }
    }
  } else {
    const int both_ways = test == T_BIBW;
    for (long i = 0; i < iters; ++i) {
      int n = 0;
      for (int w = 0; w < window; ++w) {
        if (me == 1 || both_ways)
          MPI_Irecv(recv_buf + (size_t)w * bytes, bytes_i, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &requests[n++]);
        if (me == 0 || both_ways) MPI_Isend(send_buf, bytes_i, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &requests[n++]);
      }
      MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
      if (me == 0)
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
  }
  double seconds = MPI_Wtime() - start;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return seconds;
}

static unsigned char pattern(int from, int to, size_t i) { return (unsigned char)(from * 31 + to * 7 + i); }

/* One message each way (the window's slot 0), checked byte by byte. */
static int p2p_check(int test, size_t bytes) {
  int bad = 0;
  if (rank <= 1) {
    for (size_t i = 0; i < bytes; ++i) send_buf[i] = pattern(rank, 1 - rank, i);
    memset(recv_buf, 0, bytes);
  }
  p2p_run(test, bytes, 1);
  if (rank <= 1 && (test != T_BW && test != T_RATE ? 1 : rank == 1))
    for (size_t i = 0; i < bytes && !bad; ++i) bad = recv_buf[i] != pattern(1 - rank, rank, i);
  return bad;
}

/* ------------------------------------------------------------------ collectives */

/* One call of collective `test` (its non-blocking form, waited for, when nonblocking). */
#define CALL(blocking_fn, nonblocking_fn, ...)     \
  do {                                             \
    if (nonblocking) {                             \
      MPI_Request request_;                        \
      nonblocking_fn(__VA_ARGS__, &request_);      \
      MPI_Wait(&request_, MPI_STATUS_IGNORE);      \
    } else {                                       \
      blocking_fn(__VA_ARGS__);                    \
    }                                              \
  } while (0)

static void collective(int test, int nonblocking, size_t bytes) {
  const MPI_Comm w = MPI_COMM_WORLD;
  const int b = (int)bytes, ints = (int)(bytes / sizeof(int));
  for (int r = 0; r < nranks; ++r) {
    counts[r] = b;
    displs[r] = r * b;
    byte_displs[r] = r * b;
  }
  switch (test) {
    case T_BARRIER: CALL(MPI_Barrier, MPI_Ibarrier, w); break;
    case T_BCAST: CALL(MPI_Bcast, MPI_Ibcast, recv_buf, b, MPI_BYTE, 0, w); break;
    case T_REDUCE: CALL(MPI_Reduce, MPI_Ireduce, send_buf, recv_buf, ints, MPI_INT, MPI_SUM, 0, w); break;
    case T_ALLREDUCE: CALL(MPI_Allreduce, MPI_Iallreduce, send_buf, recv_buf, ints, MPI_INT, MPI_SUM, w); break;
    case T_GATHER: CALL(MPI_Gather, MPI_Igather, send_buf, b, MPI_BYTE, recv_buf, b, MPI_BYTE, 0, w); break;
    case T_GATHERV:
      CALL(MPI_Gatherv, MPI_Igatherv, send_buf, b, MPI_BYTE, recv_buf, counts, displs, MPI_BYTE, 0, w);
      break;
    case T_SCATTER: CALL(MPI_Scatter, MPI_Iscatter, send_buf, b, MPI_BYTE, recv_buf, b, MPI_BYTE, 0, w); break;
    case T_SCATTERV:
      CALL(MPI_Scatterv, MPI_Iscatterv, send_buf, counts, displs, MPI_BYTE, recv_buf, b, MPI_BYTE, 0, w);
      break;
    case T_ALLGATHER: CALL(MPI_Allgather, MPI_Iallgather, send_buf, b, MPI_BYTE, recv_buf, b, MPI_BYTE, w); break;
    case T_ALLGATHERV:
      CALL(MPI_Allgatherv, MPI_Iallgatherv, send_buf, b, MPI_BYTE, recv_buf, counts, displs, MPI_BYTE, w);
      break;
    case T_ALLTOALL: CALL(MPI_Alltoall, MPI_Ialltoall, send_buf, b, MPI_BYTE, recv_buf, b, MPI_BYTE, w); break;
    case T_ALLTOALLV:
      CALL(MPI_Alltoallv, MPI_Ialltoallv, send_buf, counts, displs, MPI_BYTE, recv_buf, counts, displs, MPI_BYTE, w);
      break;
    case T_ALLTOALLW:
      CALL(MPI_Alltoallw, MPI_Ialltoallw, send_buf, counts, byte_displs, types, recv_buf, counts, byte_displs, types,
           w);
      break;
    case T_REDUCE_SCATTER:
      for (int r = 0; r < nranks; ++r) counts[r] = ints;
      CALL(MPI_Reduce_scatter, MPI_Ireduce_scatter, send_buf, recv_buf, counts, MPI_INT, MPI_SUM, w);
      break;
    case T_REDUCE_SCATTER_BLOCK:
      CALL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, send_buf, recv_buf, ints, MPI_INT, MPI_SUM, w);
      break;
    case T_SCAN: CALL(MPI_Scan, MPI_Iscan, send_buf, recv_buf, ints, MPI_INT, MPI_SUM, w); break;
    case T_EXSCAN: CALL(MPI_Exscan, MPI_Iexscan, send_buf, recv_buf, ints, MPI_INT, MPI_SUM, w); break;
  }
}

static int is_reduction(int test) {
  return test == T_REDUCE || test == T_ALLREDUCE || test == T_REDUCE_SCATTER || test == T_REDUCE_SCATTER_BLOCK ||
         test == T_SCAN || test == T_EXSCAN;
}

/* Fills the send buffer with what this rank contributes, runs the collective
 * once, and checks what this rank received. Reductions: element j of rank r is
 * r + j (summed as ints); blocks: byte i from rank f to rank t is pattern(f, t, i). */
static int collective_check(int test, int nonblocking, size_t bytes) {
  const size_t ints = bytes / sizeof(int), n = (size_t)nranks, me = (size_t)rank;
  int *send_ints = (int *)send_buf, *recv_ints = (int *)recv_buf;
  memset(recv_buf, 0, n * bytes);
  if (is_reduction(test)) {
    const size_t len = test == T_REDUCE_SCATTER || test == T_REDUCE_SCATTER_BLOCK ? n * ints : ints;
    for (size_t j = 0; j < len; ++j) send_ints[j] = (int)(me + j);
  } else {
    for (size_t to = 0; to < n; ++to)
      for (size_t i = 0; i < bytes; ++i)
        send_buf[to * bytes + i] = pattern(rank, test == T_ALLTOALL || test == T_ALLTOALLV || test == T_ALLTOALLW
                                                     ? (int)to : 0, i) ^ (unsigned char)(to * 3);
  }
  if (test == T_BCAST && rank == 0) memcpy(recv_buf, send_buf, bytes);
  collective(test, nonblocking, bytes);
  const long sum_ranks = (long)(n * (n - 1) / 2);
  for (size_t j = 0; j < n * bytes; ++j) {
    long want_int = 0;
    int check_int = 0, check_byte = 0;
    unsigned char want_byte = 0;
    const size_t block = j / bytes, i = j % bytes;
    switch (test) {
      case T_BARRIER: return 0;
      case T_BCAST: check_byte = block == 0, want_byte = pattern(0, 0, i); break;
      case T_REDUCE: check_int = rank == 0 && j < ints, want_int = sum_ranks + (long)(n * j); break;
      case T_ALLREDUCE: check_int = j < ints, want_int = sum_ranks + (long)(n * j); break;
      case T_REDUCE_SCATTER:
      case T_REDUCE_SCATTER_BLOCK: check_int = j < ints, want_int = sum_ranks + (long)(n * (me * ints + j)); break;
      case T_SCAN: check_int = j < ints, want_int = (long)(me * (me + 1) / 2 + (me + 1) * j); break;
      case T_EXSCAN: check_int = rank > 0 && j < ints, want_int = (long)(me * (me - 1) / 2 + me * j); break;
      case T_GATHER:
      case T_GATHERV: check_byte = rank == 0, want_byte = pattern((int)block, 0, i); break;
      case T_SCATTER:
      case T_SCATTERV: check_byte = block == 0, want_byte = pattern(0, 0, i) ^ (unsigned char)(me * 3); break;
      case T_ALLGATHER:
      case T_ALLGATHERV: check_byte = 1, want_byte = pattern((int)block, 0, i); break;
      default: /* alltoall(v, w): block `block` came from that rank, cut for this one */
        check_byte = 1, want_byte = pattern((int)block, rank, i) ^ (unsigned char)(me * 3);
        break;
    }
    if (check_byte && recv_buf[j] != want_byte) return 1;
    if (check_int && recv_ints[j] != (int)want_int) return 1;
  }
  return 0;
}

/* Seconds per call, this rank's mean over `iters` calls. */
static double collective_run(int test, int nonblocking, size_t bytes, long iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (long i = 0; i < iters; ++i) collective(test, nonblocking, bytes);
  return (MPI_Wtime() - start) / (double)iters;
}

/* ------------------------------------------------------------------ driver */

static int compare_doubles(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Runs one test at one size; returns nonzero when its result was wrong. */
static int measure(const struct options *o, int test, int nonblocking, size_t bytes, const char *library) {
  char name[40];
  snprintf(name, sizeof name, "%s%s", nonblocking ? "i" : "", test_names[test]);
  int bad = test < T_BARRIER ? p2p_check(test, bytes) : collective_check(test, nonblocking, bytes);
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (any_bad) {
    if (rank == 0) fprintf(stderr, "mpi_bench: %s at %zu bytes on %d ranks: WRONG RESULT\n", name, bytes, nranks);
    return 1;
  }
  const int window = test == T_LAT || test >= T_BARRIER ? 1 : window_for(bytes);
  const long given = test >= T_BARRIER && o->coll_iters ? o->coll_iters : o->iters;
  const long iters = iterations(test == T_LAT ? 10000 : test < T_BARRIER ? 100 : 1000, given, bytes);
  double per_rep[64];
  const int reps = o->reps < 64 ? o->reps : 64;
  if (test < T_BARRIER)
    p2p_run(test, bytes, iters / 10 > 1 ? iters / 10 : 1); /* warm-up */
  else
    collective_run(test, nonblocking, bytes, iters / 10 > 1 ? iters / 10 : 1);
  for (int r = 0; r < reps; ++r) {
    if (test < T_BARRIER) {
      /* microseconds per message; a ping-pong's round trip is two */
      const double seconds = p2p_run(test, bytes, iters);
      per_rep[r] = seconds * 1e6 / (double)(iters * window) / (test == T_LAT ? 2.0 : test == T_BIBW ? 2.0 : 1.0);
    } else {
      double mine = collective_run(test, nonblocking, bytes, iters), sum = 0;
      MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      per_rep[r] = sum / nranks * 1e6;
    }
  }
  if (rank != 0) return 0;
  const double us = median(per_rep, reps);
  const double mbps = us > 0 ? (double)bytes / us : 0;
  if (o->json) {
    printf("{\"bench\":\"mpi_bench\",\"library\":\"%s\",\"test\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"iters\":%ld,"
           "\"lat_us\":%.4f",
           library, name, nranks, bytes, iters * window, us);
    if (thread_level != 0) printf(",\"thread\":\"%s\"", thread_levels[thread_level]);
    if (test < T_BARRIER) printf(",\"bw_MBps\":%.2f", mbps);
    if (test == T_RATE) printf(",\"msg_rate_Mps\":%.4f", us > 0 ? 1.0 / us : 0);
    printf("}\n");
  } else if (test < T_BARRIER) {
    printf("%-22s %10zu %12.3f us %12.1f MB/s %10.4f M msg/s\n", name, bytes, us, mbps, us > 0 ? 1.0 / us : 0);
  } else {
    printf("%-22s %10zu %12.3f us per call\n", name, bytes, us);
  }
  fflush(stdout);
  return 0;
}

/* --thread's level, from the command line before MPI starts: -1 for a bad one. */
static int requested_thread_level(int argc, char **argv) {
  int level = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (strcmp(argv[i], "--thread") == 0) {
      level = -1;
      for (int l = 0; l < 4; ++l)
        if (strcmp(argv[i + 1], thread_levels[l]) == 0) level = l;
      ++i;
    }
  return level;
}

int main(int argc, char **argv) {
  thread_level = requested_thread_level(argc, argv);
  const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, thread_level < 0 ? MPI_THREAD_SINGLE : levels[thread_level], &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (thread_level < 0) usage_error("--thread needs single, funneled, serialized or multiple", NULL);
  if (provided < levels[thread_level]) {
    if (rank == 0)
      fprintf(stderr, "mpi_bench: the library provides a thread level below the %s asked for\n",
              thread_levels[thread_level]);
    MPI_Finalize();
    return 1;
  }
  struct options o;
  parse_options(argc, argv, &o);

  size_t largest = 0;
  for (int s = 0; s < o.nsizes; ++s)
    if (o.sizes[s] <= o.max_bytes && o.sizes[s] > largest) largest = o.sizes[s];
  /* nranks blocks of the largest size, or a window of messages, whichever is more */
  size_t room = largest * (size_t)nranks;
  if (largest * (size_t)window_for(largest) > room) room = largest * (size_t)window_for(largest);
  room += 64;
  send_buf = malloc(room);
  recv_buf = malloc(room);
  counts = malloc(sizeof(int) * (size_t)nranks);
  displs = malloc(sizeof(int) * (size_t)nranks);
  byte_displs = malloc(sizeof(int) * (size_t)nranks);
  types = malloc(sizeof(MPI_Datatype) * (size_t)nranks);
  if (!send_buf || !recv_buf || !counts || !displs || !byte_displs || !types) {
    fprintf(stderr, "mpi_bench: out of memory for %zu-byte buffers\n", room);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send_buf, 1, room);
  memset(recv_buf, 0, room);
  for (int r = 0; r < nranks; ++r) types[r] = MPI_BYTE;

  const char *library = mpi_library_name();
  if (!o.json && rank == 0)
    printf("# mpi_bench on %s, %d ranks (point-to-point between ranks 0 and 1)\n", library, nranks);
  int failures = 0;
  for (int t = 0; t < T_COUNT; ++t) {
    if (t < T_BARRIER && nranks < 2) {
      if (o.chosen.blocking[t] && rank == 0 && !o.json) printf("# %s needs 2 ranks: skipped\n", test_names[t]);
      continue;
    }
    for (int nonblocking = 0; nonblocking <= 1; ++nonblocking) {
      if (!(nonblocking ? o.chosen.nonblocking[t] : o.chosen.blocking[t])) continue;
      if (t == T_BARRIER) {
        failures += measure(&o, t, nonblocking, 0, library);
        continue;
      }
      for (int s = 0; s < o.nsizes; ++s) {
        const size_t bytes = o.sizes[s];
        /* collectives move ints (reductions) and start at 4 bytes */
        if (bytes > o.max_bytes || (t >= T_BARRIER && (bytes < sizeof(int) || bytes % sizeof(int)))) continue;
        failures += measure(&o, t, nonblocking, bytes, library);
      }
    }
  }
  free(send_buf);
  free(recv_buf);
  free(counts);
  free(displs);
  free(byte_displs);
  free(types);
  MPI_Finalize();
  return failures ? 1 : 0;
}
