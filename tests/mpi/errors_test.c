/* Error handling. With no argument: bad arguments return the right error
 * class under MPI_ERRORS_RETURN (for groups and the v collectives, the
 * classes Open MPI 4 returns where it checks). "fatal": a bad rank under the default
 * MPI_ERRORS_ARE_FATAL ends the job. "unsupported": a function outside the
 * subset ends the job naming itself. "spawn": MPI_Comm_spawn under
 * MPI_ERRORS_ARE_FATAL ends the job saying why (dynamic processes fail with
 * MPI_ERR_SPAWN and MPI_ERR_UNSUPPORTED_OPERATION, tested in the default mode). */
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <mpi-ext.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* Dynamic processes fail with a class the program can test: a job cannot grow or meet another. */
static void dynamic_processes(void) {
  MPI_Comm spawned = MPI_COMM_WORLD, joined = MPI_COMM_WORLD;
  int codes[3] = {0, 0, 0};
  CHECK(error_class(MPI_Comm_spawn("x", MPI_ARGV_NULL, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &spawned, codes)) ==
        MPI_ERR_SPAWN);
  CHECK(spawned == MPI_COMM_NULL);
  CHECK(codes[0] == MPI_ERR_SPAWN && codes[1] == MPI_ERR_SPAWN && codes[2] == MPI_ERR_SPAWN);
  char* commands[2] = {"x", "y"};
  char** argvs[2] = {MPI_ARGV_NULL, MPI_ARGV_NULL};
  const int maxprocs[2] = {1, 1};
  const MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
  CHECK(error_class(MPI_Comm_spawn_multiple(2, commands, argvs, maxprocs, infos, 0, MPI_COMM_WORLD, &spawned,
                                            MPI_ERRCODES_IGNORE)) == MPI_ERR_SPAWN);
  char port[MPI_MAX_PORT_NAME] = "";
  CHECK(error_class(MPI_Open_port(MPI_INFO_NULL, port)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(error_class(MPI_Close_port(port)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(error_class(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &joined)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(joined == MPI_COMM_NULL);
  joined = MPI_COMM_WORLD;
  CHECK(error_class(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &joined)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(joined == MPI_COMM_NULL);
  CHECK(error_class(MPI_Publish_name("service", MPI_INFO_NULL, port)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(error_class(MPI_Unpublish_name("service", MPI_INFO_NULL, port)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(error_class(MPI_Lookup_name("service", MPI_INFO_NULL, port)) == MPI_ERR_UNSUPPORTED_OPERATION);
  CHECK(error_class(MPI_Comm_join(0, &joined)) == MPI_ERR_UNSUPPORTED_OPERATION);
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(MPI_ERR_SPAWN, text, &len);
  CHECK(strstr(text, "MPI_ERR_SPAWN") != NULL);
}

/* Ranks that are repeated or not in the group, in MPI_Group_incl and _excl. */
static void group_ranks(int size) {
  MPI_Group world, made = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int twice[2] = {0, 0}, outside[1] = {size}, negative[1] = {-1};
  CHECK(error_class(MPI_Group_incl(world, 2, twice, &made)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Group_incl(world, 1, outside, &made)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Group_incl(world, 1, negative, &made)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Group_incl(world, 1, NULL, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Group_excl(world, 2, twice, &made)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Group_excl(world, 1, outside, &made)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Group_excl(world, 1, NULL, &made)) == MPI_ERR_ARG);
  CHECK(made == MPI_GROUP_NULL);
  /* What is allowed: excluding rank 0 leaves the others in order. */
  const int zero[1] = {0};
  CHECK(MPI_Group_excl(world, 1, zero, &made) == MPI_SUCCESS);
  int made_size = -1, translated = -1, one = 1;
  MPI_Group_size(made, &made_size);
  CHECK(made_size == size - 1);
  if (size > 1) {
    MPI_Group_translate_ranks(world, 1, &one, made, &translated);
    CHECK(translated == 0);
  }
  MPI_Group_free(&made);
  CHECK(MPI_Group_excl(world, 0, NULL, &made) == MPI_SUCCESS);
  MPI_Group_size(made, &made_size);
  CHECK(made_size == size);
  MPI_Group_free(&made);
  MPI_Group_free(&world);
}

/* Count and displacement arrays that are significant must not be NULL. The
 * rooted cases run on MPI_COMM_SELF, where the failing rank is the only one. */
static void null_arrays(int rank, int size) {
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int buf[4] = {0}, got[4] = {0};
  const int counts[1] = {1}, displs[1] = {0};
  CHECK(error_class(MPI_Scatterv(buf, NULL, displs, MPI_INT, got, 1, MPI_INT, 0, MPI_COMM_SELF)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Scatterv(buf, counts, NULL, MPI_INT, got, 1, MPI_INT, 0, MPI_COMM_SELF)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Gatherv(buf, 1, MPI_INT, got, NULL, displs, MPI_INT, 0, MPI_COMM_SELF)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Gatherv(buf, 1, MPI_INT, got, counts, NULL, MPI_INT, 0, MPI_COMM_SELF)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Allgatherv(buf, 1, MPI_INT, got, NULL, displs, MPI_INT, MPI_COMM_SELF)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Allgatherv(buf, 1, MPI_INT, got, counts, NULL, MPI_INT, MPI_COMM_SELF)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Alltoallv(buf, NULL, displs, MPI_INT, got, counts, displs, MPI_INT, MPI_COMM_SELF)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Alltoallv(buf, counts, NULL, MPI_INT, got, counts, displs, MPI_INT, MPI_COMM_SELF)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Alltoallv(buf, counts, displs, MPI_INT, got, NULL, displs, MPI_INT, MPI_COMM_SELF)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Alltoallv(buf, counts, displs, MPI_INT, got, counts, NULL, MPI_INT, MPI_COMM_SELF)) ==
        MPI_ERR_ARG);
  /* In place, the send arrays are not read. */
  got[0] = 5;
  CHECK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_INT, got, counts, displs, MPI_INT, MPI_COMM_SELF) == MPI_SUCCESS);
  CHECK(got[0] == 5);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);

  /* Away from the root the arrays are not significant: NULL is fine and the data arrives. */
  const int root = size - 1;
  int* all_counts = malloc(sizeof(int) * (size_t)size);
  int* all_displs = malloc(sizeof(int) * (size_t)size);
  int* all = malloc(sizeof(int) * (size_t)size * 2);
  for (int r = 0; r < size; ++r) all_counts[r] = 2, all_displs[r] = 2 * r, all[2 * r] = 10 * r, all[2 * r + 1] = 10 * r + 1;
  const int is_root = rank == root;
  int mine[2] = {-1, -1};
  CHECK(MPI_Scatterv(is_root ? all : NULL, is_root ? all_counts : NULL, is_root ? all_displs : NULL, MPI_INT, mine, 2,
                     MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(mine[0] == 10 * rank && mine[1] == 10 * rank + 1);
  mine[0] += 1000;
  mine[1] += 1000;
  memset(all, 0, sizeof(int) * (size_t)size * 2);
  CHECK(MPI_Gatherv(mine, 2, MPI_INT, is_root ? all : NULL, is_root ? all_counts : NULL, is_root ? all_displs : NULL,
                    MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS);
  if (is_root)
    for (int r = 0; r < size; ++r) CHECK(all[2 * r] == 10 * r + 1000 && all[2 * r + 1] == 10 * r + 1001);
  free(all_counts);
  free(all_displs);
  free(all);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, v = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    MPI_Send(&v, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
    return 0; /* not reached */
  }
  if (argc > 1 && strcmp(argv[1], "unsupported") == 0) {
    /* What the program wrote before the stop, still in stdio's buffers
     * (stdout is a pipe under viarun, a file is fully buffered), reaches
     * its destination. */
    printf("written to stdout before the stop\n");
    FILE* results = argc > 2 ? fopen(argv[2], "w") : NULL;
    if (results) fprintf(results, "written to a file before the stop\n");
    MPIX_Query_cuda_support();
    return 0; /* not reached */
  }
  if (argc > 1 && strcmp(argv[1], "spawn") == 0) {
    MPI_Comm_spawn("x", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, NULL, MPI_ERRCODES_IGNORE);
    return 0; /* not reached */
  }

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Errhandler handler;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
  CHECK(handler == MPI_ERRORS_RETURN);
  CHECK(error_class(MPI_Send(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Send(&v, 1, MPI_INT, -7, 0, MPI_COMM_WORLD)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Recv(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Send(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Send(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD)) == MPI_ERR_TAG);
  CHECK(error_class(MPI_Send(&v, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Send(NULL, 3, MPI_INT, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
  CHECK(error_class(MPI_Bcast(&v, 1, MPI_INT, size, MPI_COMM_WORLD)) == MPI_ERR_ROOT);
  CHECK(error_class(MPI_Allreduce(&v, &rank, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD)) == MPI_ERR_OP);
  CHECK(error_class(MPI_Allreduce(&v, &rank, 1, MPI_BYTE, MPI_MAXLOC, MPI_COMM_WORLD)) == MPI_ERR_OP);
  MPI_Datatype uncommitted;
  MPI_Type_contiguous(2, MPI_INT, &uncommitted);
  CHECK(error_class(MPI_Send(&v, 1, uncommitted, 0, 0, MPI_COMM_WORLD)) == MPI_ERR_TYPE);
  MPI_Type_free(&uncommitted);
  /* MPI_COMM_NULL has no handler of its own: MPI_COMM_WORLD's (now "return") applies. */
  int r;
  CHECK(error_class(MPI_Comm_rank(MPI_COMM_NULL, &r)) == MPI_ERR_COMM);
  MPI_Request bogus = (MPI_Request)&v;
  CHECK(error_class(MPI_Wait(&bogus, MPI_STATUS_IGNORE)) == MPI_ERR_REQUEST);

  group_ranks(size);
  null_arrays(rank, size);
  dynamic_processes();

  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(MPI_ERR_TRUNCATE, text, &len);
  CHECK(len > 0 && strstr(text, "truncated") != NULL);
  CHECK(error_class(MPI_ERR_RANK) == MPI_ERR_RANK);

  int version, subversion;
  MPI_Get_version(&version, &subversion);
  CHECK(version == 3 && subversion == 1);
  int flag = 0;
  MPI_Initialized(&flag);
  CHECK(flag);
  double t0 = MPI_Wtime();
  CHECK(MPI_Wtime() >= t0 && MPI_Wtick() > 0);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  return finish("errors_test");
}
