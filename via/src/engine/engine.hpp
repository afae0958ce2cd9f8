// The engine's own view of its objects: the state behind the public Vi, Cq,
// Nic and ConnRequest of via/via.hpp, and what the NIC and the providers call
// on them. Internal to libvia; nothing above via/ includes it.
//
// Each public class has exactly one implementation, derived from it, so the
// public object *is* the implementation object: the public methods reach the
// state with a static_cast at no cost (no pointer to follow), and the state
// can change without changing the library's interface.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/work_queue.hpp"
#include "engine/yield_phase.hpp"
#include "via/via.hpp"

namespace via {

// How long a wait spins before it yields (then sleeps): configured_us
// (VIASTACK_SPIN_US) when set; else the declared default, or nothing when
// this host holds more of the job's ranks than the CPUs the job may use here,
// since a spinning waiter would take the core from the rank it waits for.
std::uint64_t wait_spin_ns(std::optional<std::int64_t> configured_us, int local_ranks, int job_cpus);
// How long it then keeps polling, yielding the core between polls, before it
// sleeps: configured_us (VIASTACK_YIELD_US) when set; else the declared
// default, or kOversubscribedYieldUs when this host holds more of the job's
// ranks than it has CPUs for them. There the ranks that share a core take
// turns at every yield, a few microseconds each (a context switch and a
// poll): a rank with nothing to do for a while then sleeps, and leaves its
// core to the ranks that have work, rather than poll between each of their
// polls. (4 ranks on 2 cores, two of them waiting in a broadcast while the
// other two stream 8-byte messages both ways: 0.65x Open MPI's rate with
// 1000 us, 0.9x with 100.)
inline constexpr std::uint64_t kOversubscribedYieldUs = 100;
std::uint64_t wait_yield_ns(std::optional<std::int64_t> configured_us, int local_ranks, int job_cpus);
// The longest the yield phase grows to (yield_phase.hpp): configured_us when
// set, else VIASTACK_YIELD_US's declared default.
std::uint64_t wait_yield_longest_ns(std::optional<std::int64_t> configured_us);
// How long an RDMA read served through the rings waits for its target's
// engine to take it up before the reader copies it by single copy:
// configured_us (VIASTACK_READ_TAKEOVER_US) when set; else the declared
// default, or kOversubscribedReadTakeoverUs where the host's ranks outnumber
// the job's CPUs. There a target that has not answered is mostly waiting for
// a core, which the waiting reader soon yields to it, and the rings' two
// pipelined copies beat the single copy (4 ranks on 2 cores, 1 MiB
// ialltoallv: 768 us a call taking over after 20 us, 480-540 after 100-500,
// 500 never taking over, Open MPI 715).
inline constexpr std::uint64_t kOversubscribedReadTakeoverUs = 500;
// Where waits do not spin, a program's test (MPI_Test, MPI_Iprobe) that
// finds nothing yields the core once no frame has arrived for this long, as
// seen by its tests (Nic::yield_when_idle), whether the program tests in a
// tight loop or works between its tests: it waits for something that has not
// come, from ranks that may need the core. Not at once, as a wait does and as
// Open MPI's tests do: a program that tests between pieces of its own work
// lost its core at every test (4 ranks on 2 cores, hpcc: yielding at every
// empty test made MPIRandomAccess 17 times slower, as slow as Open MPI's, and
// a ping-pong by MPI_Test loops 5-10 times; after 1 ms, 1.3 and 1.0 times),
// while HPL, whose ranks probe for a panel that a rank sharing their core is
// yet to send, ran as fast after 1 ms as at once (0.58-0.86 x Open MPI's
// speed before, 1.0-1.2 after). Counting only tests close together (100 us)
// made HPL slower again (0.99 x Open MPI's time against 0.81, 5 rounds).
inline constexpr std::uint64_t kIdleTestsBeforeYieldNs = 1'000'000;
std::uint64_t read_takeover_wait_ns(std::optional<std::int64_t> configured_us, int local_ranks, int job_cpus);

class Provider;
class Link;
struct RegionTable;
struct FaultPlan;
class FaultInjector;
struct FrameHeader;
class NicImpl;
class ViImpl;

// A connection request as a provider hands it to the NIC.
struct ConnRequestImpl final : ConnRequest {
  std::uint64_t provider_cookie = 0;  // the provider's name for the request
};

class CqImpl final : public Cq {
 public:
  CqImpl(NicImpl& nic, std::size_t capacity) : nic_(nic), capacity_(capacity) {}
  NicImpl& nic() const { return nic_; }
  Result done(Entry& out);
  Result wait(std::uint32_t timeout_ms, Entry& out);
  Result resize(std::size_t capacity);
  void set_notify(std::function<void(const Entry&)> handler) { notify_ = std::move(handler); }
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }

  // A VI's queue completed a descriptor.
  void push(const Entry& entry);
  // Drops the entries of a VI that is being destroyed.
  void forget(const Vi* vi);

 private:
  NicImpl& nic_;
  std::size_t capacity_;
  std::deque<Entry> entries_;
  std::function<void(const Entry&)> notify_;
  bool overflow_reported_ = false;
};

class ViImpl final : public Vi {
 public:
  ViImpl(NicImpl& nic, const ViAttributes& attrs, CqImpl* send_cq, CqImpl* recv_cq, std::size_t queue_depth);
  ~ViImpl();

  // What the public Vi offers (via.hpp describes it).
  NicImpl& nic() const { return nic_; }
  ViState state() const { return state_; }
  const ViAttributes& attributes() const { return attrs_; }
  Result set_attributes(const ViAttributes& attrs);
  const ViAttributes& remote_attributes() const { return remote_attrs_; }
  const char* transport() const;
  const ViCounters& counters() const { return counters_; }
  bool send_queue_empty() const { return sendq_.empty(); }
  bool recv_queue_empty() const { return recvq_.empty(); }
  CqImpl* send_cq() const { return send_cq_; }
  CqImpl* recv_cq() const { return recv_cq_; }
  Result post_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  Result post_recv(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  // Posts again a receive descriptor that post_recv accepted before, as it
  // was then: the mesh's re-post of its own descriptors, in memory it keeps
  // registered with this VI's tag for as long as the VI lives. post_recv's
  // checks of the descriptor and its memory are not made again; neither VIPL
  // nor the public Vi reaches this, so every descriptor a program posts is
  // still checked.
  Result repost_recv(VIP_DESCRIPTOR* desc);
  // repost_recv for descs[0..n) in one call: the mesh re-posts the buffers
  // it handled in batches. Returns how many were posted, in order (fewer
  // only when the queue is full).
  std::size_t repost_recvs(VIP_DESCRIPTOR* const* descs, std::size_t n);
  // The n oldest receives, whose completion the caller has seen, leave the
  // queue: recv_done n times, without looking for more (at most those published).
  void retire_recvs(std::size_t n) { recvq_.pop_done(n); }
  Result send_inline(const iovec* iov, std::size_t iovcnt);
  // The same with the pieces' total length given (the mesh knows it): no
  // loop over the pieces to add it up.
  Result send_inline(const iovec* iov, std::size_t iovcnt, std::uint64_t len);
  std::size_t max_inline_send() const;
  Result send_done(VIP_DESCRIPTOR*& out);
  Result recv_done(VIP_DESCRIPTOR*& out);
  Result send_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out) { return wait_queue(sendq_, timeout_ms, out); }
  Result recv_wait(std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out) { return wait_queue(recvq_, timeout_ms, out); }
  void set_send_notify(DescriptorNotify handler) { send_notify_ = std::move(handler); }
  void set_recv_notify(DescriptorNotify handler) { recv_notify_ = std::move(handler); }
  Result connect_request(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms);
  Result start_connect(const NetAddress& local, const NetAddress& remote, std::uint32_t timeout_ms, bool client);
  // One step of a pending connect request (connect_request_done, connect_peer_done).
  Result poll_connect();
  Result wait_connected();
  Result disconnect();

  // ---- used by the NIC and providers ----
  // Called by the provider once the connection is established.
  void attach(std::unique_ptr<Link> link, const ViAttributes& remote_attrs);
  bool has_link() const { return link_ != nullptr; }
  // Closes the link (the NIC going away); the VI is not used afterwards.
  void close_link();
  // Moves frames in and out; returns true if anything happened. Defined in
  // nic.cpp, inline in the NIC's loop: most polls find nothing to do, and
  // should cost no more than a look at the link.
  bool progress();
  // When progress() next takes a read back from a silent target (now_ns), or
  // UINT64_MAX: a wait sleeps no longer than that.
  std::uint64_t next_takeover() const {
    return withdrawable_reads_ && awaiting_read_.front().withdrawable ? awaiting_read_.front().take_over_at : UINT64_MAX;
  }
  // Peer death / close noticed by the NIC's slow path.
  void check_link();
  // Where the payload of data frame h, the next frame this VI is to handle,
  // would land if it were handled now: the slices of the receive it fills or
  // the RDMA write's target, after the checks handle_frame makes. Nothing (0)
  // when that is not known yet (no receive posted) or the frame would not be
  // placed (a check fails: handle_frame then decides as for any frame), or
  // when more than max_out slices would be needed. A link that reads the
  // payload there itself asks before every read, and hands the frame over
  // with a null payload once it is all there.
  std::size_t payload_destination(const FrameHeader& h, iovec* out, std::size_t max_out);

  // One-frame messages consumed in place (the mesh's option): with it on, a
  // frame that is a whole plain send stays in the link, where next_frame()
  // hands it over, instead of being copied into a receive descriptor. Only
  // for reliable delivery, whose peer never sends without a receive posted.
  void set_in_place(bool on) { in_place_ = on && attrs_.reliability == VIP_SERVICE_RELIABLE_DELIVERY; }
  enum class NextFrame { none, message, other };
  // none: no frame waits (or one is held); message: the next frame is a whole
  // message, `message` its bytes, held in the link until release_frame()
  // (meanwhile this VI receives nothing more: a nested poll skips it);
  // other: frames of another kind were handled the usual way (a receive may
  // have completed: the caller looks at its descriptors before asking again).
  NextFrame next_frame(std::span<const std::byte>& message);
  void release_frame();
  // A frame next_frame() handed over is held (not released yet).
  bool holding() const { return holding_; }
  std::uint32_t provider_slot = 0;  // the provider's id for this VI
  // Region `handle` was deregistered or its attributes changed: the post
  // checks must look it up again.
  void forget_region(MemHandle handle);

 private:
  struct ReadResponse {
    std::uint64_t raddr;
    std::uint64_t total;
    MemHandle rhandle;
    std::uint32_t refused = 0;  // status bits when the target refuses the read
    std::uint64_t sent = 0;
    // A withdrawable read (kFlagWithdrawable) this end claimed: each part is
    // committed in its word before it goes (commit_ring_read).
    bool withdrawable = false;
    std::uint32_t read = 0;
    std::uint64_t committed = 0;  // sent, or on its way (a commit whose frame found no room after all)
  };

  // progress() once it found something to do: the frame h (if not null)
  // and those behind it, then what waits to be sent.
  bool receive_and_transmit(const FrameHeader* h, const std::byte* payload);
  // A frame next_frame() hands over rather than the descriptor path.
  bool whole_message(const FrameHeader& h) const;
  // Closes the link; while a frame is held its bytes (which may live in the
  // link) stay until release_frame().
  void drop_link();
  bool transmit_waiting() const { return tx_next_ != sendq_.tail() || acks_owed_ || !read_responses_.empty(); }
  // A region a post's check found registered with this VI's tag. Posts
  // mostly name the regions the previous post did, and a check that hits
  // the remembered one needs no look at the NIC's table (shared with peers,
  // and read under its sequence lock). handle 0: nothing remembered.
  struct CheckedRegion {
    MemHandle handle = 0;
    std::uint64_t addr = 0, len = 0;
  };
  // Where a post's checks look: only at the remembered regions (a few
  // compares and no call, so the common case saves no registers), or also
  // in the NIC's table, remembering what passes there.
  enum class Lookup { remembered, table };
  // Whether [addr, addr+len), len > 0, lies in region h registered with this VI's tag.
  template <Lookup where>
  bool registered(CheckedRegion& last, MemHandle h, std::uint64_t addr, std::uint64_t len);
  bool look_up_region(CheckedRegion& last, MemHandle h, std::uint64_t addr, std::uint64_t len);
  Result validate_post(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  // The commonest descriptor, checked in a few compares: one data segment,
  // the descriptor in the region the last one passed in and the segment (if
  // not empty) in the region the last data passed in. True and the segment
  // as it was checked (read once: the program's memory may change under the
  // post); false when it is not that: the post then makes its full checks,
  // which fail wherever these do.
  struct SingleSegment {
    void* data;
    std::uint32_t length;
  };
  bool remembered_single_segment(VIP_DESCRIPTOR* desc, MemHandle desc_handle, SingleSegment& out);
  // post_send's way for a send of one segment that fits one frame, passes
  // remembered_single_segment() and has nothing queued ahead of it: queued
  // and handed to the link at once. False, having done nothing, for any
  // other post.
  bool post_small_send(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  // The posts with every check, for whatever the short ways do not take.
  Result post_send_in_full(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  Result post_recv_in_full(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  template <Lookup where>
  Result check_descriptor(VIP_DESCRIPTOR* desc, MemHandle desc_handle);
  // post_recv's and repost_recv's common part: queues the descriptor (null
  // if the queue is full); on a VI in the error state it is finished, flushed.
  WorkRequest* enqueue_recv(VIP_DESCRIPTOR* desc);
  std::uint32_t check_local_segments(const VIP_DESCRIPTOR* desc, std::uint32_t first_data, std::uint64_t& total);
  template <Lookup where>
  std::uint32_t check_segments(const VIP_DESCRIPTOR* desc, std::uint32_t first_data, std::uint64_t& total);
  void finish(WorkQueue& q, WorkRequest& wr, std::uint32_t status);
  // Writes out the completions a queue has ready, in order.
  void publish(bool recv);
  template <bool recv>
  void publish();
  bool send_frame(const FrameHeader& h, const iovec* iov, std::size_t iovcnt);
  bool transmit_pending();
  bool transmit(WorkRequest& wr);
  bool transmit_data(WorkRequest& wr, std::uint8_t frame_type, std::uint64_t raddr, std::uint32_t rhandle);
  bool transmit_read_responses();
  bool handle_frame(const FrameHeader& h, const std::byte* payload);
  // handle_frame's way for the commonest frame: a whole message in one send
  // frame, its payload at hand, into the next posted receive, which holds it.
  // False, having done nothing, for any other frame.
  bool receive_whole_message(const FrameHeader& h, const std::byte* payload);
  void finish_receive(WorkRequest& wr, const FrameHeader& h);
  WorkRequest* take_receive();
  bool deliver(WorkRequest& wr, const FrameHeader& h, const std::byte* payload);
  bool pull_direct_send(WorkRequest& wr, const FrameHeader& h, const std::byte* payload);
  void complete_acked(std::uint32_t count);
  void complete_read(const FrameHeader& h, const std::byte* payload);
  void serve_read_request(const FrameHeader& h, bool withdrawable);
  void serve_shared_read(const FrameHeader& h, const std::byte* payload);
  // A withdrawable read request (kFlagWithdrawable): whether this end claimed
  // it to serve (false: the reader took it back first, or has gone).
  bool claim_ring_read(std::uint32_t read);
  // Before a withdrawable read's next part goes, [0, upto) committed in its
  // word; false when the reader took the rest back (or has gone).
  bool commit_ring_read(ReadResponse& r, std::uint64_t upto);
  // The oldest reads, withdrawable, whose target has sent nothing of them for
  // read_takeover_ns_: what it did not commit, copied by single copy. True if any was.
  bool take_over_stalled_reads();
  // The oldest read's clocks (its time, its takeover time), counted from now:
  // it just became the oldest.
  void oldest_read_begins();
  // The oldest read has all its bytes: it completes, and the next begins.
  void retire_oldest_read(WorkRequest& wr);
  // How long the oldest read of `bytes` waits for its silent target (at most read_takeover_ns_).
  std::uint64_t takeover_wait(std::uint64_t bytes) const;
  static constexpr std::uint64_t kServingPatience = 8;
  // [from, from+len) of read wr by single copy from the target's memory.
  bool read_range_direct(WorkRequest& wr, std::uint64_t from, std::uint64_t len);
  // Breaks the VI: it goes to the error state, the peer is told, outstanding
  // descriptors are flushed (wr, if given, completes with `status`).
  void fail(VIP_ERROR_CODE code, std::string cause, WorkQueue* q = nullptr, WorkRequest* wr = nullptr,
            std::uint32_t status = 0, bool orderly = false);
  void flush_all(std::uint32_t status);
  Result wait_queue(WorkQueue& q, std::uint32_t timeout_ms, VIP_DESCRIPTOR*& out);
  bool direct_rdma(WorkRequest& wr);
  bool read_direct(WorkRequest& wr);
  bool settle_shared_read(std::atomic<std::uint64_t>& claim, std::uint32_t read);

  NicImpl& nic_;
  ViAttributes attrs_;
  ViAttributes remote_attrs_{};
  ViState state_ = ViState::idle;
  CqImpl* send_cq_;
  CqImpl* recv_cq_;
  WorkQueue sendq_, recvq_;
  std::uint64_t connect_deadline_ns_ = 0;  // when a pending connect request times out
  std::uint64_t tx_next_ = 0;    // next send-queue request to transmit
  std::uint64_t fill_next_ = 0;  // next receive-queue request to fill
  std::deque<std::uint64_t> awaiting_ack_;
  // An RDMA read whose request went out, served through the rings. One the
  // target may not have claimed yet (withdrawable) is taken back at
  // take_over_at (now_ns) if still unclaimed: `read` names its claim word.
  struct AwaitingRead {
    std::uint64_t index;  // in sendq_
    std::uint64_t take_over_at = UINT64_MAX;  // once it is the oldest; moved on by every part that arrives
    std::uint64_t peer_took = 0;  // Link::frames_taken_by_peer when the clock last started
    std::uint32_t read = 0;
    bool withdrawable = false;
    bool timed = false;  // its time is measured for ReadPathChooser
    std::uint64_t began = 0;  // now_ns when it became the oldest, if timed or withdrawable
    std::uint64_t direct_read_ns = 0;  // direct_read_ns_ then
    std::uint64_t received = 0;  // bytes of responses
    // Taken back: the bytes still coming through the rings (all before it copied).
    std::uint64_t through_rings = UINT64_MAX;
  };
  std::deque<AwaitingRead> awaiting_read_;
  std::uint32_t withdrawable_reads_ = 0;  // in awaiting_read_
  std::uint64_t direct_read_ns_ = 0;      // spent in single-copy reads whose way was chosen
  std::uint64_t ring_reads_ = 0;          // withdrawable read requests sent, for their words in turn
  std::deque<ReadResponse> read_responses_;
  std::uint32_t acks_owed_ = 0;
  bool discarding_ = false;  // dropping the rest of a message that had nowhere to go
  WorkRequest* receiving_ = nullptr;
  std::uint16_t rx_message_ = 0;  // message number of the one being received
  std::uint16_t tx_message_ = 0;  // number of the next message sent in frames
  std::unique_ptr<Link> link_;
  bool in_place_ = false;  // set_in_place
  bool holding_ = false;   // next_frame() handed over a frame not yet released
  bool publish_later_ = false;  // finish() leaves publishing to receive_and_transmit
  std::unique_ptr<Link> held_link_;  // a link closed while its frame was held
  ViCounters counters_;
  // What the link offers, read once when it is attached.
  std::uint64_t frame_payload_ = 0;  // largest payload of one frame
  bool direct_capable_ = false;      // single-copy access to the peer's memory
  std::uint64_t direct_min_ = UINT64_MAX;  // sends and RDMA writes this large use it
  std::uint64_t direct_read_min_ = UINT64_MAX;  // RDMA reads this large use it
  std::atomic<std::uint64_t>* read_claim_ = nullptr;  // shared single-copy reads: the link's word, if any
  // Reads through the rings the target has not claimed after this long are
  // copied by single copy (VIASTACK_READ_TAKEOVER_US); the words they are
  // claimed by, empty when they are not withdrawable.
  std::uint64_t read_takeover_ns_ = 0;
  std::span<std::atomic<std::uint64_t>> ring_read_claims_;
  std::unique_ptr<FaultInjector> faults_;  // unreliable VIs under VIASTACK_FAULTS
  DescriptorNotify send_notify_, recv_notify_;
  // The regions the last posts' descriptor and data segments were found in
  // (two: a program's descriptors and buffers are often registered apart).
  CheckedRegion desc_region_, data_region_;
};

class NicImpl final : public Nic {
 public:
  NicImpl();
  ~NicImpl() override;

  // What the public Nic offers is Nic's own (via.hpp describes it; nic.cpp
  // defines it on this state). The rest is the engine's and the providers'.
  Provider& provider() { return *provider_; }
  RegionTable& regions() { return *regions_; }
  const FaultPlan* fault_plan() const { return fault_plan_.get(); }
  bool has_unreliable_vi() const;
  using Nic::counters;  // the public, read-only view; this one is for counting
  NicCounters& counters() { return counters_; }
  // Hands an asynchronous error to the program's handler.
  void report(const AsyncError& error);
  // Runs `work` at the end of the current progress step (notify handlers).
  void defer(std::function<void()> work) { deferred_.push_back(std::move(work)); }

 private:
  friend class Nic;  // whose methods are the NIC's

  // Nic::progress; true if it moved anything (a frame, a transmission, deferred work).
  bool advance();
  // The soonest any VI takes a read back from a silent target (ViImpl::next_takeover).
  std::uint64_t next_takeover() const;
  // Connection control traffic; with check_peers, also notices closed or dead peers.
  void slow_progress(bool check_peers);

  std::unique_ptr<Provider> provider_;
  RegionTable* regions_ = nullptr;  // the provider's table, looked up once
  std::unique_ptr<const FaultPlan> fault_plan_;  // from VIASTACK_FAULTS, if set
  std::vector<std::unique_ptr<ViImpl>> vis_;
  std::vector<std::unique_ptr<CqImpl>> cqs_;
  std::vector<std::unique_ptr<ConnRequestImpl>> requests_;
  std::vector<Ptag> ptags_;
  Ptag next_ptag_ = 1;
  std::function<void(const AsyncError&)> error_handler_;
  NicCounters counters_;
  YieldPhase yield_phase_;  // of this NIC's waits
  // Nic::yield_when_idle: the frames received when an empty test last saw
  // the count change, and when.
  std::uint64_t idle_tests_frames_ = UINT64_MAX, idle_tests_since_ = 0;
  std::uint64_t next_peer_check_ = 0;  // when a wait next looks at peers' liveness (now_ns)
  std::uint64_t progress_calls_ = 0;
  std::vector<std::function<void()>> deferred_;
};

// The engine's object behind a public one.
inline NicImpl& impl(Nic& nic) { return static_cast<NicImpl&>(nic); }
inline const NicImpl& impl(const Nic& nic) { return static_cast<const NicImpl&>(nic); }
inline ViImpl& impl(Vi& vi) { return static_cast<ViImpl&>(vi); }
inline const ViImpl& impl(const Vi& vi) { return static_cast<const ViImpl&>(vi); }
inline CqImpl& impl(Cq& cq) { return static_cast<CqImpl&>(cq); }
inline const CqImpl& impl(const Cq& cq) { return static_cast<const CqImpl&>(cq); }
inline ConnRequestImpl& impl(ConnRequest& request) { return static_cast<ConnRequestImpl&>(request); }

}  // namespace via
