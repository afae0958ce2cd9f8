#include "impairment.hpp"

namespace impair {

std::string ImpairmentSettings::check() const {
  const struct {
    const char* name;
    double value;
  } probabilities[] = {{"loss", loss}, {"reorder", reorder}, {"duplicate", duplicate}, {"corrupt", corrupt}};
  for (const auto& [name, value] : probabilities)
    if (!(value >= 0 && value <= 1)) return std::string(name) + " is a probability from 0 to 1 (0% to 100%)";
  if (delay.count() < 0) return "the delay cannot be negative";
  if (limit == 0) return "the limit is at least one packet";
  return {};
}

ImpairedDirection::ImpairedDirection(const ImpairmentSettings& settings, std::uint64_t seed)
    : settings_(settings), random_(seed) {}

bool ImpairedDirection::happens(double probability) { return probability > 0 && uniform_(random_) < probability; }

void ImpairedDirection::accept(std::span<const std::uint8_t> packet, Clock::time_point now) {
  ++counters_.packets_in;
  if (happens(settings_.loss)) {
    ++counters_.lost;
    return;
  }
  const bool duplicated = happens(settings_.duplicate);
  enqueue(packet, now);
  if (duplicated) {
    ++counters_.duplicated;
    enqueue(packet, now);
  }
}

void ImpairedDirection::enqueue(std::span<const std::uint8_t> packet, Clock::time_point now) {
  if (queue_.size() >= settings_.limit) {
    ++counters_.over_limit;
    return;
  }
  Waiting waiting{now + settings_.delay, next_order_++, {packet.begin(), packet.end()}};
  if (happens(settings_.reorder)) {
    ++counters_.reordered;
    waiting.release = now;
  }
  if (!waiting.bytes.empty() && happens(settings_.corrupt)) {
    ++counters_.corrupted;
    std::uniform_int_distribution<std::size_t> position(0, waiting.bytes.size() * 8 - 1);
    const std::size_t bit = position(random_);
    waiting.bytes[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  }
  queue_.push(std::move(waiting));
}

std::optional<Clock::time_point> ImpairedDirection::next_release() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.top().release;
}

std::size_t ImpairedDirection::release_due(Clock::time_point now,
                                           const std::function<void(std::span<const std::uint8_t>)>& deliver) {
  std::size_t released = 0;
  while (!queue_.empty() && queue_.top().release <= now) {
    // top() is const: take the bytes out before pop() destroys the entry.
    std::vector<std::uint8_t> bytes = std::move(const_cast<Waiting&>(queue_.top()).bytes);
    queue_.pop();
    ++counters_.packets_out;
    ++released;
    deliver(bytes);
  }
  return released;
}

}  // namespace impair
