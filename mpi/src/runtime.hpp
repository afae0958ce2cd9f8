// The library's state between MPI_Init and MPI_Finalize: the job, the
// point-to-point engine, the windows, MPI_Bsend's attached buffer,
// MPI_COMM_WORLD and MPI_COMM_SELF.
#pragma once

#include <cstddef>
#include <memory>

#include "bsend.hpp"
#include "collectives.hpp"
#include "comm.hpp"
#include "nonblocking_collectives.hpp"
#include "p2p.hpp"
#include "window.hpp"

namespace viastack::mpi {

class Runtime {
 public:
  Runtime(int world_rank, int world_size);
  ~Runtime();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  P2P& p2p() { return p2p_; }
  NonblockingCollectives& nonblocking_collectives() { return nonblocking_collectives_; }
  Windows& windows() { return windows_; }
  BsendBuffer& bsend() { return bsend_; }
  const CollectiveTuning& collective_tuning() const { return tuning_; }
  Communicator& world() { return *world_; }
  // A fresh context pair for a communicator made collectively over `parent`.
  std::uint32_t agree_on_context(const Communicator& parent);
  // The same agreement made otherwise (intercomm.cpp): every member proposes
  // context_proposal(), the largest proposal wins, and each member then claims
  // `pairs` context pairs from it.
  std::uint32_t context_proposal() const { return next_context_; }
  void claim_contexts(std::uint32_t agreed, std::uint32_t pairs) { next_context_ = agreed + 2 * pairs; }

 private:
  int world_rank_, world_size_;
  P2P p2p_;
  NonblockingCollectives nonblocking_collectives_{p2p_};
  Windows windows_{p2p_};
  BsendBuffer bsend_{p2p_};
  CollectiveTuning tuning_ = collective_tuning_from_env();
  std::unique_ptr<Communicator> world_, self_;
  std::uint32_t next_context_ = kFirstFreeContext;
};

enum class LifeStage { before_init, running, finalized };
LifeStage life_stage();
// Set while the stage is `running` (runtime.cpp).
extern Runtime* running_runtime;
[[noreturn]] void fail_not_running();
// The running library; throws MPI_ERR_OTHER before MPI_Init and after MPI_Finalize.
// Inline: every call asks.
inline Runtime& runtime() {
  if (!running_runtime) [[unlikely]]
    fail_not_running();
  return *running_runtime;
}
void start_runtime();
void stop_runtime();

}  // namespace viastack::mpi
