// Sample sort and radix sort of random 32-bit keys. The small-message and
// bulk variants differ only in send_run: one store per key, or one
// bulk_store per run of keys bound for the same place.
#include <algorithm>
#include <numeric>
#include <vector>

#include "suite.hpp"

namespace suite {
namespace {

using Key = std::uint32_t;
constexpr std::size_t kSamplesPerRank = 128;
constexpr int kDigitBits = 8;
constexpr std::size_t kBuckets = std::size_t(1) << kDigitBits;

std::string keys_problem(std::size_t keys) { return std::to_string(keys) + " keys"; }

// A permutation-invariant fingerprint of a multiset of keys.
std::uint64_t fingerprint(std::span<const Key> keys) {
  std::uint64_t sum = 0;
  for (Key k : keys) {
    std::uint64_t z = k * 0x9e3779b97f4a7c15ull;
    sum += z ^ (z >> 29);
  }
  return sum;
}

struct Input {
  std::uint64_t count, fingerprint;
};

Input generate(std::span<Key> keys, std::uint64_t seed) {
  Random random(seed * 1000003 + std::uint64_t(MYPROC));
  for (Key& k : keys) k = Key(random.next());
  return {splitc::all_reduce_to_all(std::uint64_t(keys.size()), splitc::reduce_op::sum),
          splitc::all_reduce_to_all(fingerprint(keys), splitc::reduce_op::sum)};
}

// Sorted here, every key here <= every key on later ranks, and the same keys
// as before the sort.
bool verify(const char* name, std::span<const Key> sorted, const Input& input) {
  const bool local_sorted = std::is_sorted(sorted.begin(), sorted.end());
  const bool same_count =
      splitc::all_reduce_to_all(std::uint64_t(sorted.size()), splitc::reduce_op::sum) == input.count;
  const bool same_keys = splitc::all_reduce_to_all(fingerprint(sorted), splitc::reduce_op::sum) == input.fingerprint;
  // Each rank's largest key (0 when it holds none), read by the later ranks.
  splitc::spread_array<Key> largest(std::size_t(PROCS));
  *largest[std::size_t(MYPROC)].local() = sorted.empty() ? 0 : sorted.back();
  splitc::barrier();
  Key before = 0;
  for (int r = 0; r < MYPROC; ++r) before = std::max(before, splitc::read(largest[std::size_t(r)]));
  const bool ordered = sorted.empty() || before <= sorted.front();
  std::string why = !local_sorted ? "keys not sorted locally"
                    : !ordered    ? "a key on an earlier rank is larger than our first"
                    : !same_count ? "the number of keys changed"
                    : !same_keys  ? "the keys changed"
                                  : "";
  return all_agree(why.empty(), name, why);
}

// Sorts keys made of sorted runs (run i: [bounds[i], bounds[i + 1])) by
// merging neighbouring runs until one is left.
void merge_runs(std::vector<Key>& keys, std::vector<std::size_t> bounds) {
  while (bounds.size() > 2) {
    std::vector<std::size_t> merged{0};
    for (std::size_t i = 0; i + 1 < bounds.size(); i += 2) {
      const std::size_t mid = bounds[i + 1], end = i + 2 < bounds.size() ? bounds[i + 2] : mid;
      std::inplace_merge(keys.begin() + std::ptrdiff_t(bounds[i]), keys.begin() + std::ptrdiff_t(mid),
                         keys.begin() + std::ptrdiff_t(end));
      merged.push_back(end);
    }
    bounds = std::move(merged);
  }
}

}  // namespace

Outcome sample_sort(const Problem& problem, bool bulk) {
  const char* name = bulk ? "ssort_bulk" : "ssort_sm";
  const std::size_t procs = std::size_t(PROCS), me = std::size_t(MYPROC);
  const Even share{problem.total(problem.at().ssort_keys), procs};
  LocalArray<Key> keys(share.count(me));
  const Input input = generate(keys.span(), 1);
  std::vector<Key> result;

  Outcome out;
  out.problem = keys_problem(share.total);
  out.seconds = timed([&] {
    // Samples gathered on rank 0 (one block of procs * S, all on rank 0).
    splitc::spread_array<Key> samples(procs * kSamplesPerRank, procs * kSamplesPerRank);
    {
      Random random(me + 77);
      LocalArray<Key> mine(kSamplesPerRank);
      for (Key& s : mine.span()) s = keys.size() ? keys[random.below(keys.size())] : 0;
      splitc::bulk_store(samples[me * kSamplesPerRank], mine.data(), kSamplesPerRank);
      splitc::all_store_sync();
    }
    std::vector<Key> splitters(procs - 1);
    if (me == 0) {
      std::span<Key> all = samples.local();
      std::sort(all.begin(), all.begin() + std::ptrdiff_t(procs * kSamplesPerRank));
      for (std::size_t i = 0; i + 1 < procs; ++i) splitters[i] = all[(i + 1) * kSamplesPerRank];
    }
    for (Key& s : splitters) s = splitc::all_bcast(s, 0);

    // Our keys in destination order; run q goes to rank q.
    std::sort(keys.data(), keys.data() + keys.size());
    std::vector<std::size_t> run_start(procs + 1, keys.size());
    run_start[0] = 0;
    for (std::size_t q = 1; q < procs; ++q)
      run_start[q] = std::size_t(std::upper_bound(keys.data(), keys.data() + keys.size(), splitters[q - 1]) - keys.data());

    // Counts: incoming[q * P + p] (on rank q) = keys p sends q; rank q answers
    // with where they go: where[p * P + q] (on rank p).
    splitc::spread_array<std::uint64_t> incoming(procs * procs, procs), where(procs * procs, procs);
    for (std::size_t q = 0; q < procs; ++q) splitc::store(incoming[q * procs + me], run_start[q + 1] - run_start[q]);
    splitc::all_store_sync();
    std::uint64_t received = 0;
    std::vector<std::size_t> run_here(procs + 1);  // run p of the keys we receive: from rank p, sorted
    for (std::size_t p = 0; p < procs; ++p) {
      splitc::store(where[p * procs + me], received);
      run_here[p] = received;
      received += incoming.local()[p];
    }
    run_here[procs] = received;
    splitc::all_store_sync();
    const std::size_t capacity = splitc::all_reduce_to_all(received, splitc::reduce_op::max);

    splitc::spread_array<Key> arrived(procs * capacity, capacity);
    for (std::size_t step = 0; step < procs; ++step) {
      const std::size_t q = staggered(step, me, procs);
      send_run(bulk, arrived.base(int(q)) + std::ptrdiff_t(where.local()[q]), keys.data() + run_start[q],
               run_start[q + 1] - run_start[q]);
    }
    splitc::all_store_sync();
    result.assign(arrived.local().begin(), arrived.local().begin() + std::ptrdiff_t(received));
    merge_runs(result, run_here);
  });
  out.verified = verify(name, result, input);
  return out;
}

Outcome radix_sort(const Problem& problem, bool bulk) {
  const char* name = bulk ? "rsort_bulk" : "rsort_sm";
  const std::size_t procs = std::size_t(PROCS), me = std::size_t(MYPROC);
  const Even share{problem.total(problem.at().rsort_keys), procs};
  const std::size_t n = share.count(me), capacity = share.count(0);
  splitc::spread_array<Key> buffer_a(procs * capacity, capacity), buffer_b(procs * capacity, capacity);
  const Input input = generate(buffer_a.local().first(n), 2);

  Outcome out;
  out.problem = keys_problem(share.total);
  splitc::spread_array<Key>* from = &buffer_a;
  splitc::spread_array<Key>* to = &buffer_b;
  out.seconds = timed([&] {
    // histograms[q * P * B + p * B + v] (on every rank q) = keys of digit v on rank p.
    splitc::spread_array<std::uint64_t> histograms(procs * procs * kBuckets, procs * kBuckets);
    LocalArray<std::uint64_t> mine(kBuckets);
    LocalArray<Key> grouped(std::max<std::size_t>(n, 1));
    std::vector<std::uint64_t> next(kBuckets), fill(kBuckets);
    // A run of one digit, or the part of it one rank owns: `count` keys from
    // grouped[from] to offset `offset` of the owner's part.
    struct Piece {
      int owner;
      std::size_t offset, from, count;
    };
    std::vector<Piece> pieces;
    for (int shift = 0; shift < 32; shift += kDigitBits) {
      const Key* src = from->local().data();
      auto digit = [shift](Key k) { return std::size_t(k >> shift) & (kBuckets - 1); };
      std::fill_n(mine.data(), kBuckets, 0);
      for (std::size_t i = 0; i < n; ++i) ++mine[digit(src[i])];
      for (std::size_t step = 0; step < procs; ++step) {
        const std::size_t q = staggered(step, me, procs);
        send_run(bulk, histograms[q * procs * kBuckets + me * kBuckets], mine.data(), kBuckets);
      }
      splitc::all_store_sync();

      // Where our keys of each digit start globally: all keys of smaller
      // digits, then those of this digit on earlier ranks.
      const std::uint64_t* all = histograms.local().data();
      std::uint64_t position = 0;
      for (std::size_t v = 0; v < kBuckets; ++v)
        for (std::size_t p = 0; p < procs; ++p) {
          if (p == me) next[v] = position;
          position += all[p * kBuckets + v];
        }
      // Stable local counting sort into runs of one digit, then each run to
      // its global positions (split where they cross into the next rank).
      for (std::size_t v = 0, at = 0; v < kBuckets; ++v) {
        fill[v] = at;
        at += mine[v];
      }
      for (std::size_t i = 0; i < n; ++i) grouped[fill[digit(src[i])]++] = src[i];
      pieces.clear();
      for (std::size_t v = 0, at = 0; v < kBuckets; at += mine[v], ++v) {
        for (std::size_t done = 0; done < mine[v];) {
          const std::size_t g = next[v] + done;
          const int owner = share.owner(g);
          const std::size_t piece = std::min(mine[v] - done, share.first(std::size_t(owner) + 1) - g);
          pieces.push_back(Piece{owner, g - share.first(std::size_t(owner)), at + done, piece});
          done += piece;
        }
      }
      // Pieces go to their owners in increasing order; sent staggered
      // instead: those for the next rank first, ours last.
      const auto next_rank = std::find_if(pieces.begin(), pieces.end(), [&](const Piece& p) { return p.owner > int(me); });
      std::rotate(pieces.begin(), next_rank, pieces.end());
      for (const Piece& p : pieces) send_run(bulk, to->base(p.owner) + std::ptrdiff_t(p.offset), grouped.data() + p.from, p.count);
      splitc::all_store_sync();
      std::swap(from, to);
    }
  });
  out.verified = verify(name, from->local().first(n), input);
  return out;
}

}  // namespace suite
