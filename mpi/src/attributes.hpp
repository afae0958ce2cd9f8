// Attribute caching (MPI-3.1 §6.7): keyvals, and the attributes a program
// sets on communicators, windows and datatypes, with the keyval's copy
// callback run when a communicator is duplicated and its delete callback when
// an attribute is replaced, deleted, or its object freed.
//
// Attributes are kept beside the objects, by handle address, so that a
// communicator, window or datatype needs no field of its own for them.
// The predefined attributes (MPI_TAG_UB, ..., MPI_WIN_BASE, ...) are not
// stored: attribute_value answers them from the object itself.
#pragma once

#include <mpi.h>

#include <map>
#include <utility>
#include <vector>

namespace viastack::mpi {

enum class AttributeHolder { communicator, window, datatype };

// A C copy or delete callback, stored untyped and called through its holder's signature.
using AnyCallback = void (*)();

class AttributeCache {
 public:
  // Returns the new keyval (never one of the predefined ones, never reused).
  int create_keyval(AttributeHolder holder, AnyCallback copy, AnyCallback destroy, void* extra_state);
  // Sets *keyval to MPI_KEYVAL_INVALID; attributes already set with it stay until deleted.
  void free_keyval(AttributeHolder holder, int* keyval);

  // `object` is the handle (MPI_Comm, MPI_Win or MPI_Datatype). Replacing a
  // value runs the delete callback on the old one first.
  void set(AttributeHolder holder, void* object, int keyval, void* value);
  // The value set with keyval, or false; throws MPI_ERR_KEYVAL for a keyval that is not the holder's.
  bool get(AttributeHolder holder, const void* object, int keyval, void** value) const;
  // Runs the delete callback and forgets the value; nothing to do when none is set.
  void remove(AttributeHolder holder, void* object, int keyval);

  // MPI_Comm_dup: each attribute of `from` whose copy callback says so is set on `to`.
  void copy_all(AttributeHolder holder, void* from, void* to);
  // The object is being freed: every delete callback runs, last set first.
  // A callback's failure stops it with that callback's error class.
  void remove_all(AttributeHolder holder, void* object);

 private:
  struct Keyval {
    AttributeHolder holder;
    AnyCallback copy, destroy;
    void* extra_state;
    bool freed = false;
    int attached = 0;  // attributes set with it; a freed keyval is forgotten at 0
  };
  using Attached = std::vector<std::pair<int, void*>>;  // (keyval, value), in the order set

  const Keyval& keyval_for(AttributeHolder holder, int keyval) const;
  void run_delete(AttributeHolder holder, void* object, int keyval, void* value);
  void detached(int keyval);

  std::map<int, Keyval> keyvals_;
  std::map<const void*, Attached> attached_;
  int next_keyval_ = 64;  // above Open MPI's predefined keyvals (0..15)
};

// The process's attributes; MPI_Finalize deletes MPI_COMM_SELF's first (MPI-3.1 §8.7.1).
AttributeCache& attribute_cache();

// A predefined attribute of a communicator or window: MPI_TAG_UB, MPI_HOST,
// MPI_IO, MPI_WTIME_IS_GLOBAL, MPI_APPNUM, MPI_UNIVERSE_SIZE, MPI_LASTUSEDCODE
// (on any communicator, as MPICH answers them; Open MPI on MPI_COMM_WORLD and
// its duplicates), MPI_WIN_BASE, _SIZE, _DISP_UNIT, _CREATE_FLAVOR, _MODEL.
// False when keyval is not predefined for the holder.
bool predefined_attribute(AttributeHolder holder, const void* object, int keyval, void** value);

}  // namespace viastack::mpi
