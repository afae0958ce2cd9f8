// A point-to-point operation in progress: what MPI_Request points at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "abi.hpp"
#include "via/via.hpp"

namespace viastack::mpi {

class Communicator;
class Datatype;

class Request : public ompi_request_t {
 public:
  // collective: a non-blocking collective's (nonblocking_collectives.hpp); generalized: MPI_Grequest_start's.
  enum class Type : std::uint8_t { send, recv, collective, generalized };

  Request(Type type, const Communicator* comm)
      : ompi_request_t{HandleKind::request, GapsUnset{}}, type(type), comm(comm) {}

  // Most messages make and retire a request: they come from a free list, not
  // malloc; inline, as the calls that make and retire them. Under the library
  // lock, like the rest of the library (progress_agent.hpp).
  static void* operator new(std::size_t size) {
    if (size != sizeof(Request) || !free_list) [[unlikely]]
      return ::operator new(size);
    return std::exchange(free_list, free_list->next);
  }
  static void operator delete(void* p, std::size_t size) noexcept {
    if (size != sizeof(Request)) [[unlikely]]
      return ::operator delete(p);
    free_list = new (p) Free{free_list};
  }

  Type type;
  const Communicator* comm;  // whose error handler reports this request's errors
  bool complete = false;
  bool cancelled = false;
  bool detached = false;  // MPI_Request_free before completion: deleted when it completes

  // The user's buffer.
  void* buffer = nullptr;
  std::size_t count = 0;
  const Datatype* datatype = nullptr;
  std::vector<std::byte> staging;  // packed bytes of a non-contiguous type

  // Receives: what they match, and how much they can take.
  std::uint32_t context = 0;
  int source = 0;
  int tag = 0;
  std::size_t capacity = 0;
  // A message longer than the receive takes fills the buffer as far as it
  // goes, and the whole of it (packed) lands in staging too: a broadcast's
  // rank that passes the message on (collectives.cpp), in an erroneous call.
  bool keep_whole = false;
  Request* next_posted = nullptr;  // P2P's queues of posted receives (PostedQueue), linked through the requests
  Request* prev_posted = nullptr;
  std::uint64_t posted_order = 0;

  // Rendezvous: the registration peers read from (send) or the read lands in (receive).
  std::uint64_t token = 0;
  int peer = -1;
  via::MemHandle registration = 0;
  bool registered = false;

  // A persistent request (MPI_Send_init, MPI_Recv_init, …, and the persistent
  // collectives MPIX_*_init): what MPI_Start posts again each time; between a
  // completion and the next start it is inactive.
  struct Persistent {
    int rank;  // destination or source
    bool synchronous = false, buffered = false;
    bool active = false;
    // A persistent collective's (persistent_collectives.cpp): starts the non-blocking collective,
    // as the MPI_I… call with the arguments given at init, and returns that call's error.
    std::function<int(MPI_Request*)> start_collective = nullptr;
  };
  std::optional<Persistent> persistent;

  // A generalized request's callbacks (MPI-3.1 12.2).
  struct Generalized {
    MPI_Grequest_query_function* query;
    MPI_Grequest_free_function* free;
    MPI_Grequest_cancel_function* cancel;
    void* extra_state;
  };
  Generalized generalized{};

  // The outcome, as MPI_Status reports it.
  int status_source = MPI_ANY_SOURCE;
  int status_tag = MPI_ANY_TAG;
  int error = MPI_SUCCESS;
  std::size_t bytes = 0;

  // Freed requests, linked through their first bytes (p2p.cpp).
  struct Free {
    Free* next;
  };
  static Free* free_list;

  void fill_status(MPI_Status* status) const {
    if (status == MPI_STATUS_IGNORE) return;
    status->MPI_SOURCE = status_source;
    status->MPI_TAG = status_tag;
    status->_cancelled = cancelled;
    status->_ucount = bytes;
  }
};

}  // namespace viastack::mpi
