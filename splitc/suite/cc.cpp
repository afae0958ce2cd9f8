// Connected components of a random graph by label propagation with pointer
// jumping over global pointers: every vertex starts labelled with its own
// number, takes the smallest label among its neighbours' and then its
// label's label (split-phase gets), until no label changes anywhere. Each
// component ends labelled with its smallest vertex.
#include <algorithm>
#include <numeric>
#include <vector>

#include "suite.hpp"

namespace suite {
namespace {

using Vertex = std::int64_t;
constexpr double kEdgeChance = 0.45;  // per vertex: below 0.5, so many components remain
constexpr double kFarChance = 0.05;   // an edge to anywhere rather than nearby
constexpr std::uint64_t kNear = 16;

struct Edge {
  Vertex u, v;
};

// The whole graph, the same on every rank.
std::vector<Edge> random_graph(std::size_t vertices) {
  Random random(42);
  std::vector<Edge> edges;
  for (std::size_t u = 0; u < vertices; ++u) {
    if (random.uniform() >= kEdgeChance) continue;
    const std::uint64_t v = random.uniform() < kFarChance ? random.below(vertices)
                                                          : (u + 1 + random.below(kNear)) % vertices;
    edges.push_back({Vertex(u), Vertex(v)});
  }
  return edges;
}

// Serial union-find: the smallest vertex of each one's component.
std::vector<Vertex> expected_labels(std::size_t vertices, const std::vector<Edge>& edges) {
  std::vector<Vertex> parent(vertices);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](Vertex x) {
    while (parent[std::size_t(x)] != x) x = parent[std::size_t(x)] = parent[std::size_t(parent[std::size_t(x)])];
    return x;
  };
  for (const Edge& e : edges) {
    const Vertex a = find(e.u), b = find(e.v);
    if (a != b) parent[std::size_t(std::max(a, b))] = std::min(a, b);  // the root stays the smallest
  }
  for (std::size_t x = 0; x < vertices; ++x) parent[x] = find(Vertex(x));
  return parent;
}

}  // namespace

Outcome connected_components(const Problem& problem) {
  const std::size_t vertices = problem.total(problem.at().cc_vertices);
  const std::vector<Edge> edges = random_graph(vertices);
  splitc::spread_array<Vertex> label(vertices, splitc::layout::blocked);
  const std::size_t first = std::size_t(MYPROC) * label.block();
  std::span<Vertex> mine = label.local().first(std::min(vertices, first + label.block()) - std::min(vertices, first));
  // Neighbours of our vertices, as compressed rows.
  std::vector<std::size_t> row(mine.size() + 1);
  std::vector<Vertex> neighbour;
  {
    auto ours = [&](Vertex x) { return std::size_t(x) >= first && std::size_t(x) < first + mine.size(); };
    for (const Edge& e : edges) {
      if (ours(e.u)) ++row[std::size_t(e.u) - first + 1];
      if (ours(e.v)) ++row[std::size_t(e.v) - first + 1];
    }
    std::partial_sum(row.begin(), row.end(), row.begin());
    neighbour.resize(row.back());
    std::vector<std::size_t> at(row.begin(), row.end() - 1);
    for (const Edge& e : edges) {
      if (ours(e.u)) neighbour[at[std::size_t(e.u) - first]++] = e.v;
      if (ours(e.v)) neighbour[at[std::size_t(e.v) - first]++] = e.u;
    }
  }
  for (std::size_t x = 0; x < mine.size(); ++x) mine[x] = Vertex(first + x);
  splitc::barrier();

  std::vector<Vertex> seen(neighbour.size()), best(mine.size()), jump(mine.size());
  Outcome out;
  out.problem = std::to_string(vertices) + " vertices, " + std::to_string(edges.size()) + " edges";
  out.seconds = timed([&] {
    for (std::uint64_t changed = 1; changed;) {
      for (std::size_t k = 0; k < neighbour.size(); ++k) splitc::get(seen[k], label[std::size_t(neighbour[k])]);
      splitc::sync();
      for (std::size_t x = 0; x < mine.size(); ++x) {
        best[x] = mine[x];
        for (std::size_t k = row[x]; k < row[x + 1]; ++k) best[x] = std::min(best[x], seen[k]);
        splitc::get(jump[x], label[std::size_t(best[x])]);  // pointer jumping: the label's label
      }
      splitc::sync();
      std::uint64_t ours = 0;
      for (std::size_t x = 0; x < mine.size(); ++x) {
        const Vertex v = std::min(best[x], jump[x]);
        if (v != mine[x]) {
          mine[x] = v;
          ++ours;
        }
      }
      changed = splitc::all_reduce_to_all(ours, splitc::reduce_op::sum);
    }
  });
  const std::vector<Vertex> expect = expected_labels(vertices, edges);
  std::string why;
  for (std::size_t x = 0; x < mine.size() && why.empty(); ++x)
    if (mine[x] != expect[first + x]) {
      why = "vertex ";
      why += std::to_string(first + x) + " labelled " + std::to_string(mine[x]) + ", not " +
             std::to_string(expect[first + x]);
    }
  out.verified = all_agree(why.empty(), "cc", why);
  return out;
}

}  // namespace suite
