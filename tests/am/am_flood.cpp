// Flood: every rank sends N requests to every other rank (interleaved) and
// each handler replies; every request must be handled exactly once and every
// reply must arrive exactly once, on reliable VIs or on unreliable ones with
// injected faults. Exit 0 only if every count and every byte checks out.
//
//   viarun -n 4 -- am_flood [N]
#include <am.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

enum { kRequest = 1, kMediumRequest = 2, kReply = 3 };
constexpr std::size_t kPayload = 64;

int procs, me;
long n;
std::vector<std::vector<unsigned char>> handled, replied;  // [peer][i]: how many times
long errors = 0;

am_word_t check_of(int src, long i) { return am_word_t(src) * 1000003u + am_word_t(i) * 7919u; }

void count(std::vector<std::vector<unsigned char>>& seen, int peer, am_word_t i, const char* what) {
  if (peer < 0 || peer >= procs || i >= am_word_t(n)) {
    std::fprintf(stderr, "rank %d: %s from rank %d with index %llu out of range\n", me, what, peer,
                 static_cast<unsigned long long>(i));
    ++errors;
    return;
  }
  if (++seen[peer][i] > 1 && seen[peer][i] == 2) {
    std::fprintf(stderr, "rank %d: %s %llu from rank %d seen twice\n", me, what, static_cast<unsigned long long>(i), peer);
    ++errors;
  }
}

void on_request(int src, am_word_t i, am_word_t check, am_word_t, am_word_t) {
  if (check != check_of(src, long(i))) ++errors;
  count(handled, src, i, "request");
  if (am_reply_1(src, kReply, i) != AM_OK) ++errors;
}

void on_medium_request(int src, void* buf, size_t nbytes, am_word_t i, am_word_t, am_word_t, am_word_t) {
  const auto* p = static_cast<const unsigned char*>(buf);
  bool ok = nbytes == kPayload;
  for (std::size_t k = 0; ok && k < nbytes; ++k) ok = p[k] == static_cast<unsigned char>(i + k + src);
  if (!ok) {
    std::fprintf(stderr, "rank %d: payload of request %llu from rank %d corrupt\n", me, static_cast<unsigned long long>(i), src);
    ++errors;
  }
  count(handled, src, i, "request");
  if (am_reply_1(src, kReply, i) != AM_OK) ++errors;
}

void on_reply(int src, am_word_t i, am_word_t, am_word_t, am_word_t) { count(replied, src, i, "reply"); }

void on_returned(const am_returned_t* r) {
  std::fprintf(stderr, "rank %d: message to rank %d returned: %s\n", me, r->dest, r->description);
  ++errors;
}

}  // namespace

int main(int argc, char** argv) {
  n = argc > 1 ? std::atol(argv[1]) : 100000;
  if (n <= 0) {
    std::fprintf(stderr, "am_flood: N must be positive\n");
    return 2;
  }
  am_set_handler(kRequest, on_request);
  am_set_medium_handler(kMediumRequest, on_medium_request);
  am_set_handler(kReply, on_reply);
  am_set_error_handler(on_returned);
  if (am_enable() != AM_OK) {
    std::fprintf(stderr, "am_flood: %s\n", am_last_error());
    return 1;
  }
  procs = am_procs();
  me = am_my_proc();
  handled.assign(procs, std::vector<unsigned char>(n));
  replied.assign(procs, std::vector<unsigned char>(n));
  am_barrier();  // handlers' state is ready everywhere

  unsigned char payload[kPayload];
  for (long i = 0; i < n; ++i) {
    for (int k = 1; k < procs; ++k) {
      const int dest = (me + k) % procs;
      int rc;
      if (i % 8 == 7) {
        for (std::size_t b = 0; b < kPayload; ++b) payload[b] = static_cast<unsigned char>(i + b + me);
        const am_word_t arg = am_word_t(i);
        rc = am_request_medium(dest, kMediumRequest, payload, kPayload, 1, &arg);
      } else {
        rc = am_request_2(dest, kRequest, am_word_t(i), check_of(me, i));
      }
      if (rc != AM_OK) {
        std::fprintf(stderr, "rank %d: request failed: %s\n", me, am_last_error());
        return 1;
      }
    }
  }
  // Everything we sent is answered once every reply is in; then wait for the others.
  auto all_replied = [] {
    for (int p = 0; p < procs; ++p)
      if (p != me)
        for (long i = 0; i < n; ++i)
          if (replied[p][i] == 0) return false;
    return true;
  };
  while (!all_replied() && errors == 0) am_poll();
  am_barrier();

  for (int p = 0; p < procs; ++p) {
    if (p == me) continue;
    for (long i = 0; i < n; ++i)
      if (handled[p][i] != 1 || replied[p][i] != 1) {
        std::fprintf(stderr, "rank %d: request %ld from/to rank %d handled %d times, replied %d times\n", me, i, p,
                     handled[p][i], replied[p][i]);
        ++errors;
        break;
      }
  }
  am_counters_t c;
  am_get_counters(&c);
  std::printf("rank %d: %ld requests to each of %d peers: sent %llu, replies %llu, retransmitted %llu, "
              "duplicates dropped %llu, credit stalls %llu, errors %ld\n",
              me, n, procs - 1, static_cast<unsigned long long>(c.requests_sent),
              static_cast<unsigned long long>(c.replies_sent), static_cast<unsigned long long>(c.retransmitted),
              static_cast<unsigned long long>(c.duplicates_dropped), static_cast<unsigned long long>(c.credit_stalls),
              errors);
  if (am_disable() != AM_OK) {
    std::fprintf(stderr, "rank %d: am_disable: %s\n", me, am_last_error());
    ++errors;
  }
  return errors == 0 ? 0 : 1;
}
