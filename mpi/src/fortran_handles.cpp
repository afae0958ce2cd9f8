// Fortran handles and the MPI_*_c2f / MPI_*_f2c conversions (MPI-3.1
// §17.2.4), with MPI_Status_c2f / f2c. fortran_handles.hpp says how the
// numbers are given.
#include "fortran_handles.hpp"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <set>
#include <vector>

#include "c_api.hpp"

// Predefined objects that mpi.h does not declare (or declares only for MPI-1 programs).
extern "C" {
extern struct ompi_predefined_datatype_t ompi_mpi_ub, ompi_mpi_lb, ompi_mpi_real2, ompi_mpi_integer16;
extern struct ompi_predefined_errhandler_t ompi_mpi_errors_throw_exceptions;
}

namespace viastack::mpi {
namespace {

constexpr std::size_t kKinds = std::size_t(HandleKind::message) - std::size_t(HandleKind::communicator) + 1;
std::size_t kind_slot(HandleKind kind) { return std::size_t(kind) - std::size_t(HandleKind::communicator); }

// The C handle types and their kinds.
template <class Handle>
constexpr HandleKind kind_of = HandleKind{};
template <>
constexpr HandleKind kind_of<MPI_Comm> = HandleKind::communicator;
template <>
constexpr HandleKind kind_of<MPI_Group> = HandleKind::group;
template <>
constexpr HandleKind kind_of<MPI_Op> = HandleKind::op;
template <>
constexpr HandleKind kind_of<MPI_Datatype> = HandleKind::datatype;
template <>
constexpr HandleKind kind_of<MPI_Request> = HandleKind::request;
template <>
constexpr HandleKind kind_of<MPI_Errhandler> = HandleKind::errhandler;
template <>
constexpr HandleKind kind_of<MPI_Info> = HandleKind::info;
template <>
constexpr HandleKind kind_of<MPI_Win> = HandleKind::win;
template <>
constexpr HandleKind kind_of<MPI_File> = HandleKind::file;
template <>
constexpr HandleKind kind_of<MPI_Message> = HandleKind::message;

// Open MPI 4.1's Fortran numbers of its predefined objects (mpif-handles.h),
// by position; nullptr where a number has no object here.
template <class Handle>
std::vector<Handle> predefined_handles();

template <>
std::vector<MPI_Comm> predefined_handles() {
  return {MPI_COMM_WORLD, MPI_COMM_SELF, MPI_COMM_NULL};
}
template <>
std::vector<MPI_Group> predefined_handles() {
  return {MPI_GROUP_NULL, MPI_GROUP_EMPTY};
}
template <>
std::vector<MPI_Op> predefined_handles() {
  return {MPI_OP_NULL, MPI_MAX,  MPI_MIN,  MPI_SUM,    MPI_PROD,   MPI_LAND,    MPI_BAND,  MPI_LOR,
          MPI_BOR,     MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP};
}
template <>
std::vector<MPI_Datatype> predefined_handles() {
  auto ub = reinterpret_cast<MPI_Datatype>(&ompi_mpi_ub);
  auto lb = reinterpret_cast<MPI_Datatype>(&ompi_mpi_lb);
  auto real2 = reinterpret_cast<MPI_Datatype>(&ompi_mpi_real2);
  auto integer16 = reinterpret_cast<MPI_Datatype>(&ompi_mpi_integer16);
  return {MPI_DATATYPE_NULL,
          MPI_BYTE,
          MPI_PACKED,
          ub,
          lb,
          MPI_CHARACTER,
          MPI_LOGICAL,
          MPI_INTEGER,
          MPI_INTEGER1,
          MPI_INTEGER2,
          MPI_INTEGER4,
          MPI_INTEGER8,
          integer16,
          MPI_REAL,
          MPI_REAL4,
          MPI_REAL8,
          MPI_REAL16,
          MPI_DOUBLE_PRECISION,
          MPI_COMPLEX,
          MPI_COMPLEX8,
          MPI_COMPLEX16,
          MPI_COMPLEX32,
          MPI_DOUBLE_COMPLEX,
          MPI_2REAL,
          MPI_2DOUBLE_PRECISION,
          MPI_2INTEGER,
          MPI_2COMPLEX,
          MPI_2DOUBLE_COMPLEX,
          real2,
          MPI_LOGICAL1,
          MPI_LOGICAL2,
          MPI_LOGICAL4,
          MPI_LOGICAL8,
          MPI_WCHAR,
          MPI_CHAR,
          MPI_UNSIGNED_CHAR,
          MPI_SIGNED_CHAR,
          MPI_SHORT,
          MPI_UNSIGNED_SHORT,
          MPI_INT,
          MPI_UNSIGNED,
          MPI_LONG,
          MPI_UNSIGNED_LONG,
          MPI_LONG_LONG_INT,
          MPI_UNSIGNED_LONG_LONG,
          MPI_FLOAT,
          MPI_DOUBLE,
          MPI_LONG_DOUBLE,
          MPI_FLOAT_INT,
          MPI_DOUBLE_INT,
          MPI_LONG_DOUBLE_INT,
          MPI_LONG_INT,
          MPI_2INT,
          MPI_SHORT_INT,
          MPI_CXX_BOOL,
          MPI_CXX_FLOAT_COMPLEX,
          MPI_CXX_DOUBLE_COMPLEX,
          MPI_CXX_LONG_DOUBLE_COMPLEX,
          MPI_INT8_T,
          MPI_UINT8_T,
          MPI_INT16_T,
          MPI_UINT16_T,
          MPI_INT32_T,
          MPI_UINT32_T,
          MPI_INT64_T,
          MPI_UINT64_T,
          MPI_AINT,
          MPI_OFFSET,
          MPI_C_BOOL,
          MPI_C_FLOAT_COMPLEX,
          MPI_C_DOUBLE_COMPLEX,
          MPI_C_LONG_DOUBLE_COMPLEX,
          MPI_COUNT};
}
// Objects that share a number with another: MPI_C_COMPLEX is MPI_C_FLOAT_COMPLEX's.
template <class Handle>
std::vector<std::pair<Handle, int>> predefined_aliases() {
  return {};
}
template <>
std::vector<std::pair<MPI_Datatype, int>> predefined_aliases() {
  return {{MPI_C_COMPLEX, 69}};
}
template <>
std::vector<MPI_Request> predefined_handles() {
  return {MPI_REQUEST_NULL};
}
template <>
std::vector<MPI_Errhandler> predefined_handles() {
  return {MPI_ERRHANDLER_NULL, MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN,
          reinterpret_cast<MPI_Errhandler>(&ompi_mpi_errors_throw_exceptions)};
}
template <>
std::vector<MPI_Info> predefined_handles() {
  return {MPI_INFO_NULL, MPI_INFO_ENV};
}
template <>
std::vector<MPI_Win> predefined_handles() {
  return {MPI_WIN_NULL};
}
template <>
std::vector<MPI_File> predefined_handles() {
  return {MPI_FILE_NULL};
}
template <>
std::vector<MPI_Message> predefined_handles() {
  return {MPI_MESSAGE_NULL, MPI_MESSAGE_NO_PROC};
}

// A handle with an attribute table field (abi.hpp) names itself there, for ompi_attr_get_*.
template <class Handle>
void publish_keyhash(Handle handle) {
  if constexpr (requires { handle->open_mpi_keyhash; }) handle->open_mpi_keyhash = handle;
}

struct Table {
  std::vector<void*> handles;  // by Fortran number; nullptr: free
  std::set<int> free;          // freed numbers, the lowest given first
  int predefined = 0;
};

// The tables are made on first use and never destroyed: objects freed while
// the process exits still give their numbers back.
struct Tables {
  std::mutex lock;
  Table by_kind[kKinds];

  template <class Handle>
  void add_predefined() {
    const std::vector<Handle> handles = predefined_handles<Handle>();
    Table& table = by_kind[kind_slot(kind_of<Handle>)];
    for (Handle handle : handles) {
      publish_keyhash(handle);
      handle->fortran_index.value = int(table.handles.size());
      table.handles.push_back(handle);
    }
    for (auto [handle, index] : predefined_aliases<Handle>()) handle->fortran_index.value = index;
    table.predefined = int(table.handles.size());
  }

  Tables() {
    add_predefined<MPI_Comm>();
    add_predefined<MPI_Group>();
    add_predefined<MPI_Op>();
    add_predefined<MPI_Datatype>();
    add_predefined<MPI_Request>();
    add_predefined<MPI_Errhandler>();
    add_predefined<MPI_Info>();
    add_predefined<MPI_Win>();
    add_predefined<MPI_File>();
    add_predefined<MPI_Message>();
  }
};

Tables& tables() {
  static Tables* const made = new Tables;
  return *made;
}

}  // namespace

template <class Handle>
MPI_Fint fortran_handle(Handle handle) {
  if (handle == nullptr || handle->kind != kind_of<Handle>) return -1;
  Tables& all = tables();
  const std::lock_guard<std::mutex> hold(all.lock);
  int& index = handle->fortran_index.value;
  if (index >= 0) return index;
  Table& table = all.by_kind[kind_slot(kind_of<Handle>)];
  publish_keyhash(handle);
  if (table.free.empty()) {
    index = int(table.handles.size());
    table.handles.push_back(handle);
  } else {
    index = *table.free.begin();
    table.free.erase(table.free.begin());
    table.handles[std::size_t(index)] = handle;
  }
  return index;
}

template <class Handle>
Handle c_handle(MPI_Fint index) {
  Tables& all = tables();
  const std::lock_guard<std::mutex> hold(all.lock);
  const Table& table = all.by_kind[kind_slot(kind_of<Handle>)];
  if (index < 0 || std::size_t(index) >= table.handles.size()) return nullptr;
  return static_cast<Handle>(table.handles[std::size_t(index)]);
}

void release_fortran_index(HandleKind kind, int index) {
  Tables& all = tables();
  const std::lock_guard<std::mutex> hold(all.lock);
  Table& table = all.by_kind[kind_slot(kind)];
  if (index < table.predefined || std::size_t(index) >= table.handles.size()) return;
  table.handles[std::size_t(index)] = nullptr;
  table.free.insert(index);
}

#define VIASTACK_FORTRAN_HANDLE_TYPES(X) \
  X(MPI_Comm) X(MPI_Group) X(MPI_Op) X(MPI_Datatype) X(MPI_Request) X(MPI_Errhandler) X(MPI_Info) X(MPI_Win) X(MPI_File) \
  X(MPI_Message)
#define VIASTACK_INSTANTIATE(Handle)                         \
  template MPI_Fint fortran_handle<Handle>(Handle handle); \
  template Handle c_handle<Handle>(MPI_Fint index);
VIASTACK_FORTRAN_HANDLE_TYPES(VIASTACK_INSTANTIATE)
#undef VIASTACK_INSTANTIATE
#undef VIASTACK_FORTRAN_HANDLE_TYPES

}  // namespace viastack::mpi

using namespace viastack::mpi;

// MPI_X_c2f / MPI_X_f2c for each handle type: as in Open MPI, a handle that
// is not one gives -1, and a number no object has gives a null pointer
// (which every call then refuses with its error class), never an error handler call.
#define VIASTACK_CONVERSIONS(Name, Handle)                                   \
  MPI_Fint MPI_##Name##_c2f(Handle handle) { return fortran_handle(handle); } \
  Handle MPI_##Name##_f2c(MPI_Fint index) { return c_handle<Handle>(index); }
VIASTACK_CONVERSIONS(Comm, MPI_Comm)
VIASTACK_CONVERSIONS(Group, MPI_Group)
VIASTACK_CONVERSIONS(Op, MPI_Op)
VIASTACK_CONVERSIONS(Type, MPI_Datatype)
VIASTACK_CONVERSIONS(Request, MPI_Request)
VIASTACK_CONVERSIONS(Errhandler, MPI_Errhandler)
VIASTACK_CONVERSIONS(Info, MPI_Info)
VIASTACK_CONVERSIONS(Win, MPI_Win)
VIASTACK_CONVERSIONS(File, MPI_File)
VIASTACK_CONVERSIONS(Message, MPI_Message)
#undef VIASTACK_CONVERSIONS

// A Fortran status is the C one's ints (MPI_STATUS_SIZE = 6 = sizeof(MPI_Status) / sizeof(int)).
static_assert(sizeof(MPI_Status) == 6 * sizeof(MPI_Fint));

int MPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status) {
  return guarded("MPI_Status_c2f", MPI_COMM_WORLD, [&] {
    require(c_status != MPI_STATUS_IGNORE && f_status != nullptr && f_status != MPI_F_STATUS_IGNORE,
            MPI_ERR_IN_STATUS, "MPI_STATUS_IGNORE or a null status cannot be converted");
    std::memcpy(f_status, c_status, sizeof(MPI_Status));
  });
}

int MPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status) {
  return guarded("MPI_Status_f2c", MPI_COMM_WORLD, [&] {
    require(f_status != nullptr && f_status != MPI_F_STATUS_IGNORE && c_status != MPI_STATUS_IGNORE,
            MPI_ERR_IN_STATUS, "MPI_F_STATUS_IGNORE or a null status cannot be converted");
    std::memcpy(c_status, f_status, sizeof(MPI_Status));
  });
}
