/* MPI_Type_create_f90_integer, _real and _complex (MPI-3.1 17.1.9) as Open
 * MPI 4 answers them on x86-64: the smallest predefined type whose range
 * (decimal exponent range, both ways) and precision (decimal digits) cover
 * the arguments, as a type named "COMBINER <that type>", the same handle for
 * the same arguments, not the predefined handle itself, which the program
 * cannot free; MPI_ERR_ARG when no type fits. Then the types in
 * point-to-point, a reduction and a derived type. Any number of ranks. */
#include <string.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* A type from an F90 constructor: its name, size, envelope and contents, a second call's handle. */
static void check_selected(MPI_Datatype type, MPI_Datatype again, const char* expected_name, int expected_size,
                           int expected_combiner, int n_args, const int args[]) {
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0, size = 0;
  MPI_Type_get_name(type, name, &len);
  CHECK(strcmp(name, expected_name) == 0 && len == (int)strlen(expected_name));
  MPI_Type_size(type, &size);
  MPI_Aint lb = -1, extent = -1;
  MPI_Type_get_extent(type, &lb, &extent);
  CHECK(size == expected_size && lb == 0 && extent == expected_size);
  CHECK(type == again);
  int ni = -1, na = -1, nd = -1, combiner = -1;
  CHECK(MPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) == MPI_SUCCESS);
  CHECK(ni == n_args && na == 0 && nd == 0 && combiner == expected_combiner);
  int got[2] = {-99, -99};
  CHECK(MPI_Type_get_contents(type, 2, 0, 0, got, NULL, NULL) == MPI_SUCCESS);
  for (int i = 0; i < n_args; ++i) CHECK(got[i] == args[i]);
  /* Predefined in all but name: it cannot be freed. */
  MPI_Datatype copy = type;
  CHECK(error_class(MPI_Type_free(&copy)) == MPI_ERR_TYPE && copy == type);
}

static void integers(void) {
  struct {
    int r;
    const char* name;
    int size;
  } const cases[] = {
      {-5, "COMBINER MPI_BYTE", 1},  {0, "COMBINER MPI_BYTE", 1},  {2, "COMBINER MPI_BYTE", 1},
      {3, "COMBINER MPI_SHORT", 2},  {4, "COMBINER MPI_SHORT", 2}, {5, "COMBINER MPI_INT", 4},
      {9, "COMBINER MPI_INT", 4},    {10, "COMBINER MPI_LONG", 8}, {18, "COMBINER MPI_LONG", 8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    MPI_Datatype type = MPI_DATATYPE_NULL, again = MPI_DATATYPE_NULL;
    CHECK(MPI_Type_create_f90_integer(cases[i].r, &type) == MPI_SUCCESS);
    CHECK(MPI_Type_create_f90_integer(cases[i].r, &again) == MPI_SUCCESS);
    check_selected(type, again, cases[i].name, cases[i].size, MPI_COMBINER_F90_INTEGER, 1, &cases[i].r);
  }
  MPI_Datatype int9, int5;
  MPI_Type_create_f90_integer(9, &int9);
  MPI_Type_create_f90_integer(5, &int5);
  CHECK(int9 != MPI_INT && int9 != int5);
  MPI_Datatype none = MPI_DATATYPE_NULL;
  CHECK(error_class(MPI_Type_create_f90_integer(19, &none)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_f90_integer(38, &none)) == MPI_ERR_ARG);
}

static void reals_and_complexes(void) {
  /* (p, r): float covers 6 digits and 10^±37, double 15 and 10^±307, long double 18 and 10^±4931. */
  struct {
    int p, r;
    const char *real, *complex;
    int size;
  } const cases[] = {
      {6, 37, "MPI_FLOAT", "MPI_COMPLEX", 4},
      {7, MPI_UNDEFINED, "MPI_DOUBLE", "MPI_DOUBLE_COMPLEX", 8},
      {MPI_UNDEFINED, 38, "MPI_DOUBLE", "MPI_DOUBLE_COMPLEX", 8},
      {15, 307, "MPI_DOUBLE", "MPI_DOUBLE_COMPLEX", 8},
      {16, 0, "MPI_LONG_DOUBLE", "MPI_LONG_DOUBLE_COMPLEX", 16},
      {-1, 308, "MPI_LONG_DOUBLE", "MPI_LONG_DOUBLE_COMPLEX", 16},
      {18, 4931, "MPI_LONG_DOUBLE", "MPI_LONG_DOUBLE_COMPLEX", 16},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    const int args[2] = {cases[i].p, cases[i].r};
    char name[MPI_MAX_OBJECT_NAME];
    MPI_Datatype type = MPI_DATATYPE_NULL, again = MPI_DATATYPE_NULL;
    CHECK(MPI_Type_create_f90_real(cases[i].p, cases[i].r, &type) == MPI_SUCCESS);
    CHECK(MPI_Type_create_f90_real(cases[i].p, cases[i].r, &again) == MPI_SUCCESS);
    snprintf(name, sizeof name, "COMBINER %s", cases[i].real);
    check_selected(type, again, name, cases[i].size, MPI_COMBINER_F90_REAL, 2, args);
    CHECK(MPI_Type_create_f90_complex(cases[i].p, cases[i].r, &type) == MPI_SUCCESS);
    CHECK(MPI_Type_create_f90_complex(cases[i].p, cases[i].r, &again) == MPI_SUCCESS);
    snprintf(name, sizeof name, "COMBINER %s", cases[i].complex);
    check_selected(type, again, name, 2 * cases[i].size, MPI_COMBINER_F90_COMPLEX, 2, args);
  }
  /* The same selection from other arguments is another handle; real and complex differ. */
  MPI_Datatype a, b, c;
  MPI_Type_create_f90_real(7, 0, &a);
  MPI_Type_create_f90_real(8, 0, &b);
  MPI_Type_create_f90_complex(7, 0, &c);
  CHECK(a != b && a != c && a != MPI_DOUBLE);
  MPI_Datatype none = MPI_DATATYPE_NULL;
  CHECK(error_class(MPI_Type_create_f90_real(19, 0, &none)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_f90_real(0, 4932, &none)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_f90_complex(34, 0, &none)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_f90_real(MPI_UNDEFINED, MPI_UNDEFINED, &none)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_f90_complex(MPI_UNDEFINED, MPI_UNDEFINED, &none)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Type_create_f90_integer(9, NULL)) == MPI_ERR_ARG);
}

/* The types carry data: a ring of point-to-point messages, a sum over all ranks, a derived type of them. */
static void communication(int rank, int size) {
  MPI_Datatype int18, real15, complex6;
  MPI_Type_create_f90_integer(18, &int18);
  MPI_Type_create_f90_real(15, 307, &real15);
  MPI_Type_create_f90_complex(6, 37, &complex6);

  long out[3] = {rank * 1000000000000L, -rank, 7}, in[3] = {0, 0, 0};
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Status status;
  CHECK(MPI_Sendrecv(out, 3, int18, next, 5, in, 3, int18, prev, 5, MPI_COMM_WORLD, &status) == MPI_SUCCESS);
  int count = -1;
  MPI_Get_count(&status, int18, &count);
  CHECK(count == 3 && in[0] == prev * 1000000000000L && in[1] == -prev && in[2] == 7);

  double x = 0.5 + rank, sum = 0;
  CHECK(MPI_Allreduce(&x, &sum, 1, real15, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(sum == 0.5 * size + size * (size - 1) / 2.0);
  float z[2] = {1.0f, (float)rank}, zsum[2] = {0, 0};
  CHECK(MPI_Allreduce(z, zsum, 1, complex6, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(zsum[0] == (float)size && zsum[1] == (float)(size * (size - 1) / 2));

  /* A derived type of one: its contents name the F90 handle, which needs no freeing. */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, int18, &pair);
  MPI_Type_commit(&pair);
  int ints[1];
  MPI_Datatype old = MPI_DATATYPE_NULL;
  CHECK(MPI_Type_get_contents(pair, 1, 0, 1, ints, NULL, &old) == MPI_SUCCESS);
  CHECK(ints[0] == 2 && old == int18);
  long both[2] = {rank, -rank};
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      CHECK(MPI_Recv(both, 1, pair, r, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      CHECK(both[0] == r && both[1] == -r);
    }
  } else {
    CHECK(MPI_Send(both, 1, pair, 0, 6, MPI_COMM_WORLD) == MPI_SUCCESS);
  }
  MPI_Type_free(&pair);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  integers();
  reals_and_complexes();
  communication(rank, size);
  return finish("f90_types_test");
}
