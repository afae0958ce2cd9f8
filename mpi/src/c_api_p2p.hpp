// Shared by the C entry points of point-to-point calls (c_api_p2p.cpp, and
// the persistent ones in c_api_requests.cpp): the checks every send or receive makes.
#pragma once

#include "c_api.hpp"

namespace viastack::mpi {

// The communicator and the type the checks found.
struct Checked {
  Communicator& comm;
  const Datatype& type;
};

inline Checked check_send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  runtime();
  Communicator& c = communicator_of(comm);
  check_count(count);
  const Datatype& type = datatype_of(datatype);
  check_buffer(buf, count, type);
  check_send_tag(tag);
  c.check_rank(dest, false, true);
  return {c, type};
}

inline Checked check_recv(const void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm) {
  runtime();
  Communicator& c = communicator_of(comm);
  check_count(count);
  const Datatype& type = datatype_of(datatype);
  check_buffer(buf, count, type);
  check_recv_tag(tag);
  c.check_rank(source, true, true);
  return {c, type};
}

}  // namespace viastack::mpi
