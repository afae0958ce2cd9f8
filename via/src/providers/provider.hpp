// The interface between the VIA engine and a provider (shm, tcp), in the
// spirit of libfabric's ops tables: the engine owns descriptors, queues, the
// VIA state machine and the frame protocol; a provider moves frames between
// two connected VIs, sets connections up, and lets a NIC sleep until a peer
// rings its doorbell.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.hpp"
#include "engine/frame.hpp"
#include "engine/region_table.hpp"
#include "via/via.hpp"

namespace via {

// One end of a connection, owned by the VI it belongs to.
class Link {
 public:
  virtual ~Link() = default;
  // The name of the provider the link belongs to.
  virtual const char* transport() const = 0;
  // Largest payload one frame may carry.
  virtual std::size_t max_payload() const = 0;
  // Appends a frame whose payload is gathered from iov; false when there is no room now.
  virtual bool try_send(const FrameHeader& header, const iovec* iov, std::size_t iovcnt) = 0;
  // Whether a frame with this much payload (not a compact one) would be taken
  // now. After true, try_send of such a frame is sure to succeed while the
  // peer keeps the connection: its one producer only ever finds more room.
  // False asks the peer to say when it frees room, as a refused try_send does.
  // Asked only of links with ring read claims (own_ring_read_claims below).
  virtual bool has_room_for(std::size_t /*payload_bytes*/) { return true; }
  // How many frames the peer has taken from this link so far, a count that
  // only grows: while it moves, the peer's engine is at work. Asked only of
  // links with ring read claims.
  virtual std::uint64_t frames_taken_by_peer() const { return 0; }
  // The oldest unconsumed frame, if any; stays valid until pop().
  virtual bool peek(const FrameHeader*& header, const std::byte*& payload) = 0;
  virtual void pop() = 0;

  // Single-copy access to the peer's memory; `direct()` says whether it is available.
  virtual bool direct() const { return false; }
  virtual bool direct_read(const iovec*, std::size_t, const iovec*, std::size_t) { return false; }
  virtual bool direct_write(const iovec*, std::size_t, const iovec*, std::size_t) { return false; }
  // The words of shared single-copy reads (frame.hpp: kFlagShared), in memory
  // both ends map: this VI's own reads', and its peer's. Null where the link
  // has none; then a single-copy read is the reader's alone.
  virtual std::atomic<std::uint64_t>* own_read_claim() { return nullptr; }
  virtual std::atomic<std::uint64_t>* peer_read_claim() { return nullptr; }
  // The words of reads served through the rings that the reader may take back
  // (frame.hpp: kFlagWithdrawable), one per read in flight, by read number
  // modulo their count: this VI's own reads', and its peer's (empty once the
  // peer closed). Empty where the link has none; then such a read is always
  // the target's to serve.
  virtual std::span<std::atomic<std::uint64_t>> own_ring_read_claims() { return {}; }
  virtual std::span<std::atomic<std::uint64_t>> peer_ring_read_claims() { return {}; }
  // Whether the peer's process still runs (whatever became of the
  // connection): a share of a read it claimed may still be on its way.
  virtual bool peer_alive() { return true; }
  // Checks [addr, addr+len) against the peer's registrations as RDMA to the peer
  // would; returns 0 or the VIP_STATUS_* error bits.
  virtual std::uint32_t check_peer_region(std::uint64_t, std::uint64_t, MemHandle, bool) const {
    return VIP_STATUS_RDMA_PROT_ERROR;
  }

  // Slow-path checks: has the peer closed the connection or died?
  // broken: the connection itself failed (reset, timed out, malformed stream);
  // broken_reason() says how.
  enum class PeerState { up, closed, failed, dead, broken };
  virtual PeerState peer_state() = 0;
  virtual std::string broken_reason() const { return {}; }
  // The peer's state as the engine may act on it: up while a frame the peer
  // sent is still to be taken. The state is read first: a peer writes its
  // last frames before it closes or exits, so a look for frames made after
  // the state changed sees them all, where one made before could miss a
  // frame written in between (and the close would then drop it).
  PeerState peer_state_after_frames() {
    const PeerState state = peer_state();
    const FrameHeader* header;
    const std::byte* payload;
    return state != PeerState::up && peek(header, payload) ? PeerState::up : state;
  }
  // Tells the peer that this end is gone (error: because of an error).
  virtual void close(bool error) = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual const char* name() const = 0;
  virtual const std::vector<std::uint8_t>& host_address() const = 0;
  // The NIC's number in its job (its rank's, or N of "shm:N"/"tcp:N"): the
  // same from run to run, unlike a tcp address with its ephemeral port.
  virtual std::uint32_t nic_number() const = 0;
  virtual Result resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const = 0;
  virtual std::string describe_address(const std::vector<std::uint8_t>& host) const = 0;
  // The provider's own NIC attributes: name, versions, discriminator length, MTU.
  virtual void fill_attributes(VIP_NIC_ATTRIBUTES& attrs) const = 0;
  virtual RegionTable& regions() = 0;
  virtual std::uint32_t max_vis() const = 0;

  // VI lifetime: reserve and release the provider's resources for a VI, and
  // publish the attributes remote RDMA checks need.
  virtual Result add_vi(ViImpl& vi) = 0;
  virtual void remove_vi(ViImpl& vi) = 0;
  virtual void publish_vi_attributes(ViImpl& vi) = 0;

  // Connection set-up. connect() starts a client or peer-to-peer request;
  // poll_connect() reports not_done until the provider attached a link to the
  // VI (success) or the request failed; cancel_connect() withdraws it and
  // returns false if it completed in the meantime.
  enum class ConnectMode { client, peer };
  virtual Result connect(ViImpl& vi, const NetAddress& local, const NetAddress& remote, ConnectMode mode) = 0;
  virtual Result poll_connect(ViImpl& vi) = 0;
  virtual bool cancel_connect(ViImpl& vi) = 0;
  // Server side: a pending client request addressed to `local`, if any.
  virtual std::unique_ptr<ConnRequestImpl> take_request(const NetAddress& local) = 0;
  virtual Result accept(const ConnRequestImpl& request, ViImpl& vi) = 0;
  virtual void reject(const ConnRequestImpl& request) = 0;
  // Resets the VI's provider resources after its link is gone, for reuse.
  virtual void reset_vi(ViImpl& vi) = 0;

  // Connection control traffic (requests, peer matches).
  virtual void progress_control() = 0;

  // Sleeping: arm() announces the NIC is about to sleep and returns a token;
  // sleep() blocks until a doorbell newer than the token or the time passes.
  virtual std::uint32_t arm_sleep() = 0;
  virtual void sleep(std::uint32_t token, std::chrono::nanoseconds max) = 0;
  virtual void disarm_sleep() = 0;
  // Whether the doorbell moved past the token (a peer rang, or
  // interrupt_sleep()): what tells a sleep nobody had reason to end from one
  // whose wake-up was lost. A provider without a doorbell cannot tell and
  // says it rang.
  virtual bool rang_since(std::uint32_t token) {
    (void)token;
    return true;
  }
  // For a provider that sleeps on two at once (mixed), from its own thread:
  // sleep_fd() readies this provider's sleep and returns a descriptor that
  // polls readable once there is work, or -1 when there is some already (or
  // the provider has no such descriptor); interrupt_sleep() ends a sleep of this
  // provider from another thread.
  virtual int sleep_fd() { return -1; }
  virtual void interrupt_sleep() {}
};

// Opens the provider named by the device string ("name" or "name:N"; empty
// or "via0": VIASTACK_PROVIDER's) among the registered ones, after loading
// VIASTACK_PROVIDER_PLUGIN if set; "auto" picks shm or mixed from the job.
Result open_provider(std::string_view device, std::unique_ptr<Provider>& out);

// ---- the registry of providers ----
// A provider is known by name to open_provider through register_provider:
// the built-in ones (shm, tcp, mixed) from open_provider.cpp, any other from
// a static initializer of the library holding it, e.g. a plugin that
// VIASTACK_PROVIDER_PLUGIN=path.so names.
class Bootstrap;
// Opens a NIC of the provider for a process of `job`; `device` is the
// string VipOpenNic got ("name", "name:N"), or the provider's name alone.
using ProviderOpener =
    std::function<Result(std::string_view device, const std::shared_ptr<Bootstrap>& job, std::unique_ptr<Provider>& out)>;
// Registers `opener` under `name`; false (and a logged error) when the name
// is empty, "auto", "via0", holds a ':', or is taken.
bool register_provider(std::string name, ProviderOpener opener);
// The registered names, in the order they were registered.
std::vector<std::string> registered_providers();

// Each built-in provider's opener; the device string may name the NIC ("shm:N").
namespace shm {
Result open_shm_provider(std::string_view device, Bootstrap& job, std::unique_ptr<Provider>& out);
}
namespace tcp {
Result open_tcp_provider(std::string_view device, const std::shared_ptr<Bootstrap>& job, std::unique_ptr<Provider>& out);
}
namespace mixed {
Result open_mixed_provider(std::string_view device, const std::shared_ptr<Bootstrap>& job,
                           std::unique_ptr<Provider>& out);
}

}  // namespace via
