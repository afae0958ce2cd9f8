// The posted queue: receives not yet matched, kept per sender as the
// unexpected messages are (unexpected_queue.hpp), those from MPI_ANY_SOURCE
// apart, each numbered in the order posted. A message from rank s takes, of
// the first match among the receives from s and the first among the
// wildcard ones, the one posted first: MPI's order, without walking the
// receives posted for other ranks (100 000 receives posted for one rank made
// each message from another walk them all: 10 000 round trips took 21 s).
// The queues link through the requests themselves (Request::next_posted).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "request.hpp"
#include "unexpected_queue.hpp"

namespace viastack::mpi {

class PostedQueue {
 public:
  explicit PostedQueue(int senders) : by_source_(std::size_t(senders > 0 ? senders : 0)) {}

  // r's context, source (a rank of its communicator, or MPI_ANY_SOURCE) and tag are set.
  void append(Request& r) {
    r.posted_order = posts_++;
    Queue& q = queue_for(r.source);
    r.prev_posted = q.tail;
    r.next_posted = nullptr;
    (q.tail ? q.tail->next_posted : q.head) = &r;
    q.tail = &r;
  }
  // Whether r waits here: posted, and neither matched nor cancelled since.
  bool holds(const Request& r) const {
    if (r.prev_posted) return true;
    const Queue* q = r.source == MPI_ANY_SOURCE                         ? &wild_
                     : std::size_t(r.source) < by_source_.size() ? &by_source_[std::size_t(r.source)]
                                                                      : nullptr;
    return q && q->head == &r;
  }
  // r's source has not changed since it was posted (nothing sets it on a posted receive).
  void remove(Request& r) { unlink(queue_for(r.source), r); }
  // The receive that a message (context, source, tag) goes to, taken out of
  // the queue; null when none matches. `source` comes off the wire: a rank no
  // receive names matches only the wildcard receives.
  Request* match(std::uint32_t context, int source, int tag) {
    Queue* q = source >= 0 && std::size_t(source) < by_source_.size() ? &by_source_[std::size_t(source)] : nullptr;
    Request* r = q ? first_match(*q, context, source, tag) : nullptr;
    if (wild_.head) [[unlikely]] {
      // Only a wildcard receive posted before the named one can take the message.
      const std::uint64_t before = r ? r->posted_order : ~std::uint64_t{0};
      for (Request* w = wild_.head; w && w->posted_order < before; w = w->next_posted)
        if (matches(context, source, tag, w->context, w->source, w->tag)) {
          r = w;
          q = &wild_;
          break;
        }
    }
    if (r) unlink(*q, *r);
    return r;
  }

 private:
  struct Queue {
    Request* head = nullptr;
    Request* tail = nullptr;
  };
  // Grows for a rank past those of MPI_COMM_WORLD (an intercommunicator's
  // remote group). A receive's source is MPI_ANY_SOURCE or a rank of its
  // communicator, checked by the C API (MPI_PROC_NULL is never posted).
  Queue& queue_for(int source) {
    if (source == MPI_ANY_SOURCE) return wild_;
    assert(source >= 0);
    if (std::size_t(source) >= by_source_.size()) [[unlikely]]
      by_source_.resize(std::size_t(source) + 1);
    return by_source_[std::size_t(source)];
  }
  static void unlink(Queue& q, Request& r) {
    (r.prev_posted ? r.prev_posted->next_posted : q.head) = r.next_posted;
    (r.next_posted ? r.next_posted->prev_posted : q.tail) = r.prev_posted;
    r.next_posted = r.prev_posted = nullptr;
  }
  static Request* first_match(const Queue& q, std::uint32_t context, int source, int tag) {
    for (Request* r = q.head; r; r = r->next_posted)
      if (matches(context, source, tag, r->context, r->source, r->tag)) return r;
    return nullptr;
  }

  std::vector<Queue> by_source_;
  Queue wild_;
  std::uint64_t posts_ = 0;
};

}  // namespace viastack::mpi
