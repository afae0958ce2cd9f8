/* Handle conversions (issue 18): MPI_*_c2f / MPI_*_f2c for every kind of
 * handle, with Open MPI's fixed Fortran indices for the predefined objects
 * (mpif-handles.h: a program built with Open MPI's mpif.h compiles them in),
 * objects made by the program round-tripping, an invalid Fortran handle
 * giving the null handle, and MPI_Status_c2f / f2c with their error class. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* Open MPI's mpif-handles.h. */
static void predefined_indices(void) {
  CHECK(MPI_Comm_c2f(MPI_COMM_WORLD) == 0);
  CHECK(MPI_Comm_c2f(MPI_COMM_SELF) == 1);
  CHECK(MPI_Comm_c2f(MPI_COMM_NULL) == 2);
  CHECK(MPI_Comm_f2c(0) == MPI_COMM_WORLD && MPI_Comm_f2c(1) == MPI_COMM_SELF && MPI_Comm_f2c(2) == MPI_COMM_NULL);

  const struct {
    MPI_Datatype type;
    int index;
  } types[] = {{MPI_DATATYPE_NULL, 0}, {MPI_BYTE, 1},     {MPI_PACKED, 2},          {MPI_CHARACTER, 5},
               {MPI_LOGICAL, 6},       {MPI_INTEGER, 7},  {MPI_REAL, 13},           {MPI_DOUBLE_PRECISION, 17},
               {MPI_COMPLEX, 18},      {MPI_2INTEGER, 25}, {MPI_WCHAR, 33},          {MPI_CHAR, 34},
               {MPI_INT, 39},          {MPI_LONG, 41},    {MPI_LONG_LONG, 43},      {MPI_FLOAT, 45},
               {MPI_DOUBLE, 46},       {MPI_2INT, 52},    {MPI_CXX_BOOL, 54},       {MPI_INT64_T, 64},
               {MPI_AINT, 66},         {MPI_OFFSET, 67},  {MPI_C_DOUBLE_COMPLEX, 70}, {MPI_COUNT, 72}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    CHECK(MPI_Type_c2f(types[i].type) == types[i].index);
    CHECK(MPI_Type_f2c(types[i].index) == types[i].type);
  }
  /* Two C names of one object share its index. */
  CHECK(MPI_Type_c2f(MPI_LONG_LONG_INT) == 43 && MPI_Type_c2f(MPI_C_FLOAT_COMPLEX) == 69);

  const MPI_Op ops[] = {MPI_OP_NULL, MPI_MAX,  MPI_MIN,    MPI_SUM,    MPI_PROD,    MPI_LAND,  MPI_BAND, MPI_LOR,
                        MPI_BOR,     MPI_LXOR, MPI_BXOR,   MPI_MAXLOC, MPI_MINLOC,  MPI_REPLACE, MPI_NO_OP};
  for (int i = 0; i < (int)(sizeof ops / sizeof ops[0]); ++i) {
    CHECK(MPI_Op_c2f(ops[i]) == i);
    CHECK(MPI_Op_f2c(i) == ops[i]);
  }
  CHECK(MPI_Group_c2f(MPI_GROUP_NULL) == 0 && MPI_Group_c2f(MPI_GROUP_EMPTY) == 1);
  CHECK(MPI_Group_f2c(1) == MPI_GROUP_EMPTY);
  CHECK(MPI_Request_c2f(MPI_REQUEST_NULL) == 0 && MPI_Request_f2c(0) == MPI_REQUEST_NULL);
  CHECK(MPI_Errhandler_c2f(MPI_ERRHANDLER_NULL) == 0 && MPI_Errhandler_c2f(MPI_ERRORS_ARE_FATAL) == 1 &&
        MPI_Errhandler_c2f(MPI_ERRORS_RETURN) == 2);
  CHECK(MPI_Errhandler_f2c(2) == MPI_ERRORS_RETURN);
  CHECK(MPI_Info_c2f(MPI_INFO_NULL) == 0 && MPI_Info_c2f(MPI_INFO_ENV) == 1 && MPI_Info_f2c(1) == MPI_INFO_ENV);
  CHECK(MPI_Win_c2f(MPI_WIN_NULL) == 0 && MPI_Win_f2c(0) == MPI_WIN_NULL);
  CHECK(MPI_File_c2f(MPI_FILE_NULL) == 0 && MPI_File_f2c(0) == MPI_FILE_NULL);
  CHECK(MPI_Message_c2f(MPI_MESSAGE_NULL) == 0 && MPI_Message_c2f(MPI_MESSAGE_NO_PROC) == 1);
  CHECK(MPI_Message_f2c(1) == MPI_MESSAGE_NO_PROC);
}

/* A Fortran handle that names nothing converts to an invalid C handle (the
 * standard's words); as Open MPI, a null pointer, never another object. */
static void invalid_indices(void) {
  const MPI_Fint bad[] = {-1, 100000, -100000};
  for (int i = 0; i < 3; ++i) {
    CHECK(MPI_Comm_f2c(bad[i]) == NULL);
    CHECK(MPI_Type_f2c(bad[i]) == NULL);
    CHECK(MPI_Group_f2c(bad[i]) == NULL);
    CHECK(MPI_Request_f2c(bad[i]) == NULL);
    CHECK(MPI_Op_f2c(bad[i]) == NULL);
    CHECK(MPI_Info_f2c(bad[i]) == NULL);
    CHECK(MPI_Win_f2c(bad[i]) == NULL);
    CHECK(MPI_File_f2c(bad[i]) == NULL);
    CHECK(MPI_Errhandler_f2c(bad[i]) == NULL);
    CHECK(MPI_Message_f2c(bad[i]) == NULL);
  }
}

static void sum_ints(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

static void on_error(MPI_Comm* comm, int* code, ...) { (void)comm, (void)code; }

/* Objects the program makes get indices past the predefined ones, the same
 * index each time, and convert back to themselves; a converted handle works. */
static void program_objects(int rank, int size) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const MPI_Fint fdup = MPI_Comm_c2f(dup);
  CHECK(fdup > 2 && MPI_Comm_c2f(dup) == fdup);
  MPI_Comm back = MPI_Comm_f2c(fdup);
  CHECK(back == dup);
  int sum = 0, one = 1;
  CHECK(MPI_Allreduce(&one, &sum, 1, MPI_Type_f2c(MPI_Type_c2f(MPI_INT)), MPI_Op_f2c(3), back) == MPI_SUCCESS);
  CHECK(sum == size);

  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const MPI_Fint fpair = MPI_Type_c2f(pair);
  CHECK(fpair > 72 && MPI_Type_f2c(fpair) == pair);

  MPI_Group world_group, first;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  const int zero = 0;
  MPI_Group_incl(world_group, 1, &zero, &first);
  CHECK(MPI_Group_c2f(first) > 1 && MPI_Group_f2c(MPI_Group_c2f(first)) == first);
  CHECK(MPI_Group_c2f(first) != MPI_Group_c2f(world_group));

  MPI_Op op;
  MPI_Op_create(sum_ints, 1, &op);
  CHECK(MPI_Op_c2f(op) > 14 && MPI_Op_f2c(MPI_Op_c2f(op)) == op);

  MPI_Info info;
  MPI_Info_create(&info);
  CHECK(MPI_Info_c2f(info) > 1 && MPI_Info_f2c(MPI_Info_c2f(info)) == info);

  MPI_Errhandler handler;
  MPI_Comm_create_errhandler(on_error, &handler);
  CHECK(MPI_Errhandler_c2f(handler) > 2 && MPI_Errhandler_f2c(MPI_Errhandler_c2f(handler)) == handler);

  int cell = 0;
  MPI_Win win;
  MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  CHECK(MPI_Win_c2f(win) > 0 && MPI_Win_f2c(MPI_Win_c2f(win)) == win);
  MPI_Win_free(&win);

  /* A request through its Fortran handle, then waited on. */
  int out = rank, in = -1;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Request recv;
  MPI_Irecv(&in, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &recv);
  const MPI_Fint frecv = MPI_Request_c2f(recv);
  CHECK(frecv > 0);
  MPI_Send(&out, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
  MPI_Request again = MPI_Request_f2c(frecv);
  CHECK(again == recv);
  CHECK(MPI_Wait(&again, MPI_STATUS_IGNORE) == MPI_SUCCESS && in == left);

  /* A matched message. */
  MPI_Send(&out, 1, MPI_INT, 0, 8, MPI_COMM_SELF);
  MPI_Message message;
  MPI_Mprobe(0, 8, MPI_COMM_SELF, &message, MPI_STATUS_IGNORE);
  const MPI_Fint fmessage = MPI_Message_c2f(message);
  CHECK(fmessage > 1);
  MPI_Message same = MPI_Message_f2c(fmessage);
  CHECK(same == message);
  CHECK(MPI_Mrecv(&in, 1, MPI_INT, &same, MPI_STATUS_IGNORE) == MPI_SUCCESS && in == rank);

  MPI_Errhandler_free(&handler);
  MPI_Info_free(&info);
  MPI_Op_free(&op);
  MPI_Group_free(&first);
  MPI_Group_free(&world_group);
  MPI_Type_free(&pair);
  MPI_Comm_free(&dup);
}

static void statuses(void) {
  MPI_Status c, back;
  memset(&c, 0, sizeof c);
  int value = 42;
  MPI_Sendrecv(&value, 1, MPI_INT, 0, 5, &value, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &c);
  MPI_Fint f[sizeof(MPI_Status) / sizeof(MPI_Fint)]; /* MPI_STATUS_SIZE of mpif.h: 6 */
  CHECK(MPI_Status_c2f(&c, f) == MPI_SUCCESS);
  CHECK(f[0] == c.MPI_SOURCE && f[1] == c.MPI_TAG && f[2] == c.MPI_ERROR); /* MPI_SOURCE, MPI_TAG, MPI_ERROR */
  CHECK(MPI_Status_f2c(f, &back) == MPI_SUCCESS);
  int count = -1;
  MPI_Get_count(&back, MPI_INT, &count);
  CHECK(back.MPI_SOURCE == 0 && back.MPI_TAG == 5 && count == 1);
  CHECK(error_class(MPI_Status_c2f(MPI_STATUS_IGNORE, f)) == MPI_ERR_IN_STATUS);
  CHECK(error_class(MPI_Status_f2c(NULL, &back)) == MPI_ERR_IN_STATUS);
  CHECK(error_class(MPI_Status_c2f(&c, NULL)) == MPI_ERR_IN_STATUS);
}

int main(int argc, char** argv) {
  /* The predefined handles convert before MPI_Init too. */
  const int before_init = MPI_Comm_c2f(MPI_COMM_WORLD) == 0 && MPI_Type_c2f(MPI_DOUBLE) == 46;
  MPI_Init(&argc, &argv);
  CHECK(before_init);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  predefined_indices();
  invalid_indices();
  program_objects(rank, size);
  statuses();
  return finish("handles_test");
}
