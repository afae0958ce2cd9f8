#include "unexpected_queue.hpp"

#include <utility>

namespace viastack::mpi {

UnexpectedQueue::Sender* UnexpectedQueue::existing(int source) {
  if (source >= 0 && std::size_t(source) < by_rank_.size()) return &by_rank_[std::size_t(source)];
  const auto other = others_.find(source);
  return other == others_.end() ? nullptr : &other->second;
}

Incoming& UnexpectedQueue::append(int source, std::span<const std::byte> data) {
  const bool ranked = source >= 0 && std::size_t(source) < by_rank_.size();
  Sender& s = ranked ? by_rank_[std::size_t(source)] : others_[source];
  s.in_others = !ranked;
  if (s.active_at == kInactive) {
    s.active_at = active_.size();
    active_.push_back(&s);
  }
  if (spare_.empty())
    s.messages.emplace_back();
  else
    s.messages.splice(s.messages.end(), spare_, spare_.begin());
  Incoming& in = s.messages.back();
  std::vector<std::byte> buffer = std::move(in.data);
  in = Incoming{};
  buffer.assign(data.begin(), data.end());
  in.data = std::move(buffer);
  in.source = source;
  in.arrival = arrivals_++;
  return in;
}

std::optional<UnexpectedQueue::Position> UnexpectedQueue::find(int source, int tag, std::uint32_t context) {
  if (source != MPI_ANY_SOURCE) {
    Sender* s = existing(source);
    if (!s) return std::nullopt;
    for (auto it = s->messages.begin(); it != s->messages.end(); ++it)
      if (matches(it->context, it->source, it->tag, context, source, tag)) return Position{s, it};
    return std::nullopt;
  }
  // Each sender's first match; a sender's later messages arrived later, so
  // its walk stops at the first that arrived after the best found so far.
  std::optional<Position> earliest;
  for (Sender* s : active_)
    for (auto it = s->messages.begin(); it != s->messages.end(); ++it) {
      if (earliest && it->arrival > earliest->entry->arrival) break;
      if (matches(it->context, it->source, it->tag, context, source, tag)) {
        earliest = Position{s, it};
        break;
      }
    }
  return earliest;
}

void UnexpectedQueue::left(Sender& s, int source) {
  if (!s.messages.empty()) return;
  Sender* last = active_.back();
  active_[s.active_at] = last;
  last->active_at = s.active_at;
  active_.pop_back();
  s.active_at = kInactive;
  // A source past the ranks keeps no slot it does not use: values off the wire leave nothing behind.
  if (s.in_others) others_.erase(source);
}

void UnexpectedQueue::recycle(Position at) {
  const int source = at.entry->source;
  if (spare_.size() < kSpare)
    spare_.splice(spare_.end(), at.sender->messages, at.entry);
  else
    at.sender->messages.erase(at.entry);
  left(*at.sender, source);
}

Incoming UnexpectedQueue::take(Position at) {
  Incoming in = std::move(*at.entry);
  at.sender->messages.erase(at.entry);
  left(*at.sender, in.source);
  return in;
}

}  // namespace viastack::mpi
