// Completion queues.
#include <atomic>

#include "engine/engine.hpp"

namespace via {

void CqImpl::push(const Entry& entry) {
  if (entries_.size() >= capacity_ && !overflow_reported_) {
    overflow_reported_ = true;
    nic_.report(AsyncError{entry.vi, this, nullptr, VIP_RESOURCE_CQ, VIP_ERROR_CATASTROPHIC,
                           "completion queue overflow: more completions than its EntryCount"});
  }
  if (notify_) {
    // One-shot, as VipCQNotify: the handler consumes this completion, once the
    // NIC is done with its loop over the VIs.
    nic_.defer([handler = std::move(notify_), entry] { handler(entry); });
    notify_ = nullptr;
    return;
  }
  entries_.push_back(entry);
}

Result CqImpl::done(Entry& out) {
  if (entries_.empty()) nic_.progress();
  if (entries_.empty()) return Result::not_done;
  out = entries_.front();
  entries_.pop_front();
  return Result::success;
}

Result CqImpl::wait(std::uint32_t timeout_ms, Entry& out) {
  Result r = nic_.wait([&] { return !entries_.empty(); }, timeout_ms);
  if (r != Result::success) return r;
  out = entries_.front();
  entries_.pop_front();
  return Result::success;
}

void CqImpl::forget(const Vi* vi) {
  std::erase_if(entries_, [vi](const Entry& e) { return e.vi == vi; });
}

Result CqImpl::resize(std::size_t capacity) {
  if (capacity == 0 || capacity < entries_.size()) return Result::invalid_parameter;
  capacity_ = capacity;
  overflow_reported_ = false;
  return Result::success;
}

// ---- the public Cq: each call is the engine's CqImpl's ----

Nic& Cq::nic() const { return impl(*this).nic(); }
Result Cq::done(Entry& out) { return impl(*this).done(out); }
Result Cq::wait(std::uint32_t timeout_ms, Entry& out) { return impl(*this).wait(timeout_ms, out); }
Result Cq::resize(std::size_t capacity) { return impl(*this).resize(capacity); }
void Cq::set_notify(std::function<void(const Entry&)> handler) { impl(*this).set_notify(std::move(handler)); }
std::size_t Cq::size() const { return impl(*this).size(); }
std::size_t Cq::capacity() const { return impl(*this).capacity(); }

}  // namespace via
