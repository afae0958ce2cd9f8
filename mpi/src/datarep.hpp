// User data representations for MPI-IO (MPI_Register_datarep, MPI 3.1 13.5.3):
// a name, the functions that convert between memory and the file, and the
// one that gives each predefined type's extent in the file. A file view may
// name one (File::set_view); "native" is the library's own and "external32"
// and "internal" remain unsupported.
#pragma once

#include <mpi.h>

#include <string>

namespace viastack::mpi {

struct DataRepresentation {
  std::string name;
  MPI_Datarep_conversion_function* read;   // file -> memory; null: the bytes as they are
  MPI_Datarep_conversion_function* write;  // memory -> file; null: the bytes as they are
  MPI_Datarep_extent_function* file_extent;
  void* extra_state;

  // The extent in the file of a predefined type; throws the extent function's error.
  MPI_Aint extent_in_file(MPI_Datatype type) const;
};

// Throws MPI_ERR_DUP_DATAREP for a name already defined (the predefined ones included),
// MPI_ERR_ARG for a null or too long name or a null extent function.
void register_datarep(DataRepresentation representation);

// The registered representation of that name, or null.
const DataRepresentation* find_datarep(const char* name);

}  // namespace viastack::mpi
