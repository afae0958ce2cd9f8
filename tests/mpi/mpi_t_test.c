/* The tool information interface (issue 18): MPI_T_init_thread/finalize
 * (nesting, before MPI_Init), the control variables (the library's
 * VIASTACK_MPI_* settings, read only: the value set in the environment is the
 * value read), their one category, no performance variables, and the
 * MPI_T_ERR_* code of each bad use. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void control_variables(void) {
  int num = -1;
  CHECK(MPI_T_cvar_get_num(&num) == MPI_SUCCESS && num >= 4);
  int eager = -1;
  CHECK(MPI_T_cvar_get_index("VIASTACK_MPI_EAGER_LIMIT", &eager) == MPI_SUCCESS && eager >= 0 && eager < num);
  for (int i = 0; i < num; ++i) {
    char name[256], desc[1024];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = -1, bind = -1, scope = -1;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype;
    CHECK(MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) ==
          MPI_SUCCESS);
    CHECK(strncmp(name, "VIASTACK_MPI_", 13) == 0 && name_len == (int)strlen(name) + 1);
    CHECK(desc_len == (int)strlen(desc) + 1 && desc_len > 1);
    CHECK(type == MPI_LONG_LONG && enumtype == MPI_T_ENUM_NULL && bind == MPI_T_BIND_NO_OBJECT &&
          scope == MPI_T_SCOPE_READONLY);
    int index = -1;
    CHECK(MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS && index == i);
  }
  /* A short buffer gets a truncated name and the full length. */
  char shortname[5];
  int len = sizeof shortname;
  CHECK(MPI_T_cvar_get_info(eager, shortname, &len, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_SUCCESS);
  CHECK(strcmp(shortname, "VIAS") == 0 && len == (int)strlen("VIASTACK_MPI_EAGER_LIMIT") + 1);

  /* The value is the environment's (ctest sets it to 4096), else the one in force: 61440 with the
     tcp provider, 16384 elsewhere. */
  MPI_T_cvar_handle handle;
  int count = -1;
  CHECK(MPI_T_cvar_handle_alloc(eager, NULL, &handle, &count) == MPI_SUCCESS && count == 1);
  long long value = -1;
  CHECK(MPI_T_cvar_read(handle, &value) == MPI_SUCCESS);
  const char* set = getenv("VIASTACK_MPI_EAGER_LIMIT");
  const char* provider = getenv("VIASTACK_PROVIDER");
  const long long unset = provider && strcmp(provider, "tcp") == 0 ? 61440 : 16384;
  CHECK(value == (set ? atoll(set) : unset));
  CHECK(MPI_T_cvar_write(handle, &value) == MPI_T_ERR_CVAR_SET_NEVER);
  CHECK(MPI_T_cvar_handle_free(&handle) == MPI_SUCCESS && handle == MPI_T_CVAR_HANDLE_NULL);

  CHECK(MPI_T_cvar_get_info(num, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX);
  CHECK(MPI_T_cvar_get_info(-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX);
  CHECK(MPI_T_cvar_get_index("no_such_variable", &eager) == MPI_T_ERR_INVALID_NAME);
  CHECK(MPI_T_cvar_handle_alloc(num, NULL, &handle, &count) == MPI_T_ERR_INVALID_INDEX);
  CHECK(MPI_T_cvar_read(MPI_T_CVAR_HANDLE_NULL, &value) == MPI_T_ERR_INVALID_HANDLE);
  CHECK(MPI_T_cvar_get_num(NULL) == MPI_T_ERR_INVALID);
  CHECK(MPI_T_enum_get_info(MPI_T_ENUM_NULL, &count, NULL, NULL) == MPI_T_ERR_INVALID_HANDLE);
}

static void categories(void) {
  int num = -1, cvars = -1;
  MPI_T_cvar_get_num(&cvars);
  CHECK(MPI_T_category_get_num(&num) == MPI_SUCCESS && num == 1);
  char name[64];
  int name_len = sizeof name, ncvars = -1, npvars = -1, ncats = -1;
  CHECK(MPI_T_category_get_info(0, name, &name_len, NULL, NULL, &ncvars, &npvars, &ncats) == MPI_SUCCESS);
  CHECK(ncvars == cvars && npvars == 0 && ncats == 0);
  int index = -1;
  CHECK(MPI_T_category_get_index(name, &index) == MPI_SUCCESS && index == 0);
  int* indices = malloc(sizeof(int) * (size_t)cvars);
  CHECK(MPI_T_category_get_cvars(0, cvars, indices) == MPI_SUCCESS);
  for (int i = 0; i < cvars; ++i) CHECK(indices[i] == i);
  free(indices);
  CHECK(MPI_T_category_get_pvars(0, 0, NULL) == MPI_SUCCESS);
  CHECK(MPI_T_category_get_categories(0, 0, NULL) == MPI_SUCCESS);
  int stamp = -1, again = -2;
  CHECK(MPI_T_category_changed(&stamp) == MPI_SUCCESS && MPI_T_category_changed(&again) == MPI_SUCCESS);
  CHECK(stamp == again);
  CHECK(MPI_T_category_get_info(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX);
  CHECK(MPI_T_category_get_index("nothing", &index) == MPI_T_ERR_INVALID_NAME);
}

static void performance_variables(void) {
  int num = -1;
  CHECK(MPI_T_pvar_get_num(&num) == MPI_SUCCESS && num == 0);
  CHECK(MPI_T_pvar_get_info(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ==
        MPI_T_ERR_INVALID_INDEX);
  int index;
  CHECK(MPI_T_pvar_get_index("anything", MPI_T_PVAR_CLASS_COUNTER, &index) == MPI_T_ERR_INVALID_NAME);
  MPI_T_pvar_session session;
  CHECK(MPI_T_pvar_session_create(&session) == MPI_SUCCESS);
  MPI_T_pvar_handle handle = MPI_T_PVAR_HANDLE_NULL;
  int count;
  CHECK(MPI_T_pvar_handle_alloc(session, 0, NULL, &handle, &count) == MPI_T_ERR_INVALID_INDEX);
  CHECK(MPI_T_pvar_start(session, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS);
  CHECK(MPI_T_pvar_stop(session, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS);
  CHECK(MPI_T_pvar_reset(session, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS);
  long long buf;
  CHECK(MPI_T_pvar_read(session, handle, &buf) == MPI_T_ERR_INVALID_HANDLE);
  CHECK(MPI_T_pvar_write(session, handle, &buf) == MPI_T_ERR_INVALID_HANDLE);
  CHECK(MPI_T_pvar_readreset(session, handle, &buf) == MPI_T_ERR_INVALID_HANDLE);
  CHECK(MPI_T_pvar_handle_free(session, &handle) == MPI_T_ERR_INVALID_HANDLE);
  CHECK(MPI_T_pvar_session_free(&session) == MPI_SUCCESS && session == MPI_T_PVAR_SESSION_NULL);
  CHECK(MPI_T_pvar_start(session, MPI_T_PVAR_ALL_HANDLES) == MPI_T_ERR_INVALID_SESSION);
  CHECK(MPI_T_pvar_session_free(&session) == MPI_T_ERR_INVALID_SESSION);
}

int main(int argc, char** argv) {
  /* Before MPI_Init, and nested. */
  int num = -1, provided = -1;
  const int not_yet = MPI_T_cvar_get_num(&num);
  const int init1 = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  const int init2 = MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided);
  const int early = MPI_T_cvar_get_num(&num);
  MPI_Init(&argc, &argv);
  CHECK(not_yet == MPI_T_ERR_NOT_INITIALIZED);
  CHECK(init1 == MPI_SUCCESS && init2 == MPI_SUCCESS && provided == MPI_THREAD_MULTIPLE);
  CHECK(early == MPI_SUCCESS && num >= 4);
  control_variables();
  categories();
  performance_variables();
  CHECK(MPI_T_finalize() == MPI_SUCCESS);
  CHECK(MPI_T_cvar_get_num(&num) == MPI_SUCCESS); /* one initialization is left */
  CHECK(MPI_T_finalize() == MPI_SUCCESS);
  CHECK(MPI_T_cvar_get_num(&num) == MPI_T_ERR_NOT_INITIALIZED);
  CHECK(MPI_T_finalize() == MPI_T_ERR_NOT_INITIALIZED);
  return finish("mpi_t_test");
}
