/* Fortran handles from C (MPI-3.1 17.2.4): the predefined objects have
 * Open MPI's Fortran numbers (what mpif.h and the mpi modules compile into
 * Fortran programs); a program's object gets a number that converts back to
 * it, until it is freed; a number no object has converts to a null pointer;
 * statuses convert both ways. */
#include <mpi.h>
#include <string.h>

#include "check.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  /* Open MPI's numbers (mpif-handles.h). */
  CHECK(MPI_Comm_c2f(MPI_COMM_WORLD) == 0);
  CHECK(MPI_Comm_c2f(MPI_COMM_SELF) == 1);
  CHECK(MPI_Comm_c2f(MPI_COMM_NULL) == 2);
  CHECK(MPI_Type_c2f(MPI_INTEGER) == 7);
  CHECK(MPI_Type_c2f(MPI_DOUBLE_PRECISION) == 17);
  CHECK(MPI_Type_c2f(MPI_INT) == 39);
  CHECK(MPI_Type_c2f(MPI_C_COMPLEX) == 69 && MPI_Type_c2f(MPI_C_FLOAT_COMPLEX) == 69);
  CHECK(MPI_Type_c2f(MPI_COUNT) == 72);
  CHECK(MPI_Op_c2f(MPI_SUM) == 3 && MPI_Op_c2f(MPI_NO_OP) == 14);
  CHECK(MPI_Group_c2f(MPI_GROUP_EMPTY) == 1);
  CHECK(MPI_Request_c2f(MPI_REQUEST_NULL) == 0);
  CHECK(MPI_Errhandler_c2f(MPI_ERRORS_RETURN) == 2);
  CHECK(MPI_Info_c2f(MPI_INFO_ENV) == 1);
  CHECK(MPI_Win_c2f(MPI_WIN_NULL) == 0 && MPI_File_c2f(MPI_FILE_NULL) == 0);
  CHECK(MPI_Message_c2f(MPI_MESSAGE_NO_PROC) == 1);
  CHECK(MPI_Comm_f2c(0) == MPI_COMM_WORLD && MPI_Type_f2c(46) == MPI_DOUBLE && MPI_Op_f2c(1) == MPI_MAX);

  /* A program's objects: numbered past the predefined ones, converted back, numbers reused once freed. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const MPI_Fint dup_number = MPI_Comm_c2f(dup);
  CHECK(dup_number > 2 && MPI_Comm_c2f(dup) == dup_number && MPI_Comm_f2c(dup_number) == dup);
  MPI_Comm_free(&dup);
  CHECK(MPI_Comm_f2c(dup_number) == NULL);
  MPI_Comm again;
  MPI_Comm_dup(MPI_COMM_WORLD, &again);
  CHECK(MPI_Comm_c2f(again) == dup_number && MPI_Comm_f2c(dup_number) == again);
  MPI_Comm_free(&again);

  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  const MPI_Fint pair_number = MPI_Type_c2f(pair);
  CHECK(pair_number > 72 && MPI_Type_f2c(pair_number) == pair);
  MPI_Type_free(&pair);
  CHECK(MPI_Type_f2c(pair_number) == NULL);

  int value = rank;
  MPI_Request request;
  MPI_Isend(&value, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &request);
  const MPI_Fint request_number = MPI_Request_c2f(request);
  CHECK(request_number > 0 && MPI_Request_f2c(request_number) == request);
  int got = -1;
  MPI_Recv(&got, 1, MPI_INT, 0, 3, MPI_COMM_SELF, MPI_STATUS_IGNORE);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  CHECK(got == rank && MPI_Request_f2c(request_number) == NULL);

  /* Numbers no object has, and handles that are not ones. */
  CHECK(MPI_Comm_f2c(-1) == NULL && MPI_Comm_f2c(1 << 20) == NULL && MPI_Type_f2c(-5) == NULL);
  CHECK(MPI_Comm_c2f(NULL) == -1 && MPI_Comm_c2f((MPI_Comm)MPI_INT) == -1);

  /* Statuses: a Fortran status is the C status's six integers. */
  MPI_Status status = {.MPI_SOURCE = 5, .MPI_TAG = 6, .MPI_ERROR = MPI_SUCCESS};
  MPI_Fint fortran_status[6];
  CHECK(MPI_Status_c2f(&status, fortran_status) == MPI_SUCCESS);
  MPI_Status back;
  memset(&back, 0xff, sizeof back);
  CHECK(MPI_Status_f2c(fortran_status, &back) == MPI_SUCCESS);
  CHECK(back.MPI_SOURCE == 5 && back.MPI_TAG == 6 && back.MPI_ERROR == MPI_SUCCESS);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK(MPI_Status_c2f(MPI_STATUS_IGNORE, fortran_status) == MPI_ERR_IN_STATUS);
  CHECK(MPI_Status_f2c(MPI_F_STATUS_IGNORE, &back) == MPI_ERR_IN_STATUS);
  CHECK(MPI_F_STATUS_IGNORE != NULL && MPI_F_STATUSES_IGNORE != NULL);

  return finish("handles_test");
}
