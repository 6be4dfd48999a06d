// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "../../../host/ops/src/philox_batch.hpp"  // private: the SIMD level of the ops library
#include "helpers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampler.hpp"

namespace tessera::ops {
namespace {

using test::chi_square;
using test::chi_square_critical_999;

RngKey key_of(uint32_t seed, uint32_t epoch, uint32_t batch, uint32_t layer = 0) {
  RngKey k;
  k.seed = seed;
  k.epoch = epoch;
  k.batch = batch;
  k.layer = layer;
  return k;
}

// Per seed node: its sampled (src, eid) list, for order-independent comparison.
std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_dst(const SampledEdges& e) {
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> m;
  for (int64_t i = 0; i < e.size(); ++i)
    m[e.dst[i]].push_back({e.src[i], e.eid[i]});
  return m;
}

void expect_same(const SampledEdges& a, const SampledEdges& b) {
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_EQ(a.eid, b.eid);
}

// Every sampled edge is a real edge of g: eid k's stored position has the right endpoints.
void expect_real_edges(const Graph& g, const SampledEdges& e) {
  std::map<int64_t, std::pair<int64_t, int64_t>> ends;
  for (int64_t v = 0; v < g.num_nodes; ++v)
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
      ends[g.eid(k)] = {g.indices[k], v};
  for (int64_t i = 0; i < e.size(); ++i) {
    auto it = ends.find(e.eid[i]);
    ASSERT_NE(it, ends.end()) << "edge ID " << e.eid[i];
    EXPECT_EQ(it->second.first, e.src[i]);
    EXPECT_EQ(it->second.second, e.dst[i]);
  }
}

std::vector<int64_t> all_nodes(const Graph& g) {
  std::vector<int64_t> v(static_cast<size_t>(g.num_nodes));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(SampleNeighbors, WithoutReplacementOnCoraKeepsInvariants) {
  const Graph& g = test::real_dataset("cora").graph;
  const auto seeds = all_nodes(g);
  for (int64_t fanout : {1, 5, 10}) {
    SampleOptions o;
    o.fanout = fanout;
    o.key = key_of(7, 1, 2);
    const auto e = sample_neighbors(g, seeds, o);
    expect_real_edges(g, e);
    auto m = by_dst(e);
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      auto& got = m[v];
      EXPECT_EQ(static_cast<int64_t>(got.size()), std::min(g.degree(v), fanout)) << "node " << v;
      std::set<int64_t> eids;
      for (auto& p : got)
        eids.insert(p.second);
      EXPECT_EQ(eids.size(), got.size()) << "repeated neighbor of node " << v;
      if (g.degree(v) <= fanout) {
        // Degree <= fanout keeps all, in storage order.
        for (int64_t k = g.indptr[v], i = 0; k < g.indptr[v + 1]; ++k, ++i)
          EXPECT_EQ(got[i].second, g.eid(k));
      }
    }
  }
}

TEST(SampleNeighbors, AllAndZeroFanout) {
  const Graph& g = test::real_dataset("cora").graph;
  const auto seeds = all_nodes(g);
  SampleOptions o;
  o.fanout = -1;
  auto e = sample_neighbors(g, seeds, o);
  EXPECT_EQ(e.size(), g.num_edges());
  for (bool replace : {false, true}) {
    o.replace = replace;
    o.fanout = -1;
    EXPECT_EQ(sample_neighbors(g, seeds, o).size(), g.num_edges());
    o.fanout = 0;
    EXPECT_EQ(sample_neighbors(g, seeds, o).size(), 0);
  }
  // A fanout far above every degree keeps all neighbors (and allocates nothing for it).
  o.replace = false;
  o.fanout = int64_t{1} << 40;
  EXPECT_EQ(sample_neighbors(g, seeds, o).size(), g.num_edges());
  SampleOptions none;
  none.fanout = 3;
  EXPECT_EQ(sample_neighbors(g, Span<const int64_t>(), none).size(), 0);
}

TEST(SampleNeighbors, WithReplacementDrawsExactlyFanout) {
  const Graph& g = test::real_dataset("cora").graph;
  const auto seeds = all_nodes(g);
  SampleOptions o;
  o.fanout = 7;
  o.replace = true;
  o.key = key_of(3, 0, 0);
  const auto e = sample_neighbors(g, seeds, o);
  expect_real_edges(g, e);
  auto m = by_dst(e);
  int64_t repeats = 0;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    EXPECT_EQ(static_cast<int64_t>(m[v].size()), g.degree(v) == 0 ? 0 : 7) << "node " << v;
    std::set<int64_t> s;
    for (auto& p : m[v])
      s.insert(p.second);
    repeats += static_cast<int64_t>(m[v].size() - s.size());
  }
  EXPECT_GT(repeats, 0) << "with replacement should repeat neighbors of low-degree nodes";
}

// Inclusion counts of each neighbor of node 0 over many keys.
std::vector<double> inclusion_counts(const SamplingGraph& sg, const SampleOptions& base,
                                     int trials) {
  const Graph& g = sg.graph();
  std::vector<double> counts(static_cast<size_t>(g.degree(0)), 0);
  const int64_t seed = 0;
  std::map<int64_t, int64_t> pos_of_eid;
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    pos_of_eid[g.eid(k)] = k - g.indptr[0];
  for (int t = 0; t < trials; ++t) {
    SampleOptions o = base;
    o.key = key_of(11, static_cast<uint32_t>(t % 7), static_cast<uint32_t>(t));
    const auto e = sample_neighbors(sg, Span<const int64_t>(&seed, 1), o);
    for (int64_t i = 0; i < e.size(); ++i)
      counts[static_cast<size_t>(pos_of_eid.at(e.eid[i]))] += 1;
  }
  return counts;
}

TEST(SampleNeighbors, UniformWithoutReplacementIsUniform) {
  for (int64_t d : {20, 200}) {
    for (int64_t fanout : {int64_t{5}, d / 2 + 1}) {  // d/2+1 > 64 exercises the bitmap path
      const Graph g = test::star(d);
      const SamplingGraph sg(g);
      SampleOptions o;
      o.fanout = fanout;
      const int trials = 4000;
      const auto c = inclusion_counts(sg, o, trials);
      double total = std::accumulate(c.begin(), c.end(), 0.0);
      EXPECT_EQ(total, static_cast<double>(trials * fanout));
      std::vector<double> expected(c.size(), static_cast<double>(trials) * fanout / d);
      const double chi = chi_square(c, expected);
      EXPECT_LT(chi, chi_square_critical_999(static_cast<double>(d - 1)))
          << "d=" << d << " fanout=" << fanout;
    }
  }
}

TEST(SampleNeighbors, UniformWithReplacementIsUniform) {
  const Graph g = test::star(30);
  const SamplingGraph sg(g);
  SampleOptions o;
  o.fanout = 10;
  o.replace = true;
  const int trials = 3000;
  const auto c = inclusion_counts(sg, o, trials);
  std::vector<double> expected(c.size(), trials * 10.0 / 30);
  EXPECT_LT(chi_square(c, expected), chi_square_critical_999(29));
}

std::vector<float> star_weights(const Graph& g) {
  // Weight of in-edge i -> 0 is (i mod 5) (so some are 0), other edges 1.
  std::vector<float> w(static_cast<size_t>(g.num_edges()), 1.0f);
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    w[k] = static_cast<float>(g.indices[k] % 5);
  return w;
}

TEST(SampleNeighbors, WeightedWithReplacementFollowsWeights) {
  const Graph g = test::star(40);
  const auto w = star_weights(g);
  SampleOptions o;
  o.fanout = 8;
  o.replace = true;
  const SamplingGraph sg = SamplingGraph::as_stored(g, w);
  const int trials = 3000;
  const auto c = inclusion_counts(sg, o, trials);
  double wsum = 0;
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    wsum += w[k];
  std::vector<double> expected;
  int df = -1;
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k) {
    expected.push_back(trials * 8.0 * w[k] / wsum);
    if (w[k] == 0) {
      EXPECT_EQ(c[k - g.indptr[0]], 0) << "zero weight drawn";
    } else {
      ++df;
    }
  }
  EXPECT_LT(chi_square(c, expected), chi_square_critical_999(df));
}

TEST(SampleNeighbors, WeightedWithoutReplacementFollowsWeights) {
  const Graph g = test::star(40);
  const auto w = star_weights(g);
  // Fanout 1: inclusion is exactly proportional to weight.
  SampleOptions o;
  o.fanout = 1;
  const SamplingGraph sg = SamplingGraph::as_stored(g, w);
  const int trials = 6000;
  const auto c = inclusion_counts(sg, o, trials);
  double wsum = 0;
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    wsum += w[k];
  std::vector<double> expected;
  int df = -1;
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k) {
    expected.push_back(trials * w[k] / wsum);
    df += w[k] > 0;
  }
  EXPECT_LT(chi_square(c, expected), chi_square_critical_999(df));
  // Fanout 6: no repeats, zero weights never drawn, heavier neighbors drawn more often.
  o.fanout = 6;
  const auto c6 = inclusion_counts(sg, o, 2000);
  std::vector<double> by_weight(5, 0);
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    by_weight[static_cast<size_t>(w[k])] += c6[k - g.indptr[0]];
  EXPECT_EQ(by_weight[0], 0);
  for (int i = 1; i < 4; ++i)
    EXPECT_LT(by_weight[i], by_weight[i + 1]);
  EXPECT_EQ(std::accumulate(c6.begin(), c6.end(), 0.0), 2000.0 * 6);
  // Fewer positive-weight neighbors than the fanout: all of them, once each.
  o.fanout = 35;
  const auto c35 = inclusion_counts(sg, o, 3);
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    EXPECT_EQ(c35[k - g.indptr[0]], w[k] > 0 ? 3 : 0);
}

TEST(SampleNeighbors, WeightedWithoutReplacementOnConcentratedWeights) {
  // Two neighbors hold almost all the weight: redraws keep hitting them, so the exact
  // remaining-weight step must finish the sample (no repeats, exactly fanout, heavy ones in).
  const Graph g = test::star(50);
  std::vector<float> w(static_cast<size_t>(g.num_edges()), 1.0f);
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    w[k] = g.indices[k] <= 2 ? 1e7f : 1.0f;
  SampleOptions o;
  o.fanout = 6;
  const SamplingGraph sg = SamplingGraph::as_stored(g, w);
  const auto c = inclusion_counts(sg, o, 2000);
  EXPECT_EQ(c[0], 2000);
  EXPECT_EQ(c[1], 2000);
  EXPECT_EQ(std::accumulate(c.begin(), c.end(), 0.0), 2000.0 * 6);
  // The other 48 share the remaining 4 places uniformly.
  std::vector<double> rest(c.begin() + 2, c.end()), expected(48, 2000.0 * 4 / 48);
  EXPECT_LT(chi_square(rest, expected), chi_square_critical_999(47));
  for (double x : c)
    EXPECT_LE(x, 2000);
}

TEST(SampleNeighbors, WeightedWithoutReplacementBesideAWeightThatSwampsTheSums) {
  // Node 0's first neighbor weighs 1e16 and the others 1 (one of them 0): the small weights
  // vanish in the double prefix sums, so once the heavy neighbor is taken no draw can find
  // them. The step takes the first remaining neighbor of positive weight in row order (it used
  // to emit position -1: an edge of another row, or one before the array).
  for (int64_t fan : {2, 65}) {
    const int64_t d = fan + 4;
    std::vector<std::pair<int64_t, int64_t>> e;
    for (int64_t i = 1; i <= d; ++i)
      e.push_back({i, 0});
    e.push_back({1, 2});  // another row after node 0's
    const Graph g = test::csc_of(d + 1, e);
    const int64_t b = g.indptr[0];
    std::vector<float> w(static_cast<size_t>(g.num_edges()), 1.0f);
    w[b] = 1e16f;     // heavy
    w[b + 1] = 0.0f;  // never taken
    for (bool exclude : {false, true}) {
      SampleOptions o;
      o.fanout = fan;
      const std::vector<int64_t> ex_rows{0}, ex_eids{g.eid(b + 2)};
      ExcludeEdges ex(ex_rows, ex_eids);
      if (exclude) o.exclude = &ex;
      const std::vector<int64_t> seeds{0};
      const auto s = sample_neighbors(SamplingGraph::as_stored(g, w), seeds, o);
      ASSERT_EQ(s.size(), fan);
      std::set<int64_t> got;
      for (int64_t i = 0; i < s.size(); ++i) {
        ASSERT_EQ(s.dst[i], 0);
        ASSERT_GE(s.eid[i], 0);
        const int64_t k =
            std::find(g.indices.begin() + b, g.indices.begin() + g.indptr[1], s.src[i]) -
            g.indices.begin();
        ASSERT_LT(k, g.indptr[1]) << "not a neighbor of 0: " << s.src[i];
        EXPECT_EQ(s.eid[i], g.eid(k));
        got.insert(k - b);
      }
      // The heavy one, then the first positive ones in row order (skipping 1, and 2 if excluded).
      std::set<int64_t> want{0};
      for (int64_t p = 2; static_cast<int64_t>(want.size()) < fan; ++p)
        if (!(exclude && p == 2)) want.insert(p);
      EXPECT_EQ(got, want) << "fanout " << fan << (exclude ? ", with an exclusion" : "");
    }
  }
}

TEST(SampleNeighbors, SameResultForAnyThreadCount) {
  const Graph& g = test::real_dataset("tolokers").graph;
  const auto seeds = all_nodes(g);
  const auto w = weights_in_storage_order(g, std::vector<float>{0.5f, 1.0f, 2.0f, 0.0f, 3.0f});
  for (int mode = 0; mode < 4; ++mode) {
    SampleOptions o;
    o.fanout = 10;
    o.replace = mode & 1;
    const SamplingGraph sg =
        SamplingGraph::as_stored(g, mode & 2 ? Span<const float>(w) : Span<const float>());
    o.key = key_of(5, 2, 9, 1);
    o.num_threads = 1;
    const auto one = sample_neighbors(sg, seeds, o);
    for (int t : {2, 3, 8}) {
      o.num_threads = t;
      expect_same(one, sample_neighbors(sg, seeds, o));
    }
  }
}

// `g` prepared with the packed adjacency and with the 16-byte pairs.
std::pair<SamplingGraph, SamplingGraph> prepared_layouts(const Graph& g) {
  SamplingGraphOptions po;
  po.packed = false;
  return {SamplingGraph(g), SamplingGraph(g, po)};
}

// `want` is what every code path gives for `o`: `g` prepared with its packed adjacency and with
// the 16-byte pairs (prepared_layouts), the per-row path (taken when an exclusion set is present;
// `ex` must touch no seed's row) and 3 threads.
void expect_every_path(const SampledEdges& want, const Graph& g, const std::vector<int64_t>& seeds,
                       const SampleOptions& o, const ExcludeEdges& ex, const SamplingGraph& packed,
                       const SamplingGraph& pairs) {
  ASSERT_EQ(packed.adjacency_copy_bytes_per_edge(), 8);
  ASSERT_EQ(pairs.adjacency_copy_bytes_per_edge(), 16);
  expect_same(want, sample_neighbors(packed, seeds, o));
  expect_same(want, sample_neighbors(pairs, seeds, o));
  SampleOptions r = o;
  r.exclude = &ex;
  expect_same(want, sample_neighbors(g, seeds, r));
  expect_same(want, sample_neighbors(packed, seeds, r));
  SampleOptions t = o;
  t.num_threads = 3;
  expect_same(want, sample_neighbors(g, seeds, t));
  expect_same(want, sample_neighbors(packed, seeds, t));
}

TEST(SampleNeighbors, EveryCodePathGivesTheSameSample) {
  // The pipelined uniform path, the interleaved-adjacency path and the per-row path (taken when
  // an exclusion set is present, here one that touches no sampled row) agree exactly.
  const Graph& g = test::real_dataset("tolokers").graph;
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < g.num_nodes - 1; v += 2)
    seeds.push_back(v);
  const auto pairs = interleave_adjacency(g);
  ASSERT_EQ(static_cast<int64_t>(pairs.size()), 2 * g.num_edges());
  ASSERT_TRUE(can_pack_adjacency(g));
  const auto packed = pack_adjacency(g);
  ASSERT_EQ(static_cast<int64_t>(packed.size()), g.num_edges());
  const auto layouts = prepared_layouts(g);
  const int64_t odd = 1;  // an odd row: never a seed
  const std::vector<int64_t> rows{odd}, eids{g.eid(g.indptr[odd])};
  ExcludeEdges ex(rows, eids);
  for (bool replace : {false, true}) {
    for (int64_t fanout : {3, 10, 100, -1}) {
      SampleOptions o;
      o.fanout = fanout;
      o.replace = replace;
      o.key = key_of(8, 1, 4, 2);
      expect_every_path(sample_neighbors(g, seeds, o), g, seeds, o, ex, layouts.first,
                        layouts.second);
    }
  }
}

// Rows over the vectors given (which outlive the arrays), each keyed by keys[row].
GraphArrays borrowed(const std::vector<int64_t>& indptr, const std::vector<int64_t>& indices,
                     const std::vector<int64_t>& keys) {
  GraphArrays a;
  a.num_nodes = static_cast<int64_t>(indptr.size()) - 1;
  a.num_edges = static_cast<int64_t>(indices.size());
  a.indptr = indptr.data();
  a.indices = indices.data();
  a.row_keys = keys.data();
  return a;
}

// Some nodes' rows under row numbers of their own (as a DistGraph samples its partition files in
// place): a row keyed by its node samples exactly what the whole graph samples for that node, in
// every mode, prepared or as stored; the edges carry the row numbers.
TEST(SamplingGraphArrays, RowKeysSampleRowsAsTheWholeGraphSamplesTheirNodes) {
  const Graph& g = test::real_dataset("tolokers").graph;
  std::vector<int64_t> keys;  // every third node, last first
  for (int64_t v = g.num_nodes - 1; v >= 0; v -= 3) {
    keys.push_back(v);
  }
  const auto rows_n = static_cast<int64_t>(keys.size());
  std::vector<int64_t> indptr{0}, indices, eids;
  for (int64_t v : keys) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      indices.push_back(g.indices[k]);
      eids.push_back(g.eid(k));
    }
    indptr.push_back(static_cast<int64_t>(indices.size()));
  }
  GraphArrays a = borrowed(indptr, indices, keys);
  a.eids = eids.data();
  std::vector<int64_t> rows(static_cast<size_t>(rows_n));
  std::iota(rows.begin(), rows.end(), 0);
  const auto by_eid = std::vector<float>{0.5f, 1.0f, 2.0f, 0.0f, 3.0f};
  const auto w_whole = weights_in_storage_order(g, by_eid);
  const auto w_rows = weights_in_storage_order(a, by_eid);
  for (int mode = 0; mode < 8; ++mode) {
    const bool replace = mode & 1, weighted = mode & 2, prepared = mode & 4;
    SamplingGraphOptions po = prepared ? SamplingGraphOptions{} : SamplingGraphOptions::as_stored();
    po.weights = weighted ? Span<const float>(w_rows) : Span<const float>();
    const SamplingGraph sg(a, po);
    EXPECT_EQ(sg.num_nodes(), rows_n);
    EXPECT_EQ(sg.adjacency_copy_bytes_per_edge(), prepared ? 8 : 0);
    SampleOptions o;
    o.fanout = 4;
    o.replace = replace;
    o.key = key_of(3, 1, 7, 2);
    const SampledEdges want = sample_neighbors(
        SamplingGraph::as_stored(g, weighted ? Span<const float>(w_whole) : Span<const float>()),
        keys, o);
    for (int threads : {1, 3}) {
      o.num_threads = threads;
      const SampledEdges got = sample_neighbors(sg, rows, o);
      ASSERT_GT(got.size(), 0);
      EXPECT_EQ(got.src, want.src) << "mode " << mode;
      EXPECT_EQ(got.eid, want.eid) << "mode " << mode;
      ASSERT_EQ(got.dst.size(), want.dst.size());
      for (size_t i = 0; i < got.dst.size(); ++i) {
        ASSERT_EQ(keys[got.dst[i]], want.dst[i]) << "edge " << i << ", mode " << mode;
      }
    }
  }
}

// Borrowed rows whose neighbor IDs do not fit in 32 bits (their rows are few): prepared, they
// keep the 16-byte pairs, never a packed copy that would cut the IDs.
TEST(SamplingGraphArrays, WideNeighborIdsAreNotPacked) {
  const std::vector<int64_t> indptr{0, 2, 3}, indices{int64_t{1} << 33, 5, (int64_t{1} << 32) + 7};
  const std::vector<int64_t> keys{11, 12};
  const GraphArrays a = borrowed(indptr, indices, keys);
  EXPECT_FALSE(can_pack_adjacency(a));
  EXPECT_TRUE(try_pack_adjacency(a).empty());
  const SamplingGraph prepared(a, SamplingGraphOptions{});
  EXPECT_EQ(prepared.adjacency_copy_bytes_per_edge(), 16);
  SampleOptions o;  // all neighbors
  const std::vector<int64_t> rows{0, 1};
  const SampledEdges got = sample_neighbors(prepared, rows, o);
  EXPECT_EQ(got.src, indices);
  expect_same(got, sample_neighbors(SamplingGraph(a, SamplingGraphOptions::as_stored()), rows, o));
}

TEST(SamplingGraphArrays, BadArraysAndUsesAreClearErrors) {
  const std::vector<int64_t> indptr{0, 1, 2}, indices{1, 0}, keys{5, 7};
  const GraphArrays a = borrowed(indptr, indices, keys);
  const SamplingGraph sg(a, SamplingGraphOptions::as_stored());
  TESSERA_EXPECT_THROW_MSG(sg.graph(), ValueError, "borrowed arrays, it has no Graph");
  TESSERA_EXPECT_THROW_MSG(NeighborSampler(sg, NeighborSamplerOptions{{2}}), ValueError,
                           "built over borrowed arrays");
  SamplingGraphOptions gpu = SamplingGraphOptions::as_stored();
  gpu.device = Device::kCuda;
  TESSERA_EXPECT_THROW_MSG(SamplingGraph(a, gpu), ValueError, "sampled on the CPU");
  GraphArrays short_edges = a;
  short_edges.num_edges = 3;
  TESSERA_EXPECT_THROW_MSG(SamplingGraph(short_edges, SamplingGraphOptions::as_stored()),
                           ValueError, "expected 0 to 3 edges");
  const std::vector<int64_t> huge{5, int64_t{1} << 48};
  GraphArrays bad_key = a;
  bad_key.row_keys = huge.data();
  TESSERA_EXPECT_THROW_MSG(SamplingGraph(bad_key, SamplingGraphOptions::as_stored()), ValueError,
                           "row 1's key 281474976710656 is outside the 2^48");
  SampleOptions o;
  o.fanout = 1;
  TESSERA_EXPECT_THROW_MSG(sample_neighbors(sg, std::vector<int64_t>{2}, o), IndexError,
                           "seed node 2 at position 0 outside [0, 2)");
}

// The packed copy holds 32-bit IDs: a graph whose edge IDs do not fit is refused by name (the
// sampler then keeps the 16-byte pairs), and one that fits packs exactly.
TEST(SampleNeighbors, PackedAdjacencyNeedsThirtyTwoBitIds) {
  Graph g = test::random_graph(50, 4, 1);
  const auto packed = pack_adjacency(g);
  for (int64_t k = 0; k < g.num_edges(); ++k) {
    ASSERT_EQ(static_cast<int64_t>(packed[k] & 0xFFFFFFFFu), g.indices[k]);
    ASSERT_EQ(static_cast<int64_t>(packed[k] >> 32), g.eid(k));
  }
  g.eids.resize(static_cast<size_t>(g.num_edges()));
  for (int64_t k = 0; k < g.num_edges(); ++k)
    g.eids[k] = k;
  g.eids.back() = int64_t{1} << 32;
  EXPECT_FALSE(can_pack_adjacency(g));
  TESSERA_EXPECT_THROW_MSG(pack_adjacency(g), ValueError, "does not fit in 32 bits");
  EXPECT_EQ(SamplingGraph(g).adjacency_copy_bytes_per_edge(), 16);
  g.eids.back() = (int64_t{1} << 32) - 1;
  EXPECT_TRUE(can_pack_adjacency(g));
  EXPECT_EQ(SamplingGraph(g).adjacency_copy_bytes_per_edge(), 8);
}

// The documented contract (docs/sampling.md), written out one draw at a time: every code path
// (pipelined, interleaved adjacency, per row) must give exactly these edges, bit for bit, at
// every SIMD level the CPU has (the AVX-512 Floyd holds 8, 16, 32 or 64 picks in registers, or 16
// in 32-bit lanes).
void expect_documented_draws(const Graph& g) {
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < g.num_nodes; v += 3)
    seeds.push_back(v);
  const std::vector<int64_t> rows{1}, eids{g.eid(g.indptr[1])};  // row 1 is never a seed
  const auto layouts = prepared_layouts(g);
  ExcludeEdges ex(rows, eids);
  const int native = ops::detail::philox_simd_level();
  for (int level = 0; level <= native; ++level) {
    ops::detail::philox_simd_level() = level;
    for (bool replace : {false, true}) {
      for (int64_t fanout : {1, 5, 8, 9, 15, 16, 17, 32, 33, 64, 65, 100}) {
        SampleOptions o;
        o.fanout = fanout;
        o.replace = replace;
        o.key = key_of(11, 2, 9, 1);
        SampledEdges want;
        for (int64_t v : seeds) {
          const int64_t b = g.indptr[v], d = g.degree(v);
          std::vector<int64_t> pos;
          auto draw = [&](int64_t t) {
            return philox_u64(
                philox_draw(o.key, static_cast<uint64_t>(v), static_cast<uint32_t>(t)));
          };
          if (d == 0) continue;
          if (replace) {
            for (int64_t t = 0; t < fanout; ++t)
              pos.push_back(static_cast<int64_t>(bounded_u64(draw(t), static_cast<uint64_t>(d))));
          } else if (d <= fanout) {
            for (int64_t i = 0; i < d; ++i)
              pos.push_back(i);
          } else {
            std::set<int64_t> taken;
            for (int64_t t = 0; t < fanout; ++t) {
              const int64_t j = d - fanout + t;
              int64_t r = static_cast<int64_t>(bounded_u64(draw(t), static_cast<uint64_t>(j + 1)));
              if (taken.count(r)) r = j;
              taken.insert(r);
            }
            pos.assign(taken.begin(), taken.end());
          }
          for (int64_t i : pos) {
            want.src.push_back(g.indices[b + i]);
            want.dst.push_back(v);
            want.eid.push_back(g.eid(b + i));
          }
        }
        expect_same(want, sample_neighbors(g, seeds, o));
        expect_every_path(want, g, seeds, o, ex, layouts.first, layouts.second);
      }
    }
  }
  ops::detail::philox_simd_level() = native;
}

// Two graphs: degrees well above the fanouts, and degrees close to them (draws often repeat
// and land in the last k positions, the AVX-512 Floyd's slow path).
TEST(SampleNeighbors, MatchesTheDocumentedDrawsExactly) {
  // With AVX-512, fanouts <= 16 also run once without conflict detection (the 64-bit form).
  const bool conflict = ops::detail::floyd_conflict_detection();
  for (const bool cd : {conflict, false}) {
    ops::detail::floyd_conflict_detection() = cd;
    for (const int64_t degree : {40, 12})
      expect_documented_draws(test::random_graph(5000, degree, 3));
    if (!conflict) break;
  }
  ops::detail::floyd_conflict_detection() = conflict;
}

// Cached per-row prefix sums (weight_prefix) give exactly the sample of re-adding the weights,
// with and without replacement, with zero weights, concentrated weights and every fanout path.
TEST(SamplingWeight, Float32OrRefusedWithTheReason) {
  auto where = [] { return std::string("w of edge 3"); };
  EXPECT_EQ(sampling_weight(0.0, where), 0.0f);
  EXPECT_EQ(sampling_weight(1.5, where), 1.5f);
  EXPECT_EQ(sampling_weight(std::numeric_limits<float>::min(), where),
            std::numeric_limits<float>::min());
  TESSERA_EXPECT_THROW_MSG(sampling_weight(-1.0, where), ValueError,
                           "w of edge 3 is negative or not finite");
  TESSERA_EXPECT_THROW_MSG(sampling_weight(std::nan(""), where), ValueError,
                           "is negative or not finite");
  TESSERA_EXPECT_THROW_MSG(sampling_weight(1e300, where), ValueError, "overflows float32");
  // Positive but zero or subnormal in float32: drawn as zero or without precision.
  TESSERA_EXPECT_THROW_MSG(sampling_weight(1e-50, where), ValueError,
                           "w of edge 3 is below float32's smallest normal number");
  TESSERA_EXPECT_THROW_MSG(sampling_weight(1e-40, where), ValueError, "rescale the weights");
  // A subnormal float32 given as such is its exact value.
  const float sub = 1e-39f;
  EXPECT_EQ(sampling_weight(static_cast<double>(sub), where), sub);
}

TEST(SampleNeighbors, WeightPrefixGivesTheSameWeightedSample) {
  const Graph g = test::random_graph(4000, 30, 5);
  std::vector<float> w(static_cast<size_t>(g.num_edges()));
  for (int64_t k = 0; k < g.num_edges(); ++k) {
    const uint64_t h = philox_u64(philox_draw(RngKey{}, static_cast<uint64_t>(k), 0));
    w[k] = h % 7 == 0 ? 0.0f : h % 11 == 0 ? 1000.0f : static_cast<float>(0.1 + uniform01(h));
  }
  // A row with a single positive weight at its start, one with all zeros.
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    w[k] = k == g.indptr[0] ? 1.0f : 0.0f;
  for (int64_t k = g.indptr[3]; k < g.indptr[4]; ++k)
    w[k] = 0.0f;
  const auto prefix = weight_prefix_sums(g, w);
  ASSERT_EQ(static_cast<int64_t>(prefix.size()), g.num_edges());
  SamplingGraphOptions prep;  // the prefix sums alone (the rows read as stored)
  prep.weights = w;
  prep.interleave = false;
  const SamplingGraph cached(g, prep);
  ASSERT_EQ(cached.weight_prefix().to_vector(), prefix);
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < g.num_nodes; v += 2)
    seeds.push_back(v);
  seeds.push_back(3);
  for (bool replace : {false, true}) {
    for (int64_t fanout : {1, 5, 15, 65, -1}) {
      SampleOptions o;
      o.fanout = fanout;
      o.replace = replace;
      o.key = key_of(4, 1, 2, 3);
      const auto base = sample_neighbors(SamplingGraph::as_stored(g, w), seeds, o);
      expect_same(base, sample_neighbors(cached, seeds, o));
    }
  }
  // Weighted with replacement written out draw by draw (std::upper_bound over the row's sums):
  // the sampler's search over long rows must find exactly the same positions.
  for (int64_t fanout : {1, 15, 70}) {
    SampleOptions o;
    o.fanout = fanout;
    o.replace = true;
    o.key = key_of(6, 0, 1, 2);
    SampledEdges want;
    for (int64_t v : seeds) {
      const int64_t b = g.indptr[v], d = g.degree(v);
      std::vector<double> cdf;
      double total = 0;
      int64_t last = -1;
      for (int64_t i = 0; i < d; ++i) {
        total += w[b + i];
        cdf.push_back(total);
        if (w[b + i] > 0) last = i;
      }
      if (last < 0) continue;
      for (int64_t t = 0; t < fanout; ++t) {
        const double target = uniform01(philox_u64(philox_draw(o.key, static_cast<uint64_t>(v),
                                                               static_cast<uint32_t>(t)))) *
                              total;
        const int64_t i =
            std::min<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), target) - cdf.begin(), last);
        want.src.push_back(g.indices[b + i]);
        want.dst.push_back(v);
        want.eid.push_back(g.eid(b + i));
      }
    }
    expect_same(want, sample_neighbors(cached, seeds, o));
    expect_same(want, sample_neighbors(SamplingGraph(g, w), seeds, o));  // with the packed copy
  }
  std::vector<float> neg = w;
  neg[5] = -1.0f;
  TESSERA_EXPECT_THROW_MSG(weight_prefix_sums(g, neg), ValueError, "negative or not finite");
}

TEST(SampleNeighbors, SampleOfANodeDoesNotDependOnTheBatch) {
  const Graph& g = test::real_dataset("tolokers").graph;
  auto seeds = all_nodes(g);
  SampleOptions o;
  o.fanout = 15;
  o.key = key_of(1, 2, 3, 0);
  const auto m = by_dst(sample_neighbors(g, seeds, o));
  // Reversed order, and a subset: every node gets the same sample.
  std::reverse(seeds.begin(), seeds.end());
  EXPECT_EQ(by_dst(sample_neighbors(g, seeds, o)), m);
  std::vector<int64_t> some(seeds.begin(), seeds.begin() + 100);
  for (auto& [v, list] : by_dst(sample_neighbors(g, some, o)))
    EXPECT_EQ(list, m.at(v));
  // A different batch key gives a different sample.
  o.key.batch = 4;
  EXPECT_NE(by_dst(sample_neighbors(g, seeds, o)), m);
}

TEST(SampleNeighbors, RmatGraphAllModes) {
  // A skewed R-MAT graph (hubs and many low-degree nodes), symmetrized like the benchmark's.
  ReadOptions ro;
  ro.build.symmetrize = true;
  const Dataset ds = read_dataset("rmat:12,8", Format::kAuto, ro);
  const Graph& g = ds.graph;
  const auto seeds = all_nodes(g);
  const auto w = weights_in_storage_order(g, std::vector<float>{1.0f, 0.25f, 3.0f, 0.0f});
  for (int mode = 0; mode < 4; ++mode) {
    SampleOptions o;
    o.fanout = 12;
    o.replace = mode & 1;
    const SamplingGraph sg =
        SamplingGraph::as_stored(g, mode & 2 ? Span<const float>(w) : Span<const float>());
    o.key = key_of(21, 0, 5, 1);
    o.num_threads = 1;
    const auto e = sample_neighbors(sg, seeds, o);
    o.num_threads = 2;
    expect_same(e, sample_neighbors(sg, seeds, o));
    auto m = by_dst(e);
    for (int64_t v = 0; v < g.num_nodes; v += 7) {
      const auto& got = m[v];
      if (!o.replace) {
        std::set<int64_t> s;
        for (auto& p : got)
          s.insert(p.second);
        EXPECT_EQ(s.size(), got.size()) << "repeat at node " << v;
        if (!(mode & 2)) {
          EXPECT_EQ(static_cast<int64_t>(got.size()), std::min<int64_t>(g.degree(v), 12));
        }
      } else if (!(mode & 2)) {
        EXPECT_EQ(static_cast<int64_t>(got.size()), g.degree(v) ? 12 : 0);
      }
    }
  }
}

TEST(SampleNeighbors, OutEdgesOnCsr) {
  const Graph g = test::random_graph(500, 6, 3, /*symmetrize=*/false);
  const Graph csr = transpose(g);
  const auto seeds = all_nodes(g);
  SampleOptions o;
  o.fanout = 4;
  o.dir = EdgeDir::kOut;
  const auto e = sample_neighbors(csr, seeds, o);
  std::map<int64_t, std::pair<int64_t, int64_t>> ends;
  for (int64_t v = 0; v < g.num_nodes; ++v)
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
      ends[g.eid(k)] = {g.indices[k], v};
  std::map<int64_t, int64_t> per_src;
  for (int64_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(ends.at(e.eid[i]), std::make_pair(e.src[i], e.dst[i]));
    ++per_src[e.src[i]];
  }
  for (int64_t v = 0; v < g.num_nodes; ++v)
    EXPECT_EQ(per_src[v], std::min<int64_t>(csr.degree(v), 4));
}

TEST(SampleNeighbors, ExcludedEdgesAreNeverSampled) {
  const Graph g = test::star(10);
  // Exclude the edges from nodes 1..5 into node 0.
  std::vector<int64_t> rows, eids;
  for (int64_t k = g.indptr[0]; k < g.indptr[1]; ++k)
    if (g.indices[k] <= 5) {
      rows.push_back(0);
      eids.push_back(g.eid(k));
    }
  ExcludeEdges ex(rows, eids);
  const int64_t seed = 0;
  for (bool replace : {false, true}) {
    for (int t = 0; t < 50; ++t) {
      SampleOptions o;
      o.fanout = 3;
      o.replace = replace;
      o.exclude = &ex;
      o.key = key_of(1, 0, static_cast<uint32_t>(t));
      const auto e = sample_neighbors(g, Span<const int64_t>(&seed, 1), o);
      EXPECT_EQ(e.size(), 3);
      for (int64_t s : e.src)
        EXPECT_GT(s, 5);
    }
  }
  SampleOptions all;
  all.exclude = &ex;
  EXPECT_EQ(sample_neighbors(g, Span<const int64_t>(&seed, 1), all).size(), 5);
}

TEST(SampleNeighbors, BadArgumentsGiveClearErrors) {
  const Graph g = test::star(5);
  std::vector<int64_t> seeds{0, 6};
  SampleOptions o;
  o.fanout = 2;
  TESSERA_EXPECT_THROW_MSG(sample_neighbors(g, seeds, o), IndexError, "seed node 6 at position 1");
  seeds = {0, -1};
  TESSERA_EXPECT_THROW_MSG(sample_neighbors(g, seeds, o), IndexError, "seed node -1");
  seeds = {0};
  o.fanout = -2;
  TESSERA_EXPECT_THROW_MSG(sample_neighbors(g, seeds, o), ValueError, "fanout -2 is negative");
  o.fanout = 2;
  std::vector<float> w(3, 1.0f);
  TESSERA_EXPECT_THROW_MSG(SamplingGraph::as_stored(g, w), ValueError,
                           "3 weights for a graph with");
  w.assign(static_cast<size_t>(g.num_edges()), 1.0f);
  w[static_cast<size_t>(g.indptr[0])] = -1.0f;
  TESSERA_EXPECT_THROW_MSG(sample_neighbors(SamplingGraph::as_stored(g, w), seeds, o), ValueError,
                           "negative or not finite");
  TESSERA_EXPECT_THROW_MSG(SamplingGraph(g, w), ValueError,
                           "SamplingGraph weights: weight -1 at storage position");
  TESSERA_EXPECT_THROW_MSG(validate_weights(g, w, "w"), ValueError, "weight -1 at storage");
  Graph broken = g;
  broken.indptr.pop_back();
  TESSERA_EXPECT_THROW_MSG(SamplingGraph::as_stored(broken), ValueError,
                           "indptr has 6 entries for 6 nodes");
  // A graph placed on the GPU is sampled by the CUDA twin.
  SamplingGraphOptions on_gpu;
  on_gpu.device = Device::kCuda;
  if (!cuda::compiled_with_cuda()) {
    TESSERA_EXPECT_THROW_MSG(SamplingGraph(g, on_gpu), NotCompiledError, "not_compiled_with_cuda");
  } else if (cuda::device_count() == 0) {
    TESSERA_EXPECT_THROW_MSG(SamplingGraph(g, on_gpu), ValueError, "no CUDA device");
  } else {  // dispatched to the CUDA twin: the CPU twin's result
    const SamplingGraph placed(g, on_gpu);
    EXPECT_EQ(placed.device(), Device::kCuda);
    expect_same(sample_neighbors(placed, seeds, o), sample_neighbors(g, seeds, o));
  }
  TESSERA_EXPECT_THROW_MSG(make_rng_key(uint64_t{1} << 32, 0, 0, 0), ValueError,
                           "seed 4294967296 out of range");
  TESSERA_EXPECT_THROW_MSG(make_rng_key(1, -1, 0, 0), ValueError, "epoch -1 out of range");
  TESSERA_EXPECT_THROW_MSG(make_rng_key(1, 0, 0, 300), ValueError, "layer 300");
}

}  // namespace
}  // namespace tessera::ops
