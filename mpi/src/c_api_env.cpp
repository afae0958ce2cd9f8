// C entry points: start-up and shutdown, the environment, error handling, memory.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "attributes.hpp"
#include "c_api.hpp"
#include "window.hpp"

using namespace viastack::mpi;

namespace {

// What MPI_Init(_thread) gave, and to which thread.
int thread_level = MPI_THREAD_SINGLE;
std::thread::id main_thread;

int init(const char* function, int provided) {
  return guarded(function, MPI_COMM_WORLD, [&] {
    start_runtime();
    thread_level = provided;
    main_thread = std::this_thread::get_id();
  });
}

// MPI_*_create_errhandler: a program's handler for one kind of object.
void create_errhandler(HandleKind object, UserErrhandler::Function function, MPI_Errhandler* errhandler) {
  check_pointer(reinterpret_cast<const void*>(function), "null error handler function");
  check_pointer(errhandler, "null output pointer");
  *errhandler = new UserErrhandler(object, function);
}

}  // namespace

int MPI_Init(int*, char***) { return init("MPI_Init", MPI_THREAD_SINGLE); }

// Every call holds the library lock, and a call that waits lets other threads
// in meanwhile (progress_agent.hpp): MPI_THREAD_MULTIPLE is safe, at that cost.
int MPI_Init_thread(int*, char***, int required, int* provided) {
  const int level = std::clamp(required, int(MPI_THREAD_SINGLE), int(MPI_THREAD_MULTIPLE));
  set_threads_share_library(level == MPI_THREAD_MULTIPLE);
  int rc = init("MPI_Init_thread", level);
  if (rc == MPI_SUCCESS && provided) *provided = level;
  return rc;
}

int MPI_Query_thread(int* provided) {
  return guarded("MPI_Query_thread", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(provided, "null output pointer");
    *provided = thread_level;
  });
}

int MPI_Is_thread_main(int* flag) {
  return guarded("MPI_Is_thread_main", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(flag, "null output pointer");
    *flag = std::this_thread::get_id() == main_thread;
  });
}

int MPI_Initialized(int* flag) {
  return guarded("MPI_Initialized", MPI_COMM_WORLD, [&] {
    check_pointer(flag, "null output pointer");
    *flag = life_stage() != LifeStage::before_init;
  });
}

int MPI_Finalized(int* flag) {
  return guarded("MPI_Finalized", MPI_COMM_WORLD, [&] {
    check_pointer(flag, "null output pointer");
    *flag = life_stage() == LifeStage::finalized;
  });
}

int MPI_Finalize() {
  return guarded("MPI_Finalize", MPI_COMM_WORLD, [&] {
    runtime();
    // MPI_COMM_SELF's attributes are deleted first, as if it were freed: a
    // library's delete callback there may still call MPI (MPI-3.1 §8.7.1).
    attribute_cache().remove_all(AttributeHolder::communicator, MPI_COMM_SELF);
    stop_runtime();
  });
}

int MPI_Abort(MPI_Comm, int errorcode) {
  std::string why = "MPI_Abort was called with error code ";
  why += std::to_string(errorcode);
  if (life_stage() == LifeStage::running) {
    why += " on rank ";
    why += std::to_string(runtime().world_rank());
  }
  abort_job("MPI_Abort", why, errorcode);
}

int MPI_Get_processor_name(char* name, int* resultlen) {
  return guarded("MPI_Get_processor_name", MPI_COMM_WORLD, [&] {
    check_pointer(name, "null name buffer");
    check_pointer(resultlen, "null length pointer");
    if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) std::strcpy(name, "localhost");
    name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
    *resultlen = int(std::strlen(name));
  });
}

int MPI_Get_version(int* version, int* subversion) {
  return guarded("MPI_Get_version", MPI_COMM_WORLD, [&] {
    check_pointer(version, "null output pointer");
    check_pointer(subversion, "null output pointer");
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
  });
}

// Callable before MPI_Init and after MPI_Finalize.
int MPI_Get_library_version(char* version, int* resultlen) {
  return guarded("MPI_Get_library_version", MPI_COMM_WORLD, [&] {
    check_pointer(version, "null output pointer");
    check_pointer(resultlen, "null output pointer");
    const char text[] = "viastack MPI " VIASTACK_VERSION " (MPI 3.1 subset over VIA, Open MPI 4.x ABI)";
    static_assert(sizeof text <= MPI_MAX_LIBRARY_VERSION_STRING);
    std::memcpy(version, text, sizeof text);
    *resultlen = int(sizeof text - 1);
  });
}

double MPI_Wtime() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double MPI_Wtick() { return 1e-9; }

int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  return guarded("MPI_Error_string", MPI_COMM_WORLD, [&] {
    check_pointer(string, "null output pointer");
    check_pointer(resultlen, "null output pointer");
    std::string text = error_string(errorcode);
    text.resize(std::min<std::size_t>(text.size(), MPI_MAX_ERROR_STRING - 1));
    std::memcpy(string, text.c_str(), text.size() + 1);
    *resultlen = int(text.size());
  });
}

int MPI_Error_class(int errorcode, int* errorclass) {
  return guarded("MPI_Error_class", MPI_COMM_WORLD, [&] {
    check_pointer(errorclass, "null output pointer");
    *errorclass = class_of_error_code(errorcode);
  });
}

int MPI_Add_error_class(int* errorclass) {
  return guarded("MPI_Add_error_class", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(errorclass, "null output pointer");
    *errorclass = add_error_class();
  });
}

int MPI_Add_error_code(int errorclass, int* errorcode) {
  return guarded("MPI_Add_error_code", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(errorcode, "null output pointer");
    *errorcode = add_error_code(errorclass);
  });
}

int MPI_Add_error_string(int errorcode, const char* string) {
  return guarded("MPI_Add_error_string", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(string, "null string");
    set_error_string(errorcode, std::string(string, strnlen(string, MPI_MAX_ERROR_STRING)));
  });
}

int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* function, MPI_Errhandler* errhandler) {
  return guarded("MPI_Comm_create_errhandler", MPI_COMM_WORLD, [&] {
    create_errhandler(HandleKind::communicator, reinterpret_cast<UserErrhandler::Function>(function), errhandler);
  });
}

int MPI_Win_create_errhandler(MPI_Win_errhandler_function* function, MPI_Errhandler* errhandler) {
  return guarded("MPI_Win_create_errhandler", MPI_COMM_WORLD, [&] {
    create_errhandler(HandleKind::win, reinterpret_cast<UserErrhandler::Function>(function), errhandler);
  });
}

int MPI_File_create_errhandler(MPI_File_errhandler_function* function, MPI_Errhandler* errhandler) {
  return guarded("MPI_File_create_errhandler", MPI_COMM_WORLD, [&] {
    create_errhandler(HandleKind::file, reinterpret_cast<UserErrhandler::Function>(function), errhandler);
  });
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  return guarded("MPI_Comm_set_errhandler", comm, [&] {
    Communicator& c = communicator_of(comm);
    c.set_errhandler(errhandler_for(errhandler, HandleKind::communicator));
  });
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return guarded("MPI_Comm_get_errhandler", comm, [&] {
    check_pointer(errhandler, "null output pointer");
    *errhandler = handed_out(communicator_of(comm).errhandler());
  });
}

int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
  return guarded("MPI_Errhandler_free", MPI_COMM_WORLD, [&] {
    check_pointer(errhandler, "null handle pointer");
    release_handle(*errhandler);
    *errhandler = MPI_ERRHANDLER_NULL;
  });
}

// The object's handler applied to errorcode; MPI_SUCCESS once it returns (MPI 3.1, 8.3.6).
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  return guarded("MPI_Comm_call_errhandler", comm, [&] {
    const Communicator& c = communicator_of(comm);
    const ErrhandlerRef handler = c.errhandler();
    handler.apply(&comm, "MPI_Comm_call_errhandler", errorcode, error_string(errorcode));
  });
}

int MPI_Win_call_errhandler(MPI_Win win, int errorcode) {
  return guarded("MPI_Win_call_errhandler", MPI_COMM_WORLD, [&] {
    runtime();
    const ErrhandlerRef handler = window_of(win).comm().errhandler();
    handler.apply(&win, "MPI_Win_call_errhandler", errorcode, error_string(errorcode));
  });
}

// Memory for RMA and rendezvous: plain memory; the registration cache registers it on first use.
int MPI_Alloc_mem(MPI_Aint size, MPI_Info, void* baseptr) {
  return guarded("MPI_Alloc_mem", MPI_COMM_WORLD, [&] {
    require(size >= 0, MPI_ERR_ARG, "negative size");
    check_pointer(baseptr, "null output pointer");
    void* p = std::aligned_alloc(64, (std::size_t(size) + 63) / 64 * 64 + 64);
    require(p != nullptr, MPI_ERR_NO_MEM, "out of memory");
    std::memcpy(baseptr, &p, sizeof p);
  });
}

int MPI_Free_mem(void* base) {
  std::free(base);
  return MPI_SUCCESS;
}
