// Generic Active Messages, C++ API. The same implementation as am.h's C API:
// one runtime per process, explicit progress (poll(), the waits, and the
// other calls: a request, store or get polls once in 8, and whenever it waits
// for a credit).
//
//   am::enable();
//   am::set_handler(kPing, [](am::Token t, int x) { t.reply(kPong, x + 1); });
//   am::set_handler(kPong, [&](am::Token, int x) { got = x; });
//   am::request(peer, kPing, 41);
//   while (!got) am::poll();
#pragma once

#include <am.h>

#include "am/deferred.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace am {

using Word = am_word_t;
using Counters = am_counters_t;
using Returned = am_returned_t;
inline constexpr int kNoHandler = -1;  // store/get without a handler

enum class Status : int {
  ok = AM_OK,
  not_init = AM_ERR_NOT_INIT,
  bad_arg = AM_ERR_BAD_ARG,
  resource = AM_ERR_RESOURCE,
  not_in_handler = AM_ERR_NOT_IN_HANDLER,
  unreachable = AM_ERR_UNREACHABLE,
  too_large = AM_ERR_TOO_LARGE,
  enable_failed = AM_ERR_ENABLE,
};
const char* describe(Status s);

enum class Reliability { reliable, unreliable };

struct Config {
  Reliability reliability = Reliability::reliable;
  unsigned depth = 32;            // outstanding requests per peer
  std::uint64_t timeout_ms = 10000;  // peer timeout: silence after which a peer is dead (at least)
  std::uint64_t retransmit_ms = 20;  // smallest retransmission timeout (unreliable VIs)
  std::size_t segment_bytes = 16u << 20;
  void* segment = nullptr;        // use this memory as the segment instead of allocating
  // The defaults overridden by VIASTACK_AM_* (see am.h); a bad value stops the
  // program with one line naming it (via/config.hpp).
  static Config from_env();
};

namespace detail {
// One message as a handler sees it.
struct Delivery {
  int src;
  unsigned nargs;
  const std::byte* args;  // nargs words, where they arrived
  std::byte* payload;
  std::size_t bytes;
  // Argument i, 0 past nargs. Each is read on its own from where it
  // arrived: words copied out one by one first, then read two at a time
  // (as compilers do for a pair of adjacent words), would stall the CPU.
  Word arg(unsigned i) const {
    Word w = 0;
    if (i < nargs) std::memcpy(&w, args + i * sizeof(Word), sizeof(Word));
    return w;
  }
};
enum class HandlerKind { words, payload };
Status set_handler(int index, HandlerKind kind, std::function<void(const Delivery&)> fn,
                   const char* owner);
Status send(bool reply, int dest, int handler, const Word* args, unsigned nargs, const void* payload, std::size_t bytes);
Status send_deferred(int dest, int handler, const Word* args, unsigned nargs);
struct Completion {
  bool done = false;
  Status status = Status::ok;
};
Status wait(const Completion& c);

template <class T>
T from_word(Word w) {
  if constexpr (std::is_pointer_v<T>)
    return reinterpret_cast<T>(static_cast<std::uintptr_t>(w));
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(std::bit_cast<double>(w));
  else
    return static_cast<T>(w);
}
template <class T>
Word to_word(T v) {
  if constexpr (std::is_pointer_v<T>)
    return static_cast<Word>(reinterpret_cast<std::uintptr_t>(v));
  else if constexpr (std::is_floating_point_v<T>)
    return std::bit_cast<Word>(static_cast<double>(v));
  else
    return static_cast<Word>(v);
}

template <class F>
struct Signature : Signature<decltype(&F::operator())> {};
template <class R, class... A>
struct Signature<R (*)(A...)> {
  using Args = std::tuple<std::decay_t<A>...>;
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> : Signature<R (*)(A...)> {};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> : Signature<R (*)(A...)> {};

template <class Args, bool = (std::tuple_size_v<Args> >= 2)>
struct SecondIsPayload : std::false_type {};
template <class Args>
struct SecondIsPayload<Args, true> : std::is_same<std::tuple_element_t<1, Args>, std::span<std::byte>> {};

// What a handler's parameter list says: (Token, [payload,] words...).
template <class F>
struct HandlerShape {
  using Args = typename Signature<F>::Args;
  static constexpr bool with_payload = SecondIsPayload<Args>::value;
  static constexpr std::size_t first_word = with_payload ? 2 : 1;
  static constexpr std::size_t words = std::tuple_size_v<Args> - first_word;
};
}  // namespace detail

// The message being handled: who sent it, and the one reply a request may get.
class Token {
 public:
  explicit Token(int src) : src_(src) {}
  int src() const { return src_; }
  template <class... A>
  Status reply(int handler, A... args) const {
    static_assert(sizeof...(A) <= 4, "at most 4 arguments");
    const Word words[4] = {detail::to_word(args)...};
    return detail::send(true, src_, handler, words, sizeof...(A), nullptr, 0);
  }
  template <class... A>
  Status reply_payload(int handler, std::span<const std::byte> payload, A... args) const {
    static_assert(sizeof...(A) <= 4, "at most 4 arguments");
    const Word words[4] = {detail::to_word(args)...};
    return detail::send(true, src_, handler, words, sizeof...(A), payload.data(), payload.size());
  }

 private:
  int src_;
};

// Keeps handler indices first..last for `owner`, a library built on AM that
// names itself (Split-C reserves 224..239 at init): from then on
// set_handler and set_mem_handler refuse them (Status::bad_arg, last_error()
// naming the owner) unless given the same owner, and so do the C API's
// am_set_handler, am_set_medium_handler and am_set_mem_handler. Fails if
// another owner holds one of them, or one already has a handler nobody
// reserved it for. Reserving again what the owner holds changes nothing;
// a reservation lasts as long as the process.
Status reserve_handlers(int first, int last, const char* owner);

// Registers a handler at `index` (the same on every rank). F is called as
// f(Token, args...) with up to 4 arguments of integral, floating-point or
// pointer type, or f(Token, std::span<std::byte> payload, args...).
// `owner`: who reserved the index (reserve_handlers), if anyone did.
template <class F>
Status set_handler(int index, F f, const char* owner = nullptr) {
  using Shape = detail::HandlerShape<F>;
  using Args = typename Shape::Args;
  static_assert(std::tuple_size_v<Args> >= 1 && std::is_same_v<std::tuple_element_t<0, Args>, Token>,
                "a handler's first parameter is am::Token");
  static_assert(Shape::words <= 4, "at most 4 arguments");
  auto call = [f = std::move(f)](const detail::Delivery& d) mutable {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      if constexpr (Shape::with_payload)
        f(Token(d.src), std::span<std::byte>(d.payload, d.bytes),
          detail::from_word<std::tuple_element_t<Shape::first_word + I, Args>>(d.arg(I))...);
      else
        f(Token(d.src), detail::from_word<std::tuple_element_t<Shape::first_word + I, Args>>(d.arg(I))...);
    }(std::make_index_sequence<Shape::words>{});
  };
  return detail::set_handler(index, Shape::with_payload ? detail::HandlerKind::payload : detail::HandlerKind::words,
                             std::move(call), owner);
}

// Store handlers run at the destination; get handlers at the initiator.
Status set_mem_handler(int index, std::function<void(int src, void* addr, std::size_t bytes, Word arg)> fn,
                       const char* owner = nullptr);
void set_error_handler(std::function<void(const Returned&)> fn);

template <class... A>
Status request(int dest, int handler, A... args) {
  static_assert(sizeof...(A) <= 4, "at most 4 arguments");
  const Word words[4] = {detail::to_word(args)...};
  return detail::send(false, dest, handler, words, sizeof...(A), nullptr, 0);
}
// As request, but the message may wait, bundled with other deferred ones to
// `dest` into one message, until the bundle is full or this process next
// polls, waits, or sends `dest` a request that is not deferred (flush() sends
// every bundle at once). Delivery is as reliable and as ordered as request's;
// a bundle takes one credit and one answer, so streams of small messages
// (Split-C's gets, puts and stores) cost far less each, at the price of their
// leaving later. The handler may reply: the replies to one bundle go back
// together in one message of am_max_size() bytes. A reply of words alone
// always fits; one with a payload that does not fails with Status::too_large.
// A layer that sends many, from its own inline code, writes them into the
// bundle itself: am/deferred.hpp.
template <class... A>
Status request_deferred(int dest, int handler, A... args) {
  static_assert(sizeof...(A) <= 4, "at most 4 arguments");
  const Word words[4] = {detail::to_word(args)...};
  return detail::send_deferred(dest, handler, words, sizeof...(A));
}
template <class... A>
Status request_payload(int dest, int handler, std::span<const std::byte> payload, A... args) {
  static_assert(sizeof...(A) <= 4, "at most 4 arguments");
  const Word words[4] = {detail::to_word(args)...};
  return detail::send(false, dest, handler, words, sizeof...(A), payload.data(), payload.size());
}

// Completion of a store or get: ready once the remote handler ran (store) or
// the data is here and the local handler ran (get).
class Future {
 public:
  Future() = default;
  explicit Future(Status immediate) : state_(std::make_shared<detail::Completion>(detail::Completion{true, immediate})) {}
  explicit Future(std::shared_ptr<detail::Completion> s) : state_(std::move(s)) {}
  bool ready() const { return !state_ || state_->done; }
  // Polls until ready; the operation's outcome.
  Status wait() const { return state_ ? detail::wait(*state_) : Status::ok; }
  Status status() const { return state_ ? state_->status : Status::ok; }

 private:
  std::shared_ptr<detail::Completion> state_;
};

Status enable(const Config& config = Config::from_env());
Status disable();
int procs();
int my_proc();
std::size_t max_size();
void* segment(int proc);
std::size_t segment_size(int proc);

Future store(int dest, const void* local, void* remote, std::size_t bytes, int handler = kNoHandler, Word arg = 0);
Future get(int dest, const void* remote, void* local, std::size_t bytes, int handler = kNoHandler, Word arg = 0);
int poll();
// Sends the deferred messages waiting in bundles now.
void flush();
// Handles messages until pred() holds, as Future::wait does: polls, and
// between messages sleeps in the NIC's wait rather than spinning. pred
// usually reads what handlers set. Returns Status::ok once pred() holds;
// not from inside a handler (Status::bad_arg). Messages that come back run
// the error handler during the wait: for the wait to end on such a failure,
// let the error handler set something pred reads.
Status wait_until(const std::function<bool()>& pred);
Status barrier();
// Handles messages until every request sent so far has been answered: its
// handler's reply arrived, or (a handler that did not reply) the destination
// acknowledged it, after the handler ran. Not from inside a handler.
Status wait_acknowledged();
Counters counters();
// How many peers AM has given up on (timed out, or their VI broke: the
// process died or left). A peer may fail while nothing is outstanding to it,
// so that no message comes back: a wait for something only a peer can do
// (its request) reads this in its predicate to end when the peer is gone.
int failed_peers();
// The peers this rank has a VI to: those it exchanged a message with
// (connections are made on first use).
int peers_in_use();
const char* last_error();

}  // namespace am
