/* Attribute caching and MPI_Comm_test_inter (issue 18): keyvals, attributes
 * on communicators, windows and datatypes, copy callbacks on MPI_Comm_dup,
 * delete callbacks on replace, delete, free and (MPI_COMM_SELF's) at
 * MPI_Finalize, the predefined attributes, MPI-1's names, and the error class
 * of each bad argument under MPI_ERRORS_RETURN. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* MPI-1's Attr_* and Keyval_* */

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* What the callbacks saw. */
static int deletes, copies, self_deleted_before_finalize;
static intptr_t last_deleted;

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm, (void)keyval;
  ++deletes;
  last_deleted = (intptr_t)value;
  CHECK(extra == &deletes);
  return MPI_SUCCESS;
}

/* The duplicate gets the value plus one. */
static int increment_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)keyval, (void)extra;
  ++copies;
  *(void**)out = (void*)((intptr_t)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}

static int failing_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm, (void)keyval, (void)extra, (void)in, (void)out, (void)flag;
  return MPI_ERR_OTHER;
}

static int failing_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm, (void)keyval, (void)value, (void)extra;
  return MPI_ERR_ARG;
}

static int delete_at_finalize(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval, (void)value, (void)extra;
  int finalized = 1, size = 0;
  MPI_Finalized(&finalized);
  /* MPI still works inside the callback. */
  self_deleted_before_finalize = !finalized && comm == MPI_COMM_SELF &&
                                 MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && size > 0;
  return MPI_SUCCESS;
}

static void test_inter(void) {
  int flag = -1;
  CHECK(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag) == MPI_SUCCESS && flag == 0);
  CHECK(MPI_Comm_test_inter(MPI_COMM_SELF, &flag) == MPI_SUCCESS && flag == 0);
  CHECK(error_class(MPI_Comm_test_inter(MPI_COMM_NULL, &flag)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_test_inter(MPI_COMM_WORLD, NULL)) == MPI_ERR_ARG);
}

static int predefined_int(MPI_Comm comm, int keyval, int* flag) {
  int* value = NULL;
  *flag = -1;
  CHECK(MPI_Comm_get_attr(comm, keyval, &value, flag) == MPI_SUCCESS);
  return *flag && value ? *value : -12345;
}

static void predefined(int size) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm comms[3] = {MPI_COMM_WORLD, MPI_COMM_SELF, dup};
  for (int i = 0; i < 3; ++i) {
    int flag;
    CHECK(predefined_int(comms[i], MPI_TAG_UB, &flag) >= 32767 && flag);
    CHECK(predefined_int(comms[i], MPI_HOST, &flag) == MPI_PROC_NULL && flag);
    CHECK(predefined_int(comms[i], MPI_IO, &flag) == MPI_ANY_SOURCE && flag);
    const int global = predefined_int(comms[i], MPI_WTIME_IS_GLOBAL, &flag);
    CHECK((global == 0 || global == 1) && flag);
    CHECK(predefined_int(comms[i], MPI_APPNUM, &flag) == 0 && flag);
    CHECK(predefined_int(comms[i], MPI_UNIVERSE_SIZE, &flag) >= size && flag);
    CHECK(predefined_int(comms[i], MPI_LASTUSEDCODE, &flag) >= MPI_ERR_LASTCODE && flag);
  }
  /* Predefined attributes are the library's: not set, deleted or freed by the program. */
  int tag_ub = MPI_TAG_UB;
  CHECK(error_class(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, NULL)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_TAG_UB)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_free_keyval(&tag_ub)) == MPI_ERR_KEYVAL);
  /* A window's attribute is not a communicator's. */
  void* value;
  int flag;
  CHECK(error_class(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WIN_BASE, &value, &flag)) == MPI_ERR_KEYVAL);
  MPI_Comm_free(&dup);
}

static void communicator_attributes(void) {
  int dup_key, null_key, counted_key;
  CHECK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &dup_key, NULL) == MPI_SUCCESS);
  CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &null_key, NULL) == MPI_SUCCESS);
  CHECK(MPI_Comm_create_keyval(increment_copy, count_delete, &counted_key, &deletes) == MPI_SUCCESS);
  CHECK(dup_key != null_key && null_key != counted_key && dup_key != MPI_KEYVAL_INVALID);

  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  void* value = NULL;
  int flag = -1;
  CHECK(MPI_Comm_get_attr(comm, counted_key, &value, &flag) == MPI_SUCCESS && flag == 0);
  CHECK(MPI_Comm_set_attr(comm, dup_key, (void*)11) == MPI_SUCCESS);
  CHECK(MPI_Comm_set_attr(comm, null_key, (void*)22) == MPI_SUCCESS);
  CHECK(MPI_Comm_set_attr(comm, counted_key, (void*)33) == MPI_SUCCESS);
  CHECK(MPI_Comm_get_attr(comm, counted_key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)33);
  /* Replacing a value deletes the old one. */
  CHECK(MPI_Comm_set_attr(comm, counted_key, (void*)44) == MPI_SUCCESS);
  CHECK(deletes == 1 && last_deleted == 33);

  /* MPI_Comm_dup copies by each keyval's callback. */
  MPI_Comm copy;
  CHECK(MPI_Comm_dup(comm, &copy) == MPI_SUCCESS);
  CHECK(copies == 1);
  CHECK(MPI_Comm_get_attr(copy, dup_key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)11);
  CHECK(MPI_Comm_get_attr(copy, null_key, &value, &flag) == MPI_SUCCESS && flag == 0);
  CHECK(MPI_Comm_get_attr(copy, counted_key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)45);
  /* Split and create do not copy. */
  MPI_Comm split;
  MPI_Comm_split(comm, 0, 0, &split);
  CHECK(MPI_Comm_get_attr(split, dup_key, &value, &flag) == MPI_SUCCESS && flag == 0);
  MPI_Comm_free(&split);

  /* Deleting runs the callback once; deleting what is not set does nothing. */
  CHECK(MPI_Comm_delete_attr(copy, counted_key) == MPI_SUCCESS);
  CHECK(deletes == 2 && last_deleted == 45);
  CHECK(MPI_Comm_delete_attr(copy, counted_key) == MPI_SUCCESS && deletes == 2);
  CHECK(MPI_Comm_get_attr(copy, counted_key, &value, &flag) == MPI_SUCCESS && flag == 0);

  /* A freed keyval is gone for new calls; its attributes stay, and their delete callback still runs. */
  const int freed = counted_key;
  CHECK(MPI_Comm_free_keyval(&counted_key) == MPI_SUCCESS && counted_key == MPI_KEYVAL_INVALID);
  CHECK(error_class(MPI_Comm_get_attr(comm, freed, &value, &flag)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_free_keyval(&counted_key)) == MPI_ERR_KEYVAL);
  CHECK(MPI_Comm_free(&comm) == MPI_SUCCESS && comm == MPI_COMM_NULL);
  CHECK(deletes == 3 && last_deleted == 44);
  CHECK(MPI_Comm_free(&copy) == MPI_SUCCESS && deletes == 3);

  /* A failing copy callback fails MPI_Comm_dup with its class; the copies already made are deleted. */
  int counted2, failing;
  MPI_Comm_create_keyval(increment_copy, count_delete, &counted2, &deletes);
  MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, &failing, NULL);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_attr(comm, counted2, (void*)7);
  MPI_Comm_set_attr(comm, failing, (void*)8);
  copy = MPI_COMM_NULL;
  CHECK(error_class(MPI_Comm_dup(comm, &copy)) == MPI_ERR_OTHER);
  CHECK(copy == MPI_COMM_NULL);
  CHECK(deletes == 4 && last_deleted == 8);
  MPI_Comm_delete_attr(comm, failing);
  /* A failing delete callback fails the call that ran it. */
  int failing_del;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_delete, &failing_del, NULL);
  MPI_Comm_set_attr(comm, failing_del, (void*)9);
  CHECK(error_class(MPI_Comm_delete_attr(comm, failing_del)) == MPI_ERR_ARG);
  CHECK(MPI_Comm_free(&comm) == MPI_SUCCESS && deletes == 5 && last_deleted == 7);
  MPI_Comm_free_keyval(&counted2);
  MPI_Comm_free_keyval(&failing);
  MPI_Comm_free_keyval(&failing_del);
  MPI_Comm_free_keyval(&dup_key);
  MPI_Comm_free_keyval(&null_key);

  /* Bad arguments. */
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  CHECK(error_class(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, NULL, NULL)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_create_keyval(NULL, MPI_COMM_NULL_DELETE_FN, &flag, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_free_keyval(NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_set_attr(MPI_COMM_NULL, key, NULL)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_get_attr(MPI_COMM_NULL, key, &value, &flag)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_delete_attr(MPI_COMM_NULL, key)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, NULL)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_get_attr(MPI_COMM_WORLD, 123456, &value, &flag)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_delete_attr(MPI_COMM_WORLD, -7)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_get_attr(MPI_COMM_WORLD, key, NULL, &flag)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_get_attr(MPI_COMM_WORLD, key, &value, NULL)) == MPI_ERR_ARG);
  int win_key;
  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &win_key, NULL);
  CHECK(error_class(MPI_Comm_set_attr(MPI_COMM_WORLD, win_key, NULL)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Comm_free_keyval(&win_key)) == MPI_ERR_KEYVAL);
  MPI_Win_free_keyval(&win_key);
  MPI_Comm_free_keyval(&key);
}

/* MPI-1's names: the same attributes. */
static void mpi1_names(void) {
  int key;
  CHECK(MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &key, NULL) == MPI_SUCCESS);
  CHECK(MPI_Attr_put(MPI_COMM_WORLD, key, (void*)5) == MPI_SUCCESS);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  void* value = NULL;
  int flag = 0;
  CHECK(MPI_Attr_get(dup, key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)5);
  CHECK(MPI_Comm_get_attr(dup, key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)5);
  CHECK(MPI_Attr_delete(dup, key) == MPI_SUCCESS);
  CHECK(MPI_Attr_get(dup, key, &value, &flag) == MPI_SUCCESS && flag == 0);
  int* tag_ub = NULL;
  CHECK(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag) == MPI_SUCCESS && flag && *tag_ub >= 32767);
  MPI_Comm_free(&dup);
  CHECK(MPI_Attr_delete(MPI_COMM_WORLD, key) == MPI_SUCCESS);
  CHECK(MPI_Keyval_free(&key) == MPI_SUCCESS && key == MPI_KEYVAL_INVALID);
  CHECK(error_class(MPI_Attr_put(MPI_COMM_WORLD, key, NULL)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Attr_put(MPI_COMM_NULL, key, NULL)) == MPI_ERR_COMM);
}

static int win_deletes;
static int count_win_delete(MPI_Win win, int keyval, void* value, void* extra) {
  (void)win, (void)keyval, (void)extra;
  win_deletes += value == (void*)3;
  return MPI_SUCCESS;
}

static void window_attributes(void) {
  double memory[4];
  MPI_Win win;
  MPI_Win_create(memory, sizeof memory, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  void* base = NULL;
  MPI_Aint* size = NULL;
  int *disp_unit = NULL, *flavor = NULL, *model = NULL, flag = 0;
  CHECK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag) == MPI_SUCCESS && flag && base == memory);
  CHECK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag) == MPI_SUCCESS && flag && *size == sizeof memory);
  CHECK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &disp_unit, &flag) == MPI_SUCCESS && flag &&
        *disp_unit == sizeof(double));
  CHECK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag) == MPI_SUCCESS && flag &&
        *flavor == MPI_WIN_FLAVOR_CREATE);
  CHECK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag) == MPI_SUCCESS && flag &&
        (*model == MPI_WIN_UNIFIED || *model == MPI_WIN_SEPARATE));
  int key;
  CHECK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_win_delete, &key, NULL) == MPI_SUCCESS);
  CHECK(MPI_Win_set_attr(win, key, (void*)3) == MPI_SUCCESS);
  void* value = NULL;
  CHECK(MPI_Win_get_attr(win, key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)3);
  CHECK(error_class(MPI_Win_get_attr(win, MPI_TAG_UB, &value, &flag)) == MPI_ERR_KEYVAL);
  CHECK(error_class(MPI_Win_set_attr(MPI_WIN_NULL, key, NULL)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_get_attr(MPI_WIN_NULL, key, &value, &flag)) == MPI_ERR_WIN);
  CHECK(error_class(MPI_Win_delete_attr(MPI_WIN_NULL, key)) == MPI_ERR_WIN);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
  CHECK(win_deletes == 1);
  CHECK(MPI_Win_free_keyval(&key) == MPI_SUCCESS && key == MPI_KEYVAL_INVALID);
  CHECK(error_class(MPI_Win_free_keyval(&key)) == MPI_ERR_KEYVAL);
}

static int type_deletes;
static int count_type_delete(MPI_Datatype type, int keyval, void* value, void* extra) {
  (void)type, (void)keyval, (void)value, (void)extra;
  ++type_deletes;
  return MPI_SUCCESS;
}

static void datatype_attributes(void) {
  int key;
  CHECK(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_type_delete, &key, NULL) == MPI_SUCCESS);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  CHECK(MPI_Type_set_attr(pair, key, (void*)1) == MPI_SUCCESS); /* uncommitted is allowed */
  MPI_Type_commit(&pair);
  CHECK(MPI_Type_set_attr(MPI_INT, key, (void*)2) == MPI_SUCCESS);
  void* value = NULL;
  int flag = 0;
  CHECK(MPI_Type_get_attr(pair, key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)1);
  CHECK(MPI_Type_get_attr(MPI_INT, key, &value, &flag) == MPI_SUCCESS && flag && value == (void*)2);
  CHECK(MPI_Type_get_attr(MPI_DOUBLE, key, &value, &flag) == MPI_SUCCESS && flag == 0);
  CHECK(MPI_Type_free(&pair) == MPI_SUCCESS && type_deletes == 1);
  CHECK(MPI_Type_delete_attr(MPI_INT, key) == MPI_SUCCESS && type_deletes == 2);
  CHECK(error_class(MPI_Type_set_attr(MPI_DATATYPE_NULL, key, NULL)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_get_attr(MPI_DATATYPE_NULL, key, &value, &flag)) == MPI_ERR_TYPE);
  CHECK(error_class(MPI_Type_delete_attr(MPI_INT, MPI_KEYVAL_INVALID)) == MPI_ERR_KEYVAL);
  CHECK(MPI_Type_free_keyval(&key) == MPI_SUCCESS && key == MPI_KEYVAL_INVALID);
  CHECK(error_class(MPI_Type_free_keyval(&key)) == MPI_ERR_KEYVAL);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  test_inter();
  predefined(size);
  communicator_attributes();
  mpi1_names();
  window_attributes();
  datatype_attributes();
  int at_finalize;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_at_finalize, &at_finalize, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, at_finalize, NULL);
  int status = finish("attr");
  if (!self_deleted_before_finalize) {
    fprintf(stderr, "MPI_COMM_SELF's attribute was not deleted at the start of MPI_Finalize\n");
    status = 1;
  }
  return status;
}
