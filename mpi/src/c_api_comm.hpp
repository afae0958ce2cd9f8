// Shared by the C entry points that make communicators and groups
// (c_api_comm.cpp, c_api_groups.cpp, intercomm.cpp).
#pragma once

#include <memory>
#include <vector>

#include "c_api.hpp"

namespace viastack::mpi {

// The handle of a new object, which the program frees.
inline MPI_Comm publish(std::unique_ptr<Communicator> comm) { return comm.release()->handle; }
inline MPI_Group publish(std::unique_ptr<Group> group) { return &group.release()->handle; }

// Which ranks of `group` ranks[0..n) lists: each must be a rank of the group
// and listed once (MPI_ERR_RANK).
std::vector<bool> listed_ranks(const Group& group, int n, const int ranks[]);

// MPI_Group_incl and MPI_Group_excl: a new group of the ranks listed, or of the others.
MPI_Group included_group(const Group& g, int n, const int ranks[]);
MPI_Group excluded_group(const Group& g, int n, const int ranks[]);

// MPI_Comm_dup: the group (and remote group), error handler, topology and
// attributes in a new context, with these hints.
MPI_Comm duplicate(const Communicator& c, Hints hints);

// MPI_Comm_free: deletes its attributes (their callbacks run) and the communicator.
void free_communicator(MPI_Comm* comm);

// MPI_Comm_split: collective over c (both groups of an intercommunicator); MPI_COMM_NULL for color
// MPI_UNDEFINED. A color below 0 otherwise is MPI_ERR_ARG (check_color), before any message.
MPI_Comm split(const Communicator& c, int color, int key);
void check_color(int color);

// Every member's (color, key), gathered over the intracommunicator c: 2 integers a rank, in rank order.
std::vector<int> gather_choices(const Communicator& c, int color, int key);
// The members of g whose color in `choices` (gather_choices, by g's ranks) is `color`, ordered by key, then rank.
std::shared_ptr<const Group> group_of_color(const Group& g, const std::vector<int>& choices, int color);

}  // namespace viastack::mpi
