// C entry points: conversions between C handles and Fortran handles
// (MPI_*_c2f, MPI_*_f2c) and between C and Fortran statuses.
//
// A Fortran handle is a small integer, as in Open MPI: an index into a table
// per kind of object, where the predefined objects have the fixed indices of
// Open MPI's mpif-handles.h (MPI_COMM_WORLD 0, MPI_COMM_SELF 1, MPI_COMM_NULL
// 2, MPI_INTEGER 7, MPI_SUM 3, ...), on which programs compiled with Open MPI's
// mpif.h and Open MPI's Fortran library rely. Any other object gets the next
// index the first time it is converted, and keeps it. An index that names no
// object converts to the kind's null handle.
#include <cstring>
#include <unordered_map>
#include <vector>

#include "c_api.hpp"

// Datatypes that mpi.h names only in some configurations (MPI-1's markers,
// Fortran kinds gfortran lacks), and that still have their Fortran indices.
extern "C" struct ompi_predefined_datatype_t ompi_mpi_lb, ompi_mpi_ub;

using namespace viastack::mpi;

namespace {

// Every handle struct starts with its kind (abi.hpp).
HandleKind kind_of(const void* handle) {
  HandleKind kind;
  std::memcpy(&kind, handle, sizeof kind);
  return kind;
}

class FortranHandles {
 public:
  // predefined[i] is the object of Fortran index i; null_index names the null handle.
  FortranHandles(HandleKind kind, std::vector<const void*> predefined, MPI_Fint null_index)
      : kind_(kind), by_index_(std::move(predefined)), null_index_(null_index) {
    for (std::size_t i = by_index_.size(); i-- > 0;) index_of_[by_index_[i]] = MPI_Fint(i);  // aliases: the first
  }

  // The null handle's index for a handle that is not a live object of this kind.
  MPI_Fint c2f(const void* handle) {
    if (handle == nullptr) return null_index_;
    if (const auto known = index_of_.find(handle); known != index_of_.end()) return known->second;
    if (kind_of(handle) != kind_) return null_index_;
    const auto index = MPI_Fint(by_index_.size());
    by_index_.push_back(handle);
    index_of_.emplace(handle, index);
    return index;
  }

  const void* f2c(MPI_Fint index) const {
    if (index < 0 || std::size_t(index) >= by_index_.size()) return by_index_[std::size_t(null_index_)];
    return by_index_[std::size_t(index)];
  }

 private:
  HandleKind kind_;
  std::vector<const void*> by_index_;
  std::unordered_map<const void*, MPI_Fint> index_of_;
  MPI_Fint null_index_;
};

// The tables, made on first use (the predefined objects are static, so that is safe before MPI_Init).
FortranHandles& communicators() {
  static FortranHandles table(HandleKind::communicator, {MPI_COMM_WORLD, MPI_COMM_SELF, MPI_COMM_NULL}, 2);
  return table;
}
FortranHandles& datatypes() {
  static FortranHandles table(HandleKind::datatype, {
    MPI_DATATYPE_NULL, MPI_BYTE, MPI_PACKED, &ompi_mpi_ub, &ompi_mpi_lb, MPI_CHARACTER, MPI_LOGICAL, MPI_INTEGER,
    MPI_INTEGER1, MPI_INTEGER2, MPI_INTEGER4, MPI_INTEGER8, &ompi_mpi_integer16, MPI_REAL, MPI_REAL4, MPI_REAL8,
    MPI_REAL16, MPI_DOUBLE_PRECISION, MPI_COMPLEX, MPI_COMPLEX8, MPI_COMPLEX16, MPI_COMPLEX32,
    MPI_DOUBLE_COMPLEX, MPI_2REAL, MPI_2DOUBLE_PRECISION, MPI_2INTEGER, MPI_2COMPLEX, MPI_2DOUBLE_COMPLEX,
    &ompi_mpi_real2, MPI_LOGICAL1, MPI_LOGICAL2, MPI_LOGICAL4, MPI_LOGICAL8, MPI_WCHAR, MPI_CHAR, MPI_UNSIGNED_CHAR,
    MPI_SIGNED_CHAR, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT, MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG,
    MPI_LONG_LONG_INT, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_FLOAT_INT,
    MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT, MPI_CXX_BOOL, MPI_CXX_COMPLEX,
    MPI_CXX_DOUBLE_COMPLEX, MPI_CXX_LONG_DOUBLE_COMPLEX, MPI_INT8_T, MPI_UINT8_T, MPI_INT16_T, MPI_UINT16_T,
    MPI_INT32_T, MPI_UINT32_T, MPI_INT64_T, MPI_UINT64_T, MPI_AINT, MPI_OFFSET, MPI_C_BOOL, MPI_C_COMPLEX,
    MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX, MPI_COUNT}, 0);
  return table;
}
FortranHandles& groups() {
  static FortranHandles table(HandleKind::group, {MPI_GROUP_NULL, MPI_GROUP_EMPTY}, 0);
  return table;
}
FortranHandles& requests() {
  static FortranHandles table(HandleKind::request, {MPI_REQUEST_NULL}, 0);
  return table;
}
FortranHandles& ops() {
  static FortranHandles table(HandleKind::op,
                              {MPI_OP_NULL, MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR, MPI_BOR,
                               MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP},
                              0);
  return table;
}
FortranHandles& infos() {
  static FortranHandles table(HandleKind::info, {MPI_INFO_NULL, MPI_INFO_ENV}, 0);
  return table;
}
FortranHandles& windows() {
  static FortranHandles table(HandleKind::win, {MPI_WIN_NULL}, 0);
  return table;
}
FortranHandles& files() {
  static FortranHandles table(HandleKind::file, {MPI_FILE_NULL}, 0);
  return table;
}
FortranHandles& errhandlers() {
  static FortranHandles table(HandleKind::errhandler, {MPI_ERRHANDLER_NULL, MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN},
                              0);
  return table;
}
FortranHandles& messages() {
  static FortranHandles table(HandleKind::message, {MPI_MESSAGE_NULL, MPI_MESSAGE_NO_PROC}, 0);
  return table;
}

// Conversions take the library lock like every call: the tables grow.
MPI_Fint to_fortran(FortranHandles& (*table)(), const void* handle) {
  const LibraryEntry entry;
  return table().c2f(handle);
}

template <class Handle>
Handle to_c(FortranHandles& (*table)(), MPI_Fint index) {
  const LibraryEntry entry;
  return static_cast<Handle>(const_cast<void*>(table().f2c(index)));
}

// An MPI_Status is MPI_STATUS_SIZE Fortran integers, converted one by one, as Open MPI does.
constexpr std::size_t kStatusInts = sizeof(MPI_Status) / sizeof(int);
static_assert(sizeof(MPI_Status) % sizeof(int) == 0 && sizeof(MPI_Fint) == sizeof(int));

}  // namespace

MPI_Fint MPI_Comm_c2f(MPI_Comm comm) { return to_fortran(communicators, comm); }
MPI_Comm MPI_Comm_f2c(MPI_Fint comm) { return to_c<MPI_Comm>(communicators, comm); }
MPI_Fint MPI_Type_c2f(MPI_Datatype datatype) { return to_fortran(datatypes, datatype); }
MPI_Datatype MPI_Type_f2c(MPI_Fint datatype) { return to_c<MPI_Datatype>(datatypes, datatype); }
MPI_Fint MPI_Group_c2f(MPI_Group group) { return to_fortran(groups, group); }
MPI_Group MPI_Group_f2c(MPI_Fint group) { return to_c<MPI_Group>(groups, group); }
MPI_Fint MPI_Request_c2f(MPI_Request request) { return to_fortran(requests, request); }
MPI_Request MPI_Request_f2c(MPI_Fint request) { return to_c<MPI_Request>(requests, request); }
MPI_Fint MPI_Op_c2f(MPI_Op op) { return to_fortran(ops, op); }
MPI_Op MPI_Op_f2c(MPI_Fint op) { return to_c<MPI_Op>(ops, op); }
MPI_Fint MPI_Info_c2f(MPI_Info info) { return to_fortran(infos, info); }
MPI_Info MPI_Info_f2c(MPI_Fint info) { return to_c<MPI_Info>(infos, info); }
MPI_Fint MPI_Win_c2f(MPI_Win win) { return to_fortran(windows, win); }
MPI_Win MPI_Win_f2c(MPI_Fint win) { return to_c<MPI_Win>(windows, win); }
MPI_Fint MPI_File_c2f(MPI_File file) { return to_fortran(files, file); }
MPI_File MPI_File_f2c(MPI_Fint file) { return to_c<MPI_File>(files, file); }
MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler) { return to_fortran(errhandlers, errhandler); }
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler) { return to_c<MPI_Errhandler>(errhandlers, errhandler); }
MPI_Fint MPI_Message_c2f(MPI_Message message) { return to_fortran(messages, message); }
MPI_Message MPI_Message_f2c(MPI_Fint message) { return to_c<MPI_Message>(messages, message); }

// MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE (and null) are erroneous here: MPI_ERR_IN_STATUS, as in Open MPI.
int MPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status) {
  return guarded("MPI_Status_c2f", MPI_COMM_WORLD, [&] {
    require(c_status != MPI_STATUS_IGNORE && c_status != MPI_STATUSES_IGNORE && f_status != nullptr &&
                f_status != MPI_F_STATUS_IGNORE && f_status != MPI_F_STATUSES_IGNORE,
            MPI_ERR_IN_STATUS, "a status to convert, and one to convert it into, are needed (not an IGNORE)");
    int ints[kStatusInts];
    std::memcpy(ints, c_status, sizeof ints);
    for (std::size_t i = 0; i < kStatusInts; ++i) f_status[i] = ints[i];
  });
}

int MPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status) {
  return guarded("MPI_Status_f2c", MPI_COMM_WORLD, [&] {
    require(f_status != nullptr && f_status != MPI_F_STATUS_IGNORE && f_status != MPI_F_STATUSES_IGNORE &&
                c_status != MPI_STATUS_IGNORE && c_status != MPI_STATUSES_IGNORE,
            MPI_ERR_IN_STATUS, "a status to convert, and one to convert it into, are needed (not an IGNORE)");
    int ints[kStatusInts];
    for (std::size_t i = 0; i < kStatusInts; ++i) ints[i] = f_status[i];
    std::memcpy(c_status, ints, sizeof ints);
  });
}
