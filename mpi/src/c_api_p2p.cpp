// C entry points: point-to-point messages and requests.
#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "c_api.hpp"
#include "c_api_p2p.hpp"
#include "collectives.hpp"

using namespace viastack::mpi;

namespace {

// Inline, as start_recv: with the checks and the eager way inline too, an
// MPI_Isend or MPI_Irecv makes no call of the library's own but the transport's.
[[gnu::always_inline]] inline Request* start_send(const void* buf, int count, MPI_Datatype datatype, int dest,
                                                  int tag, MPI_Comm comm, SendMode mode) {
  Checked s = check_send(buf, count, datatype, dest, tag, comm);
  return runtime().p2p().isend(buf, std::size_t(count), s.type, dest, tag, s.comm, s.comm.p2p_context(), mode);
}

[[gnu::always_inline]] inline Request* start_recv(void* buf, int count, MPI_Datatype datatype, int source, int tag,
                                                  MPI_Comm comm) {
  Checked r = check_recv(buf, count, datatype, source, tag, comm);
  return runtime().p2p().irecv(buf, std::size_t(count), r.type, source, tag, r.comm, r.comm.p2p_context());
}

[[noreturn]] void fail_request(int error) {
  fail(error, error == MPI_ERR_TRUNCATE ? "the message is longer than the receive buffer" : "the request failed");
}

// Waits for a request made by a blocking call, then retires it; throws its error.
void finish_blocking(Request* r, MPI_Status* status) {
  runtime().p2p().wait(*r);
  MPI_Request handle = r;
  if (int error = retire(&handle, status); error != MPI_SUCCESS) fail_request(error);
}

// A blocking standard send: an eager message is complete once queued, and needs no request.
[[gnu::always_inline]] inline void blocking_send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                                                 MPI_Comm comm) {
  Checked s = check_send(buf, count, datatype, dest, tag, comm);
  P2P& p2p = runtime().p2p();
  if (p2p.try_send_eager(buf, std::size_t(count), s.type, dest, tag, s.comm, s.comm.p2p_context())) return;
  Request* r = p2p.isend(buf, std::size_t(count), s.type, dest, tag, s.comm, s.comm.p2p_context(), SendMode::standard);
  finish_blocking(r, MPI_STATUS_IGNORE);
}

// Bsend: the message is copied into the attached buffer, so the call never waits for the receiver.
void buffered_send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  Checked s = check_send(buf, count, datatype, dest, tag, comm);
  if (dest == MPI_PROC_NULL) return;  // nothing to send, so no buffer space needed (as Open MPI)
  runtime().bsend().send(buf, std::size_t(count), s.type, dest, tag, s.comm);
}

// The communicator whose error handler reports the request's errors.
MPI_Comm comm_of(const Request* r) { return r && r->comm ? r->comm->handle : MPI_COMM_WORLD; }

void fill_probe_status(const ProbeResult& found, MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = found.source;
  status->MPI_TAG = found.tag;
  status->_cancelled = 0;
  status->_ucount = found.bytes;
}

// A message MPI_Mprobe / MPI_Improbe matched, until MPI_Mrecv / MPI_Imrecv receives it.
struct MatchedMessage : ompi_message_t {
  MatchedMessage(Incoming in, Communicator& comm)
      : ompi_message_t{HandleKind::message}, incoming(std::move(in)), comm(comm) {}
  Incoming incoming;
  Communicator& comm;
};

MPI_Message publish_matched(Incoming in, Communicator& comm, MPI_Status* status) {
  fill_probe_status(ProbeResult{in.source, in.tag, in.size}, status);
  return new MatchedMessage(std::move(in), comm);
}

// MPI_Mrecv / MPI_Imrecv: the request receiving the message, made from *message,
// which becomes MPI_MESSAGE_NULL. Open MPI's classes: a null or MPI_MESSAGE_NULL
// message is MPI_ERR_REQUEST (with MPI_COMM_WORLD's handler); the buffer's
// errors go to the message's communicator, which `comm` is set to.
Request* receive_message(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Comm& comm) {
  runtime();
  require(message != nullptr && *message != MPI_MESSAGE_NULL && *message != nullptr &&
              (*message)->kind == HandleKind::message,
          MPI_ERR_REQUEST, "invalid message (null, MPI_MESSAGE_NULL, or already received)");
  if (*message == MPI_MESSAGE_NO_PROC) {
    check_count(count);
    check_buffer(buf, count, datatype_of(datatype));
    auto* r = new Request(Request::Type::recv, nullptr);
    r->status_source = MPI_PROC_NULL;
    r->complete = true;
    *message = MPI_MESSAGE_NULL;
    return r;
  }
  auto* matched = static_cast<MatchedMessage*>(*message);
  comm = matched->comm.handle;
  check_count(count);
  const Datatype& type = datatype_of(datatype);
  check_buffer(buf, count, type);
  auto* r = new Request(Request::Type::recv, &matched->comm);
  runtime().p2p().receive_matched(*r, buf, std::size_t(count), type, std::move(matched->incoming));
  matched->kind = HandleKind{};  // a stale handle is then recognised as invalid
  delete matched;
  *message = MPI_MESSAGE_NULL;
  return r;
}

// The requests behind `count` handles, checked: nullptr for MPI_REQUEST_NULL and
// inactive persistent ones. Up to kOnStack of them are kept on the stack, so
// that waiting for a window of messages allocates nothing.
class ActiveRequests {
 public:
  ActiveRequests(int count, MPI_Request* handles) {
    require(count >= 0, MPI_ERR_COUNT, "negative request count");
    require(count == 0 || handles != nullptr, MPI_ERR_REQUEST, "null request array");
    Request** slots = on_stack_;
    if (count > kOnStack) {
      on_heap_.resize(std::size_t(count));
      slots = on_heap_.data();
    }
    for (int i = 0; i < count; ++i) slots[i] = active_request_of(handles[i]);
    requests_ = {slots, std::size_t(count)};
  }
  ActiveRequests(const ActiveRequests&) = delete;
  ActiveRequests& operator=(const ActiveRequests&) = delete;
  std::span<Request*> get() const { return requests_; }

 private:
  static constexpr int kOnStack = 64;
  Request* on_stack_[kOnStack];
  std::vector<Request*> on_heap_;
  std::span<Request*> requests_;
};

}  // namespace

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return guarded("MPI_Send", comm, [&] { blocking_send(buf, count, datatype, dest, tag, comm); });
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return guarded("MPI_Ssend", comm, [&] {
    finish_blocking(start_send(buf, count, datatype, dest, tag, comm, SendMode::synchronous), MPI_STATUS_IGNORE);
  });
}

// A ready send may behave as a standard one.
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return guarded("MPI_Rsend", comm, [&] { blocking_send(buf, count, datatype, dest, tag, comm); });
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return guarded("MPI_Bsend", comm, [&] { buffered_send(buf, count, datatype, dest, tag, comm); });
}

// The request of a buffered send is complete as soon as the message is in the buffer.
int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return guarded("MPI_Ibsend", comm, [&] {
    check_pointer(request, "null request pointer");
    buffered_send(buf, count, datatype, dest, tag, comm);
    auto* r = new Request(Request::Type::send, &communicator_of(comm));
    r->complete = true;
    *request = r;
  });
}

int MPI_Buffer_attach(void* buffer, int size) {
  return guarded("MPI_Buffer_attach", MPI_COMM_WORLD, [&] {
    require(size >= 0, MPI_ERR_ARG, "negative buffer size");
    check_buffer(buffer, size, datatype_of(MPI_BYTE));
    runtime().bsend().attach(buffer, std::size_t(size));
  });
}

int MPI_Buffer_detach(void* buffer_addr, int* size) {
  return guarded("MPI_Buffer_detach", MPI_COMM_WORLD, [&] {
    check_pointer(buffer_addr, "null output pointer");
    check_pointer(size, "null output pointer");
    auto [buffer, bytes] = runtime().bsend().detach();
    std::memcpy(buffer_addr, &buffer, sizeof buffer);  // buffer_addr is really a void**
    *size = int(bytes);
  });
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return guarded("MPI_Recv", comm, [&] {
    Checked c = check_recv(buf, count, datatype, source, tag, comm);
    // The call returns only once the receive completed, so its request can live here.
    Request r(Request::Type::recv, &c.comm);
    P2P& p2p = runtime().p2p();
    p2p.post_recv(r, buf, std::size_t(count), c.type, source, tag, c.comm.p2p_context());
    p2p.wait(r);
    r.fill_status(status);
    if (r.error != MPI_SUCCESS) fail_request(r.error);
  });
}

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return guarded("MPI_Isend", comm, [&] {
    check_pointer(request, "null request pointer");
    *request = start_send(buf, count, datatype, dest, tag, comm, SendMode::standard);
  });
}

int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return guarded("MPI_Issend", comm, [&] {
    check_pointer(request, "null request pointer");
    *request = start_send(buf, count, datatype, dest, tag, comm, SendMode::synchronous);
  });
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return guarded("MPI_Irsend", comm, [&] {
    check_pointer(request, "null request pointer");
    *request = start_send(buf, count, datatype, dest, tag, comm, SendMode::standard);
  });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request* request) {
  return guarded("MPI_Irecv", comm, [&] {
    check_pointer(request, "null request pointer");
    *request = start_recv(buf, count, datatype, source, tag, comm);
  });
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return guarded("MPI_Sendrecv", comm, [&] {
    Request* recv = start_recv(recvbuf, recvcount, recvtype, source, recvtag, comm);
    Request* send = start_send(sendbuf, sendcount, sendtype, dest, sendtag, comm, SendMode::standard);
    runtime().p2p().wait(*send);
    delete send;
    finish_blocking(recv, status);
  });
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status* status) {
  return guarded("MPI_Sendrecv_replace", comm, [&] {
    const Datatype& type = datatype_of(datatype);
    check_count(count);
    check_buffer(buf, count, type);
    std::vector<std::byte> incoming(std::size_t(count) * type.size());
    Request* recv = start_recv(incoming.data(), int(incoming.size()), MPI_BYTE, source, recvtag, comm);
    Request* send = start_send(buf, count, datatype, dest, sendtag, comm, SendMode::standard);
    runtime().p2p().wait(*send);
    delete send;
    runtime().p2p().wait(*recv);
    const std::size_t bytes = recv->bytes;
    MPI_Request handle = recv;
    const int error = retire(&handle, status);
    type.unpack(incoming.data(), bytes, buf);
    if (error != MPI_SUCCESS) fail_request(error);
  });
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Wait", comm, [&] {
    check_pointer(request, "null request pointer");
    Request* r = active_request_of(*request);
    if (!r) return fill_empty_status(status);
    comm = comm_of(r);
    runtime().p2p().wait(*r);
    if (int error = retire(request, status); error != MPI_SUCCESS) fail_request(error);
  });
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Test", comm, [&] {
    check_pointer(request, "null request pointer");
    check_pointer(flag, "null flag pointer");
    Request* r = active_request_of(*request);
    *flag = 1;
    if (!r) return fill_empty_status(status);
    comm = comm_of(r);
    *flag = runtime().p2p().test([&] { return r->complete; });
    if (!*flag) return;
    if (int error = retire(request, status); error != MPI_SUCCESS) fail_request(error);
  });
}

namespace {

// Retires one complete request, its status (if wanted) with its MPI_ERROR;
// the first failure names the communicator whose handler reports it.
void retire_noting_failure(MPI_Request& handle, MPI_Status* status, bool& failed, MPI_Comm& comm) {
  const MPI_Comm request_comm = comm_of(static_cast<Request*>(handle));  // the handle was checked
  const int error = retire(&handle, status);
  if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = error;
  if (error != MPI_SUCCESS && !failed) {
    failed = true;
    comm = request_comm;
  }
}

[[noreturn]] void fail_in_status() { fail(MPI_ERR_IN_STATUS, "a request failed; see the statuses' MPI_ERROR"); }

// Retires the complete requests among `indices`. Their statuses, if wanted,
// are statuses[k] for the k-th index (Waitsome). Throws MPI_ERR_IN_STATUS when one failed.
void retire_all(MPI_Request* handles, std::span<const int> indices, MPI_Status* statuses, MPI_Comm& comm) {
  bool failed = false;
  for (std::size_t k = 0; k < indices.size(); ++k)
    retire_noting_failure(handles[indices[k]], statuses != MPI_STATUSES_IGNORE ? &statuses[k] : MPI_STATUS_IGNORE,
                          failed, comm);
  if (failed) fail_in_status();
}

bool all_complete(std::span<Request*> rs) {
  return std::all_of(rs.begin(), rs.end(), [](Request* r) { return !r || r->complete; });
}

// The same for a wait, which asks again after every message: the requests
// before `first_incomplete` were complete at an earlier look and still are
// (only retiring ends a completion), so each look starts where the last stopped.
bool all_complete_from(std::span<Request*> rs, std::size_t& first_incomplete) {
  while (first_incomplete < rs.size() && (!rs[first_incomplete] || rs[first_incomplete]->complete)) ++first_incomplete;
  return first_incomplete == rs.size();
}

// Waitall's and Testall's ending: every request retired, null ones with
// empty statuses; status i is request i's. Throws MPI_ERR_IN_STATUS when one failed.
void retire_every(int count, MPI_Request* handles, std::span<Request*> rs, MPI_Status* statuses, MPI_Comm& comm) {
  bool failed = false;
  for (int i = 0; i < count; ++i) {
    MPI_Status* status = statuses != MPI_STATUSES_IGNORE ? &statuses[i] : MPI_STATUS_IGNORE;
    if (rs[std::size_t(i)])
      retire_noting_failure(handles[i], status, failed, comm);
    else if (status != MPI_STATUS_IGNORE)
      fill_empty_status(status);
  }
  if (failed) fail_in_status();
}

}  // namespace

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Waitall", comm, [&] {
    ActiveRequests active(count, requests);
    auto rs = active.get();
    std::size_t first_incomplete = 0;
    runtime().p2p().wait_until([&] { return all_complete_from(rs, first_incomplete); });
    retire_every(count, requests, rs, statuses, comm);
  });
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Testall", comm, [&] {
    check_pointer(flag, "null flag pointer");
    ActiveRequests active(count, requests);
    auto rs = active.get();
    *flag = runtime().p2p().test([&] { return all_complete(rs); });
    if (*flag) retire_every(count, requests, rs, statuses, comm);
  });
}

namespace {

// Index of the first complete request, MPI_UNDEFINED if all are null, -1 if none is complete yet.
int first_complete(std::span<Request*> rs) {
  bool any_active = false;
  for (std::size_t i = 0; i < rs.size(); ++i) {
    if (!rs[i]) continue;
    any_active = true;
    if (rs[i]->complete) return int(i);
  }
  return any_active ? -1 : MPI_UNDEFINED;
}

}  // namespace

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Waitany", comm, [&] {
    check_pointer(index, "null index pointer");
    ActiveRequests active(count, requests);
    auto rs = active.get();
    int found = first_complete(rs);
    if (found == -1) runtime().p2p().wait_until([&] { return (found = first_complete(rs)) != -1; });
    *index = found;
    if (found == MPI_UNDEFINED) return fill_empty_status(status);
    comm = comm_of(rs[std::size_t(found)]);
    if (int error = retire(&requests[found], status); error != MPI_SUCCESS) fail_request(error);
  });
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Testany", comm, [&] {
    check_pointer(index, "null index pointer");
    check_pointer(flag, "null flag pointer");
    ActiveRequests active(count, requests);
    auto rs = active.get();
    int found = -1;
    runtime().p2p().test([&] { return (found = first_complete(rs)) != -1; });
    *flag = found != -1;
    *index = found == -1 ? MPI_UNDEFINED : found;
    if (found == -1) return;
    if (found == MPI_UNDEFINED) return fill_empty_status(status);
    comm = comm_of(rs[std::size_t(found)]);
    if (int error = retire(&requests[found], status); error != MPI_SUCCESS) fail_request(error);
  });
}

namespace {

int some(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[], bool block,
         const char* function) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded(function, comm, [&] {
    check_pointer(outcount, "null count pointer");
    ActiveRequests active(incount, requests);
    auto rs = active.get();
    if (block)
      runtime().p2p().wait_until([&] { return first_complete(rs) != -1; });
    else
      runtime().p2p().test([&] { return first_complete(rs) != -1; });
    if (first_complete(rs) == MPI_UNDEFINED) {
      *outcount = MPI_UNDEFINED;
      return;
    }
    std::vector<int> done;
    for (int i = 0; i < incount; ++i)
      if (rs[std::size_t(i)] && rs[std::size_t(i)]->complete) done.push_back(i);
    *outcount = int(done.size());
    if (!done.empty()) check_pointer(indices, "null index array");
    std::copy(done.begin(), done.end(), indices);
    retire_all(requests, done, statuses, comm);
  });
}

}  // namespace

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  return some(incount, requests, outcount, indices, statuses, true, "MPI_Waitsome");
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  return some(incount, requests, outcount, indices, statuses, false, "MPI_Testsome");
}

int MPI_Request_free(MPI_Request* request) {
  return guarded("MPI_Request_free", MPI_COMM_WORLD, [&] {
    check_pointer(request, "null request pointer");
    Request* r = request_of(*request);
    require(r != nullptr, MPI_ERR_REQUEST, "MPI_REQUEST_NULL cannot be freed");
    require(r->type != Request::Type::collective || (r->persistent && !r->persistent->active), MPI_ERR_REQUEST,
            "a non-blocking collective's request cannot be freed (MPI-3.1 5.12), nor an active persistent one");
    // A generalized request is freed for the user now; the object waits for MPI_Grequest_complete.
    if (r->type == Request::Type::generalized) r->generalized.free(r->generalized.extra_state);
    if (r->complete)
      delete r;
    else
      r->detached = true;
    *request = MPI_REQUEST_NULL;
  });
}

// Receives and sends that have not matched can be cancelled (an eager send to
// another rank has gone: it completes as sent); a generalized request's cancel function decides.
int MPI_Cancel(MPI_Request* request) {
  return guarded("MPI_Cancel", MPI_COMM_WORLD, [&] {
    check_pointer(request, "null request pointer");
    Request* r = request_of(*request);
    require(r != nullptr, MPI_ERR_REQUEST, "MPI_REQUEST_NULL cannot be cancelled");
    require(r->type != Request::Type::collective, MPI_ERR_REQUEST,
            "a non-blocking collective cannot be cancelled (MPI-3.1 5.12)");
    switch (r->type) {
      case Request::Type::recv:
        if (!r->complete) runtime().p2p().cancel(*r);
        break;
      case Request::Type::send: runtime().p2p().cancel_send(*r); break;
      case Request::Type::generalized:
        if (int error = r->generalized.cancel(r->generalized.extra_state, r->complete); error != MPI_SUCCESS)
          fail(error, "the generalized request's cancel function failed");
        break;
      case Request::Type::collective: break;
    }
  });
}

int MPI_Test_cancelled(const MPI_Status* status, int* flag) {
  return guarded("MPI_Test_cancelled", MPI_COMM_WORLD, [&] {
    check_pointer(status, "null status pointer");
    check_pointer(flag, "null flag pointer");
    *flag = status->_cancelled;
  });
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  return guarded("MPI_Iprobe", comm, [&] {
    Runtime& rt = runtime();
    Communicator& c = communicator_of(comm);
    check_pointer(flag, "null flag pointer");
    check_recv_tag(tag);
    c.check_rank(source, true, true);
    if (source == MPI_PROC_NULL) {
      *flag = 1;
      return fill_probe_status(ProbeResult{MPI_PROC_NULL, MPI_ANY_TAG, 0}, status);
    }
    std::optional<ProbeResult> found = rt.p2p().iprobe(source, tag, c.p2p_context());
    *flag = found.has_value();
    if (found) fill_probe_status(*found, status);
  });
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return guarded("MPI_Probe", comm, [&] {
    Runtime& rt = runtime();
    Communicator& c = communicator_of(comm);
    check_recv_tag(tag);
    c.check_rank(source, true, true);
    if (source == MPI_PROC_NULL) return fill_probe_status(ProbeResult{MPI_PROC_NULL, MPI_ANY_TAG, 0}, status);
    fill_probe_status(rt.p2p().probe(source, tag, c.p2p_context()), status);
  });
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status) {
  return guarded("MPI_Improbe", comm, [&] {
    Runtime& rt = runtime();
    Communicator& c = communicator_of(comm);
    check_pointer(flag, "null flag pointer");
    check_pointer(message, "null message pointer");
    check_recv_tag(tag);
    c.check_rank(source, true, true);
    if (source == MPI_PROC_NULL) {
      *flag = 1;
      *message = MPI_MESSAGE_NO_PROC;
      return fill_probe_status(ProbeResult{MPI_PROC_NULL, MPI_ANY_TAG, 0}, status);
    }
    std::optional<Incoming> found = rt.p2p().improbe(source, tag, c.p2p_context());
    *flag = found.has_value();
    if (found) *message = publish_matched(std::move(*found), c, status);
  });
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  return guarded("MPI_Mprobe", comm, [&] {
    Runtime& rt = runtime();
    Communicator& c = communicator_of(comm);
    check_pointer(message, "null message pointer");
    check_recv_tag(tag);
    c.check_rank(source, true, true);
    if (source == MPI_PROC_NULL) {
      *message = MPI_MESSAGE_NO_PROC;
      return fill_probe_status(ProbeResult{MPI_PROC_NULL, MPI_ANY_TAG, 0}, status);
    }
    *message = publish_matched(rt.p2p().mprobe(source, tag, c.p2p_context()), c, status);
  });
}

int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Mrecv", comm, [&] { finish_blocking(receive_message(buf, count, datatype, message, comm), status); });
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded("MPI_Imrecv", comm, [&] {
    check_pointer(request, "null request pointer");
    *request = receive_message(buf, count, datatype, message, comm);
  });
}

namespace {

// A count that does not fit an int is MPI_UNDEFINED in the int calls.
int as_int_count(std::optional<MPI_Count> count) {
  return count && *count <= INT_MAX ? int(*count) : MPI_UNDEFINED;
}

// The elements of `type` a status's bytes make; nullopt when they are not a whole number of them.
std::optional<MPI_Count> elements_in(const MPI_Status& status, const Datatype& type) {
  const std::size_t element = type.basic() == Basic::none || type.predefined() ? type.size() : basic_size(type.basic());
  if (element == 0) return 0;
  if (status._ucount % element) return std::nullopt;
  return MPI_Count(status._ucount / element);
}

}  // namespace

int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return guarded("MPI_Get_count", MPI_COMM_WORLD, [&] {
    check_pointer(status, "null status pointer");
    check_pointer(count, "null count pointer");
    const Datatype& type = datatype_of(datatype);
    if (type.size() == 0)
      *count = status->_ucount == 0 ? 0 : MPI_UNDEFINED;
    else if (status->_ucount % type.size())
      *count = MPI_UNDEFINED;
    else
      *count = as_int_count(MPI_Count(status->_ucount / type.size()));
  });
}

int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return guarded("MPI_Get_elements", MPI_COMM_WORLD, [&] {
    check_pointer(status, "null status pointer");
    check_pointer(count, "null count pointer");
    *count = as_int_count(elements_in(*status, datatype_of(datatype)));
  });
}

int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return guarded("MPI_Get_elements_x", MPI_COMM_WORLD, [&] {
    check_pointer(status, "null status pointer");
    check_pointer(count, "null count pointer");
    *count = elements_in(*status, datatype_of(datatype)).value_or(MPI_UNDEFINED);
  });
}
