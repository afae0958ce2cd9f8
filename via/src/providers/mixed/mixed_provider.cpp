// The mixed provider: one NIC for a job that spans nodes. Peers on this node
// are reached through the shm provider, peers on other nodes through the tcp
// provider, as the bootstrap's node map says (MPICH ch4's shmmod/netmod split,
// in VIA's terms). Both providers live beneath this one; each VI is bound to
// one of them when it connects. Addresses carry a tag byte naming the
// provider that reaches them, followed by that provider's own address.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "providers/provider.hpp"
#include "via/bootstrap.hpp"
#include "via/log.hpp"

namespace via {

namespace mixed {
namespace {

constexpr std::uint8_t kShmTag = 's';
constexpr std::uint8_t kTcpTag = 't';

std::vector<std::uint8_t> tagged(std::uint8_t tag, const std::vector<std::uint8_t>& host) {
  std::vector<std::uint8_t> out(host.size() + 1, tag);
  std::copy(host.begin(), host.end(), out.begin() + 1);
  return out;
}

// A futex (shm's doorbell) and sockets (tcp's epoll set) cannot be waited on
// together. So while the NIC sleeps on the doorbell, this thread waits on the
// sockets, and rings the doorbell when one has work: the NIC sleeps its whole
// slice when nothing comes, and wakes at once when either provider has work.
class TcpWaker {
 public:
  TcpWaker(Provider& shm, Provider& tcp)
      : shm_(shm), tcp_(tcp), interrupt_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), thread_([this] { run(); }) {}
  ~TcpWaker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_one();
    interrupt();
    thread_.join();
    ::close(interrupt_);
  }
  TcpWaker(const TcpWaker&) = delete;
  TcpWaker& operator=(const TcpWaker&) = delete;

  // The NIC is about to sleep on shm's doorbell (its token taken).
  void arm() {
    const int fd = tcp_.sleep_fd();
    if (fd < 0) {  // tcp has work already: the sleep must not block
      shm_.interrupt_sleep();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      watched_ = fd;
      armed_ = true;
      rang_ = false;
    }
    changed_.notify_one();
  }
  // The NIC is awake: a poll of the sockets in progress is cut short.
  void disarm() {
    bool polling;
    {
      std::lock_guard lock(mutex_);
      armed_ = false;
      polling = polling_;
    }
    if (polling) interrupt();
  }

 private:
  void interrupt() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(interrupt_, &one, sizeof one);
  }

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stop_ || (armed_ && !rang_); });
      if (stop_) return;
      pollfd fds[2] = {{watched_, POLLIN, 0}, {interrupt_, POLLIN, 0}};
      polling_ = true;
      lock.unlock();
      ::poll(fds, 2, -1);
      lock.lock();
      polling_ = false;
      if (fds[1].revents) {
        std::uint64_t count;
        [[maybe_unused]] const auto n = ::read(interrupt_, &count, sizeof count);
      }
      if ((fds[0].revents & POLLIN) && armed_) {
        shm_.interrupt_sleep();
        rang_ = true;
      }
    }
  }

  Provider& shm_;
  Provider& tcp_;
  const int interrupt_;  // an eventfd: written to end a poll early
  std::mutex mutex_;
  std::condition_variable changed_;
  int watched_ = -1;      // tcp's sleep descriptor
  bool armed_ = false;    // the NIC sleeps
  bool rang_ = false;     // and this thread has woken it
  bool polling_ = false;  // the thread is in poll()
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is set
};

class MixedProvider final : public Provider {
 public:
  MixedProvider(std::shared_ptr<Bootstrap> job, std::unique_ptr<Provider> shm, std::unique_ptr<Provider> tcp)
      : job_(std::move(job)), shm_(std::move(shm)), tcp_(std::move(tcp)), host_(tagged(kTcpTag, tcp_->host_address())) {
    for (int rank = 0; rank < job_->size(); ++rank)
      if (rank != int(nic_number()) && job_->node_of(rank) == my_node()) local_peers_ = true;
    if (local_peers_) waker_ = std::make_unique<TcpWaker>(*shm_, *tcp_);
  }

  const char* name() const override { return "mixed"; }
  const std::vector<std::uint8_t>& host_address() const override { return host_; }
  std::uint32_t nic_number() const override { return shm_->nic_number(); }

  // "rankN": through shared memory when rank N shares this node, else tcp.
  // Any other name is tcp's to resolve ("host:port").
  Result resolve(std::string_view name, std::uint32_t index, std::vector<std::uint8_t>& host) const override {
    Provider* sub = tcp_.get();
    if (name.substr(0, 4) == "rank") {
      const auto rank = name.size() > 4 && name.size() < 10 && name.substr(4).find_first_not_of("0123456789") ==
                                                                   std::string_view::npos
                            ? std::stoi(std::string(name.substr(4)))
                            : -1;
      if (rank < 0 || rank >= job_->size()) return Result::error_nameservice;
      if (job_->node_of(rank) == my_node()) sub = shm_.get();
    }
    std::vector<std::uint8_t> inner;
    if (Result r = sub->resolve(name, index, inner); r != Result::success) return r;
    host = tagged(tag_of(*sub), inner);
    return Result::success;
  }

  std::string describe_address(const std::vector<std::uint8_t>& host) const override {
    Provider* sub = provider_for(host);
    return sub ? sub->describe_address(inner_of(host)) : "mixed:<malformed address>";
  }

  void fill_attributes(VIP_NIC_ATTRIBUTES& a) const override {
    VIP_NIC_ATTRIBUTES shm{}, tcp{};
    shm_->fill_attributes(shm);
    tcp_->fill_attributes(tcp);
    a = tcp;
    std::snprintf(a.Name, sizeof a.Name, "viastack-mixed:%u", nic_number());
    a.MaxDiscriminatorLen = std::min(shm.MaxDiscriminatorLen, tcp.MaxDiscriminatorLen);
    a.NativeMTU = std::min(shm.NativeMTU, tcp.NativeMTU);
  }

  // One table for both: it lives in the shm segment, where node-local peers
  // check their single-copy RDMA against it; the engine checks tcp's there too.
  RegionTable& regions() override { return shm_->regions(); }
  std::uint32_t max_vis() const override { return std::min(shm_->max_vis(), tcp_->max_vis()); }

  // A VI takes resources of a provider only once it connects through it.
  Result add_vi(ViImpl& vi) override {
    if (bound_.size() >= max_vis()) return Result::error_resource;
    bound_[&vi] = nullptr;
    return Result::success;
  }
  void remove_vi(ViImpl& vi) override {
    if (Provider* sub = bound_[&vi]) sub->remove_vi(vi);
    bound_.erase(&vi);
  }
  void publish_vi_attributes(ViImpl& vi) override {
    if (Provider* sub = bound_[&vi]) sub->publish_vi_attributes(vi);
  }
  void reset_vi(ViImpl& vi) override {
    Provider*& sub = bound_[&vi];
    if (!sub) return;
    sub->reset_vi(vi);
    sub->remove_vi(vi);
    sub = nullptr;
  }

  Result connect(ViImpl& vi, const NetAddress& local, const NetAddress& remote, ConnectMode mode) override {
    Provider* sub = provider_for(remote.host);
    if (!sub || !is_mine(local.host)) return Result::invalid_parameter;
    if (Result r = bind(vi, *sub); r != Result::success) return r;
    return sub->connect(vi, NetAddress{{}, local.discriminator}, NetAddress{inner_of(remote.host), remote.discriminator},
                        mode);
  }
  Result poll_connect(ViImpl& vi) override {
    Provider* sub = bound_[&vi];
    return sub ? sub->poll_connect(vi) : Result::invalid_state;
  }
  bool cancel_connect(ViImpl& vi) override {
    Provider* sub = bound_[&vi];
    return !sub || sub->cancel_connect(vi);
  }

  // Requests from either provider, their addresses tagged; the provider's own
  // request is kept to answer it.
  std::unique_ptr<ConnRequestImpl> take_request(const NetAddress& local) override {
    for (Provider* sub : {shm_.get(), tcp_.get()}) {
      auto inner = sub->take_request(NetAddress{{}, local.discriminator});
      if (!inner) continue;
      auto request = std::make_unique<ConnRequestImpl>(*inner);
      request->remote.host = tagged(tag_of(*sub), inner->remote.host);
      request->local.host = host_;
      request->provider_cookie = ++last_cookie_;
      held_[last_cookie_] = Held{sub, std::move(inner)};
      return request;
    }
    return nullptr;
  }
  Result accept(const ConnRequestImpl& request, ViImpl& vi) override {
    auto it = held_.find(request.provider_cookie);
    if (it == held_.end()) return Result::invalid_parameter;
    Held held = std::move(it->second);
    held_.erase(it);
    if (Result r = bind(vi, *held.sub); r != Result::success) {
      held.sub->reject(*held.request);
      return r;
    }
    return held.sub->accept(*held.request, vi);
  }
  void reject(const ConnRequestImpl& request) override {
    auto it = held_.find(request.provider_cookie);
    if (it == held_.end()) return;
    it->second.sub->reject(*it->second.request);
    held_.erase(it);
  }

  void progress_control() override {
    shm_->progress_control();
    tcp_->progress_control();
  }

  // Blocks on the provider of the local peers, if there are any, while the
  // waker watches tcp's sockets; a rank alone on its node blocks on tcp's
  // sockets alone.
  std::uint32_t arm_sleep() override {
    tcp_token_ = tcp_->arm_sleep();
    const std::uint32_t token = shm_->arm_sleep();
    if (waker_) waker_->arm();
    return token;
  }
  void sleep(std::uint32_t token, std::chrono::nanoseconds max) override {
    if (!local_peers_) return tcp_->sleep(tcp_token_, max);
    shm_->sleep(token, max);
  }
  void disarm_sleep() override {
    if (waker_) waker_->disarm();
    shm_->disarm_sleep();
    tcp_->disarm_sleep();
  }
  // With local peers it sleeps on shm's doorbell, which the waker rings for tcp's work too.
  bool rang_since(std::uint32_t token) override { return !local_peers_ || shm_->rang_since(token); }

 private:
  struct Held {
    Provider* sub;
    std::unique_ptr<ConnRequestImpl> request;
  };

  // The NIC's number is its rank in the job (tests open several in one process).
  int my_node() const { return job_->node_of(int(nic_number())); }

  std::uint8_t tag_of(const Provider& sub) const { return &sub == shm_.get() ? kShmTag : kTcpTag; }
  Provider* provider_for(const std::vector<std::uint8_t>& host) const {
    if (host.empty()) return nullptr;
    return host[0] == kShmTag ? shm_.get() : host[0] == kTcpTag ? tcp_.get() : nullptr;
  }
  // Whether `host` names this NIC, through either provider (or is left empty).
  bool is_mine(const std::vector<std::uint8_t>& host) const {
    return host.empty() || host == host_ || host == tagged(kShmTag, shm_->host_address()) ||
           host == tagged(kTcpTag, tcp_->host_address());
  }
  static std::vector<std::uint8_t> inner_of(const std::vector<std::uint8_t>& host) {
    return host.empty() ? host : std::vector<std::uint8_t>(host.begin() + 1, host.end());
  }

  // Gives the VI resources of `sub`, releasing those of another it used before.
  Result bind(ViImpl& vi, Provider& sub) {
    Provider*& current = bound_[&vi];
    if (current == &sub) return Result::success;
    if (current) current->remove_vi(vi);
    current = nullptr;
    if (Result r = sub.add_vi(vi); r != Result::success) return r;
    sub.publish_vi_attributes(vi);
    current = &sub;
    return Result::success;
  }

  std::shared_ptr<Bootstrap> job_;
  std::unique_ptr<Provider> shm_, tcp_;
  std::vector<std::uint8_t> host_;
  std::map<Vi*, Provider*> bound_;  // the provider each VI connects through, once known
  std::map<std::uint64_t, Held> held_;
  std::uint64_t last_cookie_ = 0;
  std::uint32_t tcp_token_ = 0;
  bool local_peers_ = false;  // another rank shares this node
  std::unique_ptr<TcpWaker> waker_;  // with local peers; destroyed first, while the providers it uses exist
};

}  // namespace

Result open_mixed_provider(std::string_view device, const std::shared_ptr<Bootstrap>& job,
                           std::unique_ptr<Provider>& out) {
  std::unique_ptr<Provider> shm, tcp;
  if (Result r = shm::open_shm_provider(device, *job, shm); r != Result::success) return r;
  if (shm->nic_number() >= std::uint32_t(job->size())) {
    VIA_LOG(error, "via", "mixed: NIC %u is not a rank of this job of %d", shm->nic_number(), job->size());
    return Result::invalid_parameter;
  }
  if (Result r = tcp::open_tcp_provider(device, job, tcp); r != Result::success) return r;
  out = std::make_unique<MixedProvider>(job, std::move(shm), std::move(tcp));
  return Result::success;
}

}  // namespace mixed
}  // namespace via
