#include "comm.hpp"

#include <algorithm>
#include <string>

#include "errors.hpp"
#include "fortran_handles.hpp"

namespace viastack::mpi {

Group::Group(std::vector<int> world_ranks, int my_world_rank) : world_ranks_(std::move(world_ranks)) {
  my_rank_ = rank_of_world(my_world_rank);
  // What Open MPI's Fortran bindings read from a group without a call (abi.hpp).
  handle.open_mpi_proc_count = size();
  handle.open_mpi_my_rank = my_rank_;
  fortran_handle(&handle);
}

int Group::rank_of_world(int world_rank) const {
  auto it = std::find(world_ranks_.begin(), world_ranks_.end(), world_rank);
  return it == world_ranks_.end() ? MPI_UNDEFINED : int(it - world_ranks_.begin());
}

Communicator::Communicator(std::shared_ptr<const Group> group, std::uint32_t context, ErrhandlerRef errhandler)
    : handle(&owned_handle),
      group_(std::move(group)),
      rank_(group_->rank()),
      peer_world_ranks_(group_->world_ranks()),
      context_(context),
      errhandler_(std::move(errhandler)) {
  publish_group(owned_handle);
}

void Communicator::publish_group(ompi_communicator_t& public_handle) const {
  public_handle.open_mpi_local_group = const_cast<ompi_group_t*>(&group_->handle);
}

std::uint32_t Communicator::next_collective_sequence() const {
  if (remote_) fail(MPI_ERR_UNSUPPORTED_OPERATION, "viastack's MPI does not have this operation on an intercommunicator");
  return collective_calls_++;
}

std::uint32_t Communicator::next_intercomm_collective_sequence() const {
  if (!remote_) fail(MPI_ERR_INTERN, "an intercommunicator's collective on an intracommunicator");
  return collective_calls_++;
}

void Communicator::make_inter(std::shared_ptr<const Group> remote, std::unique_ptr<Communicator> local) {
  remote_ = std::move(remote);
  peer_world_ranks_ = remote_->world_ranks();
  local_ = std::move(local);
  // What Open MPI's Fortran and C++ bindings read of an intercommunicator
  // straight from the handle (abi.hpp): its flag and its remote group.
  handle->open_mpi_flags |= ::kOpenMpiCommIntercomm;
  handle->open_mpi_remote_group = const_cast<ompi_group_t*>(&remote_->handle);
}

void Communicator::fail_rank(int rank) const {
  const int size = peers().size();
  std::string why = "rank ";
  why += std::to_string(rank);
  why += " is not in 0..";
  why += std::to_string(size - 1);
  fail(MPI_ERR_RANK, why);
}

void fail_invalid_communicator() {
  fail(MPI_ERR_COMM, "invalid communicator (MPI_COMM_NULL, freed, or not a communicator)");
}

Group& group_of(MPI_Group handle) {
  if (handle == nullptr || handle->kind != HandleKind::group || handle->impl == nullptr)
    fail(MPI_ERR_GROUP, "invalid group (MPI_GROUP_NULL, freed, or not a group)");
  return *handle->impl;
}

}  // namespace viastack::mpi
