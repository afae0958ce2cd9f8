// libFuzzer target: AM wire-format parsing of bytes a peer sent, and the
// receive filter fed whatever (slot, seq) such a message names.
#include <cstddef>
#include <cstdint>

#include "reliability.hpp"
#include "wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static am::ReceiveFilter filter(32);
  am::wire::Message m;
  if (am::wire::parse(reinterpret_cast<const std::byte*>(data), size, m) != am::wire::ParseError::none) return 0;
  // A parsed message's lengths add up: touching the payload stays in bounds.
  volatile std::uint8_t sink = 0;
  for (std::uint32_t i = 0; i < m.header.payload_bytes; ++i) sink = sink ^ std::uint8_t(m.payload[i]);
  filter.admit(m.header.slot, m.header.seq);
  return 0;
}
