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
#include <functional>
#include <sys/uio.h>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
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
// An asynchronous error's VIPL name: "VIP_ERROR_RECVQ_EMPTY".
const char* error_name(VIP_ERROR_CODE code);

// Removes the shared-memory segments this process's NICs created, for a
// process about to end without running exit handlers (MPI's abort path calls
// it before _exit). Async-signal-safe; the NICs must not be used afterwards.
void remove_shared_memory_now();
// The same for a process that ends the whole job (MPI_Abort, a fatal error):
// it also removes its peers' segments on this node, since the launcher may
// end them with SIGKILL (Hydra does). Async-signal-safe.
void remove_job_shared_memory_now();

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
  // Shares of a peer's single-copy RDMA reads this NIC wrote into the
  // reader's memory on its offer (VIASTACK_DIRECT_READ_SHARE).
  std::uint64_t shared_read_writes = 0;
  // RDMA reads this NIC asked a peer to serve through the rings and, the peer
  // not having claimed them in VIASTACK_READ_TAKEOVER_US, copied itself by single copy.
  std::uint64_t reads_taken_over = 0;
  std::uint64_t dropped_no_receive = 0;
  std::uint64_t sleeps = 0;
  // Sleeps that ran their whole time slice and ended with their wait over
  // though no doorbell rang: a wake-up lost (or being rung that instant).
  std::uint64_t late_wakeups = 0;
  std::uint64_t yields = 0;  // cores given away (sched_yield) while waiting, or by yield_when_idle
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

// Vi, Cq and Nic are interfaces: the engine makes the objects (Nic::open,
// Nic::create_cq, Nic::create_vi) and keeps their state out of this header,
// so that it can change without changing the library's interface. A program
// holds them by pointer or reference and never makes or copies one itself.

class Cq {
 public:
  struct Entry {
    Vi* vi;
    bool recv_queue;
  };
  Cq(const Cq&) = delete;
  Cq& operator=(const Cq&) = delete;
  Nic& nic() const;
  Result done(Entry& out);
  Result wait(std::uint32_t timeout_ms, Entry& out);
  Result resize(std::size_t capacity);
  void set_notify(std::function<void(const Entry&)> handler);
  std::size_t size() const;
  std::size_t capacity() const;
  void* user_handle = nullptr;

 private:
  friend class CqImpl;  // the engine's only kind of CQ
  Cq() = default;
  ~Cq() = default;
};

class Vi {
 public:
  using DescriptorNotify = std::function<void(VIP_DESCRIPTOR*)>;
  Vi(const Vi&) = delete;
  Vi& operator=(const Vi&) = delete;
  Nic& nic() const;
  ViState state() const;
  const ViAttributes& attributes() const;
  Result set_attributes(const ViAttributes& attrs);
  const ViAttributes& remote_attributes() const;
  // The provider the VI's connection runs on ("shm", "tcp"); null when unconnected.
  const char* transport() const;
  const ViCounters& counters() const;
  bool send_queue_empty() const;
  bool recv_queue_empty() const;
  Cq* send_cq() const;
  Cq* recv_cq() const;

  // Data transfer. `desc_handle` is the memory handle of the region holding the descriptor.
  Result post_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  Result post_recv(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  // Sends a message of at most max_inline_send() bytes at once, copied into
  // the link, with no descriptor (as InfiniBand's inline, unsignaled sends):
  // the memory needs no registration and is free on return, and no completion
  // follows. not_done when it cannot leave now — the link is full, or work
  // posted earlier has yet to go — and a descriptor must carry it instead.
  // Not on reliable-reception VIs, whose sends complete on acknowledgement.
  Result send_inline(const iovec* iov, std::size_t iovcnt);
  // The largest message send_inline takes: one frame of the connection (the
  // shm ring writes it straight from the caller's memory, the tcp link hands
  // it to the socket), within the VI's maximum transfer; 0 unless connected.
  std::size_t max_inline_send() const;
  Result send_done(VIP_DESCRIPTOR*& out);
  Result recv_done(VIP_DESCRIPTOR*& out);
  Result send_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out);
  Result recv_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out);
  void set_send_notify(DescriptorNotify handler);
  void set_recv_notify(DescriptorNotify handler);

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

 private:
  friend class ViImpl;  // the engine's only kind of VI
  Vi() = default;
  ~Vi() = default;
};

// A connection request waiting for VipConnectAccept / VipConnectReject.
struct ConnRequest {
  Nic* nic = nullptr;
  NetAddress remote;
  NetAddress local;
  ViAttributes remote_attrs;
  void* user_handle = nullptr;
};

class Nic {
 public:
  // device: "", "via0", "shm" (this rank's NIC) or "shm:N" (NIC N of the job).
  static Result open(std::string_view device, std::unique_ptr<Nic>& out);
  virtual ~Nic();
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

  void set_error_handler(std::function<void(const AsyncError&)> handler);

  // Advances every VI and the connection machinery once.
  void progress();
  // Runs progress until done() holds or the timeout passes: spins briefly, then
  // sleeps in the kernel until a peer rings the doorbell.
  template <class Done>
  Result wait(Done&& done, std::uint32_t timeout_ms);
  // For a program's test that found nothing (MPI_Test, MPI_Iprobe): where a
  // wait would not spin (VIASTACK_SPIN_US; 0 where the host's ranks outnumber
  // the job's CPUs) and the tests have seen no frame arrive for 1 ms, gives
  // the core away once, as a wait's yield phase does (Open MPI's
  // mpi_yield_when_idle, which yields at once); else nothing.
  void yield_when_idle();

  const char* provider_name() const;
  const NicCounters& counters() const;
  void* user_handle = nullptr;

 private:
  friend class NicImpl;  // the engine's only kind of NIC
  Nic() = default;
  Result wait_impl(const std::function<bool()>& done, std::uint32_t timeout_ms);
};

template <class Done>
Result Nic::wait(Done&& done, std::uint32_t timeout_ms) {
  if (done()) return Result::success;
  return wait_impl(std::function<bool()>(std::forward<Done>(done)), timeout_ms);
}

}  // namespace via
