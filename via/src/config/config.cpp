// The typed, validating reader of the VIASTACK_* variables (via/config.hpp).
#include "via/config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "config/variables.hpp"
#include "engine/faults.hpp"
#include "via/log.hpp"
#include "via/trace.hpp"

extern char** environ;

namespace via::config {

namespace {

constexpr std::string_view kPrefix = "VIASTACK_";
// Longer values are cut in messages: a line stays a line.
constexpr std::size_t kShownValueChars = 120;

std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_decimal(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<std::uint32_t> parse_ipv4(std::string_view text) {
  const std::string address(text);
  in_addr parsed{};
  if (inet_pton(AF_INET, address.c_str(), &parsed) != 1) return std::nullopt;
  return ntohl(parsed.s_addr);
}

bool valid_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || !parse_ipv4(text.substr(0, colon))) return false;
  const auto port = parse_integer(text.substr(colon + 1));
  return port && *port >= 1 && *port <= 65535 && text[colon + 1] != '-';
}

bool valid_network(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return false;
  const auto network = parse_ipv4(text.substr(0, slash));
  const auto prefix = parse_integer(text.substr(slash + 1));
  if (!network || !prefix || *prefix < 8 || *prefix > 30 || text[slash + 1] == '-') return false;
  const std::uint32_t host_bits = ~(~std::uint32_t{0} << (32 - *prefix));
  return (*network & host_bits) == 0;
}

bool valid_word(std::string_view words, std::string_view value) {
  while (!words.empty()) {
    const auto bar = words.find('|');
    if (words.substr(0, bar) == value) return true;
    words = bar == std::string_view::npos ? std::string_view() : words.substr(bar + 1);
  }
  return false;
}

std::string shown(const Variable& variable, std::string_view value) {
  if (variable.type == Type::job_key) return "<" + std::to_string(value.size()) + " characters, not shown>";
  std::string text(value.substr(0, kShownValueChars));
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (value.size() > kShownValueChars) text += "...(" + std::to_string(value.size()) + " characters)";
  return text;
}

[[noreturn]] void programming_error(std::string_view name, std::string_view what) {
  VIA_LOG(error, "via", "internal error: %.*s %.*s", int(name.size()), name.data(), int(what.size()), what.data());
  std::abort();
}

const Variable& declared(std::string_view name, std::initializer_list<Type> types) {
  const Variable* variable = find(name);
  if (!variable) programming_error(name, "is read but not declared in via/src/config/variables.cpp");
  if (std::find(types.begin(), types.end(), variable->type) == types.end())
    programming_error(name, "is read with a reader of another type than its declaration's");
  return *variable;
}

[[noreturn]] void stop(const std::vector<std::string>& errors) {
  std::fflush(stdout);
  for (const std::string& error : errors) VIA_LOG(error, "via", "%s", error.c_str());
  // Not exit(): other threads may be running, and static destructors under them would not help.
  std::_Exit(1);
}

// The value set now, or nullopt: also for a bad value of a variable that
// bad_value_warns; a bad value of another stops the process.
std::optional<std::string_view> value_alone(const Variable& variable) {
  // Names in the table are string literals, so name.data() ends in a NUL.
  const char* value = std::getenv(variable.name.data());
  if (!value || !*value) return std::nullopt;
  if (valid(variable, value)) return std::string_view(value);
  if (variable.bad_value_warns) return std::nullopt;
  stop({bad_value_line(variable, value)});
}

// The value set now, after the whole environment's check.
std::optional<std::string_view> value_of(const Variable& variable) {
  validate_environment();
  return value_alone(variable);
}

std::string_view default_of(const Variable& variable) {
  if (variable.default_value == "-") programming_error(variable.name, "has no default; read it with *_if_set");
  return variable.default_value;
}

}  // namespace

std::span<const Variable> variables() { return declarations(); }

const Variable* find(std::string_view name) {
  for (const Variable& variable : declarations())
    if (variable.name == name) return &variable;
  return nullptr;
}

std::string expected(const Variable& variable) {
  const std::string unit = variable.unit.empty() ? "" : " " + std::string(variable.unit);
  switch (variable.type) {
    case Type::integer:
      return "an integer from " + std::to_string(variable.min) + " to " + std::to_string(variable.max) + unit;
    case Type::decimal: return "a number greater than 0 and at most " + std::to_string(variable.max) + unit;
    case Type::boolean: return "0 or 1";
    case Type::word: {
      std::string words(variable.words);
      std::replace(words.begin(), words.end(), '|', ' ');
      return "one of: " + words;
    }
    case Type::ipv4: return "an IPv4 address such as 192.168.1.2";
    case Type::endpoint: return "an IPv4 address:port such as 127.0.0.1:4000";
    case Type::network: return "an IPv4 network such as 10.0.0.0/16 (prefix 8 to 30, no host bits set)";
    case Type::job_key: return "64 hex digits";
    case Type::fault_plan:
      return "drop=P,dup=P,reorder=P,delay_us=N,seed=N in any subset and order (P a probability from 0 to 1)";
    case Type::trace:
      return "FILE (utcp's packets) or LAYERS:FILE with LAYERS a comma-separated list of via and utcp";
    case Type::text: return "any text";
  }
  return "?";
}

bool valid(const Variable& variable, std::string_view value) {
  switch (variable.type) {
    case Type::integer: {
      const auto number = parse_integer(value);
      return number && *number >= variable.min && *number <= variable.max;
    }
    case Type::decimal: {
      const auto number = parse_decimal(value);
      return number && *number > 0 && *number <= double(variable.max);
    }
    case Type::boolean: return value == "0" || value == "1";
    case Type::word: return valid_word(variable.words, value);
    case Type::ipv4: return parse_ipv4(value).has_value();
    case Type::endpoint: return valid_endpoint(value);
    case Type::network: return valid_network(value);
    case Type::job_key:
      return value.size() == 64 && std::all_of(value.begin(), value.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
             });
    case Type::fault_plan: {
      FaultPlan plan;
      std::string ignored;
      return parse_fault_plan(value, plan, ignored);
    }
    case Type::trace: {
      trace::Setting setting;
      std::string ignored;
      return trace::parse_setting(value, setting, ignored);
    }
    case Type::text: return true;
  }
  return false;
}

std::string bad_value_line(const Variable& variable, std::string_view value) {
  return std::string(variable.name) + "=" + shown(variable, value) + ": expected " + expected(variable) + " (" +
         std::string(variable.meaning) + ")";
}

Findings check_environment() {
  Findings findings;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view assignment(*entry);
    if (!assignment.starts_with(kPrefix)) continue;
    const auto equals = assignment.find('=');
    const std::string_view name = assignment.substr(0, equals);
    const std::string_view value = equals == std::string_view::npos ? "" : assignment.substr(equals + 1);
    const Variable* variable = find(name);
    if (!variable)
      findings.warnings.push_back(std::string(name) +
                                  " is set but is not a viastack variable (ignored; viarun --info lists them)");
    else if (value.empty() || valid(*variable, value))
      continue;
    else if (variable->bad_value_warns)
      findings.warnings.push_back(bad_value_line(*variable, value) + "; using the default, " +
                                  std::string(variable->default_value));
    else
      findings.errors.push_back(bad_value_line(*variable, value));
  }
  return findings;
}

void validate_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    const Findings findings = check_environment();
    for (const std::string& warning : findings.warnings) VIA_LOG(warn, "via", "%s", warning.c_str());
    if (!findings.errors.empty()) stop(findings.errors);
  });
}

std::int64_t integer(std::string_view name) {
  if (auto value = integer_if_set(name)) return *value;
  return *parse_integer(default_of(declared(name, {Type::integer})));
}

std::optional<std::int64_t> integer_if_set(std::string_view name) {
  const auto value = value_of(declared(name, {Type::integer}));
  return value ? parse_integer(*value) : std::nullopt;
}

std::optional<double> decimal_if_set(std::string_view name) {
  const auto value = value_of(declared(name, {Type::decimal}));
  return value ? parse_decimal(*value) : std::nullopt;
}

bool boolean(std::string_view name) {
  const Variable& variable = declared(name, {Type::boolean});
  return value_of(variable).value_or(default_of(variable)) == "1";
}

std::string text(std::string_view name) {
  const Variable* variable = find(name);
  if (!variable) programming_error(name, "is read but not declared in via/src/config/variables.cpp");
  return std::string(value_of(*variable).value_or(default_of(*variable)));
}

std::optional<std::string> text_if_set(std::string_view name) {
  const Variable* variable = find(name);
  if (!variable) programming_error(name, "is read but not declared in via/src/config/variables.cpp");
  const auto value = value_of(*variable);
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

std::string lenient_text(std::string_view name) {
  const Variable* variable = find(name);
  if (!variable || !variable->bad_value_warns)
    programming_error(name, "is read leniently but not declared bad_value_warns");
  return std::string(value_alone(*variable).value_or(default_of(*variable)));
}

std::string info() {
  auto line = [](std::string_view name, std::string_view default_value, std::string_view current,
                 std::string_view meaning) {
    char text[128];
    std::snprintf(text, sizeof text, "%-37.*s %-11.*s %-11.*s ", int(name.size()), name.data(),
                  int(default_value.size()), default_value.data(), int(current.size()), current.data());
    return text + std::string(meaning) + "\n";
  };
  std::string out = line("variable", "default", "current", "meaning [expected; read by]");
  for (const Variable& variable : declarations()) {
    const char* set = std::getenv(variable.name.data());
    std::string current = set && *set ? shown(variable, set) : "unset";
    if (variable.type == Type::job_key && set && *set) current = "hidden";
    std::string meaning(variable.meaning);
    if (set && *set && !valid(variable, set)) meaning = "INVALID VALUE: " + meaning;
    meaning += " [" + expected(variable) + "; " + std::string(variable.layer) + "]";
    out += line(variable.name, variable.default_value, current, meaning);
  }
  for (const std::string& warning : check_environment().warnings) out += "# " + warning + "\n";
  return out;
}

}  // namespace via::config
