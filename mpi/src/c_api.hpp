// Shared by the C entry points: argument checks, and the one place where an
// Error thrown inside the library becomes an MPI error class.
#pragma once

#include <mpi.h>

#include <climits>
#include <new>

#include "comm.hpp"
#include "datatype.hpp"
#include "errhandler.hpp"
#include "errors.hpp"
#include "progress_agent.hpp"
#include "request.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

// Runs body under the library lock (progress_agent.hpp); an Error goes to comm's error handler
// (MPI_COMM_WORLD's if comm is not usable). comm is read when the error happens, so a body may
// point it at a request's communicator.
template <class Body>
int guarded(const char* function, const MPI_Comm& comm, Body&& body) {
  const LibraryEntry entry;
  try {
    body();
    return MPI_SUCCESS;
  } catch (const Error& e) {
    return raise_error(comm, function, e);
  } catch (const std::bad_alloc&) {
    return raise_error(comm, function, Error{MPI_ERR_NO_MEM, "out of memory"});
  }
}

inline constexpr int kTagUpperBound = INT_MAX;

inline void check_count(int count) { require(count >= 0, MPI_ERR_COUNT, "negative count"); }
inline void check_buffer(const void* buf, int count, const Datatype& type) {
  require(buf != nullptr || count == 0 || type.size() == 0, MPI_ERR_BUFFER, "null buffer with a non-zero count");
}
inline void check_send_tag(int tag) { require(tag >= 0, MPI_ERR_TAG, "a send's tag must be 0 or more"); }
inline void check_recv_tag(int tag) {
  require(tag >= 0 || tag == MPI_ANY_TAG, MPI_ERR_TAG, "a receive's tag must be 0 or more, or MPI_ANY_TAG");
}
inline void check_pointer(const void* p, const char* what) { require(p != nullptr, MPI_ERR_ARG, what); }

// The request behind a handle; nullptr for MPI_REQUEST_NULL.
inline Request* request_of(MPI_Request handle) {
  if (handle == MPI_REQUEST_NULL) return nullptr;
  require(handle != nullptr && handle->kind == HandleKind::request, MPI_ERR_REQUEST, "invalid request handle");
  return static_cast<Request*>(handle);
}

// The same, nullptr also for an inactive persistent request, which the Wait
// and Test calls treat as MPI_REQUEST_NULL (MPI-3.1 3.9).
inline Request* active_request_of(MPI_Request handle) {
  Request* r = request_of(handle);
  return r && r->persistent && !r->persistent->active ? nullptr : r;
}

// retire() for a generalized or persistent request (c_api_requests.cpp).
int retire_generalized_or_persistent(MPI_Request* handle, MPI_Status* status);

// Fills the status of the (complete) request and returns its error class; then
// frees it and sets the handle to MPI_REQUEST_NULL, or leaves a persistent one
// inactive. A generalized request's status and error come from its query
// function, and its free function is called. Inline: most messages retire a request.
inline int retire(MPI_Request* handle, MPI_Status* status) {
  Request* r = static_cast<Request*>(*handle);
  if (r->type == Request::Type::generalized || r->persistent) [[unlikely]]
    return retire_generalized_or_persistent(handle, status);
  r->fill_status(status);
  const int error = r->error;
  delete r;
  *handle = MPI_REQUEST_NULL;
  return error;
}

// What MPI_Wait and friends report for MPI_REQUEST_NULL.
inline void fill_empty_status(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
  status->_cancelled = 0;
  status->_ucount = 0;
}

}  // namespace viastack::mpi
