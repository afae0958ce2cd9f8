// Intercommunicators: MPI_Intercomm_create and _merge, MPI_Comm_remote_size
// and _group (their collectives: intercomm_collectives.cpp), the intercommunicators
// MPI_Comm_dup, _split and _create make from one, and MPI_Comm_get_parent and
// MPI_Comm_disconnect, which without dynamic processes concern ordinary
// communicators only.
#include "intercomm.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "c_api_comm.hpp"
#include "collectives.hpp"
#include "intercomm_collectives.hpp"
#include "internal_p2p.hpp"

namespace viastack::mpi {

namespace {

// The tag of the leaders' messages in an intercommunicator's collective
// context while communicators are made, which no collective's tag is
// (Call::tag is never 0 for a step from 1 on): calls come in the same order on
// every member, and messages between two ranks in one context do not overtake.
constexpr int kLeaderTag = 0;

constexpr int kLeader = 0;

const Datatype& int_type() { return datatype_of(MPI_INT); }

// What the other group's leader gave (`mine` is significant at this group's leader), known to every local member.
std::vector<int> exchange_between_leaders(const Communicator& inter, const std::vector<int>& mine) {
  const Communicator& local = inter.local_comm();
  std::vector<int> theirs;
  if (local.rank() == kLeader) theirs = exchange_ints(mine, kLeader, kLeaderTag, inter, inter.collective_context());
  int n = int(theirs.size());
  bcast(&n, 1, int_type(), kLeader, local);
  theirs.resize(std::size_t(n));
  bcast(theirs.data(), std::size_t(n), int_type(), kLeader, local);
  return theirs;
}

// A context agreed by both groups, with `pairs` context pairs claimed from it.
std::uint32_t agree_across(const Communicator& inter, std::uint32_t pairs) {
  Runtime& rt = runtime();
  std::uint32_t local_max = 0;
  allreduce_max_u32(inter.local_comm(), rt.context_proposal(), local_max);
  const std::vector<int> theirs = exchange_between_leaders(inter, {int(local_max)});
  const std::uint32_t agreed = std::max(local_max, std::uint32_t(theirs.at(0)));
  rt.claim_contexts(agreed, pairs);
  return agreed;
}

// An intercommunicator in context pair `context` (its local intracommunicator in the next pair).
std::unique_ptr<Communicator> make_intercomm(std::shared_ptr<const Group> local, std::shared_ptr<const Group> remote,
                                             std::uint32_t context, const ErrhandlerRef& errhandler) {
  auto inter = std::make_unique<Communicator>(local, context, errhandler);
  inter->make_inter(std::move(remote), std::make_unique<Communicator>(local, context + 2, ErrhandlerKind::fatal));
  return inter;
}

Communicator& intercomm_of(MPI_Comm handle) {
  Communicator& c = communicator_of(handle);
  require(c.is_inter(), MPI_ERR_COMM, "not an intercommunicator");
  return c;
}

}  // namespace

std::unique_ptr<Communicator> duplicate_intercomm(const Communicator& inter) {
  const std::uint32_t context = agree_across(inter, 2);
  return make_intercomm(inter.shared_group(), inter.shared_remote_group(), context, inter.errhandler());
}

MPI_Comm split_intercomm(const Communicator& inter, int color, int key) {
  const std::uint32_t context = agree_across(inter, 2);
  // Each group gathers its members' (color, key); the leaders swap them.
  const std::vector<int> local_choices = gather_choices(inter.local_comm(), color, key);
  const std::vector<int> remote_choices = exchange_between_leaders(inter, local_choices);
  if (color == MPI_UNDEFINED) return MPI_COMM_NULL;
  auto remote = group_of_color(inter.remote_group(), remote_choices, color);
  if (remote->size() == 0) return MPI_COMM_NULL;
  return publish(make_intercomm(group_of_color(inter.group(), local_choices, color), std::move(remote), context,
                                inter.errhandler()));
}

MPI_Comm create_intercomm(const Communicator& inter, const Group& subgroup) {
  Runtime& rt = runtime();
  for (int w : subgroup.world_ranks())
    require(inter.group().rank_of_world(w) != MPI_UNDEFINED, MPI_ERR_GROUP,
            "the group is not a subgroup of the intercommunicator's local group");
  const std::uint32_t context = agree_across(inter, 2);
  std::vector<int> remote = exchange_between_leaders(inter, subgroup.world_ranks());
  if (subgroup.rank() == MPI_UNDEFINED || remote.empty()) return MPI_COMM_NULL;
  return publish(make_intercomm(std::make_shared<Group>(subgroup.world_ranks(), rt.world_rank()),
                                std::make_shared<Group>(std::move(remote), rt.world_rank()), context,
                                inter.errhandler()));
}

}  // namespace viastack::mpi

using namespace viastack::mpi;

// The leaders learn each other's group through peer_comm (messages with the
// program's tag there, as MPI-3.1 6.6.2 says) and tell their own group; both
// groups agree on the new contexts the same way.
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm* newintercomm) {
  return guarded("MPI_Intercomm_create", local_comm, [&] {
    Runtime& rt = runtime();
    const Communicator& local = communicator_of(local_comm);
    check_pointer(newintercomm, "null output pointer");
    require(!local.is_inter(), MPI_ERR_COMM, "the local communicator must be an intracommunicator");
    require(local_leader >= 0 && local_leader < local.size(), MPI_ERR_RANK, "the local leader is not a local rank");
    require(tag >= 0, MPI_ERR_TAG, "the tag must be 0 or more");
    std::uint32_t local_max = 0;
    allreduce_max_u32(local, rt.context_proposal(), local_max);
    // From the leader: [the agreed context, the remote group's world ranks...].
    std::vector<int> remote;
    if (local.rank() == local_leader) {
      const Communicator& peer = communicator_of(peer_comm);
      peer.check_rank(remote_leader, false, false);
      std::vector<int> mine{int(local_max)};
      mine.insert(mine.end(), local.group().world_ranks().begin(), local.group().world_ranks().end());
      remote = exchange_ints(mine, remote_leader, tag, peer, peer.p2p_context());
      require(remote.size() >= 2, MPI_ERR_INTERN, "the remote leader's answer is garbled");
      remote[0] = int(std::max(local_max, std::uint32_t(remote[0])));
    }
    int n = int(remote.size());
    bcast(&n, 1, int_type(), local_leader, local);
    remote.resize(std::size_t(n));
    bcast(remote.data(), std::size_t(n), int_type(), local_leader, local);
    const std::uint32_t context = std::uint32_t(remote[0]);
    rt.claim_contexts(context, 2);
    std::vector<int> remote_ranks(remote.begin() + 1, remote.end());
    for (int w : remote_ranks)
      require(local.group().rank_of_world(w) == MPI_UNDEFINED, MPI_ERR_COMM,
              "the local and remote groups of an intercommunicator must be disjoint");
    auto remote_group = std::make_shared<Group>(std::move(remote_ranks), rt.world_rank());
    *newintercomm = publish(make_intercomm(local.shared_group(), std::move(remote_group), context, local.errhandler()));
  });
}

// The group whose members gave high = false comes first; when both gave the
// same, the group whose leader has the lower rank in MPI_COMM_WORLD.
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm) {
  return guarded("MPI_Intercomm_merge", intercomm, [&] {
    Runtime& rt = runtime();
    const Communicator& inter = intercomm_of(intercomm);
    check_pointer(newintracomm, "null output pointer");
    const std::uint32_t context = agree_across(inter, 1);
    const int my_high = high ? 1 : 0;
    const int their_high = exchange_between_leaders(inter, {my_high}).at(0);
    const bool local_first =
        my_high != their_high ? my_high < their_high
                              : inter.group().world_rank(0) < inter.remote_group().world_rank(0);
    const Group& first = local_first ? inter.group() : inter.remote_group();
    const Group& second = local_first ? inter.remote_group() : inter.group();
    std::vector<int> world_ranks = first.world_ranks();
    world_ranks.insert(world_ranks.end(), second.world_ranks().begin(), second.world_ranks().end());
    auto merged = std::make_shared<Group>(std::move(world_ranks), rt.world_rank());
    *newintracomm = publish(std::make_unique<Communicator>(std::move(merged), context, inter.errhandler()));
  });
}

int MPI_Comm_remote_size(MPI_Comm comm, int* size) {
  return guarded("MPI_Comm_remote_size", comm, [&] {
    runtime();
    const Communicator& inter = intercomm_of(comm);
    check_pointer(size, "null output pointer");
    *size = inter.remote_group().size();
  });
}

int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group) {
  return guarded("MPI_Comm_remote_group", comm, [&] {
    Runtime& rt = runtime();
    const Communicator& inter = intercomm_of(comm);
    check_pointer(group, "null output pointer");
    *group = publish(std::make_unique<Group>(inter.remote_group().world_ranks(), rt.world_rank()));
  });
}

// No process of this job was spawned by another (MPI_Comm_spawn is not supported).
int MPI_Comm_get_parent(MPI_Comm* parent) {
  return guarded("MPI_Comm_get_parent", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(parent, "null output pointer");
    *parent = MPI_COMM_NULL;
  });
}

// Without dynamic processes every communicator is an ordinary one: disconnecting
// is a collective free, which waits until every member has come (MPI-3.1 10.5.4).
int MPI_Comm_disconnect(MPI_Comm* comm) {
  return guarded("MPI_Comm_disconnect", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(comm, "null handle pointer");
    const Communicator& c = communicator_of(*comm);
    require(*comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF, MPI_ERR_COMM,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be disconnected");
    if (c.is_inter())
      intercomm_barrier(c, nullptr);
    else
      barrier(c);
    free_communicator(comm);
  });
}
