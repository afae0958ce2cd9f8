// Error handlers: the predefined ones (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN)
// and the program's own (MPI_Comm/Win/File_create_errhandler). A program's
// handler lives while its handle or any object it is set on refers to it.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>

#include "abi.hpp"

namespace viastack::mpi {

// The language a handler was written in, which says how it is called: C
// (MPI_Comm_create_errhandler), C++ (MPI::Comm::Create_errhandler: through
// the dispatch function the C++ bindings set in open_mpi_cxx_dispatch) or
// Fortran (the object's Fortran handle and the code as MPI_Fint*). Open MPI's
// ompi_errhandler_lang_t numbers.
enum class ErrhandlerLanguage { c = 0, cxx = 1, fortran = 2 };

// A program's error handler: ompi_errhandler_t with `which` = ErrhandlerKind::user.
struct UserErrhandler : ompi_errhandler_t {
  using Function = void (*)();
  UserErrhandler(HandleKind object_kind, Function function, ErrhandlerLanguage language = ErrhandlerLanguage::c)
      : ompi_errhandler_t{HandleKind::errhandler, ErrhandlerKind::user},
        object(object_kind),
        call(function),
        language(language) {}
  HandleKind object;  // what it is for: communicator, win or file
  Function call;      // an MPI_Comm_errhandler_function*, MPI_Win_... or MPI_File_..., by `object`
  ErrhandlerLanguage language;
  int references = 1;
};

// A counted reference to an error handler, predefined or the program's.
class ErrhandlerRef {
 public:
  ErrhandlerRef(ErrhandlerKind predefined);  // fatal or returns
  // Takes a new reference to a valid handle.
  explicit ErrhandlerRef(MPI_Errhandler handle);
  ErrhandlerRef(const ErrhandlerRef& other) : ErrhandlerRef(other.handle_) {}
  ErrhandlerRef& operator=(ErrhandlerRef other) {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~ErrhandlerRef();

  ErrhandlerKind kind() const { return handle_->which; }
  MPI_Errhandler handle() const { return handle_; }

  // Applies the handler to an error code raised on the object whose handle is at `object`
  // (an MPI_Comm*, MPI_Win* or MPI_File*): calls the program's handler, or ends the job
  // naming `function` and `why` (fatal); returns for MPI_ERRORS_RETURN and after a program's handler.
  void apply(void* object, const char* function, int code, const std::string& why) const;

 private:
  MPI_Errhandler handle_;
};

// The program's handler behind a handle, for an object of kind `object`
// (MPI_ERR_ARG: null, freed, or made for another kind of object).
ErrhandlerRef errhandler_for(MPI_Errhandler handle, HandleKind object);
// What MPI_*_get_errhandler hands out: the handle, with a reference the program frees.
MPI_Errhandler handed_out(const ErrhandlerRef& errhandler);
// MPI_Errhandler_free: drops the program's reference.
void release_handle(MPI_Errhandler handle);

}  // namespace viastack::mpi
