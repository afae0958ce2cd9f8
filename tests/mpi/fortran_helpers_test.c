/* The Fortran-callable predefined callbacks and F90 helpers Open MPI's libmpi
 * exports (what mpif.h's `external MPI_COMM_DUP_FN` & co. name), called here
 * as a Fortran program calls them (every argument by address) under the names
 * Fortran compilers give them: gfortran's lower_ and the capital one. The
 * copy callbacks set the flag and copy (or not) the value, every one returns
 * MPI_SUCCESS in ierr; the F90 helpers store MPI_Wtime, MPI_Wtick and address
 * sums and differences. Then a keyval whose copy callback is Fortran's
 * MPI_COMM_DUP_FN, made through Open MPI's internal entry point as its Fortran
 * binding makes it, copies the attribute on MPI_Comm_dup. Any number of ranks. */
#include <mpi.h>

#include "check.h"

#undef MPI_COMM_DUP_FN
#undef MPI_TYPE_NULL_COPY_FN
#undef MPI_DUP_FN
typedef void aint_copy_fn(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint*, MPI_Aint*, MPI_Fint*, MPI_Fint*);
typedef void aint_delete_fn(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint*, MPI_Fint*);
typedef void fint_copy_fn(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
aint_copy_fn mpi_comm_dup_fn_, MPI_COMM_DUP_FN, mpi_comm_null_copy_fn_, MPI_TYPE_NULL_COPY_FN, mpi_win_dup_fn_;
aint_delete_fn mpi_comm_null_delete_fn_;
fint_copy_fn mpi_dup_fn_, MPI_DUP_FN, mpi_null_copy_fn_;
void MPI_WTIME_F90(double*);
void mpi_wtick_f90_(double*);
void mpi_aint_add_f90_(MPI_Aint*, MPI_Aint*, MPI_Aint*);
void MPI_AINT_DIFF_F90(MPI_Aint*, MPI_Aint*, MPI_Aint*);
/* Open MPI's internal call behind MPI_COMM_CREATE_KEYVAL in Fortran (libmpi_mpifh). */
int ompi_attr_create_keyval_aint(int type, void* copy, void* destroy, int* keyval, MPI_Aint extra_state, int flags,
                                 void* bindings_extra_state);

static void aint_copy(aint_copy_fn* fn, int copies) {
  MPI_Fint object = 0, keyval = 1, flag = -1, ierr = -1;
  MPI_Aint extra = 0, in = 0x123456789, out = -1;
  fn(&object, &keyval, &extra, &in, &out, &flag, &ierr);
  CHECK(ierr == MPI_SUCCESS && flag == copies && out == (copies ? in : -1));
}

static void fint_copy(fint_copy_fn* fn, int copies) {
  MPI_Fint object = 0, keyval = 1, extra = 0, in = 4711, out = -1, flag = -1, ierr = -1;
  fn(&object, &keyval, &extra, &in, &out, &flag, &ierr);
  CHECK(ierr == MPI_SUCCESS && flag == copies && out == (copies ? in : -1));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  aint_copy(mpi_comm_dup_fn_, 1);
  aint_copy(MPI_COMM_DUP_FN, 1);
  aint_copy(mpi_win_dup_fn_, 1);
  aint_copy(mpi_comm_null_copy_fn_, 0);
  aint_copy(MPI_TYPE_NULL_COPY_FN, 0);
  fint_copy(mpi_dup_fn_, 1);
  fint_copy(MPI_DUP_FN, 1);
  fint_copy(mpi_null_copy_fn_, 0);
  MPI_Fint object = 0, keyval = 1, ierr = -1;
  MPI_Aint value = 5, extra = 0;
  mpi_comm_null_delete_fn_(&object, &keyval, &value, &extra, &ierr);
  CHECK(ierr == MPI_SUCCESS && value == 5);

  double before = MPI_Wtime(), now = -1, tick = -1;
  MPI_WTIME_F90(&now);
  mpi_wtick_f90_(&tick);
  CHECK(now >= before && now <= MPI_Wtime() && tick == MPI_Wtick());
  MPI_Aint base = 1000, displacement = -24, sum = 0, difference = 0;
  mpi_aint_add_f90_(&base, &displacement, &sum);
  MPI_AINT_DIFF_F90(&base, &sum, &difference);
  CHECK(sum == 976 && difference == 24);

  /* A keyval as Open MPI's Fortran MPI_COMM_CREATE_KEYVAL makes it: on communicators (1), address-sized values. */
  int comm_keyval = -1;
  CHECK(ompi_attr_create_keyval_aint(1, (void*)mpi_comm_dup_fn_, (void*)mpi_comm_null_delete_fn_, &comm_keyval, 0, 0,
                                     NULL) == 0);
  static int attribute;
  CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, comm_keyval, &attribute) == MPI_SUCCESS);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  void* copied = NULL;
  int found = 0;
  CHECK(MPI_Comm_get_attr(dup, comm_keyval, &copied, &found) == MPI_SUCCESS && found && copied == &attribute);
  MPI_Comm_free(&dup);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, comm_keyval);
  MPI_Comm_free_keyval(&comm_keyval);
  return finish("fortran_helpers_test");
}
