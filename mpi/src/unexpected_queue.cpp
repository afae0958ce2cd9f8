#include "unexpected_queue.hpp"

#include <utility>

namespace viastack::mpi {

Incoming& UnexpectedQueue::append(int source, std::span<const std::byte> data) {
  List& list = by_source_[source];
  if (spare_.empty())
    list.emplace_back();
  else
    list.splice(list.end(), spare_, spare_.begin());
  Incoming& in = list.back();
  std::vector<std::byte> buffer = std::move(in.data);
  in = Incoming{};
  buffer.assign(data.begin(), data.end());
  in.data = std::move(buffer);
  in.source = source;
  in.arrival = arrivals_++;
  ++count_;
  return in;
}

std::optional<UnexpectedQueue::Position> UnexpectedQueue::find(int source, int tag, std::uint32_t context) {
  const auto first_match = [&](List& list) -> std::optional<Position> {
    for (auto it = list.begin(); it != list.end(); ++it)
      if (matches(it->context, it->source, it->tag, context, source, tag)) return Position{&list, it};
    return std::nullopt;
  };
  if (source != MPI_ANY_SOURCE) {
    const auto list = by_source_.find(source);
    return list == by_source_.end() ? std::nullopt : first_match(list->second);
  }
  std::optional<Position> earliest;
  for (auto& [sender, list] : by_source_) {
    const std::optional<Position> at = first_match(list);
    if (at && (!earliest || at->entry->arrival < earliest->entry->arrival)) earliest = at;
  }
  return earliest;
}

void UnexpectedQueue::recycle(Position at) {
  --count_;
  if (spare_.size() < kSpare)
    spare_.splice(spare_.end(), *at.list, at.entry);
  else
    at.list->erase(at.entry);
}

Incoming UnexpectedQueue::take(Position at) {
  --count_;
  Incoming in = std::move(*at.entry);
  at.list->erase(at.entry);
  return in;
}

}  // namespace viastack::mpi
