// Intercommunicators (MPI-3.1 6.6): two disjoint groups, whose members send
// each other messages naming a rank of the other group. A Communicator with a
// remote group (comm.hpp) is one: point-to-point works on it as on any
// communicator. Its collectives are in intercomm_collectives.hpp.
#pragma once

#include <memory>

#include "comm.hpp"

namespace viastack::mpi {

// MPI_Comm_dup of an intercommunicator: collective over both groups.
std::unique_ptr<Communicator> duplicate_intercomm(const Communicator& inter);

}  // namespace viastack::mpi
