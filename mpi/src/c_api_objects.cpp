// C entry points: what the program can ask of or attach to objects beyond
// their main work: a window's name and info hints, whether an operation
// commutes, and MPI_Pcontrol for profiling tools.
#include <cstring>
#include <string>

#include "c_api.hpp"
#include "ops.hpp"
#include "window.hpp"

using namespace viastack::mpi;

namespace {

// A window keeps its name and hints on its own communicator (window.hpp), which the program never sees.
template <class Body>
int on_window(const char* function, MPI_Win win, Body&& body) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded(function, comm, [&] {
    runtime();
    Window& w = window_of(win);
    comm = w.comm().handle;
    body(w.comm());
  });
}

}  // namespace

int MPI_Win_set_name(MPI_Win win, const char* win_name) {
  return on_window("MPI_Win_set_name", win, [&](Communicator& own) {
    check_pointer(win_name, "null name");
    own.set_name(std::string(win_name).substr(0, MPI_MAX_OBJECT_NAME - 1));
  });
}

int MPI_Win_get_name(MPI_Win win, char* win_name, int* resultlen) {
  return on_window("MPI_Win_get_name", win, [&](Communicator& own) {
    check_pointer(win_name, "null name buffer");
    check_pointer(resultlen, "null length pointer");
    const std::string& name = own.name();
    std::memcpy(win_name, name.c_str(), name.size() + 1);
    *resultlen = int(name.size());
  });
}

// Every hint is kept (none changes what the window does) and handed back by MPI_Win_get_info.
int MPI_Win_set_info(MPI_Win win, MPI_Info info) {
  return on_window("MPI_Win_set_info", win,
                   [&](Communicator& own) { own.set_hints(updated_hints(own.hints(), info_of(info))); });
}

int MPI_Win_get_info(MPI_Win win, MPI_Info* info_used) {
  return on_window("MPI_Win_get_info", win, [&](Communicator& own) {
    check_pointer(info_used, "null output pointer");
    *info_used = std::make_unique<Info>(own.hints()).release();
  });
}

int MPI_Op_commutative(MPI_Op op, int* commute) {
  return guarded("MPI_Op_commutative", MPI_COMM_WORLD, [&] {
    check_pointer(commute, "null output pointer");
    *commute = op_of(op).commutative();
  });
}

// The standard lets MPI_Pcontrol do nothing: it is a hook for profiling
// libraries, which interpose on it (a tool's MPI_Pcontrol runs instead).
int MPI_Pcontrol(const int, ...) { return MPI_SUCCESS; }
