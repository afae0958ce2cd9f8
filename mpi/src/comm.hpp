// Groups and communicators. A communicator is a group (its members' world
// ranks in order), this process's rank in it, and a pair of context ids that
// keep its point-to-point and collective traffic apart from every other
// communicator's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "abi.hpp"
#include "errhandler.hpp"
#include "info.hpp"

namespace viastack::mpi {

struct Topology;  // topology.hpp
class NodeCollectives;  // node_collectives.hpp

class Group {
 public:
  Group(std::vector<int> world_ranks, int my_world_rank);
  int size() const { return int(world_ranks_.size()); }
  // This process's rank in the group, or MPI_UNDEFINED.
  int rank() const { return my_rank_; }
  int world_rank(int rank) const { return world_ranks_[std::size_t(rank)]; }
  // The group rank of a world rank, or MPI_UNDEFINED.
  int rank_of_world(int world_rank) const;
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  ompi_group_t handle{HandleKind::group, this};

 private:
  std::vector<int> world_ranks_;
  int my_rank_;
};

class Communicator {
 public:
  Communicator(std::shared_ptr<const Group> group, std::uint32_t context, ErrhandlerRef errhandler);
  int rank() const { return rank_; }
  int size() const { return group_->size(); }
  const Group& group() const { return *group_; }
  std::shared_ptr<const Group> shared_group() const { return group_; }
  // The world rank of a peer: a rank of the group, or of the remote group on an intercommunicator.
  int world_rank(int rank) const { return peer_world_ranks_[std::size_t(rank)]; }
  std::uint32_t p2p_context() const { return context_; }
  std::uint32_t collective_context() const { return context_ + 1; }
  const ErrhandlerRef& errhandler() const { return errhandler_; }
  void set_errhandler(ErrhandlerRef errhandler) { errhandler_ = std::move(errhandler); }
  // The window this communicator serves (its error handler is the window's, and is given the window), or null.
  MPI_Win window() const { return window_; }
  void set_window(MPI_Win window) { window_ = window; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // The info hints set on it (MPI_Comm_set_info, MPI_Comm_dup_with_info); duplicates copy them.
  const Hints& hints() const { return hints_; }
  void set_hints(Hints hints) { hints_ = std::move(hints); }

  // The process topology given by MPI_Cart_create and the like (nullptr: none); duplicates share it.
  const std::shared_ptr<const Topology>& topology() const { return topology_; }
  void set_topology(std::shared_ptr<const Topology> topology) { topology_ = std::move(topology); }

  // The state of its collectives through shared memory (node_collectives.hpp), made at first use.
  std::shared_ptr<NodeCollectives>& node_collectives() const { return node_collectives_; }

  // Numbers this communicator's collective calls, which every member makes in the same order
  // (collective_task.hpp). The collective algorithms are for intracommunicators: on an
  // intercommunicator this throws MPI_ERR_UNSUPPORTED_OPERATION; the intercommunicator's own
  // (intercomm_collectives.hpp) number their calls by next_intercomm_collective_sequence.
  std::uint32_t next_collective_sequence() const;
  std::uint32_t next_intercomm_collective_sequence() const;

  // An intercommunicator (MPI_Intercomm_create): the group is the local one, ranks given to
  // point-to-point calls name the remote group's members, and `local` is an intracommunicator
  // over the local group, in a context of its own, for the intercommunicator's own collectives.
  void make_inter(std::shared_ptr<const Group> remote, std::unique_ptr<Communicator> local);
  bool is_inter() const { return remote_ != nullptr; }
  const Group& remote_group() const { return *remote_; }
  std::shared_ptr<const Group> shared_remote_group() const { return remote_; }
  const Communicator& local_comm() const { return *local_; }

  // Throws MPI_ERR_RANK unless 0 <= rank < the number of peers (or an allowed wildcard).
  // Inline: every send and receive asks, and the answer is nearly always yes.
  void check_rank(int rank, bool allow_any_source, bool allow_proc_null) const {
    if (rank >= 0 && std::size_t(rank) < peer_world_ranks_.size()) return;
    if (allow_any_source && rank == MPI_ANY_SOURCE) return;
    if (allow_proc_null && rank == MPI_PROC_NULL) return;
    fail_rank(rank);
  }

  // Points the handle's Open MPI group field at this communicator's group (abi.hpp).
  void publish_group(ompi_communicator_t& public_handle) const;

  ompi_communicator_t* handle = nullptr;  // the predefined object, or owned_handle_

  // Communicators made by MPI_Comm_dup / MPI_Comm_split own their handle.
  ompi_communicator_t owned_handle{HandleKind::communicator, this};

 private:
  [[noreturn]] void fail_rank(int rank) const;
  const Group& peers() const { return remote_ ? *remote_ : *group_; }

  std::shared_ptr<const Group> group_;
  std::shared_ptr<const Group> remote_;  // null: an intracommunicator
  // What every send and receive asks, kept here to save the indirections:
  // group_'s rank of this process, and peers()' world ranks.
  int rank_;
  std::span<const int> peer_world_ranks_;
  std::unique_ptr<Communicator> local_;
  std::uint32_t context_;
  ErrhandlerRef errhandler_;
  MPI_Win window_ = nullptr;
  std::string name_;
  std::shared_ptr<const Topology> topology_;
  Hints hints_;
  mutable std::uint32_t collective_calls_ = 0;
  mutable std::shared_ptr<NodeCollectives> node_collectives_;
};

// The C++ object behind a handle; throws MPI_ERR_COMM for null, freed or foreign handles.
[[noreturn]] void fail_invalid_communicator();
// Inline, as check_rank.
inline Communicator& communicator_of(MPI_Comm handle) {
  if (handle == nullptr || handle->kind != HandleKind::communicator || handle->impl == nullptr)
    fail_invalid_communicator();
  return *handle->impl;
}
Group& group_of(MPI_Group handle);

// Context ids come in pairs; MPI_COMM_WORLD has 0 and 1, MPI_COMM_SELF 2 and 3.
inline constexpr std::uint32_t kWorldContext = 0;
inline constexpr std::uint32_t kSelfContext = 2;
inline constexpr std::uint32_t kFirstFreeContext = 4;

}  // namespace viastack::mpi
