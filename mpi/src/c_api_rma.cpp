// C entry points: one-sided communication (window creation, data movement,
// atomics, request-based operations, and every synchronization).
#include <memory>

#include "attributes.hpp"
#include "c_api.hpp"
#include "window.hpp"

using namespace viastack::mpi;

namespace {

// Runs an RMA call's body with the window's error handler (MPI_COMM_WORLD's for a bad window).
template <class Body>
int on_window(const char* function, MPI_Win win, Body&& body) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded(function, comm, [&] {
    runtime();
    Window& w = window_of(win);
    comm = w.comm().handle;
    body(w);
  });
}

// An RMA buffer: count elements of a datatype, moved as count * extent bytes
// (contiguous types, and the predefined pairs with their padding).
const Datatype& rma_type(int count, MPI_Datatype datatype) {
  check_count(count);
  const Datatype& type = datatype_of(datatype);
  require(type.contiguous() || type.predefined(), MPI_ERR_TYPE,
          "one-sided communication needs predefined or contiguous datatypes");
  return type;
}

struct Transfer {
  std::size_t bytes;
  const Datatype* origin;
  const Datatype* target;
};

Transfer checked_transfer(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_count,
                          MPI_Datatype target_datatype) {
  const Datatype& origin = rma_type(origin_count, origin_datatype);
  const Datatype& target = rma_type(target_count, target_datatype);
  check_buffer(origin_addr, origin_count, origin);
  const std::size_t bytes = std::size_t(origin_count) * std::size_t(origin.extent());
  require(bytes == std::size_t(target_count) * std::size_t(target.extent()), MPI_ERR_ARG,
          "the origin and target buffers have different sizes");
  return Transfer{bytes, &origin, &target};
}

// The op of an accumulate; fetching ones also take MPI_NO_OP.
const Op& accumulate_op(MPI_Op op, bool fetching) {
  const Op& o = op_of(op);
  require(o.predefined() && (fetching || o.builtin() != Builtin::no_op), MPI_ERR_OP,
          fetching ? "a fetching accumulate takes a predefined operation, MPI_REPLACE or MPI_NO_OP"
                   : "accumulate takes a predefined operation or MPI_REPLACE");
  return o;
}

void check_same_elements(const Datatype& a, const Datatype& b) {
  require(a.basic() == b.basic(), MPI_ERR_TYPE, "the origin and target datatypes have different element types");
}

void check_window_args(MPI_Aint size, int disp_unit, const void* out) {
  check_pointer(out, "null output pointer");
  require(size >= 0, MPI_ERR_SIZE, "negative window size");
  require(disp_unit > 0, MPI_ERR_DISP, "the displacement unit must be positive");
}

void check_lock_type(int lock_type) {
  require(lock_type == MPI_LOCK_EXCLUSIVE || lock_type == MPI_LOCK_SHARED, MPI_ERR_LOCKTYPE,
          "the lock type must be MPI_LOCK_EXCLUSIVE or MPI_LOCK_SHARED");
}

void check_assertion(int assertion, int allowed) {
  require((assertion & ~allowed) == 0, MPI_ERR_ASSERT, "the assertion has bits this call does not take");
}

// A request for a request-based operation on w, which must be inside a passive-target epoch.
Request* rma_request(Window& w, int target_rank, MPI_Request* request) {
  check_pointer(request, "null request pointer");
  if (target_rank != MPI_PROC_NULL) {
    w.comm().check_rank(target_rank, false, false);
    require(w.in_passive_epoch(target_rank), MPI_ERR_RMA_SYNC,
            "request-based operations need a passive-target epoch (MPI_Win_lock or MPI_Win_lock_all)");
  }
  auto* r = new Request(Request::Type::send, &w.comm());
  *request = r;
  if (target_rank == MPI_PROC_NULL) r->complete = true;
  return r;
}

// Makes a window of flavor `flavor` over memory that the library allocates.
MPI_Win allocated_window(MPI_Aint size, int disp_unit, MPI_Comm comm, void* baseptr, bool shared) {
  runtime();
  const Communicator& c = communicator_of(comm);
  check_window_args(size, disp_unit, baseptr);
  std::unique_ptr<WindowMemory> memory =
      shared ? WindowMemory::shared_segment(std::size_t(size), c) : WindowMemory::private_block(std::size_t(size));
  std::byte* base = memory->base(shared ? c.rank() : 0);
  auto* w = new Window(base, std::size_t(size), disp_unit, c, shared ? WindowFlavor::shared : WindowFlavor::allocate,
                       std::move(memory));
  *static_cast<void**>(baseptr) = base;
  return &w->handle;
}

}  // namespace

// ---- creation ----

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info, MPI_Comm comm, MPI_Win* win) {
  return guarded("MPI_Win_create", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_window_args(size, disp_unit, win);
    require(base != nullptr || size == 0, MPI_ERR_ARG, "null base with a non-zero size");
    *win = &(new Window(base, std::size_t(size), disp_unit, c, WindowFlavor::create))->handle;
  });
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  return guarded("MPI_Win_allocate", comm, [&] {
    check_pointer(win, "null output pointer");
    *win = allocated_window(size, disp_unit, comm, baseptr, false);
  });
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  return guarded("MPI_Win_allocate_shared", comm, [&] {
    check_pointer(win, "null output pointer");
    *win = allocated_window(size, disp_unit, comm, baseptr, true);
  });
}

int MPI_Win_create_dynamic(MPI_Info, MPI_Comm comm, MPI_Win* win) {
  return guarded("MPI_Win_create_dynamic", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(win, "null output pointer");
    *win = &(new Window(nullptr, 0, 1, c, WindowFlavor::dynamic))->handle;
  });
}

int MPI_Win_attach(MPI_Win win, void* base, MPI_Aint size) {
  return on_window("MPI_Win_attach", win, [&](Window& w) {
    require(size >= 0, MPI_ERR_SIZE, "negative size");
    w.attach(base, std::size_t(size));
  });
}

int MPI_Win_detach(MPI_Win win, const void* base) {
  return on_window("MPI_Win_detach", win, [&](Window& w) { w.detach(base); });
}

int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr) {
  return on_window("MPI_Win_shared_query", win, [&](Window& w) {
    check_pointer(size, "null output pointer");
    check_pointer(disp_unit, "null output pointer");
    check_pointer(baseptr, "null output pointer");
    w.shared_query(rank, size, disp_unit, baseptr);
  });
}

int MPI_Win_get_group(MPI_Win win, MPI_Group* group) {
  return on_window("MPI_Win_get_group", win, [&](Window& w) {
    check_pointer(group, "null output pointer");
    *group = &(new Group(w.comm().group().world_ranks(), runtime().world_rank()))->handle;
  });
}

int MPI_Win_free(MPI_Win* win) {
  return on_window("MPI_Win_free", win ? *win : MPI_WIN_NULL, [&](Window& w) {
    w.check_no_epoch();
    attribute_cache().remove_all(AttributeHolder::window, *win);
    w.fence(MPI_MODE_NOSUCCEED);
    delete &w;
    *win = MPI_WIN_NULL;
  });
}

// ---- data movement ----

int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  return on_window("MPI_Put", win, [&](Window& w) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    if (target_rank != MPI_PROC_NULL) w.put(origin_addr, t.bytes, target_rank, target_disp);
  });
}

int MPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
            int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  return on_window("MPI_Get", win, [&](Window& w) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    if (target_rank != MPI_PROC_NULL) w.get(origin_addr, t.bytes, target_rank, target_disp);
  });
}

int MPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  return on_window("MPI_Accumulate", win, [&](Window& w) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    const Op& o = accumulate_op(op, false);
    check_same_elements(*t.origin, *t.target);
    o.check_applies_to(*t.target);
    if (target_rank != MPI_PROC_NULL) w.accumulate(origin_addr, t.bytes, t.target->basic(), o, target_rank, target_disp);
  });
}

int MPI_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request* request) {
  return on_window("MPI_Rput", win, [&](Window& w) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    Request* r = rma_request(w, target_rank, request);
    if (target_rank != MPI_PROC_NULL) w.put(origin_addr, t.bytes, target_rank, target_disp, r);
  });
}

int MPI_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
             int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request* request) {
  return on_window("MPI_Rget", win, [&](Window& w) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    Request* r = rma_request(w, target_rank, request);
    if (target_rank != MPI_PROC_NULL) w.get(origin_addr, t.bytes, target_rank, target_disp, r);
  });
}

int MPI_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                    MPI_Request* request) {
  return on_window("MPI_Raccumulate", win, [&](Window& w) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    const Op& o = accumulate_op(op, false);
    check_same_elements(*t.origin, *t.target);
    o.check_applies_to(*t.target);
    Request* r = rma_request(w, target_rank, request);
    if (target_rank != MPI_PROC_NULL)
      w.accumulate(origin_addr, t.bytes, t.target->basic(), o, target_rank, target_disp, r);
  });
}

namespace {

// MPI_Get_accumulate and MPI_Rget_accumulate: the checks, then the operation (done: its request, or null).
void get_accumulate(Window& w, const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                    void* result_addr, int result_count, MPI_Datatype result_datatype, int target_rank,
                    MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op,
                    MPI_Request* request) {
  const Op& o = accumulate_op(op, true);
  const Transfer result =
      checked_transfer(result_addr, result_count, result_datatype, target_count, target_datatype);
  check_same_elements(*result.origin, *result.target);
  if (o.builtin() != Builtin::no_op) {
    const Transfer t = checked_transfer(origin_addr, origin_count, origin_datatype, target_count, target_datatype);
    check_same_elements(*t.origin, *t.target);
    o.check_applies_to(*t.target);
  }
  Request* r = request ? rma_request(w, target_rank, request) : nullptr;
  if (target_rank != MPI_PROC_NULL)
    w.get_accumulate(origin_addr, result_addr, result.bytes, result.target->basic(), o.builtin(), target_rank,
                     target_disp, r);
}

// The element types MPI_Compare_and_swap takes: integers, logicals and bytes.
bool compare_and_swap_type(const Datatype& type) {
  switch (type.basic()) {
    case Basic::int8: case Basic::uint8: case Basic::int16: case Basic::uint16: case Basic::int32:
    case Basic::uint32: case Basic::int64: case Basic::uint64: case Basic::c_bool: case Basic::wchar:
      return true;
    case Basic::none: return type.size() == 1;  // MPI_BYTE, MPI_CHAR
    default: return false;
  }
}

}  // namespace

int MPI_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                       int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                       int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  return on_window("MPI_Get_accumulate", win, [&](Window& w) {
    get_accumulate(w, origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                   target_rank, target_disp, target_count, target_datatype, op, nullptr);
  });
}

int MPI_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                        int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                        int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                        MPI_Request* request) {
  return on_window("MPI_Rget_accumulate", win, [&](Window& w) {
    check_pointer(request, "null request pointer");
    get_accumulate(w, origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                   target_rank, target_disp, target_count, target_datatype, op, request);
  });
}

int MPI_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  return on_window("MPI_Fetch_and_op", win, [&](Window& w) {
    const Datatype& type = datatype_of(datatype);
    require(type.predefined(), MPI_ERR_TYPE, "MPI_Fetch_and_op takes a predefined datatype");
    get_accumulate(w, origin_addr, 1, datatype, result_addr, 1, datatype, target_rank, target_disp, 1, datatype, op,
                   nullptr);
  });
}

int MPI_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win) {
  return on_window("MPI_Compare_and_swap", win, [&](Window& w) {
    const Datatype& type = datatype_of(datatype);
    require(type.predefined() && compare_and_swap_type(type), MPI_ERR_TYPE,
            "MPI_Compare_and_swap takes a predefined integer, logical or byte datatype");
    require(origin_addr && compare_addr && result_addr, MPI_ERR_BUFFER, "null buffer");
    if (target_rank != MPI_PROC_NULL)
      w.compare_and_swap(origin_addr, compare_addr, result_addr, type.size(), target_rank, target_disp);
  });
}

// ---- synchronization ----

int MPI_Win_fence(int assertion, MPI_Win win) {
  return on_window("MPI_Win_fence", win, [&](Window& w) {
    check_assertion(assertion, MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOPRECEDE | MPI_MODE_NOSUCCEED);
    w.fence(assertion);
  });
}

int MPI_Win_post(MPI_Group group, int assertion, MPI_Win win) {
  return on_window("MPI_Win_post", win, [&](Window& w) {
    check_assertion(assertion, MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT);
    w.post(group_of(group), assertion);
  });
}

int MPI_Win_start(MPI_Group group, int assertion, MPI_Win win) {
  return on_window("MPI_Win_start", win, [&](Window& w) {
    check_assertion(assertion, MPI_MODE_NOCHECK);
    w.start(group_of(group), assertion);
  });
}

int MPI_Win_complete(MPI_Win win) {
  return on_window("MPI_Win_complete", win, [&](Window& w) { w.complete(); });
}

int MPI_Win_wait(MPI_Win win) {
  return on_window("MPI_Win_wait", win, [&](Window& w) { w.wait(); });
}

int MPI_Win_test(MPI_Win win, int* flag) {
  return on_window("MPI_Win_test", win, [&](Window& w) {
    check_pointer(flag, "null output pointer");
    *flag = w.test();
  });
}

int MPI_Win_lock(int lock_type, int rank, int assertion, MPI_Win win) {
  return on_window("MPI_Win_lock", win, [&](Window& w) {
    check_lock_type(lock_type);
    check_assertion(assertion, MPI_MODE_NOCHECK);
    if (rank != MPI_PROC_NULL) w.lock(lock_type, rank, assertion);
  });
}

int MPI_Win_unlock(int rank, MPI_Win win) {
  return on_window("MPI_Win_unlock", win, [&](Window& w) {
    if (rank != MPI_PROC_NULL) w.unlock(rank);
  });
}

int MPI_Win_lock_all(int assertion, MPI_Win win) {
  return on_window("MPI_Win_lock_all", win, [&](Window& w) {
    check_assertion(assertion, MPI_MODE_NOCHECK);
    w.lock_all(assertion);
  });
}

int MPI_Win_unlock_all(MPI_Win win) {
  return on_window("MPI_Win_unlock_all", win, [&](Window& w) { w.unlock_all(); });
}

int MPI_Win_flush(int rank, MPI_Win win) {
  return on_window("MPI_Win_flush", win, [&](Window& w) {
    if (rank != MPI_PROC_NULL) w.flush(rank);
  });
}

int MPI_Win_flush_all(MPI_Win win) {
  return on_window("MPI_Win_flush_all", win, [&](Window& w) { w.flush_all(); });
}

int MPI_Win_flush_local(int rank, MPI_Win win) {
  return on_window("MPI_Win_flush_local", win, [&](Window& w) {
    if (rank != MPI_PROC_NULL) w.flush_local(rank);
  });
}

int MPI_Win_flush_local_all(MPI_Win win) {
  return on_window("MPI_Win_flush_local_all", win, [&](Window& w) { w.flush_local_all(); });
}

int MPI_Win_sync(MPI_Win win) {
  return on_window("MPI_Win_sync", win, [&](Window& w) { w.sync(); });
}

int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler) {
  return on_window("MPI_Win_set_errhandler", win,
                   [&](Window& w) { w.comm().set_errhandler(errhandler_for(errhandler, HandleKind::win)); });
}

int MPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler) {
  return on_window("MPI_Win_get_errhandler", win, [&](Window& w) {
    check_pointer(errhandler, "null output pointer");
    *errhandler = handed_out(w.comm().errhandler());
  });
}
