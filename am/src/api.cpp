// The C++ API (am/am.hpp) over the runtime.
#include <cstdio>
#include <cstdlib>

#include <via/config.hpp>

#include "runtime.hpp"

namespace am {

using detail::Runtime;

namespace {

Status not_enabled() { return detail::error(Status::not_init, "AM is not enabled (call am_enable first)"); }

}  // namespace

const char* describe(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::not_init: return "AM is not enabled";
    case Status::bad_arg: return "bad argument";
    case Status::resource: return "out of resources";
    case Status::not_in_handler: return "reply outside a request handler";
    case Status::unreachable: return "destination unreachable";
    case Status::too_large: return "payload larger than am_max_size()";
    case Status::enable_failed: return "am_enable failed";
  }
  return "unknown status";
}

Config Config::from_env() {
  Config c;
  if (via::config::text("VIASTACK_AM_RELIABILITY") == "unreliable") c.reliability = Reliability::unreliable;
  c.depth = unsigned(via::config::integer("VIASTACK_AM_DEPTH"));
  c.timeout_ms = std::uint64_t(via::config::integer("VIASTACK_AM_TIMEOUT_MS"));
  c.retransmit_ms = std::uint64_t(via::config::integer("VIASTACK_AM_RETRANSMIT_MS"));
  c.segment_bytes = std::size_t(via::config::integer("VIASTACK_AM_SEGMENT"));
  return c;
}

namespace detail {

namespace {

// Handler indices a library keeps for itself (reserve_handlers).
struct Reservation {
  int first, last;
  std::string owner;
};
std::vector<Reservation> reservations;

const Reservation* reservation_of(int index) {
  for (const Reservation& r : reservations)
    if (index >= r.first && index <= r.last) return &r;
  return nullptr;
}

std::string range_text(int first, int last) { return std::to_string(first) + ".." + std::to_string(last); }

// Whether `owner` (nullptr: the program) may set the handler at `index`.
Status may_set(int index, const char* owner) {
  if (index < 0 || index >= AM_MAX_HANDLERS) return error(Status::bad_arg, "handler index out of range");
  const Reservation* r = reservation_of(index);
  if (r && (!owner || r->owner != owner))
    return error(Status::bad_arg, "handler " + std::to_string(index) + " is reserved for " + r->owner + " (handlers " +
                                      range_text(r->first, r->last) + "); use an index outside that range");
  return Status::ok;
}

}  // namespace

Status set_handler(int index, HandlerKind kind, std::function<void(const Delivery&)> fn, const char* owner) {
  if (const Status s = may_set(index, owner); s != Status::ok) return s;
  HandlerEntry& e = handler_table[index];
  e = HandlerEntry{};
  e.type = kind == HandlerKind::words ? HandlerEntry::Type::words : HandlerEntry::Type::payload;
  e.max_payload = kind == HandlerKind::words ? 0 : std::int32_t(wire::kMaxPayload);
  e.message = std::move(fn);
  return Status::ok;
}

Status send(bool reply, int dest, int handler, const Word* args, unsigned nargs, const void* payload, std::size_t bytes) {
  Runtime* rt = Runtime::get();
  return rt ? rt->core().send(reply, dest, handler, args, nargs, payload, bytes) : not_enabled();
}

Status send_deferred(int dest, int handler, const Word* args, unsigned nargs) {
  Runtime* rt = Runtime::get();
  return rt ? rt->core().send_deferred(dest, handler, args, nargs) : not_enabled();
}

Status wait(const Completion& c) {
  Runtime* rt = Runtime::get();
  if (c.done) return c.status;
  return rt ? rt->core().wait(c) : not_enabled();
}

}  // namespace detail

Status reserve_handlers(int first, int last, const char* owner) {
  using detail::error;
  if (!owner || !*owner || first < 0 || last < first || last >= AM_MAX_HANDLERS)
    return error(Status::bad_arg, "reserve_handlers: needs first <= last within 0.." +
                                      std::to_string(AM_MAX_HANDLERS - 1) + " and an owner's name");
  bool held = true;  // already the owner's, every one
  for (int i = first; i <= last; ++i) {
    const detail::Reservation* r = detail::reservation_of(i);
    const std::string needs =
        std::string(owner) + " needs AM handlers " + detail::range_text(first, last) + ", but handler " + std::to_string(i);
    if (r && r->owner != owner) return error(Status::bad_arg, needs + " is reserved for " + r->owner);
    if (!r && detail::handler_table[i].type != detail::HandlerEntry::Type::none)
      return error(Status::bad_arg, needs + " is already registered: the program's handlers must stay outside that range");
    held = held && r;
  }
  if (!held) detail::reservations.push_back(detail::Reservation{first, last, owner});
  return Status::ok;
}

Status set_mem_handler(int index, std::function<void(int, void*, std::size_t, Word)> fn, const char* owner) {
  if (const Status s = detail::may_set(index, owner); s != Status::ok) return s;
  detail::HandlerEntry& e = detail::handler_table[index];
  e = detail::HandlerEntry{};
  e.type = detail::HandlerEntry::Type::memory;
  e.memory = std::move(fn);
  return Status::ok;
}

void set_error_handler(std::function<void(const Returned&)> fn) { detail::set_error_handler_fn(std::move(fn)); }

Status enable(const Config& config) { return Runtime::enable(config); }
Status disable() { return Runtime::disable(); }
int procs() { return Runtime::get() ? Runtime::get()->core().procs() : 0; }
int my_proc() { return Runtime::get() ? Runtime::get()->core().my_proc() : -1; }
std::size_t max_size() { return wire::kMaxPayload; }
void* segment(int proc) { return Runtime::get() ? Runtime::get()->core().segment(proc) : nullptr; }
std::size_t segment_size(int proc) { return Runtime::get() ? Runtime::get()->core().segment_size(proc) : 0; }
DeferredRoom* deferred_room(int dest) { return Runtime::get() ? Runtime::get()->core().deferred_room(dest) : nullptr; }

Future store(int dest, const void* local, void* remote, std::size_t bytes, int handler, Word arg) {
  Runtime* rt = Runtime::get();
  if (!rt) return Future(not_enabled());
  std::shared_ptr<detail::Completion> state = rt->bulk().new_completion();
  const Status s = rt->bulk().store(dest, local, remote, bytes, handler, arg, nullptr, nullptr, state);
  return s == Status::ok ? Future(std::move(state)) : Future(s);
}

Future get(int dest, const void* remote, void* local, std::size_t bytes, int handler, Word arg) {
  Runtime* rt = Runtime::get();
  if (!rt) return Future(not_enabled());
  std::shared_ptr<detail::Completion> state = rt->bulk().new_completion();
  const Status s = rt->bulk().get(dest, remote, local, bytes, handler, arg, state);
  return s == Status::ok ? Future(std::move(state)) : Future(s);
}

int poll() { return Runtime::get() ? Runtime::get()->core().poll() : 0; }
void flush() {
  if (Runtime* rt = Runtime::get()) rt->core().flush_all();
}
Status wait_until(const std::function<bool()>& pred) {
  Runtime* rt = Runtime::get();
  if (!rt) return not_enabled();
  if (!pred) return detail::error(Status::bad_arg, "am_wait_until: no predicate");
  return rt->core().wait_until(pred);
}
Status barrier() { return Runtime::get() ? Runtime::get()->barrier().run() : not_enabled(); }
Status wait_acknowledged() { return Runtime::get() ? Runtime::get()->core().wait_acknowledged() : not_enabled(); }
Counters counters() { return Runtime::get() ? Runtime::get()->core().counters() : Counters{}; }
int failed_peers() { return Runtime::get() ? Runtime::get()->core().failed_peers() : 0; }
int peers_in_use() { return Runtime::get() ? Runtime::get()->core().peers_in_use() : 0; }
const char* last_error() { return detail::last_error_message(); }

}  // namespace am
