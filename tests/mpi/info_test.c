/* MPI_Info: create, set, get, get_nkeys, get_nthkey, get_valuelen, dup,
 * delete, free; MPI_INFO_ENV (predefined, read-only, the standard's keys);
 * MPI_INFO_NULL; the key and value limits; communicators keeping hints
 * (Comm_set_info, Comm_get_info, Comm_dup copying them, Comm_dup_with_info
 * replacing them); bad arguments under MPI_ERRORS_RETURN. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* The value of key in info, or NULL; *flag as MPI_Info_get says. */
static const char* value_of(MPI_Info info, const char* key) {
  static char value[MPI_MAX_INFO_VAL + 1];
  int flag = -1;
  CHECK(MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag) == MPI_SUCCESS);
  return flag ? value : NULL;
}

static int nkeys(MPI_Info info) {
  int n = -1;
  CHECK(MPI_Info_get_nkeys(info, &n) == MPI_SUCCESS);
  return n;
}

static void basics(void) {
  MPI_Info info;
  CHECK(MPI_Info_create(&info) == MPI_SUCCESS);
  CHECK(nkeys(info) == 0);
  CHECK(value_of(info, "cb_nodes") == NULL);
  CHECK(MPI_Info_set(info, "cb_nodes", "4") == MPI_SUCCESS);
  CHECK(MPI_Info_set(info, "striping_unit", "1048576") == MPI_SUCCESS);
  CHECK(MPI_Info_set(info, "romio_ds_write", "disable") == MPI_SUCCESS);
  CHECK(nkeys(info) == 3);
  /* Setting a key again replaces its value and keeps its place. */
  CHECK(MPI_Info_set(info, "cb_nodes", "8") == MPI_SUCCESS);
  CHECK(nkeys(info) == 3);
  const char* v = value_of(info, "cb_nodes");
  CHECK(v && strcmp(v, "8") == 0);
  char key[MPI_MAX_INFO_KEY + 1];
  const char* order[] = {"cb_nodes", "striping_unit", "romio_ds_write"};
  for (int i = 0; i < 3; ++i) CHECK(MPI_Info_get_nthkey(info, i, key) == MPI_SUCCESS && strcmp(key, order[i]) == 0);
  int len = -1, flag = -1;
  CHECK(MPI_Info_get_valuelen(info, "striping_unit", &len, &flag) == MPI_SUCCESS && flag && len == 7);
  CHECK(MPI_Info_get_valuelen(info, "absent", &len, &flag) == MPI_SUCCESS && !flag);
  /* A short buffer gets the value cut to valuelen characters, null-terminated. */
  char shortbuf[8];
  memset(shortbuf, 'x', sizeof shortbuf);
  CHECK(MPI_Info_get(info, "striping_unit", 3, shortbuf, &flag) == MPI_SUCCESS && flag);
  CHECK(strcmp(shortbuf, "104") == 0 && shortbuf[4] == 'x');

  /* A duplicate is independent. */
  MPI_Info copy;
  CHECK(MPI_Info_dup(info, &copy) == MPI_SUCCESS);
  CHECK(MPI_Info_delete(info, "striping_unit") == MPI_SUCCESS);
  CHECK(nkeys(info) == 2 && nkeys(copy) == 3);
  CHECK(value_of(info, "striping_unit") == NULL);
  v = value_of(copy, "striping_unit");
  CHECK(v && strcmp(v, "1048576") == 0);
  CHECK(MPI_Info_get_nthkey(info, 1, key) == MPI_SUCCESS && strcmp(key, "romio_ds_write") == 0);
  CHECK(error_class(MPI_Info_delete(info, "striping_unit")) == MPI_ERR_INFO_NOKEY);

  /* The limits: a key of MPI_MAX_INFO_KEY characters and a value of MPI_MAX_INFO_VAL are fine, one more is not. */
  char longest_key[MPI_MAX_INFO_KEY + 2], longest_value[MPI_MAX_INFO_VAL + 2];
  memset(longest_key, 'k', sizeof longest_key);
  memset(longest_value, 'v', sizeof longest_value);
  longest_key[MPI_MAX_INFO_KEY] = '\0';
  longest_value[MPI_MAX_INFO_VAL] = '\0';
  CHECK(MPI_Info_set(copy, longest_key, longest_value) == MPI_SUCCESS);
  CHECK(MPI_Info_get_valuelen(copy, longest_key, &len, &flag) == MPI_SUCCESS && flag && len == MPI_MAX_INFO_VAL);
  CHECK(MPI_Info_get_nthkey(copy, 3, key) == MPI_SUCCESS && strlen(key) == MPI_MAX_INFO_KEY);
  longest_key[MPI_MAX_INFO_KEY] = 'k';
  longest_key[MPI_MAX_INFO_KEY + 1] = '\0';
  longest_value[MPI_MAX_INFO_VAL] = 'v';
  longest_value[MPI_MAX_INFO_VAL + 1] = '\0';
  CHECK(error_class(MPI_Info_set(copy, longest_key, "1")) == MPI_ERR_INFO_KEY);
  CHECK(error_class(MPI_Info_set(copy, "fine", longest_value)) == MPI_ERR_INFO_VALUE);
  CHECK(error_class(MPI_Info_get(copy, longest_key, 10, shortbuf, &flag)) == MPI_ERR_INFO_KEY);
  CHECK(error_class(MPI_Info_get_valuelen(copy, longest_key, &len, &flag)) == MPI_ERR_INFO_KEY);
  CHECK(error_class(MPI_Info_delete(copy, longest_key)) == MPI_ERR_INFO_KEY);
  CHECK(error_class(MPI_Info_set(copy, "", "1")) == MPI_ERR_INFO_KEY);
  CHECK(error_class(MPI_Info_set(copy, NULL, "1")) == MPI_ERR_INFO_KEY);
  CHECK(error_class(MPI_Info_set(copy, "fine", "")) == MPI_ERR_INFO_VALUE);
  CHECK(error_class(MPI_Info_set(copy, "fine", NULL)) == MPI_ERR_INFO_VALUE);
  CHECK(nkeys(copy) == 4);
  CHECK(error_class(MPI_Info_get(copy, "cb_nodes", -1, shortbuf, &flag)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Info_get_nthkey(copy, 4, key)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Info_get_nthkey(copy, -1, key)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Info_get_nkeys(copy, NULL)) == MPI_ERR_ARG);

  CHECK(MPI_Info_free(&info) == MPI_SUCCESS && info == MPI_INFO_NULL);
  CHECK(MPI_Info_free(&copy) == MPI_SUCCESS && copy == MPI_INFO_NULL);
}

static void null_and_invalid(void) {
  MPI_Info null = MPI_INFO_NULL, out;
  int n, flag;
  char value[16];
  CHECK(error_class(MPI_Info_get_nkeys(MPI_INFO_NULL, &n)) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_set(MPI_INFO_NULL, "a", "b")) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_get(MPI_INFO_NULL, "a", 15, value, &flag)) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_dup(MPI_INFO_NULL, &out)) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_free(&null)) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_create(NULL)) == MPI_ERR_ARG);
  /* Not an info at all. */
  CHECK(error_class(MPI_Info_get_nkeys((MPI_Info)MPI_COMM_WORLD, &n)) == MPI_ERR_INFO);
}

static void environment(void) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* v = value_of(MPI_INFO_ENV, "command");
  CHECK(v && strstr(v, "mpi_info_test") != NULL);
  v = value_of(MPI_INFO_ENV, "argv");
  CHECK(v && strcmp(v, "") == 0); /* started without arguments */
  v = value_of(MPI_INFO_ENV, "maxprocs");
  CHECK(v && atoi(v) == size);
  char host[MPI_MAX_PROCESSOR_NAME];
  int len;
  MPI_Get_processor_name(host, &len);
  v = value_of(MPI_INFO_ENV, "host");
  CHECK(v && strcmp(v, host) == 0);
  v = value_of(MPI_INFO_ENV, "arch");
  CHECK(v && strlen(v) > 0);
  char cwd[4096];
  v = value_of(MPI_INFO_ENV, "wdir");
  CHECK(v && getcwd(cwd, sizeof cwd) && strcmp(v, cwd) == 0);
  v = value_of(MPI_INFO_ENV, "thread_level");
  CHECK(v && strcmp(v, "MPI_THREAD_SERIALIZED") == 0);
  CHECK(nkeys(MPI_INFO_ENV) >= 7);
  /* Read-only: no set, delete or free; a duplicate is the program's to change. */
  MPI_Info env = MPI_INFO_ENV, mine;
  CHECK(error_class(MPI_Info_set(MPI_INFO_ENV, "command", "x")) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_delete(MPI_INFO_ENV, "command")) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Info_free(&env)) == MPI_ERR_INFO && env == MPI_INFO_ENV);
  CHECK(MPI_Info_dup(MPI_INFO_ENV, &mine) == MPI_SUCCESS);
  CHECK(MPI_Info_set(mine, "command", "x") == MPI_SUCCESS);
  v = value_of(MPI_INFO_ENV, "command");
  CHECK(v && strstr(v, "mpi_info_test") != NULL);
  MPI_Info_free(&mine);
}

static void communicator_hints(void) {
  MPI_Info info, used;
  MPI_Info_create(&info);
  MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
  MPI_Info_set(info, "my_hint", "1");
  MPI_Comm dup, dup2, plain;
  /* MPI_Comm_dup_with_info: the given hints, the communicator works. */
  CHECK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dup) == MPI_SUCCESS);
  MPI_Info_free(&info); /* the communicator keeps its own copy */
  CHECK(MPI_Comm_get_info(dup, &used) == MPI_SUCCESS);
  CHECK(nkeys(used) == 2);
  const char* v = value_of(used, "my_hint");
  CHECK(v && strcmp(v, "1") == 0);
  MPI_Info_free(&used);
  int rank, sum = 0;
  MPI_Comm_rank(dup, &rank);
  CHECK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, dup) == MPI_SUCCESS);
  int size;
  MPI_Comm_size(dup, &size);
  CHECK(sum == size * (size - 1) / 2);
  /* MPI_Comm_set_info adds and replaces; MPI_Comm_dup copies the hints. */
  MPI_Info more;
  MPI_Info_create(&more);
  MPI_Info_set(more, "my_hint", "2");
  MPI_Info_set(more, "other", "yes");
  CHECK(MPI_Comm_set_info(dup, more) == MPI_SUCCESS);
  MPI_Info_free(&more);
  CHECK(MPI_Comm_dup(dup, &dup2) == MPI_SUCCESS);
  CHECK(MPI_Comm_get_info(dup2, &used) == MPI_SUCCESS);
  CHECK(nkeys(used) == 3);
  v = value_of(used, "my_hint");
  CHECK(v && strcmp(v, "2") == 0);
  v = value_of(used, "other");
  CHECK(v && strcmp(v, "yes") == 0);
  MPI_Info_free(&used);
  /* MPI_INFO_NULL: no hints. */
  CHECK(MPI_Comm_dup_with_info(dup2, MPI_INFO_NULL, &plain) == MPI_SUCCESS);
  CHECK(MPI_Comm_get_info(plain, &used) == MPI_SUCCESS && nkeys(used) == 0);
  MPI_Info_free(&used);
  CHECK(MPI_Comm_get_info(MPI_COMM_WORLD, &used) == MPI_SUCCESS && nkeys(used) == 0);
  MPI_Info_free(&used);
  /* Bad arguments. */
  CHECK(error_class(MPI_Comm_dup_with_info(MPI_COMM_NULL, MPI_INFO_NULL, &plain)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_set_info(MPI_COMM_NULL, MPI_INFO_ENV)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_set_info(dup, MPI_INFO_NULL)) == MPI_ERR_INFO);
  CHECK(error_class(MPI_Comm_get_info(MPI_COMM_NULL, &used)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Comm_get_info(dup, NULL)) == MPI_ERR_ARG);
  MPI_Comm_free(&plain);
  MPI_Comm_free(&dup2);
  MPI_Comm_free(&dup);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  basics();
  null_and_invalid();
  environment();
  communicator_hints();
  return finish("info_test");
}
