// The configuration of viastack: every VIASTACK_* environment variable that
// any layer reads (via, am, mpi, utcp, splitc, viarun, the benchmarks and
// scripts) is declared once in one table, and read through the typed readers
// here, which check the value against its declaration.
//
// The first read of any variable checks every VIASTACK_* variable set in the
// environment at once: a garbage or out-of-range value stops the process with
// one line in the log (via/log.hpp) naming the variable, its value and what is
// expected,
//   viastack[via pid 4242] error: VIASTACK_SPIN_US=-1: expected an integer from 0 to 10000000 microseconds (...)
// and exit status 1 (never an exception, so no C API can leak one); a
// VIASTACK_* variable that no table row declares (a typo), or a bad value of
// one declared bad_value_warns (VIASTACK_LOG), is a one-line warning. An empty
// value counts as unset: the default applies.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace via::config {

enum class Type {
  integer,     // a whole number from min to max, in unit
  decimal,     // a number greater than 0, at most max, in unit
  boolean,     // 0 or 1
  word,        // one of words ("shm|tcp|...")
  ipv4,        // an IPv4 address
  endpoint,    // an IPv4 address:port
  network,     // an IPv4 network a.b.c.d/prefix, prefix 8 to 30, no host bits
  job_key,     // 64 hex digits (a secret: never printed)
  fault_plan,  // drop=P,dup=P,reorder=P,delay_us=N,seed=N (any subset)
  trace,       // FILE or LAYERS:FILE (via/trace.hpp)
  text,        // any text (a path, a name)
};

struct Variable {
  std::string_view name;
  Type type;
  std::string_view default_value;  // as a user would write it; "-" when there is no fixed default
  std::string_view layer;          // who reads it
  std::string_view meaning;        // one line
  std::int64_t min = 0, max = 0;   // integer: the range; decimal: max
  std::string_view unit;           // integer, decimal: "bytes", "milliseconds", ...; may be empty
  std::string_view words;          // word: the values allowed, separated by '|'
  // A bad value is a warning and the default applies, instead of stopping the
  // process: for settings no program should die of (how much it logs).
  bool bad_value_warns = false;
};

// The declarations, in the order of the README's table.
std::span<const Variable> variables();
// The declaration of `name`, or nullptr.
const Variable* find(std::string_view name);

// What a value of `variable` must be: "an integer from 0 to 65535".
std::string expected(const Variable& variable);
// Whether `value` (not empty) is a valid value of `variable`.
bool valid(const Variable& variable, std::string_view value);
// The one line about a bad value, without "viastack: ":
// "NAME=VALUE: expected WHAT (MEANING)"; a secret's value is not shown.
std::string bad_value_line(const Variable& variable, std::string_view value);

struct Findings {
  std::vector<std::string> errors;    // bad_value_line of each bad value
  // Each VIASTACK_* variable set but not declared, and the bad_value_line of
  // each bad value of a variable that bad_value_warns, with "; using the
  // default, DEFAULT".
  std::vector<std::string> warnings;
};
// Every VIASTACK_* variable set in the environment now, checked.
Findings check_environment();
// check_environment() the first time it is called in a process: logs the
// warnings, and stops the process after logging the errors. Every reader but
// lenient_text calls it.
void validate_environment();

// Readers: the variable's value (checked: a bad one stops the process as
// above), or its default when it is unset or empty. `name` must be declared
// with a type the reader returns; a reader called with another is a
// programming error that aborts naming both.
std::int64_t integer(std::string_view name);
std::optional<std::int64_t> integer_if_set(std::string_view name);
std::optional<double> decimal_if_set(std::string_view name);
bool boolean(std::string_view name);
// Any type as its text: words, addresses, keys, plans, paths.
std::string text(std::string_view name);
std::optional<std::string> text_if_set(std::string_view name);
// A variable that bad_value_warns, as its text: its value, or its default when
// it is unset, empty or bad. It checks this variable alone, not the whole
// environment: the log reads its level with it, and the environment's check
// reports through the log.
std::string lenient_text(std::string_view name);

// viarun --info: a header line, then one line per variable: its name, its
// default, its current value ("unset" when unset; a bad one is flagged), and
// its meaning with its type and the layer that reads it.
std::string info();

}  // namespace via::config
