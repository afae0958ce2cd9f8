// The one AM runtime of a process: VIA I/O, handler dispatch, store/get.
// Both APIs (am.h, am/am.hpp) are thin layers over it.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "am/am.hpp"
#include "reliability.hpp"
#include "via/posted_queue.hpp"
#include "via/via.hpp"
#include "wire.hpp"

namespace am::detail {

// Records `why` as the last error (am_last_error) and returns `s`.
Status error(Status s, std::string why);
const char* last_error_message();

struct HandlerEntry {
  enum class Type : std::uint8_t { none, words, payload, memory } type = Type::none;
  // The largest payload a message for this handler may carry: 0 for words,
  // am_max_size() for payload handlers, -1 (none) for memory handlers and
  // empty entries. One test on the path of every message.
  std::int32_t max_payload = -1;
  std::function<void(const Delivery&)> message;
  std::function<void(int, void*, std::size_t, Word)> memory;
};
// Shared by every rank the same way; may be filled before am_enable.
HandlerEntry* handler_table();
void set_error_handler_fn(std::function<void(const Returned&)> fn);

class Runtime {
 public:
  static Runtime* get() { return instance_.get(); }
  static Status enable(const Config& config);
  // Collective: a barrier, the last answers, then the connections close.
  static Status disable();
  ~Runtime();

  int procs() const { return int(peers_.size()); }
  int my_proc() const { return me_; }
  void* segment(int proc) const;
  std::size_t segment_size(int proc) const;
  const Counters& counters() const { return counters_; }
  int failed_peers() const { return failed_peers_; }

  Status send(bool reply, int dest, int handler, const Word* args, unsigned nargs, const void* payload,
              std::size_t bytes);
  // am::request_deferred: a request that waits in the destination's bundle.
  Status send_deferred(int dest, int handler, const Word* args, unsigned nargs);
  // Sends every bundle now.
  void flush_all();
  // on_local: the source buffer may be reused (C am_store_async).
  Status store(int dest, const void* local, void* remote, std::size_t bytes, int handler, Word arg,
               am_completion_t on_local, void* on_local_arg, std::shared_ptr<Completion> completion);
  Status get(int dest, const void* remote, void* local, std::size_t bytes, int handler, Word arg,
             std::shared_ptr<Completion> completion);
  int poll();
  Status barrier();
  Status wait(const Completion& c);
  // am::wait_acknowledged: until every request sent so far is answered.
  Status wait_acknowledged();
  // am::wait_until: block_until for a predicate of the program's.
  Status wait_until(const std::function<bool()>& pred);
  // Polls until `flag` is set (by a completion callback).
  void wait_local(const bool& flag);

 private:
  static constexpr std::uint32_t kNoBundle = UINT32_MAX;
  // What a request slot is waiting for: what to do with its reply.
  enum class Purpose : std::uint8_t { user, store_chunk, store_done, get_chunk, hello, barrier, bundle };
  struct Sent {
    Purpose purpose = Purpose::user;
    std::uint32_t op = 0;
    std::uint64_t offset = 0;  // get chunks: where the bytes go in the local buffer
    std::uint32_t chunk = 0;
    std::uint32_t length = 0;  // encoded message length, for retransmission (0: a bundle not sent yet)
  };
  struct Peer {
    Peer(int r, std::uint16_t depth, const RetryPolicy& policy, std::uint64_t max_ack_delay, std::uint32_t max_sends,
         std::uint32_t max_receives)
        : rank(r),
          window(depth, policy),
          filter(depth, max_ack_delay),
          sent(depth),
          reply_length(depth),
          sends(max_sends),
          receives(max_receives) {
      reposts.reserve(max_receives);
    }
    int rank;
    via::Vi* vi = nullptr;  // null for this rank itself: messages go through the loopback queue
    SendWindow window;
    ReceiveFilter filter;
    std::vector<Sent> sent;
    std::vector<std::uint32_t> reply_length;  // per slot: the cached reply (filter.answer says if there is one)
    via::PostedQueue sends, receives;
    std::vector<std::uint32_t> reposts;  // handled receives, re-posted by the next poll
    std::uint32_t first_desc = 0;  // requests, replies, acknowledgements, then receives
    std::uint32_t next_ack_desc = 0;
    // The bundle being filled, in the request buffer of its slot: deferred
    // requests written as items (detail::write_deferred, into `room`)
    // behind room for its header.
    std::uint32_t bundle_slot = kNoBundle;
    detail::BundleRoom* room = nullptr;
    bool failed = false;
    bool hello_received = false;
    std::uint64_t seg_base = 0, seg_bytes = 0;
    via::MemHandle seg_handle = 0;
  };
  enum class Role : std::uint8_t { request, reply, ack, receive, rdma };
  struct DescInfo {
    Role role;
    std::uint16_t peer;
    std::uint16_t index;
    bool posted = false;
  };
  struct Operation {
    bool is_store = false;
    bool in_use = false;
    int peer = 0;
    std::byte* local = nullptr;
    std::uint64_t remote = 0;
    std::size_t bytes = 0;
    int handler = kNoHandler;
    Word arg = 0;
    unsigned pending = 0;     // messages and RDMA descriptors not yet answered
    std::uint64_t unsent = 0;  // chunked store: the last chunk, sent once the others are acknowledged
    bool last_sent = false;   // chunked store: the store_done message went out
    bool local_done = false;
    bool finished = false;
    Status status = Status::ok;
    bool registered = false;  // local buffer registered for this operation alone
    via::MemHandle local_handle = 0;
    am_completion_t on_local = nullptr;
    void* on_local_arg = nullptr;
    std::shared_ptr<Completion> completion;
  };
  struct HandlerContext {
    Peer* peer;
    std::uint16_t slot;
    std::uint32_t seq;
    bool may_reply;
    bool replied;
    // A request of a bundle: its place there, and the bytes of the replies
    // to the bundle's requests so far (items in the slot's reply buffer).
    bool in_bundle = false;
    std::uint16_t item = 0;
    std::uint32_t reply_bytes = 0;
  };

  explicit Runtime(const Config& config);
  Status start();

  std::uint64_t now_ns() const;
  VIP_DESCRIPTOR* desc(std::uint32_t i) const;
  std::byte* buffer(std::uint32_t i) const;
  std::uint32_t request_desc(const Peer& p, std::uint16_t slot) const { return p.first_desc + slot; }
  std::uint32_t reply_desc(const Peer& p, std::uint16_t slot) const { return p.first_desc + depth_ + slot; }
  std::uint32_t ack_desc(const Peer& p, std::uint32_t i) const { return p.first_desc + 2u * depth_ + i; }
  bool post_send(Peer& p, std::uint32_t di, std::uint32_t length);
  bool send_frame(Peer& p, std::uint32_t di, std::uint32_t length);
  bool await_credit(Peer& p);
  bool open_bundle(Peer& p);
  void flush(Peer& p);
  bool post_recv(Peer& p, std::uint32_t di);
  void repost(Peer& p, std::uint32_t di);
  void wait_send_free(Peer& p, std::uint32_t di);
  bool take_send(Peer& p, std::uint32_t& di);
  void reap_sends(Peer& p);
  int receive(Peer& p);
  int service();
  int handle();
  int run_loopback();
  template <class Pred>
  void block_until(Pred&& pred);

  Status send_request(Peer& p, wire::Kind kind, std::uint16_t handler, const Word* args, unsigned nargs,
                      const void* payload, std::size_t bytes, const Sent& sent);
  std::uint32_t bundle_bytes(const Peer& p) const;
  std::uint32_t close_bundle(Peer& p);
  Status add_bundle_reply(HandlerContext& ctx, std::uint16_t handler, std::uint8_t status, const Word* args,
                          unsigned nargs, const void* payload, std::size_t bytes);
  void send_reply(Peer& p, std::uint16_t slot, std::uint32_t seq, std::uint8_t status, std::uint16_t handler,
                  const Word* args, unsigned nargs, const void* payload, std::size_t bytes);
  std::uint32_t compose(Peer& p, std::uint32_t di, wire::Header h, const Word* args, const void* payload);
  void send_acks(Peer& p);
  void send_all_acks();
  bool owes_acks() const;
  void on_receive(Peer& p, std::uint32_t di, VIP_DESCRIPTOR* d);
  void on_send_complete(std::uint32_t di, VIP_DESCRIPTOR* d);
  void dispatch(Peer& p, std::byte* data, std::size_t length);
  void handle_request(Peer& p, const wire::Message& m);
  std::uint8_t run_request(Peer& p, const wire::Message& m, HandlerContext& ctx);
  void run_bundle(Peer& p, const wire::Message& m, HandlerContext& ctx);
  void handle_reply(Peer& p, const wire::Message& m);
  void run_bundle_replies(Peer& p, const wire::Message& m);
  void run_reply_handler(Peer& p, const wire::Header& answer, std::uint16_t handler, unsigned nargs, const std::byte* args,
                         const std::byte* payload, std::uint32_t bytes);
  template <class F>
  void for_each_bundled(const Peer& p, std::uint16_t slot, F&& f);
  Returned returned_request(const Peer& p, int handler, unsigned nargs, const std::byte* args, int cause,
                            const char* why) const;
  void handle_ack(Peer& p, Ack ack);
  void returned(Peer& p, std::uint16_t slot, int cause, const char* why);
  void fail_peer(Peer& p, int cause, const std::string& why);
  void check_timers();
  bool in_my_segment(std::uint64_t addr, std::uint64_t bytes) const;
  Status check_remote_range(const Peer& p, std::uint64_t addr, std::size_t bytes) const;
  Status check_bulk(int dest, const void* local, const void* remote, std::size_t bytes) const;

  std::uint32_t new_op(int dest, std::byte* local, const void* remote, std::size_t bytes, int handler, Word arg,
                       std::shared_ptr<Completion> completion);
  Status local_handle(Operation& op);
  Status post_rdma(Peer& p, std::uint32_t op_index, bool write);
  void send_store_chunks(std::uint32_t op_index);
  void send_last_store_chunk(std::uint32_t op_index);
  void op_local_done(Operation& op);
  void op_finish(Operation& op, Status s);
  void op_release_if_done(Operation& op);
  void finish_get(Operation& op);

  static std::unique_ptr<Runtime> instance_;

  Config config_;
  std::uint16_t depth_;
  RetryPolicy policy_;
  int me_ = 0;
  std::unique_ptr<via::Nic> nic_;
  via::Ptag ptag_ = 0;
  std::byte* arena_ = nullptr;
  std::size_t arena_bytes_ = 0;
  via::MemHandle arena_handle_ = 0;
  std::byte* descs_ = nullptr;
  std::byte* buffers_ = nullptr;
  std::vector<DescInfo> desc_info_;
  std::vector<std::uint32_t> rdma_free_;     // free RDMA descriptor indices
  std::vector<std::uint32_t> rdma_op_;       // operation of each RDMA descriptor (by index - first rdma)
  std::uint32_t first_rdma_ = 0;
  std::byte* segment_ = nullptr;
  std::size_t segment_bytes_ = 0;
  bool own_segment_ = false;
  via::MemHandle segment_handle_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> remote_;  // the peers with a VI: all but this rank
  std::deque<std::vector<std::byte>> loopback_;
  std::vector<Operation> ops_;
  std::vector<std::uint32_t> free_ops_;
  HandlerContext* context_ = nullptr;
  Counters counters_{};
  unsigned posted_sends_ = 0;
  unsigned dispatching_ = 0;  // receives being handled (handlers may poll)
  unsigned services_ = 0;
  unsigned waits_ = 0;  // block_until's sleeps in the NIC, for the timers' cadence
  unsigned open_bundles_ = 0;
  std::vector<detail::BundleRoom> rooms_;  // detail::bundle_rooms while this runtime is enabled
  bool vi_error_ = false;
  int failed_peers_ = 0;  // peers given up on (fail_peer)
  bool may_owe_acks_ = false;  // some peer may be owed acknowledgements (cleared by send_all_acks)
  bool disabling_ = false;
  std::uint32_t barrier_epoch_ = 0;
  std::uint32_t released_epoch_ = 0;
  unsigned arrived_[2] = {0, 0};
  unsigned hellos_acked_ = 0;
};

}  // namespace am::detail
