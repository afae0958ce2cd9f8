// The MPI tool information interface (MPI_T_*, MPI-3.1 chapter 14), answered
// honestly: the control variables are the library's integer settings, the
// VIASTACK_MPI_* environment variables (via/config.hpp declares them), read
// only since they are read when the library starts; they form one category.
// There are no performance variables and no enumerations. Every call returns
// its MPI_T_ERR_* code directly (the interface invokes no error handler), may
// come before MPI_Init and after MPI_Finalize, and takes the library lock.
#include <via/config.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "c_api.hpp"
#include "p2p.hpp"

// The handle types mpi.h declares; only control-variable handles and sessions ever exist.
struct ompi_mpit_cvar_handle_t {
  int index;
};
struct mca_base_pvar_session_t {
  int unused;
};

using namespace viastack::mpi;

namespace {

int initializations = 0;  // MPI_T_init_thread calls not yet finalized

// An MPI_T_ERR_* code, thrown out of a call's body.
struct ToolError {
  int code;
};

void check(bool condition, int code) {
  if (!condition) throw ToolError{code};
}

template <class Body>
int tool_call(Body&& body) {
  const LibraryEntry entry;
  try {
    check(initializations > 0, MPI_T_ERR_NOT_INITIALIZED);
    body();
    return MPI_SUCCESS;
  } catch (const ToolError& e) {
    return e.code;
  } catch (const std::bad_alloc&) {
    return MPI_T_ERR_MEMORY;
  }
}

const std::vector<const via::config::Variable*>& control_variables() {
  static const std::vector<const via::config::Variable*> mpi_settings = [] {
    std::vector<const via::config::Variable*> found;
    for (const via::config::Variable& v : via::config::variables())
      if (v.layer == "mpi" && v.type == via::config::Type::integer) found.push_back(&v);
    return found;
  }();
  return mpi_settings;
}

int cvar_count() { return int(control_variables().size()); }
// One category holds every control variable; there is none without them.
int category_count() { return cvar_count() > 0 ? 1 : 0; }
constexpr std::string_view kCategoryName = "viastack_mpi";
constexpr std::string_view kCategoryDescription = "settings of viastack's MPI, from VIASTACK_MPI_* environment variables";

// MPI-3.1 14.3.3: at most *length characters (with the terminating null) go
// into text, and *length becomes the full string's length with its null. A
// null pointer or a zero length asks for nothing.
void return_string(std::string_view value, char* text, int* length) {
  if (length == nullptr) return;
  if (text != nullptr && *length > 0) {
    const std::size_t n = std::min(value.size(), std::size_t(*length - 1));
    std::memcpy(text, value.data(), n);
    text[n] = '\0';
  }
  *length = int(value.size() + 1);
}

template <class T>
void set_if(T* out, T value) {
  if (out != nullptr) *out = value;
}

void check_cvar_index(int index) { check(index >= 0 && index < cvar_count(), MPI_T_ERR_INVALID_INDEX); }
void check_category_index(int index) { check(index >= 0 && index < category_count(), MPI_T_ERR_INVALID_INDEX); }

// A session handle the program holds: made by MPI_T_pvar_session_create, not yet freed.
std::vector<MPI_T_pvar_session>& sessions() {
  static std::vector<MPI_T_pvar_session> open;
  return open;
}
void check_session(MPI_T_pvar_session session) {
  check(std::find(sessions().begin(), sessions().end(), session) != sessions().end(), MPI_T_ERR_INVALID_SESSION);
}

// No performance-variable handle can exist; MPI_T_PVAR_ALL_HANDLES names none,
// so starting, stopping or resetting all of them succeeds.
int on_pvar_handle(MPI_T_pvar_session session, MPI_T_pvar_handle handle, bool all_allowed) {
  return tool_call([&] {
    check_session(session);
    check(all_allowed && handle == MPI_T_PVAR_ALL_HANDLES, MPI_T_ERR_INVALID_HANDLE);
  });
}

}  // namespace

int MPI_T_init_thread(int required, int* provided) {
  const LibraryEntry entry;
  if (provided == nullptr) return MPI_T_ERR_INVALID;
  ++initializations;
  *provided = std::clamp(required, int(MPI_THREAD_SINGLE), int(MPI_THREAD_MULTIPLE));
  return MPI_SUCCESS;
}

int MPI_T_finalize() {
  return tool_call([] { --initializations; });
}

int MPI_T_cvar_get_num(int* num_cvar) {
  return tool_call([&] {
    check(num_cvar != nullptr, MPI_T_ERR_INVALID);
    *num_cvar = cvar_count();
  });
}

int MPI_T_cvar_get_info(int cvar_index, char* name, int* name_len, int* verbosity, MPI_Datatype* datatype,
                        MPI_T_enum* enumtype, char* desc, int* desc_len, int* bind, int* scope) {
  return tool_call([&] {
    check_cvar_index(cvar_index);
    const via::config::Variable& v = *control_variables()[std::size_t(cvar_index)];
    return_string(v.name, name, name_len);
    std::string description(v.meaning);
    if (!v.unit.empty()) description += " (" + std::string(v.unit) + ")";
    return_string(description, desc, desc_len);
    set_if(verbosity, int(MPI_T_VERBOSITY_USER_BASIC));
    set_if(datatype, MPI_LONG_LONG);
    set_if(enumtype, MPI_T_ENUM_NULL);
    set_if(bind, int(MPI_T_BIND_NO_OBJECT));
    set_if(scope, int(MPI_T_SCOPE_READONLY));
  });
}

int MPI_T_cvar_get_index(const char* name, int* cvar_index) {
  return tool_call([&] {
    check(name != nullptr && cvar_index != nullptr, MPI_T_ERR_INVALID);
    const auto& vars = control_variables();
    const auto it = std::find_if(vars.begin(), vars.end(), [&](const auto* v) { return v->name == name; });
    check(it != vars.end(), MPI_T_ERR_INVALID_NAME);
    *cvar_index = int(it - vars.begin());
  });
}

int MPI_T_cvar_handle_alloc(int cvar_index, void*, MPI_T_cvar_handle* handle, int* count) {
  return tool_call([&] {
    check_cvar_index(cvar_index);
    check(handle != nullptr && count != nullptr, MPI_T_ERR_INVALID);
    *handle = new ompi_mpit_cvar_handle_t{cvar_index};
    *count = 1;
  });
}

int MPI_T_cvar_handle_free(MPI_T_cvar_handle* handle) {
  return tool_call([&] {
    check(handle != nullptr && *handle != MPI_T_CVAR_HANDLE_NULL, MPI_T_ERR_INVALID_HANDLE);
    delete *handle;
    *handle = MPI_T_CVAR_HANDLE_NULL;
  });
}

int MPI_T_cvar_read(MPI_T_cvar_handle handle, void* buf) {
  return tool_call([&] {
    check(handle != MPI_T_CVAR_HANDLE_NULL, MPI_T_ERR_INVALID_HANDLE);
    check(buf != nullptr, MPI_T_ERR_INVALID);
    const std::string_view name = control_variables()[std::size_t(handle->index)]->name;
    // The eager limit's default depends on the provider: the value in force, not the declared default.
    const long long value = name == "VIASTACK_MPI_EAGER_LIMIT" ? static_cast<long long>(eager_limit_setting())
                                                               : via::config::integer(name);
    std::memcpy(buf, &value, sizeof value);
  });
}

// The settings are read once, when the library starts.
int MPI_T_cvar_write(MPI_T_cvar_handle handle, const void*) {
  return tool_call([&] {
    check(handle != MPI_T_CVAR_HANDLE_NULL, MPI_T_ERR_INVALID_HANDLE);
    check(false, MPI_T_ERR_CVAR_SET_NEVER);
  });
}

int MPI_T_enum_get_info(MPI_T_enum, int*, char*, int*) {
  return tool_call([] { check(false, MPI_T_ERR_INVALID_HANDLE); });
}

int MPI_T_enum_get_item(MPI_T_enum, int, int*, char*, int*) {
  return tool_call([] { check(false, MPI_T_ERR_INVALID_HANDLE); });
}

int MPI_T_category_get_num(int* num_cat) {
  return tool_call([&] {
    check(num_cat != nullptr, MPI_T_ERR_INVALID);
    *num_cat = category_count();
  });
}

int MPI_T_category_get_info(int cat_index, char* name, int* name_len, char* desc, int* desc_len, int* num_cvars,
                            int* num_pvars, int* num_categories) {
  return tool_call([&] {
    check_category_index(cat_index);
    return_string(kCategoryName, name, name_len);
    return_string(kCategoryDescription, desc, desc_len);
    set_if(num_cvars, cvar_count());
    set_if(num_pvars, 0);
    set_if(num_categories, 0);
  });
}

int MPI_T_category_get_index(const char* name, int* category_index) {
  return tool_call([&] {
    check(name != nullptr && category_index != nullptr, MPI_T_ERR_INVALID);
    check(category_count() > 0 && name == kCategoryName, MPI_T_ERR_INVALID_NAME);
    *category_index = 0;
  });
}

int MPI_T_category_get_cvars(int cat_index, int len, int indices[]) {
  return tool_call([&] {
    check_category_index(cat_index);
    check(len >= 0 && (indices != nullptr || len == 0), MPI_T_ERR_INVALID);
    for (int i = 0; i < std::min(len, cvar_count()); ++i) indices[i] = i;
  });
}

int MPI_T_category_get_pvars(int cat_index, int len, int indices[]) {
  return tool_call([&] {
    check_category_index(cat_index);
    check(len >= 0 && (indices != nullptr || len == 0), MPI_T_ERR_INVALID);
  });
}

int MPI_T_category_get_categories(int cat_index, int len, int indices[]) {
  return tool_call([&] {
    check_category_index(cat_index);
    check(len >= 0 && (indices != nullptr || len == 0), MPI_T_ERR_INVALID);
  });
}

// The categories never change.
int MPI_T_category_changed(int* stamp) {
  return tool_call([&] {
    check(stamp != nullptr, MPI_T_ERR_INVALID);
    *stamp = 0;
  });
}

int MPI_T_pvar_get_num(int* num_pvar) {
  return tool_call([&] {
    check(num_pvar != nullptr, MPI_T_ERR_INVALID);
    *num_pvar = 0;
  });
}

int MPI_T_pvar_get_info(int, char*, int*, int*, int*, MPI_Datatype*, MPI_T_enum*, char*, int*, int*, int*, int*,
                        int*) {
  return tool_call([] { check(false, MPI_T_ERR_INVALID_INDEX); });
}

int MPI_T_pvar_get_index(const char* name, int, int* pvar_index) {
  return tool_call([&] {
    check(name != nullptr && pvar_index != nullptr, MPI_T_ERR_INVALID);
    check(false, MPI_T_ERR_INVALID_NAME);
  });
}

int MPI_T_pvar_session_create(MPI_T_pvar_session* session) {
  return tool_call([&] {
    check(session != nullptr, MPI_T_ERR_INVALID);
    *session = new mca_base_pvar_session_t{};
    sessions().push_back(*session);
  });
}

int MPI_T_pvar_session_free(MPI_T_pvar_session* session) {
  return tool_call([&] {
    check(session != nullptr, MPI_T_ERR_INVALID_SESSION);
    check_session(*session);
    sessions().erase(std::find(sessions().begin(), sessions().end(), *session));
    delete *session;
    *session = MPI_T_PVAR_SESSION_NULL;
  });
}

int MPI_T_pvar_handle_alloc(MPI_T_pvar_session session, int, void*, MPI_T_pvar_handle*, int*) {
  return tool_call([&] {
    check_session(session);
    check(false, MPI_T_ERR_INVALID_INDEX);
  });
}

int MPI_T_pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle* handle) {
  return on_pvar_handle(session, handle ? *handle : MPI_T_PVAR_HANDLE_NULL, false);
}
int MPI_T_pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  return on_pvar_handle(session, handle, true);
}
int MPI_T_pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  return on_pvar_handle(session, handle, true);
}
int MPI_T_pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  return on_pvar_handle(session, handle, true);
}
int MPI_T_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void*) {
  return on_pvar_handle(session, handle, false);
}
int MPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void*) {
  return on_pvar_handle(session, handle, false);
}
int MPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void*) {
  return on_pvar_handle(session, handle, false);
}
