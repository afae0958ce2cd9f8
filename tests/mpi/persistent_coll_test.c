/* Open MPI's persistent collectives (mpi-ext.h's MPIX_*_init): each request
 * started again and again with new buffer contents, Startall of several,
 * Test and Request_get_status, a persistent neighbourhood collective and one
 * on an intercommunicator; MPI_Start of an active request, freeing one, and a
 * bad root reported at start. */
#include <stdlib.h>

#include "check.h"
/* After mpi.h (check.h's), which defines what it uses. */
#include <mpi-ext.h>

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Allreduce and Bcast, started three times each with new contents. */
  int in = 0, sum = 0, word = 0;
  MPI_Request allreduce, bcast, barrier;
  CHECK(MPIX_Allreduce_init(&in, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &allreduce) == MPI_SUCCESS);
  CHECK(MPIX_Bcast_init(&word, 1, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &bcast) == MPI_SUCCESS);
  CHECK(MPIX_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &barrier) == MPI_SUCCESS);
  /* Inactive: waiting returns at once. */
  MPI_Status status;
  CHECK(MPI_Wait(&allreduce, &status) == MPI_SUCCESS && allreduce != MPI_REQUEST_NULL);
  for (int round = 1; round <= 3; ++round) {
    in = rank * round;
    word = rank == size - 1 ? 1000 + round : -1;
    CHECK(MPI_Start(&allreduce) == MPI_SUCCESS);
    CHECK(error_class(MPI_Start(&allreduce)) == MPI_ERR_REQUEST); /* active already */
    CHECK(error_class(MPI_Request_free(&allreduce)) == MPI_ERR_REQUEST);
    MPI_Request both[3] = {bcast, barrier, allreduce};
    CHECK(MPI_Startall(2, both) == MPI_SUCCESS);
    CHECK(MPI_Waitall(3, both, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(both[0] == bcast && both[1] == barrier && both[2] == allreduce); /* persistent: kept */
    CHECK(sum == round * size * (size - 1) / 2);
    CHECK(word == 1000 + round);
  }
  /* Completed by polling Test; Request_get_status sees it too. */
  in = 1;
  CHECK(MPI_Start(&allreduce) == MPI_SUCCESS);
  int flag = 0;
  while (!flag) CHECK(MPI_Request_get_status(allreduce, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  flag = 0;
  while (!flag) CHECK(MPI_Test(&allreduce, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(sum == size);

  /* Gather and Alltoall, each once more after a change. */
  int* gathered = malloc(sizeof(int) * (size_t)size);
  int* out = malloc(sizeof(int) * (size_t)size);
  int* into = malloc(sizeof(int) * (size_t)size);
  MPI_Request gather, alltoall;
  CHECK(MPIX_Gather_init(&in, 1, MPI_INT, gathered, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &gather) ==
        MPI_SUCCESS);
  CHECK(MPIX_Alltoall_init(out, 1, MPI_INT, into, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &alltoall) ==
        MPI_SUCCESS);
  for (int round = 0; round < 2; ++round) {
    in = rank + 10 * round;
    for (int r = 0; r < size; ++r) out[r] = rank * 100 + r + round;
    MPI_Request pair[2] = {gather, alltoall};
    CHECK(MPI_Startall(2, pair) == MPI_SUCCESS);
    CHECK(MPI_Waitall(2, pair, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int r = 0; r < size; ++r) {
      if (rank == 0) CHECK(gathered[r] == r + 10 * round);
      CHECK(into[r] == r * 100 + rank + round);
    }
  }

  /* A neighbourhood collective on a ring. */
  MPI_Comm ring;
  int dims[1] = {size}, periods[1] = {1};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  int neighbours[2] = {-1, -1};
  MPI_Request neighbor;
  CHECK(MPIX_Neighbor_allgather_init(&rank, 1, MPI_INT, neighbours, 1, MPI_INT, ring, MPI_INFO_NULL, &neighbor) ==
        MPI_SUCCESS);
  CHECK(MPI_Start(&neighbor) == MPI_SUCCESS);
  CHECK(MPI_Wait(&neighbor, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(neighbours[0] == (rank + size - 1) % size && neighbours[1] == (rank + 1) % size);
  CHECK(MPI_Request_free(&neighbor) == MPI_SUCCESS && neighbor == MPI_REQUEST_NULL);
  MPI_Comm_free(&ring);

  /* On an intercommunicator between the even and the odd ranks. */
  if (size > 1) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - rank % 2, 3, &inter);
    int remote_sum = -1;
    MPI_Request r;
    CHECK(MPIX_Allreduce_init(&rank, &remote_sum, 1, MPI_INT, MPI_SUM, inter, MPI_INFO_NULL, &r) == MPI_SUCCESS);
    CHECK(MPI_Start(&r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    int expected = 0;
    for (int w = 1 - rank % 2; w < size; w += 2) expected += w;
    CHECK(remote_sum == expected);
    MPI_Request_free(&r);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }

  /* A bad root is the non-blocking call's error, at start; the request stays inactive. */
  MPI_Request bad;
  CHECK(MPIX_Bcast_init(&word, 1, MPI_INT, size, MPI_COMM_WORLD, MPI_INFO_NULL, &bad) == MPI_SUCCESS);
  CHECK(error_class(MPI_Start(&bad)) == MPI_ERR_ROOT);
  CHECK(MPI_Request_free(&bad) == MPI_SUCCESS);
  CHECK(error_class(MPIX_Barrier_init(MPI_COMM_NULL, MPI_INFO_NULL, &bad)) == MPI_ERR_COMM);

  MPI_Request all[5] = {allreduce, bcast, barrier, gather, alltoall};
  for (int i = 0; i < 5; ++i) CHECK(MPI_Request_free(&all[i]) == MPI_SUCCESS && all[i] == MPI_REQUEST_NULL);
  free(gathered);
  free(out);
  free(into);
  return finish("persistent_coll_test");
}
