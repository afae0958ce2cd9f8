// The VIA engine's C++ API: NIC, registered memory, VIs, completion queues.
//
// The engine implements the VIA 1.0 model in user space. Descriptors are the
// spec's VIP_DESCRIPTOR (vipl.h): the provider writes completion status into
// them in place. Work advances only inside calls on the NIC (post, done, wait,
// progress): there is no hidden thread. One NIC and everything created on it
// must be used by one thread at a time.
#pragma once

#include <vipl.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <sys/uio.h>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace via {

// Status of an engine call; the values are VIPL's VIP_RETURN codes, so the
// translation at the VIPL boundary is a cast.
enum class Result : int {
  success = VIP_SUCCESS,
  not_done = VIP_NOT_DONE,
  invalid_parameter = VIP_INVALID_PARAMETER,
  error_resource = VIP_ERROR_RESOURCE,
  timeout = VIP_TIMEOUT,
  reject = VIP_REJECT,
  invalid_reliability_level = VIP_INVALID_RELIABILITY_LEVEL,
  invalid_mtu = VIP_INVALID_MTU,
  invalid_qos = VIP_INVALID_QOS,
  invalid_ptag = VIP_INVALID_PTAG,
  invalid_rdmaread = VIP_INVALID_RDMAREAD,
  descriptor_error = VIP_DESCRIPTOR_ERROR,
  invalid_state = VIP_INVALID_STATE,
  error_nameservice = VIP_ERROR_NAMESERVICE,
  no_match = VIP_NO_MATCH,
};
const char* describe(Result r);

// Removes the shared-memory segments this process's NICs created, for a
// process about to end without running exit handlers (MPI's abort path calls
// it before _exit). Async-signal-safe; the NICs must not be used afterwards.
void remove_shared_memory_now();

enum class ViState : int {
  idle = VIP_STATE_IDLE,
  connected = VIP_STATE_CONNECTED,
  connect_pending = VIP_STATE_CONNECT_PENDING,
  error = VIP_STATE_ERROR,
};

using Ptag = std::uint32_t;  // 0 is never a valid protection tag
using MemHandle = VIP_MEM_HANDLE;
inline constexpr std::uint32_t kInfinite = 0xFFFFFFFFu;  // timeout in ms that never expires

struct MemAttributes {
  Ptag ptag = 0;
  bool rdma_write = false;
  bool rdma_read = false;
};

struct ViAttributes {
  VIP_RELIABILITY_LEVEL reliability = VIP_SERVICE_RELIABLE_DELIVERY;
  std::uint32_t max_transfer = 0;  // 0: the NIC's maximum
  Ptag ptag = 0;
  bool rdma_write = false;
  bool rdma_read = false;
};

// A VI network address: a provider-defined host address plus a discriminator.
struct NetAddress {
  std::vector<std::uint8_t> host;
  std::vector<std::uint8_t> discriminator;
  bool operator==(const NetAddress&) const = default;
};

class Nic;
class Vi;
class Cq;
class Provider;
class Link;
struct RegionTable;
struct FaultPlan;
class FaultInjector;
struct ConnRequest;

// An asynchronous error, as VIPL's VIP_ERROR_DESCRIPTOR.
struct AsyncError {
  Vi* vi = nullptr;
  Cq* cq = nullptr;
  VIP_DESCRIPTOR* descriptor = nullptr;
  VIP_RESOURCE_CODE resource = VIP_RESOURCE_VI;
  VIP_ERROR_CODE code = VIP_ERROR_CATASTROPHIC;
  std::string cause;
  bool orderly = false;  // the peer disconnected on purpose; nothing went wrong
};

// Counters a program (or a test) can read to see which paths a NIC used.
struct NicCounters {
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t direct_reads = 0;   // single-copy (CMA) transfers pulled from a peer
  std::uint64_t direct_writes = 0;  // single-copy (CMA) transfers pushed to a peer
  std::uint64_t dropped_no_receive = 0;
  std::uint64_t sleeps = 0;
  // Injected by VIASTACK_FAULTS on unreliable VIs.
  std::uint64_t faults_dropped = 0;
  std::uint64_t faults_duplicated = 0;
  std::uint64_t faults_reordered = 0;
  std::uint64_t faults_delayed = 0;
};

// What one VI carried: with the provider that carries it (Vi::transport()),
// these show which path a peer's traffic took.
struct ViCounters {
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;
};

// One posted descriptor as the engine tracks it.
struct WorkRequest {
  VIP_DESCRIPTOR* desc = nullptr;
  std::uint32_t status = 0;  // completion bits, written to desc->CS.Status when published
  std::uint32_t length = 0;  // bytes transferred, written to desc->CS.Length for receives
  std::uint64_t total = 0;   // bytes the operation moves
  std::uint64_t progress = 0;  // bytes sent (send side) or received (receive side)
  bool finished = false;
};

// A work queue: descriptors are posted at the tail, complete in order at
// `published`, and are dequeued by the user at the head.
class WorkQueue {
 public:
  // capacity: a power of two.
  explicit WorkQueue(std::size_t capacity) : slots_(capacity), mask_(capacity - 1) {}
  bool full() const { return tail_ - head_ == slots_.size(); }
  bool empty() const { return tail_ == head_; }
  std::uint64_t head() const { return head_; }
  std::uint64_t tail() const { return tail_; }
  std::uint64_t published() const { return published_; }
  WorkRequest& at(std::uint64_t index) { return slots_[index & mask_]; }
  WorkRequest& push(VIP_DESCRIPTOR* desc) {
    WorkRequest& wr = at(tail_++);
    wr = WorkRequest{};
    wr.desc = desc;
    return wr;
  }
  // Returns the head descriptor if its completion was published, else null.
  VIP_DESCRIPTOR* pop_done() { return head_ == published_ ? nullptr : at(head_++).desc; }
  // Writes out the finished requests at the front of the unpublished part, in
  // order; calls `on_publish` for each.
  template <class F>
  void publish(F&& on_publish);
  std::size_t capacity() const { return slots_.size(); }

 private:
  std::vector<WorkRequest> slots_;
  std::uint64_t mask_;
  std::uint64_t head_ = 0, published_ = 0, tail_ = 0;
};

class Cq {
 public:
  struct Entry {
    Vi* vi;
    bool recv_queue;
  };
  Cq(Nic& nic, std::size_t capacity) : nic_(nic), capacity_(capacity) {}
  Nic& nic() const { return nic_; }
  Result done(Entry& out);
  Result wait(std::uint32_t timeout_ms, Entry& out);
  Result resize(std::size_t capacity);
  void set_notify(std::function<void(const Entry&)> handler) { notify_ = std::move(handler); }
  // Drops the entries of a VI that is being destroyed.
  void forget(const Vi* vi);
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }
  void* user_handle = nullptr;

 private:
  friend class Vi;
  void push(const Entry& entry);
  Nic& nic_;
  std::size_t capacity_;
  std::deque<Entry> entries_;
  std::function<void(const Entry&)> notify_;
  bool overflow_reported_ = false;
};

class Vi {
 public:
  using DescriptorNotify = std::function<void(VIP_DESCRIPTOR*)>;
  Vi(Nic& nic, const ViAttributes& attrs, Cq* send_cq, Cq* recv_cq, std::size_t queue_depth);
  ~Vi();
  Nic& nic() const { return nic_; }
  ViState state() const { return state_; }
  const ViAttributes& attributes() const { return attrs_; }
  Result set_attributes(const ViAttributes& attrs);
  const ViAttributes& remote_attributes() const { return remote_attrs_; }
  // The provider the VI's connection runs on ("shm", "tcp"); null when unconnected.
  const char* transport() const;
  const ViCounters& counters() const { return counters_; }
  bool send_queue_empty() const { return sendq_.empty(); }
  bool recv_queue_empty() const { return recvq_.empty(); }
  Cq* send_cq() const { return send_cq_; }
  Cq* recv_cq() const { return recv_cq_; }

  // Data transfer. `desc_handle` is the memory handle of the region holding the descriptor.
  Result post_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  Result post_recv(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  // Sends a message of at most kMaxInlineSend bytes at once, copied into the
  // link, with no descriptor (as InfiniBand's inline, unsignaled sends): the
  // memory needs no registration and is free on return, and no completion
  // follows. not_done when it cannot leave now — the link is full, or work
  // posted earlier has yet to go — and a descriptor must carry it instead.
  // Not on reliable-reception VIs, whose sends complete on acknowledgement.
  static constexpr std::size_t kMaxInlineSend = 256;
  Result send_inline(const iovec* iov, std::size_t iovcnt);
  Result send_done(VIP_DESCRIPTOR*& out);
  Result recv_done(VIP_DESCRIPTOR*& out);
  Result send_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out);
  Result recv_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out);
  void set_send_notify(DescriptorNotify handler) { send_notify_ = std::move(handler); }
  void set_recv_notify(DescriptorNotify handler) { recv_notify_ = std::move(handler); }

  // Connections. connect_request blocks until the server answers or the
  // timeout passes. connect_request_start and connect_peer_request only start
  // a request; connect_request_done and connect_peer_done then advance it
  // without blocking: not_done until it connects (success) or fails (reject,
  // timeout, ...; the VI is idle again).
  Result connect_request(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms);
  Result connect_request_start(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms);
  Result connect_request_done();
  Result connect_peer_request(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms);
  Result connect_peer_done();
  Result connect_peer_wait();
  Result disconnect();

  void* user_handle = nullptr;

  // ---- used by the NIC and providers ----
  // Called by the provider once the connection is established.
  void attach(std::unique_ptr<Link> link, const ViAttributes& remote_attrs);
  // Moves frames in and out; returns true if anything happened.
  bool progress();
  // Peer death / close noticed by the NIC's slow path.
  void check_link();
  std::uint32_t provider_slot = 0;  // the provider's id for this VI

 private:
  friend class Nic;
  struct ReadResponse {
    std::uint64_t raddr;
    std::uint64_t total;
    MemHandle rhandle;
    std::uint32_t refused = 0;  // status bits when the target refuses the read
    std::uint64_t sent = 0;
  };

  Result validate_post(VIP_DESCRIPTOR* desc, MemHandle desc_handle) const;
  std::uint32_t check_local_segments(const VIP_DESCRIPTOR* desc, std::uint32_t first_data,
                                     std::uint64_t& total) const;
  void finish(WorkQueue& q, WorkRequest& wr, std::uint32_t status);
  void publish(WorkQueue& q, bool recv);
  bool send_frame(const struct FrameHeader& h, const iovec* iov, std::size_t iovcnt);
  bool transmit_pending();
  bool transmit(WorkRequest& wr);
  bool transmit_data(WorkRequest& wr, std::uint8_t frame_type, std::uint64_t raddr, std::uint32_t rhandle);
  bool transmit_read_responses();
  bool handle_frame(const struct FrameHeader& h, const std::byte* payload);
  WorkRequest* take_receive();
  bool deliver(WorkRequest& wr, const struct FrameHeader& h, const std::byte* payload);
  void complete_acked(std::uint32_t count);
  void complete_read(const struct FrameHeader& h, const std::byte* payload);
  void serve_read_request(const struct FrameHeader& h);
  // Breaks the VI: it goes to the error state, the peer is told, outstanding
  // descriptors are flushed (wr, if given, completes with `status`).
  void fail(VIP_ERROR_CODE code, std::string cause, WorkQueue* q = nullptr, WorkRequest* wr = nullptr,
            std::uint32_t status = 0, bool orderly = false);
  void flush_all(std::uint32_t status);
  Result wait_queue(WorkQueue& q, std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out);
  Result start_connect(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms, bool client);
  Result poll_connect();
  Result wait_connected();
  std::uint64_t connect_deadline_ns_ = 0;  // when a pending connect request times out
  bool direct_rdma(WorkRequest& wr);

  Nic& nic_;
  ViAttributes attrs_;
  ViAttributes remote_attrs_{};
  ViState state_ = ViState::idle;
  Cq* send_cq_;
  Cq* recv_cq_;
  WorkQueue sendq_, recvq_;
  std::uint64_t tx_next_ = 0;    // next send-queue request to transmit
  std::uint64_t fill_next_ = 0;  // next receive-queue request to fill
  std::deque<std::uint64_t> awaiting_ack_, awaiting_read_;
  std::deque<ReadResponse> read_responses_;
  std::uint32_t acks_owed_ = 0;
  bool discarding_ = false;  // dropping the rest of a message that had nowhere to go
  WorkRequest* receiving_ = nullptr;
  std::uint16_t rx_message_ = 0;  // message number of the one being received
  std::uint16_t tx_message_ = 0;  // number of the next message sent in frames
  std::unique_ptr<Link> link_;
  ViCounters counters_;
  // What the link offers, read once when it is attached.
  std::uint64_t frame_payload_ = 0;  // largest payload of one frame
  bool direct_capable_ = false;      // single-copy access to the peer's memory
  std::uint64_t direct_min_ = UINT64_MAX;  // sends/RDMA this large use it
  std::unique_ptr<FaultInjector> faults_;  // unreliable VIs under VIASTACK_FAULTS
  DescriptorNotify send_notify_, recv_notify_;
};

// A connection request waiting for VipConnectAccept / VipConnectReject.
struct ConnRequest {
  Nic* nic = nullptr;
  NetAddress remote;
  NetAddress local;
  ViAttributes remote_attrs;
  std::uint64_t provider_cookie = 0;
  void* user_handle = nullptr;
};

class Nic {
 public:
  // device: "", "via0", "shm" (this rank's NIC) or "shm:N" (NIC N of the job).
  static Result open(std::string_view device, std::unique_ptr<Nic>& out);
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  void query(VIP_NIC_ATTRIBUTES& out) const;
  const std::vector<std::uint8_t>& host_address() const;
  Result resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const;
  std::string describe_address(const std::vector<std::uint8_t>& host) const;

  Result create_ptag(Ptag& out);
  Result destroy_ptag(Ptag ptag);
  bool ptag_valid(Ptag ptag) const;

  Result register_memory(const void* addr, std::size_t len, const MemAttributes& attrs, MemHandle& out);
  Result deregister_memory(const void* addr, MemHandle handle);
  Result query_memory(const void* addr, MemHandle handle, MemAttributes& out) const;
  Result set_memory_attributes(const void* addr, MemHandle handle, const MemAttributes& attrs);

  Result create_cq(std::size_t entries, Cq*& out);
  Result destroy_cq(Cq* cq);
  Result create_vi(const ViAttributes& attrs, Cq* send_cq, Cq* recv_cq, Vi*& out);
  // Whether this NIC supports a VI with these attributes (VipCreateVi's checks).
  Result check_vi_attributes(const ViAttributes& attrs) const;
  Result destroy_vi(Vi* vi);

  Result connect_wait(const NetAddress& local, std::uint32_t timeout_ms, ConnRequest*& out);
  Result connect_accept(ConnRequest* request, Vi& vi);
  Result connect_reject(ConnRequest* request);

  void set_error_handler(std::function<void(const AsyncError&)> handler) { error_handler_ = std::move(handler); }
  void report(const AsyncError& error);

  // Advances every VI and the connection machinery once.
  void progress();
  // Runs `work` at the end of the current progress step (notify handlers).
  void defer(std::function<void()> work) { deferred_.push_back(std::move(work)); }
  // Runs progress until done() holds or the timeout passes: spins briefly, then
  // sleeps in the kernel until a peer rings the doorbell.
  template <class Done>
  Result wait(Done&& done, std::uint32_t timeout_ms);

  Provider& provider() { return *provider_; }
  const char* provider_name() const;
  const NicCounters& counters() const { return counters_; }
  NicCounters& counters() { return counters_; }
  void* user_handle = nullptr;

 private:
  friend class Vi;
  Nic() = default;
  Result wait_impl(const std::function<bool()>& done, std::uint32_t timeout_ms);
  // Connection control traffic; with check_peers, also notices closed or dead peers.
  void slow_progress(bool check_peers);

  std::unique_ptr<Provider> provider_;
  RegionTable* regions_ = nullptr;  // the provider's table, looked up once
  std::unique_ptr<const FaultPlan> fault_plan_;  // from VIASTACK_FAULTS, if set
  std::vector<std::unique_ptr<Vi>> vis_;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<ConnRequest>> requests_;
  std::vector<Ptag> ptags_;
  Ptag next_ptag_ = 1;
  std::function<void(const AsyncError&)> error_handler_;
  NicCounters counters_;
  std::uint64_t progress_calls_ = 0;
  std::vector<std::function<void()>> deferred_;
};

template <class Done>
Result Nic::wait(Done&& done, std::uint32_t timeout_ms) {
  if (done()) return Result::success;
  return wait_impl(std::function<bool()>(std::forward<Done>(done)), timeout_ms);
}

template <class F>
void WorkQueue::publish(F&& on_publish) {
  while (published_ != tail_) {
    WorkRequest& wr = at(published_);
    if (!wr.finished) break;
    on_publish(wr);
    ++published_;
  }
}

}  // namespace via
