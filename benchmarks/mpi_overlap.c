/* mpi_overlap: how long a receiver waits for a message whose sender computes
 * between MPI_Isend and MPI_Wait. Rank 0 posts MPI_Isend, computes (a busy
 * loop) for --compute-us, then calls MPI_Wait; rank 1 is already in
 * MPI_Recv. The figure is rank 1's time in MPI_Recv: about the transfer's
 * when the message moves without the sender's CPU (a single copy by the
 * receiver), about the computation's when it needs the sender inside MPI.
 * Built by Open MPI's mpicc, as mpi_bench, so that the same binary runs on
 * both MPIs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_library.h"

static const char *const usage_text =
    "usage: mpirun -np 2 mpi_overlap [options]     (Open MPI)\n"
    "       viarun -n 2 mpi_overlap [options]      (viastack: its libmpi.so.40 first on LD_LIBRARY_PATH)\n"
    "The receiver's time in MPI_Recv while the sender computes between MPI_Isend and MPI_Wait.\n"
    "options:\n"
    "  --sizes LIST       message sizes in bytes, k and M suffixes allowed (default 64k,256k,1M,4M)\n"
    "  --compute-us N     the sender's computation (default 300)\n"
    "  --iters N          messages per size, the median reported (default 60)\n"
    "  --json             one JSON object per line on stdout (rank 0), nothing else:\n"
    "                     {\"bench\":\"mpi_overlap\",\"library\":...,\"bytes\":1048576,\"compute_us\":300,\n"
    "                      \"recv_us\":...,\"send_us\":...}: medians of the receiver's MPI_Recv and of\n"
    "                     the sender's MPI_Isend to MPI_Wait's return\n"
    "  --help\n"
    "exit status: 0 done; 1 a message arrived wrong; 2 bad usage\n";

#define MAX_SIZES 32

static int rank;

static void usage_error(const char *what, const char *arg) {
  if (rank == 0) fprintf(stderr, "mpi_overlap: %s%s%s\n%s", what, arg ? ": " : "", arg ? arg : "", usage_text);
  MPI_Finalize();
  exit(2);
}

static long parse_count(const char *text, long max) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*end == 'k' || *end == 'K') v <<= 10, ++end;
  else if (*end == 'm' || *end == 'M') v <<= 20, ++end;
  return end == text || *end != '\0' || v < 0 || v > max ? -1 : v;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  long sizes[MAX_SIZES] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
  int nsizes = 4, json = 0;
  long compute_us = 300, iters = 60;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0) {
      if (rank == 0) fputs(usage_text, stdout);
      MPI_Finalize();
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--sizes") == 0 && value) {
      char list[1024];
      if (strlen(value) >= sizeof list) usage_error("--sizes too long", NULL);
      strcpy(list, value);
      nsizes = 0;
      for (char *s = strtok(list, ","); s; s = strtok(NULL, ",")) {
        if (nsizes == MAX_SIZES || (sizes[nsizes] = parse_count(s, 1L << 30)) < 0) usage_error("bad size", s);
        ++nsizes;
      }
      if (nsizes == 0) usage_error("no sizes", value);
      ++i;
    } else if (strcmp(a, "--compute-us") == 0 && value) {
      if ((compute_us = parse_count(value, 10000000)) < 0) usage_error("bad --compute-us", value);
      ++i;
    } else if (strcmp(a, "--iters") == 0 && value) {
      if ((iters = parse_count(value, 1000000)) < 1) usage_error("bad --iters", value);
      ++i;
    } else {
      usage_error("unknown option", a);
    }
  }
  if (nranks != 2) usage_error("needs 2 ranks", NULL);
  long largest = 0;
  for (int s = 0; s < nsizes; ++s) largest = sizes[s] > largest ? sizes[s] : largest;
  unsigned char *buf = malloc((size_t)largest + 1);
  double *times = malloc(sizeof(double) * (size_t)iters);
  int bad = 0;
  const char *library = mpi_library_name();
  if (rank == 0 && !json) printf("# mpi_overlap on %s: the sender computes %ld us between MPI_Isend and MPI_Wait\n", library, compute_us);
  for (int s = 0; s < nsizes; ++s) {
    const int n = (int)sizes[s];
    for (long i = 0; i < iters; ++i) {
      const unsigned char mark = (unsigned char)(i * 13 + s + 1);
      if (rank == 0) memset(buf, mark, (size_t)n);
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      if (rank == 0) {
        MPI_Request request;
        MPI_Isend(buf, n, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &request);
        while ((MPI_Wtime() - start) * 1e6 < (double)compute_us) {
        }
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int b = 0; b < n && !bad; b += 4093) bad = buf[b] != mark;
        if (n > 0) bad |= buf[n - 1] != mark;
      }
      times[i] = (MPI_Wtime() - start) * 1e6;
    }
    double own = median(times, (int)iters), recv_us = own;
    if (rank == 1) MPI_Send(&own, 1, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD);
    else MPI_Recv(&recv_us, 1, MPI_DOUBLE, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) {
      if (json)
        printf("{\"bench\":\"mpi_overlap\",\"library\":\"%s\",\"ranks\":2,\"bytes\":%d,\"compute_us\":%ld,\"iters\":%ld,"
               "\"recv_us\":%.1f,\"send_us\":%.1f}\n",
               library, n, compute_us, iters, recv_us, own);
      else
        printf("%10d B   receiver %9.1f us   sender %9.1f us\n", n, recv_us, own);
      fflush(stdout);
    }
  }
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_bad && rank == 0) fprintf(stderr, "mpi_overlap: a message arrived wrong\n");
  free(times);
  free(buf);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
