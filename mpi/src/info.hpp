// MPI_Info: an ordered list of (key, value) strings. Objects made by
// MPI_Info_create/dup are Info; MPI_INFO_ENV is a read-only Info made on first use.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "abi.hpp"

namespace viastack::mpi {

// Hints as kept with a communicator: the pairs in the order they were first set.
using Hints = std::vector<std::pair<std::string, std::string>>;

class Info : public ompi_info_t {
 public:
  explicit Info(Hints entries = {}) : ompi_info_t{HandleKind::info}, entries_(std::move(entries)) {}

  // Keys and values are checked against MPI_MAX_INFO_KEY / _VAL (MPI_ERR_INFO_KEY, MPI_ERR_INFO_VALUE).
  void set(const char* key, const char* value);
  // nullptr when the key is not there.
  const std::string* find(const char* key) const;
  // Throws MPI_ERR_INFO_NOKEY when the key is not there.
  void erase(const char* key);
  const Hints& entries() const { return entries_; }

 private:
  Hints entries_;
};

// The Info behind a handle: MPI_INFO_ENV's for it; MPI_ERR_INFO for MPI_INFO_NULL, null, freed or foreign handles.
const Info& info_of(MPI_Info handle);
// The same for a call that changes or frees it: MPI_INFO_ENV is read-only (MPI_ERR_INFO).
Info& mutable_info_of(MPI_Info handle);
// The hints an info argument gives: none for MPI_INFO_NULL.
Hints hints_of(MPI_Info handle);
// MPI_Comm_set_info and the like: the hints kept, with those info gives added or replaced.
Hints updated_hints(Hints kept, const Info& info);
// A key argument: not null, 1 to MPI_MAX_INFO_KEY characters (MPI_ERR_INFO_KEY).
void check_info_key(const char* key);

}  // namespace viastack::mpi
