// C entry points: attribute caching on communicators, windows and datatypes
// (MPI-2's and MPI-1's names), and the predefined copy and delete callbacks.
#include "attributes.hpp"
#include "c_api.hpp"
#include "window.hpp"

using namespace viastack::mpi;

namespace {

// The keyval calls of one holder kind. Errors go to MPI_COMM_WORLD's handler (a keyval has no object).
int create_keyval(const char* function, AttributeHolder holder, AnyCallback copy, AnyCallback destroy, int* keyval,
                  void* extra_state) {
  return guarded(function, MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(keyval, "null keyval pointer");
    *keyval = attribute_cache().create_keyval(holder, copy, destroy, extra_state);
  });
}

int free_keyval(const char* function, AttributeHolder holder, int* keyval) {
  return guarded(function, MPI_COMM_WORLD, [&] {
    runtime();
    attribute_cache().free_keyval(holder, keyval);
  });
}

// MPI_*_get_attr's answer: *(void**)attribute_val is the value when *flag is set.
void get_attribute(AttributeHolder holder, void* object, int keyval, void* attribute_val, int* flag) {
  check_pointer(attribute_val, "null attribute value pointer");
  check_pointer(flag, "null flag pointer");
  void* value = nullptr;
  *flag = predefined_attribute(holder, object, keyval, &value) || attribute_cache().get(holder, object, keyval, &value);
  if (*flag) *static_cast<void**>(attribute_val) = value;
}

// Runs body(object) with the communicator's error handler, after checking the handle.
template <class Body>
int on_communicator(const char* function, MPI_Comm comm, Body&& body) {
  return guarded(function, comm, [&] {
    runtime();
    communicator_of(comm);
    body(static_cast<void*>(comm));
  });
}

// The same for a window (its error handler is its communicator's) ...
template <class Body>
int on_window(const char* function, MPI_Win win, Body&& body) {
  MPI_Comm comm = MPI_COMM_WORLD;
  return guarded(function, comm, [&] {
    runtime();
    comm = window_of(win).comm().handle;
    body(static_cast<void*>(win));
  });
}

// ... and for a datatype (committed or not), with MPI_COMM_WORLD's.
template <class Body>
int on_datatype(const char* function, MPI_Datatype datatype, Body&& body) {
  return guarded(function, MPI_COMM_WORLD, [&] {
    runtime();
    datatype_for_construction(datatype);
    body(static_cast<void*>(datatype));
  });
}

constexpr AttributeHolder kComm = AttributeHolder::communicator;
constexpr AttributeHolder kWin = AttributeHolder::window;
constexpr AttributeHolder kType = AttributeHolder::datatype;

}  // namespace

// ---- communicators ----

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy, MPI_Comm_delete_attr_function* destroy, int* keyval,
                           void* extra_state) {
  return create_keyval("MPI_Comm_create_keyval", kComm, reinterpret_cast<AnyCallback>(copy),
                       reinterpret_cast<AnyCallback>(destroy), keyval, extra_state);
}

int MPI_Comm_free_keyval(int* keyval) { return free_keyval("MPI_Comm_free_keyval", kComm, keyval); }

int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void* value) {
  return on_communicator("MPI_Comm_set_attr", comm,
                         [&](void* object) { attribute_cache().set(kComm, object, keyval, value); });
}

int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return on_communicator("MPI_Comm_get_attr", comm,
                         [&](void* object) { get_attribute(kComm, object, keyval, attribute_val, flag); });
}

int MPI_Comm_delete_attr(MPI_Comm comm, int keyval) {
  return on_communicator("MPI_Comm_delete_attr", comm,
                         [&](void* object) { attribute_cache().remove(kComm, object, keyval); });
}

// MPI-1's names for the same (deprecated, not removed, in MPI-3.1).
int MPI_Keyval_create(MPI_Copy_function* copy, MPI_Delete_function* destroy, int* keyval, void* extra_state) {
  return create_keyval("MPI_Keyval_create", kComm, reinterpret_cast<AnyCallback>(copy),
                       reinterpret_cast<AnyCallback>(destroy), keyval, extra_state);
}

int MPI_Keyval_free(int* keyval) { return free_keyval("MPI_Keyval_free", kComm, keyval); }

int MPI_Attr_put(MPI_Comm comm, int keyval, void* value) {
  return on_communicator("MPI_Attr_put", comm,
                         [&](void* object) { attribute_cache().set(kComm, object, keyval, value); });
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return on_communicator("MPI_Attr_get", comm,
                         [&](void* object) { get_attribute(kComm, object, keyval, attribute_val, flag); });
}

int MPI_Attr_delete(MPI_Comm comm, int keyval) {
  return on_communicator("MPI_Attr_delete", comm,
                         [&](void* object) { attribute_cache().remove(kComm, object, keyval); });
}

// ---- windows ----

int MPI_Win_create_keyval(MPI_Win_copy_attr_function* copy, MPI_Win_delete_attr_function* destroy, int* keyval,
                          void* extra_state) {
  return create_keyval("MPI_Win_create_keyval", kWin, reinterpret_cast<AnyCallback>(copy),
                       reinterpret_cast<AnyCallback>(destroy), keyval, extra_state);
}

int MPI_Win_free_keyval(int* keyval) { return free_keyval("MPI_Win_free_keyval", kWin, keyval); }

int MPI_Win_set_attr(MPI_Win win, int keyval, void* value) {
  return on_window("MPI_Win_set_attr", win, [&](void* object) { attribute_cache().set(kWin, object, keyval, value); });
}

int MPI_Win_get_attr(MPI_Win win, int keyval, void* attribute_val, int* flag) {
  return on_window("MPI_Win_get_attr", win,
                   [&](void* object) { get_attribute(kWin, object, keyval, attribute_val, flag); });
}

int MPI_Win_delete_attr(MPI_Win win, int keyval) {
  return on_window("MPI_Win_delete_attr", win, [&](void* object) { attribute_cache().remove(kWin, object, keyval); });
}

// ---- datatypes ----

int MPI_Type_create_keyval(MPI_Type_copy_attr_function* copy, MPI_Type_delete_attr_function* destroy, int* keyval,
                           void* extra_state) {
  return create_keyval("MPI_Type_create_keyval", kType, reinterpret_cast<AnyCallback>(copy),
                       reinterpret_cast<AnyCallback>(destroy), keyval, extra_state);
}

int MPI_Type_free_keyval(int* keyval) { return free_keyval("MPI_Type_free_keyval", kType, keyval); }

int MPI_Type_set_attr(MPI_Datatype datatype, int keyval, void* value) {
  return on_datatype("MPI_Type_set_attr", datatype,
                     [&](void* object) { attribute_cache().set(kType, object, keyval, value); });
}

int MPI_Type_get_attr(MPI_Datatype datatype, int keyval, void* attribute_val, int* flag) {
  return on_datatype("MPI_Type_get_attr", datatype,
                     [&](void* object) { get_attribute(kType, object, keyval, attribute_val, flag); });
}

int MPI_Type_delete_attr(MPI_Datatype datatype, int keyval) {
  return on_datatype("MPI_Type_delete_attr", datatype,
                     [&](void* object) { attribute_cache().remove(kType, object, keyval); });
}

// ---- the predefined callbacks (mpi.h names them MPI_COMM_DUP_FN, ...) ----
// NULL_COPY: the duplicate does not get the attribute. DUP: it gets the same
// value. NULL_DELETE: nothing to release.

namespace {

template <class Handle>
int null_copy(Handle, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

template <class Handle>
int dup_copy(Handle, int, void*, void* attribute_val_in, void* attribute_val_out, int* flag) {
  *static_cast<void**>(attribute_val_out) = attribute_val_in;
  *flag = 1;
  return MPI_SUCCESS;
}

template <class Handle>
int null_delete(Handle, int, void*, void*) {
  return MPI_SUCCESS;
}

}  // namespace

#define VIASTACK_PREDEFINED_CALLBACKS(KIND, Handle)                                                        \
  int OMPI_C_MPI_##KIND##NULL_COPY_FN(Handle object, int keyval, void* extra, void* in, void* out,        \
                                      int* flag) {                                                       \
    return null_copy(object, keyval, extra, in, out, flag);                                              \
  }                                                                                                      \
  int OMPI_C_MPI_##KIND##DUP_FN(Handle object, int keyval, void* extra, void* in, void* out, int* flag) { \
    return dup_copy(object, keyval, extra, in, out, flag);                                               \
  }                                                                                                      \
  int OMPI_C_MPI_##KIND##NULL_DELETE_FN(Handle object, int keyval, void* value, void* extra) {            \
    return null_delete(object, keyval, value, extra);                                                    \
  }
VIASTACK_PREDEFINED_CALLBACKS(COMM_, MPI_Comm)
VIASTACK_PREDEFINED_CALLBACKS(WIN_, MPI_Win)
VIASTACK_PREDEFINED_CALLBACKS(TYPE_, MPI_Datatype)
VIASTACK_PREDEFINED_CALLBACKS(, MPI_Comm)  // MPI-1's MPI_NULL_COPY_FN, MPI_DUP_FN, MPI_NULL_DELETE_FN
#undef VIASTACK_PREDEFINED_CALLBACKS
