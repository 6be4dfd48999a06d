// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "../../../host/ops/src/id_map.hpp"        // private: the workspace's tables
#include "../../../host/ops/src/sample_block.hpp"  // private: the one-pass path
#include "helpers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::ops {
namespace {

// Checks the compaction contract of a block built from `e` with destination nodes `dst`.
void expect_compaction_order(const Block& b, const SampledEdges& e,
                             const std::vector<int64_t>& dst) {
  ASSERT_EQ(b.num_dst, static_cast<int64_t>(dst.size()));
  for (size_t i = 0; i < dst.size(); ++i)
    EXPECT_EQ(b.src_nodes[i], dst[i]);
  // New sources in order of first appearance in the edge list.
  std::set<int64_t> seen(dst.begin(), dst.end());
  std::vector<int64_t> order(dst.begin(), dst.end());
  for (int64_t s : e.src)
    if (seen.insert(s).second) order.push_back(s);
  EXPECT_EQ(b.src_nodes, order);
  ASSERT_EQ(b.num_edges(), e.size());
  for (int64_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(b.src_nodes[b.src[i]], e.src[i]);
    ASSERT_LT(b.dst[i], b.num_dst);
    EXPECT_EQ(b.src_nodes[b.dst[i]], e.dst[i]);
    EXPECT_EQ(b.eids[i], e.eid[i]);
  }
}

void expect_same_blocks(const std::vector<Block>& a, const std::vector<Block>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l) {
    EXPECT_EQ(a[l].num_dst, b[l].num_dst) << "block " << l;
    EXPECT_EQ(a[l].src_nodes, b[l].src_nodes) << "block " << l;
    EXPECT_EQ(a[l].src, b[l].src) << "block " << l;
    EXPECT_EQ(a[l].dst, b[l].dst) << "block " << l;
    EXPECT_EQ(a[l].eids, b[l].eids) << "block " << l;
  }
}

// The blocks by definition: each hop sampled into a COO (sample_neighbors over the graph as
// stored, one thread) and compacted by to_block over hashing (no workspace), the next frontier
// being the block's sources. What NeighborSampler must give, bit for bit, on every path.
std::vector<Block> blocks_by_definition(const Graph& g, const NeighborSamplerOptions& so,
                                        Span<const int64_t> seeds, const RngKey& key,
                                        Span<const float> weights = {}) {
  const SamplingGraph sg = SamplingGraph::as_stored(g, weights);
  const size_t layers = so.fanouts.size();
  std::vector<Block> blocks(layers);
  std::vector<int64_t> frontier = seeds.to_vector();
  for (size_t h = 0; h < layers; ++h) {
    const size_t l = layers - 1 - h;
    SampleOptions o;
    o.fanout = so.fanouts[l];
    o.replace = so.replace;
    o.dir = so.dir;
    o.key = key;
    o.key.layer = static_cast<uint32_t>(h);
    o.num_threads = 1;
    SampledEdges e = sample_neighbors(sg, frontier, o);
    if (so.dir == EdgeDir::kOut) {
      e.src.swap(e.dst);
    }
    blocks[l] = to_block(e, frontier);
    frontier = blocks[l].src_nodes;
  }
  return blocks;
}

TEST(ToBlock, HandBuiltExample) {
  SampledEdges e;
  e.src = {7, 3, 9, 7, 5};
  e.dst = {3, 3, 5, 5, 5};
  e.eid = {10, 11, 12, 13, 14};
  std::vector<int64_t> dst{5, 3};
  const Block b = to_block(e, dst);
  EXPECT_EQ(b.src_nodes, (std::vector<int64_t>{5, 3, 7, 9}));
  EXPECT_EQ(b.src, (std::vector<int64_t>{2, 1, 3, 2, 0}));
  EXPECT_EQ(b.dst, (std::vector<int64_t>{1, 1, 0, 0, 0}));
  EXPECT_EQ(b.eids, e.eid);
  expect_compaction_order(b, e, dst);
}

TEST(ToBlock, BadInputs) {
  SampledEdges e;
  e.src = {1};
  e.dst = {4};
  e.eid = {0};
  std::vector<int64_t> dst{2, 3};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst), ValueError, "not a destination node");
  dst = {4, 4};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst), ValueError, "listed twice");
  e.eid.clear();
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst), ValueError, "differ in length");
  // Negative IDs met the tables' -1 marks and came out as wrong local IDs, without an error.
  e = SampledEdges{};
  e.src = {1, 2};
  e.dst = {0, -1};
  e.eid = {0, 1};
  dst = {0};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst), IndexError, "edge 1 (2 -> -1) has a negative node");
  e.src = {-1, 2};
  e.dst = {0, 0};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst), IndexError, "edge 0 (-1 -> 0) has a negative node");
}

TEST(NeighborSampler, BlocksObeyCompactionOrderAndChain) {
  const Graph& g = test::real_dataset("cora").graph;
  NeighborSamplerOptions so;
  so.fanouts = {15, 10, 5};
  NeighborSampler sampler(g, so);
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < g.num_nodes; v += 13)
    seeds.push_back(v);
  CompactWorkspace ws;
  SampleStats st;
  const auto blocks = sampler.sample_blocks(seeds, make_rng_key(3, 0, 1, 0), nullptr, &ws, &st);
  ASSERT_EQ(blocks.size(), 3u);
  // Output block's destinations are the seeds; each block's destinations are the next one's
  // sources; every edge is a real edge (src -> dst) of g.
  EXPECT_EQ(blocks.back().dst_nodes().to_vector(), seeds);
  for (size_t l = 0; l + 1 < blocks.size(); ++l)
    EXPECT_EQ(blocks[l].dst_nodes().to_vector(), blocks[l + 1].src_nodes);
  int64_t edges = 0;
  for (size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = blocks[l];
    // Rebuild the COO and check the compaction order against it.
    SampledEdges e;
    for (int64_t i = 0; i < b.num_edges(); ++i) {
      e.src.push_back(b.src_nodes[b.src[i]]);
      e.dst.push_back(b.src_nodes[b.dst[i]]);
      e.eid.push_back(b.eids[i]);
    }
    expect_compaction_order(b, e, b.dst_nodes().to_vector());
    std::map<int64_t, int64_t> per_dst;
    for (int64_t i = 0; i < b.num_edges(); ++i) {
      const int64_t u = e.src[i], v = e.dst[i];
      const auto* row = &g.indices[g.indptr[v]];
      EXPECT_TRUE(std::binary_search(row, row + g.degree(v), u));
      ++per_dst[b.dst[i]];
    }
    const int64_t fanout = so.fanouts[l];
    for (int64_t d = 0; d < b.num_dst; ++d)
      EXPECT_EQ(per_dst[d], std::min(fanout, g.degree(b.src_nodes[d])));
    edges += b.num_edges();
  }
  EXPECT_EQ(st.sampled_edges, edges);
  EXPECT_EQ(st.seeds, static_cast<int64_t>(seeds.size()));
  // The same batch sampled again (fresh workspace, no stats) is identical.
  const auto again = sampler.sample_blocks(seeds, make_rng_key(3, 0, 1, 0));
  for (size_t l = 0; l < blocks.size(); ++l) {
    EXPECT_EQ(again[l].src_nodes, blocks[l].src_nodes);
    EXPECT_EQ(again[l].src, blocks[l].src);
    EXPECT_EQ(again[l].eids, blocks[l].eids);
  }
}

// A workspace used by NeighborSampler compacts over a direct-mapped table (tags reused across
// calls, never cleared): many batches through one workspace, and through the graph's own pool
// (no workspace given), must equal the blocks by definition (to_block over hashing), and the
// same workspace must still handle IDs outside the table and report bad inputs.
TEST(ToBlock, DirectMappedWorkspaceMatchesHashing) {
  const Graph g = test::random_graph(3000, 6, 7);
  NeighborSamplerOptions so;
  so.fanouts = {4, 3, 2};
  NeighborSampler sampler(g, so);
  CompactWorkspace ws;
  for (int64_t b = 0; b < 40; ++b) {
    std::vector<int64_t> seeds;
    for (int64_t v = b % 7; v < g.num_nodes; v += 37 + b)
      seeds.push_back(v);
    const RngKey key = make_rng_key(5, 0, b, 0);
    const auto dense = sampler.sample_blocks(seeds, key, nullptr, &ws);
    const auto hashed = blocks_by_definition(g, so, seeds, key);
    expect_same_blocks(sampler.sample_blocks(seeds, key), hashed);
    ASSERT_EQ(dense.size(), hashed.size());
    for (size_t l = 0; l < dense.size(); ++l) {
      EXPECT_EQ(dense[l].num_dst, hashed[l].num_dst);
      EXPECT_EQ(dense[l].src_nodes, hashed[l].src_nodes);
      EXPECT_EQ(dense[l].src, hashed[l].src);
      EXPECT_EQ(dense[l].dst, hashed[l].dst);
      EXPECT_EQ(dense[l].eids, hashed[l].eids);
    }
  }
  // IDs beyond the graph: the same workspace falls back to hashing.
  SampledEdges e;
  e.src = {7, 1 << 20, 9, 7, 5};
  e.dst = {3, 3, 5, 5, 5};
  e.eid = {10, 11, 12, 13, 14};
  std::vector<int64_t> dst{5, 3};
  Block b = to_block(e, dst, &ws);
  EXPECT_EQ(b.src_nodes, (std::vector<int64_t>{5, 3, 7, 1 << 20, 9}));
  expect_compaction_order(b, e, dst);
  // Errors through the direct-mapped table, then a correct block from the same workspace.
  e.src = {1, 2};
  e.dst = {4, 4};
  e.eid = {0, 1};
  dst = {2, 3};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst, &ws), ValueError, "not a destination node");
  e.dst = {4, 2999};
  dst = {4};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst, &ws), ValueError, "not a destination node");
  dst = {4, 4};
  TESSERA_EXPECT_THROW_MSG(to_block(e, dst, &ws), ValueError, "listed twice");
  e.dst = {4, 4};
  dst = {4, 1};
  b = to_block(e, dst, &ws);
  EXPECT_EQ(b.src_nodes, (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(b.src, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.dst, (std::vector<int64_t>{0, 0}));
}

// Uniform hops are sampled straight into the block (one pass, compacted over the direct-mapped
// tags of the caller's workspace or the graph's pool): every option that path takes must give the
// blocks by definition (sampling then to_block over hashing), bit for bit, and the same stats.
TEST(NeighborSampler, OnePassBlocksMatchSampleThenCompact) {
  const Graph g = test::random_graph(4000, 9, 21);
  std::vector<int64_t> seeds;
  for (int64_t v = 5; v < g.num_nodes; v += 7)
    seeds.push_back(v);
  CompactWorkspace ws;  // shared by every case: tags from earlier blocks must not leak
  int64_t b = 0;
  for (const EdgeDir dir : {EdgeDir::kIn, EdgeDir::kOut})
    for (const bool replace : {false, true})
      for (const bool interleave : {false, true})
        for (const auto& fanouts : std::vector<std::vector<int64_t>>{
                 {4, 3, 2}, {15, 10, 5}, {0, 2}, {100, 1}, {9, 9, 9, 9}}) {
          NeighborSamplerOptions so;
          so.fanouts = fanouts;
          so.dir = dir;
          so.replace = replace;
          SamplingGraphOptions prep;
          prep.interleave = interleave;
          const SamplingGraph sg(g, prep);
          NeighborSampler sampler(sg, so);
          const RngKey key = make_rng_key(8, 1, b++, 0);
          SampleStats one, two;
          const auto fused = sampler.sample_blocks(seeds, key, nullptr, &ws, &one);
          const auto pooled = sampler.sample_blocks(seeds, key, nullptr, nullptr, &two);
          const auto plain = blocks_by_definition(g, so, seeds, key);
          SCOPED_TRACE(::testing::Message()
                       << "dir " << edge_dir_name(dir) << " replace " << replace << " interleave "
                       << interleave << " fanouts " << fanouts.size() << "x" << fanouts[0]);
          expect_same_blocks(fused, plain);
          expect_same_blocks(pooled, plain);
          EXPECT_EQ(one.sampled_edges, two.sampled_edges);
          // The one-pass path really ran for these options (and gives the same first hop).
          SampleOptions o;
          o.fanout = fanouts.back();
          o.replace = replace;
          o.dir = dir;
          o.key = key;
          o.num_threads = 1;  // as NeighborSamplerOptions' default
          Block direct;
          double share = -1;
          ASSERT_TRUE(ops::detail::sample_block_cpu(sg, seeds, o, ws.map(), direct, share));
          EXPECT_TRUE(share >= 0 && share <= 1) << share;
          expect_same_blocks({direct}, {plain.back()});
        }
  // Seed sets at the window, piece and chunk edges, with isolated nodes among them, and none at
  // all, on one thread and split over threads: a hop is split from two chunks (512 seeds) and
  // kThreadedMinEdges guessed edges on (fanout 2: 8192 seeds, on a graph of more edges), so the
  // piece edges are taken again above that.
  const int64_t split = ops::detail::kThreadedMinEdges / 2;
  ASSERT_EQ(split % ops::detail::kPiece, 0);
  const int64_t sparse_n = split + 16 * ops::detail::kPiece;  // 1.5 edges per node
  ASSERT_GE(sparse_n / 2 * 3, ops::detail::kThreadedMinEdges);
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t v = 0; v < sparse_n; v += 2) {  // odd nodes stay isolated
    for (int64_t u : {(v + 2) % sparse_n, (v + 6) % sparse_n, (v + 10) % sparse_n}) {
      edges.push_back({u, v});
    }
  }
  const Graph sparse = test::csc_of(sparse_n, edges);
  const int64_t piece = ops::detail::kPiece;
  for (const int threads : {1, 2, 3}) {
    NeighborSamplerOptions two_hops;
    two_hops.fanouts = {2, 2};
    two_hops.num_threads = threads;
    NeighborSampler sparse_sampler(sparse, two_hops);
    for (const int64_t count :
         {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, piece - 1, piece,
          piece + 1, 2 * piece - 1, 2 * piece, 2 * piece + 1, split - 1, split, split + 1,
          split + piece - 1, split + piece, split + piece + 1, sparse_n}) {
      std::vector<int64_t> some(static_cast<size_t>(count));
      std::iota(some.begin(), some.end(), 0);
      const RngKey key = make_rng_key(8, 3, b++, 0);
      SCOPED_TRACE(::testing::Message() << count << " seeds, " << threads << " threads");
      const auto want = blocks_by_definition(sparse, two_hops, some, key);
      expect_same_blocks(sparse_sampler.sample_blocks(some, key, nullptr, &ws), want);
      expect_same_blocks(sparse_sampler.sample_blocks(some, key), want);
      // The one-pass path itself ran (split over the threads from `split` seeds on).
      SampleOptions o;
      o.fanout = two_hops.fanouts.back();
      o.key = key;
      o.num_threads = threads;
      Block direct;
      double share = -1;
      ASSERT_TRUE(
          ops::detail::sample_block_cpu(SamplingGraph(sparse), some, o, ws.map(), direct, share));
      EXPECT_TRUE(share >= 0 && share <= 1) << share;
      expect_same_blocks({direct}, {want.back()});
    }
  }
  // All neighbors (-1), which the one-pass path leaves to the general one, and the one-pass
  // path with 2 to 4 threads (split over them for the hops of {15, 10, 5} after the first and
  // for {2, 40}; {5, 3}'s hops are below kThreadedMinEdges and run in the calling thread),
  // through the same workspace, in both directions, with and without replacement.
  for (const auto& [fanouts, threads] : std::vector<std::pair<std::vector<int64_t>, int>>{
           {{-1, 3}, 1}, {{5, 3}, 2}, {{15, 10, 5}, 2}, {{15, 10, 5}, 4}, {{2, 40}, 3}}) {
    for (const EdgeDir dir : {EdgeDir::kIn, EdgeDir::kOut}) {
      for (const bool replace : {false, true}) {
        NeighborSamplerOptions so;
        so.fanouts = fanouts;
        so.num_threads = threads;
        so.dir = dir;
        so.replace = replace;
        NeighborSampler sampler(g, so);
        const RngKey key = make_rng_key(8, 2, b++, 0);
        SCOPED_TRACE(::testing::Message()
                     << threads << " threads, " << edge_dir_name(dir) << ", replace " << replace);
        SampleStats one, two;
        const auto want = blocks_by_definition(g, so, seeds, key);
        expect_same_blocks(sampler.sample_blocks(seeds, key, nullptr, &ws, &one), want);
        expect_same_blocks(sampler.sample_blocks(seeds, key, nullptr, nullptr, &two), want);
        EXPECT_EQ(one.sampled_edges, two.sampled_edges);
      }
    }
  }
  // A seed listed twice is refused on this path too, and the workspace stays usable.
  NeighborSamplerOptions so;
  so.fanouts = {3, 3};
  NeighborSampler sampler(g, so);
  std::vector<int64_t> dup{3, 8, 3};
  TESSERA_EXPECT_THROW_MSG(sampler.sample_blocks(dup, RngKey{}, nullptr, &ws), ValueError,
                           "seed 3 is listed twice");
  expect_same_blocks(sampler.sample_blocks(seeds, RngKey{}, nullptr, &ws),
                     blocks_by_definition(g, so, seeds, RngKey{}));
}

// A graph whose neighbor IDs leave [0, num_nodes) is refused by name on the one-pass path (the
// direct-mapped table covers only the graph's nodes).
TEST(NeighborSampler, OnePassRefusesNeighborsOutsideTheGraph) {
  Graph g = test::star(4);  // node 0's in-neighbors are 1..4
  g.indices[2] = 9;
  NeighborSamplerOptions so;
  so.fanouts = {4};
  NeighborSampler sampler(g, so);
  CompactWorkspace ws;
  std::vector<int64_t> seeds{0};
  TESSERA_EXPECT_THROW_MSG(sampler.sample_blocks(seeds, RngKey{}, nullptr, &ws), IndexError,
                           "sampled neighbor 9 is outside [0, 5)");
  // The workspace stays usable after an error in the middle of compaction.
  g.indices[2] = 3;
  NeighborSampler fixed(g, so);
  expect_same_blocks(fixed.sample_blocks(seeds, RngKey{}, nullptr, &ws),
                     blocks_by_definition(g, so, seeds, RngKey{}));
  // Split over threads (enough edges for the hop to be split: one per node, fanout 1): the
  // calling thread compacts and refuses it, in a late piece, and the helpers are joined.
  const int64_t n = ops::detail::kThreadedMinEdges + 4 * ops::detail::kPiece;
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t v = 0; v < n; ++v) {
    edges.push_back({(v * 7 + 1) % n, v});
  }
  Graph wide = test::csc_of(n, edges);
  wide.indices[static_cast<size_t>(wide.indptr[n * 9 / 10])] = 5 * n;
  NeighborSamplerOptions threads;
  threads.fanouts = {1};
  threads.num_threads = 2;
  NeighborSampler split(wide, threads);
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  const std::string bad =
      "sampled neighbor " + std::to_string(5 * n) + " is outside [0, " + std::to_string(n) + ")";
  TESSERA_EXPECT_THROW_MSG(split.sample_blocks(all, RngKey{}, nullptr, &ws), IndexError, bad);
  TESSERA_EXPECT_THROW_MSG(split.sample_blocks(all, RngKey{}), IndexError, bad);
  // The workspace stays usable after the threaded error too.
  wide.indices[static_cast<size_t>(wide.indptr[n * 9 / 10])] = 3;
  NeighborSampler split_fixed(wide, threads);
  expect_same_blocks(split_fixed.sample_blocks(all, RngKey{}, nullptr, &ws),
                     blocks_by_definition(wide, threads, all, RngKey{}));
}

TEST(NeighborSampler, BadOptions) {
  const Graph g = test::star(4);
  NeighborSamplerOptions so;
  TESSERA_EXPECT_THROW_MSG(NeighborSampler(g, so), ValueError, "no fanouts");
  so.fanouts = {5, -3};
  TESSERA_EXPECT_THROW_MSG(NeighborSampler(g, so), ValueError, "fanout -3 of layer 1");
  so.fanouts = {5};
  std::vector<float> w(2, 1.0f);
  SamplingGraphOptions prep;
  prep.weights = w;
  TESSERA_EXPECT_THROW_MSG(NeighborSampler(g, so, prep), ValueError, "2 weights for a graph with");
  so.num_threads = -1;
  TESSERA_EXPECT_THROW_MSG(NeighborSampler(g, so), ValueError, "num_threads -1 < 0");
  so.num_threads = 1;
  NeighborSampler ok(g, so);
  std::vector<int64_t> dup{1, 1};
  TESSERA_EXPECT_THROW_MSG(ok.sample_blocks(dup, RngKey{}), ValueError, "listed twice");
}

TEST(InducedSubgraph, MatchesBruteForce) {
  const Graph g = test::random_graph(300, 5, 9);
  std::vector<int64_t> nodes;
  for (int64_t v = 299; v >= 0; v -= 3)
    nodes.push_back(v);
  for (int threads : {1, 4}) {
    const Subgraph sg = induced_subgraph(g, nodes, threads);
    EXPECT_EQ(sg.nodes, nodes);
    validate_graph(sg.graph, "induced");
    std::map<int64_t, int64_t> local;
    for (size_t i = 0; i < nodes.size(); ++i)
      local[nodes[i]] = static_cast<int64_t>(i);
    std::multiset<std::tuple<int64_t, int64_t, int64_t>> want, got;
    for (int64_t v = 0; v < g.num_nodes; ++v)
      for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
        if (local.count(v) && local.count(g.indices[k]))
          want.insert({local[g.indices[k]], local[v], g.eid(k)});
    for (int64_t v = 0; v < sg.graph.num_nodes; ++v)
      for (int64_t k = sg.graph.indptr[v]; k < sg.graph.indptr[v + 1]; ++k)
        got.insert({sg.graph.indices[k], v, sg.graph.eid(k)});
    EXPECT_EQ(got, want);
    EXPECT_GT(got.size(), 0u);
  }
  std::vector<int64_t> bad{1, 300};
  TESSERA_EXPECT_THROW_MSG(induced_subgraph(g, bad), IndexError, "node 300 at position 1");
  bad = {1, 1};
  TESSERA_EXPECT_THROW_MSG(induced_subgraph(g, bad), ValueError, "listed twice");
}

TEST(ClusterGcn, BatchesCoverEveryPartOncePerEpoch) {
  const Graph& g = test::real_dataset("cora").graph;
  const int64_t parts = 10;
  std::vector<int64_t> part(static_cast<size_t>(g.num_nodes));
  for (int64_t v = 0; v < g.num_nodes; ++v)
    part[v] = (v * 7) % parts;
  ClusterGcnSampler cs(g, part, 3, 42);
  EXPECT_EQ(cs.num_parts(), parts);
  EXPECT_EQ(cs.num_batches(), 4);
  std::vector<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> all;
    for (int64_t b = 0; b < cs.num_batches(); ++b) {
      const auto ps = cs.batch_parts(epoch, b);
      all.insert(all.end(), ps.begin(), ps.end());
      const Subgraph sg = cs.sample(epoch, b);
      std::set<int64_t> pset(ps.begin(), ps.end());
      int64_t want_nodes = 0;
      for (int64_t v = 0; v < g.num_nodes; ++v)
        want_nodes += pset.count(part[v]);
      EXPECT_EQ(static_cast<int64_t>(sg.nodes.size()), want_nodes);
      for (int64_t v : sg.nodes)
        EXPECT_TRUE(pset.count(part[v]));
    }
    std::vector<int64_t> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> want(parts);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(sorted, want);
    orders.push_back(all);
  }
  EXPECT_NE(orders[0], orders[1]);  // drawn at random per epoch
  ClusterGcnSampler again(g, part, 3, 42);
  EXPECT_EQ(again.batch_parts(1, 2), cs.batch_parts(1, 2));
  part[5] = -1;
  TESSERA_EXPECT_THROW_MSG(ClusterGcnSampler(g, part, 3, 1), IndexError, "node 5 has part -1");
  part[5] = 12;  // parts 10 and 11 empty
  TESSERA_EXPECT_THROW_MSG(ClusterGcnSampler(g, part, 3, 1), ValueError, "part 10 has no nodes");
  // A part ID of n or more leaves a part empty; at INT64_MAX, part + 1 overflowed and the
  // table was written out of bounds.
  part[5] = std::numeric_limits<int64_t>::max();
  TESSERA_EXPECT_THROW_MSG(ClusterGcnSampler(g, part, 3, 1), IndexError,
                           "node 5 has part 9223372036854775807 outside");
  part[5] = 5 % parts;
  ClusterGcnSampler huge(g, part, std::numeric_limits<int64_t>::max(), 1);
  EXPECT_EQ(huge.num_batches(), 1);  // one batch of every part, not an overflow
  EXPECT_EQ(static_cast<int64_t>(huge.batch_parts(0, 0).size()), parts);
}

TEST(ClusterGcn, RankKeysThePartOrder) {
  const Graph& g = test::real_dataset("cora").graph;
  std::vector<int64_t> part(static_cast<size_t>(g.num_nodes));
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    part[v] = v % 20;
  }
  ClusterGcnSampler r0(g, part, 2, 7), r0b(g, part, 2, 7, 0), r1(g, part, 2, 7, 1);
  std::vector<int64_t> o0, o0b, o1;
  for (int64_t b = 0; b < r0.num_batches(); ++b) {
    const auto p0 = r0.batch_parts(3, b), p0b = r0b.batch_parts(3, b), p1 = r1.batch_parts(3, b);
    o0.insert(o0.end(), p0.begin(), p0.end());
    o0b.insert(o0b.end(), p0b.begin(), p0b.end());
    o1.insert(o1.end(), p1.begin(), p1.end());
  }
  EXPECT_EQ(o0, o0b);  // rank 0 is the single trainer's order
  EXPECT_NE(o0, o1);
  std::sort(o1.begin(), o1.end());
  std::vector<int64_t> want(20);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(o1, want);  // still every part once
  TESSERA_EXPECT_THROW_MSG(ClusterGcnSampler(g, part, 2, 7, -1), ValueError, "rank -1 outside");
}

TEST(ClusterGcn, RandomClusteringIsBalancedAndKeyed) {
  const int64_t n = 1003, k = 10;
  const auto a = random_clustering(n, k, 5, 2, 0);
  ASSERT_EQ(static_cast<int64_t>(a.size()), n);
  std::vector<int64_t> sizes(k, 0);
  for (int64_t p : a) {
    ASSERT_GE(p, 0);
    ASSERT_LT(p, k);
    ++sizes[p];
  }
  for (int64_t s : sizes) {
    EXPECT_TRUE(s == n / k || s == n / k + 1) << s;
  }
  EXPECT_EQ(a, random_clustering(n, k, 5, 2, 0));  // a function of its key
  EXPECT_NE(a, random_clustering(n, k, 5, 3, 0));  // epoch
  EXPECT_NE(a, random_clustering(n, k, 5, 2, 1));  // rank
  EXPECT_NE(a, random_clustering(n, k, 6, 2, 0));  // seed
  TESSERA_EXPECT_THROW_MSG(random_clustering(n, 0, 5, 2, 0), ValueError, "num_parts 0 outside");
  TESSERA_EXPECT_THROW_MSG(random_clustering(n, n + 1, 5, 2, 0), ValueError, "num_parts 1004");
  TESSERA_EXPECT_THROW_MSG(random_clustering(n, k, 5, 2, -3), ValueError, "rank -3 outside");
}

TEST(Negatives, UniformAndKeyedByEdge) {
  std::vector<int64_t> src{1, 2, 3}, eid{10, 20, 30};
  std::vector<int64_t> ns, nd;
  const RngKey key = make_rng_key(1, 0, 0, 0);
  uniform_negatives(1000, src, eid, 4, key, ns, nd);
  ASSERT_EQ(ns.size(), 12u);
  EXPECT_EQ(ns[0], 1);
  EXPECT_EQ(ns[11], 3);
  // Edge 20 alone gets the same negatives as in the batch.
  std::vector<int64_t> s1{2}, e1{20}, ns1, nd1;
  uniform_negatives(1000, s1, e1, 4, key, ns1, nd1);
  EXPECT_EQ(nd1, std::vector<int64_t>(nd.begin() + 4, nd.begin() + 8));
  // Chi-square of the destinations over 20 bins.
  std::vector<int64_t> many_src(5000, 0), many_eid(5000);
  std::iota(many_eid.begin(), many_eid.end(), 0);
  uniform_negatives(20, many_src, many_eid, 4, key, ns, nd);
  std::vector<double> c(20, 0), e(20, 1000.0);
  for (int64_t d : nd)
    c[static_cast<size_t>(d)] += 1;
  EXPECT_LT(test::chi_square(c, e), test::chi_square_critical_999(19));
}

}  // namespace
}  // namespace tessera::ops
