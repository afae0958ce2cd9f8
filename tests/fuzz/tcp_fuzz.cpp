// libFuzzer target for the tcp provider's parsers: whatever a stranger or a
// broken peer writes must be refused or parsed, never crash or read outside
// the bytes received.
//
// The first input byte chooses what the rest feeds:
//   even: the four control-message decoders (wire.hpp), on the whole rest and
//         on its prefix of each message's size; whatever decodes must encode
//         back to the same bytes.
//   odd:  a TcpLink's stream parser. The rest is written into one end of a
//         socketpair (as much as fits), that end is shut down, and the other
//         end, wrapped as an Asio tcp socket, is read the way the engine
//         reads it: peek, touch every payload byte, pop, until nothing more
//         comes, readying the socket's wake-up for the frame half read after
//         each miss, as the provider does before it sleeps; then the link's
//         verdict on the peer (peer_state()).
//
// A unix socket is wrapped as a tcp one so that no port is needed; the link's
// TCP socket options then fail with EOPNOTSUPP, which it ignores.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "providers/tcp/tcp_link.hpp"
#include "providers/tcp/wire.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;
namespace tcp = via::tcp;

void check(bool ok) {
  if (!ok) std::abort();
}

void fuzz_decoders(std::span<const std::uint8_t> in) {
  std::string error;
  auto prefix = [&](std::size_t n) { return in.first(std::min(n, in.size())); };
  for (std::span<const std::uint8_t> s : {in, prefix(tcp::Hello::kBytes)}) {
    error.clear();
    if (auto m = tcp::decode_hello(s, error)) check(tcp::encode(*m) == Bytes(s.begin(), s.end()));
    else check(!error.empty());
  }
  for (std::span<const std::uint8_t> s : {in, prefix(tcp::Challenge::kBytes)}) {
    error.clear();
    if (auto m = tcp::decode_challenge(s, error)) check(tcp::encode(*m) == Bytes(s.begin(), s.end()));
    else check(!error.empty());
  }
  for (std::span<const std::uint8_t> s : {in, prefix(tcp::ConnectResponse::kBytes)}) {
    error.clear();
    if (auto m = tcp::decode_response(s, error)) check(tcp::encode(*m) == Bytes(s.begin(), s.end()));
    else check(!error.empty());
  }
  for (std::span<const std::uint8_t> s : {in, prefix(tcp::ConnectRequest::kBytes)}) {
    error.clear();
    auto m = tcp::decode_request(s, error);
    if (!m) {
      check(!error.empty());
      continue;
    }
    check(m->local_disc.size() <= tcp::kMaxDiscriminator && m->target_disc.size() <= tcp::kMaxDiscriminator);
    // The same bytes, but for the padding after each discriminator, which the decoder ignores.
    const Bytes again = tcp::encode(*m);
    check(again.size() == s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      const bool local_pad = i >= 20 + m->local_disc.size() && i < 20 + tcp::kMaxDiscriminator;
      const bool target_pad = i >= 36 + m->target_disc.size();
      check(local_pad || target_pad || again[i] == s[i]);
    }
  }
}

void fuzz_stream(std::span<const std::uint8_t> in) {
  static asio::io_context io;
  int fds[2];
  check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  const int writer = fds[1];
  fcntl(writer, F_SETFL, O_NONBLOCK);
  for (std::size_t at = 0; at < in.size();) {
    const ssize_t n = ::send(writer, in.data() + at, in.size() - at, MSG_NOSIGNAL);
    if (n <= 0) break;  // full: the rest does not fit
    at += std::size_t(n);
  }
  ::shutdown(writer, SHUT_WR);

  asio::ip::tcp::socket socket(io);
  asio::error_code ec;
  socket.assign(asio::ip::tcp::v4(), fds[0], ec);
  check(!ec);
  {
    tcp::TcpLink link(std::move(socket), "fuzz", nullptr);
    const via::FrameHeader* h = nullptr;
    const std::byte* payload = nullptr;
    unsigned sum = 0;
    bool oversized = false;
    // peek() reads from the kernel once per call: a miss may be followed by
    // more bytes, or by the end of the stream, which the next call notices.
    for (int misses = 0; misses < 3;) {
      if (!link.peek(h, payload)) {
        if (!link.frame_buffered()) link.wake_when_frame_complete();
        ++misses;
        continue;
      }
      misses = 0;
      if (h->length > link.max_payload()) {
        check(payload == nullptr);
        oversized = true;
        break;  // the engine breaks the VI here and reads no further
      }
      check(payload != nullptr);
      for (std::size_t i = 0; i < h->length; ++i) sum += unsigned(payload[i]);
      link.pop();
    }
    const auto state = link.peer_state();
    // The writer shut down: once the stream was read to its end, the link knows.
    check(oversized || state != via::Link::PeerState::up);
    if (state == via::Link::PeerState::broken) check(!link.broken_reason().empty());
    link.close(true);
    if (sum == 0xFFFFFFFFu) std::abort();  // keeps the payload reads
  }
  ::close(writer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  if (data[0] % 2 == 0)
    fuzz_decoders(rest);
  else
    fuzz_stream(rest);
  return 0;
}
