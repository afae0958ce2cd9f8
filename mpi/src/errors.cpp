#include "errors.hpp"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "comm.hpp"
#include "errhandler.hpp"
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
    VIASTACK_ERROR_CLASS(MPI_ERR_INFO_KEY, "invalid info key"),
    VIASTACK_ERROR_CLASS(MPI_ERR_INFO_NOKEY, "no such info key"),
    VIASTACK_ERROR_CLASS(MPI_ERR_INFO_VALUE, "invalid info value"),
    VIASTACK_ERROR_CLASS(MPI_ERR_INFO, "invalid info object"),
    VIASTACK_ERROR_CLASS(MPI_ERR_CONVERSION, "a value does not fit its data representation"),
    VIASTACK_ERROR_CLASS(MPI_ERR_FILE, "invalid file"),
    VIASTACK_ERROR_CLASS(MPI_ERR_ACCESS, "permission denied"),
    VIASTACK_ERROR_CLASS(MPI_ERR_AMODE, "invalid amode argument"),
    VIASTACK_ERROR_CLASS(MPI_ERR_BAD_FILE, "invalid file name"),
    VIASTACK_ERROR_CLASS(MPI_ERR_FILE_EXISTS, "file exists"),
    VIASTACK_ERROR_CLASS(MPI_ERR_FILE_IN_USE, "file operation could not be completed, the file is in use"),
    VIASTACK_ERROR_CLASS(MPI_ERR_IO, "input/output error"),
    VIASTACK_ERROR_CLASS(MPI_ERR_NOT_SAME, "collective argument not identical on all processes"),
    VIASTACK_ERROR_CLASS(MPI_ERR_NO_SPACE, "not enough space"),
    VIASTACK_ERROR_CLASS(MPI_ERR_NO_SUCH_FILE, "no such file or directory"),
    VIASTACK_ERROR_CLASS(MPI_ERR_QUOTA, "quota exceeded"),
    VIASTACK_ERROR_CLASS(MPI_ERR_READ_ONLY, "read-only file or file system"),
    VIASTACK_ERROR_CLASS(MPI_ERR_UNSUPPORTED_DATAREP, "unsupported data representation"),
    VIASTACK_ERROR_CLASS(MPI_ERR_DUP_DATAREP, "the data representation is defined already"),
    VIASTACK_ERROR_CLASS(MPI_ERR_SPAWN, "could not spawn processes"),
};
#undef VIASTACK_ERROR_CLASS

// Ends the process, and with it the job, at once; _exit runs no exit
// handlers: what they would do (every stdio stream flushed, so that the
// program's output is not lost), and the other ranks' segments on this node.
[[noreturn]] void exit_now(int code) {
  std::fflush(nullptr);
  via::remove_job_shared_memory_now();
  _exit(code == 0 ? 1 : code);
}

const ClassInfo* find_class(int error_class) {
  for (const ClassInfo& c : kClasses)
    if (c.error_class == error_class) return &c;
  return nullptr;
}

// The program's own error classes and codes: each with its class (a class is its own) and string.
struct ProgramCode {
  int error_class;
  std::string text;
};
std::map<int, ProgramCode> program_codes;
int last_used_code = MPI_ERR_LASTCODE;

bool predefined_code(int code) { return code >= MPI_SUCCESS && code <= MPI_ERR_LASTCODE; }

// "MPI_ERR_X" for a predefined class; "error code N (class M): its string" for the program's.
std::string describe(int code) {
  if (predefined_code(code)) return error_class_name(code);
  auto it = program_codes.find(code);
  if (it == program_codes.end()) return "unknown error code " + std::to_string(code);
  std::string text = "error code " + std::to_string(code) + " (class " + std::to_string(it->second.error_class) + ")";
  if (!it->second.text.empty()) text += " " + it->second.text;
  return text;
}

}  // namespace

int add_error_class() {
  require(last_used_code < INT_MAX, MPI_ERR_INTERN, "no error codes left");
  const int code = ++last_used_code;
  program_codes[code] = {code, ""};
  return code;
}

int add_error_code(int error_class) {
  auto it = program_codes.find(error_class);
  require(predefined_code(error_class) || (it != program_codes.end() && it->second.error_class == error_class),
          MPI_ERR_ARG, "not an error class");
  require(last_used_code < INT_MAX, MPI_ERR_INTERN, "no error codes left");
  const int code = ++last_used_code;
  program_codes[code] = {error_class, ""};
  return code;
}

void set_error_string(int code, std::string text) {
  auto it = program_codes.find(code);
  require(it != program_codes.end(), MPI_ERR_ARG, "only the program's own error codes and classes take a string");
  require(text.size() < MPI_MAX_ERROR_STRING, MPI_ERR_ARG, "the string is MPI_MAX_ERROR_STRING characters or more");
  it->second.text = std::move(text);
}

int class_of_error_code(int code) {
  if (predefined_code(code)) return code;  // every predefined code this library returns is a class
  auto it = program_codes.find(code);
  require(it != program_codes.end(), MPI_ERR_ARG, "not an MPI error code");
  return it->second.error_class;
}

std::string error_string(int code) {
  if (predefined_code(code)) return std::string(error_class_name(code)) + ": " + error_class_text(code);
  class_of_error_code(code);
  return program_codes[code].text;
}

int last_used_error_code() { return last_used_code; }

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

std::string error_message(const Error& error) {
  std::string why = describe(error.error_class);
  if (!error.detail.empty()) why += ": " + error.detail;
  if (life_stage() == LifeStage::running) {
    why += " (rank ";
    why += std::to_string(runtime().world_rank());
    why += ")";
  }
  return why;
}

int raise_error(MPI_Comm comm, const char* function, const Error& error) {
  Communicator* c = nullptr;
  if (comm && comm->kind == HandleKind::communicator && comm->impl)
    c = comm->impl;
  else if (life_stage() == LifeStage::running)
    c = &runtime().world();
  const std::string why = error_message(error);
  if (!c) abort_job(function, why);
  // A window's handler is given the window; a copy of the handler, as it may free the communicator.
  MPI_Comm comm_handle = c->handle;
  MPI_Win win_handle = c->window();
  const ErrhandlerRef handler = c->errhandler();
  handler.apply(win_handle ? static_cast<void*>(&win_handle) : &comm_handle, function, error.error_class, why);
  return error.error_class;
}

}  // namespace viastack::mpi

// The C stubs of unsupported.c.
extern "C" [[noreturn]] void viastack_mpi_unsupported(const char* function) {
  VIA_LOG(error, "mpi", "%s is not supported by viastack's MPI subset; stopping the job", function);
  viastack::mpi::exit_now(1);
}
