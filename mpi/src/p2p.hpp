// Point-to-point messaging: MPI matching (posted and unexpected queues, in
// arrival order per sender), the eager and rendezvous protocols over the
// Transport, and messages a process sends itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "progress_agent.hpp"
#include "request.hpp"
#include "transport.hpp"

namespace viastack::mpi {

class Communicator;
class Datatype;

enum class SendMode : std::uint8_t { standard, synchronous };

// The eager limit a process of this job uses: VIASTACK_MPI_EAGER_LIMIT, or
// unset, its default for the provider (MPI_T reports this one).
std::size_t eager_limit_setting();

// Where one-sided communication (window.cpp) learns of its messages
// (accumulate and rma) and of the completion of its RDMA operations.
class RmaClient {
 public:
  virtual void on_rma_message(int peer, const WireHeader& header, std::span<const std::byte> payload) = 0;
  virtual void on_rdma_complete(std::uint64_t id) = 0;

 protected:
  ~RmaClient() = default;
};

// Work that moves on whenever messages do (the non-blocking collectives):
// asked to progress in every poll and every wait.
class ProgressClient {
 public:
  virtual void progress() = 0;

 protected:
  ~ProgressClient() = default;
};

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
};

// What MPI_Probe reports.
struct ProbeResult {
  int source, tag;
  std::size_t bytes;
};

class P2P final : public TransportClient {
 public:
  P2P(int world_rank, int world_size);
  ~P2P();

  // The communicator's context is the request's; `context` picks p2p or collective traffic.
  Request* isend(const void* buf, std::size_t count, const Datatype& type, int dest, int tag, const Communicator& comm,
                 std::uint32_t context, SendMode mode);
  // isend into a request the caller owns (a persistent request started again).
  void post_send(Request& r, const void* buf, std::size_t count, const Datatype& type, int dest, int tag,
                 std::uint32_t context, SendMode mode);
  // A standard-mode send that fits the eager protocol is complete once queued: it
  // needs no request. False, having done nothing, when the message needs one.
  bool try_send_eager(const void* buf, std::size_t count, const Datatype& type, int dest, int tag,
                      const Communicator& comm, std::uint32_t context);
  Request* irecv(void* buf, std::size_t count, const Datatype& type, int source, int tag, const Communicator& comm,
                 std::uint32_t context);
  // irecv into a request the caller owns (a blocking receive's, on its stack).
  void post_recv(Request& r, void* buf, std::size_t count, const Datatype& type, int source, int tag,
                 std::uint32_t context);
  std::optional<ProbeResult> iprobe(int source, int tag, std::uint32_t context);
  ProbeResult probe(int source, int tag, std::uint32_t context);
  // MPI_Improbe / MPI_Mprobe: the first matching message, taken out of
  // matching, so that only the receive given it (receive_matched) gets it.
  std::optional<Incoming> improbe(int source, int tag, std::uint32_t context);
  Incoming mprobe(int source, int tag, std::uint32_t context);
  // MPI_Mrecv / MPI_Imrecv: receives a message improbe or mprobe took into r.
  void receive_matched(Request& r, void* buf, std::size_t count, const Datatype& type, Incoming message);
  // True when the receive was still unmatched and is now cancelled.
  bool cancel(Request& request);
  // Takes back a send nobody has matched yet: one to this rank at once, one to
  // another rank (a rendezvous; an eager send is complete and stays sent) once
  // the receiver answers, which completes it cancelled or leaves it to complete as sent.
  void cancel_send(Request& request);

  void poll();
  template <class Done>
  void wait_until(Done&& done) {
    const auto progressed_and_done = [&] {
      if (progress_client_) progress_client_->progress();
      return done();
    };
    if (threads_share_library()) {
      // Another thread's call may be what completes this wait: let it in between slices.
      while (!(transport_ ? transport_->wait_until(progressed_and_done, kThreadSliceMs) : progressed_and_done()))
        let_other_threads_in();
    } else if (transport_) {
      transport_->wait_until(progressed_and_done);
    } else if (!progressed_and_done()) {
      would_wait_forever();  // a single process has no peer that could complete anything
    }
  }
  // Under MPI_THREAD_MULTIPLE, how long a waiting call keeps the library before letting other threads in.
  static constexpr std::uint32_t kThreadSliceMs = 1;
  void set_progress_client(ProgressClient& client) { progress_client_ = &client; }
  void wait(Request& request) {
    wait_until([&] { return request.complete; });
  }
  void shutdown();
  std::size_t eager_limit() const { return eager_limit_; }

  // One-sided communication shares the transport (which exists only with more
  // than one process) and the ids of RDMA operations.
  void set_rma_client(RmaClient& client) { rma_ = &client; }
  Transport& transport() { return *transport_; }
  std::uint64_t new_rdma_id() { return next_token_++; }

  // TransportClient
  void on_message(int peer, const WireHeader& header, std::span<const std::byte> payload) override;
  void on_rdma_complete(std::uint64_t id) override;

 private:
  struct Message {  // an incoming message as matching sees it
    int source, tag, peer;
    std::size_t size;
    std::span<const std::byte> data;
    bool rendezvous;
    std::uint64_t token, address;
    via::MemHandle handle;
  };
  void append_posted(Request& recv);
  void remove_posted(Request& recv);
  Request* match_posted(std::uint32_t context, int source, int tag);
  void deliver(Request& recv, const Message& message);
  void deliver_to_self(Request& send, std::span<const std::byte> data, std::uint32_t context, int source, int tag,
                       SendMode mode);
  std::optional<ProbeResult> find_unexpected(int source, int tag, std::uint32_t context) const;
  std::optional<Incoming> take_unexpected(int source, int tag, std::uint32_t context);
  void set_receive_buffer(Request& r, void* buf, std::size_t count, const Datatype& type);
  void deliver_unexpected(Request& recv, const Incoming& in);
  // A new entry at the end of the unexpected queue holding a copy of data, its other fields zero.
  Incoming& append_unexpected(std::span<const std::byte> data);
  // Drops a delivered entry of the unexpected queue, keeping its node and buffer for the next one.
  void recycle_unexpected(std::list<Incoming>::iterator entry);
  void start_read(Request& recv, const Message& message);
  [[noreturn]] static void would_wait_forever();
  void finish_receive(Request& recv);
  void on_cancel_send(int peer, std::uint64_t token);
  void on_cancel_reply(std::uint64_t token, bool cancelled);
  void complete(Request& request);

  int world_rank_;
  std::size_t eager_limit_;
  std::unique_ptr<Transport> transport_;
  RmaClient* rma_ = nullptr;
  ProgressClient* progress_client_ = nullptr;
  Request* posted_head_ = nullptr;  // posted receives in order, linked through Request::next_posted
  Request* posted_tail_ = nullptr;
  std::list<Incoming> unexpected_;
  // Delivered entries of unexpected_, their buffers kept: a stream of messages
  // that arrive before their receives costs no allocation once these exist.
  std::list<Incoming> spare_unexpected_;
  static constexpr std::size_t kSpareUnexpected = 64;  // as many as a window of 64 messages in flight needs
  std::unordered_map<std::uint64_t, Request*> rendezvous_sends_;  // by token, until the FIN
  std::unordered_map<std::uint64_t, Request*> reads_;             // receives whose RDMA read is running
  std::uint64_t next_token_ = 1;  // rendezvous tokens and RDMA ids, one-sided ones included
};

bool matches(std::uint32_t context, int source, int tag, std::uint32_t want_context, int want_source, int want_tag);

}  // namespace viastack::mpi
