#include "providers/tcp/admission.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "via/log.hpp"

namespace via::tcp {

namespace {
constexpr std::size_t kMaxSourcesCounted = 4096;
// How long the accept loop rests when no descriptor is left and no pending
// connection can give one back: newcomers wait in the kernel's queue.
constexpr std::chrono::milliseconds kAcceptPause{100};

std::string limit_text(rlim_t value) { return value == RLIM_INFINITY ? "unlimited" : std::to_string(value); }

// Asio's errors are in its own category, which maps to no std::errc.
bool system_out_of_descriptors(const asio::error_code& ec) {
  return ec.category() == asio::error::get_system_category() && ec.value() == ENFILE;
}
}  // namespace

rlimit raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == limit.rlim_max) return limit;
  rlim_t target = limit.rlim_max;
  if (target == RLIM_INFINITY) {
    // The kernel takes no more than fs.nr_open.
    target = limit.rlim_cur;
    std::ifstream("/proc/sys/fs/nr_open") >> target;
  }
  if (target > limit.rlim_cur) {
    rlimit raised{target, limit.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit;
}

bool out_of_descriptors(const asio::error_code& ec) {
  return ec == asio::error::no_descriptors || system_out_of_descriptors(ec);
}

std::string describe_descriptor_shortage(const asio::error_code& ec) {
  if (system_out_of_descriptors(ec))
    return "the system is out of file descriptors (ENFILE: the kernel's fs.file-max)";
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  return "this process is out of file descriptors (EMFILE: RLIMIT_NOFILE, soft limit " + limit_text(limit.rlim_cur) +
         ", hard limit " + limit_text(limit.rlim_max) + "; raise it with ulimit -n)";
}

PendingLimits PendingLimits::for_job(rlim_t soft_limit, std::size_t job_ranks) {
  const std::size_t strangers_total = std::clamp<rlim_t>(soft_limit / 4, 8, 512);
  const std::size_t strangers_per_source = std::max<std::size_t>(strangers_total / 4, 2);
  return PendingLimits{strangers_per_source + job_ranks, strangers_total + job_ranks};
}

// ---- the log ----

RefusalLog::RefusalLog(asio::io_context& io, std::string prefix) : prefix_(std::move(prefix)), summary_timer_(io) {}

RefusalLog::~RefusalLog() { summarize(); }

void RefusalLog::refused(const asio::ip::address& source, const std::string& peer, const std::string& why) {
  if (!window_open_) {
    window_open_ = true;
    window_start_ = Clock::now();
    in_full_ = 0;
  }
  if (in_full_ < kInFull) {
    ++in_full_;
    VIA_LOG(warn, "via", "%srefused a connection from %s: %s", prefix_.c_str(), peer.c_str(), why.c_str());
    return;
  }
  ++unlisted_;
  if (unlisted_sources_.size() < kMaxSourcesCounted) unlisted_sources_.insert(source);
  if (summary_due_) return;
  summary_due_ = true;
  summary_timer_.expires_at(window_start_ + kInterval);
  summary_timer_.async_wait([this](const asio::error_code& ec) {
    if (!ec) summarize();  // never run once the log is gone: its owner's io_context goes with it
  });
}

void RefusalLog::summarize() {
  if (unlisted_ > 0) {
    const auto seconds = std::chrono::ceil<std::chrono::seconds>(Clock::now() - window_start_).count();
    const std::size_t sources = unlisted_sources_.size();
    VIA_LOG(warn, "via", "%srefused or evicted %zu more connection%s from %s%zu source%s in the last %lld s",
            prefix_.c_str(), unlisted_, unlisted_ == 1 ? "" : "s", sources >= kMaxSourcesCounted ? "at least " : "",
            sources, sources == 1 ? "" : "s", static_cast<long long>(std::max<long long>(seconds, 1)));
  }
  window_open_ = summary_due_ = false;
  unlisted_ = 0;
  unlisted_sources_.clear();
}

void RefusalLog::warn(const std::string& line) {
  const auto now = Clock::now();
  if (now < next_warning_) return;
  next_warning_ = now + kInterval;
  VIA_LOG(warn, "via", "%s%s", prefix_.c_str(), line.c_str());
}

// ---- admissions ----

Admissions::Admission::Admission(asio::ip::tcp::socket socket)
    : conn(std::make_shared<Handshake>(std::move(socket))) {
  asio::error_code ec;
  source = conn->socket.remote_endpoint(ec).address();
}

Admissions::Admissions(asio::ip::tcp::acceptor& acceptor, std::size_t job_ranks, std::string log_prefix,
                       Admitted admitted)
    : acceptor_(acceptor), admitted_(std::move(admitted)),
      limits_(PendingLimits::for_job(raise_descriptor_limit().rlim_cur, job_ranks)),
      log_(static_cast<asio::io_context&>(acceptor.get_executor().context()), std::move(log_prefix)),
      accept_pause_(acceptor.get_executor()) {}

void Admissions::accept_next() {
  acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      admit(std::move(socket));
    } else if (out_of_descriptors(ec)) {
      // The oldest pending connection's descriptor lets the newcomer in.
      if (Admission* victim = oldest(nullptr)) {
        end(*victim, "evicted to make room: " + describe_descriptor_shortage(ec));
      } else {
        log_.warn("cannot accept connections: " + describe_descriptor_shortage(ec));
        accept_pause_.expires_after(kAcceptPause);
        accept_pause_.async_wait([this](const asio::error_code& ec) {
          if (!ec) accept_next();
        });
        return;
      }
    }
    accept_next();
  });
}

void Admissions::admit(asio::ip::tcp::socket socket) {
  auto a = std::make_shared<Admission>(std::move(socket));
  if (pending_by_source_[a->source] >= limits_.per_source) {
    end(*oldest(&a->source), "evicted to make room: " + std::to_string(limits_.per_source) +
                                 " connections from its address were still proving themselves");
  } else if (pending_.size() >= limits_.total) {
    end(*oldest(&busiest_source()), "evicted to make room: " + std::to_string(limits_.total) +
                                        " connections were still proving themselves");
  }
  ++pending_by_source_[a->source];
  a->position = pending_.insert(pending_.end(), a);
  a->deadline = std::make_shared<asio::steady_timer>(acceptor_.get_executor(), auth_timeout());
  a->deadline->async_wait([this, weak = std::weak_ptr<Admission>(a)](const asio::error_code& ec) {
    if (ec) return;
    // Decided after the handlers this poll already has ready: when the
    // acceptor itself was away past the deadline, the timer and the peer's
    // bytes are found together, and a read started by one of those handlers
    // (the request after the proof) completes only after this one ran.
    asio::post(acceptor_.get_executor(), [this, weak] {
      auto a = weak.lock();
      if (!a || a->state != Admission::State::pending) return;
      end(*a, a->proven ? "it proved it belongs to the job but sent no request in time"
                        : "it did not prove it belongs to the job in time");
    });
  });
  admitted_(a);
}

Admissions::Admission* Admissions::oldest(const asio::ip::address* source) {
  for (auto& a : pending_)
    if (!source || a->source == *source) return a.get();
  return nullptr;
}

const asio::ip::address& Admissions::busiest_source() const {
  auto busiest = pending_by_source_.begin();
  for (auto it = pending_by_source_.begin(); it != pending_by_source_.end(); ++it)
    if (it->second > busiest->second) busiest = it;
  return busiest->first;
}

bool Admissions::leave(Admission& a) {
  if (a.state != Admission::State::pending) return false;
  if (auto it = pending_by_source_.find(a.source); it != pending_by_source_.end() && --it->second == 0)
    pending_by_source_.erase(it);
  if (a.deadline) a.deadline->cancel();
  pending_.erase(a.position);  // may drop the list's reference to `a`: callers hold their own
  return true;
}

bool Admissions::settle(Admission& a) {
  if (!leave(a)) return false;
  a.state = Admission::State::settled;
  return true;
}

void Admissions::refuse(Admission& a, const std::string& why) {
  if (a.state == Admission::State::ended) return;
  end(a, why);
}

void Admissions::end(Admission& a, const std::string& why) {
  // The list's reference may be the last one: `a` must outlive leave().
  const std::shared_ptr<Admission> hold = a.state == Admission::State::pending ? *a.position : nullptr;
  leave(a);
  a.state = Admission::State::ended;
  log_.refused(a.source, a.conn->peer, why);
  asio::error_code ignored;
  a.conn->socket.close(ignored);
}

}  // namespace via::tcp
