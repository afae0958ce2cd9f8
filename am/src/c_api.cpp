// The C API (am.h): argument translation over the runtime, nothing more.
#include "runtime.hpp"

using am::Status;
using am::Word;
using am::detail::Runtime;

namespace {

int code(Status s) { return static_cast<int>(s); }
int not_enabled() { return code(am::detail::error(Status::not_init, "AM is not enabled (call am_enable first)")); }

int send(bool reply, int dest, int handler, unsigned nargs, Word a0, Word a1, Word a2, Word a3) {
  const Word args[4] = {a0, a1, a2, a3};
  return code(am::detail::send(reply, dest, handler, args, nargs, nullptr, 0));
}

int send_medium(bool reply, int dest, int handler, const void* buf, size_t nbytes, int nargs, const am_word_t* args) {
  if (nargs < 0 || nargs > 4 || (nargs > 0 && !args))
    return code(am::detail::error(Status::bad_arg, "nargs must be 0..4 with an argument array"));
  Word words[4] = {0, 0, 0, 0};
  for (int i = 0; i < nargs; ++i) words[i] = args[i];
  return code(am::detail::send(reply, dest, handler, words, unsigned(nargs), buf, nbytes));
}

}  // namespace

extern "C" {

int am_enable(void) { return code(am::enable(am::Config::from_env())); }
int am_enable_segment(void* base, size_t bytes) {
  if (!base && bytes) return code(am::detail::error(Status::bad_arg, "am_enable_segment: null base"));
  am::Config c = am::Config::from_env();
  c.segment = base;
  c.segment_bytes = base ? bytes : 0;
  return code(am::enable(c));
}
int am_disable(void) { return code(am::disable()); }
int am_procs(void) { return am::procs(); }
int am_my_proc(void) { return am::my_proc(); }
size_t am_max_size(void) { return am::max_size(); }
void* am_segment(int proc) { return am::segment(proc); }
size_t am_segment_size(int proc) { return am::segment_size(proc); }

int am_set_handler(int index, am_handler_t handler) {
  if (!handler) return code(am::detail::error(Status::bad_arg, "null handler"));
  return code(am::detail::set_handler(index, am::detail::HandlerKind::words, [handler](const am::detail::Delivery& d) {
    handler(d.src, d.arg(0), d.arg(1), d.arg(2), d.arg(3));
  }, nullptr));
}
int am_set_medium_handler(int index, am_medium_handler_t handler) {
  if (!handler) return code(am::detail::error(Status::bad_arg, "null handler"));
  return code(am::detail::set_handler(index, am::detail::HandlerKind::payload, [handler](const am::detail::Delivery& d) {
    handler(d.src, d.payload, d.bytes, d.arg(0), d.arg(1), d.arg(2), d.arg(3));
  }, nullptr));
}
int am_set_mem_handler(int index, am_mem_handler_t handler) {
  if (!handler) return code(am::detail::error(Status::bad_arg, "null handler"));
  return code(am::set_mem_handler(index, handler));
}
void am_set_error_handler(am_error_handler_t handler) {
  if (handler)
    am::set_error_handler([handler](const am::Returned& r) { handler(&r); });
  else
    am::set_error_handler(nullptr);
}

int am_request_0(int dest, int h) { return send(false, dest, h, 0, 0, 0, 0, 0); }
int am_request_1(int dest, int h, am_word_t a0) { return send(false, dest, h, 1, a0, 0, 0, 0); }
int am_request_2(int dest, int h, am_word_t a0, am_word_t a1) { return send(false, dest, h, 2, a0, a1, 0, 0); }
int am_request_3(int dest, int h, am_word_t a0, am_word_t a1, am_word_t a2) {
  return send(false, dest, h, 3, a0, a1, a2, 0);
}
int am_request_4(int dest, int h, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  return send(false, dest, h, 4, a0, a1, a2, a3);
}
int am_request_medium(int dest, int h, const void* buf, size_t nbytes, int nargs, const am_word_t* args) {
  return send_medium(false, dest, h, buf, nbytes, nargs, args);
}
int am_reply_0(int dest, int h) { return send(true, dest, h, 0, 0, 0, 0, 0); }
int am_reply_1(int dest, int h, am_word_t a0) { return send(true, dest, h, 1, a0, 0, 0, 0); }
int am_reply_2(int dest, int h, am_word_t a0, am_word_t a1) { return send(true, dest, h, 2, a0, a1, 0, 0); }
int am_reply_3(int dest, int h, am_word_t a0, am_word_t a1, am_word_t a2) { return send(true, dest, h, 3, a0, a1, a2, 0); }
int am_reply_4(int dest, int h, am_word_t a0, am_word_t a1, am_word_t a2, am_word_t a3) {
  return send(true, dest, h, 4, a0, a1, a2, a3);
}
int am_reply_medium(int dest, int h, const void* buf, size_t nbytes, int nargs, const am_word_t* args) {
  return send_medium(true, dest, h, buf, nbytes, nargs, args);
}

int am_store(int dest, const void* lva, void* rva, size_t n, int handler, am_word_t arg) {
  Runtime* rt = Runtime::get();
  if (!rt) return not_enabled();
  bool reusable = false;
  const Status s = rt->bulk().store(dest, lva, rva, n, handler, arg, [](void* flag) { *static_cast<bool*>(flag) = true; },
                             &reusable, nullptr);
  if (s == Status::ok) rt->core().wait_local(reusable);
  return code(s);
}
int am_store_async(int dest, const void* lva, void* rva, size_t n, int handler, am_word_t arg, am_completion_t done,
                   void* done_arg) {
  Runtime* rt = Runtime::get();
  return rt ? code(rt->bulk().store(dest, lva, rva, n, handler, arg, done, done_arg, nullptr)) : not_enabled();
}
int am_get(int dest, void* rva, void* lva, size_t n, int handler, am_word_t arg) {
  Runtime* rt = Runtime::get();
  return rt ? code(rt->bulk().get(dest, rva, lva, n, handler, arg, nullptr)) : not_enabled();
}

int am_poll(void) { return am::poll(); }
int am_wait_until(int (*pred)(void*), void* arg) {
  if (!pred) return code(am::detail::error(Status::bad_arg, "am_wait_until: no predicate"));
  return code(am::wait_until([pred, arg] { return pred(arg) != 0; }));
}
int am_barrier(void) { return code(am::barrier()); }
int am_wait_acknowledged(void) { return code(am::wait_acknowledged()); }
void am_get_counters(am_counters_t* out) {
  if (out) *out = am::counters();
}
const char* am_last_error(void) { return am::last_error(); }

}  // extern "C"
