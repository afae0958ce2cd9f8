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

// Error classes and codes the program adds (MPI_Add_error_class/_code/_string),
// numbered on from MPI_ERR_LASTCODE. Each throws MPI_ERR_ARG for a code that is
// not one (or, for strings, not the program's).
int add_error_class();
int add_error_code(int error_class);
void set_error_string(int code, std::string text);
int class_of_error_code(int code);
// "MPI_ERR_X: what it means" for a predefined class; the program's string for its own codes.
std::string error_string(int code);
// The largest error code in use (the value of the MPI_LASTUSEDCODE attribute).
int last_used_error_code();

// "MPI_ERR_X: detail (rank N)": what a handler is told about an error.
std::string error_message(const Error& error);

// Applies comm's error handler (MPI_COMM_WORLD's when comm is not usable) to
// an error raised in `function`: prints and ends the job, or returns the class.
int raise_error(MPI_Comm comm, const char* function, const Error& error);

// Prints "viastack MPI: <function>: <why>" and ends the job with `code`.
[[noreturn]] void abort_job(const char* function, const std::string& why, int code = 1);

}  // namespace viastack::mpi
