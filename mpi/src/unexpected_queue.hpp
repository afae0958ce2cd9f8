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
  // The messages waiting from one sender, and its place among those that have some.
  struct Sender {
    List messages;
    std::size_t active_at = kInactive;
    bool in_others = false;  // its slot is an entry of others_, dropped once empty
  };
  struct Position {
    Sender* sender;
    List::iterator entry;
  };

  // Senders 0 .. ranks-1 (MPI_COMM_WORLD's) have a slot each; any other
  // source (an intercommunicator's remote rank past those, or a value off the
  // wire) gets one while it has messages waiting.
  explicit UnexpectedQueue(int ranks) : by_rank_(std::size_t(ranks > 0 ? ranks : 0)) {}

  bool empty() const { return active_.empty(); }
  // A new entry after every other of `source`, holding a copy of data, its
  // other fields zero; the caller fills them in.
  Incoming& append(int source, std::span<const std::byte> data);
  // The message that arrived first of those a receive of (source, tag,
  // context) matches; source may be MPI_ANY_SOURCE, tag MPI_ANY_TAG.
  std::optional<Position> find(int source, int tag, std::uint32_t context);
  // The first message, of any sender, for which pred holds (cancellation: rare).
  template <class Pred>
  std::optional<Position> find_if(Pred&& pred) {
    for (Sender* s : active_)
      for (auto it = s->messages.begin(); it != s->messages.end(); ++it)
        if (pred(*it)) return Position{s, it};
    return std::nullopt;
  }
  // Out of the queue, its node and buffer kept for the next message (a stream
  // of messages that arrive before their receives then allocates nothing).
  void recycle(Position at);
  // Out of the queue, to the caller.
  Incoming take(Position at);

 private:
  static constexpr std::size_t kInactive = ~std::size_t{0};
  static constexpr std::size_t kSpare = 64;  // as many as a window of 64 messages in flight needs
  Sender* existing(int source);
  // After an entry of `source` left s: s leaves the active senders if it has no more.
  void left(Sender& s, int source);

  std::vector<Sender> by_rank_;               // never resized: active_ points into it
  std::unordered_map<int, Sender> others_;    // map nodes stay put
  std::vector<Sender*> active_;               // the senders with messages waiting, for MPI_ANY_SOURCE
  List spare_;
  std::uint64_t arrivals_ = 0;
};

}  // namespace viastack::mpi
