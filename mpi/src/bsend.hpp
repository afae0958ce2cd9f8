// MPI_Bsend's attached buffer (MPI_Buffer_attach / MPI_Buffer_detach): each
// message is packed into it and sent from there, so the call returns at once.
// A message takes its packed size plus MPI_BSEND_OVERHEAD bytes of the buffer,
// free again once its send has completed.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace viastack::mpi {

class Communicator;
class Datatype;
class P2P;
class Request;

class BsendBuffer {
 public:
  explicit BsendBuffer(P2P& p2p) : p2p_(p2p) {}
  ~BsendBuffer();
  BsendBuffer(const BsendBuffer&) = delete;
  BsendBuffer& operator=(const BsendBuffer&) = delete;

  // Throws MPI_ERR_BUFFER when a buffer is already attached.
  void attach(void* buffer, std::size_t size);
  // Waits until every buffered message has been sent, then gives the buffer back.
  std::pair<void*, std::size_t> detach();
  // Throws MPI_ERR_BUFFER when no buffer is attached or it has no room for the message.
  void send(const void* buf, std::size_t count, const Datatype& type, int dest, int tag, const Communicator& comm);
  // Waits until every buffered message has been sent.
  void flush();

 private:
  struct InFlight {
    std::size_t offset, length;
    Request* request;
  };
  void reclaim();

  P2P& p2p_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  bool attached_ = false;
  std::vector<InFlight> in_flight_;  // by offset
};

}  // namespace viastack::mpi
