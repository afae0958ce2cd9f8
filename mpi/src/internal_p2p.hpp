// Blocking messages the library sends itself while it builds communicators
// and runs an intercommunicator's collectives (MPI_Comm_create_group,
// intercomm.cpp): to or from a rank of `comm` (of its remote group, on an
// intercommunicator), in a context the caller chooses so that they never meet
// the program's messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace viastack::mpi {

class Communicator;
class Datatype;

void send_typed(const void* buf, std::size_t count, const Datatype& type, int dest, int tag, const Communicator& comm,
                std::uint32_t context);
// Throws the receive's error class (MPI_ERR_TRUNCATE) if the message did not fit.
void recv_typed(void* buf, std::size_t count, const Datatype& type, int source, int tag, const Communicator& comm,
                std::uint32_t context);

// A std::uint32_t each way.
void send_u32(std::uint32_t value, int dest, int tag, const Communicator& comm, std::uint32_t context);
std::uint32_t recv_u32(int source, int tag, const Communicator& comm, std::uint32_t context);

// Sends `mine` to `peer` and returns what `peer` sent, of any length; both sides call it.
std::vector<int> exchange_ints(const std::vector<int>& mine, int peer, int tag, const Communicator& comm,
                               std::uint32_t context);

}  // namespace viastack::mpi
