/* Process topologies by the standard's rules (MPI-3.1 chapter 7), checked
 * against a serial reference: MPI_Dims_create, Cartesian grids in 1, 2 and 3
 * dimensions (coordinates, ranks, shifts at the edges, periodic and not,
 * Cart_sub rows and columns, a halo exchange over Cart_shift neighbours),
 * graphs, distributed graphs, the neighbourhood collectives over each, and
 * bad arguments returning their error class under MPI_ERRORS_RETURN.
 * "fatal": a Cartesian call on a communicator without a grid ends the job. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Open MPI's MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY are small integers cast to
 * pointers, which GCC takes for arrays of no size. */
#pragma GCC diagnostic ignored "-Wstringop-overread"
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static int rank, size;

static int error_class(int rc) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* ---- the serial reference: row-major ranks, as MPI-3.1 7.5.1 defines them ---- */

static void reference_coords(int ndims, const int dims[], int r, int coords[]) {
  for (int d = ndims - 1; d >= 0; --d) {
    coords[d] = r % dims[d];
    r /= dims[d];
  }
}

/* The rank at coords, or MPI_PROC_NULL when a non-periodic coordinate is off the grid. */
static int reference_rank(int ndims, const int dims[], const int periods[], const int coords[]) {
  int r = 0;
  for (int d = 0; d < ndims; ++d) {
    int c = coords[d];
    if (c < 0 || c >= dims[d]) {
      if (!periods[d]) return MPI_PROC_NULL;
      c = ((c % dims[d]) + dims[d]) % dims[d];
    }
    r = r * dims[d] + c;
  }
  return r;
}

static int reference_neighbour(int ndims, const int dims[], const int periods[], int of, int direction, int disp) {
  int coords[8];
  reference_coords(ndims, dims, of, coords);
  coords[direction] += disp;
  return reference_rank(ndims, dims, periods, coords);
}

/* ---- MPI_Dims_create ---- */

static void dims_create(void) {
  struct {
    int nnodes, ndims, in[3], want[3];
  } cases[] = {
      {6, 2, {0, 0}, {3, 2}},          {7, 2, {0, 0}, {7, 1}},          {4, 2, {0, 0}, {2, 2}},
      {12, 3, {0, 0, 0}, {3, 2, 2}},   {24, 3, {0, 0, 0}, {4, 3, 2}},   {36, 2, {0, 0}, {6, 6}},
      {30, 2, {0, 0}, {6, 5}},         {16, 3, {0, 4, 0}, {2, 4, 2}},   {6, 3, {3, 0, 0}, {3, 2, 1}},
      {1, 3, {0, 0, 0}, {1, 1, 1}},    {6, 2, {0, 3}, {2, 3}},          {6, 2, {2, 3}, {2, 3}},
      {64, 3, {0, 0, 0}, {4, 4, 4}},   {1000003, 2, {0, 0}, {1000003, 1}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    int dims[3];
    memcpy(dims, cases[k].in, sizeof dims);
    CHECK(MPI_Dims_create(cases[k].nnodes, cases[k].ndims, dims) == MPI_SUCCESS);
    for (int d = 0; d < cases[k].ndims; ++d) CHECK(dims[d] == cases[k].want[d]);
  }
  /* Impossible requests: a fixed entry that does not divide, fixed entries whose product is not nnodes,
   * a negative entry, no nodes, negative dimensions, no array. */
  int bad[][2] = {{4, 0}, {2, 2}, {-1, 0}};
  for (int k = 0; k < 3; ++k) CHECK(error_class(MPI_Dims_create(6, 2, bad[k])) == MPI_ERR_DIMS);
  int dims[2] = {0, 0};
  CHECK(error_class(MPI_Dims_create(0, 2, dims)) == MPI_ERR_DIMS);
  CHECK(error_class(MPI_Dims_create(6, -1, dims)) == MPI_ERR_DIMS);
  CHECK(error_class(MPI_Dims_create(6, 2, NULL)) == MPI_ERR_ARG);
}

/* ---- Cartesian grids ---- */

/* Every query on a grid of the whole of MPI_COMM_WORLD against the reference. */
static void check_grid(MPI_Comm cart, int ndims, const int dims[], const int periods[]) {
  int status = -1, got_ndims = -1;
  MPI_Topo_test(cart, &status);
  CHECK(status == MPI_CART);
  MPI_Cartdim_get(cart, &got_ndims);
  CHECK(got_ndims == ndims);
  int me = -1;
  MPI_Comm_rank(cart, &me);
  CHECK(me == rank); /* reorder is not done: ranks stay */
  int got_dims[8], got_periods[8], got_coords[8], want_coords[8];
  CHECK(MPI_Cart_get(cart, ndims, got_dims, got_periods, got_coords) == MPI_SUCCESS);
  reference_coords(ndims, dims, me, want_coords);
  for (int d = 0; d < ndims; ++d) {
    CHECK(got_dims[d] == dims[d]);
    CHECK(!got_periods[d] == !periods[d]);
    CHECK(got_coords[d] == want_coords[d]);
  }
  for (int r = 0; r < size; ++r) {
    int coords[8], back = -1;
    CHECK(MPI_Cart_coords(cart, r, ndims, coords) == MPI_SUCCESS);
    reference_coords(ndims, dims, r, want_coords);
    for (int d = 0; d < ndims; ++d) CHECK(coords[d] == want_coords[d]);
    CHECK(MPI_Cart_rank(cart, coords, &back) == MPI_SUCCESS);
    CHECK(back == r);
    /* A periodic coordinate off the grid wraps round. */
    for (int d = 0; d < ndims; ++d)
      if (periods[d]) {
        int wrapped[8];
        memcpy(wrapped, coords, sizeof wrapped);
        wrapped[d] += 3 * dims[d];
        CHECK(MPI_Cart_rank(cart, wrapped, &back) == MPI_SUCCESS && back == r);
        wrapped[d] = coords[d] - 2 * dims[d];
        CHECK(MPI_Cart_rank(cart, wrapped, &back) == MPI_SUCCESS && back == r);
      }
  }
  /* Shifts by 1, -1, 2 and the whole extent in every direction: MPI_PROC_NULL off a non-periodic edge. */
  const int disps[] = {1, -1, 2, -3};
  for (int d = 0; d < ndims; ++d)
    for (int k = 0; k < 4; ++k) {
      int source = -5, dest = -5;
      CHECK(MPI_Cart_shift(cart, d, disps[k], &source, &dest) == MPI_SUCCESS);
      CHECK(source == reference_neighbour(ndims, dims, periods, me, d, -disps[k]));
      CHECK(dest == reference_neighbour(ndims, dims, periods, me, d, disps[k]));
    }
  /* The topology survives MPI_Comm_dup. */
  MPI_Comm dup;
  MPI_Comm_dup(cart, &dup);
  MPI_Topo_test(dup, &status);
  CHECK(status == MPI_CART);
  CHECK(MPI_Cart_get(dup, ndims, got_dims, got_periods, got_coords) == MPI_SUCCESS);
  for (int d = 0; d < ndims; ++d) CHECK(got_dims[d] == dims[d] && !got_periods[d] == !periods[d]);
  MPI_Comm_free(&dup);
}

static void grids(void) {
  for (int ndims = 1; ndims <= 3; ++ndims)
    for (int pattern = 0; pattern < 3; ++pattern) {
      int dims[3] = {0, 0, 0}, periods[3];
      MPI_Dims_create(size, ndims, dims);
      for (int d = 0; d < ndims; ++d) periods[d] = pattern == 2 ? (d % 2 == 0) : pattern; /* none, all, mixed */
      MPI_Comm cart = MPI_COMM_NULL;
      CHECK(MPI_Cart_create(MPI_COMM_WORLD, ndims, dims, periods, 0, &cart) == MPI_SUCCESS);
      CHECK(cart != MPI_COMM_NULL);
      if (cart == MPI_COMM_NULL) continue;
      check_grid(cart, ndims, dims, periods);
      MPI_Comm_free(&cart);
    }
  /* Reorder may be ignored; a grid smaller than the group leaves the rest out. */
  const int line[1] = {size > 1 ? size - 1 : 1}, open[1] = {0};
  MPI_Comm cart;
  CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, line, open, 1, &cart) == MPI_SUCCESS);
  if (rank < line[0]) {
    int n = -1;
    CHECK(cart != MPI_COMM_NULL);
    MPI_Comm_size(cart, &n);
    CHECK(n == line[0]);
    int mapped = -1;
    CHECK(MPI_Cart_map(MPI_COMM_WORLD, 1, line, open, &mapped) == MPI_SUCCESS);
    CHECK(mapped == rank);
    MPI_Comm_free(&cart);
  } else {
    CHECK(cart == MPI_COMM_NULL);
    int mapped = 0;
    CHECK(MPI_Cart_map(MPI_COMM_WORLD, 1, line, open, &mapped) == MPI_SUCCESS);
    CHECK(mapped == MPI_UNDEFINED);
  }
  /* A communicator without a topology. */
  int status = 0;
  MPI_Topo_test(MPI_COMM_WORLD, &status);
  CHECK(status == MPI_UNDEFINED);
}

/* Rows and columns of a 2-d grid, and a sub-grid keeping nothing. */
static void sub_grids(void) {
  int dims[2] = {0, 0};
  const int periods[2] = {1, 0};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  int my_coords[2];
  reference_coords(2, dims, rank, my_coords);
  for (int kept = 0; kept < 2; ++kept) {
    const int remain[2] = {kept == 0, kept == 1};
    MPI_Comm sub = MPI_COMM_NULL;
    CHECK(MPI_Cart_sub(cart, remain, &sub) == MPI_SUCCESS);
    int n = -1, me = -1, ndims = -1, sub_dims[1] = {-1}, sub_periods[1] = {-1}, sub_coords[1] = {-1};
    MPI_Comm_size(sub, &n);
    MPI_Comm_rank(sub, &me);
    CHECK(n == dims[kept]);
    CHECK(me == my_coords[kept]);
    MPI_Cartdim_get(sub, &ndims);
    CHECK(ndims == 1);
    MPI_Cart_get(sub, 1, sub_dims, sub_periods, sub_coords);
    CHECK(sub_dims[0] == dims[kept] && !sub_periods[0] == !periods[kept] && sub_coords[0] == my_coords[kept]);
    /* The members are the ranks sharing the dropped coordinate, in order of the kept one. */
    int* members = malloc(sizeof(int) * (size_t)n);
    MPI_Allgather(&rank, 1, MPI_INT, members, 1, MPI_INT, sub);
    for (int i = 0; i < n; ++i) {
      int coords[2] = {my_coords[0], my_coords[1]};
      coords[kept] = i;
      CHECK(members[i] == reference_rank(2, dims, periods, coords));
    }
    free(members);
    /* Shifts in the sub-grid follow its own periodicity. */
    int source, dest;
    MPI_Cart_shift(sub, 0, 1, &source, &dest);
    CHECK(source == reference_neighbour(1, &dims[kept], &periods[kept], me, 0, -1));
    CHECK(dest == reference_neighbour(1, &dims[kept], &periods[kept], me, 0, 1));
    MPI_Comm_free(&sub);
  }
  const int nothing[2] = {0, 0};
  MPI_Comm alone;
  CHECK(MPI_Cart_sub(cart, nothing, &alone) == MPI_SUCCESS);
  int n = -1, ndims = -1;
  MPI_Comm_size(alone, &n);
  MPI_Cartdim_get(alone, &ndims);
  CHECK(n == 1 && ndims == 0);
  MPI_Comm_free(&alone);
  MPI_Comm_free(&cart);
}

/* Each rank owns a (rows x cols) block with a halo of one cell; Sendrecv over
 * Cart_shift neighbours fills the halo with the neighbours' edge cells, and
 * leaves it alone off a non-periodic edge. */
enum { rows = 3, cols = 4 };
static int cell_value(int owner, int i, int j) { return owner * 1000 + i * 10 + j; }

static void halo_exchange(void) {
  int dims[2] = {0, 0};
  const int periods[2] = {1, 0};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  int grid[rows + 2][cols + 2];
  for (int i = 0; i < rows + 2; ++i)
    for (int j = 0; j < cols + 2; ++j)
      grid[i][j] = (i == 0 || j == 0 || i == rows + 1 || j == cols + 1) ? -1 : cell_value(rank, i, j);
  MPI_Datatype column;
  MPI_Type_vector(rows, 1, cols + 2, MPI_INT, &column);
  MPI_Type_commit(&column);
  int up, down, left, right;
  MPI_Cart_shift(cart, 0, 1, &up, &down);
  MPI_Cart_shift(cart, 1, 1, &left, &right);
  /* Rows (dimension 0, periodic): my last row goes down, my top halo comes from up; and back. */
  MPI_Sendrecv(&grid[rows][1], cols, MPI_INT, down, 0, &grid[0][1], cols, MPI_INT, up, 0, cart, MPI_STATUS_IGNORE);
  MPI_Sendrecv(&grid[1][1], cols, MPI_INT, up, 1, &grid[rows + 1][1], cols, MPI_INT, down, 1, cart, MPI_STATUS_IGNORE);
  /* Columns (dimension 1, not periodic), as a strided type. */
  MPI_Sendrecv(&grid[1][cols], 1, column, right, 2, &grid[1][0], 1, column, left, 2, cart, MPI_STATUS_IGNORE);
  MPI_Sendrecv(&grid[1][1], 1, column, left, 3, &grid[1][cols + 1], 1, column, right, 3, cart, MPI_STATUS_IGNORE);
  const int want_up = reference_neighbour(2, dims, periods, rank, 0, -1);
  const int want_down = reference_neighbour(2, dims, periods, rank, 0, 1);
  const int want_left = reference_neighbour(2, dims, periods, rank, 1, -1);
  const int want_right = reference_neighbour(2, dims, periods, rank, 1, 1);
  int bad = 0;
  for (int j = 1; j <= cols; ++j) {
    bad |= grid[0][j] != cell_value(want_up, rows, j);
    bad |= grid[rows + 1][j] != cell_value(want_down, 1, j);
  }
  for (int i = 1; i <= rows; ++i) {
    bad |= grid[i][0] != (want_left == MPI_PROC_NULL ? -1 : cell_value(want_left, i, cols));
    bad |= grid[i][cols + 1] != (want_right == MPI_PROC_NULL ? -1 : cell_value(want_right, i, 1));
  }
  CHECK(!bad);
  MPI_Type_free(&column);
  MPI_Comm_free(&cart);
}

/* ---- graphs ---- */

/* A ring, each node also joined to node 0 (node 0 lists every node once). */
static void graph(void) {
  if (size < 3) return;
  int* index = malloc(sizeof(int) * (size_t)size);
  int* edges = malloc(sizeof(int) * (size_t)(4 * size));
  int nedges = 0;
  for (int v = 0; v < size; ++v) {
    if (v == 0) {
      for (int u = 1; u < size; ++u) edges[nedges++] = u;
    } else {
      edges[nedges++] = v - 1;
      if (v + 1 < size) edges[nedges++] = v + 1;
      if (v == size - 1 || v - 1 != 0) edges[nedges++] = 0;
    }
    index[v] = nedges;
  }
  MPI_Comm g = MPI_COMM_NULL;
  CHECK(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g) == MPI_SUCCESS);
  int status = -1, nnodes = -1, got_nedges = -1;
  MPI_Topo_test(g, &status);
  CHECK(status == MPI_GRAPH);
  MPI_Graphdims_get(g, &nnodes, &got_nedges);
  CHECK(nnodes == size && got_nedges == nedges);
  int* got_index = malloc(sizeof(int) * (size_t)size);
  int* got_edges = malloc(sizeof(int) * (size_t)nedges);
  CHECK(MPI_Graph_get(g, size, nedges, got_index, got_edges) == MPI_SUCCESS);
  CHECK(memcmp(got_index, index, sizeof(int) * (size_t)size) == 0);
  CHECK(memcmp(got_edges, edges, sizeof(int) * (size_t)nedges) == 0);
  for (int v = 0; v < size; ++v) {
    const int first = v == 0 ? 0 : index[v - 1];
    int count = -1, neighbours[64];
    CHECK(MPI_Graph_neighbors_count(g, v, &count) == MPI_SUCCESS);
    CHECK(count == index[v] - first);
    CHECK(MPI_Graph_neighbors(g, v, 64, neighbours) == MPI_SUCCESS);
    CHECK(memcmp(neighbours, edges + first, sizeof(int) * (size_t)count) == 0);
  }
  int mapped = -1;
  MPI_Graph_map(MPI_COMM_WORLD, size, index, edges, &mapped);
  CHECK(mapped == rank);

  /* Neighbourhood collectives on a graph: a rank sends to and receives from its neighbours in order. */
  const int first = rank == 0 ? 0 : index[rank - 1], degree = index[rank] - first;
  int* got = malloc(sizeof(int) * (size_t)(2 * degree + 1));
  MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, g);
  CHECK(memcmp(got, edges + first, sizeof(int) * (size_t)degree) == 0);
  /* alltoall: the block for neighbour u carries (me, u); a neighbour listed once each way gets its own block. */
  int* out = malloc(sizeof(int) * (size_t)(2 * degree + 1));
  for (int i = 0; i < degree; ++i) {
    out[2 * i] = rank;
    out[2 * i + 1] = edges[first + i];
  }
  MPI_Neighbor_alltoall(out, 2, MPI_INT, got, 2, MPI_INT, g);
  int bad = 0;
  for (int i = 0; i < degree; ++i) bad |= got[2 * i] != edges[first + i] || got[2 * i + 1] != rank;
  CHECK(!bad);
  MPI_Comm dup;
  MPI_Comm_dup(g, &dup);
  MPI_Topo_test(dup, &status);
  CHECK(status == MPI_GRAPH);
  MPI_Comm_free(&dup);
  free(out);
  free(got);
  MPI_Comm_free(&g);

  /* Fewer nodes than ranks: the ranks beyond them are left out. */
  const int pair_index[2] = {1, 2}, pair_edges[2] = {1, 0};
  CHECK(MPI_Graph_create(MPI_COMM_WORLD, 2, pair_index, pair_edges, 0, &g) == MPI_SUCCESS);
  CHECK((g == MPI_COMM_NULL) == (rank >= 2));
  if (g != MPI_COMM_NULL) MPI_Comm_free(&g);
  free(got_index);
  free(got_edges);
  free(index);
  free(edges);
}

/* Distributed graphs: each rank sends to rank+1 and rank+2 and receives from rank-1 and rank-2 (mod size). */
static void dist_graph(void) {
  const int sources[2] = {(rank - 1 + size) % size, (rank - 2 + 2 * size) % size};
  const int destinations[2] = {(rank + 1) % size, (rank + 2) % size};
  const int source_weights[2] = {10 * sources[0] + rank, 10 * sources[1] + rank};
  const int destination_weights[2] = {10 * rank + destinations[0], 10 * rank + destinations[1]};
  MPI_Comm g;
  CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, sources, source_weights, 2, destinations,
                                       destination_weights, MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
  int status = -1, indegree = -1, outdegree = -1, weighted = -1;
  MPI_Topo_test(g, &status);
  CHECK(status == MPI_DIST_GRAPH);
  MPI_Dist_graph_neighbors_count(g, &indegree, &outdegree, &weighted);
  CHECK(indegree == 2 && outdegree == 2 && weighted);
  int s[2], sw[2], d[2], dw[2];
  CHECK(MPI_Dist_graph_neighbors(g, 2, s, sw, 2, d, dw) == MPI_SUCCESS);
  CHECK(memcmp(s, sources, sizeof s) == 0 && memcmp(sw, source_weights, sizeof sw) == 0);
  CHECK(memcmp(d, destinations, sizeof d) == 0 && memcmp(dw, destination_weights, sizeof dw) == 0);
  /* Neighbourhood alltoall: the block to destination i is (me, i); it arrives in the block of the source it came from. */
  int out[4] = {rank, 0, rank, 1}, in[4] = {-1, -1, -1, -1};
  MPI_Neighbor_alltoall(out, 2, MPI_INT, in, 2, MPI_INT, g);
  CHECK(in[0] == sources[0] && in[1] == 0 && in[2] == sources[1] && in[3] == 1);
  MPI_Comm_free(&g);

  /* MPI_Dist_graph_create: rank 0 states every edge, r -> r+1 with weight r; the others none. */
  int n = rank == 0 ? size : 0;
  int* from = malloc(sizeof(int) * (size_t)size);
  int* degrees = malloc(sizeof(int) * (size_t)size);
  int* to = malloc(sizeof(int) * (size_t)size);
  int* weights = malloc(sizeof(int) * (size_t)size);
  for (int r = 0; r < size; ++r) {
    from[r] = r;
    degrees[r] = 1;
    to[r] = (r + 1) % size;
    weights[r] = r;
  }
  CHECK(MPI_Dist_graph_create(MPI_COMM_WORLD, n, from, degrees, to, weights, MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
  MPI_Dist_graph_neighbors_count(g, &indegree, &outdegree, &weighted);
  CHECK(indegree == 1 && outdegree == 1 && weighted);
  MPI_Dist_graph_neighbors(g, 1, s, sw, 1, d, dw);
  CHECK(s[0] == (rank - 1 + size) % size && sw[0] == (rank - 1 + size) % size);
  CHECK(d[0] == (rank + 1) % size && dw[0] == rank);
  MPI_Comm_free(&g);
  /* Unweighted: a ring; then a graph with no edges at all. */
  CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, sources, MPI_UNWEIGHTED, 1, destinations, MPI_UNWEIGHTED,
                                       MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
  MPI_Dist_graph_neighbors_count(g, &indegree, &outdegree, &weighted);
  CHECK(!weighted && indegree == 1 && outdegree == 1);
  s[0] = d[0] = -1;
  CHECK(MPI_Dist_graph_neighbors(g, 1, s, MPI_UNWEIGHTED, 1, d, MPI_UNWEIGHTED) == MPI_SUCCESS);
  CHECK(s[0] == sources[0] && d[0] == destinations[0]);
  MPI_Comm_free(&g);
  CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, NULL, MPI_WEIGHTS_EMPTY, 0, NULL, MPI_WEIGHTS_EMPTY,
                                       MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
  MPI_Dist_graph_neighbors_count(g, &indegree, &outdegree, &weighted);
  CHECK(indegree == 0 && outdegree == 0);
  int nothing = -1;
  CHECK(MPI_Neighbor_allgather(&rank, 1, MPI_INT, &nothing, 1, MPI_INT, g) == MPI_SUCCESS && nothing == -1);
  MPI_Comm_free(&g);
  free(from);
  free(degrees);
  free(to);
  free(weights);
}

/* ---- neighbourhood collectives on a Cartesian grid ---- */

/* On a 2-d grid, periodic in dimension 0 only: neighbours are ordered by
 * dimension, the negative direction first; a block sent to the -1 neighbour
 * arrives in that rank's +1 block (and the other way), even when the two are
 * the same rank (a periodic dimension of 1 or 2); MPI_PROC_NULL blocks are untouched. */
static void cart_neighbourhood(void) {
  int dims[2] = {0, 0};
  const int periods[2] = {1, 0};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  int neighbour[4];
  for (int d = 0; d < 2; ++d) {
    neighbour[2 * d] = reference_neighbour(2, dims, periods, rank, d, -1);
    neighbour[2 * d + 1] = reference_neighbour(2, dims, periods, rank, d, 1);
  }
  int got[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  CHECK(MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, cart) == MPI_SUCCESS);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == (neighbour[i] == MPI_PROC_NULL ? -1 : neighbour[i]));

  /* alltoall: block i of every rank is 10*rank + i. */
  int out[4];
  for (int i = 0; i < 4; ++i) out[i] = 10 * rank + i;
  for (int i = 0; i < 4; ++i) got[i] = -1;
  CHECK(MPI_Neighbor_alltoall(out, 1, MPI_INT, got, 1, MPI_INT, cart) == MPI_SUCCESS);
  for (int i = 0; i < 4; ++i) {
    const int opposite = i ^ 1; /* what the neighbour sent my way */
    CHECK(got[i] == (neighbour[i] == MPI_PROC_NULL ? -1 : 10 * neighbour[i] + opposite));
  }

  /* allgatherv: neighbour i's value lands at displacement 2*(3-i). */
  const int counts[4] = {1, 1, 1, 1}, displs[4] = {6, 4, 2, 0};
  for (int i = 0; i < 8; ++i) got[i] = -1;
  CHECK(MPI_Neighbor_allgatherv(&rank, 1, MPI_INT, got, counts, displs, MPI_INT, cart) == MPI_SUCCESS);
  for (int i = 0; i < 4; ++i) CHECK(got[displs[i]] == (neighbour[i] == MPI_PROC_NULL ? -1 : neighbour[i]));

  /* alltoallv: block i has i+1 elements (10*rank + i each), received where the neighbour put it in the opposite slot. */
  int vout[10], vin[10], scounts[4], sdispls[4], rcounts[4], rdispls[4];
  for (int i = 0, at = 0; i < 4; ++i) {
    scounts[i] = i + 1;
    sdispls[i] = at;
    for (int k = 0; k < i + 1; ++k) vout[at + k] = 10 * rank + i;
    at += i + 1;
  }
  for (int i = 0, at = 0; i < 4; ++i) {
    rcounts[i] = (i ^ 1) + 1;
    rdispls[i] = at;
    at += rcounts[i];
  }
  for (int i = 0; i < 10; ++i) vin[i] = -1;
  CHECK(MPI_Neighbor_alltoallv(vout, scounts, sdispls, MPI_INT, vin, rcounts, rdispls, MPI_INT, cart) == MPI_SUCCESS);
  int bad = 0;
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < rcounts[i]; ++k)
      bad |= vin[rdispls[i] + k] != (neighbour[i] == MPI_PROC_NULL ? -1 : 10 * neighbour[i] + (i ^ 1));
  CHECK(!bad);

  /* alltoallw: the same blocks sent as MPI_INT, received into a strided type (every other int) at
   * displacements in bytes. */
  MPI_Datatype strided, every_other;
  MPI_Type_vector(1, 1, 2, MPI_INT, &strided);
  MPI_Type_create_resized(strided, 0, 2 * sizeof(int), &every_other);
  MPI_Type_commit(&every_other);
  MPI_Type_free(&strided);
  const MPI_Datatype stypes[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
  const MPI_Datatype rtypes[4] = {every_other, every_other, every_other, every_other};
  MPI_Aint bsdispls[4], brdispls[4];
  int wide[20];
  for (int i = 0; i < 4; ++i) bsdispls[i] = sdispls[i] * (MPI_Aint)sizeof(int);
  for (MPI_Aint i = 0, at = 0; i < 4; ++i) {
    brdispls[i] = at;
    at += 2 * rcounts[i] * (MPI_Aint)sizeof(int);
  }
  for (int i = 0; i < 20; ++i) wide[i] = -1;
  CHECK(MPI_Neighbor_alltoallw(vout, scounts, bsdispls, stypes, wide, rcounts, brdispls, rtypes, cart) ==
        MPI_SUCCESS);
  bad = 0;
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < rcounts[i]; ++k) {
      const int at = (int)(brdispls[i] / (MPI_Aint)sizeof(int)) + 2 * k;
      bad |= wide[at] != (neighbour[i] == MPI_PROC_NULL ? -1 : 10 * neighbour[i] + (i ^ 1));
      bad |= wide[at + 1] != -1; /* the gaps of the strided type are not written */
    }
  CHECK(!bad);
  MPI_Type_free(&every_other);
  MPI_Comm_free(&cart);
}

/* ---- bad arguments ---- */

static void bad_arguments(void) {
  int dims[2] = {size, 1}, periods[2] = {0, 0}, coords[2] = {0, 0}, v = 0, out[8];
  int source, dest, n;
  MPI_Comm made = MPI_COMM_NULL;
  /* A Cartesian (or graph) call on a communicator without that topology. */
  CHECK(error_class(MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &source, &dest)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Cart_get(MPI_COMM_WORLD, 2, dims, periods, coords)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, coords)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Cart_rank(MPI_COMM_WORLD, coords, &v)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Cartdim_get(MPI_COMM_WORLD, &n)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Cart_sub(MPI_COMM_WORLD, periods, &made)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Graphdims_get(MPI_COMM_WORLD, &n, &v)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Graph_neighbors_count(MPI_COMM_WORLD, 0, &n)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &n, &v, &source)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Neighbor_allgather(&v, 1, MPI_INT, out, 1, MPI_INT, MPI_COMM_WORLD)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Topo_test(MPI_COMM_NULL, &n)) == MPI_ERR_COMM);
  CHECK(error_class(MPI_Cart_shift(MPI_COMM_NULL, 0, 1, &source, &dest)) == MPI_ERR_COMM);

  /* Bad grids: every rank fails alike before any message, and no communicator is made. */
  CHECK(error_class(MPI_Cart_create(MPI_COMM_WORLD, -1, dims, periods, 0, &made)) == MPI_ERR_DIMS);
  const int zero_dims[2] = {0, 1}, negative_dims[2] = {-1, 1}, too_big[2] = {size + 1, 1};
  CHECK(error_class(MPI_Cart_create(MPI_COMM_WORLD, 2, zero_dims, periods, 0, &made)) == MPI_ERR_DIMS);
  CHECK(error_class(MPI_Cart_create(MPI_COMM_WORLD, 2, negative_dims, periods, 0, &made)) == MPI_ERR_DIMS);
  CHECK(error_class(MPI_Cart_create(MPI_COMM_WORLD, 2, too_big, periods, 0, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Cart_create(MPI_COMM_WORLD, 2, NULL, periods, 0, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, NULL, 0, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Cart_map(MPI_COMM_WORLD, 2, too_big, periods, &n)) == MPI_ERR_ARG);
  CHECK(made == MPI_COMM_NULL);

  MPI_Comm cart;
  CHECK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart) == MPI_SUCCESS);
  MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN); /* inherited from MPI_COMM_WORLD too; said again for clarity */
  CHECK(error_class(MPI_Cart_coords(cart, size, 2, coords)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Cart_coords(cart, -1, 2, coords)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Cart_coords(cart, 0, 1, coords)) == MPI_ERR_ARG); /* maxdims below ndims */
  const int off_grid[2] = {size, 0}, below_grid[2] = {0, -1};
  CHECK(error_class(MPI_Cart_rank(cart, off_grid, &v)) == MPI_ERR_ARG); /* non-periodic: erroneous (7.5.5) */
  CHECK(error_class(MPI_Cart_rank(cart, below_grid, &v)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Cart_shift(cart, 2, 1, &source, &dest)) == MPI_ERR_DIMS);
  CHECK(error_class(MPI_Cart_shift(cart, -1, 1, &source, &dest)) == MPI_ERR_DIMS);
  CHECK(error_class(MPI_Cart_get(cart, 1, dims, periods, coords)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Cart_sub(cart, NULL, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Graph_neighbors(cart, 0, 4, out)) == MPI_ERR_TOPOLOGY);
  CHECK(error_class(MPI_Neighbor_alltoallv(out, NULL, coords, MPI_INT, out, coords, coords, MPI_INT, cart)) ==
        MPI_ERR_ARG);
  CHECK(error_class(MPI_Neighbor_allgatherv(out, 1, MPI_INT, out, coords, NULL, MPI_INT, cart)) == MPI_ERR_ARG);
  MPI_Comm_free(&cart);

  /* Graphs: too many nodes, an edge to no node, a decreasing index, bad ranks in queries. */
  const int index1[1] = {0}, loop_index[2] = {1, 2}, bad_edge[2] = {1, 7}, decreasing[2] = {2, 1};
  CHECK(error_class(MPI_Graph_create(MPI_COMM_WORLD, size + 1, index1, bad_edge, 0, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Graph_create(MPI_COMM_WORLD, -1, index1, bad_edge, 0, &made)) == MPI_ERR_ARG);
  if (size >= 2) {
    CHECK(error_class(MPI_Graph_create(MPI_COMM_WORLD, 2, loop_index, bad_edge, 0, &made)) == MPI_ERR_RANK);
    CHECK(error_class(MPI_Graph_create(MPI_COMM_WORLD, 2, decreasing, loop_index, 0, &made)) == MPI_ERR_ARG);
  }
  CHECK(error_class(MPI_Graph_create(MPI_COMM_WORLD, 1, NULL, bad_edge, 0, &made)) == MPI_ERR_ARG);
  const int self_index[1] = {1}, self_edge[1] = {0};
  MPI_Comm g;
  CHECK(MPI_Graph_create(MPI_COMM_WORLD, 1, self_index, self_edge, 0, &g) == MPI_SUCCESS);
  if (g != MPI_COMM_NULL) {
    CHECK(error_class(MPI_Graph_neighbors_count(g, 1, &n)) == MPI_ERR_RANK);
    CHECK(error_class(MPI_Graph_neighbors(g, -1, 4, out)) == MPI_ERR_RANK);
    CHECK(error_class(MPI_Graph_get(g, 0, 1, out, out + 1)) == MPI_ERR_ARG);
    CHECK(error_class(MPI_Cart_shift(g, 0, 1, &source, &dest)) == MPI_ERR_TOPOLOGY);
    MPI_Comm_free(&g);
  }
  /* Distributed graphs: a neighbour outside the group, a negative degree. */
  const int outside[1] = {size}, fine[1] = {0}, one[1] = {1};
  CHECK(error_class(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, outside, MPI_UNWEIGHTED, 1, fine,
                                                   MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &made)) == MPI_ERR_RANK);
  CHECK(error_class(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, -1, fine, MPI_UNWEIGHTED, 1, fine, MPI_UNWEIGHTED,
                                                   MPI_INFO_NULL, 0, &made)) == MPI_ERR_ARG);
  CHECK(error_class(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, fine, one, outside, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                          &made)) == MPI_ERR_RANK);
  CHECK(made == MPI_COMM_NULL);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    int source, dest;
    MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &source, &dest);
    return 0; /* not reached */
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  dims_create();
  grids();
  sub_grids();
  halo_exchange();
  graph();
  dist_graph();
  cart_neighbourhood();
  bad_arguments();
  return finish("topo_test");
}
