// C entry points: communicators and groups.
#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "attributes.hpp"
#include "c_api_comm.hpp"
#include "collectives.hpp"
#include "intercomm.hpp"

using namespace viastack::mpi;

// Which ranks of `group` ranks[0..n) lists: each must be a rank of the group
// and listed once (MPI_ERR_RANK, the standard's class; Open MPI 4 checks the
// range only).
std::vector<bool> viastack::mpi::listed_ranks(const Group& group, int n, const int ranks[]) {
  require(n >= 0, MPI_ERR_ARG, "negative number of ranks");
  require(ranks != nullptr || n == 0, MPI_ERR_ARG, "null rank array");
  std::vector<bool> listed(std::size_t(group.size()), false);
  for (int i = 0; i < n; ++i) {
    require(ranks[i] >= 0 && ranks[i] < group.size(), MPI_ERR_RANK, "rank not in the group");
    require(!listed[std::size_t(ranks[i])], MPI_ERR_RANK, "a rank is listed twice");
    listed[std::size_t(ranks[i])] = true;
  }
  return listed;
}

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  return guarded("MPI_Comm_rank", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(rank, "null output pointer");
    *rank = c.rank();
  });
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  return guarded("MPI_Comm_size", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(size, "null output pointer");
    *size = c.size();
  });
}

MPI_Comm viastack::mpi::duplicate(const Communicator& c, Hints hints) {
  Runtime& rt = runtime();
  auto dup = c.is_inter() ? duplicate_intercomm(c)
                          : std::make_unique<Communicator>(c.shared_group(), rt.agree_on_context(c), c.errhandler());
  dup->set_topology(c.topology());
  attribute_cache().copy_all(AttributeHolder::communicator, c.handle, dup->handle);
  dup->set_hints(std::move(hints));
  return publish(std::move(dup));
}

// MPI_Comm_dup and MPI_Comm_dup_with_info: with the hints given (info NULL: the old communicator's).
static int duplicate(const char* function, MPI_Comm comm, const MPI_Info* info, MPI_Comm* newcomm) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(newcomm, "null output pointer");
    *newcomm = duplicate(c, info ? hints_of(*info) : c.hints());
  });
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) { return duplicate("MPI_Comm_dup", comm, nullptr, newcomm); }

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  return duplicate("MPI_Comm_dup_with_info", comm, &info, newcomm);
}

std::vector<int> viastack::mpi::gather_choices(const Communicator& c, int color, int key) {
  const int mine[2] = {color, key};
  std::vector<int> all(static_cast<std::size_t>(c.size()) * 2);
  std::vector<int> counts(static_cast<std::size_t>(c.size()), 2);
  std::vector<int> displs(static_cast<std::size_t>(c.size()));
  for (int r = 0; r < c.size(); ++r) displs[std::size_t(r)] = 2 * r;
  const Datatype& ints = datatype_of(MPI_INT);
  allgatherv(mine, 2, ints, Blocks{all.data(), counts, displs, &ints}, c);
  return all;
}

std::shared_ptr<const Group> viastack::mpi::group_of_color(const Group& g, const std::vector<int>& choices, int color) {
  std::vector<std::tuple<int, int>> members;  // (key, rank in g)
  for (int r = 0; r < g.size(); ++r)
    if (choices.at(std::size_t(2 * r)) == color) members.emplace_back(choices[std::size_t(2 * r + 1)], r);
  std::sort(members.begin(), members.end());
  std::vector<int> world_ranks;
  for (auto [k, r] : members) world_ranks.push_back(g.world_rank(r));
  return std::make_shared<Group>(std::move(world_ranks), runtime().world_rank());
}

void viastack::mpi::check_color(int color) {
  require(color >= 0 || color == MPI_UNDEFINED, MPI_ERR_ARG, "color must be 0 or more, or MPI_UNDEFINED");
}

MPI_Comm viastack::mpi::split(const Communicator& c, int color, int key) {
  check_color(color);
  if (c.is_inter()) return split_intercomm(c, color, key);
  const std::uint32_t context = runtime().agree_on_context(c);
  // Everyone learns everyone's (color, key); members of a color are ordered by key, then by rank.
  const std::vector<int> choices = gather_choices(c, color, key);
  if (color == MPI_UNDEFINED) return MPI_COMM_NULL;
  return publish(std::make_unique<Communicator>(group_of_color(c.group(), choices, color), context, c.errhandler()));
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return guarded("MPI_Comm_split", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(newcomm, "null output pointer");
    *newcomm = split(c, color, key);
  });
}

void viastack::mpi::free_communicator(MPI_Comm* comm) {
  Communicator& c = communicator_of(*comm);
  require(*comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF, MPI_ERR_COMM,
          "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed");
  attribute_cache().remove_all(AttributeHolder::communicator, *comm);
  c.owned_handle.kind = HandleKind{};  // a stale handle is then recognised as invalid
  delete &c;
  *comm = MPI_COMM_NULL;
}

int MPI_Comm_free(MPI_Comm* comm) {
  return guarded("MPI_Comm_free", MPI_COMM_WORLD, [&] {
    runtime();
    check_pointer(comm, "null handle pointer");
    free_communicator(comm);
  });
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  return guarded("MPI_Comm_compare", comm1, [&] {
    runtime();
    const Communicator& a = communicator_of(comm1);
    const Communicator& b = communicator_of(comm2);
    check_pointer(result, "null output pointer");
    // Intercommunicators compare their local and their remote groups alike (MPI-3.1 6.4.1).
    const auto same = [](const Group& x, const Group& y) { return x.world_ranks() == y.world_ranks(); };
    const auto permuted = [](const Group& x, const Group& y) {
      return std::is_permutation(x.world_ranks().begin(), x.world_ranks().end(), y.world_ranks().begin(),
                                 y.world_ranks().end());
    };
    const bool both_inter = a.is_inter() && b.is_inter();
    if (&a == &b)
      *result = MPI_IDENT;
    else if (a.is_inter() != b.is_inter())
      *result = MPI_UNEQUAL;
    else if (same(a.group(), b.group()) && (!both_inter || same(a.remote_group(), b.remote_group())))
      *result = MPI_CONGRUENT;
    else if (permuted(a.group(), b.group()) && (!both_inter || permuted(a.remote_group(), b.remote_group())))
      *result = MPI_SIMILAR;
    else
      *result = MPI_UNEQUAL;
  });
}

int MPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  return guarded("MPI_Comm_test_inter", comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(flag, "null output pointer");
    *flag = c.is_inter();
  });
}

int MPI_Comm_set_name(MPI_Comm comm, const char* name) {
  return guarded("MPI_Comm_set_name", comm, [&] {
    runtime();
    check_pointer(name, "null name");
    communicator_of(comm).set_name(std::string(name).substr(0, MPI_MAX_OBJECT_NAME - 1));
  });
}

int MPI_Comm_get_name(MPI_Comm comm, char* name, int* resultlen) {
  return guarded("MPI_Comm_get_name", comm, [&] {
    runtime();
    check_pointer(name, "null name buffer");
    check_pointer(resultlen, "null length pointer");
    const std::string& n = communicator_of(comm).name();
    std::memcpy(name, n.c_str(), n.size() + 1);
    *resultlen = int(n.size());
  });
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  return guarded("MPI_Comm_group", comm, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm);
    check_pointer(group, "null output pointer");
    *group = publish(std::make_unique<Group>(c.group().world_ranks(), rt.world_rank()));
  });
}

int MPI_Group_size(MPI_Group group, int* size) {
  return guarded("MPI_Group_size", MPI_COMM_WORLD, [&] {
    check_pointer(size, "null output pointer");
    *size = group_of(group).size();
  });
}

int MPI_Group_rank(MPI_Group group, int* rank) {
  return guarded("MPI_Group_rank", MPI_COMM_WORLD, [&] {
    check_pointer(rank, "null output pointer");
    *rank = group_of(group).rank();
  });
}

MPI_Group viastack::mpi::included_group(const Group& g, int n, const int ranks[]) {
  listed_ranks(g, n, ranks);
  std::vector<int> world_ranks;
  for (int i = 0; i < n; ++i) world_ranks.push_back(g.world_rank(ranks[i]));
  return publish(std::make_unique<Group>(std::move(world_ranks), runtime().world_rank()));
}

MPI_Group viastack::mpi::excluded_group(const Group& g, int n, const int ranks[]) {
  const std::vector<bool> excluded = listed_ranks(g, n, ranks);
  std::vector<int> world_ranks;
  for (int r = 0; r < g.size(); ++r)
    if (!excluded[std::size_t(r)]) world_ranks.push_back(g.world_rank(r));
  return publish(std::make_unique<Group>(std::move(world_ranks), runtime().world_rank()));
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return guarded("MPI_Group_incl", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& g = group_of(group);
    check_pointer(newgroup, "null output pointer");
    *newgroup = included_group(g, n, ranks);
  });
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  return guarded("MPI_Group_excl", MPI_COMM_WORLD, [&] {
    runtime();
    const Group& g = group_of(group);
    check_pointer(newgroup, "null output pointer");
    *newgroup = excluded_group(g, n, ranks);
  });
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]) {
  return guarded("MPI_Group_translate_ranks", MPI_COMM_WORLD, [&] {
    const Group& a = group_of(group1);
    const Group& b = group_of(group2);
    require(n >= 0, MPI_ERR_ARG, "negative count");
    for (int i = 0; i < n; ++i) {
      if (ranks1[i] == MPI_PROC_NULL) {
        ranks2[i] = MPI_PROC_NULL;
        continue;
      }
      require(ranks1[i] >= 0 && ranks1[i] < a.size(), MPI_ERR_RANK, "rank not in the first group");
      ranks2[i] = b.rank_of_world(a.world_rank(ranks1[i]));
    }
  });
}

int MPI_Group_free(MPI_Group* group) {
  return guarded("MPI_Group_free", MPI_COMM_WORLD, [&] {
    check_pointer(group, "null handle pointer");
    Group& g = group_of(*group);
    if (*group != MPI_GROUP_EMPTY) {
      g.handle.kind = HandleKind{};
      delete &g;
    }
    *group = MPI_GROUP_NULL;
  });
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  return guarded("MPI_Comm_create", comm, [&] {
    Runtime& rt = runtime();
    const Communicator& c = communicator_of(comm);
    const Group& g = group_of(group);
    check_pointer(newcomm, "null output pointer");
    if (c.is_inter()) {
      *newcomm = create_intercomm(c, g);
      return;
    }
    const std::uint32_t context = rt.agree_on_context(c);
    if (g.rank() == MPI_UNDEFINED) {
      *newcomm = MPI_COMM_NULL;
      return;
    }
    auto members = std::make_shared<Group>(g.world_ranks(), rt.world_rank());
    *newcomm = publish(std::make_unique<Communicator>(std::move(members), context, c.errhandler()));
  });
}
