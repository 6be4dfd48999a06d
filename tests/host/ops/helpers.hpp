// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the ops tests: small graphs and real datasets.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "tessera/graph/dataset.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera_test.hpp"

namespace tessera::test {

/// CSC of the given edges (src, dst).
inline Graph csc_of(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges,
                    bool symmetrize = false) {
  EdgeList el;
  el.num_nodes = n;
  for (auto [s, d] : edges) {
    el.src.push_back(s);
    el.dst.push_back(d);
  }
  BuildOptions o;
  o.symmetrize = symmetrize;
  return build_csc(std::move(el), o);
}

/// A star: nodes 1..d all point at node 0 (so node 0 has in-degree d), plus a chain 1 -> 2 ...
inline Graph star(int64_t d) {
  std::vector<std::pair<int64_t, int64_t>> e;
  for (int64_t i = 1; i <= d; ++i)
    e.push_back({i, 0});
  for (int64_t i = 1; i < d; ++i)
    e.push_back({i, i + 1});
  return csc_of(d + 1, e);
}

/// A random multigraph-free graph with n nodes and about n * avg edges (fixed seed).
inline Graph random_graph(int64_t n, int64_t avg, uint64_t seed, bool symmetrize = true) {
  std::vector<std::pair<int64_t, int64_t>> e;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int64_t i = 0; i < n * avg; ++i) {
    // Skewed degrees: square a uniform to favor low IDs as destinations.
    const double u = static_cast<double>(next() >> 11) / 9007199254740992.0;
    e.push_back({static_cast<int64_t>(next() % n), static_cast<int64_t>(u * u * n)});
  }
  EdgeList el;
  el.num_nodes = n;
  for (auto [s, d] : e) {
    el.src.push_back(s);
    el.dst.push_back(d);
  }
  BuildOptions o;
  o.symmetrize = symmetrize;
  o.deduplicate = true;
  return build_csc(std::move(el), o);
}

/// A dataset shipped in data/, read with symmetrize (cached per process).
inline const Dataset& real_dataset(const std::string& name) {
  static std::map<std::string, Dataset> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    ReadOptions o;
    o.build.symmetrize = true;
    it = cache.emplace(name, read_dataset(dataset(name), Format::kAuto, o)).first;
  }
  return it->second;
}

/// Chi-square statistic of observed counts against expected counts.
inline double chi_square(const std::vector<double>& observed, const std::vector<double>& expected) {
  double s = 0;
  for (size_t i = 0; i < observed.size(); ++i)
    if (expected[i] > 0)
      s += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
  return s;
}

/// Upper 0.1% critical value of chi-square with `df` degrees of freedom (Wilson-Hilferty).
inline double chi_square_critical_999(double df) {
  const double z = 3.090232;  // standard normal quantile at 0.999
  const double a = 2.0 / (9.0 * df);
  const double t = 1.0 - a + z * std::sqrt(a);
  return df * t * t * t;
}

}  // namespace tessera::test
