/* Communicators made from an intercommunicator (MPI-3.1 6.4.2): Comm_split,
 * Comm_create and Comm_split_type give an intercommunicator between the parts
 * of the two groups that belong together (the same color, the groups given,
 * the same node), each part ordered by key; MPI_COMM_NULL to a process left
 * out and to a part whose other side is empty. Comm_dup and Comm_idup of one.
 * Each result is checked by its groups and used: an intercommunicator
 * Allreduce of world ranks gives each side the sum over the other.
 * The sides: world ranks 0,1 | 2,3 | 4,5 ... alternate (2 ranks: 0 | 1). Any
 * layout of ranks on nodes. Needs 2 ranks or more. */
#include <stdlib.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

static int world_size;
static int* side_of;  /* by world rank */

static int side_of_rank(int world_rank) { return world_size == 2 ? world_rank : (world_rank / 2) % 2; }

/* Checks that `made` joins exactly `local[0..nl)` and `remote[0..nr)` (world ranks, in rank order),
 * or is MPI_COMM_NULL when either is empty or this process is not in `local`; frees it. */
static void check_made(MPI_Comm made, const int* local, int nl, const int* remote, int nr, int me) {
  int in_local = -1;
  for (int i = 0; i < nl; ++i)
    if (local[i] == me) in_local = i;
  if (in_local < 0 || nl == 0 || nr == 0) {
    CHECK(made == MPI_COMM_NULL);
    if (made != MPI_COMM_NULL) MPI_Comm_free(&made);
    return;
  }
  CHECK(made != MPI_COMM_NULL);
  if (made == MPI_COMM_NULL) return;
  int flag = 0, rank = -1, size = -1, remote_size = -1;
  MPI_Comm_test_inter(made, &flag);
  MPI_Comm_rank(made, &rank);
  MPI_Comm_size(made, &size);
  MPI_Comm_remote_size(made, &remote_size);
  CHECK(flag == 1 && rank == in_local && size == nl && remote_size == nr);
  MPI_Group group, world_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Comm_remote_group(made, &group);
  for (int r = 0; r < nr; ++r) {
    int w = -1;
    MPI_Group_translate_ranks(group, 1, &r, world_group, &w);
    CHECK(w == remote[r]);
  }
  MPI_Group_free(&group);
  MPI_Comm_group(made, &group);
  for (int r = 0; r < nl; ++r) {
    int w = -1;
    MPI_Group_translate_ranks(group, 1, &r, world_group, &w);
    CHECK(w == local[r]);
  }
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  long mine = me, sum = -1, expected = 0;
  for (int r = 0; r < nr; ++r) expected += remote[r];
  CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, made) == MPI_SUCCESS);
  CHECK(sum == expected);
  CHECK(MPI_Comm_free(&made) == MPI_SUCCESS);
}

/* The world ranks of side `side` whose value in `by_world` is `value`, ordered by key then world rank. */
static int members(int side, const int* by_world, int value, const int* key_by_world, int* out) {
  int n = 0;
  for (int w = 0; w < world_size; ++w)
    if (side_of[w] == side && by_world[w] == value) {
      int at = n++;
      while (at > 0 && key_by_world[out[at - 1]] > key_by_world[w]) out[at] = out[at - 1], --at;
      out[at] = w;
    }
  return n;
}

/* Every rank's color and key, gathered, then Comm_split on the intercommunicator. */
static void split(MPI_Comm inter, int me, int color, int key) {
  int* colors = malloc(sizeof(int) * (size_t)world_size);
  int* keys = malloc(sizeof(int) * (size_t)world_size);
  int* local = malloc(sizeof(int) * (size_t)world_size);
  int* remote = malloc(sizeof(int) * (size_t)world_size);
  MPI_Allgather(&color, 1, MPI_INT, colors, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgather(&key, 1, MPI_INT, keys, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Comm made = MPI_COMM_NULL;
  CHECK(MPI_Comm_split(inter, color, key, &made) == MPI_SUCCESS);
  const int side = side_of[me];
  const int nl = color == MPI_UNDEFINED ? 0 : members(side, colors, color, keys, local);
  const int nr = color == MPI_UNDEFINED ? 0 : members(1 - side, colors, color, keys, remote);
  check_made(made, local, nl, remote, nr, me);
  free(colors), free(keys), free(local), free(remote);
}

/* Comm_create: each side gives the group of its members that `keep` selects (by world rank). */
static void create(MPI_Comm inter, int me, int (*keep)(int world_rank)) {
  MPI_Group local_group, chosen;
  MPI_Comm_group(inter, &local_group);
  int n = 0, size;
  MPI_Group_size(local_group, &size);
  int* ranks = malloc(sizeof(int) * (size_t)size);
  int* local = malloc(sizeof(int) * (size_t)world_size);
  int* remote = malloc(sizeof(int) * (size_t)world_size);
  int nl = 0, nr = 0, local_rank = 0;
  for (int w = 0; w < world_size; ++w) {
    const int mine = side_of[w] == side_of[me];
    /* A side's local ranks follow its world ranks. */
    if (keep(w) && mine) ranks[n++] = local_rank, local[nl++] = w;
    if (keep(w) && !mine) remote[nr++] = w;
    local_rank += mine;
  }
  MPI_Group_incl(local_group, n, ranks, &chosen);
  MPI_Comm made = MPI_COMM_NULL;
  CHECK(MPI_Comm_create(inter, chosen, &made) == MPI_SUCCESS);
  check_made(made, local, nl, remote, nr, me);
  MPI_Group_free(&chosen);
  MPI_Group_free(&local_group);
  free(ranks), free(local), free(remote);
}
static int keep_all_but_world_0(int w) { return w != 0; }
static int keep_side_0_only(int w) { return side_of[w] == 0; }
static int keep_first_of_each_side(int w) { return w < 2 || (world_size > 2 && w == 2); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size < 2) return finish("intercomm_split_test");
  side_of = malloc(sizeof(int) * (size_t)world_size);
  for (int w = 0; w < world_size; ++w) side_of[w] = side_of_rank(w);
  const int side = side_of[me];

  MPI_Comm local_comm, inter;
  MPI_Comm_split(MPI_COMM_WORLD, side, me, &local_comm);
  int local_rank;
  MPI_Comm_rank(local_comm, &local_rank);
  /* The leaders: world ranks 0 and the first of side 1. */
  const int other_leader = side == 0 ? (world_size == 2 ? 1 : 2) : 0;
  CHECK(MPI_Intercomm_create(local_comm, 0, MPI_COMM_WORLD, other_leader, 7, &inter) == MPI_SUCCESS);
  MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);

  /* Two colors by local rank, keys reversing the order; a color side 0 alone has (for its third member). */
  split(inter, me, side == 0 && local_rank == 2 ? 5 : local_rank % 2, -me);
  /* One color; side 1's first member stays out. */
  split(inter, me, side == 1 && local_rank == 0 ? MPI_UNDEFINED : 0, me % 3);
  /* Side 1 stays out entirely: MPI_COMM_NULL everywhere. */
  split(inter, me, side == 1 ? MPI_UNDEFINED : 3, 0);

  create(inter, me, keep_all_but_world_0);
  create(inter, me, keep_first_of_each_side);
  create(inter, me, keep_side_0_only);  /* side 1 gives MPI_GROUP_EMPTY */

  /* Shared memory: the parts on each node, from MPI_COMM_WORLD's split by node. */
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Group node_group, world_group;
  MPI_Comm_group(node, &node_group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int zero = 0, node_id = -1;
  MPI_Group_translate_ranks(node_group, 1, &zero, world_group, &node_id);
  MPI_Group_free(&node_group);
  MPI_Group_free(&world_group);
  MPI_Comm_free(&node);
  {
    int* node_of = malloc(sizeof(int) * (size_t)world_size);
    int* keys = malloc(sizeof(int) * (size_t)world_size);
    int* local = malloc(sizeof(int) * (size_t)world_size);
    int* remote = malloc(sizeof(int) * (size_t)world_size);
    const int key = world_size - me;
    MPI_Allgather(&node_id, 1, MPI_INT, node_of, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgather(&key, 1, MPI_INT, keys, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Comm made = MPI_COMM_NULL;
    CHECK(MPI_Comm_split_type(inter, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &made) == MPI_SUCCESS);
    check_made(made, local, members(side, node_of, node_id, keys, local), remote,
               members(1 - side, node_of, node_id, keys, remote), me);
    /* MPI_UNDEFINED on side 0: nobody gets one. */
    CHECK(MPI_Comm_split_type(inter, side == 0 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &made) ==
          MPI_SUCCESS);
    CHECK(made == MPI_COMM_NULL);
    free(node_of), free(keys), free(local), free(remote);
  }

  /* Dup and idup of an intercommunicator are intercommunicators over the same groups. */
  {
    int* local = malloc(sizeof(int) * (size_t)world_size);
    int* remote = malloc(sizeof(int) * (size_t)world_size);
    int nl = 0, nr = 0;
    for (int w = 0; w < world_size; ++w) {
      if (side_of[w] == side) local[nl++] = w;
      else remote[nr++] = w;
    }
    MPI_Comm dup = MPI_COMM_NULL;
    CHECK(MPI_Comm_dup(inter, &dup) == MPI_SUCCESS);
    check_made(dup, local, nl, remote, nr, me);
    MPI_Request request;
    CHECK(MPI_Comm_idup(inter, &dup, &request) == MPI_SUCCESS);
    CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    check_made(dup, local, nl, remote, nr, me);
    free(local), free(remote);
  }

  /* A group with members outside the local group (on both sides, so neither waits for the other). */
  MPI_Group everyone;
  MPI_Comm_group(MPI_COMM_WORLD, &everyone);
  MPI_Comm bad = MPI_COMM_NULL;
  CHECK(error_class(MPI_Comm_create(inter, everyone, &bad)) == MPI_ERR_GROUP && bad == MPI_COMM_NULL);
  MPI_Group_free(&everyone);
  CHECK(error_class(MPI_Comm_split(inter, -2, 0, &bad)) == MPI_ERR_ARG);

  /* The intercommunicator still works after all that. */
  long mine = me, sum = -1, expected = 0;
  for (int w = 0; w < world_size; ++w)
    if (side_of[w] != side) expected += w;
  CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, inter) == MPI_SUCCESS && sum == expected);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local_comm);
  free(side_of);
  return finish("intercomm_split_test");
}
