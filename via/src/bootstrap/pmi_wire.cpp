#include "bootstrap/pmi_wire.hpp"

#include <charconv>
#include <cstdio>

namespace via::bootstrap::pmi {
namespace {

// What a message part looks like in an error: cut short, control bytes shown.
std::string quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 80)) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      out += hex;
    }
  }
  if (text.size() > 80) out += "...";
  out += '\'';
  return out;
}

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Checks a command name, key or value for the bytes that would end it early.
bool check_part(std::string_view what, std::string_view part, std::string_view forbidden, bool may_be_empty,
                std::string& error) {
  if (part.empty() && !may_be_empty) {
    error = "empty ";
    error += what;
    return false;
  }
  for (char c : part) {
    if (c == '\n' || c == '\0' || forbidden.find(c) != std::string_view::npos) {
      error = std::string(what);
      error += ' ';
      error += quoted(part);
      error += " contains a byte the PMI wire format cannot carry";
      return false;
    }
  }
  return true;
}

bool check_message(const Message& message, std::string_view key_forbidden, std::string_view value_forbidden,
                   std::string& error) {
  if (message.fields.size() > kMaxFields) {
    error = "a PMI message with " + std::to_string(message.fields.size()) + " fields (at most " +
            std::to_string(kMaxFields) + ")";
    return false;
  }
  if (!check_part("command", message.command, key_forbidden, false, error)) return false;
  for (const auto& [key, value] : message.fields)
    if (!check_part("key", key, key_forbidden, false, error) ||
        !check_part("value", value, value_forbidden, true, error))
      return false;
  return true;
}

std::optional<int> to_int(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_hex(std::string& out, char c) {
  constexpr char kDigits[] = "0123456789ABCDEF";
  out += kDigits[static_cast<unsigned char>(c) >> 4];
  out += kDigits[static_cast<unsigned char>(c) & 15];
}

}  // namespace

const std::string* Message::find(std::string_view key) const {
  for (const auto& field : fields)
    if (field.first == key) return &field.second;
  return nullptr;
}

bool format_line(const Message& message, std::string& line, std::string& error) {
  if (!check_message(message, " =", " ", error)) return false;
  line = "cmd=";
  line += message.command;
  for (const auto& [key, value] : message.fields) {
    line += ' ';
    line += key;
    line += '=';
    line += value;
  }
  line += '\n';
  if (line.size() > kMaxLine) {
    error = "a PMI-1 line of " + std::to_string(line.size()) + " bytes (at most " + std::to_string(kMaxLine) + ")";
    return false;
  }
  return true;
}

bool parse_line(std::string_view line, Message& message, std::string& error) {
  message = Message{};
  if (line.size() >= kMaxLine) {
    error = "a PMI-1 line longer than " + std::to_string(kMaxLine - 1) + " bytes";
    return false;
  }
  if (line.find('\0') != std::string_view::npos || line.find('\n') != std::string_view::npos) {
    error = "a PMI-1 line with a NUL or newline inside: " + quoted(line);
    return false;
  }
  bool first = true;
  std::size_t at = 0;
  while (at < line.size()) {
    if (line[at] == ' ') {
      ++at;
      continue;
    }
    auto end = line.find(' ', at);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view token = line.substr(at, end - at);
    at = end;
    const auto equals = token.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      error = "PMI-1 line " + quoted(line) + ": field " + quoted(token) + " is not key=value";
      return false;
    }
    const std::string_view key = token.substr(0, equals), value = token.substr(equals + 1);
    if (first) {
      if (key != "cmd" || value.empty()) {
        error = "PMI-1 line " + quoted(line) + " does not begin with cmd=<name>";
        return false;
      }
      message.command = value;
      first = false;
      continue;
    }
    if (message.fields.size() == kMaxFields) {
      error = "PMI-1 line " + quoted(line) + " has more than " + std::to_string(kMaxFields) + " fields";
      return false;
    }
    message.add(std::string(key), std::string(value));
  }
  if (first) {
    error = "an empty PMI-1 line";
    return false;
  }
  return true;
}

bool format_frame(const Message& message, std::string& frame, std::string& error) {
  if (!check_message(message, ";=", ";", error)) return false;
  std::string body = "cmd=";
  body += message.command;
  body += ';';
  for (const auto& [key, value] : message.fields) {
    body += key;
    body += '=';
    body += value;
    body += ';';
  }
  if (body.size() > kMaxFrame) {
    error = "a PMI-2 command of " + std::to_string(body.size()) + " bytes (at most " + std::to_string(kMaxFrame) + ")";
    return false;
  }
  char prefix[kLengthDigits + 1];
  std::snprintf(prefix, sizeof prefix, "%6zu", body.size());
  frame = prefix;
  frame += body;
  return true;
}

std::optional<std::size_t> parse_length(std::string_view prefix, std::string& error) {
  const std::string shown = quoted(prefix);
  if (prefix.size() != kLengthDigits) {
    error = "a PMI-2 length prefix of " + std::to_string(prefix.size()) + " bytes";
    return std::nullopt;
  }
  while (!prefix.empty() && prefix.front() == ' ') prefix.remove_prefix(1);
  while (!prefix.empty() && prefix.back() == ' ') prefix.remove_suffix(1);
  std::size_t length = 0;
  auto [end, ec] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), length);
  if (prefix.empty() || ec != std::errc() || end != prefix.data() + prefix.size()) {
    error = "PMI-2 length prefix " + shown + " is not a number";
    return std::nullopt;
  }
  if (length == 0 || length > kMaxFrame) {
    error = "PMI-2 length prefix " + shown + " is outside 1.." + std::to_string(kMaxFrame);
    return std::nullopt;
  }
  return length;
}

bool parse_frame(std::string_view body, Message& message, std::string& error) {
  message = Message{};
  if (body.size() > kMaxFrame) {
    error = "a PMI-2 command longer than " + std::to_string(kMaxFrame) + " bytes";
    return false;
  }
  if (body.find('\0') != std::string_view::npos) {
    error = "a PMI-2 command with a NUL inside: " + quoted(body);
    return false;
  }
  if (body.substr(0, 4) != "cmd=") {
    error = "PMI-2 command " + quoted(body) + " does not begin with cmd=";
    return false;
  }
  std::size_t at = 4;
  auto name_end = body.find(';', at);
  if (name_end == std::string_view::npos) name_end = body.size();
  message.command = body.substr(at, name_end - at);
  if (message.command.empty() || message.command.find('=') != std::string::npos) {
    error = "PMI-2 command " + quoted(body) + " has no name";
    return false;
  }
  at = name_end + 1;
  while (at < body.size()) {
    const auto equals = body.find('=', at);
    const auto semicolon = body.find(';', at);
    if (equals == std::string_view::npos || equals == at || semicolon < equals) {
      error = "PMI-2 command " + quoted(body) + ": field at byte " + std::to_string(at) + " is not key=value";
      return false;
    }
    std::string key(body.substr(at, equals - at));
    std::string value;
    at = equals + 1;
    // The value runs to the next single ';' (or the end); ";;" is one ';'.
    while (at < body.size()) {
      if (body[at] == ';') {
        if (at + 1 < body.size() && body[at + 1] == ';') {
          value += ';';
          at += 2;
          continue;
        }
        ++at;
        break;
      }
      value += body[at++];
    }
    if (message.fields.size() == kMaxFields) {
      error = "PMI-2 command " + quoted(body) + " has more than " + std::to_string(kMaxFields) + " fields";
      return false;
    }
    message.add(std::move(key), std::move(value));
  }
  return true;
}

bool check_reply(const Message& reply, std::string_view expected, std::string& error) {
  if (reply.command != expected) {
    error = "the process manager answered " + quoted(reply.command) + " where " + quoted(expected) +
            " was expected";
    return false;
  }
  const std::string* rc = reply.find("rc");
  if (!rc || *rc == "0") return true;
  const auto code = to_int(*rc);
  error = "the process manager's " + quoted(expected) + " says rc=" + (code ? std::to_string(*code) : quoted(*rc));
  const std::string* msg = reply.find("msg");
  if (!msg) msg = reply.find("errmsg");
  if (msg) {
    error += ": ";
    error += *msg;
  }
  return false;
}

std::optional<int> number_field(const Message& message, std::string_view key, std::string& error) {
  const std::string* text = message.find(key);
  const auto value = text ? to_int(*text) : std::nullopt;
  if (!value || *value < 0) {
    error = "the process manager's " + quoted(message.command) + " has no number " + quoted(key) +
            (text ? " (it says " + quoted(*text) + ")" : std::string());
    return std::nullopt;
  }
  return value;
}

std::string encode_key(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (is_alnum(c)) {
      out += c;
    } else {
      out += '_';
      append_hex(out, c);
    }
  }
  return out;
}

namespace {
bool value_char(char c) {
  return is_alnum(c) || std::string_view("-_.:/,+@").find(c) != std::string_view::npos;
}
}  // namespace

std::string encode_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (value_char(c)) {
      out += c;
    } else {
      out += '%';
      append_hex(out, c);
    }
  }
  return out;
}

std::optional<std::string> decode_value(std::string_view encoded) {
  std::string out;
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    const char c = encoded[i];
    if (value_char(c)) {
      out += c;
      continue;
    }
    if (c != '%' || i + 2 >= encoded.size()) return std::nullopt;
    const int high = hex_digit(encoded[i + 1]), low = hex_digit(encoded[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

bool parse_process_mapping(std::string_view text, int size, std::vector<int>& node_of_rank, std::string& error) {
  struct Block {
    int first_node, nodes, ranks_per_node;
  };
  std::vector<Block> blocks;
  const std::string shown = quoted(text);
  auto fail = [&](const char* why) {
    error = "PMI_process_mapping " + shown + ": " + why;
    return false;
  };
  std::string_view rest = text;
  auto skip_spaces = [&] {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  };
  auto take = [&](std::string_view token) {
    skip_spaces();
    if (rest.substr(0, token.size()) != token) return false;
    rest.remove_prefix(token.size());
    return true;
  };
  // Node numbers and counts stay small enough that first_node + nodes fits an int.
  constexpr int kLargest = 1 << 24;
  auto number = [&](int& out) {
    skip_spaces();
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), out);
    if (ec != std::errc() || out < 0 || out > kLargest) return false;
    rest.remove_prefix(std::size_t(end - rest.data()));
    return true;
  };
  if (!take("(") || !take("vector")) return fail("does not begin with (vector");
  while (take(",")) {
    Block b{};
    if (!take("(") || !number(b.first_node) || !take(",") || !number(b.nodes) || !take(",") ||
        !number(b.ranks_per_node) || !take(")"))
      return fail("a block is not (node,count,ranks)");
    if (b.nodes == 0 || b.ranks_per_node == 0) return fail("a block places no ranks");
    blocks.push_back(b);
  }
  if (!take(")")) return fail("does not end with )");
  skip_spaces();
  if (!rest.empty()) return fail("has bytes after its closing )");
  if (blocks.empty()) return fail("names no nodes");
  if (size < 1 || size > kMaxRanks) return fail("the job's size is outside 1..2^24");
  node_of_rank.assign(std::size_t(size), 0);
  int rank = 0;
  while (rank < size) {
    for (const Block& b : blocks)
      for (int node = b.first_node; node < b.first_node + b.nodes && rank < size; ++node)
        for (int i = 0; i < b.ranks_per_node && rank < size; ++i) node_of_rank[std::size_t(rank++)] = node;
  }
  return true;
}

}  // namespace via::bootstrap::pmi
