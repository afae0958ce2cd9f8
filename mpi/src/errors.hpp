// The MPI error model: inside the library a bad argument or a failed
// operation throws Error (an MPI error class and a sentence); the C entry
// point catches it and hands it to the communicator's error handler once.
#pragma once

#include <mpi.h>

#include <string>

namespace viastack::mpi {

struct Error {
  int error_class;
  std::string detail;
};

[[noreturn]] void fail(int error_class, std::string detail);
inline void require(bool ok, int error_class, const char* detail) {
  if (!ok) fail(error_class, detail);
}

const char* error_class_name(int error_class);
const char* error_class_text(int error_class);

// Applies comm's error handler (MPI_COMM_WORLD's when comm is not usable) to
// an error raised in `function`: prints and ends the job, or returns the class.
int raise_error(MPI_Comm comm, const char* function, const Error& error);

// Prints "viastack MPI: <function>: <why>" and ends the job with `code`.
[[noreturn]] void abort_job(const char* function, const std::string& why, int code = 1);

}  // namespace viastack::mpi
