#include "runtime.hpp"

#include <via/bootstrap.hpp>

#include <cstdlib>
#include <string>

#include "errors.hpp"
#include "ompi_internals.hpp"

namespace viastack::mpi {

namespace {

LifeStage stage = LifeStage::before_init;

}  // namespace

Runtime* running_runtime = nullptr;

Runtime::Runtime(int world_rank, int world_size)
    : world_rank_(world_rank), world_size_(world_size), p2p_(world_rank, world_size) {
  p2p_.set_rma_client(windows_);
  std::vector<int> everyone(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) everyone[std::size_t(r)] = r;
  world_ = std::make_unique<Communicator>(std::make_shared<Group>(std::move(everyone), world_rank), kWorldContext,
                                          ErrhandlerKind::fatal);
  self_ = std::make_unique<Communicator>(std::make_shared<Group>(std::vector<int>{world_rank}, world_rank), kSelfContext,
                                         ErrhandlerKind::fatal);
  world_->set_name("MPI_COMM_WORLD");
  self_->set_name("MPI_COMM_SELF");
  world_->handle = MPI_COMM_WORLD;
  self_->handle = MPI_COMM_SELF;
  MPI_COMM_WORLD->impl = world_.get();
  MPI_COMM_SELF->impl = self_.get();
  world_->publish_group(*MPI_COMM_WORLD);
  self_->publish_group(*MPI_COMM_SELF);
}

Runtime::~Runtime() {
  MPI_COMM_WORLD->impl = nullptr;
  MPI_COMM_SELF->impl = nullptr;
}

std::uint32_t Runtime::agree_on_context(const Communicator& parent) {
  std::uint32_t agreed = 0;
  allreduce_max_u32(parent, context_proposal(), agreed);
  claim_contexts(agreed, 1);
  return agreed;
}

LifeStage life_stage() { return stage; }

void fail_not_running() {
  fail(MPI_ERR_OTHER, stage == LifeStage::before_init ? "MPI is not initialized (call MPI_Init first)"
                                                      : "MPI was finalized");
}

void start_runtime() {
  if (stage != LifeStage::before_init) fail(MPI_ERR_OTHER, "MPI_Init was already called");
  std::string why;
  const auto job = via::job_bootstrap(why);
  if (!job) abort_job("MPI_Init", why);
  ompi_mpi_state = kOpenMpiInitStarted;
  running_runtime = new Runtime(job->rank(), job->size());
  stage = LifeStage::running;
  ompi_mpi_state = kOpenMpiInitCompleted;
}

void stop_runtime() {
  Runtime& rt = runtime();
  ompi_mpi_state = kOpenMpiFinalizeStarted;
  rt.bsend().flush();  // MPI_Finalize delivers buffered messages, as MPI_Buffer_detach would
  barrier(rt.world());
  rt.p2p().shutdown();
  delete running_runtime;
  running_runtime = nullptr;
  stage = LifeStage::finalized;
  ompi_mpi_state = kOpenMpiFinalizeCompleted;
}

}  // namespace viastack::mpi
