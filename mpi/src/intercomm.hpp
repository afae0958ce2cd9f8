// Intercommunicators (MPI-3.1 6.6): two disjoint groups, whose members send
// each other messages naming a rank of the other group. A Communicator with a
// remote group (comm.hpp) is one: point-to-point works on it as on any
// communicator. Of the collectives it has MPI_Barrier and MPI_Bcast (the
// others are MPI_ERR_UNSUPPORTED_OPERATION), built from a collective over the
// local group's own intracommunicator and a message between the two groups'
// leaders (rank 0 of each) in the intercommunicator's collective context.
#pragma once

#include <cstddef>
#include <memory>

#include "comm.hpp"

namespace viastack::mpi {

class Datatype;

// MPI_Comm_dup of an intercommunicator: collective over both groups.
std::unique_ptr<Communicator> duplicate_intercomm(const Communicator& inter);

// MPI_Barrier: returns once every member of both groups has entered.
void intercomm_barrier(const Communicator& inter);
// MPI_Bcast: root is MPI_ROOT at the root, MPI_PROC_NULL at the other members
// of its group, and the root's rank in the remote group at the receivers.
void intercomm_bcast(void* buf, std::size_t count, const Datatype& type, int root, const Communicator& inter);

}  // namespace viastack::mpi
