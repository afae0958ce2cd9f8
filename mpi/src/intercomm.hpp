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

// MPI_Comm_split (and _split_type) of an intercommunicator (MPI-3.1 6.4.2): for each color, an
// intercommunicator between the members of each group with that color, each side ordered by key,
// then rank; MPI_COMM_NULL for MPI_UNDEFINED and where the other group has no member of the color.
MPI_Comm split_intercomm(const Communicator& inter, int color, int key);

// MPI_Comm_create of an intercommunicator: each group gives a subgroup of itself (MPI_ERR_GROUP,
// before any message, if not), and the result joins the two; MPI_COMM_NULL to a process in neither
// and to all when either subgroup is empty.
MPI_Comm create_intercomm(const Communicator& inter, const Group& subgroup);

}  // namespace viastack::mpi
