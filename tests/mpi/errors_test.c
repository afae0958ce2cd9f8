/* Error handling. With no argument: bad arguments return the right error
 * class under MPI_ERRORS_RETURN. "fatal": a bad rank under the default
 * MPI_ERRORS_ARE_FATAL ends the job. "unsupported": a function outside the
 * subset ends the job naming itself. */
#include <string.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
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
