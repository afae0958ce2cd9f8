// The unexpected queue: messages that arrived before a receive matched them,
// kept per sender (its rank in the communicator), each numbered in order of
// arrival. A receive from one rank looks only at that rank's messages, so a
// sender far ahead of the others costs the receives from them nothing (one
// queue for all made each such receive walk the whole backlog: 50 000
// receives past 50 000 messages took 11 s); Open MPI's ob1 keeps one queue a
// peer as well. A receive from MPI_ANY_SOURCE takes, of each sender's first
// match, the one that arrived first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include <mpi.h>

#include <via/via.hpp>

namespace viastack::mpi {

class Request;

// A message that arrived (or was sent to self) before its receive was posted.
struct Incoming {
  std::uint32_t context;
  int source;  // rank in the communicator
  int tag;
  int peer;    // world rank; -1 for a message to self
  std::size_t size;
  std::vector<std::byte> data;  // eager: the message
  bool rendezvous = false;
  std::uint64_t token = 0, address = 0;
  via::MemHandle handle = 0;
  Request* sync_sender = nullptr;  // a synchronous send to self, completed when matched
  std::uint64_t arrival = 0;       // its place in the order of arrival (UnexpectedQueue)
};

// Whether a message (context, source, tag) is one a receive of (want_…) takes.
inline bool matches(std::uint32_t context, int source, int tag, std::uint32_t want_context, int want_source,
                    int want_tag) {
  return context == want_context && (want_source == MPI_ANY_SOURCE || source == want_source) &&
         (want_tag == MPI_ANY_TAG || tag == want_tag);
}

class UnexpectedQueue {
 public:
  using List = std::list<Incoming>;
  struct Position {
    List* list;
    List::iterator entry;
  };

  bool empty() const { return count_ == 0; }
  // A new entry after every other of `source`, holding a copy of data, its
  // other fields zero; the caller fills them in.
  Incoming& append(int source, std::span<const std::byte> data);
  // The message that arrived first of those a receive of (source, tag,
  // context) matches; source may be MPI_ANY_SOURCE, tag MPI_ANY_TAG.
  std::optional<Position> find(int source, int tag, std::uint32_t context);
  // The first message, of any sender, for which pred holds (cancellation: rare).
  template <class Pred>
  std::optional<Position> find_if(Pred&& pred) {
    for (auto& [source, list] : by_source_)
      for (auto it = list.begin(); it != list.end(); ++it)
        if (pred(*it)) return Position{&list, it};
    return std::nullopt;
  }
  // Out of the queue, its node and buffer kept for the next message (a stream
  // of messages that arrive before their receives then allocates nothing).
  void recycle(Position at);
  // Out of the queue, to the caller.
  Incoming take(Position at);

 private:
  static constexpr std::size_t kSpare = 64;  // as many as a window of 64 messages in flight needs
  // By sender; a map, not a vector indexed by rank, as the rank comes off
  // the wire (a list, once made, stays: its node is what Position points into).
  std::unordered_map<int, List> by_source_;
  List spare_;
  std::size_t count_ = 0;
  std::uint64_t arrivals_ = 0;
};

}  // namespace viastack::mpi
