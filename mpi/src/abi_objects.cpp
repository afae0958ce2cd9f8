// The predefined objects that mpi.h names (MPI_COMM_WORLD is
// &ompi_mpi_comm_world, MPI_INT is &ompi_mpi_int, ...), exported with exactly
// the sizes Open MPI 4.x gives them: executables built against Open MPI copy
// these objects into themselves at the size they saw at link time.
//
// Each object is our handle struct padded to that size. The handle's impl
// pointer is set statically (datatypes, ops, groups) or by MPI_Init
// (communicators); ld.so copies the initial bytes before anything runs.
#include <complex>

#include "abi.hpp"
#include "comm.hpp"
#include "datatype.hpp"
#include "ops.hpp"

// The exported objects are defined inside EXPORTED_BEGIN/END: C names and
// default visibility whether or not mpi.h declares them (a few exist only
// for binary compatibility).
#define VIASTACK_EXPORTED_BEGIN _Pragma("GCC visibility push(default)") extern "C" {
#define VIASTACK_EXPORTED_END } _Pragma("GCC visibility pop")

#define VIASTACK_PREDEFINED(name, handle_type, size)                                 \
  struct name {                                                                      \
    handle_type handle;                                                              \
    char padding[size - sizeof(handle_type)];                                        \
  };                                                                                 \
  static_assert(sizeof(name) == size, #name " must keep Open MPI's size")

VIASTACK_PREDEFINED(ompi_predefined_communicator_t, ompi_communicator_t, 512);
VIASTACK_PREDEFINED(ompi_predefined_group_t, ompi_group_t, 256);
VIASTACK_PREDEFINED(ompi_predefined_request_t, ompi_request_t, 256);
VIASTACK_PREDEFINED(ompi_predefined_message_t, ompi_message_t, 256);
VIASTACK_PREDEFINED(ompi_predefined_op_t, ompi_op_t, 2048);
VIASTACK_PREDEFINED(ompi_predefined_datatype_t, ompi_datatype_t, 512);
VIASTACK_PREDEFINED(ompi_predefined_errhandler_t, ompi_errhandler_t, 1024);
VIASTACK_PREDEFINED(ompi_predefined_win_t, ompi_win_t, 512);
VIASTACK_PREDEFINED(ompi_predefined_file_t, ompi_file_t, 1536);
VIASTACK_PREDEFINED(ompi_predefined_info_t, ompi_info_t, 256);
#undef VIASTACK_PREDEFINED

using viastack::mpi::Basic;
using viastack::mpi::Builtin;
using viastack::mpi::Datatype;
using viastack::mpi::ErrhandlerKind;
using viastack::mpi::Group;
using viastack::mpi::HandleKind;
using viastack::mpi::Op;

namespace viastack::mpi {
namespace {
Group empty_group{{}, MPI_UNDEFINED};
}
}  // namespace viastack::mpi

// ---- communicators, groups, requests, messages, errhandlers, windows, files, infos ----

VIASTACK_EXPORTED_BEGIN
ompi_predefined_communicator_t ompi_mpi_comm_world{{HandleKind::communicator, nullptr}, {}};
ompi_predefined_communicator_t ompi_mpi_comm_self{{HandleKind::communicator, nullptr}, {}};
ompi_predefined_communicator_t ompi_mpi_comm_null{{HandleKind::communicator, nullptr}, {}};

ompi_predefined_group_t ompi_mpi_group_empty{{HandleKind::group, &viastack::mpi::empty_group}, {}};
ompi_predefined_group_t ompi_mpi_group_null{{HandleKind::group, nullptr}, {}};

ompi_predefined_request_t ompi_request_null{{HandleKind::request}, {}};
ompi_predefined_message_t ompi_message_null{{HandleKind::message}, {}};
ompi_predefined_message_t ompi_message_no_proc{{HandleKind::message}, {}};

ompi_predefined_errhandler_t ompi_mpi_errhandler_null{{HandleKind::errhandler, ErrhandlerKind::null}, {}};
ompi_predefined_errhandler_t ompi_mpi_errors_are_fatal{{HandleKind::errhandler, ErrhandlerKind::fatal}, {}};
ompi_predefined_errhandler_t ompi_mpi_errors_return{{HandleKind::errhandler, ErrhandlerKind::returns}, {}};
// The C++ bindings' MPI::ERRORS_THROW_EXCEPTIONS; C programs see it as "return".
ompi_predefined_errhandler_t ompi_mpi_errors_throw_exceptions{{HandleKind::errhandler, ErrhandlerKind::returns}, {}};

ompi_predefined_win_t ompi_mpi_win_null{{HandleKind::win, nullptr}, {}};
ompi_predefined_file_t ompi_mpi_file_null{{HandleKind::file}, {}};
ompi_predefined_info_t ompi_mpi_info_null{{HandleKind::info}, {}};
ompi_predefined_info_t ompi_mpi_info_env{{HandleKind::info}, {}};

VIASTACK_EXPORTED_END

// ---- reduction operations ----

#define VIASTACK_OPS(X)                                                                                   \
  X(max) X(min) X(sum) X(prod) X(land) X(band) X(lor) X(bor) X(lxor) X(bxor) X(maxloc) X(minloc) X(replace) \
  X(no_op)

#define VIASTACK_DECLARE_OP(name) extern Op op_##name;
namespace viastack::mpi {
VIASTACK_OPS(VIASTACK_DECLARE_OP)
}
#undef VIASTACK_DECLARE_OP

#define VIASTACK_DEFINE_OP_HANDLE(name) \
  ompi_predefined_op_t ompi_mpi_op_##name{{HandleKind::op, &viastack::mpi::op_##name}, {}};
VIASTACK_EXPORTED_BEGIN
VIASTACK_OPS(VIASTACK_DEFINE_OP_HANDLE)
ompi_predefined_op_t ompi_mpi_op_null{{HandleKind::op, nullptr}, {}};
VIASTACK_EXPORTED_END
#undef VIASTACK_DEFINE_OP_HANDLE

#define VIASTACK_DEFINE_OP(name) Op op_##name{Builtin::name, &ompi_mpi_op_##name.handle};
namespace viastack::mpi {
VIASTACK_OPS(VIASTACK_DEFINE_OP)
}
#undef VIASTACK_DEFINE_OP
#undef VIASTACK_OPS

// ---- datatypes ----

// X(symbol suffix, MPI name, data bytes, element kind): one block as long as the type.
#define VIASTACK_SIMPLE_TYPES(X)                                                                   \
  X(char, "MPI_CHAR", 1, int8)                                                                     \
  X(signed_char, "MPI_SIGNED_CHAR", 1, int8)                                                       \
  X(unsigned_char, "MPI_UNSIGNED_CHAR", 1, uint8)                                                  \
  X(byte, "MPI_BYTE", 1, uint8)                                                                    \
  X(short, "MPI_SHORT", sizeof(short), int16)                                                      \
  X(unsigned_short, "MPI_UNSIGNED_SHORT", sizeof(short), uint16)                                   \
  X(int, "MPI_INT", sizeof(int), int32)                                                            \
  X(unsigned, "MPI_UNSIGNED", sizeof(unsigned), uint32)                                            \
  X(long, "MPI_LONG", sizeof(long), int64)                                                         \
  X(unsigned_long, "MPI_UNSIGNED_LONG", sizeof(long), uint64)                                      \
  X(long_long_int, "MPI_LONG_LONG_INT", sizeof(long long), int64)                                  \
  X(unsigned_long_long, "MPI_UNSIGNED_LONG_LONG", sizeof(long long), uint64)                       \
  X(float, "MPI_FLOAT", sizeof(float), float32)                                                    \
  X(double, "MPI_DOUBLE", sizeof(double), float64)                                                 \
  X(long_double, "MPI_LONG_DOUBLE", sizeof(long double), long_double)                              \
  X(wchar, "MPI_WCHAR", sizeof(wchar_t), wchar)                                                    \
  X(packed, "MPI_PACKED", 1, none)                                                                 \
  X(c_bool, "MPI_C_BOOL", sizeof(bool), c_bool)                                                    \
  X(int8_t, "MPI_INT8_T", 1, int8)                                                                 \
  X(uint8_t, "MPI_UINT8_T", 1, uint8)                                                              \
  X(int16_t, "MPI_INT16_T", 2, int16)                                                              \
  X(uint16_t, "MPI_UINT16_T", 2, uint16)                                                           \
  X(int32_t, "MPI_INT32_T", 4, int32)                                                              \
  X(uint32_t, "MPI_UINT32_T", 4, uint32)                                                           \
  X(int64_t, "MPI_INT64_T", 8, int64)                                                              \
  X(uint64_t, "MPI_UINT64_T", 8, uint64)                                                           \
  X(aint, "MPI_AINT", sizeof(MPI_Aint), int64)                                                     \
  X(offset, "MPI_OFFSET", sizeof(MPI_Offset), int64)                                               \
  X(count, "MPI_COUNT", sizeof(MPI_Count), int64)                                                  \
  X(c_complex, "MPI_C_COMPLEX", sizeof(std::complex<float>), complex_float)                        \
  X(c_float_complex, "MPI_C_FLOAT_COMPLEX", sizeof(std::complex<float>), complex_float)            \
  X(c_double_complex, "MPI_C_DOUBLE_COMPLEX", sizeof(std::complex<double>), complex_double)         \
  X(c_long_double_complex, "MPI_C_LONG_DOUBLE_COMPLEX", sizeof(std::complex<long double>),         \
    complex_long_double)                                                                           \
  X(float_int, "MPI_FLOAT_INT", 8, float_int)                                                      \
  X(2int, "MPI_2INT", 8, int_int)                                                                  \
  X(cxx_bool, "MPI_CXX_BOOL", sizeof(bool), c_bool)                                                \
  X(cxx_cplex, "MPI_CXX_FLOAT_COMPLEX", sizeof(std::complex<float>), complex_float)                \
  X(cxx_dblcplex, "MPI_CXX_DOUBLE_COMPLEX", sizeof(std::complex<double>), complex_double)          \
  X(cxx_ldblcplex, "MPI_CXX_LONG_DOUBLE_COMPLEX", sizeof(std::complex<long double>),               \
    complex_long_double)                                                                           \
  X(logical, "MPI_LOGICAL", 4, int32)                                                              \
  X(character, "MPI_CHARACTER", 1, int8)                                                           \
  X(integer, "MPI_INTEGER", 4, int32)                                                              \
  X(real, "MPI_REAL", 4, float32)                                                                  \
  X(dblprec, "MPI_DOUBLE_PRECISION", 8, float64)                                                   \
  X(cplex, "MPI_COMPLEX", 8, complex_float)                                                        \
  X(dblcplex, "MPI_DOUBLE_COMPLEX", 16, complex_double)                                            \
  X(ldblcplex, "MPI_LONG_DOUBLE_COMPLEX", 32, complex_long_double)                                 \
  X(2integer, "MPI_2INTEGER", 8, int_int)                                                          \
  X(2real, "MPI_2REAL", 8, float32)                                                                \
  X(2dblprec, "MPI_2DOUBLE_PRECISION", 16, float64)                                                \
  X(2cplex, "MPI_2COMPLEX", 16, complex_float)                                                     \
  X(2dblcplex, "MPI_2DOUBLE_COMPLEX", 32, complex_double)                                          \
  X(logical1, "MPI_LOGICAL1", 1, int8)                                                             \
  X(logical2, "MPI_LOGICAL2", 2, int16)                                                            \
  X(logical4, "MPI_LOGICAL4", 4, int32)                                                            \
  X(logical8, "MPI_LOGICAL8", 8, int64)                                                            \
  X(integer1, "MPI_INTEGER1", 1, int8)                                                             \
  X(integer2, "MPI_INTEGER2", 2, int16)                                                            \
  X(integer4, "MPI_INTEGER4", 4, int32)                                                            \
  X(integer8, "MPI_INTEGER8", 8, int64)                                                            \
  X(integer16, "MPI_INTEGER16", 16, none)                                                          \
  X(real2, "MPI_REAL2", 2, none)                                                                   \
  X(real4, "MPI_REAL4", 4, float32)                                                                \
  X(real8, "MPI_REAL8", 8, float64)                                                                \
  X(real16, "MPI_REAL16", 16, long_double)                                                         \
  X(complex8, "MPI_COMPLEX8", 8, complex_float)                                                    \
  X(complex16, "MPI_COMPLEX16", 16, complex_double)                                                \
  X(complex32, "MPI_COMPLEX32", 32, complex_long_double)

// X(symbol suffix, MPI name, data bytes, element kind, extent, blocks): value-index pairs with padding.
#define VIASTACK_PAIR_TYPES(X)                                                                 \
  X(double_int, "MPI_DOUBLE_INT", 12, double_int, 16, ({{0, 12}}))                               \
  X(long_int, "MPI_LONG_INT", 12, long_int, 16, ({{0, 12}}))                                     \
  X(short_int, "MPI_SHORT_INT", 6, short_int, 8, ({{0, 2}, {4, 4}}))                           \
  X(longdbl_int, "MPI_LONG_DOUBLE_INT", 20, long_double_int, 32, ({{0, 20}}))

#define VIASTACK_DECLARE_TYPE(sym, ...) extern Datatype type_##sym;
namespace viastack::mpi {
VIASTACK_SIMPLE_TYPES(VIASTACK_DECLARE_TYPE)
VIASTACK_PAIR_TYPES(VIASTACK_DECLARE_TYPE)
}  // namespace viastack::mpi
#undef VIASTACK_DECLARE_TYPE

#define VIASTACK_DEFINE_TYPE_HANDLE(sym, ...) \
  ompi_predefined_datatype_t ompi_mpi_##sym{{HandleKind::datatype, &viastack::mpi::type_##sym}, {}};
VIASTACK_EXPORTED_BEGIN
VIASTACK_SIMPLE_TYPES(VIASTACK_DEFINE_TYPE_HANDLE)
VIASTACK_PAIR_TYPES(VIASTACK_DEFINE_TYPE_HANDLE)
#undef VIASTACK_DEFINE_TYPE_HANDLE
ompi_predefined_datatype_t ompi_mpi_datatype_null{{HandleKind::datatype, nullptr}, {}};
// MPI-1's MPI_LB / MPI_UB: Open MPI 4 still exports them, but mpi.h no longer lets programs use them.
ompi_predefined_datatype_t ompi_mpi_lb{{HandleKind::datatype, nullptr}, {}};
ompi_predefined_datatype_t ompi_mpi_ub{{HandleKind::datatype, nullptr}, {}};
VIASTACK_EXPORTED_END

#define VIASTACK_DEFINE_SIMPLE_TYPE(sym, name, size, basic) \
  Datatype type_##sym{name, &ompi_mpi_##sym.handle, size, Basic::basic};
#define VIASTACK_DEFINE_PAIR_TYPE(sym, name, size, basic, extent, blocks) \
  Datatype type_##sym{name, &ompi_mpi_##sym.handle, size, Basic::basic, extent, std::vector<Datatype::Block> blocks};
namespace viastack::mpi {
VIASTACK_SIMPLE_TYPES(VIASTACK_DEFINE_SIMPLE_TYPE)
VIASTACK_PAIR_TYPES(VIASTACK_DEFINE_PAIR_TYPE)
}  // namespace viastack::mpi
#undef VIASTACK_DEFINE_SIMPLE_TYPE
#undef VIASTACK_DEFINE_PAIR_TYPE
#undef VIASTACK_SIMPLE_TYPES
#undef VIASTACK_PAIR_TYPES
#undef VIASTACK_EXPORTED_BEGIN
#undef VIASTACK_EXPORTED_END
