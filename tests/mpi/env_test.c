/* The environment: MPI_Get_library_version (before MPI_Init too),
 * MPI_Get_processor_name, MPI_Aint_add/diff, the program's error handlers on
 * communicators, windows and files (create, set, get, call, inherited by
 * dup, kept alive while set), MPI_Add_error_class/code/string known to
 * MPI_Error_string and MPI_Error_class, MPI_Is_thread_main,
 * MPI_Query_thread; bad arguments under MPI_ERRORS_RETURN.
 * "fatal": the program's error code raised on MPI_ERRORS_ARE_FATAL ends the
 * job, naming the call and the program's string for the code. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* What the program's handlers saw last. */
static int calls = 0, last_code = 0;
static MPI_Comm last_comm = MPI_COMM_NULL;
static MPI_Win last_win = MPI_WIN_NULL;
static MPI_File last_file = (MPI_File)0;

static void on_comm_error(MPI_Comm* comm, int* code, ...) {
  ++calls;
  last_comm = *comm;
  last_code = *code;
}
static void on_win_error(MPI_Win* win, int* code, ...) {
  ++calls;
  last_win = *win;
  last_code = *code;
}
static void on_file_error(MPI_File* file, int* code, ...) {
  ++calls;
  last_file = *file;
  last_code = *code;
}

/* Asked before MPI_Init; checked after it (CHECK needs MPI). */
static char version[MPI_MAX_LIBRARY_VERSION_STRING];
static int version_rc = -1, version_len = -1, initialized_before = -1;

static void library_version_before_init(void) {
  MPI_Initialized(&initialized_before);
  version_rc = MPI_Get_library_version(version, &version_len);
}

static void check_library_version(void) {
  CHECK(initialized_before == 0 && version_rc == MPI_SUCCESS);
  CHECK(version_len == (int)strlen(version) && strncmp(version, "viastack MPI ", 13) == 0 && version[13] >= '0' &&
        version[13] <= '9');
}

static void names_and_addresses(void) {
  char name[MPI_MAX_PROCESSOR_NAME], host[256] = {0};
  int len = -1;
  CHECK(MPI_Get_processor_name(name, &len) == MPI_SUCCESS);
  gethostname(host, sizeof host - 1);
  CHECK(len == (int)strlen(name) && strcmp(name, host) == 0);
  double array[10];
  MPI_Aint first, fifth;
  MPI_Get_address(&array[0], &first);
  MPI_Get_address(&array[5], &fifth);
  CHECK(MPI_Aint_diff(fifth, first) == 5 * (MPI_Aint)sizeof(double));
  CHECK(MPI_Aint_add(first, 5 * sizeof(double)) == fifth);
  int version, subversion;
  CHECK(MPI_Get_version(&version, &subversion) == MPI_SUCCESS && version == 3 && subversion == 1);
}

static void communicator_handlers(void) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Errhandler handler, got;
  CHECK(MPI_Comm_create_errhandler(on_comm_error, &handler) == MPI_SUCCESS);
  MPI_Comm comm, child;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  CHECK(MPI_Comm_set_errhandler(comm, handler) == MPI_SUCCESS);
  /* The program's handle may go: the communicator keeps the handler. */
  CHECK(MPI_Errhandler_free(&handler) == MPI_SUCCESS && handler == MPI_ERRHANDLER_NULL);
  /* An error in a call: the handler sees the communicator and the code, and the call returns the code. */
  calls = 0;
  int value = 1;
  const int rc = MPI_Send(&value, 1, MPI_INT, size, 0, comm);
  CHECK(error_class(rc) == MPI_ERR_RANK && calls == 1 && last_comm == comm && last_code == rc);
  /* Calling it directly. */
  CHECK(MPI_Comm_call_errhandler(comm, MPI_ERR_OTHER) == MPI_SUCCESS);
  CHECK(calls == 2 && last_comm == comm && last_code == MPI_ERR_OTHER);
  /* A duplicate inherits it. */
  MPI_Comm_dup(comm, &child);
  CHECK(MPI_Comm_call_errhandler(child, MPI_ERR_ARG) == MPI_SUCCESS);
  CHECK(calls == 3 && last_comm == child && last_code == MPI_ERR_ARG);
  /* Get hands out a reference the program frees; setting the same handler again works. */
  CHECK(MPI_Comm_get_errhandler(child, &got) == MPI_SUCCESS && got != MPI_ERRORS_RETURN && got != MPI_ERRORS_ARE_FATAL);
  CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, got) == MPI_SUCCESS);
  CHECK(MPI_Errhandler_free(&got) == MPI_SUCCESS);
  CHECK(MPI_Comm_call_errhandler(MPI_COMM_SELF, MPI_ERR_TAG) == MPI_SUCCESS && calls == 4 && last_comm == MPI_COMM_SELF);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_free(&child);
  MPI_Comm_free(&comm);
  /* MPI_ERRORS_RETURN: nothing called, MPI_SUCCESS. */
  CHECK(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER) == MPI_SUCCESS && calls == 4);
  CHECK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &got) == MPI_SUCCESS && got == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&got);
}

static void window_and_file_handlers(void) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int memory[4] = {0};
  MPI_Win win;
  CHECK(MPI_Win_create(memory, sizeof memory, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
  MPI_Errhandler win_handler, comm_handler, file_handler, got;
  CHECK(MPI_Win_create_errhandler(on_win_error, &win_handler) == MPI_SUCCESS);
  CHECK(MPI_Comm_create_errhandler(on_comm_error, &comm_handler) == MPI_SUCCESS);
  CHECK(MPI_File_create_errhandler(on_file_error, &file_handler) == MPI_SUCCESS);
  /* A handler made for another kind of object is refused (windows start with MPI_ERRORS_ARE_FATAL). */
  CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN) == MPI_SUCCESS);
  CHECK(error_class(MPI_Win_set_errhandler(win, comm_handler)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_set_errhandler(MPI_COMM_WORLD, win_handler)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_File_set_errhandler(MPI_FILE_NULL, comm_handler)) == MPI_ERR_ARG);
  CHECK(MPI_Win_set_errhandler(win, win_handler) == MPI_SUCCESS);
  calls = 0;
  CHECK(MPI_Win_call_errhandler(win, MPI_ERR_RMA_SYNC) == MPI_SUCCESS);
  CHECK(calls == 1 && last_win == win && last_code == MPI_ERR_RMA_SYNC);
  /* An error inside an RMA call reaches it with the window. */
  MPI_Win_fence(0, win);
  int value = 5;
  const int rc = MPI_Put(&value, 1, MPI_INT, size, 0, 1, MPI_INT, win);
  CHECK(rc != MPI_SUCCESS && calls == 2 && last_win == win && last_code == rc);
  MPI_Win_fence(0, win);
  CHECK(MPI_Win_get_errhandler(win, &got) == MPI_SUCCESS && got == win_handler);
  MPI_Errhandler_free(&got);
  /* Files: MPI_FILE_NULL holds the default handler, MPI_ERRORS_RETURN at first. */
  CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &got) == MPI_SUCCESS && got == MPI_ERRORS_RETURN);
  CHECK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_OTHER) == MPI_SUCCESS && calls == 2);
  CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, file_handler) == MPI_SUCCESS);
  CHECK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_FILE) == MPI_SUCCESS);
  CHECK(calls == 3 && last_file == MPI_FILE_NULL && last_code == MPI_ERR_FILE);
  CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &got) == MPI_SUCCESS && got == file_handler);
  MPI_Errhandler_free(&got);
  CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN) == MPI_SUCCESS);
  CHECK(error_class(MPI_File_call_errhandler((MPI_File)MPI_COMM_WORLD, MPI_ERR_OTHER)) == MPI_ERR_FILE);
  CHECK(error_class(MPI_Win_call_errhandler(MPI_WIN_NULL, MPI_ERR_OTHER)) == MPI_ERR_WIN);
  MPI_Errhandler_free(&win_handler);
  MPI_Errhandler_free(&comm_handler);
  MPI_Errhandler_free(&file_handler);
  MPI_Win_free(&win);
}

static void error_classes_and_codes(void) {
  int cls = -1, code = -1, other = -1, got = -1, len = -1;
  char text[MPI_MAX_ERROR_STRING];
  CHECK(MPI_Add_error_class(&cls) == MPI_SUCCESS && cls > MPI_ERR_LASTCODE);
  CHECK(MPI_Add_error_code(cls, &code) == MPI_SUCCESS && code > cls);
  CHECK(MPI_Add_error_code(MPI_ERR_IO, &other) == MPI_SUCCESS && other > code);
  CHECK(MPI_Error_class(code, &got) == MPI_SUCCESS && got == cls);
  CHECK(MPI_Error_class(cls, &got) == MPI_SUCCESS && got == cls);
  CHECK(MPI_Error_class(other, &got) == MPI_SUCCESS && got == MPI_ERR_IO);
  /* No string yet: the empty string. */
  CHECK(MPI_Error_string(code, text, &len) == MPI_SUCCESS && len == 0 && text[0] == '\0');
  CHECK(MPI_Add_error_string(cls, "checkpoint failure") == MPI_SUCCESS);
  CHECK(MPI_Add_error_string(code, "checkpoint file missing") == MPI_SUCCESS);
  CHECK(MPI_Error_string(code, text, &len) == MPI_SUCCESS && strcmp(text, "checkpoint file missing") == 0 &&
        len == (int)strlen(text));
  CHECK(MPI_Error_string(cls, text, &len) == MPI_SUCCESS && strcmp(text, "checkpoint failure") == 0);
  CHECK(MPI_Add_error_string(code, "replaced") == MPI_SUCCESS);
  CHECK(MPI_Error_string(code, text, &len) == MPI_SUCCESS && strcmp(text, "replaced") == 0);
  /* The predefined ones are still known. */
  CHECK(MPI_Error_string(MPI_ERR_INFO_KEY, text, &len) == MPI_SUCCESS && strstr(text, "MPI_ERR_INFO_KEY") == text);
  /* A program's code reaches its handlers. */
  MPI_Errhandler handler;
  MPI_Comm comm;
  MPI_Comm_create_errhandler(on_comm_error, &handler);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, handler);
  MPI_Errhandler_free(&handler);
  calls = 0;
  CHECK(MPI_Comm_call_errhandler(comm, code) == MPI_SUCCESS && calls == 1 && last_code == code);
  MPI_Comm_free(&comm);
  /* Bad arguments. */
  char too_long[MPI_MAX_ERROR_STRING + 1];
  memset(too_long, 'x', sizeof too_long - 1);
  too_long[sizeof too_long - 1] = '\0';
  CHECK(error_class(MPI_Add_error_string(code, too_long)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Add_error_string(MPI_ERR_TYPE, "mine now")) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Add_error_string(code + 1000, "nobody's")) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Add_error_code(code, &got)) == MPI_ERR_ARG); /* a code, not a class */
  CHECK(error_class(MPI_Add_error_code(-3, &got)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Add_error_class(NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Error_string(code + 1000, text, &len)) == MPI_ERR_ARG);
  CHECK(MPI_Error_class(-1, &got) == MPI_ERR_ARG);
}

static void* other_thread(void* flag) {
  MPI_Is_thread_main(flag);
  return NULL;
}

static void threads(int provided) {
  int level = -1, flag = -1, other = -1;
  CHECK(provided == MPI_THREAD_MULTIPLE); /* granted since every call is safe from several threads */
  CHECK(MPI_Query_thread(&level) == MPI_SUCCESS && level == provided);
  CHECK(MPI_Is_thread_main(&flag) == MPI_SUCCESS && flag == 1);
  pthread_t t;
  pthread_create(&t, NULL, other_thread, &other);
  pthread_join(t, NULL);
  CHECK(other == 0);
  CHECK(error_class(MPI_Is_thread_main(NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Query_thread(NULL)) == MPI_ERR_ARG);
}

static void bad_handler_arguments(void) {
  MPI_Errhandler h;
  CHECK(error_class(MPI_Comm_create_errhandler(NULL, &h)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Win_create_errhandler(on_win_error, NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_File_create_errhandler(NULL, &h)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRHANDLER_NULL)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Comm_call_errhandler(MPI_COMM_NULL, MPI_ERR_OTHER)) == MPI_ERR_COMM);
  h = MPI_ERRHANDLER_NULL;
  CHECK(error_class(MPI_Errhandler_free(&h)) == MPI_ERR_ARG);
}

/* The program's error code on MPI_ERRORS_ARE_FATAL ends the job with its string. */
static int fatal(void) {
  int cls, code;
  MPI_Add_error_class(&cls);
  MPI_Add_error_code(cls, &code);
  MPI_Add_error_string(code, "the program's own failure");
  MPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
  fprintf(stderr, "env_test: still running after a fatal error\n");
  return 0;
}

int main(int argc, char** argv) {
  library_version_before_init();
  int provided = -1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) return fatal();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_library_version();
  names_and_addresses();
  communicator_handlers();
  window_and_file_handlers();
  error_classes_and_codes();
  threads(provided);
  bad_handler_arguments();
  return finish("env_test");
}
