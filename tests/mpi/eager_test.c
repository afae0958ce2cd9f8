/* eager_test BYTES (2 ranks): a standard send of BYTES goes eagerly, i.e.
 * MPI_Send returns before its receive is posted. Rank 0 sends BYTES with tag 1
 * and then 8 bytes with tag 2; rank 1 receives tag 2 first. Had the first
 * send taken the rendezvous, it would wait for a receive rank 1 posts only
 * after the second message, which then never comes: rank 1 gives up after
 * 20 s and says so. (The program relies on buffering, as a test of the
 * library's protocol choice may: over tcp, messages up to 60 KiB go eagerly,
 * as up to 64 KiB in Open MPI's tcp BTL, instead of paying the rendezvous'
 * round trip.) */
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long bytes = argc > 1 ? atol(argv[1]) : 0;
  if (size != 2 || bytes <= 0) {
    if (rank == 0) fprintf(stderr, "usage: viarun -n 2 eager_test BYTES\n");
    MPI_Finalize();
    return 2;
  }
  unsigned char* message = malloc((size_t)bytes);
  long after = 0;
  if (rank == 0) {
    for (long i = 0; i < bytes; ++i) message[i] = (unsigned char)(i * 7 + 1);
    MPI_Send(message, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    after = 42;
    MPI_Send(&after, 1, MPI_LONG, 1, 2, MPI_COMM_WORLD);
  } else {
    MPI_Request second;
    MPI_Irecv(&after, 1, MPI_LONG, 0, 2, MPI_COMM_WORLD, &second);
    int arrived = 0;
    const double give_up = MPI_Wtime() + 20.0;
    while (!arrived && MPI_Wtime() < give_up) MPI_Test(&second, &arrived, MPI_STATUS_IGNORE);
    if (!arrived) {
      fprintf(stderr, "rank 1: the send of %ld bytes did not return before its receive was posted (not eager)\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(after == 42);
    memset(message, 0, (size_t)bytes);
    MPI_Recv(message, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    long wrong = 0;
    for (long i = 0; i < bytes; ++i) wrong += message[i] != (unsigned char)(i * 7 + 1);
    CHECK(wrong == 0);
  }
  free(message);
  return finish("eager_test");
}
