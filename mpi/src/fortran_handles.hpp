// Fortran handles: the integers that Fortran programs hold for MPI objects
// (MPI-3.1 §17.2.4). Each kind of handle has a table, indexed by the Fortran
// handle: the predefined objects at Open MPI 4.1's numbers (MPI_COMM_WORLD
// = 0, MPI_INTEGER = 7, MPI_SUM = 3: they are compiled into programs through
// mpif.h and the mpi modules), then the program's objects, each given the
// lowest free number when first converted and that number back when freed.
#pragma once

#include <mpi.h>

#include "abi.hpp"

namespace viastack::mpi {

// The Fortran handle of a valid C handle (assigned on first use), or -1 for
// a null pointer or a handle of another kind.
template <class Handle>
MPI_Fint fortran_handle(Handle handle);

// The C handle of a Fortran handle; nullptr for a number no object has.
template <class Handle>
Handle c_handle(MPI_Fint index);

}  // namespace viastack::mpi
