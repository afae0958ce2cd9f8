// C entry points: group algebra (compare, union, intersection, difference,
// ranges) and the communicators made from groups and from the job's layout
// (MPI_Comm_split_type, MPI_Comm_create_group, MPI_Comm_idup).
#include <via/bootstrap.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "c_api_comm.hpp"
#include "internal_p2p.hpp"

using namespace viastack::mpi;

namespace {

bool contains(const Group& g, int world_rank) { return g.rank_of_world(world_rank) != MPI_UNDEFINED; }

// A group of these world ranks (in this order); MPI_GROUP_EMPTY when there are none, as in Open MPI.
MPI_Group group_of_world_ranks(std::vector<int> world_ranks) {
  if (world_ranks.empty()) return MPI_GROUP_EMPTY;
  return publish(std::make_unique<Group>(std::move(world_ranks), runtime().world_rank()));
}

// The members of `a` that are (or are not) in `b`, in a's order.
std::vector<int> members_of(const Group& a, const Group& b, bool in_b) {
  std::vector<int> world_ranks;
  for (int w : a.world_ranks())
    if (contains(b, w) == in_b) world_ranks.push_back(w);
  return world_ranks;
}

// The ranks ranges[0..n) name, each (first, last, stride) expanded: first,
// first + stride, ... up to last. Open MPI's classes: a first or last outside
// the group, a zero stride, or a stride that walks away from last, MPI_ERR_RANK.
std::vector<int> expanded_ranges(const Group& g, int n, const int ranges[][3]) {
  require(n >= 0, MPI_ERR_ARG, "negative number of ranges");
  require(ranges != nullptr || n == 0, MPI_ERR_ARG, "null range array");
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i) {
    const int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    require(first >= 0 && first < g.size() && last >= 0 && last < g.size(), MPI_ERR_RANK,
            "a range's first or last rank is not in the group");
    require(stride != 0, MPI_ERR_RANK, "a range's stride is 0");
    require((last - first) / stride >= 0, MPI_ERR_RANK, "a range's stride leads away from its last rank");
    for (std::int64_t r = first; stride > 0 ? r <= last : r >= last; r += stride) {
      require(ranks.size() < std::size_t(g.size()), MPI_ERR_RANK, "the ranges list a rank twice");
      ranks.push_back(int(r));
    }
  }
  return ranks;
}

// Which node each member of comm runs on, from the job's layout.
int node_of_world_rank(int world_rank) {
  std::string error;
  const auto job = via::job_bootstrap(error);
  if (!job) fail(MPI_ERR_INTERN, "the job's layout is unknown: " + error);
  return job->node_of(world_rank);
}

// MPI_Comm_create_group's messages: in the parent's collective context, whose
// collectives use tags of 0 and more, at a negative tag made from the program's.
int create_group_tag(int tag) { return INT_MIN + tag % INT_MAX; }

}  // namespace

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  return guarded("MPI_Group_compare", MPI_COMM_WORLD, [&] {
    const Group& a = group_of(group1);
    const Group& b = group_of(group2);
    check_pointer(result, "null output pointer");
    if (a.world_ranks() == b.world_ranks())
      *result = MPI_IDENT;
    else if (std::is_permutation(a.world_ranks().begin(), a.world_ranks().end(), b.world_ranks().begin(),
                                 b.world_ranks().end()))
      *result = MPI_SIMILAR;
    else
      *result = MPI_UNEQUAL;
  });
}

// The members of group1, then those of group2 not in group1 (MPI-3.1 6.3.2).
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return guarded("MPI_Group_union", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& a = group_of(group1);
    const Group& b = group_of(group2);
    check_pointer(newgroup, "null output pointer");
    std::vector<int> world_ranks = a.world_ranks();
    for (int w : members_of(b, a, false)) world_ranks.push_back(w);
    *newgroup = group_of_world_ranks(std::move(world_ranks));
  });
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return guarded("MPI_Group_intersection", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& a = group_of(group1);
    const Group& b = group_of(group2);
    check_pointer(newgroup, "null output pointer");
    *newgroup = group_of_world_ranks(members_of(a, b, true));
  });
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return guarded("MPI_Group_difference", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& a = group_of(group1);
    const Group& b = group_of(group2);
    check_pointer(newgroup, "null output pointer");
    *newgroup = group_of_world_ranks(members_of(a, b, false));
  });
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return guarded("MPI_Group_range_incl", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& g = group_of(group);
    check_pointer(newgroup, "null output pointer");
    const std::vector<int> ranks = expanded_ranges(g, n, ranges);
    *newgroup = included_group(g, int(ranks.size()), ranks.data());
  });
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  return guarded("MPI_Group_range_excl", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& g = group_of(group);
    check_pointer(newgroup, "null output pointer");
    const std::vector<int> ranks = expanded_ranges(g, n, ranges);
    *newgroup = excluded_group(g, int(ranks.size()), ranks.data());
  });
}

// MPI_COMM_TYPE_SHARED (and Open MPI's OMPI_COMM_TYPE_HOST, the same here):
// the members on this rank's node, which can share memory, ordered by key.
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  return guarded("MPI_Comm_split_type", comm, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(newcomm, "null output pointer");
    require(split_type == MPI_UNDEFINED || split_type == MPI_COMM_TYPE_SHARED || split_type == OMPI_COMM_TYPE_HOST,
            MPI_ERR_ARG, "split_type must be MPI_COMM_TYPE_SHARED (or OMPI_COMM_TYPE_HOST) or MPI_UNDEFINED");
    Hints hints = hints_of(info);
    const int color = split_type == MPI_UNDEFINED ? MPI_UNDEFINED : node_of_world_rank(rt.world_rank());
    *newcomm = split(c, color, key);
    if (*newcomm != MPI_COMM_NULL) communicator_of(*newcomm).set_hints(std::move(hints));
  });
}

// Collective over the members of the group only (MPI-3.1 6.4.2): they agree
// on a context through the group's first member, by messages tagged with the
// program's tag, so that calls on overlapping groups at once keep apart.
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return guarded("MPI_Comm_create_group", comm, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm);
    const Group& g = group_of(group);
    check_pointer(newcomm, "null output pointer");
    require(!c.is_inter(), MPI_ERR_COMM, "MPI_Comm_create_group takes an intracommunicator");
    require(tag >= 0, MPI_ERR_TAG, "the tag must be 0 or more");
    for (int w : g.world_ranks())
      require(contains(c.group(), w), MPI_ERR_GROUP, "the group is not a subgroup of the communicator's");
    if (g.rank() == MPI_UNDEFINED) {
      *newcomm = MPI_COMM_NULL;
      return;
    }
    auto members = std::make_shared<Group>(g.world_ranks(), rt.world_rank());
    // The group as a communicator, to name its members; its messages go in the parent's collective context.
    const Communicator scratch(members, c.p2p_context(), ErrhandlerKind::fatal);
    const std::uint32_t context = c.collective_context();
    const int internal_tag = create_group_tag(tag);
    std::uint32_t agreed = rt.context_proposal();
    if (g.rank() == 0) {
      for (int r = 1; r < g.size(); ++r) agreed = std::max(agreed, recv_u32(r, internal_tag, scratch, context));
      for (int r = 1; r < g.size(); ++r) send_u32(agreed, r, internal_tag, scratch, context);
    } else {
      send_u32(agreed, 0, internal_tag, scratch, context);
      agreed = recv_u32(0, internal_tag, scratch, context);
    }
    rt.claim_contexts(agreed, 1);
    *newcomm = publish(std::make_unique<Communicator>(std::move(members), agreed, c.errhandler()));
  });
}

// The duplicate is made before the call returns (every member must call it, in
// the same order as its other collectives): the request is complete at once.
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  return guarded("MPI_Comm_idup", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(request, "null request pointer");
    check_pointer(newcomm, "null output pointer");
    *newcomm = duplicate(c, c.hints());
    auto* done = new Request(Request::Type::recv, &c);
    done->complete = true;
    *request = done;
  });
}
