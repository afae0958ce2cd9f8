#include "attributes.hpp"

#include <algorithm>

#include "c_api.hpp"
#include "window.hpp"

namespace viastack::mpi {

namespace {

// Calls a keyval's copy callback with its holder's C signature.
int call_copy(AttributeHolder holder, AnyCallback copy, void* object, int keyval, void* extra_state, void* in,
              void* out, int* flag) {
  switch (holder) {
    case AttributeHolder::communicator:
      return reinterpret_cast<MPI_Comm_copy_attr_function*>(copy)(static_cast<MPI_Comm>(object), keyval,
                                                                   extra_state, in, out, flag);
    case AttributeHolder::window:
      return reinterpret_cast<MPI_Win_copy_attr_function*>(copy)(static_cast<MPI_Win>(object), keyval, extra_state,
                                                                  in, out, flag);
    case AttributeHolder::datatype:
      return reinterpret_cast<MPI_Type_copy_attr_function*>(copy)(static_cast<MPI_Datatype>(object), keyval,
                                                                   extra_state, in, out, flag);
  }
  return MPI_ERR_INTERN;
}

int call_delete(AttributeHolder holder, AnyCallback destroy, void* object, int keyval, void* value,
                void* extra_state) {
  switch (holder) {
    case AttributeHolder::communicator:
      return reinterpret_cast<MPI_Comm_delete_attr_function*>(destroy)(static_cast<MPI_Comm>(object), keyval, value,
                                                                       extra_state);
    case AttributeHolder::window:
      return reinterpret_cast<MPI_Win_delete_attr_function*>(destroy)(static_cast<MPI_Win>(object), keyval, value,
                                                                      extra_state);
    case AttributeHolder::datatype:
      return reinterpret_cast<MPI_Type_delete_attr_function*>(destroy)(static_cast<MPI_Datatype>(object), keyval,
                                                                       value, extra_state);
  }
  return MPI_ERR_INTERN;
}

// A callback's failure, as the call that ran it reports it: the callback's
// own code when it is an error class, MPI_ERR_OTHER otherwise.
[[noreturn]] void callback_failed(int code, const char* which) {
  int error_class = code;
  if (code <= MPI_SUCCESS || code > MPI_ERR_LASTCODE) error_class = MPI_ERR_OTHER;
  fail(error_class, which);
}

}  // namespace

int AttributeCache::create_keyval(AttributeHolder holder, AnyCallback copy, AnyCallback destroy, void* extra_state) {
  require(copy != nullptr && destroy != nullptr, MPI_ERR_ARG,
          "null copy or delete callback (MPI_*_NULL_COPY_FN / MPI_*_NULL_DELETE_FN do nothing)");
  const int keyval = next_keyval_++;
  keyvals_.emplace(keyval, Keyval{holder, copy, destroy, extra_state});
  return keyval;
}

const AttributeCache::Keyval& AttributeCache::keyval_for(AttributeHolder holder, int keyval) const {
  auto it = keyvals_.find(keyval);
  require(it != keyvals_.end() && !it->second.freed && it->second.holder == holder, MPI_ERR_KEYVAL,
          "invalid keyval (freed, predefined, or made for another kind of object)");
  return it->second;
}

void AttributeCache::free_keyval(AttributeHolder holder, int* keyval) {
  check_pointer(keyval, "null keyval pointer");
  auto it = keyvals_.find(*keyval);
  keyval_for(holder, *keyval);
  it->second.freed = true;
  if (it->second.attached == 0) keyvals_.erase(it);
  *keyval = MPI_KEYVAL_INVALID;
}

void AttributeCache::detached(int keyval) {
  auto it = keyvals_.find(keyval);
  if (--it->second.attached == 0 && it->second.freed) keyvals_.erase(it);
}

void AttributeCache::run_delete(AttributeHolder holder, void* object, int keyval, void* value) {
  const Keyval& k = keyvals_.at(keyval);
  const int rc = call_delete(holder, k.destroy, object, keyval, value, k.extra_state);
  detached(keyval);
  if (rc != MPI_SUCCESS) callback_failed(rc, "the attribute's delete callback failed");
}

void AttributeCache::set(AttributeHolder holder, void* object, int keyval, void* value) {
  keyval_for(holder, keyval);
  remove(holder, object, keyval);  // the old value's delete callback runs first
  keyval_for(holder, keyval);      // which may have freed the keyval
  attached_[object].emplace_back(keyval, value);
  ++keyvals_.at(keyval).attached;
}

bool AttributeCache::get(AttributeHolder holder, const void* object, int keyval, void** value) const {
  keyval_for(holder, keyval);
  auto found = attached_.find(object);
  if (found == attached_.end()) return false;
  for (const auto& [k, v] : found->second)
    if (k == keyval) {
      *value = v;
      return true;
    }
  return false;
}

void AttributeCache::remove(AttributeHolder holder, void* object, int keyval) {
  keyval_for(holder, keyval);
  auto found = attached_.find(object);
  if (found == attached_.end()) return;
  Attached& attached = found->second;
  auto it = std::find_if(attached.begin(), attached.end(), [&](const auto& a) { return a.first == keyval; });
  if (it == attached.end()) return;
  void* value = it->second;
  attached.erase(it);
  if (attached.empty()) attached_.erase(found);
  run_delete(holder, object, keyval, value);
}

void AttributeCache::copy_all(AttributeHolder holder, void* from, void* to) {
  auto found = attached_.find(from);
  if (found == attached_.end()) return;
  const Attached originals = found->second;  // a callback may change the original's attributes
  try {
    for (const auto& [keyval, value] : originals) {
      const Keyval& k = keyvals_.at(keyval);
      void* copied = nullptr;
      int flag = 0;
      const int rc = call_copy(holder, k.copy, from, keyval, k.extra_state, value, &copied, &flag);
      if (rc != MPI_SUCCESS) callback_failed(rc, "an attribute's copy callback failed");
      if (flag) {
        attached_[to].emplace_back(keyval, copied);
        ++keyvals_.at(keyval).attached;
      }
    }
  } catch (const Error&) {
    // No duplicate is made: the copies so far are deleted, whatever their callbacks say.
    for (bool deleted = false; !deleted;) {
      try {
        remove_all(holder, to);
        deleted = true;
      } catch (const Error&) {
      }
    }
    throw;
  }
}

void AttributeCache::remove_all(AttributeHolder holder, void* object) {
  for (;;) {
    auto found = attached_.find(object);
    if (found == attached_.end()) return;
    if (found->second.empty()) {
      attached_.erase(found);
      return;
    }
    const auto [keyval, value] = found->second.back();
    found->second.pop_back();
    run_delete(holder, object, keyval, value);
  }
}

AttributeCache& attribute_cache() {
  static AttributeCache cache;
  return cache;
}

bool predefined_attribute(AttributeHolder holder, const void* object, int keyval, void** value) {
  // The communicator attributes are pointers to ints that stay put.
  static int tag_upper_bound = kTagUpperBound, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_is_global = 0,
             appnum = 0, universe_size = 0, last_used_code = MPI_ERR_LASTCODE;
  // Window attributes are pointers into the window (MPI_WIN_BASE is the base itself).
  if (holder == AttributeHolder::communicator) {
    switch (keyval) {
      case MPI_TAG_UB: *value = &tag_upper_bound; return true;
      case MPI_HOST: *value = &host; return true;
      case MPI_IO: *value = &io; return true;
      case MPI_WTIME_IS_GLOBAL: *value = &wtime_is_global; return true;
      case MPI_APPNUM: *value = &appnum; return true;
      case MPI_UNIVERSE_SIZE:
        universe_size = runtime().world_size();
        *value = &universe_size;
        return true;
      case MPI_LASTUSEDCODE: *value = &last_used_code; return true;
      default: return false;
    }
  }
  if (holder == AttributeHolder::window) {
    Window& w = window_of(static_cast<MPI_Win>(const_cast<void*>(object)));
    switch (keyval) {
      case MPI_WIN_BASE: *value = w.base(); return true;
      case MPI_WIN_SIZE: *value = w.size_attribute(); return true;
      case MPI_WIN_DISP_UNIT: *value = w.disp_unit_attribute(); return true;
      case MPI_WIN_CREATE_FLAVOR: *value = w.create_flavor_attribute(); return true;
      case MPI_WIN_MODEL: *value = w.model_attribute(); return true;
      default: return false;
    }
  }
  return false;
}

}  // namespace viastack::mpi
