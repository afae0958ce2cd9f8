#include "internal_p2p.hpp"

#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

namespace {

const Datatype& u32_type() { return datatype_of(MPI_UINT32_T); }

}  // namespace

void send_typed(const void* buf, std::size_t count, const Datatype& type, int dest, int tag, const Communicator& comm,
                std::uint32_t context) {
  P2P& p2p = runtime().p2p();
  Request r(Request::Type::send, &comm);
  p2p.post_send(r, buf, count, type, dest, tag, context, SendMode::standard);
  p2p.wait(r);
}

void recv_typed(void* buf, std::size_t count, const Datatype& type, int source, int tag, const Communicator& comm,
                std::uint32_t context) {
  P2P& p2p = runtime().p2p();
  Request r(Request::Type::recv, &comm);
  p2p.post_recv(r, buf, count, type, source, tag, context);
  p2p.wait(r);
  require(r.error == MPI_SUCCESS, r.error, "the message was longer than the buffer");
}

void send_u32(std::uint32_t value, int dest, int tag, const Communicator& comm, std::uint32_t context) {
  send_typed(&value, 1, u32_type(), dest, tag, comm, context);
}

std::uint32_t recv_u32(int source, int tag, const Communicator& comm, std::uint32_t context) {
  std::uint32_t value = 0;
  recv_typed(&value, 1, u32_type(), source, tag, comm, context);
  return value;
}

std::vector<int> exchange_ints(const std::vector<int>& mine, int peer, int tag, const Communicator& comm,
                               std::uint32_t context) {
  P2P& p2p = runtime().p2p();
  const Datatype& ints = datatype_of(MPI_INT);
  // Sent without waiting: a long message goes by rendezvous, which completes only once the peer receives it.
  Request send(Request::Type::send, &comm);
  p2p.post_send(send, mine.data(), mine.size(), ints, peer, tag, context, SendMode::standard);
  const ProbeResult incoming = p2p.probe(peer, tag, context);
  std::vector<int> theirs(incoming.bytes / sizeof(int));
  recv_typed(theirs.data(), theirs.size(), ints, peer, tag, comm, context);
  p2p.wait(send);
  return theirs;
}

}  // namespace viastack::mpi
