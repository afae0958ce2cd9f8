// The Open MPI 4.x handle types, as this library defines them.
//
// mpi.h declares every handle as a pointer to an incomplete struct
// (MPI_Comm = struct ompi_communicator_t*), and every predefined handle as
// the address of an exported object of a fixed size. Here each handle struct
// holds a kind tag, which makes a stray pointer or a handle of the wrong kind
// detectable, and a pointer to the C++ object behind it.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
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

// Open MPI's own language bindings (libmpi_mpifh, libmpi_usempif08,
// libmpi_cxx) were compiled against Open MPI's internal structs and read or
// write a few fields of a handle directly rather than through a function: a
// request's Fortran index after MPI_Wait, an op's flags after MPI_Op_create,
// a communicator's attribute table and groups. Those fields sit here at
// Open MPI 4.1's offsets (static_asserts below); `open_mpi_gap` fills the
// bytes between, which nothing reads. ompi_internals.cpp says what each is for.
namespace viastack::mpi {
template <std::size_t N>
using OpenMpiGap = std::array<std::byte, N>;
// Frees a handle's Fortran index for reuse (fortran_handles.cpp).
void release_fortran_index(HandleKind kind, int index);
// A handle's index in the Fortran handle table of its kind (fortran_handles.cpp):
// -1 until the handle is first converted to Fortran (MPI_*_c2f), then fixed
// until the object is freed, which gives the index back.
template <HandleKind Kind>
struct FortranIndex {
  int value = -1;
  FortranIndex() = default;
  explicit constexpr FortranIndex(int predefined) : value(predefined) {}
  FortranIndex(const FortranIndex&) = delete;
  FortranIndex& operator=(const FortranIndex&) = delete;
  ~FortranIndex() {
    if (value >= 0) release_fortran_index(Kind, value);
  }
};
}  // namespace viastack::mpi

// Open MPI's c_flags bit of an intercommunicator (OMPI_COMM_INTER).
inline constexpr std::uint32_t kOpenMpiCommIntercomm = 0x1;

struct ompi_communicator_t {
  constexpr ompi_communicator_t(viastack::mpi::HandleKind kind, viastack::mpi::Communicator* impl) : kind(kind), impl(impl) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::Communicator* impl;  // null for MPI_COMM_NULL and before MPI_Init
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::communicator> fortran_index;
  viastack::mpi::OpenMpiGap<0xe8 - 0x14> open_mpi_gap1{};
  std::uint32_t open_mpi_flags = 0;  // c_flags: 0x1 for an intercommunicator
  viastack::mpi::OpenMpiGap<0xf8 - 0xec> open_mpi_gap2{};
  ompi_group_t* open_mpi_local_group = nullptr;   // c_local_group: its size is read
  ompi_group_t* open_mpi_remote_group = nullptr;  // c_remote_group
  viastack::mpi::OpenMpiGap<8> open_mpi_gap3{};
  // c_keyhash: handed back to ompi_attr_get_*; the handle itself, from when
  // it gets its Fortran number (the Fortran bindings know no handle before).
  const void* open_mpi_keyhash = nullptr;
};
struct ompi_datatype_t {
  constexpr ompi_datatype_t(viastack::mpi::HandleKind kind, viastack::mpi::Datatype* impl) : kind(kind), impl(impl) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::Datatype* impl;  // null for MPI_DATATYPE_NULL and the unusable MPI-1 markers
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::datatype> fortran_index;
  viastack::mpi::OpenMpiGap<0xd0 - 0x14> open_mpi_gap{};
  const void* open_mpi_keyhash = nullptr;  // d_keyhash: as a communicator's
};
struct ompi_group_t {
  constexpr ompi_group_t(viastack::mpi::HandleKind kind, viastack::mpi::Group* impl) : kind(kind), impl(impl) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::Group* impl;
  int open_mpi_proc_count = 0;  // grp_proc_count
  int open_mpi_my_rank = 0;     // grp_my_rank
  // grp_f_to_c_index: read by MPI_GROUP_INCL & co. without MPI_Group_c2f, so a group gets its index when made.
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::group> fortran_index;
};
struct ompi_op_t {
  constexpr ompi_op_t(viastack::mpi::HandleKind kind, viastack::mpi::Op* impl) : kind(kind), impl(impl) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::Op* impl;
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::op> fortran_index;
  viastack::mpi::OpenMpiGap<0x54 - 0x14> open_mpi_gap{};
  std::uint32_t open_mpi_flags = 0;  // o_flags: MPI_OP_CREATE from Fortran sets 0x2 (a Fortran function)
};
// Requests are allocated as viastack::mpi::Request, which derives from this.
struct ompi_request_t {
  // The predefined requests: every byte set.
  constexpr ompi_request_t(viastack::mpi::HandleKind kind) : kind(kind), open_mpi_gap1{}, open_mpi_gap2{} {}
  // A request made per message leaves the gaps as they are: no code outside
  // reads them, and clearing 180 bytes per request (two `rep stos`) was a
  // good part of a small message's cost on the sender and on the receiver.
  struct GapsUnset {};
  ompi_request_t(viastack::mpi::HandleKind kind, GapsUnset) : kind(kind) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::OpenMpiGap<0x68 - 4> open_mpi_gap1;
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::request> fortran_index;  // req_f_to_c_index
  viastack::mpi::OpenMpiGap<0xc0 - 0x6c> open_mpi_gap2;
  bool open_mpi_grequest_fortran = false;  // set by MPI_GREQUEST_START: the callbacks are Fortran's
};
struct ompi_errhandler_t {
  constexpr ompi_errhandler_t(viastack::mpi::HandleKind kind, viastack::mpi::ErrhandlerKind which) : kind(kind), which(which) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::ErrhandlerKind which;
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::errhandler> fortran_index;
  viastack::mpi::OpenMpiGap<0x78 - 0xc> open_mpi_gap{};
  void (*open_mpi_cxx_dispatch)() = nullptr;  // eh_cxx_dispatch_fn: set by the C++ bindings
};
struct ompi_info_t {
  constexpr ompi_info_t(viastack::mpi::HandleKind kind) : kind(kind) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::info> fortran_index;
};
struct ompi_win_t {
  constexpr ompi_win_t(viastack::mpi::HandleKind kind, viastack::mpi::Window* impl) : kind(kind), impl(impl) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::Window* impl;  // null for MPI_WIN_NULL
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::win> fortran_index;
  viastack::mpi::OpenMpiGap<0xf0 - 0x14> open_mpi_gap{};
  const void* open_mpi_keyhash = nullptr;  // w_keyhash: as a communicator's
};
struct ompi_file_t {
  constexpr ompi_file_t(viastack::mpi::HandleKind kind) : kind(kind) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::file> fortran_index;
};
struct ompi_message_t {
  constexpr ompi_message_t(viastack::mpi::HandleKind kind) : kind(kind) {}
  viastack::mpi::HandleKind kind;
  viastack::mpi::FortranIndex<viastack::mpi::HandleKind::message> fortran_index;
};

static_assert(offsetof(ompi_communicator_t, open_mpi_flags) == 0xe8);
static_assert(offsetof(ompi_communicator_t, open_mpi_local_group) == 0xf8);
static_assert(offsetof(ompi_communicator_t, open_mpi_remote_group) == 0x100);
static_assert(offsetof(ompi_communicator_t, open_mpi_keyhash) == 0x110);
static_assert(offsetof(ompi_datatype_t, open_mpi_keyhash) == 0xd0);
static_assert(offsetof(ompi_group_t, open_mpi_proc_count) == 0x10);
static_assert(offsetof(ompi_group_t, fortran_index) == 0x18);
static_assert(offsetof(ompi_op_t, open_mpi_flags) == 0x54);
static_assert(offsetof(ompi_request_t, fortran_index) == 0x68);
static_assert(offsetof(ompi_request_t, open_mpi_grequest_fortran) == 0xc0);
static_assert(offsetof(ompi_errhandler_t, open_mpi_cxx_dispatch) == 0x78);
static_assert(offsetof(ompi_win_t, open_mpi_keyhash) == 0xf0);
