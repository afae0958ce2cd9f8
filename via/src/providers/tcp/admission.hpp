// How a tcp NIC and viarun's job directory take in new connections. Anyone
// who reaches the port can open one, so connections still proving they belong
// to the job (handshake.hpp) are bounded per source address and in all
// (PendingLimits: room for strangers, plus room for the job's own). When
// a newcomer would pass a bound, the oldest pending connection goes (of the
// newcomer's source, or of the source holding the most), never the newcomer:
// strangers holding idle connections cannot keep a member of the job out,
// since a member proves itself within a few round trips; a member's stream
// evicted anyway is opened again by its side (the provider retries). Refusals
// are logged in full a few times per interval, then summed up in one line.
// Running out of file descriptors is said once per interval, naming the
// limit, and never makes the accept loop spin.
#pragma once

#include <sys/resource.h>

#include <asio.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "providers/tcp/handshake.hpp"

namespace via::tcp {

// Raises this process's soft RLIMIT_NOFILE as far as its hard limit allows;
// the limit in force afterwards.
rlimit raise_descriptor_limit();
// Whether `ec` says no file descriptor was left (EMFILE, ENFILE).
bool out_of_descriptors(const asio::error_code& ec);
// What to say then, naming the limit that was reached.
std::string describe_descriptor_shortage(const asio::error_code& ec);

struct PendingLimits {
  std::size_t per_source, total;
  // Strangers may hold a quarter of the process's descriptors (8 to 512) in
  // connections still proving themselves, a quarter of those from one source
  // address: a flood never takes the descriptors the job's own streams need.
  // The job's own connections come on top of that, as many as it has ranks,
  // per source and in all: in a one-host job every rank connects from the
  // same address, and an all-to-all set-up has them all connecting to one
  // rank at once. Each rank opens one stream per peer it talks to, so the
  // rank count bounds what the job legitimately has pending from any one
  // address (connections past it, e.g. several VIs to one peer at once, are
  // evicted oldest-first and opened again). A flood is still bounded: by its
  // share plus the job's ranks when it comes from the job's own address,
  // which costs no more descriptors than the job's streams need anyway.
  static PendingLimits for_job(rlim_t soft_limit, std::size_t job_ranks);
};

// Warnings in the log, "<prefix>refused a connection from <peer>: <why>", for the first few
// refusals of an interval; the rest are counted and summed up in one line
// when the interval ends (or the log goes).
class RefusalLog {
 public:
  static constexpr std::chrono::seconds kInterval{10};
  static constexpr int kInFull = 5;

  RefusalLog(asio::io_context& io, std::string prefix);
  ~RefusalLog();
  RefusalLog(const RefusalLog&) = delete;
  RefusalLog& operator=(const RefusalLog&) = delete;

  void refused(const asio::ip::address& source, const std::string& peer, const std::string& why);
  // Any other line, at most once per interval.
  void warn(const std::string& line);

 private:
  using Clock = std::chrono::steady_clock;
  void summarize();

  const std::string prefix_;
  asio::steady_timer summary_timer_;
  bool window_open_ = false, summary_due_ = false;
  Clock::time_point window_start_{};
  int in_full_ = 0;
  std::size_t unlisted_ = 0;
  std::set<asio::ip::address> unlisted_sources_;  // bounded: past a limit only counted
  Clock::time_point next_warning_{};
};

// Accepts connections on `acceptor` and hands each to `admitted`, which runs
// its handshake and ends its admission with settle() or refuse(). A pending
// connection that has done neither by auth_timeout() is closed, counted from
// its accept; what the peer sent by the time the acceptor looks again is
// taken first, so that the acceptor's own lateness (descheduled on a loaded
// machine) does not count against the peer.
class Admissions {
 public:
  struct Admission {
    explicit Admission(asio::ip::tcp::socket socket);
    std::shared_ptr<Handshake> conn;
    bool proven = false;  // the owner's handshake checked; only what follows is missing

   private:
    friend class Admissions;
    enum class State { pending, settled, ended } state = State::pending;
    asio::ip::address source;
    std::shared_ptr<asio::steady_timer> deadline;
    std::list<std::shared_ptr<Admission>>::iterator position;  // in pending_, while pending
  };
  using Admitted = std::function<void(const std::shared_ptr<Admission>&)>;

  // `job_ranks`: how many ranks the job has, that is how many of its
  // members may connect at once (PendingLimits).
  Admissions(asio::ip::tcp::acceptor& acceptor, std::size_t job_ranks, std::string log_prefix, Admitted admitted);
  Admissions(const Admissions&) = delete;
  Admissions& operator=(const Admissions&) = delete;

  void start() { accept_next(); }
  // The connection proved itself (and made its request): it is no longer
  // pending. False when it was evicted or timed out meanwhile (then closed).
  bool settle(Admission& a);
  // Closes a pending connection, logging why (unless its eviction or
  // deadline already said so).
  void refuse(Admission& a, const std::string& why);

  const PendingLimits& limits() const { return limits_; }
  // The connections still pending, oldest first.
  const std::list<std::shared_ptr<Admission>>& pending() const { return pending_; }
  RefusalLog& log() { return log_; }

 private:
  void accept_next();
  void admit(asio::ip::tcp::socket socket);
  // The oldest pending connection from `source`; from anywhere when null.
  Admission* oldest(const asio::ip::address* source);
  const asio::ip::address& busiest_source() const;
  // Takes `a` off the pending list; true if it was on it.
  bool leave(Admission& a);
  void end(Admission& a, const std::string& why);

  asio::ip::tcp::acceptor& acceptor_;
  const Admitted admitted_;
  const PendingLimits limits_;
  RefusalLog log_;
  asio::steady_timer accept_pause_;  // while no descriptor is left for a newcomer
  std::list<std::shared_ptr<Admission>> pending_;  // oldest first
  std::map<asio::ip::address, std::size_t> pending_by_source_;
};

}  // namespace via::tcp
