// Store and get, on the core: in chunks of am_max_size() bytes as requests
// (store_data, store_done, get), or, past one chunk on reliable VIs, by RDMA
// through the link followed by a store_done request.
#pragma once

#include <memory>
#include <vector>

#include "core.hpp"

namespace am::detail {

class Bulk final : public Service {
 public:
  explicit Bulk(Core& core);
  // A fresh completion for a store or get of the C++ API (its Future's).
  // Taken from a block of kCompletionsPerBlock, which it keeps alive: one
  // allocation per block, not per operation (a Future kept for long keeps
  // its block's few hundred bytes).
  std::shared_ptr<Completion> new_completion();
  // on_local: the source buffer may be reused (C am_store_async).
  Status store(int dest, const void* local, void* remote, std::size_t bytes, int handler, Word arg,
               am_completion_t on_local, void* on_local_arg, const std::shared_ptr<Completion>& completion);
  Status get(int dest, const void* remote, void* local, std::size_t bytes, int handler, Word arg,
             const std::shared_ptr<Completion>& completion);

  std::uint8_t run_request(Peer& p, const wire::Message& m, HandlerContext& ctx) override;
  void answered(Peer& p, const Sent& s, const wire::Message& m) override;
  bool returned(Peer& p, const Sent& s, int cause, const char* why, Returned& r) override;

 private:
  struct Operation {
    bool is_store = false;
    bool in_use = false;
    int peer = 0;
    std::byte* local = nullptr;
    std::uint64_t remote = 0;
    std::size_t bytes = 0;
    int handler = kNoHandler;
    Word arg = 0;
    unsigned pending = 0;      // messages and RDMA descriptors not yet answered
    std::uint64_t unsent = 0;  // chunked store: the last chunk, sent once the others are acknowledged
    bool last_sent = false;    // chunked store: the store_done message went out
    bool local_done = false;
    bool finished = false;
    Status status = Status::ok;
    am_completion_t on_local = nullptr;
    void* on_local_arg = nullptr;
    std::shared_ptr<Completion> completion;
  };

  static constexpr unsigned kCompletionsPerBlock = 64;
  struct CompletionBlock {
    Completion at[kCompletionsPerBlock];
  };

  // Inline into store and get: each is on the path of every operation.
  [[gnu::always_inline]] Status check_bulk(int dest, const void* local, const void* remote, std::size_t bytes);
  [[gnu::always_inline]] std::uint32_t new_op(bool is_store, int dest, std::byte* local, const void* remote, std::size_t bytes, int handler,
                       Word arg, const std::shared_ptr<Completion>& completion);
  void post_rdma(Peer& p, std::uint32_t op_index, bool write);
  void rdma_done(std::uint32_t op_index, bool ok);
  void send_store_chunks(std::uint32_t op_index);
  void send_last_store_chunk(std::uint32_t op_index);
  void op_local_done(Operation& op);
  void op_finish(Operation& op, Status s);
  void op_release_if_done(Operation& op);
  void finish_get(Operation& op);

  Core& core_;
  std::vector<Operation> ops_;
  std::vector<std::uint32_t> free_ops_;
  std::shared_ptr<CompletionBlock> completions_;  // new_completion's, in use up to next_completion_
  unsigned next_completion_ = kCompletionsPerBlock;
};

}  // namespace am::detail
