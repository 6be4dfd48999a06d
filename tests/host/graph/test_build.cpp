// SPDX-License-Identifier: Apache-2.0
#include <random>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera_test.hpp"

namespace tessera {
namespace {

EdgeList make(int64_t n, std::vector<std::pair<int64_t, int64_t>> e) {
  EdgeList el;
  el.num_nodes = n;
  for (auto [s, d] : e) {
    el.src.push_back(s);
    el.dst.push_back(d);
  }
  return el;
}

// Multiset of (src, dst, eid) triples of a CSC.
std::multiset<std::tuple<int64_t, int64_t, int64_t>> triples(const Graph& g) {
  std::multiset<std::tuple<int64_t, int64_t, int64_t>> s;
  for (int64_t v = 0; v < g.num_nodes; ++v)
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
      s.insert({g.indices[k], v, g.eid(k)});
  return s;
}

// m random edges of n nodes whose destinations are all below dst_range: long rows, many empty.
EdgeList random_edges(uint64_t seed, int64_t n, int64_t m, int64_t dst_range) {
  std::mt19937_64 rng(seed);
  EdgeList el;
  el.num_nodes = n;
  for (int64_t i = 0; i < m; ++i) {
    el.src.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)));
    el.dst.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(dst_range)));
  }
  return el;
}

TEST(BuildCsc, KeepsEveryEdgeWithItsId) {
  Graph g = build_csc(make(4, {{0, 1}, {2, 1}, {1, 1}, {3, 0}, {2, 1}}), {});
  validate_graph(g, "g");
  EXPECT_EQ(g.num_edges(), 5);
  EXPECT_EQ(triples(g), (std::multiset<std::tuple<int64_t, int64_t, int64_t>>{
                            {0, 1, 0}, {2, 1, 1}, {1, 1, 2}, {3, 0, 3}, {2, 1, 4}}));
  // Rows sorted by (neighbor, eid).
  EXPECT_EQ(std::vector<int64_t>(g.indices.begin() + g.indptr[1], g.indices.begin() + g.indptr[2]),
            (std::vector<int64_t>{0, 1, 2, 2}));
  EXPECT_EQ(g.degree(2), 0);
}

TEST(BuildCsc, OptionsSymmetrizeDropLoopsDedup) {
  BuildOptions o;
  o.symmetrize = true;
  o.drop_self_loops = true;
  o.deduplicate = true;
  Graph g = build_csc(make(3, {{0, 1}, {1, 0}, {1, 1}, {0, 1}, {2, 0}}), o);
  validate_graph(g, "g");
  // Pairs: 0->1 (eid 0), 1->0 (eid 1), reverse 1->0 (5+0=5), 0->1 (6), 0->1 (3), 1->0 (8),
  // 2->0 (4), 0->2 (9). Dedup keeps the smallest eid per pair.
  EXPECT_EQ(triples(g), (std::multiset<std::tuple<int64_t, int64_t, int64_t>>{
                            {0, 1, 0}, {1, 0, 1}, {2, 0, 4}, {0, 2, 9}}));
}

TEST(BuildCsc, SymmetrizeAddsOnlyTheReversesTheInputLacks) {
  BuildOptions o;
  o.symmetrize = true;
  // E = 5. Reverses 5 (1->0), 6 (0->1), 7 (1->1), 8 (1->0) are pairs the input holds already:
  // not added. Only 9 (0->2, the reverse of 2->0) is. Input edges all stay, the multi-edge too.
  Graph g = build_csc(make(3, {{0, 1}, {1, 0}, {1, 1}, {0, 1}, {2, 0}}), o);
  validate_graph(g, "g");
  EXPECT_EQ(triples(g), (std::multiset<std::tuple<int64_t, int64_t, int64_t>>{
                            {0, 1, 0}, {1, 0, 1}, {1, 1, 2}, {0, 1, 3}, {2, 0, 4}, {0, 2, 9}}));
}

// Both directions stored, as `tessera generate rmat --symmetrize` writes them (edge i and edge
// E/2 + i reverse each other): symmetrizing again stores every edge once, with its own ID.
TEST(BuildCsc, SymmetrizeKeepsAGraphThatStoresBothDirections) {
  EdgeList half = random_edges(5, 200, 3000, 200);
  EdgeList both;
  both.num_nodes = half.num_nodes;
  both.src = half.src;
  both.dst = half.dst;
  both.src.insert(both.src.end(), half.dst.begin(), half.dst.end());
  both.dst.insert(both.dst.end(), half.src.begin(), half.src.end());
  const int64_t stored = both.num_edges();
  EdgeList copy = both;
  const Graph plain = build_csc(std::move(copy), {});
  BuildOptions o;
  o.symmetrize = true;
  const Graph g = build_csc(std::move(both), o);
  validate_graph(g, "g");
  EXPECT_EQ(g.num_edges(), stored) << "each pair stored once per direction";
  EXPECT_EQ(g.indptr, plain.indptr);
  EXPECT_EQ(g.indices, plain.indices);
  EXPECT_EQ(g.eids, plain.eids) << "no added reverse (edge ID >= E) survives";
}

// Oracle: input edges (u, v, i) plus (v, u, E + i) wherever the input has no edge v -> u; the
// same at any thread count, and symmetrizing the result's edge list adds nothing.
TEST(BuildCsc, SymmetrizeMatchesAnOracleAndIsIdempotent) {
  // 60 nodes and 900 edges: many pairs appear in both directions, and some self loops.
  const EdgeList base = random_edges(9, 60, 900, 60);
  const int64_t e = base.num_edges();
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < e; ++i)
    pairs.insert({base.src[i], base.dst[i]});
  std::multiset<std::tuple<int64_t, int64_t, int64_t>> want;
  int64_t skipped = 0;
  for (int64_t i = 0; i < e; ++i) {
    want.insert({base.src[i], base.dst[i], i});
    if (pairs.count({base.dst[i], base.src[i]}) == 0) {
      want.insert({base.dst[i], base.src[i], e + i});
    } else {
      ++skipped;
    }
  }
  ASSERT_GT(skipped, 50) << "the fixture must exercise reverses that are not added";
  BuildOptions o;
  o.symmetrize = true;
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    EdgeList a = base;
    const Graph g = build_csc(std::move(a), o);
    validate_graph(g, "g");
    EXPECT_EQ(triples(g), want) << threads << " threads";
    EdgeList again;
    again.num_nodes = g.num_nodes;
    for (const auto& [s, d, id] : triples(g)) {
      again.src.push_back(s);
      again.dst.push_back(d);
    }
    EXPECT_EQ(build_csc(std::move(again), o).num_edges(), g.num_edges()) << threads << " threads";
  }
  set_num_threads(0);
}

TEST(BuildCsc, RejectsOutOfRangeIds) {
  TESSERA_EXPECT_THROW_MSG(build_csc(make(3, {{0, 1}, {0, 3}}), {}, "f.txt"), IndexError,
                           "f.txt: edge 1 (0 -> 3)");
  TESSERA_EXPECT_THROW_MSG(build_csc(make(3, {{-1, 1}}), {}, "f"), IndexError, "edge 0");
}

TEST(BuildCsc, EmptyAndIsolated) {
  Graph g = build_csc(make(5, {}), {});
  validate_graph(g, "g");
  EXPECT_EQ(g.num_edges(), 0);
  Graph z = build_csc(make(0, {}), {});
  EXPECT_EQ(z.indptr.size(), 1u);
}

TEST(BuildCsc, IndependentOfThreadCountAndTransposeInverts) {
  const EdgeList base = random_edges(7, 1000, 20000, 50);
  BuildOptions o;
  o.symmetrize = true;
  o.deduplicate = true;
  set_num_threads(1);
  EdgeList a = base;
  Graph g1 = build_csc(std::move(a), o);
  set_num_threads(3);
  EdgeList b = base;
  Graph g3 = build_csc(std::move(b), o);
  set_num_threads(0);
  EXPECT_EQ(g1.indptr, g3.indptr);
  EXPECT_EQ(g1.indices, g3.indices);
  EXPECT_EQ(g1.eids, g3.eids);
  Graph t = transpose(g1);
  validate_graph(t, "t");
  Graph tt = transpose(t);
  EXPECT_EQ(tt.indptr, g1.indptr);
  EXPECT_EQ(tt.indices, g1.indices);
  EXPECT_EQ(tt.eids, g1.eids);
}

TEST(PermuteNodes, DegreeOrderPutsHubsFirstAndKeepsEveryEdge) {
  EdgeList base = random_edges(11, 300, 5000, 120);
  BuildOptions o;
  o.symmetrize = true;
  Graph g = build_csc(std::move(base), o);
  const std::vector<int64_t> nid = degree_order(g);
  std::vector<int64_t> orig(nid.size());
  for (size_t v = 0; v < nid.size(); ++v)
    orig[nid[v]] = static_cast<int64_t>(v);
  // Descending degree, ties by the old ID.
  for (int64_t r = 1; r < g.num_nodes; ++r) {
    const int64_t a = orig[r - 1], b = orig[r];
    EXPECT_TRUE(g.degree(a) > g.degree(b) || (g.degree(a) == g.degree(b) && a < b)) << r;
  }
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    Graph p = permute_nodes(g, nid);
    validate_graph(p, "p");
    // Every edge (src, dst, eid) is there under the new names, rows sorted by (src, eid).
    std::multiset<std::tuple<int64_t, int64_t, int64_t>> renamed;
    for (auto [s, d, e] : triples(g))
      renamed.insert({nid[s], nid[d], e});
    EXPECT_EQ(triples(p), renamed);
    for (int64_t v = 0; v < p.num_nodes; ++v) {
      EXPECT_EQ(p.degree(v), g.degree(orig[v]));
      for (int64_t k = p.indptr[v] + 1; k < p.indptr[v + 1]; ++k)
        EXPECT_TRUE(p.indices[k - 1] < p.indices[k] ||
                    (p.indices[k - 1] == p.indices[k] && p.eids[k - 1] < p.eids[k]));
    }
    // Renaming back gives the original graph.
    Graph back = permute_nodes(p, orig);
    EXPECT_EQ(back.indptr, g.indptr);
    EXPECT_EQ(back.indices, g.indices);
    for (int64_t k = 0; k < g.num_edges(); ++k)
      EXPECT_EQ(back.eids[k], g.eid(k));
  }
  set_num_threads(0);
}

TEST(PermuteNodes, RejectsWhatIsNotAPermutation) {
  Graph g = build_csc(make(3, {{0, 1}, {2, 1}}), {});
  TESSERA_EXPECT_THROW_MSG(permute_nodes(g, {0, 1}), ValueError, "2 new IDs for 3 nodes");
  TESSERA_EXPECT_THROW_MSG(permute_nodes(g, {0, 3, 1}), ValueError,
                           "new ID 3 of node 1 is out of range");
  TESSERA_EXPECT_THROW_MSG(permute_nodes(g, {0, 1, 1}), ValueError,
                           "new ID 1 of node 2 is taken twice");
  TESSERA_EXPECT_THROW_MSG(permute_nodes(g, {-1, 1, 2}), ValueError, "out of range");
}

}  // namespace
}  // namespace tessera
