#include "options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "via/config.hpp"

namespace viarun {
namespace {

// Larger timeouts would overflow the clock arithmetic; nobody needs 30 years.
constexpr double kMaxTimeoutSeconds = 1e9;

int parse_rank_count(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > kMaxRanks) {
    throw UsageError("-n: '" + std::string(text) + "' is not a rank count between 1 and " +
                     std::to_string(kMaxRanks));
  }
  return value;
}

// A name outside the built-in ones may be a plugin's: the ranks, which load
// it, check that name.
std::string checked_provider(const std::string& name, std::string_view source) {
  const bool plugin_named = via::config::text_if_set("VIASTACK_PROVIDER_PLUGIN").has_value() && !name.empty() &&
                            name.find_first_of(": ") == std::string::npos;
  if (name != "shm" && name != "tcp" && name != "auto" && !plugin_named) {
    throw UsageError(std::string(source) + ": unknown provider '" + name +
                     "' (expected shm, tcp or auto, or a provider of VIASTACK_PROVIDER_PLUGIN)");
  }
  return name;
}

JobTimeout parse_timeout(const std::string& text, std::string_view source) {
  double seconds = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > kMaxTimeoutSeconds) {
    throw UsageError(std::string(source) + ": '" + text + "' is not a positive number of seconds");
  }
  return {std::chrono::duration<double>(seconds), text};
}

// Walks argv; an option's value may be attached ("-n4", "--timeout=2") or follow it.
class ArgumentCursor {
 public:
  ArgumentCursor(int argc, char** argv) : args_(argv + 1, argv + argc) {}

  bool done() const { return next_ >= args_.size(); }
  const std::string& peek() const { return args_[next_]; }
  std::string take() { return args_[next_++]; }

  std::string take_value(const std::string& option, const std::optional<std::string>& attached) {
    if (attached) return *attached;
    if (done()) throw UsageError("option " + option + " needs a value");
    return take();
  }

  std::vector<std::string> take_rest() {
    std::vector<std::string> rest(args_.begin() + static_cast<std::ptrdiff_t>(next_), args_.end());
    next_ = args_.size();
    return rest;
  }

 private:
  std::vector<std::string> args_;
  size_t next_ = 0;
};

// Splits "--name=value" and "-nVALUE" into the option name and attached value.
std::pair<std::string, std::optional<std::string>> split_option(const std::string& arg) {
  if (arg.starts_with("--")) {
    size_t equals = arg.find('=');
    if (equals == std::string::npos) return {arg, std::nullopt};
    return {arg.substr(0, equals), arg.substr(equals + 1)};
  }
  if (arg.starts_with("-n") && arg.size() > 2) return {"-n", arg.substr(2)};
  return {arg, std::nullopt};
}

void reject_value(const std::string& option, const std::optional<std::string>& attached) {
  if (attached) throw UsageError("option " + option + " takes no value");
}

std::vector<std::string> split_hosts(const std::string& text) {
  std::vector<std::string> hosts;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string host(rest.substr(0, comma));
    if (host.empty()) throw UsageError("--hosts: empty host name in '" + text + "'");
    hosts.push_back(host);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
    if (rest.empty()) throw UsageError("--hosts: empty host name in '" + text + "'");
  }
  if (hosts.empty()) throw UsageError("--hosts needs at least one host");
  return hosts;
}

bool is_option(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

}  // namespace

LaunchOptions parse_options(int argc, char** argv) {
  LaunchOptions options;
  std::optional<std::string> provider;
  std::optional<std::string> timeout;
  ArgumentCursor cursor(argc, argv);
  while (!cursor.done() && is_option(cursor.peek())) {
    auto [name, attached] = split_option(cursor.take());
    if (name == "--") break;
    if (name == "-n") {
      options.ranks = parse_rank_count(cursor.take_value(name, attached));
    } else if (name == "--provider") {
      provider = cursor.take_value(name, attached);
    } else if (name == "--timeout") {
      timeout = cursor.take_value(name, attached);
    } else if (name == "--hosts") {
      options.hosts = split_hosts(cursor.take_value(name, attached));
    } else if (name == "--launcher") {
      options.launcher = cursor.take_value(name, attached);
      if (options.launcher.find("{host}") == std::string::npos)
        throw UsageError("--launcher: the template must contain {host}");
    } else if (name == "--listen-address") {
      options.listen_address = cursor.take_value(name, attached);
    } else if (name == "--tag-output") {
      reject_value(name, attached);
      options.tag_output = true;
    } else if (name == "--bind-to") {
      options.bind_to = parse_bind_to(cursor.take_value(name, attached));
    } else if (name == "--map-by") {
      options.map_by = parse_map_by(cursor.take_value(name, attached));
    } else if (name == "--report-bindings") {
      reject_value(name, attached);
      options.report_bindings = true;
    } else if (name == "-h" || name == "--help") {
      reject_value(name, attached);
      options.show_help = true;
      return options;
    } else if (name == "--info") {
      reject_value(name, attached);
      options.show_info = true;
      return options;
    } else if (name == "--version") {
      reject_value(name, attached);
      options.show_version = true;
      return options;
    } else {
      throw UsageError("unknown option '" + name + "'");
    }
  }
  options.command = cursor.take_rest();

  if (options.ranks == 0) throw UsageError("missing -n N (the number of ranks)");
  if (options.command.empty()) throw UsageError("missing the program to run");
  // Binding is done here, as each local rank starts; a remote host's ranks
  // are its launcher's to place.
  if (!options.hosts.empty()) {
    if (options.bind_to == BindTo::core || options.bind_to == BindTo::socket)
      throw UsageError("--bind-to binds the ranks viarun starts on this machine; with --hosts it must be none");
    options.bind_to = BindTo::none;
  }
  // Every VIASTACK_* variable, those only the ranks read too: a bad one
  // stops the job before any rank starts.
  if (const auto errors = via::config::check_environment().errors; !errors.empty()) {
    std::string lines = errors.front();
    for (std::size_t i = 1; i < errors.size(); ++i) lines += "\nviarun: " + errors[i];
    throw UsageError(lines);
  }

  if (provider) {
    options.provider = checked_provider(*provider, "--provider");
  } else {
    const auto inherited = via::config::text_if_set("VIASTACK_PROVIDER");
    // Across hosts, ranks on one host still talk through shared memory.
    const char* fallback = options.hosts.empty() ? "shm" : "auto";
    options.provider = inherited ? checked_provider(*inherited, "VIASTACK_PROVIDER") : fallback;
  }
  if (timeout) {
    options.timeout = parse_timeout(*timeout, "--timeout");
  } else if (const auto seconds = via::config::decimal_if_set("VIASTACK_TIMEOUT")) {
    options.timeout =
        JobTimeout{std::chrono::duration<double>(*seconds), *via::config::text_if_set("VIASTACK_TIMEOUT")};
  }
  return options;
}

const char* usage_text() {
  return "usage: viarun -n N [--provider shm|tcp|auto] [--hosts h1,h2,...] [--launcher TEMPLATE]\n"
         "              [--listen-address A] [--timeout S] [--tag-output] [--bind-to core|socket|none]\n"
         "              [--map-by core|socket] [--report-bindings] [--] prog args...\n"
         "       viarun --info | --help | --version\n"
         "  -n N            number of ranks to start (1..1024)\n"
         "  --provider P    VIA provider of the ranks: shm, tcp, or auto: shm between\n"
         "                  ranks on one host, tcp between hosts\n"
         "                  (default: $VIASTACK_PROVIDER, else shm, with --hosts auto)\n"
         "  --hosts H,...   start the ranks round-robin on these hosts (same paths there)\n"
         "  --launcher T    command that runs a program on {host} (default: \"ssh {host}\";\n"
         "                  e.g. \"ip netns exec {host}\")\n"
         "  --listen-address A  address of this machine the ranks reach the job's directory on\n"
         "                  (default: 127.0.0.1, with --hosts this host's name's address)\n"
         "  --timeout S     end the job after S seconds, fractions allowed; exit status 124\n"
         "                  (default: $VIASTACK_TIMEOUT, else no limit)\n"
         "  --tag-output    prefix every output line with \"[rank] \"\n"
         "  --bind-to B     run each rank on its own core, on the CPUs of a socket, or\n"
         "                  anywhere (none); default: core when every rank has a core of\n"
         "                  its own among those viarun may use, else none (as mpirun)\n"
         "  --map-by M      the order ranks take cores in: core by core (default), or one\n"
         "                  core of each socket in turn (socket)\n"
         "  --report-bindings  say on stderr where each rank runs\n"
         "  --info          list every VIASTACK_* environment variable: its name, default,\n"
         "                  current value and meaning (a bad value stops the job at start-up)\n"
         "  -h, --help      show this help\n"
         "  --version       show viastack's version and the providers compiled in\n"
         "environment: VIASTACK_PROVIDER, VIASTACK_TIMEOUT, and every VIASTACK_* variable\n"
         "  the ranks read (viarun --info lists them; a bad value stops the job at start-up)\n"
         "exit status: the first failed rank's (128+N if signal N ended it), 0 if all\n"
         "  succeeded; 124 on --timeout; 127 if the program is not found; 2 for a bad\n"
         "  command line or environment; 1 if viarun itself failed\n";
}

}  // namespace viarun
