#include "datarep.hpp"

#include <strings.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "errors.hpp"

namespace viastack::mpi {

namespace {

// Registered for the life of the process, as MPI has no call that removes one; never moved,
// so a view may keep a pointer to its representation.
std::vector<std::unique_ptr<const DataRepresentation>>& registry() {
  static std::vector<std::unique_ptr<const DataRepresentation>> representations;
  return representations;
}

bool predefined_name(const char* name) {
  for (const char* taken : {"native", "internal", "external32"})
    if (strcasecmp(name, taken) == 0) return true;
  return false;
}

}  // namespace

MPI_Aint DataRepresentation::extent_in_file(MPI_Datatype type) const {
  MPI_Aint extent = 0;
  const int error = file_extent(type, &extent, extra_state);
  require(error == MPI_SUCCESS, error, "the data representation's extent function failed");
  return extent;
}

void register_datarep(DataRepresentation representation) {
  const char* name = representation.name.c_str();
  require(!representation.name.empty() && representation.name.size() < MPI_MAX_DATAREP_STRING, MPI_ERR_ARG,
          "a data representation's name must have 1 to MPI_MAX_DATAREP_STRING - 1 characters");
  require(representation.file_extent != nullptr, MPI_ERR_ARG, "null extent function");
  require(!predefined_name(name) && find_datarep(name) == nullptr, MPI_ERR_DUP_DATAREP,
          "a data representation of that name is defined already");
  registry().push_back(std::make_unique<const DataRepresentation>(std::move(representation)));
}

const DataRepresentation* find_datarep(const char* name) {
  for (const auto& r : registry())
    if (r->name == name) return r.get();
  return nullptr;
}

}  // namespace viastack::mpi
