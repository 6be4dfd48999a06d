// SPDX-License-Identifier: Apache-2.0
// The graph, weights and seeds the sampling twin tests share (test_sample.cpp on the GPU,
// test_sample_rows.cpp on the CPU): 3000 nodes, 40k random edges symmetrized (non-identity edge
// IDs), nodes >= 2500 without any edge, a hub (node 7, ~700 more in-edges); weights with a
// quarter zero, node 11's row all zero and the hub's row heavy-tailed (a few 1e6 among 1e-3, so
// successive sampling runs out of redraws and takes the exact walk); seeds with repeats, the hub,
// a degree-0 node and the all-zero row; an edge-exclusion set with every kind of excluded row.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::test {

inline Graph sample_test_graph() {
  std::mt19937_64 rng(42);
  EdgeList e;
  e.num_nodes = 3000;
  for (int i = 0; i < 40000; ++i) {
    e.src.push_back(static_cast<int64_t>(rng() % 2500));  // nodes >= 2500 have no edge at all,
    e.dst.push_back(static_cast<int64_t>(rng() % 2500));  // in or out, after symmetrizing
  }
  for (int i = 0; i < 700; ++i) {  // a hub
    e.src.push_back(static_cast<int64_t>(rng() % 2500));
    e.dst.push_back(7);
  }
  BuildOptions o;
  o.symmetrize = true;  // non-identity edge IDs
  return build_csc(std::move(e), o);
}

/// The CSC (in-edges) and its transpose (out-edges), built once.
inline const Graph& sample_test_csc() {
  static const Graph g = sample_test_graph();
  return g;
}
inline const Graph& sample_test_csr() {
  static const Graph g = transpose(sample_test_csc());
  return g;
}

/// Storage-order weights of `g` (a function of the edge ID, then the special rows).
inline std::vector<float> sample_test_weights(const Graph& g) {
  std::mt19937_64 rng(9);
  std::vector<float> by_eid(static_cast<size_t>(g.num_edges()));
  std::uniform_real_distribution<float> u(0.0f, 4.0f);
  for (auto& x : by_eid)
    x = rng() % 4 == 0 ? 0.0f : u(rng);
  std::vector<float> w = ops::weights_in_storage_order(g, by_eid);
  for (int64_t k = g.indptr[11]; k < g.indptr[12]; ++k)
    w[k] = 0.0f;
  int64_t j = 0;
  for (int64_t k = g.indptr[7]; k < g.indptr[8]; ++k, ++j)
    w[k] = j % 97 == 0 ? 1e6f : 1e-3f;
  return w;
}

/// 1500 random seeds (repeats allowed) led by 7, 7 (the hub, twice), 2999 (no in-edges), 11.
inline std::vector<int64_t> sample_test_seeds() {
  std::mt19937_64 rng(3);
  std::vector<int64_t> seeds(1500);
  for (auto& s : seeds)
    s = static_cast<int64_t>(rng() % 3000);
  seeds[0] = 7;
  seeds[1] = 7;
  seeds[2] = 2999;
  seeds[3] = 11;
  return seeds;
}

/// The options both suites sample with: `fanout`, `replace`, in- or out-edges, key
/// (12345, 2, 17, 1).
inline ops::SampleOptions sample_test_options(int64_t fanout, bool replace, bool dir_in) {
  ops::SampleOptions o;
  o.fanout = fanout;
  o.replace = replace;
  o.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  o.key = ops::make_rng_key(12345, 2, 17, 1);
  return o;
}

/// Seeds for the exclusion cases: sample_test_seeds() with the rows sample_test_exclusion
/// targets among them (some twice), so every kind of excluded row is sampled.
inline std::vector<int64_t> sample_test_exclusion_seeds() {
  std::vector<int64_t> seeds = sample_test_seeds();
  const int64_t special[] = {20, 21, 22, 23, 24, 25, 26, 20, 7, 23, 11, 2998};
  for (size_t i = 0; i < std::size(special); ++i)
    seeds[4 + i] = special[i];
  return seeds;
}

/// An exclusion set over the rows of `g` (CSC or CSR; the row holds the edge) with weights `w`
/// (storage order), as (row, eid) pairs: rows 20 and 21 lose every edge; the hub (7) loses every
/// third edge (heavy and light ones); row 22 loses one edge and lists two IDs of other rows' edges
/// and one past every ID (all ignored); row 23 lists only IDs of other rows (nothing of its own is
/// lost); row 24 loses every positive-weight edge (weighted: nothing left to draw); row 25 loses
/// its positive edges but one; row 26 loses its first edge, listed three times; rows 2998 and 2999
/// list one ID each; then one to three edges of every 10th seed's row (rows >= 30), like a
/// link-prediction batch; with `spread` > 0 also every edge of rows >= 30 with that probability
/// (for the deeper hops of multi-layer sampling); then the first 50 pairs again (duplicates).
inline ops::ExcludeEdges sample_test_exclusion(const Graph& g, const std::vector<float>& w,
                                               const std::vector<int64_t>& seeds,
                                               double spread = 0) {
  std::vector<int64_t> rows, eids;
  auto eid = [&](int64_t k) { return g.eids.empty() ? k : g.eids[k]; };
  auto add = [&](int64_t r, int64_t e) {
    rows.push_back(r);
    eids.push_back(e);
  };
  auto row_edges = [&](int64_t r) { return std::make_pair(g.indptr[r], g.indptr[r + 1]); };
  for (int64_t r : {int64_t{20}, int64_t{21}}) {
    auto [b, e] = row_edges(r);
    for (int64_t k = b; k < e; ++k)
      add(r, eid(k));
  }
  {
    auto [b, e] = row_edges(7);
    for (int64_t k = b; k < e; k += 3)
      add(7, eid(k));
  }
  {
    auto [b, e] = row_edges(22);
    if (e > b) add(22, eid(b + (e - b) / 2));
    add(22, eid(g.indptr[30]));  // row 30's first edge, not row 22's
    add(22, eid(g.indptr[31]));
    add(22, int64_t{1} << 40);  // no edge has this ID
  }
  add(23, eid(g.indptr[40]));
  add(23, eid(g.indptr[41] + 1));
  {
    auto [b, e] = row_edges(24);
    for (int64_t k = b; k < e; ++k)
      if (w[k] > 0) add(24, eid(k));
  }
  {
    auto [b, e] = row_edges(25);
    bool kept = false;
    for (int64_t k = b; k < e; ++k) {
      if (w[k] > 0 && !kept) {
        kept = true;
        continue;
      }
      if (w[k] > 0) add(25, eid(k));
    }
  }
  {
    auto [b, e] = row_edges(26);
    for (int rep = 0; rep < 3; ++rep)
      if (e > b) add(26, eid(b));
  }
  add(2998, 5);
  add(2999, 6);
  std::mt19937_64 rng(17);
  for (size_t i = 16; i < seeds.size(); i += 10) {
    const int64_t r = seeds[i];
    auto [b, e] = row_edges(r);
    if (r < 30 || e == b) continue;  // the rows above keep their exact sets
    const int m = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < m; ++j)
      add(r, eid(b + static_cast<int64_t>(rng() % static_cast<uint64_t>(e - b))));
  }
  if (spread > 0) {
    std::bernoulli_distribution pick(spread);
    for (int64_t r = 30; r < g.num_nodes; ++r)
      for (int64_t k = g.indptr[r]; k < g.indptr[r + 1]; ++k)
        if (pick(rng)) add(r, eid(k));
  }
  // Duplicate pairs: the first 50 again.
  for (size_t i = 0; i < 50 && i < rows.size(); ++i)
    add(rows[i], eids[i]);
  return ops::ExcludeEdges(rows, eids);
}

/// Blocks from the GPU sampler equal the CPU sampler's, field by field; every difference is
/// reported under `what` and the block index. Returns whether all of them are equal.
inline bool expect_same_blocks(const std::vector<ops::Block>& got,
                               const std::vector<ops::Block>& want, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  if (got.size() != want.size()) return false;
  bool same = true;
  for (size_t l = 0; l < want.size(); ++l) {
    SCOPED_TRACE(fmt::format("{} block {}", what, l));
    EXPECT_EQ(got[l].num_dst, want[l].num_dst);
    EXPECT_EQ(got[l].src_nodes, want[l].src_nodes);
    EXPECT_EQ(got[l].src, want[l].src);
    EXPECT_EQ(got[l].dst, want[l].dst);
    EXPECT_EQ(got[l].eids, want[l].eids);
    same = same && got[l].num_dst == want[l].num_dst && got[l].src_nodes == want[l].src_nodes &&
           got[l].src == want[l].src && got[l].dst == want[l].dst && got[l].eids == want[l].eids;
  }
  return same;
}

}  // namespace tessera::test
