/* Groups and the communicators made from them (issue 18): Group_compare,
 * union, intersection, difference, range_incl, range_excl; Comm_split_type
 * (MPI_COMM_TYPE_SHARED: the ranks of one node, as the job's layout says), Comm_create_group
 * (collective over the group only), Comm_idup; and the error class of each
 * bad argument under MPI_ERRORS_RETURN. */
#include <stdlib.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

static int group_size(MPI_Group g) {
  int n = -1;
  MPI_Group_size(g, &n);
  return n;
}

/* The world rank of each member of g, in order. */
static void world_ranks_of(MPI_Group g, MPI_Group world, int* out) {
  const int n = group_size(g);
  int* ranks = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; ++i) ranks[i] = i;
  MPI_Group_translate_ranks(g, n, ranks, world, out);
  free(ranks);
}

static void algebra(int size) {
  MPI_Group world, evens, odds, firsts, reversed, result;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int* ranks = malloc(sizeof(int) * (size_t)size);
  int* got = malloc(sizeof(int) * (size_t)size);
  int n = 0;
  for (int r = 0; r < size; r += 2) ranks[n++] = r;
  MPI_Group_incl(world, n, ranks, &evens);
  MPI_Group_excl(world, n, ranks, &odds);
  for (int r = 0; r < size; ++r) ranks[r] = size - 1 - r;
  MPI_Group_incl(world, size, ranks, &reversed);
  const int half = (size + 1) / 2;
  for (int r = 0; r < half; ++r) ranks[r] = r;
  MPI_Group_incl(world, half, ranks, &firsts);

  int cmp = -1;
  CHECK(MPI_Group_compare(world, world, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
  CHECK(MPI_Group_compare(world, reversed, &cmp) == MPI_SUCCESS && cmp == (size > 1 ? MPI_SIMILAR : MPI_IDENT));
  if (size > 1) CHECK(MPI_Group_compare(world, evens, &cmp) == MPI_SUCCESS && cmp == MPI_UNEQUAL);

  /* Union: the first group's members, then the second's others, in their order. */
  CHECK(MPI_Group_union(odds, evens, &result) == MPI_SUCCESS && group_size(result) == size);
  world_ranks_of(result, world, got);
  int k = 0;
  for (int r = 1; r < size; r += 2) CHECK(got[k++] == r);
  for (int r = 0; r < size; r += 2) CHECK(got[k++] == r);
  MPI_Group_free(&result);
  CHECK(MPI_Group_union(evens, evens, &result) == MPI_SUCCESS);
  CHECK(MPI_Group_compare(result, evens, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
  MPI_Group_free(&result);

  /* Intersection and difference keep the first group's order. */
  CHECK(MPI_Group_intersection(reversed, firsts, &result) == MPI_SUCCESS && group_size(result) == half);
  world_ranks_of(result, world, got);
  for (int i = 0; i < half; ++i) CHECK(got[i] == half - 1 - i);
  MPI_Group_free(&result);
  CHECK(MPI_Group_intersection(evens, odds, &result) == MPI_SUCCESS && result == MPI_GROUP_EMPTY);
  CHECK(MPI_Group_difference(world, firsts, &result) == MPI_SUCCESS && group_size(result) == size - half);
  world_ranks_of(result, world, got);
  for (int i = 0; i < size - half; ++i) CHECK(got[i] == half + i);
  if (result != MPI_GROUP_EMPTY) MPI_Group_free(&result);
  CHECK(MPI_Group_difference(evens, world, &result) == MPI_SUCCESS && result == MPI_GROUP_EMPTY);

  /* Ranges: (0, size-1, 2) are the evens; a descending range; excl of the same. */
  int range[2][3] = {{0, size - 1, 2}, {0, 0, 1}};
  CHECK(MPI_Group_range_incl(world, 1, range, &result) == MPI_SUCCESS);
  CHECK(MPI_Group_compare(result, evens, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
  MPI_Group_free(&result);
  CHECK(MPI_Group_range_excl(world, 1, range, &result) == MPI_SUCCESS);
  CHECK(MPI_Group_compare(result, odds, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
  if (result != MPI_GROUP_EMPTY) MPI_Group_free(&result);
  int down[1][3] = {{size - 1, 0, -1}};
  CHECK(MPI_Group_range_incl(world, 1, down, &result) == MPI_SUCCESS);
  CHECK(MPI_Group_compare(result, reversed, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
  MPI_Group_free(&result);

  /* Bad arguments. */
  MPI_Group bad = MPI_GROUP_NULL;
  CHECK(error_class(MPI_Group_compare(MPI_GROUP_NULL, world, &cmp)) == MPI_ERR_GROUP);
  CHECK(error_class(MPI_Group_union(world, MPI_GROUP_NULL, &result)) == MPI_ERR_GROUP);
  CHECK(error_class(MPI_Group_intersection(world, world, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Group_difference(MPI_GROUP_NULL, world, &result)) == MPI_ERR_GROUP);
  int outside[1][3] = {{0, size, 1}};
  CHECK(error_class(MPI_Group_range_incl(world, 1, outside, &bad)) == MPI_ERR_RANK);
  int zero_stride[1][3] = {{0, 0, 0}};
  CHECK(error_class(MPI_Group_range_excl(world, 1, zero_stride, &bad)) == MPI_ERR_RANK);
  int twice[2][3] = {{0, 0, 1}, {0, 0, 1}};
  CHECK(error_class(MPI_Group_range_incl(world, 2, twice, &bad)) == MPI_ERR_RANK);
  if (size > 1) {
    int away[1][3] = {{0, 1, -1}};
    CHECK(error_class(MPI_Group_range_incl(world, 1, away, &bad)) == MPI_ERR_RANK);
  }
  CHECK(error_class(MPI_Group_range_incl(world, -1, range, &bad)) == MPI_ERR_ARG);
  CHECK(bad == MPI_GROUP_NULL);

  MPI_Group_free(&evens);
  MPI_Group_free(&odds);
  MPI_Group_free(&firsts);
  MPI_Group_free(&reversed);
  MPI_Group_free(&world);
  free(ranks);
  free(got);
}

/* nodes: how many hosts viarun placed the ranks on, round-robin (VIASTACK_NODES). */
static void split_type(int rank, int size, int nodes) {
  MPI_Comm node;
  CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, &node) == MPI_SUCCESS);
  int node_rank = -1, node_size = -1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  /* The members of this rank's node; the key -rank orders them backwards. */
  int expected_size = 0, expected_rank = 0, expected_sum = 0;
  for (int r = 0; r < size; ++r) {
    if (r % nodes != rank % nodes) continue;
    ++expected_size;
    expected_sum += r;
    if (r > rank) ++expected_rank;
  }
  CHECK(node_size == expected_size);
  CHECK(node_rank == expected_rank);
  /* It works: a sum over the node. */
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, node);
  CHECK(sum == expected_sum);
  MPI_Comm_free(&node);

  MPI_Comm none = MPI_COMM_WORLD;
  CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, rank % 2 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &none) == MPI_SUCCESS);
  CHECK((rank % 2) ? none == MPI_COMM_NULL : none != MPI_COMM_NULL);
  if (none != MPI_COMM_NULL) MPI_Comm_free(&none);

  MPI_Comm bad = MPI_COMM_NULL;
  CHECK(error_class(MPI_Comm_split_type(MPI_COMM_WORLD, 12345, 0, MPI_INFO_NULL, &bad)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_split_type(MPI_COMM_NULL, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &bad)) ==
        MPI_ERR_COMM);
}

/* Only the even ranks call MPI_Comm_create_group; the odd ones meanwhile make
 * their own with another tag, and then everyone meets in a barrier. */
static void create_group(int rank, int size) {
  MPI_Group world, mine;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int* members = malloc(sizeof(int) * (size_t)size);
  int n = 0;
  for (int r = rank % 2; r < size; r += 2) members[n++] = r;
  MPI_Group_incl(world, n, members, &mine);
  MPI_Comm comm = MPI_COMM_NULL;
  CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, mine, rank % 2 ? 11 : 10, &comm) == MPI_SUCCESS);
  CHECK(comm != MPI_COMM_NULL);
  int comm_rank = -1, comm_size = -1;
  MPI_Comm_rank(comm, &comm_rank);
  MPI_Comm_size(comm, &comm_size);
  CHECK(comm_size == n && comm_rank == rank / 2);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm);
  int expected = 0;
  for (int i = 0; i < n; ++i) expected += members[i];
  CHECK(sum == expected);
  /* Its traffic stays apart from MPI_COMM_WORLD's. */
  if (comm_size > 1) {
    const int peer = comm_rank ^ 1;
    if (peer < comm_size) {
      int got = -1;
      MPI_Sendrecv(&rank, 1, MPI_INT, peer, 0, &got, 1, MPI_INT, peer, 0, comm, MPI_STATUS_IGNORE);
      CHECK(got == members[peer]);
    }
  }
  MPI_Comm_free(&comm);
  MPI_Barrier(MPI_COMM_WORLD);

  /* A group this rank is not in gives MPI_COMM_NULL at once. */
  MPI_Group others;
  const int zero = 0;
  MPI_Group_excl(world, 1, &zero, &others);
  if (rank == 0) {
    MPI_Comm null_comm = MPI_COMM_WORLD;
    CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, others, 3, &null_comm) == MPI_SUCCESS && null_comm == MPI_COMM_NULL);
  } else {
    MPI_Comm rest;
    CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, others, 3, &rest) == MPI_SUCCESS && rest != MPI_COMM_NULL);
    MPI_Barrier(rest);
    MPI_Comm_free(&rest);
  }

  MPI_Comm bad = MPI_COMM_NULL;
  CHECK(error_class(MPI_Comm_create_group(MPI_COMM_WORLD, mine, -1, &bad)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Comm_create_group(MPI_COMM_WORLD, MPI_GROUP_NULL, 0, &bad)) == MPI_ERR_GROUP);
  CHECK(error_class(MPI_Comm_create_group(MPI_COMM_NULL, mine, 0, &bad)) == MPI_ERR_COMM);
  if (size > 1) {
    /* A group with a member outside the communicator. */
    MPI_Comm self_comm = MPI_COMM_NULL;
    CHECK(error_class(MPI_Comm_create_group(MPI_COMM_SELF, world, 0, &self_comm)) == MPI_ERR_GROUP);
  }
  MPI_Group_free(&others);
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  free(members);
}

static void idup(int rank, int size) {
  MPI_Comm dup;
  MPI_Request request;
  CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request) == MPI_SUCCESS);
  MPI_Status status;
  CHECK(MPI_Wait(&request, &status) == MPI_SUCCESS && request == MPI_REQUEST_NULL);
  int cmp = -1;
  MPI_Comm_compare(dup, MPI_COMM_WORLD, &cmp);
  CHECK(cmp == MPI_CONGRUENT);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, dup);
  CHECK(sum == size * (size - 1) / 2);
  MPI_Comm_free(&dup);
  CHECK(error_class(MPI_Comm_idup(MPI_COMM_NULL, &dup, &request)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_idup(MPI_COMM_WORLD, &dup, NULL)) == MPI_ERR_ARG);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* nodes = getenv("VIASTACK_NODES");
  algebra(size);
  split_type(rank, size, nodes && atoi(nodes) > 0 ? atoi(nodes) : 1);
  create_group(rank, size);
  idup(rank, size);
  return finish("groups_test");
}
