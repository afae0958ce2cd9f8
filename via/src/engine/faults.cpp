#include "engine/faults.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>

#include "providers/provider.hpp"
#include "via/log.hpp"

namespace via {

namespace {

// A frame held back to be reordered goes out behind the next frame, or after
// this long when no next frame comes. Which of the two happens depends on
// timing, so a seed replays the same faults as long as a sender offers its
// frames less than this apart: generous, for runs on loaded machines.
constexpr std::uint64_t kReorderLimitNs = 20'000'000;
constexpr std::size_t kMaxHeld = 64;

bool parse_probability(std::string_view value, double& out) {
  // std::from_chars for double is not in GCC 12's library: parse by hand.
  std::string text(value);
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && out >= 0 && out <= 1;
}

template <class T>
bool parse_integer(std::string_view value, T& out) {
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  return ec == std::errc() && ptr == value.data() + value.size();
}

}  // namespace

bool parse_fault_plan(std::string_view text, FaultPlan& out, std::string& error) {
  FaultPlan plan;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq), value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    bool ok;
    if (key == "drop")
      ok = parse_probability(value, plan.drop);
    else if (key == "dup")
      ok = parse_probability(value, plan.dup);
    else if (key == "reorder")
      ok = parse_probability(value, plan.reorder);
    else if (key == "delay_us")
      ok = parse_integer(value, plan.delay_us);
    else if (key == "seed")
      ok = parse_integer(value, plan.seed);
    else {
      error = "unknown fault '" + std::string(key) + "' (known: drop, dup, reorder, delay_us, seed)";
      return false;
    }
    if (!ok) {
      error = "bad value '" + std::string(value) + "' for " + std::string(key) +
              (key == "delay_us" || key == "seed" ? " (expected a whole number)" : " (expected a probability 0..1)");
      return false;
    }
  }
  out = plan;
  return true;
}

void note_connection_under_faults(bool any_unreliable_vi) {
  static std::atomic<bool> first{true};
  if (!first.exchange(false) || any_unreliable_vi) return;
  VIA_LOG(warn, "via",
          "VIASTACK_FAULTS is set, but every VI of this process is reliable: no fault will be injected (faults "
          "act on unreliable VIs only; for Active Messages set VIASTACK_AM_RELIABILITY=unreliable, in a VIPL "
          "program create the VIs with VIP_SERVICE_UNRELIABLE)");
}

FaultInjector::FaultInjector(const FaultPlan& plan, std::uint64_t stream_seed, NicCounters& counters)
    : plan_(plan), rng_(plan.seed ^ (stream_seed * 0x9E3779B97F4A7C15ull)), counters_(counters) {}

void FaultInjector::hold(const FrameHeader& header, const iovec* iov, std::size_t iovcnt, std::uint64_t due_ns,
                         bool behind_next, bool duplicate) {
  Held h{header, {}, due_ns, next_seq_++, behind_next, duplicate};
  for (std::size_t i = 0; i < iovcnt; ++i) {
    auto* p = static_cast<const std::byte*>(iov[i].iov_base);
    h.payload.insert(h.payload.end(), p, p + iov[i].iov_len);
  }
  held_.push_back(std::move(h));
}

void FaultInjector::release_behind(std::uint64_t seq) {
  for (Held& h : held_) {
    if (h.behind_next && h.seq < seq) {
      h.behind_next = false;
      h.due_ns = 0;
    }
  }
}

// Every frame draws its fate exactly once, in the order frames are offered,
// so a seed reproduces the same faults whatever the timing.
bool FaultInjector::send(Link& link, const FrameHeader& header, const iovec* iov, std::size_t iovcnt,
                         std::uint64_t now_ns) {
  flush(link, now_ns);
  if (held_.size() >= kMaxHeld) return false;  // the link is backed up: the caller retries later
  if (chance(plan_.drop)) {
    ++counters_.faults_dropped;
    return true;
  }
  const bool duplicate = chance(plan_.dup);
  if (chance(plan_.reorder)) {
    ++counters_.faults_reordered;
    hold(header, iov, iovcnt, now_ns + std::max<std::uint64_t>(kReorderLimitNs, plan_.delay_us * 1000ull), true,
         duplicate);
    return true;
  }
  if (plan_.delay_us > 0) ++counters_.faults_delayed;
  // Through the queue, so that the frame keeps its place behind frames that
  // are already due and releases the ones held back behind it.
  hold(header, iov, iovcnt, plan_.delay_us ? now_ns + plan_.delay_us * 1000ull : 0, false, duplicate);
  flush(link, now_ns);
  return true;
}

void FaultInjector::flush(Link& link, std::uint64_t now_ns) {
  for (auto it = held_.begin(); it != held_.end();) {
    // A frame held back to be reordered waits for the next frame to go out
    // first; its time limit only frees it when no frame follows it at all,
    // so a slow link cannot change which frames change places.
    if (it->due_ns > now_ns || (it->behind_next && std::next(it) != held_.end())) {
      ++it;
      continue;
    }
    iovec payload{it->payload.data(), it->payload.size()};
    if (!link.try_send(it->header, &payload, payload.iov_len ? 1 : 0)) return;
    if (it->duplicate) {
      // The copy stays queued, due now, until the link takes it too: a full
      // link must not decide whether a drawn duplicate happens.
      it->duplicate = false;
      ++counters_.faults_duplicated;
      continue;
    }
    const bool releases = !it->behind_next;
    const std::uint64_t seq = it->seq;
    held_.erase(it);
    if (releases) release_behind(seq);
    it = held_.begin();  // frames released just now come first
  }
}

}  // namespace via
