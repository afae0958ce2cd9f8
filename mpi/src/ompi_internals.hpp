// Open MPI internals that Open MPI's own language bindings (libmpi_mpifh,
// libmpi_usempif08, libmpi_cxx) use, which the rest of this library updates.
#pragma once

#include <cstdint>

// Open MPI's ompi_mpi_state: the Fortran bindings check it before some calls
// and stop the job when MPI is not running (OMPI_ERR_INIT_FINALIZE).
extern "C" __attribute__((visibility("default"))) volatile std::int32_t ompi_mpi_state;

namespace viastack::mpi {
// Open MPI's ompi_mpi_state_t values.
inline constexpr std::int32_t kOpenMpiInitStarted = 1;
inline constexpr std::int32_t kOpenMpiInitCompleted = 2;
inline constexpr std::int32_t kOpenMpiFinalizeStarted = 3;
inline constexpr std::int32_t kOpenMpiFinalizeCompleted = 5;
}  // namespace viastack::mpi
