// The Open MPI 4.x handle types, as this library defines them.
//
// mpi.h declares every handle as a pointer to an incomplete struct
// (MPI_Comm = struct ompi_communicator_t*), and every predefined handle as
// the address of an exported object of a fixed size. Here each handle struct
// holds a kind tag, which makes a stray pointer or a handle of the wrong kind
// detectable, and a pointer to the C++ object behind it.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace viastack::mpi {

class Communicator;
class Datatype;
class Group;
class Op;
class Request;
class Window;

// Distinct non-trivial values, so that zeroed or foreign memory is not mistaken for a handle.
enum class HandleKind : std::uint32_t {
  communicator = 0x7c0a1c01,
  datatype = 0x7c0a1c02,
  group = 0x7c0a1c03,
  op = 0x7c0a1c04,
  request = 0x7c0a1c05,
  errhandler = 0x7c0a1c06,
  info = 0x7c0a1c07,
  win = 0x7c0a1c08,
  file = 0x7c0a1c09,
  message = 0x7c0a1c0a,
};

enum class ErrhandlerKind : std::uint32_t { null, fatal, returns, user };

}  // namespace viastack::mpi

struct ompi_communicator_t {
  viastack::mpi::HandleKind kind;
  viastack::mpi::Communicator* impl;  // null for MPI_COMM_NULL and before MPI_Init
};
struct ompi_datatype_t {
  viastack::mpi::HandleKind kind;
  viastack::mpi::Datatype* impl;  // null for MPI_DATATYPE_NULL and the unusable MPI-1 markers
};
struct ompi_group_t {
  viastack::mpi::HandleKind kind;
  viastack::mpi::Group* impl;
};
struct ompi_op_t {
  viastack::mpi::HandleKind kind;
  viastack::mpi::Op* impl;
};
// Requests are allocated as viastack::mpi::Request, which derives from this.
struct ompi_request_t {
  viastack::mpi::HandleKind kind;
};
struct ompi_errhandler_t {
  viastack::mpi::HandleKind kind;
  viastack::mpi::ErrhandlerKind which;
};
struct ompi_info_t {
  viastack::mpi::HandleKind kind;
};
struct ompi_win_t {
  viastack::mpi::HandleKind kind;
  viastack::mpi::Window* impl;  // null for MPI_WIN_NULL
};
struct ompi_file_t {
  viastack::mpi::HandleKind kind;
};
struct ompi_message_t {
  viastack::mpi::HandleKind kind;
};
