#include "errors.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "comm.hpp"
#include "runtime.hpp"
#include "via/log.hpp"
#include "via/via.hpp"

namespace viastack::mpi {

namespace {

struct ClassInfo {
  int error_class;
  const char* name;
  const char* text;
};

#define VIASTACK_ERROR_CLASS(name, text) {name, #name, text}
constexpr ClassInfo kClasses[] = {
    VIASTACK_ERROR_CLASS(MPI_SUCCESS, "no error"),
    VIASTACK_ERROR_CLASS(MPI_ERR_BUFFER, "invalid buffer pointer"),
    VIASTACK_ERROR_CLASS(MPI_ERR_COUNT, "invalid count argument"),
    VIASTACK_ERROR_CLASS(MPI_ERR_TYPE, "invalid datatype"),
    VIASTACK_ERROR_CLASS(MPI_ERR_TAG, "invalid tag"),
    VIASTACK_ERROR_CLASS(MPI_ERR_COMM, "invalid communicator"),
    VIASTACK_ERROR_CLASS(MPI_ERR_RANK, "invalid rank"),
    VIASTACK_ERROR_CLASS(MPI_ERR_REQUEST, "invalid request"),
    VIASTACK_ERROR_CLASS(MPI_ERR_ROOT, "invalid root"),
    VIASTACK_ERROR_CLASS(MPI_ERR_GROUP, "invalid group"),
    VIASTACK_ERROR_CLASS(MPI_ERR_OP, "invalid reduce operation"),
    VIASTACK_ERROR_CLASS(MPI_ERR_TOPOLOGY, "invalid communicator topology"),
    VIASTACK_ERROR_CLASS(MPI_ERR_DIMS, "invalid topology dimension"),
    VIASTACK_ERROR_CLASS(MPI_ERR_ARG, "invalid argument"),
    VIASTACK_ERROR_CLASS(MPI_ERR_UNKNOWN, "unknown error"),
    VIASTACK_ERROR_CLASS(MPI_ERR_TRUNCATE, "message truncated"),
    VIASTACK_ERROR_CLASS(MPI_ERR_OTHER, "known error not in this list"),
    VIASTACK_ERROR_CLASS(MPI_ERR_INTERN, "internal error"),
    VIASTACK_ERROR_CLASS(MPI_ERR_IN_STATUS, "error code is in status"),
    VIASTACK_ERROR_CLASS(MPI_ERR_PENDING, "pending request"),
    VIASTACK_ERROR_CLASS(MPI_ERR_NO_MEM, "out of memory"),
    VIASTACK_ERROR_CLASS(MPI_ERR_RMA_SYNC, "RMA call outside an access epoch"),
    VIASTACK_ERROR_CLASS(MPI_ERR_SIZE, "invalid size"),
    VIASTACK_ERROR_CLASS(MPI_ERR_DISP, "invalid displacement unit"),
    VIASTACK_ERROR_CLASS(MPI_ERR_WIN, "invalid window"),
    VIASTACK_ERROR_CLASS(MPI_ERR_RMA_RANGE, "target memory is outside the window"),
    VIASTACK_ERROR_CLASS(MPI_ERR_LOCKTYPE, "invalid lock type"),
    VIASTACK_ERROR_CLASS(MPI_ERR_ASSERT, "invalid assertion"),
    VIASTACK_ERROR_CLASS(MPI_ERR_RMA_ATTACH, "memory cannot be attached to the window"),
    VIASTACK_ERROR_CLASS(MPI_ERR_RMA_FLAVOR, "the window's flavor does not allow the call"),
    VIASTACK_ERROR_CLASS(MPI_ERR_RMA_SHARED, "memory cannot be shared"),
    VIASTACK_ERROR_CLASS(MPI_ERR_UNSUPPORTED_OPERATION, "operation not supported by viastack's MPI"),
};
#undef VIASTACK_ERROR_CLASS

// Ends the process at once; _exit runs no exit handlers: what they would do.
[[noreturn]] void exit_now(int code) {
  std::fflush(stdout);
  via::remove_shared_memory_now();
  _exit(code == 0 ? 1 : code);
}

const ClassInfo* find_class(int error_class) {
  for (const ClassInfo& c : kClasses)
    if (c.error_class == error_class) return &c;
  return nullptr;
}

}  // namespace

void fail(int error_class, std::string detail) { throw Error{error_class, std::move(detail)}; }

const char* error_class_name(int error_class) {
  const ClassInfo* c = find_class(error_class);
  return c ? c->name : "MPI_ERR_UNKNOWN";
}

const char* error_class_text(int error_class) {
  const ClassInfo* c = find_class(error_class);
  return c ? c->text : "unknown error";
}

void abort_job(const char* function, const std::string& why, int code) {
  VIA_LOG(error, "mpi", "%s: %s", function, why.c_str());
  exit_now(code);
}

int raise_error(MPI_Comm comm, const char* function, const Error& error) {
  ErrhandlerKind handler = ErrhandlerKind::fatal;
  if (comm && comm->kind == HandleKind::communicator && comm->impl)
    handler = comm->impl->errhandler();
  else if (life_stage() == LifeStage::running)
    handler = runtime().world().errhandler();
  if (handler == ErrhandlerKind::returns) return error.error_class;
  std::string why = error_class_name(error.error_class);
  why += ": ";
  why += error.detail;
  if (life_stage() == LifeStage::running) {
    why += " (rank ";
    why += std::to_string(runtime().world_rank());
    why += ")";
  }
  abort_job(function, why);
}

}  // namespace viastack::mpi

// The C stubs of unsupported.c.
extern "C" [[noreturn]] void viastack_mpi_unsupported(const char* function) {
  VIA_LOG(error, "mpi", "%s is not supported by viastack's MPI subset; stopping the job", function);
  viastack::mpi::exit_now(1);
}
