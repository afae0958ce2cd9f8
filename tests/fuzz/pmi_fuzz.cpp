// libFuzzer target for the PMI wire parsers: whatever a process manager (or
// something posing as one) writes must end in a message or a clear error,
// and what parses must format and parse back to the same message.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/pmi_wire.hpp"

namespace pmi = via::bootstrap::pmi;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string error, out;
  pmi::Message m, back;

  if (pmi::parse_line(input, m, error)) {
    // What parses and formats again parses back to the same message.
    if (pmi::format_line(m, out, error) &&
        (!pmi::parse_line(std::string_view(out).substr(0, out.size() - 1), back, error) ||
         back.command != m.command || back.fields != m.fields))
      std::abort();
    pmi::check_reply(m, "get_result", error);
    pmi::number_field(m, "rc", error);
  } else if (error.empty()) {
    std::abort();
  }

  error.clear();
  if (pmi::parse_frame(input, m, error)) {
    if (pmi::format_frame(m, out, error) &&
        (!pmi::parse_frame(std::string_view(out).substr(pmi::kLengthDigits), back, error) ||
         back.command != m.command || back.fields != m.fields))
      std::abort();
    pmi::check_reply(m, "kvs-get-response", error);
  } else if (error.empty()) {
    std::abort();
  }
  if (size >= pmi::kLengthDigits) pmi::parse_length(input.substr(0, pmi::kLengthDigits), error);

  if (auto decoded = pmi::decode_value(input); decoded && pmi::encode_value(*decoded).size() > 3 * decoded->size())
    std::abort();
  if (pmi::decode_value(pmi::encode_value(input)) != input) std::abort();

  std::vector<int> nodes;
  const int ranks = size ? 1 + data[0] % 64 : 1;
  if (pmi::parse_process_mapping(input, ranks, nodes, error) && nodes.size() != std::size_t(ranks)) std::abort();
  return 0;
}
