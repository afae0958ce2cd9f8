// C entry points: persistent requests (MPI-3.1 3.9), MPI_Request_get_status,
// statuses set by hand, and generalized requests (12.2); and retire(), which
// ends a request the way its kind requires.
#include <climits>

#include "c_api.hpp"
#include "c_api_p2p.hpp"

using namespace viastack::mpi;

namespace viastack::mpi {

namespace {

// Calls a generalized request's query function for its status; returns its error.
int query_generalized(const Request& r, MPI_Status* status) {
  MPI_Status local;
  MPI_Status* target = status == MPI_STATUS_IGNORE ? &local : status;
  fill_empty_status(target);
  return r.generalized.query(r.generalized.extra_state, target);
}

}  // namespace

int retire_generalized_or_persistent(MPI_Request* handle, MPI_Status* status) {
  Request* r = static_cast<Request*>(*handle);
  if (r->type == Request::Type::generalized) {
    const int error = query_generalized(*r, status);
    const int free_error = r->generalized.free(r->generalized.extra_state);
    delete r;
    *handle = MPI_REQUEST_NULL;
    return error != MPI_SUCCESS ? error : free_error;
  }
  r->fill_status(status);
  r->persistent->active = false;
  return r->error;
}

}  // namespace viastack::mpi

namespace {

// An inactive persistent request with its arguments (checked as the matching
// non-persistent call checks them).
Request* make_persistent(Request::Type type, const Checked& checked, void* buf, int count, int rank, int tag) {
  auto* r = new Request(type, &checked.comm);
  r->buffer = buf;
  r->count = std::size_t(count);
  r->datatype = &checked.type;
  r->tag = tag;
  r->context = checked.comm.p2p_context();
  r->persistent = Request::Persistent{rank};
  r->complete = true;  // inactive: MPI_Request_free may delete it at once
  return r;
}

int send_init(const char* function, const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm, MPI_Request* request, bool synchronous, bool buffered) {
  return guarded(function, comm, [&] {
    check_pointer(request, "null request pointer");
    const Checked checked = check_send(buf, count, datatype, dest, tag, comm);
    Request* r = make_persistent(Request::Type::send, checked, const_cast<void*>(buf), count, dest, tag);
    r->persistent->synchronous = synchronous;
    r->persistent->buffered = buffered;
    *request = r;
  });
}

// A persistent collective's start: the non-blocking call, whose request then completes this one.
// Its error has gone to the communicator's handler already, and is returned as it is.
int start_collective(Request& r) {
  MPI_Request started = MPI_REQUEST_NULL;
  const int error = r.persistent->start_collective(&started);
  if (error != MPI_SUCCESS) return error;
  r.cancelled = false;
  r.persistent->active = true;
  runtime().nonblocking_collectives().hand_over(static_cast<Request*>(started), r);
  return MPI_SUCCESS;
}

// What MPI_Start does to one request; checked by check_startable first. Returns a persistent
// collective's error, already reported (other errors are thrown).
int start(Request& r) {
  if (r.persistent->start_collective) return start_collective(r);
  const Request::Persistent& p = *r.persistent;
  const Communicator& comm = *r.comm;
  r.complete = r.cancelled = false;
  r.error = MPI_SUCCESS;
  r.bytes = 0;
  r.status_source = MPI_ANY_SOURCE;
  r.status_tag = MPI_ANY_TAG;
  r.staging.clear();
  r.registered = false;
  r.peer = -1;
  r.persistent->active = true;
  P2P& p2p = runtime().p2p();
  if (r.type == Request::Type::recv) {
    p2p.post_recv(r, r.buffer, r.count, *r.datatype, p.rank, r.tag, r.context);
  } else if (p.buffered) {
    // As MPI_Ibsend: complete once the message is in the attached buffer.
    if (p.rank != MPI_PROC_NULL) runtime().bsend().send(r.buffer, r.count, *r.datatype, p.rank, r.tag, comm);
    r.complete = true;
  } else {
    p2p.post_send(r, r.buffer, r.count, *r.datatype, p.rank, r.tag, r.context,
                  p.synchronous ? SendMode::synchronous : SendMode::standard);
  }
  return MPI_SUCCESS;
}

Request& check_startable(MPI_Request handle) {
  Request* r = request_of(handle);
  require(r != nullptr && r->persistent.has_value(), MPI_ERR_REQUEST, "not a persistent request");
  require(!r->persistent->active, MPI_ERR_REQUEST, "the persistent request is active already");
  return *r;
}

}  // namespace

int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return send_init("MPI_Send_init", buf, count, datatype, dest, tag, comm, request, false, false);
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init("MPI_Ssend_init", buf, count, datatype, dest, tag, comm, request, true, false);
}

// A ready send may behave as a standard one.
int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init("MPI_Rsend_init", buf, count, datatype, dest, tag, comm, request, false, false);
}

int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init("MPI_Bsend_init", buf, count, datatype, dest, tag, comm, request, false, true);
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return guarded("MPI_Recv_init", comm, [&] {
    check_pointer(request, "null request pointer");
    const Checked checked = check_recv(buf, count, datatype, source, tag, comm);
    *request = make_persistent(Request::Type::recv, checked, buf, count, source, tag);
  });
}

int MPI_Start(MPI_Request* request) {
  int collective_error = MPI_SUCCESS;
  const int error = guarded("MPI_Start", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(request, "null request pointer");
    collective_error = start(check_startable(*request));
  });
  return error != MPI_SUCCESS ? error : collective_error;
}

// Every request is checked before any starts; a persistent collective that fails to start
// leaves the others started, and MPI_Startall returns the first such error.
int MPI_Startall(int count, MPI_Request requests[]) {
  int collective_error = MPI_SUCCESS;
  const int error = guarded("MPI_Startall", MPI_COMM_WORLD, [&] {
    runtime();
    require(count >= 0, MPI_ERR_ARG, "negative request count");  // Open MPI 4's class
    require(count == 0 || requests != nullptr, MPI_ERR_ARG, "null request array");
    for (int i = 0; i < count; ++i) check_startable(requests[i]);
    for (int i = 0; i < count; ++i)
      if (const int e = start(*request_of(requests[i])); collective_error == MPI_SUCCESS) collective_error = e;
  });
  return error != MPI_SUCCESS ? error : collective_error;
}

// As MPI_Test, without freeing or deactivating the request.
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Request_get_status", comm, [&] {
    runtime();
    check_pointer(flag, "null flag pointer");
    const Request* r = active_request_of(request);
    *flag = 1;
    if (!r) return fill_empty_status(status);
    if (r->comm) comm = r->comm->handle;
    *flag = runtime().p2p().test([&] { return r->complete; });
    if (!*flag) return;
    if (r->type != Request::Type::generalized) return r->fill_status(status);
    if (int error = query_generalized(*r, status); error != MPI_SUCCESS)
      fail(error, "the generalized request's query function failed");
  });
}

namespace {

// The status then says count elements of datatype arrived.
void set_elements(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  check_pointer(status, "null status pointer");
  const Datatype& type = datatype_of(datatype);
  require(count >= 0, MPI_ERR_COUNT, "negative count");
  status->_ucount = std::size_t(count) * type.size();
}

}  // namespace

int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return guarded("MPI_Status_set_elements", MPI_COMM_WORLD, [&] { set_elements(status, datatype, count); });
}

int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  return guarded("MPI_Status_set_elements_x", MPI_COMM_WORLD, [&] { set_elements(status, datatype, count); });
}

int MPI_Status_set_cancelled(MPI_Status* status, int flag) {
  return guarded("MPI_Status_set_cancelled", MPI_COMM_WORLD, [&] {
    check_pointer(status, "null status pointer");
    status->_cancelled = flag != 0;
  });
}

int MPI_Grequest_start(MPI_Grequest_query_function* query_fn, MPI_Grequest_free_function* free_fn,
                       MPI_Grequest_cancel_function* cancel_fn, void* extra_state, MPI_Request* request) {
  return guarded("MPI_Grequest_start", MPI_COMM_WORLD, [&] {
    Runtime& rt = runtime();
    check_pointer(request, "null request pointer");
    require(query_fn != nullptr && free_fn != nullptr && cancel_fn != nullptr, MPI_ERR_ARG, "null callback");
    auto* r = new Request(Request::Type::generalized, &rt.world());
    r->generalized = Request::Generalized{query_fn, free_fn, cancel_fn, extra_state};
    *request = r;
  });
}

// After MPI_Request_free (free function called already) the request ends here.
int MPI_Grequest_complete(MPI_Request request) {
  return guarded("MPI_Grequest_complete", MPI_COMM_WORLD, [&] {
    runtime();
    Request* r = request_of(request);
    require(r != nullptr && r->type == Request::Type::generalized, MPI_ERR_REQUEST, "not a generalized request");
    require(!r->complete, MPI_ERR_REQUEST, "the generalized request is complete already");
    r->complete = true;
    if (r->detached) delete r;
  });
}
