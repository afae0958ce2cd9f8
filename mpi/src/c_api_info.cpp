// C entry points: info objects, and the calls that keep one with a communicator.
#include <algorithm>
#include <cstring>
#include <memory>

#include "c_api.hpp"
#include "info.hpp"

using namespace viastack::mpi;

namespace {

// Copies text into out, at most capacity - 1 characters and a terminating null.
void copy_out(const std::string& text, char* out, std::size_t capacity) {
  const std::size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

MPI_Info publish(Hints hints) { return std::make_unique<Info>(std::move(hints)).release(); }

}  // namespace

int MPI_Info_create(MPI_Info* info) {
  return guarded("MPI_Info_create", MPI_COMM_WORLD, [&] {
    check_pointer(info, "null output pointer");
    *info = publish({});
  });
}

int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  return guarded("MPI_Info_dup", MPI_COMM_WORLD, [&] {
    const Info& old = info_of(info);
    check_pointer(newinfo, "null output pointer");
    *newinfo = publish(old.entries());
  });
}

int MPI_Info_free(MPI_Info* info) {
  return guarded("MPI_Info_free", MPI_COMM_WORLD, [&] {
    check_pointer(info, "null handle pointer");
    Info& doomed = mutable_info_of(*info);
    doomed.kind = HandleKind{};  // a stale handle is then recognised as invalid
    delete &doomed;
    *info = MPI_INFO_NULL;
  });
}

int MPI_Info_set(MPI_Info info, const char* key, const char* value) {
  return guarded("MPI_Info_set", MPI_COMM_WORLD, [&] { mutable_info_of(info).set(key, value); });
}

int MPI_Info_delete(MPI_Info info, const char* key) {
  return guarded("MPI_Info_delete", MPI_COMM_WORLD, [&] { mutable_info_of(info).erase(key); });
}

// value has room for valuelen characters and a null; a longer value is cut.
int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  return guarded("MPI_Info_get", MPI_COMM_WORLD, [&] {
    const Info& in = info_of(info);
    require(valuelen >= 0, MPI_ERR_ARG, "negative value length");
    check_pointer(flag, "null flag pointer");
    const std::string* found = in.find(key);
    check_pointer(value, "null value buffer");
    *flag = found != nullptr;
    if (found) copy_out(*found, value, std::size_t(valuelen) + 1);
  });
}

int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  return guarded("MPI_Info_get_valuelen", MPI_COMM_WORLD, [&] {
    const Info& in = info_of(info);
    check_pointer(valuelen, "null output pointer");
    check_pointer(flag, "null flag pointer");
    const std::string* found = in.find(key);
    *flag = found != nullptr;
    if (found) *valuelen = int(found->size());
  });
}

int MPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  return guarded("MPI_Info_get_nkeys", MPI_COMM_WORLD, [&] {
    const Info& in = info_of(info);
    check_pointer(nkeys, "null output pointer");
    *nkeys = int(in.entries().size());
  });
}

// key has room for MPI_MAX_INFO_KEY characters and a null.
int MPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  return guarded("MPI_Info_get_nthkey", MPI_COMM_WORLD, [&] {
    const Info& in = info_of(info);
    check_pointer(key, "null key buffer");
    require(n >= 0 && std::size_t(n) < in.entries().size(), MPI_ERR_ARG, "n is not from 0 to the number of keys - 1");
    copy_out(in.entries()[std::size_t(n)].first, key, MPI_MAX_INFO_KEY + 1);
  });
}

// A communicator keeps every hint set on it (none is acted on) and hands a copy back.
int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  return guarded("MPI_Comm_set_info", comm, [&] {
    runtime();
    Communicator& c = communicator_of(comm);
    c.set_hints(updated_hints(c.hints(), info_of(info)));
  });
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  return guarded("MPI_Comm_get_info", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(info_used, "null output pointer");
    *info_used = publish(c.hints());
  });
}
