#include "errhandler.hpp"

#include <string>
#include <utility>

#include "errors.hpp"
#include "fortran_handles.hpp"

namespace viastack::mpi {

namespace {

UserErrhandler* user_of(MPI_Errhandler handle) {
  return handle->which == ErrhandlerKind::user ? static_cast<UserErrhandler*>(handle) : nullptr;
}

void retain(MPI_Errhandler handle) {
  if (UserErrhandler* user = user_of(handle)) ++user->references;
}

void release(MPI_Errhandler handle) {
  UserErrhandler* user = user_of(handle);
  if (!user || --user->references > 0) return;
  user->kind = HandleKind{};  // a stale handle is then recognised as invalid
  delete user;
}

}  // namespace

ErrhandlerRef::ErrhandlerRef(ErrhandlerKind predefined)
    : handle_(predefined == ErrhandlerKind::returns ? MPI_ERRORS_RETURN : MPI_ERRORS_ARE_FATAL) {}

ErrhandlerRef::ErrhandlerRef(MPI_Errhandler handle) : handle_(handle) { retain(handle_); }

ErrhandlerRef::~ErrhandlerRef() { release(handle_); }

void ErrhandlerRef::apply(void* object, const char* function, int code, const std::string& why) const {
  if (kind() == ErrhandlerKind::returns) return;
  const UserErrhandler* user = user_of(handle_);
  if (!user) abort_job(function, why);
  if (user->language == ErrhandlerLanguage::cxx) {
    using Dispatch = void(void* object, int* code, const char* message, UserErrhandler::Function handler);
    return reinterpret_cast<Dispatch*>(user->open_mpi_cxx_dispatch)(object, &code, why.c_str(), user->call);
  }
  if (user->language == ErrhandlerLanguage::fortran) {
    using FortranHandler = void(MPI_Fint * object, MPI_Fint * code);
    MPI_Fint fortran_object = user->object == HandleKind::communicator ? fortran_handle(*static_cast<MPI_Comm*>(object))
                              : user->object == HandleKind::win      ? fortran_handle(*static_cast<MPI_Win*>(object))
                                                                     : fortran_handle(*static_cast<MPI_File*>(object));
    MPI_Fint fortran_code = code;
    return reinterpret_cast<FortranHandler*>(user->call)(&fortran_object, &fortran_code);
  }
  switch (user->object) {
    case HandleKind::communicator:
      return reinterpret_cast<MPI_Comm_errhandler_function*>(user->call)(static_cast<MPI_Comm*>(object), &code);
    case HandleKind::win:
      return reinterpret_cast<MPI_Win_errhandler_function*>(user->call)(static_cast<MPI_Win*>(object), &code);
    default:
      return reinterpret_cast<MPI_File_errhandler_function*>(user->call)(static_cast<MPI_File*>(object), &code);
  }
}

ErrhandlerRef errhandler_for(MPI_Errhandler handle, HandleKind object) {
  require(handle != nullptr && handle->kind == HandleKind::errhandler && handle->which != ErrhandlerKind::null,
          MPI_ERR_ARG, "invalid error handler");
  const UserErrhandler* user = user_of(handle);
  require(!user || user->object == object, MPI_ERR_ARG,
          "the error handler was made for another kind of object (communicator, window or file)");
  return ErrhandlerRef(handle);
}

MPI_Errhandler handed_out(const ErrhandlerRef& errhandler) {
  retain(errhandler.handle());
  return errhandler.handle();
}

void release_handle(MPI_Errhandler handle) {
  require(handle != nullptr && handle->kind == HandleKind::errhandler && handle->which != ErrhandlerKind::null,
          MPI_ERR_ARG, "invalid error handler");
  release(handle);  // the predefined ones are not counted: freeing them just drops the handle
}

}  // namespace viastack::mpi
