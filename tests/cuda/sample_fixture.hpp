// The graph, weights and seeds the sampling twin tests share (test_sample.cpp on the GPU,
// test_sample_rows.cpp on the CPU): 3000 nodes, 40k random edges symmetrized (non-identity edge
// IDs), nodes >= 2500 without in-edges, a hub (node 7, ~700 more in-edges); weights with a
// quarter zero, node 11's row all zero and the hub's row heavy-tailed (a few 1e6 among 1e-3, so
// successive sampling runs out of redraws and takes the exact walk); seeds with repeats, the hub,
// a degree-0 node and the all-zero row.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tessera/graph/graph.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::test {

inline Graph sample_test_graph() {
  std::mt19937_64 rng(42);
  EdgeList e;
  e.num_nodes = 3000;
  for (int i = 0; i < 40000; ++i) {
    e.src.push_back(static_cast<int64_t>(rng() % 3000));
    e.dst.push_back(static_cast<int64_t>(rng() % 2500));  // nodes >= 2500 have no in-edges
  }
  for (int i = 0; i < 700; ++i) {  // a hub
    e.src.push_back(static_cast<int64_t>(rng() % 3000));
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

}  // namespace tessera::test
