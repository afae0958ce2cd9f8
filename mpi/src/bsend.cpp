#include "bsend.hpp"

#include <algorithm>

#include "comm.hpp"
#include "datatype.hpp"
#include "errors.hpp"
#include "p2p.hpp"

namespace viastack::mpi {

BsendBuffer::~BsendBuffer() {
  for (const InFlight& m : in_flight_) delete m.request;
}

void BsendBuffer::attach(void* buffer, std::size_t size) {
  require(!attached_, MPI_ERR_BUFFER, "a buffer is already attached");
  base_ = static_cast<std::byte*>(buffer);
  size_ = size;
  attached_ = true;
}

std::pair<void*, std::size_t> BsendBuffer::detach() {
  require(attached_, MPI_ERR_BUFFER, "no buffer is attached");
  flush();
  attached_ = false;
  return {std::exchange(base_, nullptr), std::exchange(size_, 0)};
}

void BsendBuffer::send(const void* buf, std::size_t count, const Datatype& type, int dest, int tag,
                       const Communicator& comm) {
  require(attached_, MPI_ERR_BUFFER, "no buffer is attached (MPI_Buffer_attach)");
  const std::size_t bytes = count * type.size();
  const std::size_t length = bytes + MPI_BSEND_OVERHEAD;
  p2p_.poll();
  reclaim();
  // First fit in the gaps between the messages still in flight.
  std::size_t offset = 0;
  auto next = in_flight_.begin();
  for (; next != in_flight_.end() && next->offset - offset < length; ++next) offset = next->offset + next->length;
  require(next != in_flight_.end() || size_ - offset >= length, MPI_ERR_BUFFER,
          "the attached buffer has no room for the message");
  std::byte* packed = base_ + offset;
  type.pack(buf, count, packed);
  Request* r = p2p_.isend(packed, bytes, datatype_of(MPI_BYTE), dest, tag, comm, comm.p2p_context(), SendMode::standard);
  if (r->complete)  // sent eagerly: the transport holds its own copy
    delete r;
  else
    in_flight_.insert(next, InFlight{offset, length, r});
}

void BsendBuffer::flush() {
  p2p_.wait_until([&] {
    return std::all_of(in_flight_.begin(), in_flight_.end(), [](const InFlight& m) { return m.request->complete; });
  });
  reclaim();
}

void BsendBuffer::reclaim() {
  std::erase_if(in_flight_, [](const InFlight& m) {
    if (!m.request->complete) return false;
    delete m.request;
    return true;
  });
}

}  // namespace viastack::mpi
