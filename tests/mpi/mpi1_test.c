/* The MPI-1 names old programs still call (issue 18), each as the MPI-2 call
 * it was renamed to: MPI_Address, Type_extent/lb/ub, Type_hvector,
 * Type_hindexed, Type_struct (a struct sent between ranks), Errhandler_create/
 * set/get; and MPI_Op_commutative, MPI_Pcontrol, Win_set/get_name and
 * Win_set/get_info; with the error class of bad arguments under MPI_ERRORS_RETURN. */
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0 /* Open MPI's mpi.h declares the MPI-1 names only when asked */
#include <stddef.h>
#include <string.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

struct particle {
  double position[3];
  int id;
  char tag;
};

static void datatypes(int rank, int size) {
  struct particle p;
  MPI_Aint base, id_at, tag_at;
  CHECK(MPI_Address(&p, &base) == MPI_SUCCESS);
  MPI_Address(&p.id, &id_at);
  MPI_Address(&p.tag, &tag_at);
  CHECK(id_at - base == offsetof(struct particle, id) && tag_at - base == offsetof(struct particle, tag));

  int lengths[3] = {3, 1, 1};
  MPI_Aint displacements[3] = {0, id_at - base, tag_at - base};
  MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, particle_type;
  CHECK(MPI_Type_struct(3, lengths, displacements, types, &particle_type) == MPI_SUCCESS);
  MPI_Datatype resized;
  MPI_Type_create_resized(particle_type, 0, sizeof(struct particle), &resized);
  MPI_Type_commit(&resized);
  MPI_Aint extent = 0, lb = -1, ub = 0;
  CHECK(MPI_Type_extent(resized, &extent) == MPI_SUCCESS && extent == sizeof(struct particle));
  CHECK(MPI_Type_lb(resized, &lb) == MPI_SUCCESS && lb == 0);
  CHECK(MPI_Type_ub(resized, &ub) == MPI_SUCCESS && ub == sizeof(struct particle));

  /* Two particles around the ring. */
  struct particle out[2], in[2];
  memset(in, 0, sizeof in);
  for (int i = 0; i < 2; ++i) {
    out[i].position[0] = rank, out[i].position[1] = i, out[i].position[2] = 0.5;
    out[i].id = 10 * rank + i;
    out[i].tag = (char)('a' + i);
  }
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Sendrecv(out, 2, resized, right, 0, in, 2, resized, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < 2; ++i)
    CHECK(in[i].position[0] == left && in[i].position[1] == i && in[i].id == 10 * left + i && in[i].tag == 'a' + i);

  /* hvector: every other int of 8; hindexed: ints 1 and 5. */
  int row[8], got[8];
  for (int i = 0; i < 8; ++i) row[i] = i + 100 * rank;
  MPI_Datatype every_other, two;
  CHECK(MPI_Type_hvector(4, 1, 2 * sizeof(int), MPI_INT, &every_other) == MPI_SUCCESS);
  MPI_Type_commit(&every_other);
  int hl[2] = {1, 1};
  MPI_Aint hd[2] = {1 * sizeof(int), 5 * sizeof(int)};
  CHECK(MPI_Type_hindexed(2, hl, hd, MPI_INT, &two) == MPI_SUCCESS);
  MPI_Type_commit(&two);
  MPI_Sendrecv(row, 1, every_other, 0, 1, got, 4, MPI_INT, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == 2 * i + 100 * rank);
  MPI_Sendrecv(row, 1, two, 0, 2, got, 2, MPI_INT, 0, 2, MPI_COMM_SELF, MPI_STATUS_IGNORE);
  CHECK(got[0] == 1 + 100 * rank && got[1] == 5 + 100 * rank);

  MPI_Datatype bad = MPI_DATATYPE_NULL;
  CHECK(error_class(MPI_Type_extent(MPI_DATATYPE_NULL, &extent)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_hvector(-1, 1, 8, MPI_INT, &bad)) == MPI_ERR_COUNT);
  CHECK(error_class(MPI_Type_struct(1, lengths, displacements, &bad, &bad)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Address(&p, NULL)) == MPI_ERR_ARG);

  MPI_Type_free(&every_other);
  MPI_Type_free(&two);
  MPI_Type_free(&resized);
  MPI_Type_free(&particle_type);
}

static int handled;
static void count_errors(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  int cls = -1;
  MPI_Error_class(*code, &cls);
  if (cls == MPI_ERR_RANK) ++handled;
}

static void errhandlers(int size) {
  MPI_Errhandler handler, current;
  CHECK(MPI_Errhandler_create(count_errors, &handler) == MPI_SUCCESS);
  CHECK(MPI_Errhandler_set(MPI_COMM_WORLD, handler) == MPI_SUCCESS);
  CHECK(MPI_Errhandler_get(MPI_COMM_WORLD, &current) == MPI_SUCCESS && current == handler);
  MPI_Errhandler_free(&current);
  int x = 0;
  MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
  CHECK(handled == 1);
  MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&handler);
  CHECK(error_class(MPI_Errhandler_set(MPI_COMM_NULL, MPI_ERRORS_RETURN)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Errhandler_get(MPI_COMM_WORLD, NULL)) == MPI_ERR_ARG);
}

static void max_abs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)in, (void)inout, (void)len, (void)type;
}

static void objects(int rank) {
  int commute = -1;
  CHECK(MPI_Op_commutative(MPI_SUM, &commute) == MPI_SUCCESS && commute == 1);
  MPI_Op op;
  MPI_Op_create(max_abs, 0, &op);
  CHECK(MPI_Op_commutative(op, &commute) == MPI_SUCCESS && commute == 0);
  MPI_Op_free(&op);
  CHECK(error_class(MPI_Op_commutative(MPI_OP_NULL, &commute)) == MPI_ERR_OP);

  CHECK(MPI_Pcontrol(0) == MPI_SUCCESS && MPI_Pcontrol(2, "anything") == MPI_SUCCESS);

  int cell = rank;
  MPI_Win win;
  MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  char name[MPI_MAX_OBJECT_NAME];
  int length = -1;
  CHECK(MPI_Win_get_name(win, name, &length) == MPI_SUCCESS && length == 0 && name[0] == '\0');
  CHECK(MPI_Win_set_name(win, "halo window") == MPI_SUCCESS);
  CHECK(MPI_Win_get_name(win, name, &length) == MPI_SUCCESS && length == 11 && strcmp(name, "halo window") == 0);

  MPI_Info info, used;
  MPI_Info_create(&info);
  MPI_Info_set(info, "no_locks", "true");
  CHECK(MPI_Win_set_info(win, info) == MPI_SUCCESS);
  CHECK(MPI_Win_get_info(win, &used) == MPI_SUCCESS);
  char value[MPI_MAX_INFO_VAL];
  int flag = 0;
  MPI_Info_get(used, "no_locks", MPI_MAX_INFO_VAL - 1, value, &flag);
  CHECK(flag && strcmp(value, "true") == 0);
  MPI_Info_free(&used);
  MPI_Info_free(&info);

  CHECK(error_class(MPI_Win_set_name(MPI_WIN_NULL, "x")) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_get_name(win, NULL, &length)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Win_set_info(win, MPI_INFO_NULL)) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Win_get_info(MPI_WIN_NULL, &used)) == MPI_ERR_WIN);
  MPI_Win_free(&win);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  datatypes(rank, size);
  errhandlers(size);
  objects(rank);
  return finish("mpi1_test");
}
