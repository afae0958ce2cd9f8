// C entry points: one-sided communication (windows, fence, put, get, accumulate).
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

}  // namespace

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info, MPI_Comm comm, MPI_Win* win) {
  return guarded("MPI_Win_create", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(win, "null output pointer");
    require(size >= 0, MPI_ERR_SIZE, "negative window size");
    require(disp_unit > 0, MPI_ERR_DISP, "the displacement unit must be positive");
    require(base != nullptr || size == 0, MPI_ERR_ARG, "null base with a non-zero size");
    *win = &(new Window(base, std::size_t(size), disp_unit, c))->handle;
  });
}

int MPI_Win_free(MPI_Win* win) {
  return on_window("MPI_Win_free", win ? *win : MPI_WIN_NULL, [&](Window& w) {
    w.fence(MPI_MODE_NOSUCCEED);
    delete &w;
    *win = MPI_WIN_NULL;
  });
}

int MPI_Win_fence(int assertion, MPI_Win win) {
  return on_window("MPI_Win_fence", win, [&](Window& w) { w.fence(assertion); });
}

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
    const Op& o = op_of(op);
    require(o.predefined() && o.builtin() != Builtin::no_op, MPI_ERR_OP,
            "accumulate takes a predefined operation or MPI_REPLACE");
    require(t.origin->basic() == t.target->basic(), MPI_ERR_TYPE,
            "the origin and target datatypes have different element types");
    o.check_applies_to(*t.target);
    if (target_rank != MPI_PROC_NULL) w.accumulate(origin_addr, t.bytes, t.target->basic(), o, target_rank, target_disp);
  });
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
