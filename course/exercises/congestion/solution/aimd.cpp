// aimd.cpp: the reference solution of exercise congestion (for the teacher).
#include "aimd.hpp"

#include <algorithm>

void AimdController::start(std::uint32_t mss, utcp::Instant) {
  mss_ = mss;
  cwnd_ = utcp::initial_window(mss);
  ssthresh_ = no_threshold;
  growth_carried_ = 0;
}

void AimdController::on_ack(const utcp::AckSample& ack) {
  if (cwnd_ < ssthresh_) {
    cwnd_ += std::min(ack.bytes_acknowledged, mss_);
    return;
  }
  // α segments per cwnd acknowledged; what is less than a byte waits for the
  // next ACK, or a window of small ACKs would never grow.
  growth_carried_ += alpha * mss_ * ack.bytes_acknowledged / cwnd_;
  const auto whole_bytes = static_cast<std::uint32_t>(growth_carried_);
  cwnd_ += whole_bytes;
  growth_carried_ -= whole_bytes;
}

namespace {
std::uint32_t decreased(std::uint32_t bytes_in_flight, std::uint32_t mss) {
  return std::max(static_cast<std::uint32_t>(AimdController::beta * bytes_in_flight), 2 * mss);
}
}  // namespace

void AimdController::on_enter_recovery(std::uint32_t bytes_in_flight, utcp::Instant) {
  ssthresh_ = decreased(bytes_in_flight, mss_);
  cwnd_ = ssthresh_;
  growth_carried_ = 0;
}

void AimdController::on_recovery_exit(std::uint32_t bytes_in_flight, utcp::Instant) {
  cwnd_ = std::min(ssthresh_, std::max(bytes_in_flight, mss_) + mss_);
}

void AimdController::on_rto(std::uint32_t bytes_in_flight, bool, utcp::Instant) {
  ssthresh_ = decreased(bytes_in_flight, mss_);
  cwnd_ = mss_;
  growth_carried_ = 0;
}
