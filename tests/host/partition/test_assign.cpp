// SPDX-License-Identifier: Apache-2.0
// Assignment (METIS, random), symmetric adjacency, relabelling, halo and the partition book.
#include <algorithm>
#include <set>

#include "helpers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/partition/book.hpp"

namespace tessera::test {
namespace {

TEST(PartitionBook, MapsIdsWithEmptyPartitions) {
  // Partition 1 and 3 are empty.
  const PartitionBook b({0, 3, 3, 7, 7, 10}, {0, 5, 5, 6, 6, 20});
  EXPECT_EQ(b.num_parts(), 5);
  EXPECT_EQ(b.num_nodes(), 10);
  EXPECT_EQ(b.num_edges(), 20);
  const int32_t want[10] = {0, 0, 0, 2, 2, 2, 2, 4, 4, 4};
  for (int64_t v = 0; v < 10; ++v) {
    EXPECT_EQ(b.nid2part(v), want[v]) << v;
    const auto [p, off] = b.nid2local(v);
    EXPECT_EQ(p, want[v]);
    EXPECT_EQ(off, v - b.node_range(p).first);
  }
  EXPECT_EQ(b.eid2part(5), 2);
  EXPECT_EQ(b.eid2local(19), (std::pair<int32_t, int64_t>{4, 13}));
  std::vector<int64_t> ids = {9, 0, 3};
  std::vector<int32_t> out(3);
  b.nid2part(ids.data(), 3, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{4, 0, 2}));
  TESSERA_EXPECT_THROW_MSG(b.nid2part(10), IndexError, "node ID 10 outside [0, 10)");
  TESSERA_EXPECT_THROW_MSG(b.nid2part(-1), IndexError, "node ID -1");
  TESSERA_EXPECT_THROW_MSG(b.eid2part(20), IndexError, "edge ID 20");
  TESSERA_EXPECT_THROW_MSG(PartitionBook({0, 5, 3}, {0, 1, 2}), ValueError, "decrease");
  TESSERA_EXPECT_THROW_MSG(PartitionBook({1, 5}, {0, 1}), ValueError, "start at 1");
}

TEST(AssignRandom, BalancedSeededDeterministic) {
  for (int64_t P : {1, 2, 3, 8}) {
    const Assignment a = assign_random(1001, P, 7);
    std::vector<int64_t> cnt(P, 0);
    for (int32_t p : a.part)
      ++cnt[p];
    EXPECT_LE(*std::max_element(cnt.begin(), cnt.end()) - *std::min_element(cnt.begin(), cnt.end()),
              1);
    EXPECT_EQ(a.part, assign_random(1001, P, 7).part);
    if (P > 1) {
      EXPECT_NE(a.part, assign_random(1001, P, 8).part);
    }
  }
  const Assignment small = assign_random(3, 8, 1);
  EXPECT_EQ(small.part.size(), 3u);
  ASSERT_EQ(small.warnings.size(), 1u);
  EXPECT_NE(small.warnings[0].find("5 of 8 partitions are empty"), std::string::npos);
  TESSERA_EXPECT_THROW_MSG(assign_random(3, 0, 1), ValueError, "must be >= 1, got 0");
}

TEST(SymmetricAdjacency, DropsSelfLoopsAndDuplicatesWhateverTheDirection) {
  // 0->1, 1->0 (reciprocal), 1->2 twice, 2->2 self loop, 3 isolated.
  Dataset ds = make_dataset(4, {{0, 1}, {1, 0}, {1, 2}, {1, 2}, {2, 2}});
  const SymAdjacency adj = symmetric_adjacency(ds.graph);
  EXPECT_EQ(adj.xadj, (std::vector<int32_t>{0, 1, 3, 4, 4}));
  EXPECT_EQ(adj.adjncy, (std::vector<int32_t>{1, 0, 2, 1}));
  std::vector<int32_t> part = {0, 1, 1, 0};
  EXPECT_EQ(symmetric_edge_cut(ds.graph, part), 1);  // {0, 1}
  EXPECT_EQ(directed_edge_cut(ds.graph, part), 2);   // 0->1 and 1->0
}

TEST(SymmetricAdjacency, SymmetricSimpleFastPathMatchesGeneralMerge) {
  // Both directions of 600 random undirected edges, in shuffled order: a symmetric simple CSC
  // whose rows are not in edge-ID order, converted without a transpose. The same graph plus one
  // self loop (appended last, so the other edge IDs keep their order) takes the general merge,
  // which drops the loop: both must give the same METIS rows (order steers METIS).
  std::vector<std::pair<int64_t, int64_t>> und, edges;
  uint64_t x = 12345;
  auto next = [&](int64_t m) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(m));
  };
  std::set<std::pair<int64_t, int64_t>> seen;
  while (und.size() < 600) {
    int64_t a = next(150), b = next(150);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    if (seen.insert({a, b}).second) und.push_back({a, b});
  }
  for (const auto& [a, b] : und) {
    edges.push_back({a, b});
    edges.push_back({b, a});
  }
  for (size_t i = edges.size() - 1; i > 0; --i)
    std::swap(edges[i], edges[static_cast<size_t>(next(static_cast<int64_t>(i) + 1))]);
  const Dataset simple = make_dataset(150, edges);
  edges.push_back({7, 7});
  const Dataset looped = make_dataset(150, edges);
  const SymAdjacency fast = symmetric_adjacency(simple.graph);
  const SymAdjacency general = symmetric_adjacency(looped.graph);
  EXPECT_EQ(fast.xadj, general.xadj);
  EXPECT_EQ(fast.adjncy, general.adjncy);
  EXPECT_EQ(fast.xadj.back(), 1200);
  // Built with symmetrize + drop_self_loops + dedup from one direction only: same rows again.
  std::vector<std::pair<int64_t, int64_t>> one(edges.begin(), edges.end() - 1);
  const Dataset built = make_dataset(150, one, {true, true, true});
  const SymAdjacency from_build = symmetric_adjacency(built.graph);
  EXPECT_EQ(from_build.xadj, fast.xadj);
  EXPECT_EQ(from_build.adjncy.size(), fast.adjncy.size());
  // assign_parts knows the build made the graph simple (no check); same partition as the
  // checked path.
  PartitionOptions po;
  po.seed = 1;
  po.num_parts = 3;
  EXPECT_EQ(assign_parts(built, po).part, assign_metis(built.graph, 3, {}, 1, po).part);
}

TEST(MetisLimits, ClearErrorBeyond32BitIndices) {
  EXPECT_NO_THROW(check_metis_limits(1000, 2000));
  TESSERA_EXPECT_THROW_MSG(check_metis_limits(int64_t{1} << 31, 0), ValueError,
                           "use --method random");
  TESSERA_EXPECT_THROW_MSG(check_metis_limits(10, int64_t{3} << 30), ValueError, "32-bit indices");
}

TEST(AssignMetis, SmallCasesDoNotCrash) {
  PartitionOptions po;
  // A 10-cycle into 1, 2, 3, 8 (P < N) and 10, 16 (P >= N: node v -> part v) parts.
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t v = 0; v < 10; ++v)
    ring.push_back({v, (v + 1) % 10});
  const Dataset ds = make_dataset(10, ring, {true, false, false});
  for (int64_t P : {1, 2, 3, 8, 10, 16}) {
    const Assignment a = assign_metis(ds.graph, P, {}, 1, po);
    ASSERT_EQ(a.part.size(), 10u);
    for (int32_t p : a.part) {
      EXPECT_GE(p, 0);
      EXPECT_LT(p, P);
    }
    if (P >= 10) {
      for (int32_t v = 0; v < 10; ++v)
        EXPECT_EQ(a.part[v], v);
      EXPECT_FALSE(a.warnings.empty());
    }
  }
  // P = 2 on a ring: METIS finds the optimal cut of 2.
  const Assignment two = assign_metis(ds.graph, 2, {}, 1, po);
  EXPECT_EQ(two.metis_objval, 2);
  EXPECT_EQ(symmetric_edge_cut(ds.graph, two.part), 2);
  // No edges at all, and an empty graph.
  const Dataset iso = make_dataset(20, {});
  EXPECT_EQ(assign_metis(iso.graph, 4, {}, 1, po).part.size(), 20u);
  const Dataset empty = make_dataset(0, {});
  EXPECT_TRUE(assign_metis(empty.graph, 3, {}, 1, po).part.empty());
}

TEST(AssignMetis, SeedChangesResultDeterministically) {
  const Dataset ds = read_real("cora");
  PartitionOptions po;
  po.seed = 1;
  const Assignment a = assign_metis(ds.graph, 4, {}, 1, po);
  EXPECT_EQ(a.part, assign_metis(ds.graph, 4, {}, 1, po).part);
  po.seed = 2;
  EXPECT_NE(a.part, assign_metis(ds.graph, 4, {}, 1, po).part);
}

TEST(Relabel, ContiguousRangesStableOrder) {
  const Dataset ds = make_dataset(8, {{0, 1}, {2, 1}, {3, 4}, {5, 6}, {7, 0}, {6, 7}});
  Assignment a;
  a.num_parts = 3;
  a.part = {2, 0, 2, 0, 1, 2, 0, 1};  // partition 0: {1, 3, 6}; 1: {4, 7}; 2: {0, 2, 5}
  const Relabelled r = relabel(ds.graph, a);
  EXPECT_EQ(r.node_offsets, (std::vector<int64_t>{0, 3, 5, 8}));
  EXPECT_EQ(r.orig_nid, (std::vector<int64_t>{1, 3, 6, 4, 7, 0, 2, 5}));
  for (int64_t v = 0; v < 8; ++v)
    EXPECT_EQ(r.orig_nid[r.new_nid[v]], v);
  // In-edges per partition: 1 has 2 (0->1, 2->1), 6 has 1 (5->6) -> 3; 4 (3->4), 7 (6->7) -> 2;
  // 0 (7->0) -> 1.
  EXPECT_EQ(r.edge_offsets, (std::vector<int64_t>{0, 3, 5, 6}));
  // New edge 0 and 1 are the in-edges of new node 0 (old 1), in the input's order (original
  // source, then edge ID): 0 -> 5 (new), 2 -> 6 (new).
  EXPECT_EQ(r.csc.indices[0], 5);
  EXPECT_EQ(r.csc.indices[1], 6);
  EXPECT_EQ(r.csc.eids[0], 0);  // input edge 0 -> 1
  EXPECT_EQ(r.csc.eids[1], 1);  // input edge 2 -> 1
}

TEST(Relabel, DegreeOrderWithinEachPartition) {
  // In-degrees: 0:1, 1:3, 2:0, 3:2, 4:1, 5:0, 6:2, 7:1.
  const Dataset ds = make_dataset(
      8, {{0, 1}, {2, 1}, {3, 1}, {3, 4}, {5, 6}, {7, 0}, {6, 7}, {0, 3}, {2, 3}, {4, 6}});
  Assignment a;
  a.num_parts = 3;
  a.part = {0, 0, 2, 0, 1, 1, 0, 1};  // partition 0: {0, 1, 3, 6}; 1: {4, 5, 7}; 2: {2}
  const Relabelled orig = relabel(ds.graph, a);
  EXPECT_EQ(orig.orig_nid, (std::vector<int64_t>{0, 1, 3, 6, 4, 5, 7, 2}));
  const Relabelled r = relabel(ds.graph, a, NodeOrder::kDegree);
  EXPECT_EQ(r.node_offsets, orig.node_offsets);
  EXPECT_EQ(r.edge_offsets, orig.edge_offsets);
  // Partition 0: 1 (in-degree 3), then 3 and 6 (2 each, in ID order), then 0 (1);
  // partition 1: 4 and 7 (1 each), then 5 (0).
  EXPECT_EQ(r.orig_nid, (std::vector<int64_t>{1, 3, 6, 0, 4, 7, 5, 2}));
  for (const Relabelled* x : {&orig, &r}) {
    for (int64_t v = 0; v < 8; ++v)
      EXPECT_EQ(x->orig_nid[x->new_nid[v]], v);
    // Every edge under its new names, each row in the input's order: (original source, edge
    // ID), the order sampling draws from, whatever the new IDs.
    validate_graph(x->csc, "relabelled");
    for (int64_t nv = 0; nv < 8; ++nv) {
      const int64_t ov = x->orig_nid[nv];
      ASSERT_EQ(x->csc.degree(nv), ds.graph.degree(ov));
      for (int64_t i = 0; i < x->csc.degree(nv); ++i) {
        const int64_t k = ds.graph.indptr[ov] + i, q = x->csc.indptr[nv] + i;
        EXPECT_EQ(x->orig_nid[x->csc.indices[q]], ds.graph.indices[k]);
        EXPECT_EQ(x->csc.eids[q], ds.graph.eid(k));
        if (i > 0) {
          EXPECT_LT(x->orig_nid[x->csc.indices[q - 1]], x->orig_nid[x->csc.indices[q]]);
        }
      }
    }
  }
  // Node 1's in-edges come from 0, 2 and 3; by degree 3 is numbered before 0 (new 1 and 3),
  // so the row is not sorted by new source: new sources 3, 7, 1 (original 0, 2, 3).
  EXPECT_EQ(r.csc.indices[0], 3);
  EXPECT_EQ(r.csc.indices[1], 7);
  EXPECT_EQ(r.csc.indices[2], 1);
  EXPECT_EQ(parse_node_order("degree"), NodeOrder::kDegree);
  TESSERA_EXPECT_THROW_MSG(parse_node_order("rcmk"), ValueError,
                           "unknown node order 'rcmk' (expected original or degree)");
}

TEST(BuildLocal, HaloOfAChainByHand) {
  // Chain 0 -> 1 -> 2 -> 3 -> 4 -> 5, parts {0,1,2} and {3,4,5} (already in order).
  const Dataset ds = make_dataset(6, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}});
  Assignment a;
  a.num_parts = 2;
  a.part = {0, 0, 0, 1, 1, 1};
  const Relabelled r = relabel(ds.graph, a);
  // halo 0: no halo; indices are global IDs.
  LocalGraph l0 = build_local(r, 1, 0);
  EXPECT_EQ(l0.nid, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(l0.indices, (std::vector<int64_t>{2, 3, 4}));
  // halo 1: node 2 (the in-neighbor of 3) is the only halo node, with no edges.
  LocalGraph l1 = build_local(r, 1, 1);
  EXPECT_EQ(l1.nid, (std::vector<int64_t>{3, 4, 5, 2}));
  EXPECT_EQ(l1.inner_node, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(l1.indptr, (std::vector<int64_t>{0, 1, 2, 3, 3}));
  EXPECT_EQ(l1.indices, (std::vector<int64_t>{3, 0, 1}));
  EXPECT_EQ(l1.eid, (std::vector<int64_t>{2, 3, 4}));
  // halo 2: halo {1, 2}; node 2 (1 hop) keeps its in-edge 1 -> 2 as a non-inner edge.
  LocalGraph l2 = build_local(r, 1, 2);
  EXPECT_EQ(l2.nid, (std::vector<int64_t>{3, 4, 5, 1, 2}));
  EXPECT_EQ(l2.indptr, (std::vector<int64_t>{0, 1, 2, 3, 3, 4}));
  EXPECT_EQ(l2.indices, (std::vector<int64_t>{4, 0, 1, 3}));
  EXPECT_EQ(l2.eid, (std::vector<int64_t>{2, 3, 4, 1}));
  EXPECT_EQ(l2.inner_edge, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(l2.orig_eid, (std::vector<int64_t>{2, 3, 4, 1}));
  // Partition 0 has no in-neighbors outside itself.
  EXPECT_EQ(build_local(r, 0, 2).nid, (std::vector<int64_t>{0, 1, 2}));
}

TEST(BuildLocal, RowsKeepTheOriginalOrderAcrossInnerAndHaloSources) {
  // Node 4's in-edges come from 2 (a halo node of partition 1) and 3 (owned): in the original
  // order 2 comes first, although its local ID (3) is above 3's (0).
  const Dataset ds = make_dataset(6, {{3, 4}, {2, 4}, {4, 5}});
  Assignment a;
  a.num_parts = 2;
  a.part = {0, 0, 0, 1, 1, 1};
  const Relabelled r = relabel(ds.graph, a);
  const LocalGraph l = build_local(r, 1, 1);
  EXPECT_EQ(l.nid, (std::vector<int64_t>{3, 4, 5, 2}));
  EXPECT_EQ(l.indptr, (std::vector<int64_t>{0, 0, 2, 3, 3}));
  EXPECT_EQ(l.indices, (std::vector<int64_t>{3, 0, 1}));
  EXPECT_EQ(l.orig_eid, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(l.eid, (std::vector<int64_t>{0, 1, 2}));
  // Without halo the global IDs, the same order.
  EXPECT_EQ(build_local(r, 1, 0).indices, (std::vector<int64_t>{2, 3, 4}));
}

}  // namespace
}  // namespace tessera::test
