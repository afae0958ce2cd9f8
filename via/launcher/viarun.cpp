// viarun: the embedded launcher of viastack.
//   viarun -n N [--provider shm|tcp|auto] [--hosts ...] [--timeout S] [--tag-output] [--] prog args...
// Starts N ranks of prog (here, or on the given hosts), serves the job's
// directory, forwards their output line by line and ends
// the job with the first failing rank's status (see job.hpp).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>

#include "job.hpp"
#include "bootstrap/directory.hpp"
#include "via/config.hpp"
#include "viastack.h"
#include "providers/shm/segment.hpp"
#include "options.hpp"
#include "posix_io.hpp"
#include "signal_watcher.hpp"
#include "spawn.hpp"

namespace {

constexpr int kUsageStatus = 2;
constexpr int kNotFoundStatus = 127;
constexpr int kInternalErrorStatus = 1;

// The job's folder of shared-memory segments (see the shm provider), made
// before any rank starts, so that nobody who watches /dev/shm can take its
// name between the ranks' start-ups, and removed with whatever the ranks left
// in it when the job ends.
class SharedMemoryFolder {
 public:
  explicit SharedMemoryFolder(std::string job_id) : job_id_(std::move(job_id)) {
    std::string error;
    if (!via::shm::prepare_job_directory(job_id_, error)) throw std::runtime_error(error);
  }
  ~SharedMemoryFolder() { via::shm::remove_job_directory(job_id_); }
  SharedMemoryFolder(const SharedMemoryFolder&) = delete;
  SharedMemoryFolder& operator=(const SharedMemoryFolder&) = delete;

 private:
  std::string job_id_;
};

// The address ranks on other hosts reach this machine on: what this host's
// name resolves to, if that is not a loopback address.
asio::ip::address default_listen_address(const viarun::LaunchOptions& options) {
  if (options.hosts.empty()) return asio::ip::address_v4::loopback();
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  asio::error_code ec;
  for (const auto& entry : resolver.resolve(asio::ip::tcp::v4(), hostname, "0", ec))
    if (!entry.endpoint().address().is_loopback()) return entry.endpoint().address();
  throw viarun::UsageError(std::string("--hosts: cannot tell which address of ") + hostname +
                           " the ranks can reach; give --listen-address");
}

int run_job(const viarun::LaunchOptions& options) {
  std::string program_path = viarun::resolve_program(options.command.front());
  std::string job_id = viarun::make_job_id();
  SharedMemoryFolder shared_memory(job_id);  // declared before the job: removed after it ends
  // Every job has its own secret; the directory where the ranks publish their
  // addresses only answers connections that prove they know it.
  const via::tcp::JobKey key = via::tcp::random_key();
  asio::ip::address listen;
  if (options.listen_address.empty()) {
    listen = default_listen_address(options);
  } else {
    asio::error_code ec;
    listen = asio::ip::make_address_v4(options.listen_address, ec);
    if (ec) throw viarun::UsageError("--listen-address: '" + options.listen_address + "' is not an IPv4 address");
  }
  // Signals are routed to viarun's signalfd before the directory's thread
  // starts, so that the thread inherits the blocked mask.
  viarun::SignalWatcher signals;
  via::tcp::DirectoryServer directory(key, listen, std::size_t(options.ranks));
  viarun::Job job(options, program_path, job_id, {via::tcp::key_to_hex(key), directory.address()}, signals);
  return job.run();
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout must not kill viarun while its ranks still run.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    viarun::LaunchOptions options = viarun::parse_options(argc, argv);
    if (options.show_help) {
      std::fputs(viarun::usage_text(), stdout);
      return 0;
    }
    if (options.show_version) {
      std::printf("viarun (viastack) %s\nproviders: %s\n", viastack_version(), viastack_providers());
      return 0;
    }
    if (options.show_info) {
      std::fputs(via::config::info().c_str(), stdout);
      return 0;
    }
    return run_job(options);
  } catch (const viarun::UsageError& error) {
    viarun::report(error.what());
    std::fputs(viarun::usage_text(), stderr);
    return kUsageStatus;
  } catch (const viarun::ProgramNotFound& error) {
    viarun::report(error.what());
    return kNotFoundStatus;
  } catch (const std::exception& error) {
    viarun::report(error.what());
    return kInternalErrorStatus;
  }
}
