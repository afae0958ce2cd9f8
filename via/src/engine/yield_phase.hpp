// How long a wait keeps polling, yielding the core between polls, before it
// sleeps in the kernel. A sleep is cheap for a wait that lasts long, dear for
// one that ends soon after: the sleeper announces itself (a membarrier), the
// peer that ends the wait rings its doorbell (a system call) and the woken
// rank waits for a core again. Where ranks outnumber cores the yield phase is
// short, since there every yield lets an idle rank poll between the polls of
// the ranks with work (4 ranks on 2 cores, two waiting in a broadcast while
// the other two stream 8-byte messages both ways: 0.65 x Open MPI's rate
// yielding for 1000 us, 0.9 x for 100). But where a process's waits are all a
// few hundred microseconds long (4 ranks on 2 cores, 1 MiB collectives, each
// rank waiting for the others' copies), each of them then ends in a sleep:
// iscatter took 589 us a call yielding for 100 us, 381 for 1000, Open MPI
// 318. So there the phase grows to cover the NIC's recent waits while they
// all end within the longest phase, and falls back as soon as one does not.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace via {

class YieldPhase {
 public:
  // The waits remembered: the phase covers the longest of them.
  static constexpr std::size_t kRemembered = 8;

  // A phase of `shortest` ns, growing up to `longest` (equal: fixed).
  YieldPhase(std::uint64_t shortest, std::uint64_t longest) : shortest_(shortest), longest_(std::max(shortest, longest)) {}

  // For the next wait: twice the longest recent wait, within [shortest,
  // longest]; the shortest when any recent wait outlasted the longest phase
  // (such a wait sleeps anyway: the yielding before it only took the core
  // from the ranks with work).
  std::uint64_t length() const {
    if (shortest_ == longest_) return shortest_;
    const std::uint64_t recent = *std::max_element(recent_.begin(), recent_.end());
    if (recent > longest_) return shortest_;
    return std::clamp(2 * recent, shortest_, longest_);
  }

  // A wait that went past its first look ended after `ns`.
  void waited(std::uint64_t ns) {
    recent_[next_] = ns;
    next_ = (next_ + 1) % kRemembered;
  }

 private:
  std::uint64_t shortest_, longest_;
  std::array<std::uint64_t, kRemembered> recent_{};
  std::size_t next_ = 0;
};

}  // namespace via
