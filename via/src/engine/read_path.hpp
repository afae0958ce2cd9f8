// Which way a large RDMA read goes on a link that has both: through the rings
// (the target's engine sends it, two pipelined copies, one on each core) or
// by single copy (CMA, the reader alone). Neither wins on every machine, nor
// on one machine all the time: on a Zen 3 guest whose two vCPUs passed dirty
// data between them at 10-18 GB/s in some runs and 2-4 GB/s in others, a
// 256 KiB read took 16 us through the rings and 22 by CMA in the first kind
// of run, 50-60 and 22 in the second (docs/PERFORMANCE.md). So the choice
// follows the speed each way reached for the last reads of the same size.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace via {

enum class ReadPath : std::uint8_t { rings = 0, direct = 1 };

class ReadPathChooser {
 public:
  // Of every kProbeEvery reads of a size, kProbeBurst in a row go the way
  // that measured slower, so that a change of the machine's state is seen (a
  // few percent of the reads pay for it). In a row: a read one way among
  // reads the other way is slowed by them, as both ends are busy with their
  // copies (2 ranks, bidirectional 1 MiB: 300 us a read by single copy among
  // reads through the rings, 200 when all go by single copy); the median
  // (below) then takes the later ones.
  static constexpr std::uint32_t kProbeEvery = 64, kProbeBurst = 4;

  // Reads from this size that go both ways go by single copy, whatever each
  // way's time. Through the rings each core then copies twice, once for its
  // own reads and once serving the other end's, where by single copy it
  // copies once, and a read's own time does not show it: the serving falls
  // between reads (2 ranks, bidirectional 1 MiB: a read through the rings
  // took 110 us, one by single copy 170, but both ways moved 7.9 GB/s
  // through the rings against 10.4 by single copy). Below it the rings'
  // copies overlap the layers' work on each message, which a single copy
  // holds up, and the times decide (2 ranks, interleaved with Open MPI, 12
  // runs: bidirectional 64 KiB 1.25 x Open MPI through the rings, 0.89 by
  // single copy; 256 KiB 0.78 and 0.93, 1 MiB 0.77 and 0.99).
  static constexpr std::uint64_t kBothWaysSingleCopyFrom = 256 * 1024;
  // Reads of a size go both ways while this process served a peer's read of
  // that size through the rings within its last kBothWaysMemory reads of it.
  // Once both ends read by single copy, only the other end's probes come
  // through the rings: once in every kProbeEvery of its reads.
  static constexpr std::uint32_t kBothWaysMemory = 2 * kProbeEvery;

  // Reads of [smallest, largest) bytes are chosen for; smallest is rounded
  // down to a power of two.
  ReadPathChooser(std::uint64_t smallest, std::uint64_t largest)
      : smallest_(smallest ? std::bit_floor(smallest) : 1), largest_(largest) {}

  bool chooses(std::uint64_t bytes) const { return bytes >= smallest_ && bytes < largest_; }

  // The way for a read of `bytes` (chooses(bytes)): each way once first (by
  // single copy until the first read through the rings has ended: a stream
  // posts many before one ends), then the one of the lower cost (single copy
  // for reads both ways from kBothWaysSingleCopyFrom), but the other for the
  // last kProbeBurst of every kProbeEvery.
  ReadPath choose(std::uint64_t bytes) {
    SizeClass& c = size_class(bytes);
    const std::uint32_t rings = c.way(ReadPath::rings).cost(), direct = c.way(ReadPath::direct).cost();
    if (rings == 0 && !c.rings_tried.exchange(true, std::memory_order_relaxed)) return ReadPath::rings;
    if (rings == 0 || direct == 0) return ReadPath::direct;
    const std::uint32_t n = c.reads.load(std::memory_order_relaxed) + 1;
    const std::uint32_t mark = c.served_mark.load(std::memory_order_relaxed);
    const bool both_ways = mark != 0 && n - mark <= kBothWaysMemory;
    const ReadPath faster = direct < rings || both_ways ? ReadPath::direct : ReadPath::rings;
    c.reads.store(n, std::memory_order_relaxed);  // a count lost to a race only moves a probe
    if (n % kProbeEvery >= kProbeEvery - kProbeBurst)
      return faster == ReadPath::direct ? ReadPath::rings : ReadPath::direct;
    return faster;
  }

  // A read of `bytes` that went `path` took `ns`.
  void record(ReadPath path, std::uint64_t bytes, std::uint64_t ns) {
    size_class(bytes).way(path).add(
        std::uint32_t(std::clamp<std::uint64_t>(ns * 1000 / std::max<std::uint64_t>(bytes, 1), 1, UINT32_MAX)));
  }

  // This process is serving a peer's read of `bytes` through the rings (one
  // the peer could have made by single copy).
  void served(std::uint64_t bytes) {
    if (bytes < kBothWaysSingleCopyFrom) return;
    SizeClass& c = size_class(bytes);
    c.served_mark.store(c.reads.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // Picoseconds a byte for reads of this size that way; 0 before the first.
  std::uint32_t cost(ReadPath path, std::uint64_t bytes) const {
    return size_class(bytes).way(path).cost();
  }

 private:
  // A way's cost: the median of its last kSamples reads (picoseconds a
  // byte). Not a mean: on a shared machine one read in a few is held up by
  // the scheduler or by other work at either end, by several times.
  static constexpr std::size_t kSamples = 8;
  // Several threads may drive VIs of one NIC: relaxed atomics, whose races
  // cost a sample, not a wrong read.
  struct Way {
    std::array<std::atomic<std::uint32_t>, kSamples> samples{};  // 0: none yet
    std::atomic<std::uint32_t> next{0};
    void add(std::uint32_t sample) {
      const std::uint32_t at = next.load(std::memory_order_relaxed);
      next.store(at + 1, std::memory_order_relaxed);
      samples[at % kSamples].store(sample, std::memory_order_relaxed);
    }
    std::uint32_t cost() const {
      std::array<std::uint32_t, kSamples> sorted;
      std::size_t n = 0;
      for (const auto& s : samples)
        if (const std::uint32_t v = s.load(std::memory_order_relaxed)) sorted[n++] = v;
      if (n == 0) return 0;
      std::nth_element(sorted.begin(), sorted.begin() + (n - 1) / 2, sorted.begin() + n);
      return sorted[(n - 1) / 2];
    }
  };
  struct SizeClass {
    std::array<Way, 2> ways;
    std::atomic<std::uint32_t> reads{0};
    std::atomic<bool> rings_tried{false};
    std::atomic<std::uint32_t> served_mark{0};  // 1 + reads when this process last served one (served)
    Way& way(ReadPath path) { return ways[std::size_t(path)]; }
  };
  SizeClass& size_class(std::uint64_t bytes) const {
    return classes_[std::clamp<std::size_t>(std::bit_width(bytes / smallest_), 1, classes_.size()) - 1];
  }

  std::uint64_t smallest_, largest_;
  mutable std::array<SizeClass, 48> classes_;
};

}  // namespace via
