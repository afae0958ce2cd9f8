// A VI: its work queues, the VIA state machine and error semantics, and the
// frame protocol that carries send/receive and RDMA over a provider's link.

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "engine/clock.hpp"
#include "engine/copy.hpp"
#include "engine/engine.hpp"
#include "engine/errors.hpp"
#include "engine/read_path.hpp"
#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "engine/faults.hpp"
#include "providers/provider.hpp"
#include "trace/frame_trace.hpp"

namespace via {

namespace {

constexpr std::uint16_t kMaxSegments = 252;

// Sends and RDMA writes at or above this size use the link's single-copy path
// when it has one; RDMA reads too, from direct_read_threshold() (never above it).
std::uint64_t direct_threshold() {
  static const std::uint64_t value = [] {
    // Measured on this project's 2-vCPU machines (docs/PERFORMANCE.md): the
    // two pipelined copies through the rings beat one CMA copy at every size
    // up to 16 MiB, where CMA tops out near 10 GB/s. Above it, CMA also spares
    // the rings a long stream of fragments.
    return std::uint64_t(config::integer("VIASTACK_DIRECT_THRESHOLD"));
  }();
  return value;
}

// RDMA reads at or above this size use it. Below, from read_paths()'s
// smallest, each read goes the way that measured faster; below that, the
// target's engine sends the data through the rings: two pipelined copies,
// which measured about twice as fast as one CMA copy on this project's first
// machines (MPI's rendezvous at 512 KiB-4 MiB on 2 ranks and on 4 ranks on 2
// cores, docs/PERFORMANCE.md), and which a reader takes back when its target
// does not serve them (take_over_stalled_reads).
std::uint64_t direct_read_threshold() {
  static const std::uint64_t value =
      std::min(direct_threshold(), std::uint64_t(config::integer("VIASTACK_DIRECT_READ_THRESHOLD")));
  return value;
}

// The way reads between VIASTACK_ADAPTIVE_READ_MIN and direct_read_threshold()
// go, from the speeds this process's reads reached (one chooser for the
// process: the machine's state is what it follows). Unless the variable is
// set, from 1 MiB only where ranks outnumber CPUs: there a smaller read's
// time is mostly how soon its two ends got a core, and the rings measured
// faster below (4 ranks on 2 cores, 64 KiB: streaming 14 GB/s through the
// rings, 4 chosen; from 1 MiB chosen was as fast or faster: scatter 1 MiB
// 0.6 against 1.4 ms, alltoall 2.5 against 3.2; docs/PERFORMANCE.md).
ReadPathChooser& read_paths() {
  constexpr std::uint64_t kOversubscribedSmallest = 1u << 20;
  static ReadPathChooser chooser(
      config::integer_if_set("VIASTACK_ADAPTIVE_READ_MIN").has_value() || !job_outnumbers_cpus_on_this_host()
          ? std::uint64_t(config::integer("VIASTACK_ADAPTIVE_READ_MIN"))
          : kOversubscribedSmallest,
      direct_read_threshold());
  return chooser;
}

// How long a read served through the rings waits for its target to claim it
// before the reader takes it back and copies it by single copy: a target
// computing outside the library (an MPI sender between MPI_Isend and
// MPI_Wait) then holds its reader up by this much rather than until it next
// polls. 0: never taken back.
// Whether a small read is taken back sooner (ViImpl::takeover_wait): with
// the default wait, and every rank of this host's with a CPU of its own (where
// ranks outnumber CPUs, a target that has not answered mostly waits for a
// core: 4 ranks on 2 cores, 256 KiB, bidirectional 15.6 GB/s scaled against
// 18.8, ireduce 58 us a call against 47).
bool read_takeover_scales() {
  static const bool value =
      !config::integer_if_set("VIASTACK_READ_TAKEOVER_US").has_value() && !job_outnumbers_cpus_on_this_host();
  return value;
}
std::uint64_t read_takeover_ns() {
  static const std::uint64_t value = read_takeover_wait_ns(config::integer_if_set("VIASTACK_READ_TAKEOVER_US"),
                                                           job_ranks_on_this_host(), job_cpus_on_this_host());
  return value;
}

// The share of a single-copy RDMA read (percent, whole pages) that the reader
// offers its target's engine to write into the reader's memory while the
// reader copies the rest: one core copies the whole message otherwise, on
// both sides of the rendezvous the other waits. Whoever claims the share first
// copies it (read_direct), so a target that is not polling costs little.
std::uint64_t direct_read_share() {
  static const std::uint64_t value = std::uint64_t(config::integer("VIASTACK_DIRECT_READ_SHARE"));
  return value;
}

unsigned op_of(const VIP_DESCRIPTOR* d) { return d->CS.Control & VIP_CONTROL_OP_MASK; }

std::uint32_t send_status_op(const VIP_DESCRIPTOR* d) {
  switch (op_of(d)) {
    case VIP_CONTROL_OP_RDMAWRITE: return VIP_STATUS_OP_RDMA_WRITE;
    case VIP_CONTROL_OP_RDMAREAD: return VIP_STATUS_OP_RDMA_READ;
    default: return VIP_STATUS_OP_SEND;
  }
}

// The descriptor's local data segments: all of them for send/receive, all
// but the leading address segment for RDMA.
std::uint32_t first_data_segment(const VIP_DESCRIPTOR* d) { return op_of(d) == VIP_CONTROL_OP_SENDRECV ? 0 : 1; }

const VIP_DATA_SEGMENT& data_segment(const VIP_DESCRIPTOR* d, std::uint32_t i) { return d->DS[i].Local; }

// Builds the iovecs covering [offset, offset+len) of the descriptor's data segments.
std::size_t slice_segments(const VIP_DESCRIPTOR* d, std::uint64_t offset, std::uint64_t len, iovec* out,
                           std::size_t max_out) {
  const std::uint32_t first = first_data_segment(d);
  // Most often the slice lies in the first segment (callers keep offset + len
  // within the message, so the sum does not wrap).
  if (first < d->CS.SegCount && len > 0 && max_out > 0 && offset + len <= data_segment(d, first).Length) {
    out[0] = iovec{static_cast<char*>(data_segment(d, first).Data.Address) + offset, std::size_t(len)};
    return 1;
  }
  std::size_t n = 0;
  for (std::uint32_t i = first; i < d->CS.SegCount && len > 0 && n < max_out; ++i) {
    const VIP_DATA_SEGMENT& seg = data_segment(d, i);
    if (offset >= seg.Length) {
      offset -= seg.Length;
      continue;
    }
    std::uint64_t take = std::min<std::uint64_t>(seg.Length - offset, len);
    out[n++] = iovec{static_cast<char*>(seg.Data.Address) + offset, std::size_t(take)};
    len -= take;
    offset = 0;
  }
  return n;
}

void scatter_segments(const VIP_DESCRIPTOR* d, std::uint64_t offset, const std::byte* src, std::uint64_t len);

// Copies len bytes from src to [offset, offset+len) of the descriptor's data
// segments. Most often the bytes all land in the first segment: that case
// inline, without a call on the path of every small message.
inline void scatter(const VIP_DESCRIPTOR* d, std::uint64_t offset, const std::byte* src, std::uint64_t len) {
  const std::uint32_t first = first_data_segment(d);
  if (first < d->CS.SegCount && offset + len <= data_segment(d, first).Length) [[likely]]
    copy_bytes(static_cast<std::byte*>(data_segment(d, first).Data.Address) + offset, src, std::size_t(len));
  else
    scatter_segments(d, offset, src, len);
}

[[gnu::noinline]] void scatter_segments(const VIP_DESCRIPTOR* d, std::uint64_t offset, const std::byte* src,
                                        std::uint64_t len) {
  for (std::uint32_t i = first_data_segment(d); i < d->CS.SegCount && len > 0; ++i) {
    const VIP_DATA_SEGMENT& seg = data_segment(d, i);
    if (offset >= seg.Length) {
      offset -= seg.Length;
      continue;
    }
    const std::uint64_t take = std::min<std::uint64_t>(seg.Length - offset, len);
    copy_bytes(static_cast<std::byte*>(seg.Data.Address) + offset, src, std::size_t(take));
    src += take;
    len -= take;
    offset = 0;
  }
}

}  // namespace

ViImpl::ViImpl(NicImpl& nic, const ViAttributes& attrs, CqImpl* send_cq, CqImpl* recv_cq, std::size_t queue_depth)
    : nic_(nic), attrs_(attrs), send_cq_(send_cq), recv_cq_(recv_cq), sendq_(queue_depth), recvq_(queue_depth) {}

ViImpl::~ViImpl() = default;

Result ViImpl::set_attributes(const ViAttributes& attrs) {
  if (state_ != ViState::idle) return Result::invalid_state;
  if (Result r = nic_.check_vi_attributes(attrs); r != Result::success) return r;
  VIP_NIC_ATTRIBUTES nic_attrs;
  nic_.query(nic_attrs);
  attrs_ = attrs;
  // The remembered regions were checked against the old tag.
  desc_region_ = data_region_ = CheckedRegion{};
  if (attrs_.max_transfer == 0) attrs_.max_transfer = std::uint32_t(nic_attrs.MaxTransferSize);
  nic_.provider().publish_vi_attributes(*this);
  return Result::success;
}

// ---- posting ----

void ViImpl::forget_region(MemHandle handle) {
  for (CheckedRegion* region : {&desc_region_, &data_region_})
    if (region->handle == handle) *region = CheckedRegion{};
}

template <ViImpl::Lookup where>
inline bool ViImpl::registered(CheckedRegion& last, MemHandle h, std::uint64_t addr, std::uint64_t len) {
  if (h == last.handle && RegionTable::within(last.addr, last.len, addr, len)) return true;
  return where == Lookup::table && look_up_region(last, h, addr, len);
}

bool ViImpl::look_up_region(CheckedRegion& last, MemHandle h, std::uint64_t addr, std::uint64_t len) {
  RegionEntry entry;
  if (!nic_.regions().lookup(h, entry) || entry.ptag != attrs_.ptag ||
      !RegionTable::within(entry.addr, entry.len, addr, len))
    return false;
  last = CheckedRegion{h, entry.addr, entry.len};
  return true;
}

// The checks stay out of line (each a leaf in its remembered form): inlined
// into the post, the table lookup of the rare path made the compiler save and
// restore registers on the common one.
template <ViImpl::Lookup where>
[[gnu::noinline]] Result ViImpl::check_descriptor(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (desc == nullptr || std::uintptr_t(desc) % VIP_DESCRIPTOR_ALIGNMENT != 0) return Result::invalid_parameter;
  // The descriptor itself must lie in memory registered with this VI's tag:
  // first its control segment, then (knowing SegCount) all of it.
  const std::uint64_t at = std::uintptr_t(desc);
  if (!registered<where>(desc_region_, desc_handle, at, sizeof(VIP_CONTROL_SEGMENT))) return Result::invalid_parameter;
  const std::uint64_t size = sizeof(VIP_CONTROL_SEGMENT) + std::uint64_t(desc->CS.SegCount) * sizeof(VIP_DESCRIPTOR_SEGMENT);
  if (!registered<where>(desc_region_, desc_handle, at, size)) return Result::invalid_parameter;
  return Result::success;
}

// As check_local_segments; total changes only if every segment passes.
template <ViImpl::Lookup where>
[[gnu::noinline]] std::uint32_t ViImpl::check_segments(const VIP_DESCRIPTOR* desc, std::uint32_t first_data,
                                                       std::uint64_t& total) {
  // Read once: the stores below could alias the descriptor for the compiler.
  const std::uint32_t count = desc->CS.SegCount;
  std::uint64_t sum = 0;
  for (std::uint32_t i = first_data; i < count; ++i) {
    const VIP_DATA_SEGMENT& seg = data_segment(desc, i);
    const std::uint32_t len = seg.Length;
    if (len == 0) continue;
    if (!registered<where>(data_region_, seg.Handle, seg.Data.AddressBits, len)) return VIP_STATUS_PROTECTION_ERROR;
    sum += len;
  }
  total += sum;
  return 0;
}

// Most posts pass on the regions remembered from the previous ones; any
// other, failing ones included, is checked again against the NIC's table,
// out of line.
Result ViImpl::validate_post(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (check_descriptor<Lookup::remembered>(desc, desc_handle) == Result::success) return Result::success;
  return check_descriptor<Lookup::table>(desc, desc_handle);
}

// Returns 0 if every local data segment lies in a region registered with this
// VI's tag, else the error status bits; adds the segment lengths to total.
std::uint32_t ViImpl::check_local_segments(const VIP_DESCRIPTOR* desc, std::uint32_t first_data,
                                           std::uint64_t& total) {
  if (check_segments<Lookup::remembered>(desc, first_data, total) == 0) return 0;
  return check_segments<Lookup::table>(desc, first_data, total);
}

inline bool ViImpl::remembered_single_segment(VIP_DESCRIPTOR* desc, MemHandle desc_handle, SingleSegment& out) {
  const std::uint64_t at = std::uintptr_t(desc);
  // The control segment and the first data segment in one look: a range
  // within the region holds its start, so SegCount is read from checked memory.
  if (desc == nullptr || at % VIP_DESCRIPTOR_ALIGNMENT != 0 ||
      !registered<Lookup::remembered>(desc_region_, desc_handle, at,
                                      sizeof(VIP_CONTROL_SEGMENT) + sizeof(VIP_DESCRIPTOR_SEGMENT)) ||
      desc->CS.SegCount != 1)
    return false;
  const VIP_DATA_SEGMENT& seg = data_segment(desc, 0);
  out = SingleSegment{seg.Data.Address, seg.Length};
  return out.length == 0 ||
         registered<Lookup::remembered>(data_region_, seg.Handle, std::uintptr_t(out.data), out.length);
}

inline bool ViImpl::post_small_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (state_ != ViState::connected || tx_next_ != sendq_.tail() || sendq_.full() || acks_owed_ ||
      !read_responses_.empty())
    return false;
  SingleSegment seg;
  // A plain send, immediate data allowed: no fence, no reserved bit.
  if (!remembered_single_segment(desc, desc_handle, seg) ||
      (desc->CS.Control & ~VIP_CONTROL_IMMEDIATE) != VIP_CONTROL_OP_SENDRECV)
    return false;
  const std::uint32_t len = seg.length;
  if (len > frame_payload_ || len >= direct_min_ || len > attrs_.max_transfer) return false;
  std::atomic_ref<VIP_UINT32>(desc->CS.Status).store(0, std::memory_order_relaxed);
  WorkRequest& wr = sendq_.push(desc);
  wr.total = len;
  const std::uint8_t flags = kFlagLast | ((desc->CS.Control & VIP_CONTROL_IMMEDIATE) ? kFlagImmediate : 0);
  const FrameHeader h{kFrameSend, flags, tx_message_, len, len, 0, 0, 0, desc->CS.ImmediateData};
  const iovec iov{seg.data, len};
  // No room in the link: the request waits at tx_next_ as any queued send.
  if (!send_frame(h, &iov, len ? 1 : 0)) return true;
  wr.progress = len;
  ++tx_message_;
  const std::uint64_t index = tx_next_++;
  if (attrs_.reliability == VIP_SERVICE_RELIABLE_RECEPTION) {
    awaiting_ack_.push_back(index);
  } else if (sendq_.published() == index && !send_cq_ && !send_notify_) {
    // Done, and the only completion to publish: publish<false>()'s work for it alone.
    wr.status = VIP_STATUS_OP_SEND;
    wr.finished = true;
    std::atomic_ref<VIP_UINT32>(desc->CS.Status).store(VIP_STATUS_OP_SEND | VIP_STATUS_DONE, std::memory_order_release);
    sendq_.publish_front();
  } else {
    finish(sendq_, wr, VIP_STATUS_OP_SEND);
  }
  return true;
}

Result ViImpl::post_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (post_small_send(desc, desc_handle)) return Result::success;
  return post_send_in_full(desc, desc_handle);
}

// Out of line: its registers and its failure path's string would be saved
// and set up on the short way too.
[[gnu::noinline]] Result ViImpl::post_send_in_full(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (state_ == ViState::idle || state_ == ViState::connect_pending) return Result::invalid_state;
  if (Result r = validate_post(desc, desc_handle); r != Result::success) return r;
  if (sendq_.full()) return Result::error_resource;
  std::atomic_ref<VIP_UINT32>(desc->CS.Status).store(0, std::memory_order_relaxed);
  const std::uint64_t index = sendq_.tail();
  WorkRequest& wr = sendq_.push(desc);
  if (state_ == ViState::error) {
    finish(sendq_, wr, VIP_STATUS_DESC_FLUSHED_ERROR | send_status_op(desc));
    return Result::success;
  }
  const unsigned op = op_of(desc);
  std::uint32_t error = 0;
  if ((desc->CS.Control & VIP_CONTROL_RESERVED) || op == VIP_CONTROL_OP_RESERVED || desc->CS.SegCount > kMaxSegments ||
      (op != VIP_CONTROL_OP_SENDRECV && desc->CS.SegCount < 1))
    error = VIP_STATUS_FORMAT_ERROR;
  else if (op == VIP_CONTROL_OP_RDMAREAD && attrs_.reliability == VIP_SERVICE_UNRELIABLE)
    error = VIP_STATUS_FORMAT_ERROR;  // VIA: no RDMA read on unreliable VIs
  else
    error = check_local_segments(desc, first_data_segment(desc), wr.total);
  if (!error && wr.total > attrs_.max_transfer) error = VIP_STATUS_LENGTH_ERROR;
  if (error) {
    fail(VIP_ERROR_POST_DESC, "posted send descriptor is malformed or names memory outside its registered regions",
         &sendq_, &wr, error | send_status_op(desc));
    return Result::success;
  }
  if (tx_next_ != index) return Result::success;  // earlier sends wait: this one goes behind them
  // With nothing else waiting to leave, the send goes straight to the link
  // (transmit_pending() would find it, by a longer way, the same).
  if (acks_owed_ || !read_responses_.empty() || ((desc->CS.Control & VIP_CONTROL_QFENCE) && !awaiting_read_.empty())) {
    transmit_pending();
  } else if (transmit(wr) && link_) {
    ++tx_next_;
  }
  return Result::success;
}

Result ViImpl::post_recv(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (SingleSegment seg; remembered_single_segment(desc, desc_handle, seg) && !(desc->CS.Control & VIP_CONTROL_RESERVED)) {
    WorkRequest* wr = enqueue_recv(desc);
    if (!wr) return Result::error_resource;
    if (!wr->finished) wr->total = seg.length;
    return Result::success;
  }
  return post_recv_in_full(desc, desc_handle);
}

[[gnu::noinline]] Result ViImpl::post_recv_in_full(VIP_DESCRIPTOR* desc, MemHandle desc_handle) {
  if (Result r = validate_post(desc, desc_handle); r != Result::success) return r;
  WorkRequest* wr = enqueue_recv(desc);
  if (!wr) return Result::error_resource;
  if (wr->finished) return Result::success;
  std::uint32_t error = 0;
  if ((desc->CS.Control & VIP_CONTROL_RESERVED) || desc->CS.SegCount > kMaxSegments)
    error = VIP_STATUS_FORMAT_ERROR;
  else
    error = check_local_segments(desc, 0, wr->total);
  if (error) fail(VIP_ERROR_POST_DESC, "posted receive descriptor names memory outside its registered regions",
                  &recvq_, wr, error | VIP_STATUS_OP_RECEIVE);
  return Result::success;
}

// Without post_recv's checks and its failure path: a re-post is on the path of every message.
Result ViImpl::repost_recv(VIP_DESCRIPTOR* desc) {
  WorkRequest* wr = enqueue_recv(desc);
  if (!wr) return Result::error_resource;
  if (wr->finished) return Result::success;
  for (std::uint32_t i = 0; i < desc->CS.SegCount; ++i) wr->total += data_segment(desc, i).Length;
  return Result::success;
}

// enqueue_recv's work once for the batch: the room, the receive a message is
// arriving into; on a VI in the error state, one at a time (each is flushed).
std::size_t ViImpl::repost_recvs(VIP_DESCRIPTOR* const* descs, std::size_t n) {
  if (state_ == ViState::error) [[unlikely]] {
    std::size_t posted = 0;
    while (posted < n && repost_recv(descs[posted]) == Result::success) ++posted;
    return posted;
  }
  n = std::size_t(std::min<std::uint64_t>(n, recvq_.room()));
  const std::uint64_t receiving = receiving_ ? recvq_.index_of(*receiving_) : 0;
  for (std::size_t i = 0; i < n; ++i) {
    VIP_DESCRIPTOR* desc = descs[i];
    std::atomic_ref<VIP_UINT32>(desc->CS.Status).store(0, std::memory_order_relaxed);
    WorkRequest& wr = recvq_.push(desc);
    for (std::uint32_t s = 0; s < desc->CS.SegCount; ++s) wr.total += data_segment(desc, s).Length;
  }
  if (receiving_) receiving_ = &recvq_.at(receiving);
  return n;
}

inline WorkRequest* ViImpl::enqueue_recv(VIP_DESCRIPTOR* desc) {
  if (recvq_.full()) return nullptr;
  std::atomic_ref<VIP_UINT32>(desc->CS.Status).store(0, std::memory_order_relaxed);
  // The receive a message is arriving into, by index: the push may move the queue.
  const std::uint64_t receiving = receiving_ ? recvq_.index_of(*receiving_) : 0;
  WorkRequest& wr = recvq_.push(desc);
  if (receiving_) receiving_ = &recvq_.at(receiving);
  if (state_ == ViState::error) finish(recvq_, wr, VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_RECEIVE);
  return &wr;
}

Result ViImpl::send_inline(const iovec* iov, std::size_t iovcnt) {
  std::uint64_t len = 0;
  for (std::size_t i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  return send_inline(iov, iovcnt, len);
}

Result ViImpl::send_inline(const iovec* iov, std::size_t iovcnt, std::uint64_t len) {
  if (state_ != ViState::connected) return Result::invalid_state;
  if (attrs_.reliability == VIP_SERVICE_RELIABLE_RECEPTION) return Result::invalid_reliability_level;
  if (len > max_inline_send()) return Result::invalid_parameter;
  // Behind earlier work it would overtake it.
  if (transmit_waiting()) return Result::not_done;
  const FrameHeader h{kFrameSend, kFlagLast, tx_message_, std::uint32_t(len), len, 0, 0, 0, 0};
  if (!send_frame(h, iov, iovcnt)) return Result::not_done;
  ++tx_message_;
  return Result::success;
}

std::size_t ViImpl::max_inline_send() const {
  if (state_ != ViState::connected) return 0;
  return std::size_t(std::min<std::uint64_t>(frame_payload_, attrs_.max_transfer));
}

// ---- completion ----

void ViImpl::finish(WorkQueue& q, WorkRequest& wr, std::uint32_t status) {
  wr.status = status;
  wr.finished = true;
  if (!publish_later_) publish(&q == &recvq_);
}

void ViImpl::publish(bool recv) {
  if (recv)
    publish<true>();
  else
    publish<false>();
}


// One instance per queue: every completion pays for the choices made here once.
template <bool recv>
void ViImpl::publish() {
  WorkQueue& q = recv ? recvq_ : sendq_;
  CqImpl* cq = recv ? recv_cq_ : send_cq_;
  q.publish([&](WorkRequest& wr) {
    if (recv) wr.desc->CS.Length = wr.length;
    std::atomic_ref<VIP_UINT32>(wr.desc->CS.Status).store(wr.status | VIP_STATUS_DONE, std::memory_order_release);
    if (cq) cq->push(Cq::Entry{this, recv});
  });
  DescriptorNotify& notify = recv ? recv_notify_ : send_notify_;
  if (notify && q.head() != q.published()) [[unlikely]] {
    // One-shot; it runs once the NIC is done with its loop over the VIs, so
    // the handler may call anything, this VI's disconnect included.
    nic_.defer([handler = std::move(notify), desc = q.pop_done()] { handler(desc); });
    notify = nullptr;
  }
}

Result ViImpl::send_done(VIP_DESCRIPTOR*& out) {
  out = sendq_.pop_done();
  if (out) return Result::success;
  nic_.progress();
  out = sendq_.pop_done();
  return out ? Result::success : Result::not_done;
}

Result ViImpl::recv_done(VIP_DESCRIPTOR*& out) {
  out = recvq_.pop_done();
  if (out) return Result::success;
  nic_.progress();
  out = recvq_.pop_done();
  return out ? Result::success : Result::not_done;
}

Result ViImpl::wait_queue(WorkQueue& q, std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out) {
  out = q.pop_done();
  if (out) return Result::success;
  // Nothing posted and nothing that could complete: waiting would be in vain.
  if (q.empty() && state_ != ViState::connected && state_ != ViState::connect_pending) return Result::invalid_state;
  return nic_.wait(
      [&] {
        out = q.pop_done();
        return out != nullptr;
      },
      timeout_ms);
}


// ---- errors and state ----

void ViImpl::fail(VIP_ERROR_CODE code, std::string cause, WorkQueue* q, WorkRequest* wr, std::uint32_t status,
              bool orderly) {
  if (wr) {
    wr->status = status;
    wr->finished = true;
  }
  const bool was_failed = state_ == ViState::error;
  state_ = ViState::error;
  if (link_) {
    link_->close(true);
    drop_link();
  }
  flush_all(VIP_STATUS_DESC_FLUSHED_ERROR);
  if (q) publish(q == &recvq_);
  if (!was_failed) {
    trace::vi_event(trace::Event::vi_error, *this, code, std::string(error_name(code)) + ": " + cause);
    nic_.report(AsyncError{this, nullptr, wr ? wr->desc : nullptr, VIP_RESOURCE_VI, code, std::move(cause), orderly});
  }
}

void ViImpl::flush_all(std::uint32_t status) {
  for (std::uint64_t i = sendq_.published(); i != sendq_.tail(); ++i) {
    WorkRequest& wr = sendq_.at(i);
    if (!wr.finished) {
      wr.status = status | send_status_op(wr.desc);
      wr.finished = true;
    }
  }
  for (std::uint64_t i = recvq_.published(); i != recvq_.tail(); ++i) {
    WorkRequest& wr = recvq_.at(i);
    if (!wr.finished) {
      wr.status = status | VIP_STATUS_OP_RECEIVE;
      wr.finished = true;
    }
  }
  tx_next_ = sendq_.tail();
  fill_next_ = recvq_.tail();
  awaiting_ack_.clear();
  awaiting_read_.clear();
  withdrawable_reads_ = 0;
  read_responses_.clear();
  acks_owed_ = 0;
  receiving_ = nullptr;
  discarding_ = false;
  publish<false>();
  publish<true>();
}

void ViImpl::attach(std::unique_ptr<Link> link, const ViAttributes& remote_attrs) {
  link_ = std::move(link);
  frame_payload_ = link_->max_payload();
  direct_capable_ = link_->direct();
  direct_min_ = direct_capable_ ? direct_threshold() : UINT64_MAX;
  direct_read_min_ = direct_capable_ ? direct_read_threshold() : UINT64_MAX;
  read_claim_ = direct_capable_ && direct_read_share() ? link_->own_read_claim() : nullptr;
  read_takeover_ns_ = direct_capable_ ? read_takeover_ns() : 0;
  ring_read_claims_ = read_takeover_ns_ ? link_->own_ring_read_claims() : std::span<std::atomic<std::uint64_t>>{};
  faults_.reset();
  if (nic_.fault_plan() && attrs_.reliability == VIP_SERVICE_UNRELIABLE) {
    // One random stream per VI, derived from the NIC's number and the VI's
    // slot, so that a seed replays the same faults in every run.
    const std::uint64_t stream = std::uint64_t(nic_.provider().nic_number()) << 32 | provider_slot;
    faults_ = std::make_unique<FaultInjector>(*nic_.fault_plan(), stream, nic_.counters());
  }
  remote_attrs_ = remote_attrs;
  state_ = ViState::connected;
  tx_next_ = sendq_.tail();
  if (nic_.fault_plan()) note_connection_under_faults(nic_.has_unreliable_vi());
  trace::vi_event(trace::Event::connected, *this, 0, std::string("over ") + link_->transport());
}

void ViImpl::close_link() {
  if (link_) link_->close(false);
  drop_link();
}

void ViImpl::drop_link() {
  if (holding_)
    held_link_ = std::move(link_);
  else
    link_.reset();
}

void ViImpl::check_link() {
  if (!link_ || state_ != ViState::connected) return;
  switch (link_->peer_state_after_frames()) {  // frames still in flight are handled first
    case Link::PeerState::up: return;
    case Link::PeerState::closed:
      return fail(VIP_ERROR_CONN_LOST, "the peer disconnected", nullptr, nullptr, 0, true);
    case Link::PeerState::failed: return fail(VIP_ERROR_CONN_LOST, "the peer's VI failed and broke the connection");
    case Link::PeerState::dead: return fail(VIP_ERROR_CONN_LOST, "the peer process died");
    case Link::PeerState::broken: return fail(VIP_ERROR_CONN_LOST, "connection broken: " + link_->broken_reason());
  }
}

Result ViImpl::disconnect() {
  if (state_ == ViState::idle) return Result::invalid_state;
  if (state_ == ViState::connect_pending) {
    if (nic_.provider().cancel_connect(*this)) {
      state_ = ViState::idle;
      trace::vi_event(trace::Event::disconnected, *this, 0, "the connect request was withdrawn");
      return Result::success;
    }
  }
  close_link();
  flush_all(VIP_STATUS_DESC_FLUSHED_ERROR);
  nic_.provider().reset_vi(*this);
  state_ = ViState::idle;
  trace::vi_event(trace::Event::disconnected, *this);
  return Result::success;
}

// ---- connections ----

Result ViImpl::connect_request(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms) {
  if (Result r = start_connect(local, remote, timeout_ms, true); r != Result::success) return r;
  return wait_connected();
}

Result ViImpl::start_connect(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms,
                         bool client) {
  if (state_ != ViState::idle) return Result::invalid_state;
  const auto mode = client ? Provider::ConnectMode::client : Provider::ConnectMode::peer;
  if (Result r = nic_.provider().connect(*this, local, remote, mode); r != Result::success) return r;
  trace::connect_requested(*this, local, remote, client);
  state_ = ViState::connect_pending;
  connect_deadline_ns_ = timeout_ms == kInfinite ? UINT64_MAX : now_ns() + std::uint64_t(timeout_ms) * 1000000ull;
  return Result::success;
}

// One step of a pending request: the connection traffic moves (a request that
// found the peer's inbox full goes out again), then the outcome, if any; at
// the deadline the request is withdrawn unless it completed meanwhile.
Result ViImpl::poll_connect() {
  if (state_ == ViState::connected) return Result::success;
  if (state_ != ViState::connect_pending) return Result::invalid_state;
  Provider& provider = nic_.provider();
  provider.progress_control();
  Result outcome = provider.poll_connect(*this);
  if (outcome == Result::not_done && now_ns() >= connect_deadline_ns_)
    outcome = provider.cancel_connect(*this) ? Result::timeout : provider.poll_connect(*this);
  if (outcome != Result::not_done && outcome != Result::success) {
    state_ = ViState::idle;
    trace::vi_event(trace::Event::connect_failed, *this, std::uint32_t(outcome), describe(outcome));
  }
  return outcome;
}

Result ViImpl::wait_connected() {
  Result outcome = Result::not_done;
  Result r = nic_.wait(
      [&] {
        outcome = poll_connect();
        return outcome != Result::not_done;
      },
      kInfinite);
  return r == Result::success ? outcome : r;
}

// ---- transmitting ----

inline bool ViImpl::whole_message(const FrameHeader& h) const {
  return h.type == kFrameSend && (h.flags & (kFlagLast | kFlagImmediate)) == kFlagLast && h.offset == 0 &&
         h.total == h.length && h.length <= frame_payload_ && !receiving_ && !discarding_;
}

bool ViImpl::receive_and_transmit(const FrameHeader* h, const std::byte* payload) {
  bool moved = false;
  // What the frames complete is published once, after them (nobody can look
  // in between: notify handlers run later anyway); a failure publishes all.
  publish_later_ = true;
  // Up to 64 frames a call, so that one busy VI does not hold up the others.
  for (int n = 1; h != nullptr; ++n) {
    if (in_place_ && whole_message(*h)) {
      moved = true;  // next_frame()'s: whoever waits should look now
      break;
    }
    ++nic_.counters().frames_received;
    ++counters_.frames_received;
    moved = true;
    trace::frame_received(*this, *h, payload);
    if (!receive_whole_message(*h, payload) && (!handle_frame(*h, payload) || !link_)) {  // the VI failed
      publish_later_ = false;
      return true;
    }
    link_->pop();
    if (n == 64 || !link_->peek(h, payload)) h = nullptr;
  }
  publish_later_ = false;
  if (moved) {
    publish<true>();
    publish<false>();  // RDMA reads complete on their responses
  }
  if (faults_ && link_ && faults_->holding()) faults_->flush(*link_, now_ns());
  if (link_ && transmit_waiting()) moved |= transmit_pending();
  if (withdrawable_reads_ && link_) moved |= take_over_stalled_reads();
  return moved;
}

// Every frame leaves through here; on an unreliable VI with VIASTACK_FAULTS
// set, data frames meet the fault injector on the way. Inlined into each
// caller: a call more on the path of every frame costs as much as its body.
[[gnu::always_inline]] inline bool ViImpl::send_frame(const FrameHeader& h, const iovec* iov, std::size_t iovcnt) {
  const bool sent = faults_ && (h.type == kFrameSend || h.type == kFrameRdmaWrite)
                        ? faults_->send(*link_, h, iov, iovcnt, now_ns())
                        : link_->try_send(h, iov, iovcnt);
  if (sent) {
    ++nic_.counters().frames_sent;
    ++counters_.frames_sent;
    trace::frame_sent(*this, h, iov, iovcnt);
  }
  return sent;
}

const char* ViImpl::transport() const { return link_ ? link_->transport() : nullptr; }

bool ViImpl::transmit_pending() {
  const std::uint64_t sent_before = nic_.counters().frames_sent;
  if (acks_owed_) {
    FrameHeader h{kFrameAck, 0, 0, 0, acks_owed_, 0, 0, 0, 0};
    if (!send_frame(h, nullptr, 0)) return false;  // acks keep their place in the stream
    acks_owed_ = 0;
  }
  if (!read_responses_.empty() && !transmit_read_responses()) return nic_.counters().frames_sent != sent_before;
  while (link_ && tx_next_ != sendq_.tail()) {
    WorkRequest& wr = sendq_.at(tx_next_);
    // A fenced descriptor waits until the RDMA reads before it have completed.
    if ((wr.desc->CS.Control & VIP_CONTROL_QFENCE) && !awaiting_read_.empty()) break;
    if (!wr.finished && !transmit(wr)) break;
    if (!link_) break;  // the request broke the VI; flushing reset tx_next_
    ++tx_next_;
  }
  return nic_.counters().frames_sent != sent_before;
}

// Hands one send-queue request to the link; false if the link had no room
// (what was sent so far is remembered in wr.progress).
bool ViImpl::transmit(WorkRequest& wr) {
  VIP_DESCRIPTOR* d = wr.desc;
  const std::uint64_t index = tx_next_;
  const bool direct = wr.total >= direct_min_;
  switch (op_of(d)) {
    case VIP_CONTROL_OP_SENDRECV: {
      if (direct) {
        iovec iov[kMaxSegments];
        std::size_t n = slice_segments(d, 0, wr.total, iov, kMaxSegments);
        iovec list{iov, n * sizeof(iovec)};
        std::uint8_t flags = kFlagLast | ((d->CS.Control & VIP_CONTROL_IMMEDIATE) ? kFlagImmediate : 0);
        FrameHeader h{kFrameDirectSend, flags, 0, std::uint32_t(list.iov_len), wr.total, 0, 0, 0, d->CS.ImmediateData};
        if (!send_frame(h, &list, 1)) return false;
        awaiting_ack_.push_back(index);  // the receiver pulls the data, then acknowledges
        return true;
      }
      if (!transmit_data(wr, kFrameSend, 0, 0)) return false;
      break;
    }
    case VIP_CONTROL_OP_RDMAWRITE: {
      const VIP_ADDRESS_SEGMENT& remote = d->DS[0].Remote;
      if (direct_capable_) {
        // Check the target region the way the target would, before any byte moves.
        if (std::uint32_t err = link_->check_peer_region(remote.Data.AddressBits, wr.total, remote.Handle, true)) {
          fail(VIP_ERROR_RDMAW_PROT,
               "RDMA write to " + describe_range(remote.Data.AddressBits, wr.total, remote.Handle) +
                   ", outside the target's registered, write-enabled memory",
               &sendq_, &wr, err | VIP_STATUS_OP_RDMA_WRITE);
          return true;
        }
        if (direct) return direct_rdma(wr);
      }
      if (!transmit_data(wr, kFrameRdmaWrite, remote.Data.AddressBits, remote.Handle)) return false;
      break;
    }
    case VIP_CONTROL_OP_RDMAREAD: {
      const VIP_ADDRESS_SEGMENT& remote = d->DS[0].Remote;
      const bool way_chosen = direct_capable_ && read_paths().chooses(wr.total);
      if (direct_capable_) {
        if (std::uint32_t err = link_->check_peer_region(remote.Data.AddressBits, wr.total, remote.Handle, false)) {
          fail(VIP_ERROR_RDMAR_PROT,
               "RDMA read from " + describe_range(remote.Data.AddressBits, wr.total, remote.Handle) +
                   ", outside the target's registered, read-enabled memory",
               &sendq_, &wr, err | VIP_STATUS_OP_RDMA_READ);
          return true;
        }
        if (wr.total >= direct_read_min_) return direct_rdma(wr);
        if (way_chosen && read_paths().choose(wr.total) == ReadPath::direct) {
          const std::uint64_t began = now_ns();
          direct_rdma(wr);  // true for a read
          const std::uint64_t took = now_ns() - began;
          direct_read_ns_ += took;
          if (wr.progress == wr.total) read_paths().record(ReadPath::direct, wr.total, took);
          return true;
        }
      }
      FrameHeader h{kFrameReadRequest, kFlagLast, 0, 0, wr.total, 0, remote.Data.AddressBits, remote.Handle, 0};
      AwaitingRead awaiting{index};
      awaiting.timed = way_chosen;
      // Withdrawable while every read in flight has a word of its own: those
      // in flight are the last ones sent, whose words follow each other.
      if (awaiting_read_.size() < ring_read_claims_.size() && wr.total > 0) {
        const std::size_t n = ring_read_claims_.size(), at = ring_reads_ % n;
        std::atomic<std::uint64_t>& word = ring_read_claims_[at];
        // Above any number the word held (they are `at` modulo n; 2^24 / n
        // reads of one word before they wrap), so that a stale request (of
        // this connection or of one before on the slot) never names this read.
        const std::uint32_t held = ring_claim_read(word.load(std::memory_order_relaxed));
        awaiting.read = (held - held % std::uint32_t(n) + std::uint32_t(n + at)) % kRingReadNumbers;
        word.store(ring_claim_word(awaiting.read, kClaimOffered, 0), std::memory_order_relaxed);
        h.flags |= kFlagWithdrawable;
        h.imm = awaiting.read;
      }
      if (!send_frame(h, nullptr, 0)) return false;
      if (h.flags & kFlagWithdrawable) {
        ++ring_reads_;
        ++withdrawable_reads_;
        awaiting.withdrawable = true;
      }
      awaiting_read_.push_back(awaiting);
      // The oldest read's clocks run: one behind it waits for its turn first.
      if (awaiting_read_.size() == 1) oldest_read_begins();
      return true;
    }
  }
  // Data frames are out: reliable reception completes on the peer's ack.
  if (attrs_.reliability == VIP_SERVICE_RELIABLE_RECEPTION)
    awaiting_ack_.push_back(index);
  else
    finish(sendq_, wr, send_status_op(d));
  return true;
}

// Inlined into transmit(), its one caller of note: every send of data passes.
[[gnu::always_inline]] inline bool ViImpl::transmit_data(WorkRequest& wr, std::uint8_t type, std::uint64_t raddr, std::uint32_t rhandle) {
  VIP_DESCRIPTOR* d = wr.desc;
  const std::uint64_t max = frame_payload_;
  do {
    const std::uint64_t chunk = std::min(wr.total - wr.progress, max);
    const bool last = wr.progress + chunk == wr.total;
    std::uint8_t flags = last ? kFlagLast : 0;
    if (last && (d->CS.Control & VIP_CONTROL_IMMEDIATE)) flags |= kFlagImmediate;
    iovec iov[kMaxSegments];
    std::size_t n = slice_segments(d, wr.progress, chunk, iov, kMaxSegments);
    FrameHeader h{type,       flags,  tx_message_, std::uint32_t(chunk), wr.total, wr.progress,
                  raddr,      rhandle, d->CS.ImmediateData};
    if (!send_frame(h, iov, n)) return false;
    wr.progress += chunk;
  } while (wr.progress < wr.total);
  ++tx_message_;
  return true;
}

// RDMA through the link's single-copy path; the target region was checked.
// False when the frame that announces an immediate found no room: the data is
// in place by then (wr.progress says so), and the retry only sends the frame.
bool ViImpl::direct_rdma(WorkRequest& wr) {
  VIP_DESCRIPTOR* d = wr.desc;
  const VIP_ADDRESS_SEGMENT& remote = d->DS[0].Remote;
  const bool write = op_of(d) == VIP_CONTROL_OP_RDMAWRITE;
  if (wr.progress < wr.total) {
    iovec local[kMaxSegments];
    std::size_t n = write ? slice_segments(d, 0, wr.total, local, kMaxSegments) : 0;
    iovec far{remote.Data.Address, std::size_t(wr.total)};
    bool ok = write ? link_->direct_write(local, n, &far, 1) : read_direct(wr);
    if (!ok) {
      fail(VIP_ERROR_RDMA_TRANSPORT, "single-copy transfer to the peer failed", &sendq_, &wr,
           VIP_STATUS_TRANSPORT_ERROR | send_status_op(d));
      return true;
    }
    ++(write ? nic_.counters().direct_writes : nic_.counters().direct_reads);
    trace::direct_transfer(*this, write, remote.Data.AddressBits, wr.total, remote.Handle);
    wr.progress = wr.total;
  }
  if (write && (d->CS.Control & VIP_CONTROL_IMMEDIATE)) {
    // This frame only consumes a receive at the target.
    FrameHeader h{kFrameRdmaWrite, kFlagLast | kFlagImmediate | kFlagNoData, 0, 0, wr.total, wr.total,
                  remote.Data.AddressBits, remote.Handle, d->CS.ImmediateData};
    if (!send_frame(h, nullptr, 0)) return false;
  }
  finish(sendq_, wr, send_status_op(d));
  return true;
}

// A single-copy read into wr's segments. Where the link has a claim word, the
// last direct_read_share() percent is offered to the target's engine, which
// writes it into our memory while this end reads the rest: two copies at once.
bool ViImpl::read_direct(WorkRequest& wr) {
  VIP_DESCRIPTOR* d = wr.desc;
  const VIP_ADDRESS_SEGMENT& remote = d->DS[0].Remote;
  std::uint64_t offered = read_claim_ ? wr.total * direct_read_share() / 100 / 4096 * 4096 : 0;
  const std::uint64_t own = wr.total - offered;
  // The read's number: the last one the word saw, plus one. The word lives as
  // long as the VI slot and is never reset, so a stale offer still in the
  // target's ring (of this connection or of one that used the slot before)
  // never names a read offered now.
  const std::uint32_t read = std::uint32_t(read_claim_ ? read_claim_->load(std::memory_order_relaxed) >> 8 : 0) + 1;
  if (offered) {
    read_claim_->store(read_claim_word(read, kClaimOffered), std::memory_order_relaxed);
    iovec theirs[kMaxSegments];
    const std::size_t n = slice_segments(d, own, offered, theirs, kMaxSegments);
    iovec list{theirs, n * sizeof(iovec)};
    FrameHeader h{kFrameReadRequest, kFlagLast | kFlagShared, 0, std::uint32_t(list.iov_len), wr.total, own,
                  remote.Data.AddressBits, remote.Handle, read};
    // No room for the offer: this end copies it all (the number is never seen).
    if (!send_frame(h, &list, 1)) offered = 0;
  }
  bool ok = read_range_direct(wr, 0, own);
  // Settled even after a failure: the target must not write into memory the
  // program gets back with the failed read.
  if (offered && !settle_shared_read(*read_claim_, read) && ok) ok = read_range_direct(wr, own, offered);
  return ok;
}

bool ViImpl::read_range_direct(WorkRequest& wr, std::uint64_t from, std::uint64_t len) {
  VIP_DESCRIPTOR* d = wr.desc;
  iovec local[kMaxSegments];
  iovec far{static_cast<std::byte*>(d->DS[0].Remote.Data.Address) + from, std::size_t(len)};
  return link_->direct_read(local, slice_segments(d, from, len, local, kMaxSegments), &far, 1);
}

// True once the target has written the offered share; false when it is this
// end's to copy (taken back before the target claimed it, or the target
// failed). A target that claimed it is copying into our memory, which cannot
// be stopped: wait for it while the target's process lives (a target
// stopped mid-copy holds this end too). Past the time a share takes when both
// ends run, the wait yields: the target may need this core to finish.
bool ViImpl::settle_shared_read(std::atomic<std::uint64_t>& claim, std::uint32_t read) {
  std::uint64_t word = read_claim_word(read, kClaimOffered);
  if (claim.compare_exchange_strong(word, read_claim_word(read, kClaimTaken), std::memory_order_acquire))
    return false;
  for (std::uint32_t spins = 1;; ++spins) {
    if (word == read_claim_word(read, kClaimDone)) return true;
    if (word != read_claim_word(read, kClaimWriting)) return false;
    if (spins % 1024 == 0 && !link_->peer_alive()) return false;  // its copy ended with it
    if (spins < 2048) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
    word = claim.load(std::memory_order_acquire);
  }
}

bool ViImpl::transmit_read_responses() {
  // A withdrawable read goes in parts of whole commit units (the last aside).
  const std::uint64_t max = frame_payload_, withdrawable_max = frame_payload_ / kCommitUnit * kCommitUnit;
  while (!read_responses_.empty()) {
    ReadResponse& r = read_responses_.front();
    if (r.refused) {
      if (r.withdrawable) {
        if (!link_->has_room_for(0)) return false;
        // A reader that took the read back copies the rest (and checks the region itself).
        if (!commit_ring_read(r, r.total)) {
          read_responses_.pop_front();
          continue;
        }
      }
      FrameHeader h{kFrameReadResponse, kFlagLast | kFlagError, 0, 0, 0, 0, 0, 0, r.refused};
      if (!send_frame(h, nullptr, 0)) return false;
      read_responses_.pop_front();
      continue;
    }
    bool taken_back = false;
    do {
      const std::uint64_t chunk = std::min(r.total - r.sent, r.withdrawable ? withdrawable_max : max);
      const bool last = r.sent + chunk == r.total;
      // Checked again for every chunk: the region may have been deregistered
      // (and its memory freed) since the request arrived.
      if (!nic_.regions().covers(r.rhandle, r.raddr + r.sent, chunk, attrs_.ptag, RegionTable::kRdmaRead)) {
        r.refused = VIP_STATUS_RDMA_PROT_ERROR;
        break;
      }
      if (r.withdrawable) {
        if (!link_->has_room_for(chunk)) return false;
        if (!commit_ring_read(r, r.sent + chunk)) {
          taken_back = true;
          break;
        }
      }
      iovec iov{reinterpret_cast<void*>(r.raddr + r.sent), std::size_t(chunk)};
      FrameHeader h{kFrameReadResponse, std::uint8_t(last ? kFlagLast : 0), 0, std::uint32_t(chunk), r.total, r.sent,
                    0, 0, 0};
      if (!send_frame(h, &iov, 1)) return false;
      r.sent += chunk;
    } while (r.sent < r.total);
    if (r.refused && !taken_back) continue;  // sent as a refusal on the next pass
    read_responses_.pop_front();
  }
  return true;
}

// ---- receiving ----

ViImpl::NextFrame ViImpl::next_frame(std::span<const std::byte>& message) {
  const FrameHeader* h;
  const std::byte* payload;
  if (holding_ || state_ != ViState::connected || !link_->peek(h, payload)) return NextFrame::none;
  if (!in_place_ || !whole_message(*h)) {
    receive_and_transmit(h, payload);
    return NextFrame::other;
  }
  ++nic_.counters().frames_received;
  ++counters_.frames_received;
  trace::frame_received(*this, *h, payload);
  holding_ = true;
  message = {payload, h->length};
  return NextFrame::message;
}

void ViImpl::release_frame() {
  holding_ = false;
  if (link_) link_->pop();
  held_link_.reset();
}

WorkRequest* ViImpl::take_receive() {
  if (fill_next_ == recvq_.tail()) return nullptr;
  return &recvq_.at(fill_next_++);
}

std::size_t ViImpl::payload_destination(const FrameHeader& h, iovec* out, std::size_t max_out) {
  if (state_ != ViState::connected || h.length == 0 || !frame_well_formed(h, frame_payload_)) return 0;
  if (h.type == kFrameRdmaWrite) {
    const std::uint64_t addr = h.raddr + h.offset;
    if ((h.flags & kFlagNoData) || max_out == 0 || !attrs_.rdma_write || addr < h.raddr ||
        !nic_.regions().covers(h.rhandle, addr, h.length, attrs_.ptag, RegionTable::kRdmaWrite))
      return 0;
    out[0] = iovec{reinterpret_cast<void*>(addr), h.length};
    return 1;
  }
  const WorkRequest* wr = nullptr;
  if (h.type == kFrameReadResponse) {
    // The oldest read's local segments, as complete_read would fill them.
    if ((h.flags & kFlagError) || awaiting_read_.empty()) return 0;
    wr = &sendq_.at(awaiting_read_.front().index);
    if (h.total != wr->total) return 0;
  } else if (h.type != kFrameSend) {
    return 0;
  } else if (in_place_ && whole_message(h)) {
    return 0;  // a message consumed in place is read from the link's own buffer: it fills no receive
  } else if (h.offset == 0) {
    // The receive handle_frame would fill, as it would choose it.
    if (receiving_ && attrs_.reliability != VIP_SERVICE_UNRELIABLE) return 0;
    wr = receiving_ ? receiving_ : fill_next_ != recvq_.tail() ? &recvq_.at(fill_next_) : nullptr;
    if (!wr || h.total > wr->total) return 0;
  } else {
    if (discarding_ || !receiving_ || h.message != rx_message_ || h.offset != receiving_->progress) return 0;
    wr = receiving_;
  }
  const std::size_t n = slice_segments(wr->desc, h.offset, h.length, out, max_out);
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < n; ++i) covered += out[i].iov_len;
  return covered == h.length ? n : 0;
}

// A message's last frame is in: its receive completes, with the immediate data it carried.
inline void ViImpl::finish_receive(WorkRequest& wr, const FrameHeader& h) {
  std::uint32_t status = VIP_STATUS_OP_RECEIVE;
  if (h.flags & kFlagImmediate) {
    wr.desc->CS.ImmediateData = h.imm;
    status |= VIP_STATUS_IMMEDIATE;
  }
  finish(recvq_, wr, status);
}

// The checks are handle_frame's, for this frame: well formed (offset 0,
// length = total, within a frame's payload), no message half received, a
// receive posted and large enough. Not a direct send's (it owes an ack) nor
// one consumed in place (whole_message: next_frame() hands it over).
inline bool ViImpl::receive_whole_message(const FrameHeader& h, const std::byte* payload) {
  if (h.type != kFrameSend || (h.flags & ~kFlagImmediate) != kFlagLast || h.offset != 0 || h.length != h.total ||
      h.length > frame_payload_ || payload == nullptr || receiving_ != nullptr || fill_next_ == recvq_.tail())
    return false;
  WorkRequest& wr = recvq_.at(fill_next_);
  if (h.total > wr.total) return false;
  ++fill_next_;
  discarding_ = false;
  rx_message_ = h.message;
  scatter(wr.desc, 0, payload, h.length);
  wr.progress = h.length;
  wr.length = h.length;
  if (attrs_.reliability == VIP_SERVICE_RELIABLE_RECEPTION) ++acks_owed_;
  finish_receive(wr, h);
  return true;
}

// Handles one incoming frame; false if it broke the VI. A null payload of a
// send, RDMA write or RDMA read response frame is one the link already read
// into the memory payload_destination() named.
bool ViImpl::handle_frame(const FrameHeader& h, const std::byte* payload) {
  if (!frame_well_formed(h, frame_payload_)) {
    fail(VIP_ERROR_CATASTROPHIC, "malformed frame from the peer", nullptr, nullptr, 0);
    return false;
  }
  const bool reliable = attrs_.reliability != VIP_SERVICE_UNRELIABLE;
  const bool last = h.flags & kFlagLast;
  switch (h.type) {
    case kFrameSend:
    case kFrameDirectSend: {
      // The sender of a direct send keeps its buffer until we say we are done
      // with it, whether the message is delivered or dropped.
      if (h.type == kFrameDirectSend) ++acks_owed_;
      if (h.offset == 0) {
        discarding_ = false;
        if (receiving_ && reliable) {
          fail(VIP_ERROR_CATASTROPHIC, "a new message began before the previous one was complete");
          return false;
        }
        // On an unreliable VI a message whose end never came is dropped, and
        // its receive descriptor takes the new message instead.
        if (!receiving_) receiving_ = take_receive();
        if (!receiving_) {
          if (reliable) {
            fail(VIP_ERROR_RECVQ_EMPTY, "a message arrived with no receive descriptor posted");
            return false;
          }
          ++nic_.counters().dropped_no_receive;
          discarding_ = !last;
          return true;
        }
        receiving_->progress = 0;
        rx_message_ = h.message;
        if (h.total > receiving_->total) {
          WorkRequest* wr = receiving_;
          receiving_ = nullptr;
          if (reliable) {
            fail(VIP_ERROR_RECVQ_EMPTY, "a message is longer than the posted receive descriptor", &recvq_, wr,
                 VIP_STATUS_LENGTH_ERROR | VIP_STATUS_OP_RECEIVE);
            return false;
          }
          wr->length = 0;
          finish(recvq_, *wr, VIP_STATUS_LENGTH_ERROR | VIP_STATUS_OP_RECEIVE);
          discarding_ = !last;
          return true;
        }
      } else if (discarding_) {
        if (last) discarding_ = false;
        return true;
      } else if (!receiving_ || h.message != rx_message_ || h.offset != receiving_->progress) {
        if (reliable) {
          fail(VIP_ERROR_CATASTROPHIC, "a message fragment arrived out of sequence");
          return false;
        }
        // Unreliable: a fragment went missing. Drop the message; its receive
        // descriptor stays taken and receives the next message instead.
        discarding_ = !last;
        return true;
      }
      return deliver(*receiving_, h, payload);
    }
    case kFrameRdmaWrite: {
      if (!(h.flags & kFlagNoData) && h.length > 0) {
        const std::uint64_t addr = h.raddr + h.offset;
        if (!attrs_.rdma_write || addr < h.raddr ||
            !nic_.regions().covers(h.rhandle, addr, h.length, attrs_.ptag, RegionTable::kRdmaWrite)) {
          fail(VIP_ERROR_RDMAW_PROT, "an RDMA write from the peer targets " + describe_range(addr, h.length, h.rhandle) +
                                         ", not registered for RDMA write here");
          return false;
        }
        if (payload) copy_memory(reinterpret_cast<void*>(addr), payload, h.length);
      }
      if (!last) return true;
      if (h.flags & kFlagImmediate) {
        WorkRequest* wr = take_receive();
        if (!wr) {
          if (reliable) {
            fail(VIP_ERROR_RECVQ_EMPTY, "an RDMA write with immediate data arrived with no receive descriptor posted");
            return false;
          }
          ++nic_.counters().dropped_no_receive;
          return true;
        }
        wr->desc->CS.ImmediateData = h.imm;
        wr->length = std::uint32_t(h.total);
        finish(recvq_, *wr, VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE);
      }
      if (!(h.flags & kFlagNoData) && attrs_.reliability == VIP_SERVICE_RELIABLE_RECEPTION) ++acks_owed_;
      return true;
    }
    case kFrameReadRequest:
      if (h.flags & kFlagShared)
        serve_shared_read(h, payload);
      else if (!(h.flags & kFlagWithdrawable))
        serve_read_request(h, false);
      else if (claim_ring_read(h.imm))
        serve_read_request(h, true);
      return true;
    case kFrameReadResponse:
      if (awaiting_read_.empty()) {
        fail(VIP_ERROR_CATASTROPHIC, "an RDMA read response arrived with no read outstanding");
        return false;
      }
      complete_read(h, payload);
      return link_ != nullptr;
    case kFrameAck:
      if (h.total > awaiting_ack_.size()) {
        fail(VIP_ERROR_CATASTROPHIC, "the peer acknowledged more messages than were sent");
        return false;
      }
      complete_acked(std::uint32_t(h.total));
      return true;
  }
  return true;
}

// Out of line: its two lists of slices would take the stack of every frame's handling.
bool ViImpl::pull_direct_send(WorkRequest& wr, const FrameHeader& h, const std::byte* payload) {
  // The payload is the sender's iovec list: pull the bytes in one copy.
  if (h.length % sizeof(iovec) != 0) {
    fail(VIP_ERROR_CATASTROPHIC, "malformed direct-send frame");
    return false;
  }
  iovec remote[kMaxSegments];
  std::size_t nremote = std::min<std::size_t>(h.length / sizeof(iovec), kMaxSegments);
  std::memcpy(remote, payload, nremote * sizeof(iovec));
  iovec local[kMaxSegments];
  std::size_t nlocal = slice_segments(wr.desc, 0, h.total, local, kMaxSegments);
  if (!link_->direct_read(local, nlocal, remote, nremote)) {
    receiving_ = nullptr;
    fail(VIP_ERROR_CATASTROPHIC, "single-copy receive from the peer failed", &recvq_, &wr,
         VIP_STATUS_TRANSPORT_ERROR | VIP_STATUS_OP_RECEIVE);
    return false;
  }
  ++nic_.counters().direct_reads;
  return true;
}

inline bool ViImpl::deliver(WorkRequest& wr, const FrameHeader& h, const std::byte* payload) {
  if (h.type == kFrameDirectSend) {
    if (!pull_direct_send(wr, h, payload)) return false;
  } else {
    if (payload) scatter(wr.desc, h.offset, payload, h.length);
    wr.progress += h.length;
    if (attrs_.reliability == VIP_SERVICE_RELIABLE_RECEPTION && (h.flags & kFlagLast)) ++acks_owed_;
  }
  if (!(h.flags & kFlagLast)) return true;
  receiving_ = nullptr;
  wr.length = std::uint32_t(h.total);
  finish_receive(wr, h);
  return true;
}

void ViImpl::serve_read_request(const FrameHeader& h, bool withdrawable) {
  const bool allowed = attrs_.rdma_read && h.raddr + h.total >= h.raddr &&
                       nic_.regions().covers(h.rhandle, h.raddr, h.total, attrs_.ptag, RegionTable::kRdmaRead);
  // A read its reader chose to make through the rings: the chooser hears that reads of its size go both
  // ways, if this end reads them too.
  if (direct_capable_ && read_paths().chooses(h.total)) read_paths().served(h.total);
  read_responses_.push_back(ReadResponse{h.raddr, h.total, h.rhandle,
                                         allowed ? 0u : std::uint32_t(VIP_STATUS_RDMA_PROT_ERROR), 0, withdrawable,
                                         h.imm});
}

// The reader's offer of [offset, total) of a single-copy read. Taken only if
// this end may serve the read at all; otherwise, or when the reader took it
// back first, nothing happens and the reader copies it.
void ViImpl::serve_shared_read(const FrameHeader& h, const std::byte* payload) {
  std::atomic<std::uint64_t>* claim = direct_capable_ ? link_->peer_read_claim() : nullptr;
  const std::uint64_t addr = h.raddr + h.offset, len = h.total - h.offset;
  if (!claim || h.length % sizeof(iovec) != 0 || h.length / sizeof(iovec) > kMaxSegments || h.offset >= h.total ||
      addr < h.raddr || addr + len < addr || !attrs_.rdma_read ||
      !nic_.regions().covers(h.rhandle, addr, len, attrs_.ptag, RegionTable::kRdmaRead))
    return;
  iovec reader[kMaxSegments];
  std::memcpy(reader, payload, h.length);
  std::uint64_t offered = read_claim_word(h.imm, kClaimOffered);
  if (!claim->compare_exchange_strong(offered, read_claim_word(h.imm, kClaimWriting), std::memory_order_relaxed))
    return;
  iovec mine{reinterpret_cast<void*>(addr), std::size_t(len)};
  // direct_write refuses a list whose length is not the share's.
  const bool ok = link_->direct_write(&mine, 1, reader, h.length / sizeof(iovec));
  claim->store(read_claim_word(h.imm, ok ? kClaimDone : kClaimFailed), std::memory_order_release);
  if (ok) {
    ++nic_.counters().shared_read_writes;
    // As an RDMA write's record: the memory written, the peer's (its handle not known here).
    trace::direct_transfer(*this, true, reinterpret_cast<std::uintptr_t>(reader[0].iov_base), len, 0);
  }
}

bool ViImpl::claim_ring_read(std::uint32_t read) {
  const std::span<std::atomic<std::uint64_t>> words = link_->peer_ring_read_claims();
  if (words.empty()) return false;
  std::uint64_t offered = ring_claim_word(read, kClaimOffered, 0);
  return words[read % words.size()].compare_exchange_strong(offered, ring_claim_word(read, kClaimServing, 0),
                                                            std::memory_order_relaxed);
}

bool ViImpl::commit_ring_read(ReadResponse& r, std::uint64_t upto) {
  if (upto <= r.committed) return true;  // committed when its frame found no room: it must go
  const std::span<std::atomic<std::uint64_t>> words = link_->peer_ring_read_claims();
  if (words.empty()) return false;
  std::uint64_t serving = ring_claim_word(r.read, kClaimServing, r.committed);
  if (!words[r.read % words.size()].compare_exchange_strong(serving, ring_claim_word(r.read, kClaimServing, upto),
                                                            std::memory_order_relaxed))
    return false;
  r.committed = upto;
  return true;
}

// Only the oldest read can be taken back: the target serves requests in
// order, so the parts on their way through the rings are the oldest read's,
// then the next one's; a read taken back stays the oldest until the parts
// its target committed have come. Its clock starts when it becomes the
// oldest and runs again from every part that arrives, for kServingPatience
// times as long: a target that has begun to send it and pauses is most often
// busy in its engine for a moment (a burst to receive, a copy of its own),
// and the single copy of the rest runs at about half the rings' speed. A
// clock that started at the post instead took back reads queued behind
// others while their target served them (2 ranks, 4 MiB streaming: 18 GB/s
// against 25 through the rings alone).
bool ViImpl::take_over_stalled_reads() {
  bool moved = false;
  std::uint64_t now = 0;
  while (!awaiting_read_.empty() && awaiting_read_.front().withdrawable) {
    AwaitingRead& oldest = awaiting_read_.front();
    if (now < oldest.take_over_at) {
      now = now_ns();  // read once for the reads taken over together
      if (now < oldest.take_over_at) break;
    }
    WorkRequest& wr = sendq_.at(oldest.index);
    // A target that took frames of ours meanwhile is at work in its library
    // (receiving what this end sends it, both ways at once): look again later.
    if (const std::uint64_t took = link_->frames_taken_by_peer(); took != oldest.peer_took) {
      oldest.peer_took = took;
      oldest.take_over_at = now + takeover_wait(wr.total);
      break;
    }
    std::atomic<std::uint64_t>& word = ring_read_claims_[oldest.read % ring_read_claims_.size()];
    std::uint64_t seen = word.load(std::memory_order_relaxed);
    std::uint64_t committed = wr.total;  // until the word says less: all of it comes through the rings
    bool taken = false;
    for (;;) {
      const ReadClaimState state = ring_claim_state(seen);
      if (ring_claim_read(seen) != oldest.read || (state != kClaimOffered && state != kClaimServing)) break;
      committed = std::min(ring_claim_committed(seen), wr.total);
      if (committed == wr.total || committed > oldest.received) break;  // parts on their way: the target works
      taken = word.compare_exchange_weak(seen, ring_claim_word(oldest.read, kClaimTaken, committed),
                                         std::memory_order_relaxed);
      if (taken) break;
    }
    if (!taken && committed < wr.total) {
      oldest.take_over_at = now + takeover_wait(wr.total);  // look again then
      break;
    }
    oldest.withdrawable = false;
    --withdrawable_reads_;
    if (!taken) break;
    ++nic_.counters().reads_taken_over;
    const VIP_ADDRESS_SEGMENT& remote = wr.desc->DS[0].Remote;
    // The target checks the region before every part it sends; the rest is checked here.
    if (std::uint32_t err = link_->check_peer_region(remote.Data.AddressBits + committed, wr.total - committed,
                                                     remote.Handle, false)) {
      fail(VIP_ERROR_RDMAR_PROT,
           "RDMA read from " + describe_range(remote.Data.AddressBits, wr.total, remote.Handle) +
               ", no longer in the target's registered, read-enabled memory",
           &sendq_, &wr, err | VIP_STATUS_OP_RDMA_READ);
      return true;
    }
    if (!read_range_direct(wr, committed, wr.total - committed)) {
      fail(VIP_ERROR_RDMA_TRANSPORT, "single-copy transfer from the peer failed", &sendq_, &wr,
           VIP_STATUS_TRANSPORT_ERROR | VIP_STATUS_OP_RDMA_READ);
      return true;
    }
    ++nic_.counters().direct_reads;
    trace::direct_transfer(*this, false, remote.Data.AddressBits + committed, wr.total - committed, remote.Handle);
    moved = true;
    oldest.through_rings = committed;
    if (oldest.received < committed) break;  // the rest of the committed part is still in the rings
    retire_oldest_read(wr);
  }
  return moved;
}

// The read now first in line starts its clocks: the time it takes, for the
// choice of the way reads go (only now: before, it waited for those ahead),
// and the time its target has to take it up.
void ViImpl::oldest_read_begins() {
  if (awaiting_read_.empty()) return;
  AwaitingRead& oldest = awaiting_read_.front();
  if (!oldest.timed && !oldest.withdrawable) return;
  const std::uint64_t now = now_ns();
  oldest.began = now;
  oldest.direct_read_ns = direct_read_ns_;
  if (!oldest.withdrawable) return;
  oldest.take_over_at = now + takeover_wait(sendq_.at(oldest.index).total);
  oldest.peer_took = link_->frames_taken_by_peer();
}

// The oldest read through the rings has all its bytes (some may have come
// by single copy, taken back: still the time the rings' way took). Its time
// leaves out the single-copy reads this end made meanwhile, which held up
// its look at the rings: else a probe of the rings among reads that go by
// single copy would take on their time and keep the choice where it is.
void ViImpl::retire_oldest_read(WorkRequest& wr) {
  const AwaitingRead& oldest = awaiting_read_.front();
  if (oldest.timed) {
    const std::uint64_t elsewhere = direct_read_ns_ - oldest.direct_read_ns, took = now_ns() - oldest.began;
    read_paths().record(ReadPath::rings, wr.total, took > elsewhere ? took - elsewhere : 1);
  }
  if (oldest.withdrawable) --withdrawable_reads_;  // the target claimed it, unseen
  awaiting_read_.pop_front();
  finish(sendq_, wr, VIP_STATUS_OP_RDMA_READ);
  oldest_read_begins();
}

// A small read is taken back sooner (read_takeover_scales): waiting longer
// for its target than the rings would save over the single copy of it (which
// runs at a quarter to half their speed here: about 1 ns saved per 14 bytes)
// costs more than a wrong guess that the target is away (2 ranks, the sender
// computing 300 us: 64 KiB received in 14.1 us against 29.2, Open MPI 6.0;
// streaming 32-256 KiB unchanged).
std::uint64_t ViImpl::takeover_wait(std::uint64_t bytes) const {
  constexpr std::uint64_t kBytesPerNsSaved = 14, kShortest = 2000;
  if (!read_takeover_scales()) return read_takeover_ns_;
  return std::min(read_takeover_ns_, std::max(kShortest, bytes / kBytesPerNsSaved));
}

void ViImpl::complete_read(const FrameHeader& h, const std::byte* payload) {
  WorkRequest& wr = sendq_.at(awaiting_read_.front().index);
  if (h.flags & kFlagError) {
    const VIP_ADDRESS_SEGMENT& remote = wr.desc->DS[0].Remote;
    fail(VIP_ERROR_RDMAR_PROT,
         "RDMA read from " + describe_range(remote.Data.AddressBits, wr.total, remote.Handle) +
             " refused by the target: memory not registered for RDMA read there",
         &sendq_, &wr, (h.imm & VIP_STATUS_ERROR_MASK) | VIP_STATUS_OP_RDMA_READ);
    return;
  }
  if (h.total != wr.total) {
    fail(VIP_ERROR_CATASTROPHIC, "RDMA read response does not match the request", &sendq_, &wr,
         VIP_STATUS_TRANSPORT_ERROR | VIP_STATUS_OP_RDMA_READ);
    return;
  }
  if (payload) scatter(wr.desc, h.offset, payload, h.length);  // else the link placed it (payload_destination)
  AwaitingRead& oldest = awaiting_read_.front();
  oldest.received += h.length;
  if (!(h.flags & kFlagLast) && oldest.received < oldest.through_rings) {
    if (oldest.withdrawable) oldest.take_over_at = now_ns() + kServingPatience * read_takeover_ns_;
    return;
  }
  retire_oldest_read(wr);
}

void ViImpl::complete_acked(std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i) {
    WorkRequest& wr = sendq_.at(awaiting_ack_.front());
    awaiting_ack_.pop_front();
    wr.status = send_status_op(wr.desc);
    wr.finished = true;
  }
  publish<false>();
}

// ---- the public Vi: each call is the engine's ViImpl's ----

Nic& Vi::nic() const { return impl(*this).nic(); }
ViState Vi::state() const { return impl(*this).state(); }
const ViAttributes& Vi::attributes() const { return impl(*this).attributes(); }
Result Vi::set_attributes(const ViAttributes& attrs) { return impl(*this).set_attributes(attrs); }
const ViAttributes& Vi::remote_attributes() const { return impl(*this).remote_attributes(); }
const char* Vi::transport() const { return impl(*this).transport(); }
const ViCounters& Vi::counters() const { return impl(*this).counters(); }
bool Vi::send_queue_empty() const { return impl(*this).send_queue_empty(); }
bool Vi::recv_queue_empty() const { return impl(*this).recv_queue_empty(); }
Cq* Vi::send_cq() const { return impl(*this).send_cq(); }
Cq* Vi::recv_cq() const { return impl(*this).recv_cq(); }
Result Vi::post_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle) { return impl(*this).post_send(desc, desc_handle); }
Result Vi::post_recv(VIP_DESCRIPTOR* desc, MemHandle desc_handle) { return impl(*this).post_recv(desc, desc_handle); }
Result Vi::send_inline(const iovec* iov, std::size_t iovcnt) { return impl(*this).send_inline(iov, iovcnt); }
std::size_t Vi::max_inline_send() const { return impl(*this).max_inline_send(); }
Result Vi::send_done(VIP_DESCRIPTOR*& out) { return impl(*this).send_done(out); }
Result Vi::recv_done(VIP_DESCRIPTOR*& out) { return impl(*this).recv_done(out); }
Result Vi::send_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out) { return impl(*this).send_wait(timeout_ms, out); }
Result Vi::recv_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out) { return impl(*this).recv_wait(timeout_ms, out); }
void Vi::set_send_notify(DescriptorNotify handler) { impl(*this).set_send_notify(std::move(handler)); }
void Vi::set_recv_notify(DescriptorNotify handler) { impl(*this).set_recv_notify(std::move(handler)); }
Result Vi::connect_request(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms) {
  return impl(*this).connect_request(local, remote, timeout_ms);
}
Result Vi::connect_request_start(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms) {
  return impl(*this).start_connect(local, remote, timeout_ms, true);
}
Result Vi::connect_request_done() { return impl(*this).poll_connect(); }
Result Vi::connect_peer_request(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms) {
  return impl(*this).start_connect(local, remote, timeout_ms, false);
}
Result Vi::connect_peer_done() { return impl(*this).poll_connect(); }
Result Vi::connect_peer_wait() { return impl(*this).wait_connected(); }
Result Vi::disconnect() { return impl(*this).disconnect(); }

}  // namespace via
