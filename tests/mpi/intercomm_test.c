/* Intercommunicators (issue 18): MPI_Intercomm_create between the even and
 * the odd ranks of MPI_COMM_WORLD, Comm_test_inter, remote_size and
 * remote_group, point-to-point whose ranks name the remote group (with
 * MPI_ANY_SOURCE, and large messages by rendezvous), Barrier and Bcast over
 * it (the other collectives: intercomm_coll_test.c), Comm_dup of it, Intercomm_merge both ways, Comm_free and
 * Comm_disconnect, Comm_get_parent; and the error classes under
 * MPI_ERRORS_RETURN. Needs 2 ranks or more. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

enum { kBig = 100000 };

/* The world rank of rank r of the even (side 0) or odd (side 1) group. */
static int world_of(int side, int r) { return 2 * r + side; }

static void point_to_point(MPI_Comm inter, int side, int local_rank, int remote_size) {
  /* Each member sends its world rank to every remote member, which receives from each by rank. */
  for (int r = 0; r < remote_size; ++r) {
    const int mine = world_of(side, local_rank);
    MPI_Request req;
    MPI_Isend(&mine, 1, MPI_INT, r, 1, inter, &req);
    int got = -1;
    MPI_Status status;
    CHECK(MPI_Recv(&got, 1, MPI_INT, r, 1, inter, &status) == MPI_SUCCESS);
    CHECK(got == world_of(1 - side, r) && status.MPI_SOURCE == r);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  /* MPI_ANY_SOURCE: the status names the remote rank. */
  if (local_rank == 0) {
    const int mine = world_of(side, 0);
    MPI_Send(&mine, 1, MPI_INT, 0, 2, inter);
    int got = -1;
    MPI_Status status;
    MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 2, inter, &status);
    CHECK(status.MPI_SOURCE == 0 && got == world_of(1 - side, 0));
  }
  /* A large message between the two leaders, by rendezvous. */
  if (local_rank == 0) {
    int* big = malloc(sizeof(int) * kBig);
    for (int i = 0; i < kBig; ++i) big[i] = side ? -i : i;
    int* in = malloc(sizeof(int) * kBig);
    MPI_Sendrecv(big, kBig, MPI_INT, 0, 3, in, kBig, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE);
    int ok = 1;
    for (int i = 0; i < kBig; ++i) ok &= in[i] == (side ? i : -i);
    CHECK(ok);
    free(big);
    free(in);
  }
}

static void collectives(MPI_Comm inter, int side, int local_rank, int remote_size) {
  CHECK(MPI_Barrier(inter) == MPI_SUCCESS);
  /* Side 0's rank 0 broadcasts to side 1, then side 1's last rank to side 0. */
  for (int root_side = 0; root_side < 2; ++root_side) {
    int value[3] = {-1, -1, -1};
    int root;
    if (side == root_side) {
      int local_size;
      MPI_Comm_size(inter, &local_size);
      const int sender = root_side == 0 ? 0 : local_size - 1;
      root = local_rank == sender ? MPI_ROOT : MPI_PROC_NULL;
      if (root == MPI_ROOT) value[0] = 100 + root_side, value[1] = 7, value[2] = 8;
    } else {
      root = root_side == 0 ? 0 : remote_size - 1;
    }
    CHECK(MPI_Bcast(value, 3, MPI_INT, root, inter) == MPI_SUCCESS);
    if (side != root_side) CHECK(value[0] == 100 + root_side && value[1] == 7 && value[2] == 8);
    if (side == root_side && root == MPI_PROC_NULL) CHECK(value[0] == -1);
  }
  CHECK(MPI_Barrier(inter) == MPI_SUCCESS);
  /* The other collectives: intercomm_coll_test.c. */
  int x = 1;
  CHECK(error_class(MPI_Bcast(&x, 1, MPI_INT, remote_size, inter)) == MPI_ERR_ROOT);
}

static void merge(MPI_Comm inter, int side, int local_rank, int local_size, int world_size) {
  for (int high_side = 0; high_side < 2; ++high_side) {
    MPI_Comm merged;
    CHECK(MPI_Intercomm_merge(inter, side == high_side, &merged) == MPI_SUCCESS);
    int rank = -1, size = -1, flag = -1;
    MPI_Comm_rank(merged, &rank);
    MPI_Comm_size(merged, &size);
    MPI_Comm_test_inter(merged, &flag);
    CHECK(size == world_size && flag == 0);
    /* The low group first. */
    const int low_size = side == high_side ? world_size - local_size : local_size;
    CHECK(rank == (side == high_side ? low_size + local_rank : local_rank));
    int sum = 0, one = 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    CHECK(sum == world_size);
    MPI_Comm_free(&merged);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm parent = MPI_COMM_WORLD;
  CHECK(MPI_Comm_get_parent(&parent) == MPI_SUCCESS && parent == MPI_COMM_NULL);
  if (size < 2) return finish("intercomm_test");

  const int side = rank % 2;
  MPI_Comm local;
  MPI_Comm_split(MPI_COMM_WORLD, side, rank, &local);
  MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
  int local_rank, local_size;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  /* The leaders are local rank 0 of each side: world ranks 0 and 1. */
  MPI_Comm inter;
  CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - side, 99, &inter) == MPI_SUCCESS);
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);

  int flag = -1, remote_size = -1, inter_rank = -1, inter_size = -1;
  CHECK(MPI_Comm_test_inter(inter, &flag) == MPI_SUCCESS && flag == 1);
  CHECK(MPI_Comm_remote_size(inter, &remote_size) == MPI_SUCCESS);
  CHECK(remote_size == (side == 0 ? size / 2 : (size + 1) / 2));
  MPI_Comm_rank(inter, &inter_rank);
  MPI_Comm_size(inter, &inter_size);
  CHECK(inter_rank == local_rank && inter_size == local_size);
  MPI_Group remote_group, world_group;
  CHECK(MPI_Comm_remote_group(inter, &remote_group) == MPI_SUCCESS);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  for (int r = 0; r < remote_size; ++r) {
    int w = -1;
    MPI_Group_translate_ranks(remote_group, 1, &r, world_group, &w);
    CHECK(w == world_of(1 - side, r));
  }
  MPI_Group_free(&remote_group);
  MPI_Group_free(&world_group);

  point_to_point(inter, side, local_rank, remote_size);
  collectives(inter, side, local_rank, remote_size);
  merge(inter, side, local_rank, local_size, size);

  /* A duplicate is an intercommunicator of its own. */
  MPI_Comm dup;
  CHECK(MPI_Comm_dup(inter, &dup) == MPI_SUCCESS);
  CHECK(MPI_Comm_test_inter(dup, &flag) == MPI_SUCCESS && flag == 1);
  int cmp = -1;
  CHECK(MPI_Comm_compare(dup, inter, &cmp) == MPI_SUCCESS && cmp == MPI_CONGRUENT);
  CHECK(MPI_Comm_compare(local, inter, &cmp) == MPI_SUCCESS && cmp == MPI_UNEQUAL);
  point_to_point(dup, side, local_rank, remote_size);
  CHECK(MPI_Barrier(dup) == MPI_SUCCESS);
  CHECK(MPI_Comm_disconnect(&dup) == MPI_SUCCESS && dup == MPI_COMM_NULL);

  /* Bad arguments. */
  int n = -1;
  MPI_Group g = MPI_GROUP_NULL;
  MPI_Comm bad = MPI_COMM_NULL;
  CHECK(error_class(MPI_Comm_remote_size(MPI_COMM_WORLD, &n)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_remote_group(local, &g)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_remote_size(MPI_COMM_NULL, &n)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Intercomm_merge(local, 0, &bad)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Intercomm_create(local, local_size, MPI_COMM_WORLD, 0, 1, &bad)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 0, -1, &bad)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Intercomm_create(inter, 0, MPI_COMM_WORLD, 0, 1, &bad)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Send(&n, 1, MPI_INT, remote_size, 0, inter)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Comm_disconnect(&bad)) == MPI_ERR_COMM);

  MPI_Comm world_dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &world_dup);
  CHECK(MPI_Comm_disconnect(&world_dup) == MPI_SUCCESS && world_dup == MPI_COMM_NULL);
  CHECK(MPI_Comm_free(&inter) == MPI_SUCCESS && inter == MPI_COMM_NULL);
  MPI_Comm_free(&local);
  return finish("intercomm_test");
}
