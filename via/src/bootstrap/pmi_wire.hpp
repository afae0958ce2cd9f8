// The PMI wire formats, apart from any socket (reference/mpi.md section 5):
//
//   PMI-1  one line per message: "cmd=<name> key=value key=value\n", fields
//          separated by spaces, each split at its first '='.
//   PMI-2  a 6-character decimal length (padded with spaces on either side:
//          MPICH right-aligns it, Slurm left-aligns it), then that many bytes
//          "cmd=<name>;key=value;...;", where ";;" inside a value stands
//          for one ';'.
//
// and the PMI_process_mapping value both hand out. Everything here checks
// its input and says what is wrong with it: the bytes come from another
// process.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace via::bootstrap::pmi {

// Longest PMI-1 line we send or accept, newline included. The largest legal
// command (a put with a 256-byte KVS name, 64-byte key, 1024-byte value) is
// about 1.4 KiB.
constexpr std::size_t kMaxLine = 4096;
// PMI-2: the length prefix, and the longest body (MPICH's PMII_MAX_COMMAND_LEN).
constexpr std::size_t kLengthDigits = 6;
constexpr std::size_t kMaxFrame = 64 * 1024;
// The most ranks a job may have: bounds what a server's numbers allocate.
constexpr int kMaxRanks = 1 << 24;
// Fields in one message, beyond "cmd".
constexpr std::size_t kMaxFields = 64;
// The key-value store's limits both servers give (PMI_MAXKEYLEN, PMI_MAXVALLEN).
constexpr std::size_t kMaxKeyLength = 64;
constexpr std::size_t kMaxValueLength = 1024;

struct Message {
  Message() = default;
  explicit Message(std::string name) : command(std::move(name)) {}

  std::string command;  // the value of cmd=
  std::vector<std::pair<std::string, std::string>> fields;

  Message& add(std::string key, std::string value) {
    fields.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  // The first field named `key`, if any.
  const std::string* find(std::string_view key) const;
};

// PMI-1. format_line ends the line with '\n'; parse_line takes one without it.
bool format_line(const Message& message, std::string& line, std::string& error);
bool parse_line(std::string_view line, Message& message, std::string& error);

// PMI-2. format_frame gives the length prefix and the body; parse_length
// reads the prefix; parse_frame takes the body.
bool format_frame(const Message& message, std::string& frame, std::string& error);
std::optional<std::size_t> parse_length(std::string_view prefix, std::string& error);
bool parse_frame(std::string_view body, Message& message, std::string& error);

// Checks a reply: its command is `expected`, and its rc (when it has one) is
// 0; otherwise says so, with the server's msg/errmsg when it gave one.
bool check_reply(const Message& reply, std::string_view expected, std::string& error);
// A field holding a non-negative decimal number.
std::optional<int> number_field(const Message& message, std::string_view key, std::string& error);

// Keys and values of the key-value store are carried in an alphabet both
// wire formats and every server pass through unchanged: letters and digits
// stay, anything else in a key becomes "_XX", anything outside
// [A-Za-z0-9-_.:/,+@] in a value becomes "%XX" (hex).
std::string encode_key(std::string_view key);
std::string encode_value(std::string_view value);
std::optional<std::string> decode_value(std::string_view encoded);

// PMI_process_mapping, "(vector,(n1,n2,n3),...)": each triple gives n3
// consecutive ranks to each of nodes n1 ... n1+n2-1, and the triples repeat
// until all `size` ranks are placed. Fills node_of_rank with `size` entries.
bool parse_process_mapping(std::string_view text, int size, std::vector<int>& node_of_rank, std::string& error);

}  // namespace via::bootstrap::pmi
