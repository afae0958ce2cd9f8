#include "bulk.hpp"

#include <algorithm>
#include <cstring>

#include "via/copy.hpp"

namespace am::detail {

namespace {
constexpr std::uint64_t kRdmaPiece = 64u << 20;  // largest single RDMA descriptor
}  // namespace

Bulk::Bulk(Core& core) : core_(core) {
  for (wire::Kind kind : {wire::Kind::store_data, wire::Kind::store_done, wire::Kind::get}) core.add_service(kind, this);
  core.set_rdma_done([this](std::uint32_t op_index, bool ok) { rdma_done(op_index, ok); });
}

// ---- the requester's side ----

// What store and get both require of their arguments.
inline Status Bulk::check_bulk(int dest, const void* local, const void* remote, std::size_t bytes) {
  if (dest < 0 || dest >= core_.procs()) return error(Status::bad_arg, "no rank " + std::to_string(dest));
  if (bytes && !local) return error(Status::bad_arg, "local buffer is null");
  Peer& p = core_.peer(dest);
  if (!core_.know(p)) return error(Status::unreachable, "rank " + std::to_string(dest) + " is unreachable");
  return core_.check_remote_range(p, std::uintptr_t(remote), bytes);
}

std::shared_ptr<Completion> Bulk::new_completion() {
  if (next_completion_ == kCompletionsPerBlock) {
    completions_ = std::make_shared<CompletionBlock>();  // the last block lives on in its completions
    next_completion_ = 0;
  }
  // Shares the block's ownership, and points at one completion in it.
  return std::shared_ptr<Completion>(completions_, &completions_->at[next_completion_++]);
}

// A fresh store or get operation with what both record; one step (pending) to go.
inline std::uint32_t Bulk::new_op(bool is_store, int dest, std::byte* local, const void* remote, std::size_t bytes,
                           int handler, Word arg, const std::shared_ptr<Completion>& completion) {
  if (free_ops_.empty()) {
    ops_.emplace_back();
    free_ops_.push_back(std::uint32_t(ops_.size() - 1));
  }
  const std::uint32_t i = free_ops_.back();
  free_ops_.pop_back();
  // Field by field: a released operation holds no completion, and a fresh
  // Operation assigned whole costs twice the stores.
  Operation& op = ops_[i];
  op.is_store = is_store;
  op.in_use = true;
  op.peer = dest;
  op.local = local;
  op.remote = std::uintptr_t(remote);
  op.bytes = bytes;
  op.handler = handler;
  op.arg = arg;
  op.pending = 1;
  op.unsent = 0;
  op.last_sent = false;
  op.local_done = !is_store;  // a get's source is the peer's
  op.finished = false;
  op.status = Status::ok;
  op.on_local = nullptr;
  op.on_local_arg = nullptr;
  op.completion = completion;
  return i;
}

// In pieces of at most kRdmaPiece, each reported by rdma_done; the link
// registers the local memory (its registration cache) and queues what cannot
// go yet. A failure comes back through rdma_done.
void Bulk::post_rdma(Peer& p, std::uint32_t op_index, bool write) {
  core_.flush(p);  // behind the messages before it, as the VI orders them
  Operation& op = ops_[op_index];
  for (std::uint64_t offset = 0; offset < op.bytes; offset += kRdmaPiece) {
    const std::uint32_t piece = std::uint32_t(std::min(kRdmaPiece, op.bytes - offset));
    ++op.pending;
    ++(write ? core_.count().rdma_writes : core_.count().rdma_reads);
    core_.link().rdma(p.rank, write, op.local + offset, op.remote + offset, p.seg_handle, piece, op_index);
  }
}

void Bulk::rdma_done(std::uint32_t op_index, bool ok) {
  Operation& op = ops_[op_index];
  --op.pending;
  if (!ok) {
    op_local_done(op);
    op_finish(op, error(Status::unreachable, "RDMA to the peer failed (its VI broke)"));
    return;
  }
  if (op.is_store) {
    if (op.pending == 1) op_local_done(op);  // only the store_done message is left
    op_release_if_done(op);
  } else if (op.pending == 0) {
    finish_get(op);
  }
}

Status Bulk::store(int dest, const void* local, void* remote, std::size_t bytes, int handler, Word arg,
                   am_completion_t on_local, void* on_local_arg, const std::shared_ptr<Completion>& completion) {
  if (handler != kNoHandler && (handler < 0 || handler >= AM_MAX_HANDLERS))
    return error(Status::bad_arg, "handler index out of range");
  if (Status s = check_bulk(dest, local, remote, bytes); s != Status::ok) return s;
  Peer& p = core_.peer(dest);
  // Pending: the store_done message, sent last.
  const std::uint32_t oi =
      new_op(true, dest, static_cast<std::byte*>(const_cast<void*>(local)), remote, bytes, handler, arg, completion);
  ops_[oi].on_local = on_local;
  ops_[oi].on_local_arg = on_local_arg;
  core_.count().bytes_stored += bytes;
  Status s = Status::ok;
  const bool one = bytes <= wire::kMaxPayload || core_.whole_store(p, bytes);
  const bool rdma = !one && !p.is_me && core_.config().reliability == Reliability::reliable;
  if (one || rdma) {
    // One store_done request: after the RDMA write (a VI's send queue is
    // ordered), or carrying the bytes, copied as it is sent (into its
    // buffer, or straight into the link: Core::payload_apart; a whole
    // store's always: Core::whole_store). Its arguments
    // from the parameters, not from the operation just written: a load
    // spanning two of its fields would wait for both stores to reach the
    // cache (no store forwarding).
    if (rdma) post_rdma(p, oi, true);
    const Word args[4] = {std::uintptr_t(remote), bytes, arg, 0};
    s = core_.send_request(p, wire::Kind::store_done, std::uint16_t(handler), args, 3, rdma ? nullptr : local,
                           rdma ? 0 : bytes, Sent{{}, oi});
    ops_[oi].last_sent = true;
    if (!rdma) op_local_done(ops_[oi]);
  } else {
    ops_[oi].unsent = bytes;
    send_store_chunks(oi);
  }
  Operation& op = ops_[oi];
  if (s != Status::ok && !op.finished) {
    --op.pending;
    op_local_done(op);
    op_finish(op, s);
  }
  op_release_if_done(op);
  core_.poll_after_request(p);
  return s;
}

// Chunked store: every chunk but the last as store_data; the last one goes
// in the store_done message once the others are acknowledged, so the handler
// runs after all the data landed.
void Bulk::send_store_chunks(std::uint32_t oi) {
  Peer& p = core_.peer(ops_[oi].peer);
  while (ops_[oi].unsent > wire::kMaxPayload && !ops_[oi].finished) {
    Operation& op = ops_[oi];
    const std::uint64_t offset = op.bytes - op.unsent;
    const Word args[4] = {op.remote + offset, 0, 0, 0};
    const Sent sent{{}, oi, offset, std::uint32_t(wire::kMaxPayload)};
    op.unsent -= wire::kMaxPayload;
    ++op.pending;
    if (core_.send_request(p, wire::Kind::store_data, wire::kNoHandler, args, 1, op.local + offset, wire::kMaxPayload,
                           sent) != Status::ok) {
      --ops_[oi].pending;
      return;  // the peer failed: the operation already completed with its error
    }
  }
  if (ops_[oi].pending == 1 && !ops_[oi].finished) send_last_store_chunk(oi);
}

void Bulk::send_last_store_chunk(std::uint32_t oi) {
  Operation& op = ops_[oi];
  if (op.last_sent) return;
  op.last_sent = true;
  const Word args[4] = {op.remote, op.bytes, op.arg, 0};
  const std::uint64_t last = op.unsent;
  op.unsent = 0;
  Status s = core_.send_request(core_.peer(op.peer), wire::Kind::store_done, std::uint16_t(op.handler), args, 3,
                                op.local + op.bytes - last, last, Sent{{}, oi});
  Operation& again = ops_[oi];  // send_request may have polled and grown ops_
  op_local_done(again);  // the last bytes were copied as the request was sent
  if (s != Status::ok && !again.finished) {
    --again.pending;
    op_finish(again, s);
  }
}

Status Bulk::get(int dest, const void* remote, void* local, std::size_t bytes, int handler, Word arg,
                 const std::shared_ptr<Completion>& completion) {
  if (handler != kNoHandler &&
      (handler < 0 || handler >= AM_MAX_HANDLERS || handler_table[handler].type != HandlerEntry::Type::memory))
    return error(Status::bad_arg, "no mem handler registered at that index");
  if (Status s = check_bulk(dest, local, remote, bytes); s != Status::ok) return s;
  Peer& p = core_.peer(dest);
  // Pending until every piece is asked for.
  const std::uint32_t oi = new_op(false, dest, static_cast<std::byte*>(local), remote, bytes, handler, arg, completion);
  core_.count().bytes_got += bytes;
  Status s = Status::ok;
  if (bytes > wire::kMaxPayload && !p.is_me && core_.config().reliability == Reliability::reliable) {
    post_rdma(p, oi, false);
  } else {
    for (std::uint64_t offset = 0; s == Status::ok && (offset < bytes || offset == 0);) {
      const std::uint64_t chunk = std::min<std::uint64_t>(wire::kMaxPayload, bytes - offset);
      const Word args[4] = {ops_[oi].remote + offset, chunk, 0, 0};
      ++ops_[oi].pending;
      s = core_.send_request(p, wire::Kind::get, wire::kNoHandler, args, 2, nullptr, 0,
                             Sent{{}, oi, offset, std::uint32_t(chunk)});
      if (s != Status::ok) --ops_[oi].pending;
      offset += chunk;
      if (chunk == 0) break;
    }
  }
  Operation& op = ops_[oi];
  --op.pending;
  if (s != Status::ok && !op.finished) op_finish(op, s);
  if (op.pending == 0 && !op.finished) finish_get(op);
  op_release_if_done(op);
  core_.poll_after_request(p, bytes);
  return s;
}

void Bulk::finish_get(Operation& op) {
  if (op.finished) return;
  if (op.handler != kNoHandler) handler_table[op.handler].memory(op.peer, op.local, op.bytes, op.arg);
  op_finish(op, Status::ok);
}

void Bulk::op_local_done(Operation& op) {
  if (op.local_done) return;
  op.local_done = true;
  if (op.on_local) op.on_local(op.on_local_arg);
}

void Bulk::op_finish(Operation& op, Status s) {
  if (op.finished) return;
  op.finished = true;
  op.status = s;
  if (op.completion) {
    op.completion->status = s;
    op.completion->done = true;
  }
  op_release_if_done(op);
}

void Bulk::op_release_if_done(Operation& op) {
  if (!op.in_use || !op.finished || !op.local_done || op.pending) return;
  op.in_use = false;
  op.completion.reset();
  free_ops_.push_back(std::uint32_t(&op - ops_.data()));
}

// ---- answers, and what comes back ----

void Bulk::answered(Peer&, const Sent& s, const wire::Message& m) {
  Operation& op = ops_[s.op];
  --op.pending;
  switch (s.kind) {
    case wire::Kind::store_data:
      if (op.pending == 1 && !op.finished) send_last_store_chunk(s.op);  // only the last chunk is left
      op_release_if_done(ops_[s.op]);
      return;
    case wire::Kind::store_done:
      op_local_done(op);
      op_finish(op, Status::ok);
      return;
    default:  // a get's chunk
      if (!op.finished && s.chunk && m.header.payload_bytes)
        via::copy_memory(op.local + s.offset, m.payload, std::min<std::size_t>(s.chunk, m.header.payload_bytes));
      if (op.pending == 0) finish_get(op);
      op_release_if_done(op);
      return;
  }
}

bool Bulk::returned(Peer&, const Sent& s, int cause, const char* why, Returned& r) {
  Operation& op = ops_[s.op];
  --op.pending;
  const bool first = !op.finished;
  op_local_done(op);
  op_finish(op, cause == AM_E_BADSEGOFF || cause == AM_E_BADHANDLER || cause == AM_E_BADLENGTH
                    ? error(Status::bad_arg, why)
                    : error(Status::unreachable, why));
  op_release_if_done(op);
  if (!first) return false;  // one report per operation
  r.op = op.is_store ? AM_OP_STORE : AM_OP_GET;
  r.handler = op.handler;
  r.nargs = 3;
  const Word args[4] = {op.remote, op.bytes, op.arg, 0};
  std::memcpy(r.args, args, sizeof r.args);
  return true;
}

// ---- the target's side ----

std::uint8_t Bulk::run_request(Peer& p, const wire::Message& m, HandlerContext& ctx) {
  const wire::Header& h = m.header;
  std::byte* payload = const_cast<std::byte*>(m.payload);
  if (h.kind == wire::Kind::get) {
    const std::uint64_t addr = m.args[0], bytes = m.args[1];
    if (bytes > wire::kMaxPayload) return AM_E_BADLENGTH;
    if (!core_.in_my_segment(addr, bytes)) return AM_E_BADSEGOFF;
    ctx.replied = true;
    core_.send_reply(p, h.slot, h.seq, 0, wire::kNoHandler, nullptr, 0, reinterpret_cast<const void*>(addr), bytes);
    return 0;
  }
  const std::uint64_t addr = m.args[0];
  const std::uint64_t bytes = h.kind == wire::Kind::store_data ? h.payload_bytes : m.args[1];
  if (!core_.in_my_segment(addr, bytes)) return AM_E_BADSEGOFF;
  if (h.payload_bytes > bytes) return AM_E_BADLENGTH;
  if (h.payload_bytes) via::copy_memory(reinterpret_cast<std::byte*>(addr + bytes - h.payload_bytes), payload, h.payload_bytes);
  if (h.kind == wire::Kind::store_data || h.handler == wire::kNoHandler) return 0;
  const HandlerEntry* entry = h.handler < AM_MAX_HANDLERS ? &handler_table[h.handler] : nullptr;
  if (!entry || entry->type != HandlerEntry::Type::memory) return AM_E_BADHANDLER;
  ctx.may_reply = false;  // a store handler answers nobody
  // The bytes have landed, and the header and arguments are copies: the
  // program's handler runs with the message no longer held in the link
  // (it may wait for this peer's next messages).
  core_.release_held();
  entry->memory(p.rank, reinterpret_cast<void*>(addr), bytes, m.args[2]);
  return 0;
}

}  // namespace am::detail
