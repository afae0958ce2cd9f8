// libFuzzer target: AM wire-format parsing of a frame a peer sent (one
// message, a bundle's items read one by one), the receive filter fed
// whatever (slot, seq) the message names, and the send window fed whatever
// acknowledgements it carries.
#include <cstddef>
#include <cstdint>

#include "reliability.hpp"
#include "wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static am::ReceiveFilter filter(32, 8);
  static am::SendWindow window(32, am::RetryPolicy{});
  static std::uint64_t tick = 0;
  am::wire::Message m;
  if (am::wire::parse(reinterpret_cast<const std::byte*>(data), size, m) != am::wire::ParseError::none) return 0;
  // A parsed message's lengths add up: touching the payload stays in bounds.
  volatile std::uint8_t sink = 0;
  for (std::uint32_t i = 0; i < m.header.payload_bytes; ++i) sink = sink ^ std::uint8_t(m.payload[i]);
  // So do a bundle's items, however many it claims.
  if (m.header.kind == am::wire::Kind::bundle || m.header.handler == am::wire::kBundleReply) {
    const auto kind = m.header.kind == am::wire::Kind::bundle ? am::wire::Items::requests : am::wire::Items::replies;
    am::wire::ItemReader items(m.payload, m.header.payload_bytes, kind);
    for (am::wire::Item it; items.next(it);) {
      std::uint64_t words[am::wire::kMaxArgs];
      am::wire::read_args(words, it.args, it.header.nargs);
      for (std::uint64_t w : words) sink = sink ^ std::uint8_t(w);
      for (std::uint32_t i = 0; i < it.header.payload_bytes; ++i) sink = sink ^ std::uint8_t(it.payload[i]);
    }
  }
  // Acknowledgements name any slot and sequence number: only open requests close.
  if (window.has_credit()) window.open();
  for (unsigned i = 0; i < m.header.acks; ++i) window.close(m.ack(i).slot, m.ack(i).seq);
  ++tick;
  switch (filter.admit(m.header.slot, m.header.seq)) {
    case am::Admission::fresh:
      if (m.header.nargs % 2) filter.replied(m.header.slot);
      else filter.acknowledge(m.header.slot, tick);
      break;
    case am::Admission::duplicate:
      if (filter.answer(m.header.slot) == am::Answer::acknowledged) filter.acknowledge_again(m.header.slot, tick);
      break;
    default:
      break;
  }
  if (filter.ack_due(tick)) {
    am::Ack acks[am::wire::kMaxAcks];
    filter.take_acks(acks, am::wire::kMaxAcks);
  }
  return 0;
}
