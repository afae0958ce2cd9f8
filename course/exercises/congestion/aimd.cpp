// aimd.cpp: your congestion controller (exercise congestion). The rules are
// in aimd.hpp; README.md says how the checker tests them.
//
// As given, the window starts at the initial window and then never moves:
// the stream still arrives (slowly), but the checker fails it at the first
// ACK of slow start.
#include "aimd.hpp"

void AimdController::start(std::uint32_t mss, utcp::Instant) {
  mss_ = mss;
  cwnd_ = utcp::initial_window(mss);
  ssthresh_ = no_threshold;
  growth_carried_ = 0;
}

void AimdController::on_ack(const utcp::AckSample& ack) {
  // TODO: slow start below ssthresh, congestion avoidance at or above it.
  (void)ack;
}

void AimdController::on_enter_recovery(std::uint32_t bytes_in_flight, utcp::Instant) {
  // TODO: the multiplicative decrease.
  (void)bytes_in_flight;
}

void AimdController::on_recovery_exit(std::uint32_t bytes_in_flight, utcp::Instant) {
  // TODO: the window to go on with.
  (void)bytes_in_flight;
}

void AimdController::on_rto(std::uint32_t bytes_in_flight, bool, utcp::Instant) {
  // TODO: back to one segment.
  (void)bytes_in_flight;
}
