// Point-to-point messaging: MPI matching (posted and unexpected queues, in
// arrival order per sender), the eager and rendezvous protocols over the
// Transport, and messages a process sends itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "comm.hpp"
#include "datatype.hpp"
#include "progress_agent.hpp"
#include "request.hpp"
#include "posted_queue.hpp"
#include "transport.hpp"
#include "unexpected_queue.hpp"

namespace viastack::mpi {

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
// asked to progress in every poll and every wait while it has work.
class ProgressClient {
 public:
  virtual void progress() = 0;

 protected:
  ~ProgressClient() = default;
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
  // Inline, as try_send_eager and irecv: the eager way is a message's common case.
  Request* isend(const void* buf, std::size_t count, const Datatype& type, int dest, int tag, const Communicator& comm,
                 std::uint32_t context, SendMode mode) {
    auto* r = new Request(Request::Type::send, &comm);
    const std::size_t bytes = count * type.size();
    const int peer = mode == SendMode::standard ? eager_peer(bytes, type, dest, comm) : -1;
    if (peer < 0) [[unlikely]] {
      post_send(*r, buf, count, type, dest, tag, context, mode);
      return r;
    }
    transport_->send(peer, eager_header(context, comm.rank(), tag, bytes), {static_cast<const std::byte*>(buf), bytes});
    r->complete = true;
    return r;
  }
  // isend into a request the caller owns (a persistent request started again).
  void post_send(Request& r, const void* buf, std::size_t count, const Datatype& type, int dest, int tag,
                 std::uint32_t context, SendMode mode);
  // A standard-mode send that fits the eager protocol is complete once queued: it
  // needs no request. False, having done nothing, when the message needs one.
  bool try_send_eager(const void* buf, std::size_t count, const Datatype& type, int dest, int tag,
                      const Communicator& comm, std::uint32_t context) {
    const std::size_t bytes = count * type.size();
    const int peer = eager_peer(bytes, type, dest, comm);
    if (peer < 0) return false;
    // No request is waited on, so nothing polls unless the send had to queue: then the backlog needs progress.
    if (!transport_->send(peer, eager_header(context, comm.rank(), tag, bytes),
                          {static_cast<const std::byte*>(buf), bytes}))
      poll();
    return true;
  }
  Request* irecv(void* buf, std::size_t count, const Datatype& type, int source, int tag, const Communicator& comm,
                 std::uint32_t context) {
    auto* r = new Request(Request::Type::recv, &comm);
    post_recv(*r, buf, count, type, source, tag, context);
    return r;
  }
  // irecv into a request the caller owns (a blocking receive's, on its stack).
  void post_recv(Request& r, void* buf, std::size_t count, const Datatype& type, int source, int tag,
                 std::uint32_t context) {
    set_receive_buffer(r, buf, count, type);
    r.context = context;
    r.source = source;
    r.tag = tag;
    // With nothing waiting unmatched, a receive from a rank only joins the posted queue.
    if (source == MPI_PROC_NULL || !unexpected_.empty()) [[unlikely]]
      return match_or_post(r);
    posted_.append(r);
  }
  std::optional<ProbeResult> iprobe(int source, int tag, std::uint32_t context);
  ProbeResult probe(int source, int tag, std::uint32_t context);
  // MPI_Improbe / MPI_Mprobe: the first matching message, taken out of
  // matching, so that only the receive given it (receive_matched) gets it.
  std::optional<Incoming> improbe(int source, int tag, std::uint32_t context);
  // A message that has arrived, taken as improbe takes it, but never yielding:
  // for the library's own draining.
  std::optional<Incoming> take_arrived(int source, int tag, std::uint32_t context) {
    poll();
    return take_unexpected(source, tag, context);
  }
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
  // One look for a test (MPI_Test and its kin, MPI_Iprobe): progress, then
  // done(). When done() does not hold, waits do not spin here (ranks
  // outnumber the cores) and the program's tests have seen nothing arrive
  // for 1 ms (Nic::yield_when_idle), the core goes to whoever else needs it: a
  // program that tests in a loop of its own then yields as MPI_Wait's yield
  // phase would, not holding the core its peer needs for a whole time slice
  // (hpcc's HPL on 4 ranks on 2 cores, which probes for its panels: 0.58 x
  // Open MPI's speed). Not for the library's own polling.
  template <class Done>
  bool test(Done&& done) {
    poll();
    if (done()) return true;
    if (transport_) transport_->yield_when_idle();
    return false;
  }
  // Frames in and out only (no collective task resumed): for a long copy
  // inside a collective, between its pieces.
  void poll_transport() {
    if (transport_) transport_->poll();
  }
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
  // The client asked in every poll and wait while it has work to do; nullptr while it has none.
  void set_progress_client(ProgressClient* client) { progress_client_ = client; }
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
  // The peer (world rank) of a standard send of `bytes` that goes by the eager protocol's
  // common way: contiguous, to another rank, up to the eager limit; -1 for any other send.
  int eager_peer(std::size_t bytes, const Datatype& type, int dest, const Communicator& comm) const {
    if (dest == MPI_PROC_NULL || !type.contiguous() || bytes > eager_limit_) return -1;
    const int peer = comm.world_rank(dest);
    return peer == world_rank_ ? -1 : peer;
  }
  static WireHeader eager_header(std::uint32_t context, int source, int tag, std::size_t bytes) {
    WireHeader h{WireType::eager};
    h.context = context;
    h.source = source;
    h.tag = tag;
    h.size = bytes;
    return h;
  }
  // post_recv's less common ways: the message may be in the unexpected queue, or the source is MPI_PROC_NULL.
  void match_or_post(Request& recv);
  // The receive's status for a message of `size` bytes (MPI_ERR_TRUNCATE if it is
  // longer than the receive takes); returns the bytes the receive takes.
  static std::size_t set_receive_status(Request& recv, int source, int tag, std::size_t size);
  void deliver(Request& recv, const Message& message);
  void deliver_eager(Request& recv, int source, int tag, std::span<const std::byte> data);
  // An eager message or a request to send that no posted receive matched: into the unexpected queue.
  void on_other_message(int peer, const WireHeader& h, std::span<const std::byte> payload);
  void keep_unexpected(int peer, const WireHeader& h, std::span<const std::byte> payload);
  void deliver_to_self(Request& send, std::span<const std::byte> data, std::uint32_t context, int source, int tag,
                       SendMode mode);
  std::optional<ProbeResult> find_unexpected(int source, int tag, std::uint32_t context);
  std::optional<Incoming> take_unexpected(int source, int tag, std::uint32_t context);
  static void set_receive_buffer(Request& r, void* buf, std::size_t count, const Datatype& type) {
    r.buffer = buf;
    r.count = count;
    r.datatype = &type;
    r.capacity = count * type.size();
  }
  void deliver_unexpected(Request& recv, const Incoming& in);
  void start_read(Request& recv, const Message& message);
  // A rendezvous read lands in the receive's staging (and is copied out when
  // complete): a non-contiguous type's, or the whole of a longer message that the receive keeps.
  static bool lands_in_staging(const Request& recv) {
    return !recv.datatype->contiguous() || (recv.keep_whole && recv.error == MPI_ERR_TRUNCATE);
  }
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
  PostedQueue posted_;
  UnexpectedQueue unexpected_;
  std::unordered_map<std::uint64_t, Request*> rendezvous_sends_;  // by token, until the FIN
  std::unordered_map<std::uint64_t, Request*> reads_;             // receives whose RDMA read is running
  std::uint64_t next_token_ = 1;  // rendezvous tokens and RDMA ids, one-sided ones included
};

}  // namespace viastack::mpi
