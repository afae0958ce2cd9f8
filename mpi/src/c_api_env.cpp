// C entry points: start-up and shutdown, the environment, error handling, memory.
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "attributes.hpp"
#include "c_api.hpp"

using namespace viastack::mpi;

namespace {

int init(const char* function) {
  return guarded(function, MPI_COMM_WORLD, [&] {
    start_runtime();
  });
}

}  // namespace

int MPI_Init(int*, char***) { return init("MPI_Init"); }

int MPI_Init_thread(int*, char***, int required, int* provided) {
  int rc = init("MPI_Init_thread");
  // Progress happens in the calling thread; MPI_THREAD_SERIALIZED is honest about it.
  if (rc == MPI_SUCCESS && provided) *provided = required < MPI_THREAD_SERIALIZED ? required : MPI_THREAD_SERIALIZED;
  return rc;
}

int MPI_Query_thread(int* provided) {
  return guarded("MPI_Query_thread", MPI_COMM_WORLD, [&] {
    check_pointer(provided, "null output pointer");
    *provided = MPI_THREAD_SERIALIZED;
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

int MPI_Get_library_version(char* version, int* resultlen) {
  return guarded("MPI_Get_library_version", MPI_COMM_WORLD, [&] {
    check_pointer(version, "null output pointer");
    check_pointer(resultlen, "null output pointer");
    const char text[] = "viastack MPI (MPI 3.1 subset over VIA, Open MPI 4.x ABI)";
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
    require(errorcode >= MPI_SUCCESS && errorcode <= MPI_ERR_LASTCODE, MPI_ERR_ARG, "not an MPI error code");
    std::string text = error_class_name(errorcode);
    text += ": ";
    text += error_class_text(errorcode);
    text.resize(std::min<std::size_t>(text.size(), MPI_MAX_ERROR_STRING - 1));
    std::memcpy(string, text.c_str(), text.size() + 1);
    *resultlen = int(text.size());
  });
}

int MPI_Error_class(int errorcode, int* errorclass) {
  return guarded("MPI_Error_class", MPI_COMM_WORLD, [&] {
    check_pointer(errorclass, "null output pointer");
    require(errorcode >= MPI_SUCCESS && errorcode <= MPI_ERR_LASTCODE, MPI_ERR_ARG, "not an MPI error code");
    *errorclass = errorcode;  // every code this library returns is a class
  });
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  return guarded("MPI_Comm_set_errhandler", comm, [&] {
    Communicator& c = communicator_of(comm);
    c.set_errhandler(errhandler_kind(errhandler));
  });
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return guarded("MPI_Comm_get_errhandler", comm, [&] {
    check_pointer(errhandler, "null output pointer");
    *errhandler = errhandler_handle(communicator_of(comm).errhandler());
  });
}

int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
  return guarded("MPI_Errhandler_free", MPI_COMM_WORLD, [&] {
    check_pointer(errhandler, "null handle pointer");
    errhandler_kind(*errhandler);  // the predefined ones are the only ones; freeing them just drops the handle
    *errhandler = MPI_ERRHANDLER_NULL;
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
