// The Open MPI internals that Open MPI's own language bindings call or read
// (`nm -D --undefined-only` of libmpi_mpifh.so.40, libmpi_usempif08.so.40
// and libmpi_cxx.so.40; tests/mpi/openmpi_bindings_symbols.sh lists them),
// each with Open MPI 4.1's size and meaning on this library's objects, so
// that Debian's Fortran and C++ bindings load and run on viastack:
//
// - the Fortran sentinels (mpi_fortran_bottom_, ..._in_place_,
//   ..._status_ignore_): common blocks whose addresses the Fortran wrappers
//   compare an argument with before calling PMPI_* with MPI_BOTTOM,
//   MPI_IN_PLACE or MPI_STATUS_IGNORE; only their addresses matter (a
//   program's own common block of the same name takes their place);
// - ompi_mpi_state and ompi_mpi_param_check, which the wrappers test before
//   some calls, and ompi_mpi_errors_are_fatal_comm_handler, which they call
//   when MPI is not running;
// - the error handler calls (ompi_errhandler_create for handlers written in
//   Fortran or C++, ompi_errhandler_invoke for errors the wrappers find);
// - the attribute calls for Fortran's integer attribute values and
//   callbacks (ompi_attr_*_fint / _aint) and C++'s keyvals;
// - ompi_datatype_match_size (MPI_TYPE_MATCH_SIZE's Fortran types),
//   ompi_op_set_cxx_callback (MPI::Op::Init), the Fortran string helpers;
// - objects the wrappers' inline code reads: ompi_status_empty, the table of
//   internal error codes (empty: this library returns only MPI error
//   classes and codes), the list of registered data representations.
#include <cstdarg>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "attributes.hpp"
#include "c_api.hpp"
#include "file.hpp"
#include "fortran_handles.hpp"
#include "ompi_internals.hpp"
#include "ops.hpp"
#include "window.hpp"

extern "C" struct ompi_predefined_datatype_t ompi_mpi_integer16;  // mpi.h declares it only where Fortran has it

using namespace viastack::mpi;

namespace {

// Open MPI's return codes for its helpers.
constexpr int kOmpiSuccess = 0;
constexpr int kOmpiOutOfResource = -2;

// ompi_attribute_type_t.
enum OpenMpiAttributeType { kCommAttr = 1, kTypeAttr = 2, kWinAttr = 3 };
// ompi_errhandler_type_t.
enum OpenMpiErrhandlerType { kErrhandlerPredefined = 0, kErrhandlerComm = 1, kErrhandlerWin = 2, kErrhandlerFile = 3 };
// ompi_datatype_match_size's kinds and language (OMPI_DATATYPE_FLAG_DATA_*).
constexpr std::uint16_t kDataInteger = 0x1000, kDataFloat = 0x2000, kDataComplex = 0x3000, kDataFortran = 0xc000;

AttributeHolder holder_of(int type) {
  switch (type) {
    case kCommAttr: return AttributeHolder::communicator;
    case kTypeAttr: return AttributeHolder::datatype;
    case kWinAttr: return AttributeHolder::window;
    default: fail(MPI_ERR_ARG, "not an attribute type (communicator, datatype or window)");
  }
}

// The object an attribute table field names: the handle itself (abi.hpp's open_mpi_keyhash).
AttributeHolder holder_of_handle(const void* handle) {
  require(handle != nullptr, MPI_ERR_ARG, "null object");
  switch (*static_cast<const HandleKind*>(handle)) {
    case HandleKind::communicator: return AttributeHolder::communicator;
    case HandleKind::datatype: return AttributeHolder::datatype;
    case HandleKind::win: return AttributeHolder::window;
    default: fail(MPI_ERR_ARG, "not a communicator, datatype or window");
  }
}

// An attribute as a Fortran integer: a predefined attribute's int value, or
// the bits of the program's value (an integer set from Fortran, or a C pointer).
template <class Integer>
int get_integer_attribute(const void* keyhash, int keyval, Integer* value, int* flag) {
  return guarded("MPI_COMM_GET_ATTR", MPI_COMM_WORLD, [&] {
    runtime();
    const AttributeHolder holder = holder_of_handle(keyhash);
    check_pointer(value, "null attribute value pointer");
    check_pointer(flag, "null flag pointer");
    void* stored = nullptr;
    if (predefined_attribute(holder, keyhash, keyval, &stored)) {
      *value = Integer(*static_cast<const int*>(stored));
      *flag = 1;
    } else if (attribute_cache().get(holder, keyhash, keyval, &stored)) {
      *value = Integer(reinterpret_cast<std::intptr_t>(stored));
      *flag = 1;
    } else {
      *flag = 0;
    }
  });
}

template <class Integer>
int set_integer_attribute(int type, void* object, int keyval, Integer value) {
  return guarded("MPI_COMM_SET_ATTR", MPI_COMM_WORLD, [&] {
    runtime();
    const AttributeHolder holder = holder_of(type);
    require(holder_of_handle(object) == holder, MPI_ERR_ARG, "the object is not of the attribute's type");
    attribute_cache().set(holder, object, keyval, reinterpret_cast<void*>(std::intptr_t(value)));
  });
}

// A keyval made from Fortran: the program's callbacks take Fortran handles
// and integers, and are called through the C trampolines below.
using FintCopy = void(MPI_Fint* object, MPI_Fint* keyval, MPI_Fint* extra_state, MPI_Fint* in, MPI_Fint* out,
                      MPI_Fint* flag, MPI_Fint* ierr);
using FintDelete = void(MPI_Fint* object, MPI_Fint* keyval, MPI_Fint* value, MPI_Fint* extra_state, MPI_Fint* ierr);
using AintCopy = void(MPI_Fint* object, MPI_Fint* keyval, MPI_Aint* extra_state, MPI_Aint* in, MPI_Aint* out,
                      MPI_Fint* flag, MPI_Fint* ierr);
using AintDelete = void(MPI_Fint* object, MPI_Fint* keyval, MPI_Aint* value, MPI_Aint* extra_state, MPI_Fint* ierr);

struct FortranKeyval {
  AnyCallback copy, destroy;
  bool address_sized;  // MPI-2's INTEGER(KIND=MPI_ADDRESS_KIND) values, or MPI-1's INTEGER
  MPI_Aint extra_state;
};

MPI_Fint fortran_object(void* handle) {
  switch (*static_cast<const HandleKind*>(handle)) {
    case HandleKind::communicator: return fortran_handle(static_cast<MPI_Comm>(handle));
    case HandleKind::datatype: return fortran_handle(static_cast<MPI_Datatype>(handle));
    default: return fortran_handle(static_cast<MPI_Win>(handle));
  }
}

int fortran_copy_trampoline(void* object, int keyval, void* extra_state, void* in, void* out, int* flag) {
  auto* fortran = static_cast<FortranKeyval*>(extra_state);
  MPI_Fint handle = fortran_object(object), key = keyval, copied = 0, ierr = MPI_SUCCESS;
  if (fortran->address_sized) {
    MPI_Aint value_in = reinterpret_cast<MPI_Aint>(in), value_out = 0;
    reinterpret_cast<AintCopy*>(fortran->copy)(&handle, &key, &fortran->extra_state, &value_in, &value_out, &copied,
                                               &ierr);
    *static_cast<void**>(out) = reinterpret_cast<void*>(value_out);
  } else {
    MPI_Fint extra = MPI_Fint(fortran->extra_state), value_in = MPI_Fint(reinterpret_cast<std::intptr_t>(in));
    MPI_Fint value_out = 0;
    reinterpret_cast<FintCopy*>(fortran->copy)(&handle, &key, &extra, &value_in, &value_out, &copied, &ierr);
    *static_cast<void**>(out) = reinterpret_cast<void*>(std::intptr_t(value_out));
  }
  *flag = copied != 0;
  return ierr;
}

int fortran_delete_trampoline(void* object, int keyval, void* value, void* extra_state) {
  auto* fortran = static_cast<FortranKeyval*>(extra_state);
  MPI_Fint handle = fortran_object(object), key = keyval, ierr = MPI_SUCCESS;
  if (fortran->address_sized) {
    MPI_Aint stored = reinterpret_cast<MPI_Aint>(value);
    reinterpret_cast<AintDelete*>(fortran->destroy)(&handle, &key, &stored, &fortran->extra_state, &ierr);
  } else {
    MPI_Fint stored = MPI_Fint(reinterpret_cast<std::intptr_t>(value)), extra = MPI_Fint(fortran->extra_state);
    reinterpret_cast<FintDelete*>(fortran->destroy)(&handle, &key, &stored, &extra, &ierr);
  }
  return ierr;
}

int create_fortran_keyval(int type, AnyCallback copy, AnyCallback destroy, int* keyval, MPI_Aint extra_state,
                          bool address_sized) {
  return guarded("MPI_COMM_CREATE_KEYVAL", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(keyval, "null keyval pointer");
    // Lives as long as the process: attributes set with the keyval may outlive MPI_*_free_keyval.
    static std::vector<std::unique_ptr<FortranKeyval>> every_keyval;
    auto* fortran = every_keyval.emplace_back(new FortranKeyval{copy, destroy, address_sized, extra_state}).get();
    *keyval = attribute_cache().create_keyval(holder_of(type), reinterpret_cast<AnyCallback>(fortran_copy_trampoline),
                                              reinterpret_cast<AnyCallback>(fortran_delete_trampoline), fortran);
  });
}

// Fortran strings are blank-padded; C's end at a NUL.
std::size_t trimmed(const char*& text, int length) {
  const char* end = text + (length > 0 ? length : 0);
  while (text < end && *text == ' ') ++text;
  while (end > text && end[-1] == ' ') --end;
  return std::size_t(end - text);
}

}  // namespace

extern "C" {
#pragma GCC visibility push(default)

// ---- the Fortran sentinels, at Open MPI's sizes ----
int mpi_fortran_bottom_;
int mpi_fortran_in_place_;
char mpi_fortran_argv_null_;
char mpi_fortran_argvs_null_;
int mpi_fortran_errcodes_ignore_;
std::int64_t mpi_fortran_status_ignore_;
std::int64_t mpi_fortran_statuses_ignore_;
int mpi_fortran_unweighted_;
int mpi_fortran_weights_empty_;

// C programs' names for Fortran's MPI_STATUS(ES)_IGNORE (MPI-3.1 §17.2.5), as in Open MPI.
MPI_Fint* MPI_F_STATUS_IGNORE = reinterpret_cast<MPI_Fint*>(&mpi_fortran_status_ignore_);
MPI_Fint* MPI_F_STATUSES_IGNORE = reinterpret_cast<MPI_Fint*>(&mpi_fortran_statuses_ignore_);

// ---- Fortran's predefined callbacks and helpers ----
// What mpif.h's and `use mpi`'s `external MPI_COMM_DUP_FN` and the like name, and the F90
// helpers, in Fortran's convention (every argument by address, LOGICAL true as 1), each under the
// four names Fortran compilers give it, as Open MPI's libmpi exports them: lower_ (gfortran's),
// lower, lower__ and UPPER. mpi.h gives the capital names of the callbacks to C's (OMPI_C_MPI_*).
#undef MPI_COMM_NULL_COPY_FN
#undef MPI_COMM_DUP_FN
#undef MPI_COMM_NULL_DELETE_FN
#undef MPI_TYPE_NULL_COPY_FN
#undef MPI_TYPE_DUP_FN
#undef MPI_TYPE_NULL_DELETE_FN
#undef MPI_WIN_NULL_COPY_FN
#undef MPI_WIN_DUP_FN
#undef MPI_WIN_NULL_DELETE_FN
#undef MPI_NULL_COPY_FN
#undef MPI_DUP_FN
#undef MPI_NULL_DELETE_FN
#undef MPI_CONVERSION_FN_NULL
#define FORTRAN_NAMES(impl, stem, UPPER)                 \
  __attribute__((alias(#impl), copy(impl))) decltype(impl) stem;     \
  __attribute__((alias(#impl), copy(impl))) decltype(impl) stem##_;  \
  __attribute__((alias(#impl), copy(impl))) decltype(impl) stem##__; \
  __attribute__((alias(#impl), copy(impl))) decltype(impl) UPPER;
#define HIDDEN __attribute__((visibility("hidden")))

// MPI-2's copy and delete callbacks, alike for communicators, datatypes and windows:
// INTEGER(KIND=MPI_ADDRESS_KIND) values.
HIDDEN void fortran_null_copy_fn(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint*, MPI_Aint*, MPI_Fint* flag, MPI_Fint* ierr) {
  *flag = 0;
  *ierr = MPI_SUCCESS;
}
HIDDEN void fortran_dup_fn(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint* in, MPI_Aint* out, MPI_Fint* flag, MPI_Fint* ierr) {
  *out = *in;
  *flag = 1;
  *ierr = MPI_SUCCESS;
}
HIDDEN void fortran_null_delete_fn(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint*, MPI_Fint* ierr) { *ierr = MPI_SUCCESS; }
FORTRAN_NAMES(fortran_null_copy_fn, mpi_comm_null_copy_fn, MPI_COMM_NULL_COPY_FN)
FORTRAN_NAMES(fortran_dup_fn, mpi_comm_dup_fn, MPI_COMM_DUP_FN)
FORTRAN_NAMES(fortran_null_delete_fn, mpi_comm_null_delete_fn, MPI_COMM_NULL_DELETE_FN)
FORTRAN_NAMES(fortran_null_copy_fn, mpi_type_null_copy_fn, MPI_TYPE_NULL_COPY_FN)
FORTRAN_NAMES(fortran_dup_fn, mpi_type_dup_fn, MPI_TYPE_DUP_FN)
FORTRAN_NAMES(fortran_null_delete_fn, mpi_type_null_delete_fn, MPI_TYPE_NULL_DELETE_FN)
FORTRAN_NAMES(fortran_null_copy_fn, mpi_win_null_copy_fn, MPI_WIN_NULL_COPY_FN)
FORTRAN_NAMES(fortran_dup_fn, mpi_win_dup_fn, MPI_WIN_DUP_FN)
FORTRAN_NAMES(fortran_null_delete_fn, mpi_win_null_delete_fn, MPI_WIN_NULL_DELETE_FN)

// MPI-1's (MPI_KEYVAL_CREATE): INTEGER values.
HIDDEN void fortran_mpi1_null_copy_fn(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint* flag,
                                      MPI_Fint* ierr) {
  *flag = 0;
  *ierr = MPI_SUCCESS;
}
HIDDEN void fortran_mpi1_dup_fn(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint* in, MPI_Fint* out, MPI_Fint* flag,
                                MPI_Fint* ierr) {
  *out = *in;
  *flag = 1;
  *ierr = MPI_SUCCESS;
}
HIDDEN void fortran_mpi1_null_delete_fn(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint* ierr) {
  *ierr = MPI_SUCCESS;
}
FORTRAN_NAMES(fortran_mpi1_null_copy_fn, mpi_null_copy_fn, MPI_NULL_COPY_FN)
FORTRAN_NAMES(fortran_mpi1_dup_fn, mpi_dup_fn, MPI_DUP_FN)
FORTRAN_NAMES(fortran_mpi1_null_delete_fn, mpi_null_delete_fn, MPI_NULL_DELETE_FN)

// MPI_CONVERSION_FN_NULL (MPI_REGISTER_DATAREP): converts nothing.
HIDDEN void fortran_conversion_fn_null(void*, MPI_Fint*, MPI_Fint*, void*, MPI_Offset*, MPI_Aint*, MPI_Fint* ierr) {
  *ierr = MPI_SUCCESS;
}
FORTRAN_NAMES(fortran_conversion_fn_null, mpi_conversion_fn_null, MPI_CONVERSION_FN_NULL)

// The F90 helpers, as subroutines that store their result through the last argument (through
// PMPI_ names: no entry point calls another where a profiling tool would see it).
HIDDEN void fortran_wtime(double* now) { *now = PMPI_Wtime(); }
HIDDEN void fortran_wtick(double* tick) { *tick = PMPI_Wtick(); }
HIDDEN void fortran_aint_add(MPI_Aint* base, MPI_Aint* displacement, MPI_Aint* sum) { *sum = *base + *displacement; }
HIDDEN void fortran_aint_diff(MPI_Aint* a, MPI_Aint* b, MPI_Aint* difference) { *difference = *a - *b; }
FORTRAN_NAMES(fortran_wtime, mpi_wtime_f90, MPI_WTIME_F90)
FORTRAN_NAMES(fortran_wtick, mpi_wtick_f90, MPI_WTICK_F90)
FORTRAN_NAMES(fortran_aint_add, mpi_aint_add_f90, MPI_AINT_ADD_F90)
FORTRAN_NAMES(fortran_aint_diff, mpi_aint_diff_f90, MPI_AINT_DIFF_F90)
#undef HIDDEN
#undef FORTRAN_NAMES

// ---- the runtime's state ----
volatile std::int32_t ompi_mpi_state = 0;
bool ompi_mpi_param_check = true;

// What a status of an inactive or null request says (MPI-3.1 §3.7.3).
MPI_Status ompi_status_empty = {MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0, 0};

// Open MPI's table of its internal (negative) error codes, an opal_pointer_array_t
// the bindings search when a call returns a negative code; empty, as no call here does.
struct OpenMpiPointerArray {
  std::byte bytes[0x78];
} ompi_errcodes_intern;
int ompi_errcode_intern_lastused = 0;

// The data representations MPI_REGISTER_DATAREP added (an opal_list_t the
// bindings append to): an empty list, its sentinel linked to itself.
struct OpenMpiListItem {
  void* object_class;
  std::int32_t references;
  OpenMpiListItem* volatile next;
  OpenMpiListItem* volatile previous;
  std::int32_t item_free;
};
struct OpenMpiList {
  void* object_class;
  std::int32_t references;
  OpenMpiListItem sentinel;
  std::size_t length;
};
static_assert(sizeof(OpenMpiList) == 0x40);
OpenMpiList ompi_registered_datareps = {nullptr,
                                        1,
                                        {nullptr, 1, &ompi_registered_datareps.sentinel,
                                         &ompi_registered_datareps.sentinel, 0},
                                        0};

// ---- error handlers ----

// Called by the bindings when MPI is not running (comm and code null) and as
// MPI_ERRORS_ARE_FATAL's function; the variable argument is the MPI function's name.
void ompi_mpi_errors_are_fatal_comm_handler(MPI_Comm*, int* error_code, ...) {
  va_list arguments;
  va_start(arguments, error_code);
  const char* function = va_arg(arguments, const char*);
  va_end(arguments);
  if (function == nullptr) function = "MPI";
  if (error_code == nullptr) abort_job(function, "the function was called before MPI_Init or after MPI_Finalize");
  abort_job(function, error_string(*error_code), *error_code);
}

MPI_Errhandler ompi_errhandler_create(int type, void (*function)(), int language) {
  const HandleKind object = type == kErrhandlerComm  ? HandleKind::communicator
                            : type == kErrhandlerWin ? HandleKind::win
                            : type == kErrhandlerFile ? HandleKind::file
                                                      : HandleKind{};
  if (object == HandleKind{} || function == nullptr || language < 0 ||
      language > int(ErrhandlerLanguage::fortran))
    return MPI_ERRHANDLER_NULL;
  return new UserErrhandler(object, function, ErrhandlerLanguage(language));
}

// An error the bindings found themselves: the handler of the object
// (communicator, window or file) is applied, as the library's own errors
// are. The handler pointer, read at Open MPI's offset, is not ours: unused.
int ompi_errhandler_invoke(ompi_errhandler_t*, void* object, int type, int error_code, const char* message) {
  if (message == nullptr) message = "MPI";
  const Error error{error_code, {}};
  try {
    switch (type) {
      case kErrhandlerComm: return raise_error(static_cast<MPI_Comm>(object), message, error);
      case kErrhandlerWin:
        return raise_error(window_of(static_cast<MPI_Win>(object)).comm().handle, message, error);
      case kErrhandlerFile: {
        MPI_File file = static_cast<MPI_File>(object);
        const ErrhandlerRef handler =
            file == MPI_FILE_NULL ? default_file_errhandler() : file_of(file).errhandler();
        handler.apply(&file, message, error_code, error_message(error));
        return error_code;
      }
      default: break;
    }
  } catch (const Error&) {
    // The object is not a valid one: as for any error without an object.
  }
  return raise_error(MPI_COMM_WORLD, message, error);
}

// ---- attributes ----

int ompi_attr_get_fint(const void* keyhash, int keyval, MPI_Fint* value, int* flag) {
  return get_integer_attribute(keyhash, keyval, value, flag);
}

int ompi_attr_get_aint(const void* keyhash, int keyval, MPI_Aint* value, int* flag) {
  return get_integer_attribute(keyhash, keyval, value, flag);
}

int ompi_attr_set_fint(int type, void* object, void*, int keyval, MPI_Fint value, bool) {
  return set_integer_attribute(type, object, keyval, value);
}

int ompi_attr_set_aint(int type, void* object, void*, int keyval, MPI_Aint value, bool) {
  return set_integer_attribute(type, object, keyval, value);
}

// MPI_KEYVAL_CREATE (MPI-1: INTEGER values and extra state).
int ompi_attr_create_keyval_fint(int type, AnyCallback copy, AnyCallback destroy, int* keyval, MPI_Fint extra_state,
                                 int, void*) {
  return create_fortran_keyval(type, copy, destroy, keyval, extra_state, false);
}

// MPI_COMM/TYPE/WIN_CREATE_KEYVAL (MPI-2: address-sized values and extra state).
int ompi_attr_create_keyval_aint(int type, AnyCallback copy, AnyCallback destroy, int* keyval, MPI_Aint extra_state,
                                 int, void*) {
  return create_fortran_keyval(type, copy, destroy, keyval, extra_state, true);
}

// The C++ bindings' keyvals: C callbacks (their intercepts) and a C extra state.
int ompi_attr_create_keyval(int type, AnyCallback copy, AnyCallback destroy, int* keyval, void* extra_state, int,
                            void*) {
  return guarded("MPI::Comm::Create_keyval", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(keyval, "null keyval pointer");
    *keyval = attribute_cache().create_keyval(holder_of(type), copy, destroy, extra_state);
  });
}

// ---- datatypes and operations ----

// MPI_TYPE_MATCH_SIZE from Fortran: the first of Open MPI's predefined
// Fortran types of that kind and size, or MPI_DATATYPE_NULL.
MPI_Datatype ompi_datatype_match_size(int size, std::uint16_t kind, std::uint16_t language) {
  if (language != kDataFortran) return MPI_DATATYPE_NULL;
  struct Candidate {
    std::uint16_t kind;
    int size;
    MPI_Datatype type;
  };
  const Candidate candidates[] = {
      {kDataInteger, 4, MPI_INTEGER},           {kDataFloat, 4, MPI_REAL},
      {kDataFloat, 8, MPI_DOUBLE_PRECISION},    {kDataComplex, 8, MPI_COMPLEX},
      {kDataComplex, 16, MPI_DOUBLE_COMPLEX},   {kDataInteger, 1, MPI_INTEGER1},
      {kDataInteger, 2, MPI_INTEGER2},          {kDataInteger, 8, MPI_INTEGER8},
      {kDataInteger, 16, reinterpret_cast<MPI_Datatype>(&ompi_mpi_integer16)},        {kDataFloat, 16, MPI_REAL16},
      {kDataComplex, 32, MPI_COMPLEX32},
  };
  for (const Candidate& c : candidates)
    if (c.kind == kind && c.size == size) return c.type;
  return MPI_DATATYPE_NULL;
}

// MPI::Op::Init made the op with its intercept as the function; `user` is the program's.
void ompi_op_set_cxx_callback(MPI_Op op, MPI_User_function* user) {
  if (op != nullptr && op->kind == HandleKind::op && op->impl != nullptr && !op->impl->predefined())
    op->impl->set_cxx_function(user);
}

// ---- Fortran strings ----

// A C copy (malloc'd) of a Fortran string without its leading and trailing blanks.
int ompi_fortran_string_f2c(const char* fortran, int length, char** c) {
  const std::size_t n = trimmed(fortran, length);
  *c = static_cast<char*>(std::malloc(n + 1));
  if (*c == nullptr) return kOmpiOutOfResource;
  std::memcpy(*c, fortran, n);
  (*c)[n] = '\0';
  return kOmpiSuccess;
}

// A C string into a Fortran one of `length` characters, padded with blanks.
int ompi_fortran_string_c2f(const char* c, char* fortran, int length) {
  const std::size_t n = std::min(std::strlen(c), std::size_t(length > 0 ? length : 0));
  std::memcpy(fortran, c, n);
  std::memset(fortran + n, ' ', std::size_t(length) - n);
  return kOmpiSuccess;
}

// An argv (malloc'd strings, a null pointer last) from `count` Fortran strings
// `advance` bytes apart; with count < 0, up to the first blank string.
static int fortran_strings_to_argv(const char* array, int count, int length, int advance, char*** argv) {
  int n = 0;
  if (count < 0)
    for (const char* s = array;; s += advance, ++n) {
      const char* text = s;
      if (trimmed(text, length) == 0) break;
    }
  else
    n = count;
  *argv = static_cast<char**>(std::calloc(std::size_t(n) + 1, sizeof(char*)));
  if (*argv == nullptr) return kOmpiOutOfResource;
  for (int i = 0; i < n; ++i)
    if (ompi_fortran_string_f2c(array + std::ptrdiff_t(i) * advance, length, &(*argv)[i]) != kOmpiSuccess)
      return kOmpiOutOfResource;
  return kOmpiSuccess;
}

int ompi_fortran_argv_count_f2c(const char* array, int count, int length, int advance, char*** argv) {
  return fortran_strings_to_argv(array, count, length, advance, argv);
}

int ompi_fortran_argv_blank_f2c(const char* array, int length, int advance, char*** argv) {
  return fortran_strings_to_argv(array, -1, length, advance, argv);
}

// MPI_COMM_SPAWN_MULTIPLE's argv arrays: column i of a Fortran array of strings.
int ompi_fortran_multiple_argvs_f2c(int count, const char* array, int length, char**** argvs) {
  *argvs = static_cast<char***>(std::calloc(std::size_t(count > 0 ? count : 0), sizeof(char**)));
  if (*argvs == nullptr && count > 0) return kOmpiOutOfResource;
  for (int i = 0; i < count; ++i) {
    const int status = ompi_fortran_argv_blank_f2c(array + std::ptrdiff_t(i) * length, length, length * count,
                                                   &(*argvs)[i]);
    if (status != kOmpiSuccess) return status;
  }
  return kOmpiSuccess;
}

#pragma GCC visibility pop
}  // extern "C"
