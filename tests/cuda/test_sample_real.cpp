// SPDX-License-Identifier: Apache-2.0
// The GPU sampler on real graphs and an R-MAT graph (test_twins_cuda; skips without a device).
// Cora (data/cora), ego-Twitter (data/snap, symmetrized) and a scale-15 R-MAT graph (many
// degree-0 nodes, heavy hubs) are sampled by NeighborSampler on the GPU, graph in HBM and in pinned
// host memory, and on the CPU with the same keys: the blocks must be identical bit for bit, uniform
// and weighted, with and without replacement, for fanouts [15,10,5] and [-1, 5] (every neighbor),
// on shuffled batches and on a batch of the lowest- and highest-degree nodes.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sample_fixture.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/graph/rmat.hpp"
#include "tessera/ops/sampler.hpp"
#include "tessera_test.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

struct RealGraph {
  Graph g;               // CSC
  std::vector<float> w;  // storage-order weights: a function of the edge ID, a quarter zero
};

// Loaded once per process.
const RealGraph* real_graph(const std::string& name) {
  static std::map<std::string, std::unique_ptr<RealGraph>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto r = std::make_unique<RealGraph>();
  ReadOptions o;
  o.build.symmetrize = true;
  if (name == "rmat") {
    RmatOptions ro;
    ro.scale = 15;
    ro.edge_factor = 8;
    ro.seed = 3;
    Dataset ds = generate_rmat(ro);
    finalize(ds, o.build);
    r->g = std::move(ds.graph);
  } else {
    const auto path = dataset(name == "cora" ? "cora" : "snap/ego-Twitter.txt.gz");
    r->g = read_dataset(path, Format::kAuto, o).graph;
  }
  std::vector<float> by_eid(static_cast<size_t>(r->g.num_edges()));
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> u(0.0f, 2.0f);
  for (auto& x : by_eid) {
    x = rng() % 4 == 0 ? 0.0f : u(rng);
  }
  r->w = ops::weights_in_storage_order(r->g, by_eid);
  return (cache[name] = std::move(r)).get();
}

// Shuffled batches of 1024 seeds, then one of the 300 lowest- and 300 highest-degree nodes.
std::vector<std::vector<int64_t>> seed_batches(const Graph& g, int shuffled) {
  std::vector<int64_t> perm(static_cast<size_t>(g.num_nodes));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(8));
  std::vector<std::vector<int64_t>> out;
  const int64_t bs = std::min<int64_t>(1024, g.num_nodes);
  for (int b = 0; b < shuffled && (b + 1) * bs <= g.num_nodes; ++b)
    out.emplace_back(perm.begin() + b * bs, perm.begin() + (b + 1) * bs);
  std::vector<int64_t> by_degree = perm;
  std::stable_sort(by_degree.begin(), by_degree.end(), [&](int64_t a, int64_t b) {
    return g.indptr[a + 1] - g.indptr[a] < g.indptr[b + 1] - g.indptr[b];
  });
  const int64_t k = std::min<int64_t>(300, g.num_nodes / 2);
  std::vector<int64_t> ends(by_degree.begin(), by_degree.begin() + k);
  ends.insert(ends.end(), by_degree.end() - k, by_degree.end());
  out.push_back(std::move(ends));
  return out;
}

using Param = std::tuple<std::string, bool, bool, cuda::Placement>;
class RealGraphTwin : public ::testing::TestWithParam<Param> {};

// In test_twins_cpu (no GPU needed) the same case checks its own fixture: the graph loaded, the
// batches are what the GPU run relies on (unique seeds; degree-0 nodes and the top hub in the
// last batch) and the CPU sampler takes them.
TEST_P(RealGraphTwin, GpuBlocksMatchCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [name, weighted, replace, placement] = GetParam();
  const RealGraph* r = real_graph(name);
  const Graph& g = r->g;
  const auto batches = seed_batches(g, 3);
  if (kBackend == Backend::kCpu) {
    ASSERT_EQ(static_cast<int64_t>(batches.size()), std::min<int64_t>(3, g.num_nodes / 1024) + 1);
    int64_t max_degree = 0, zero = 0;
    for (int64_t v = 0; v < g.num_nodes; ++v) {
      max_degree = std::max(max_degree, g.indptr[v + 1] - g.indptr[v]);
      zero += g.indptr[v + 1] == g.indptr[v];
    }
    int64_t last_zero = 0, last_max = 0;
    for (int64_t v : batches.back()) {
      last_zero += g.indptr[v + 1] == g.indptr[v];
      last_max = std::max(last_max, g.indptr[v + 1] - g.indptr[v]);
    }
    EXPECT_EQ(last_zero, std::min<int64_t>(zero, 300));
    EXPECT_EQ(last_max, max_degree);
    if (name == "rmat") {
      EXPECT_GT(last_zero, 0);
    }
  }
  for (const std::vector<int64_t>& fanouts :
       {std::vector<int64_t>{15, 10, 5}, std::vector<int64_t>{-1, 5}}) {
    ops::NeighborSamplerOptions o;
    o.fanouts = fanouts;
    o.replace = replace;
    ops::SamplingGraphOptions prep;
    if (weighted) {
      prep.weights = r->w;
    }
    const ops::NeighborSampler cpu(g, o, prep);
    if (kBackend == Backend::kCpu) {  // unique, in-range seeds (else sample_blocks throws)
      for (size_t batch = 0; batch < batches.size(); ++batch)
        EXPECT_GT(
            cpu.sample_blocks(batches[batch], ops::make_rng_key(2026, 1, 0, 0)).back().num_edges(),
            0);
      continue;
    }
    prep.device = ops::Device::kCuda;
    prep.placement = placement;
    const ops::NeighborSampler gpu(g, o, prep);
    for (size_t batch = 0; batch < batches.size(); ++batch) {
      const RngKey key = ops::make_rng_key(2026, 1, static_cast<int64_t>(batch), 0);
      const std::vector<ops::Block> a = cpu.sample_blocks(batches[batch], key);
      const std::vector<ops::Block> b = gpu.sample_blocks(batches[batch], key);
      // Stop at the first differing batch (the later ones would only repeat the report).
      if (!expect_same_blocks(b, a,
                              fmt::format("fanouts {} batch {}", fmt::join(fanouts, ","), batch)))
        return;
    }
  }
  if (kBackend == Backend::kCpu) return;
  // No seeds: no edges.
  ops::SampleOptions so;
  so.fanout = 10;
  so.key = ops::make_rng_key(1, 0, 0, 0);
  ops::SamplingGraphOptions on_gpu;
  on_gpu.device = ops::Device::kCuda;
  const std::vector<int64_t> none;
  EXPECT_EQ(ops::sample_neighbors(ops::SamplingGraph(g, on_gpu), none, so).size(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, RealGraphTwin,
    ::testing::Combine(::testing::Values(std::string("cora"), std::string("ego_twitter"),
                                         std::string("rmat")),
                       ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(cuda::Placement::kGpu, cuda::Placement::kPinnedHost)),
    [](const auto& info) {
      return fmt::format("{}_{}_{}_{}_{}", backend_name(kBackend), std::get<0>(info.param),
                         std::get<1>(info.param) ? "weighted" : "uniform",
                         std::get<2>(info.param) ? "replace" : "noreplace",
                         cuda::placement_name(std::get<3>(info.param)));
    });

}  // namespace
}  // namespace tessera::test
