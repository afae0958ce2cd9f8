// Injected faults on unreliable VIs (VIASTACK_FAULTS), so that the layers
// that build reliability on top of them (Active Messages, the user-level TCP)
// can be tested against loss, duplication, reordering and delay on every
// provider, reproducibly from a seed. Only data frames are touched; control
// frames (acknowledgements, read requests and responses) pass unharmed.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/frame.hpp"
#include "via/via.hpp"

namespace via {

class Link;

struct FaultPlan {
  double drop = 0;     // probability that a frame is lost
  double dup = 0;      // probability that a frame is sent twice
  double reorder = 0;  // probability that a frame is held back behind the next one
  std::uint32_t delay_us = 0;  // every frame is held this long
  std::uint64_t seed = 1;
  bool any() const { return drop > 0 || dup > 0 || reorder > 0 || delay_us > 0; }
};

// Called as a VI connects while VIASTACK_FAULTS is set: at the process's
// first connection, when no VI of its NIC is unreliable, says once in the log
// that no fault will be injected and how to get some.
void note_connection_under_faults(bool any_unreliable_vi);

// Parses "drop=0.01,dup=0.01,reorder=0.01,delay_us=50,seed=N" (any subset, any
// order). Returns false and says why on anything else.
bool parse_fault_plan(std::string_view text, FaultPlan& out, std::string& error);

class FaultInjector {
 public:
  FaultInjector(const FaultPlan& plan, std::uint64_t stream_seed, NicCounters& counters);
  // Sends, drops, duplicates or holds one frame; false only when the link had
  // no room (nothing was decided then: the caller retries the same frame).
  bool send(Link& link, const FrameHeader& header, const iovec* iov, std::size_t iovcnt, std::uint64_t now_ns);
  // Sends the held frames that are due.
  void flush(Link& link, std::uint64_t now_ns);
  bool holding() const { return !held_.empty(); }

 private:
  struct Held {
    FrameHeader header;
    std::vector<std::byte> payload;
    std::uint64_t due_ns;
    std::uint64_t seq;  // order in which frames were offered
    bool behind_next;  // released as soon as a later frame has gone out
    bool duplicate;    // goes out twice
  };
  bool chance(double p) { return p > 0 && uniform_(rng_) < p; }
  // Frames held back behind frame `seq` become due.
  void release_behind(std::uint64_t seq);
  void hold(const FrameHeader& header, const iovec* iov, std::size_t iovcnt, std::uint64_t due_ns, bool behind_next,
            bool duplicate);

  FaultPlan plan_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  std::deque<Held> held_;
  std::uint64_t next_seq_ = 0;
  NicCounters& counters_;
};

}  // namespace via
