// A short AM program whose traffic tests/trace/check_via_trace.sh counts in
// the VIA trace: rank 0 sends rank 1 `requests` requests (handler 5, each
// answered by a reply to handler 6), then `deferred` deferred requests
// (handler 7, bundled), then stores 8 KiB into rank 1's segment (whole, in
// one message on reliable VIs), and 64 KiB behind it (an RDMA write), and
// gets those back (an RDMA read). Each rank checks what it saw.
//
//   viarun -n 2 tests/trace/am_traced REQUESTS DEFERRED
#include <am/am.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kRequest = 5, kReply = 6, kDeferred = 7;
constexpr std::size_t kWhole = 8192, kBlock = 65536;

int fail(const char* what) {
  std::fprintf(stderr, "am_traced rank %d: %s (%s)\n", am::my_proc(), what, am::last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: am_traced REQUESTS DEFERRED\n");
    return 2;
  }
  const long requests = std::strtol(argv[1], nullptr, 10), deferred = std::strtol(argv[2], nullptr, 10);
  long requests_seen = 0, replies_seen = 0, deferred_seen = 0;
  am::set_handler(kRequest, [&](am::Token token, am::Word i) {
    ++requests_seen;
    token.reply(kReply, i);
  });
  am::set_handler(kReply, [&](am::Token, am::Word) { ++replies_seen; });
  am::set_handler(kDeferred, [&](am::Token, am::Word) { ++deferred_seen; });
  if (am::enable() != am::Status::ok) return fail("am::enable");
  if (am::procs() != 2) return fail("run me on 2 ranks");
  if (am::my_proc() == 0) {
    for (long i = 0; i < requests; ++i)
      if (am::request(1, kRequest, am::Word(i)) != am::Status::ok) return fail("request");
    if (am::wait_until([&] { return replies_seen == requests; }) != am::Status::ok) return fail("replies");
    for (long i = 0; i < deferred; ++i)
      if (am::request_deferred(1, kDeferred, am::Word(i)) != am::Status::ok) return fail("deferred request");
    am::flush();
    if (am::wait_acknowledged() != am::Status::ok) return fail("acknowledgements");
    std::vector<unsigned char> out(kBlock), back(kBlock);
    for (std::size_t i = 0; i < kBlock; ++i) out[i] = static_cast<unsigned char>(i * 7 + 1);
    auto* remote = static_cast<unsigned char*>(am::segment(1));
    if (am::store(1, out.data(), remote + kBlock, kWhole).wait() != am::Status::ok) return fail("whole store");
    if (am::store(1, out.data(), remote, kBlock).wait() != am::Status::ok) return fail("store");
    if (am::get(1, remote, back.data(), kBlock).wait() != am::Status::ok) return fail("get");
    if (std::memcmp(out.data(), back.data(), kBlock) != 0) return fail("the block came back different");
  }
  if (am::barrier() != am::Status::ok) return fail("barrier");
  if (am::my_proc() == 1 && (requests_seen != requests || deferred_seen != deferred)) return fail("messages missing");
  if (am::disable() != am::Status::ok) return fail("am::disable");
  return 0;
}
