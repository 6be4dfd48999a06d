// CUDA twin of neighbor sampling against the CPU twin (ops::sample_neighbors), bit for bit:
// uniform {fanout -1, 0, 1, 5, 25, 100} x {with, without replacement} x {in, out} on a random
// graph with degree-0 nodes, a hub (Floyd with k > 64 on the CPU's bitmap path) and repeated
// seeds, and an empty seed list; weighted; with edge exclusion; the multi-layer sampler (with
// and without exclusion) and block compaction. CUDA cases only, built into test_twins_cuda alone;
// the CPU twin's own contract is tested in tests/host/ops.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <tuple>

#include "sample_fixture.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/sample_rows.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/device_sampler.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampler.hpp"
#include "tessera_test.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

// n int64 values from device (or UVA) memory, once the work queued on `stream` is done.
std::vector<int64_t> download_i64(const int64_t* d, int64_t n, cuda::StreamHandle stream) {
  std::vector<int64_t> h(static_cast<size_t>(n));
  if (n > 0) cuda::copy_async(h.data(), d, h.size() * 8, stream);
  cuda::synchronize(stream);
  return h;
}

// Edges sampled on the device equal the CPU twin's, bit for bit.
void expect_same_edges(const cuda::DeviceSample& gpu, const ops::SampledEdges& cpu,
                       cuda::StreamHandle stream) {
  ASSERT_EQ(gpu.size, cpu.size());
  EXPECT_EQ(download_i64(gpu.src_ptr(), gpu.size, stream), cpu.src);
  EXPECT_EQ(download_i64(gpu.dst_ptr(), gpu.size, stream), cpu.dst);
  EXPECT_EQ(download_i64(gpu.eid_ptr(), gpu.size, stream), cpu.eid);
}

class SampleTwin : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool>> {};

TEST_P(SampleTwin, UniformMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [fanout, replace, dir_in] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<int64_t> seeds = sample_test_seeds();
  ops::SampleOptions o = sample_test_options(fanout, replace, dir_in);
  const ops::SampledEdges cpu = ops::sample_neighbors(g, seeds, o);

  DeviceCopy indptr(g.indptr.data(), g.indptr.size() * 8, 0, false);
  DeviceCopy indices(g.indices.data(), g.indices.size() * 8, 0, false);
  DeviceCopy eids(g.eids.data(), g.eids.size() * 8, 0, false);
  DeviceCopy d_seeds(seeds.data(), seeds.size() * 8, 0, false);
  cuda::Stream stream;
  auto p = [](const DeviceCopy& c) { return static_cast<const int64_t*>(c.data()); };
  cuda::DeviceSample gpu = cuda::sample_neighbors_uniform_impl(
      p(indptr), p(indices), g.eids.empty() ? nullptr : p(eids), p(d_seeds),
      static_cast<int64_t>(seeds.size()), fanout, replace, dir_in, o.key, stream.get());
  expect_same_edges(gpu, cpu, stream.get());
  // No seeds: nothing sampled.
  EXPECT_EQ(cuda::sample_neighbors_uniform_impl(p(indptr), p(indices), nullptr, p(d_seeds), 0,
                                                fanout, replace, dir_in, o.key, stream.get())
                .size,
            0);
}

INSTANTIATE_TEST_SUITE_P(Uniform, SampleTwin,
                         ::testing::Combine(::testing::Values(int64_t{-1}, int64_t{0}, int64_t{1},
                                                              int64_t{5}, int64_t{25},
                                                              int64_t{100}),
                                            ::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           const int64_t f = std::get<0>(info.param);
                           return fmt::format("{}_fanout_{}_{}_{}", backend_name(kBackend),
                                              f < 0 ? std::string("all") : std::to_string(f),
                                              std::get<1>(info.param) ? "replace" : "noreplace",
                                              std::get<2>(info.param) ? "in" : "out");
                         });

// Weighted sampling and the device prefix sums, in GPU memory and through UVA, against the CPU
// twin bit for bit; also through ops::sample_neighbors(device = kCuda).
class WeightedTwin
    : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, cuda::Placement>> {};

TEST_P(WeightedTwin, WeightedMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [fanout, replace, dir_in, placement] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<float> w = sample_test_weights(g);
  const std::vector<int64_t> seeds = sample_test_seeds();
  ops::SampleOptions o;
  o.fanout = fanout;
  o.replace = replace;
  o.weights = w;
  o.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  o.key = ops::make_rng_key(777, 1, 5, 2);
  const ops::SampledEdges cpu = ops::sample_neighbors(g, seeds, o);

  cuda::Stream stream;
  const ops::DeviceGraph dg(g, placement, w, stream.get());
  // The device prefix sums equal the host's bit for bit.
  const std::vector<double> host_prefix = ops::weight_prefix_sums(g, w);
  std::vector<double> dev_prefix(host_prefix.size());
  cuda::copy_async(dev_prefix.data(), dg.prefix(), dev_prefix.size() * 8, stream.get());
  stream.synchronize();
  EXPECT_EQ(dev_prefix, host_prefix);

  DeviceCopy d_seeds(seeds.data(), seeds.size() * 8, 0, false);
  const cuda::DeviceSample gpu = cuda::sample_neighbors_weighted_impl(
      dg.indptr(), dg.indices(), dg.eids(), dg.weights(), dg.prefix(),
      static_cast<const int64_t*>(d_seeds.data()), static_cast<int64_t>(seeds.size()), fanout,
      replace, dir_in, o.key, stream.get());
  expect_same_edges(gpu, cpu, stream.get());

  ops::SampleOptions oc = o;  // the dispatching entry point
  oc.device = ops::Device::kCuda;
  const ops::SampledEdges via_ops = ops::sample_neighbors(g, seeds, oc);
  EXPECT_EQ(via_ops.src, cpu.src);
  EXPECT_EQ(via_ops.dst, cpu.dst);
  EXPECT_EQ(via_ops.eid, cpu.eid);
}

INSTANTIATE_TEST_SUITE_P(Weighted, WeightedTwin,
                         ::testing::Combine(::testing::Values(int64_t{-1}, int64_t{1}, int64_t{5},
                                                              int64_t{25}, int64_t{100}),
                                            ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(cuda::Placement::kGpu,
                                                              cuda::Placement::kPinnedHost)),
                         [](const auto& info) {
                           const int64_t f = std::get<0>(info.param);
                           return fmt::format("{}_fanout_{}_{}_{}_{}", backend_name(kBackend),
                                              f < 0 ? std::string("all") : std::to_string(f),
                                              std::get<1>(info.param) ? "replace" : "noreplace",
                                              std::get<2>(info.param) ? "in" : "out",
                                              cuda::placement_name(std::get<3>(info.param)));
                         });

// Sampling with edge exclusion (the edge loader's case): the CUDA twin against the CPU twin bit
// for bit, uniform and weighted, with and without replacement, in and out, fanouts -1..100, the
// graph and the exclusion arrays in GPU memory or pinned host memory (UVA); also through
// ops::sample_neighbors(device = kCuda). The exclusion set (sample_fixture.hpp) has rows that
// lose every edge, the hub losing a third of its edges, IDs of other rows' edges, duplicates.
class ExcludeTwin
    : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool, cuda::Placement>> {};

TEST_P(ExcludeTwin, ExclusionMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [fanout, replace, dir_in, weighted, placement] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<float> w = sample_test_weights(g);
  const std::vector<int64_t> seeds = sample_test_exclusion_seeds();
  const ops::ExcludeEdges ex = sample_test_exclusion(g, w, seeds);
  ops::SampleOptions o = sample_test_options(fanout, replace, dir_in);
  if (weighted) o.weights = w;
  o.exclude = &ex;
  const ops::SampledEdges cpu = ops::sample_neighbors(g, seeds, o);

  cuda::Stream stream;
  const ops::DeviceGraph dg(
      g, placement, weighted ? ops::Span<const float>(w) : ops::Span<const float>(), stream.get());
  const bool pinned = placement == cuda::Placement::kPinnedHost;
  DeviceCopy rows(ex.rows().data(), ex.rows().size() * 8, 0, pinned);
  DeviceCopy offsets(ex.offsets().data(), ex.offsets().size() * 8, 0, pinned);
  DeviceCopy eids(ex.eids().data(), ex.eids().size() * 8, 0, pinned);
  cuda::rows::ExcludeView view;
  view.rows = static_cast<const int64_t*>(rows.data());
  view.offsets = static_cast<const int64_t*>(offsets.data());
  view.eids = static_cast<const int64_t*>(eids.data());
  view.num_rows = ex.rows().size();
  DeviceCopy d_seeds(seeds.data(), seeds.size() * 8, 0, false);
  const auto* sp = static_cast<const int64_t*>(d_seeds.data());
  const int64_t n = static_cast<int64_t>(seeds.size());
  const cuda::DeviceSample gpu =
      weighted
          ? cuda::sample_neighbors_weighted_impl(dg.indptr(), dg.indices(), dg.eids(), dg.weights(),
                                                 dg.prefix(), sp, n, fanout, replace, dir_in, o.key,
                                                 stream.get(), &view)
          : cuda::sample_neighbors_uniform_impl(dg.indptr(), dg.indices(), dg.eids(), sp, n, fanout,
                                                replace, dir_in, o.key, stream.get(), &view);
  expect_same_edges(gpu, cpu, stream.get());

  ops::SampleOptions oc = o;  // the dispatching entry point (graph and set copied for the call)
  oc.device = ops::Device::kCuda;
  const ops::SampledEdges via_ops = ops::sample_neighbors(g, seeds, oc);
  EXPECT_EQ(via_ops.src, cpu.src);
  EXPECT_EQ(via_ops.dst, cpu.dst);
  EXPECT_EQ(via_ops.eid, cpu.eid);
  // An empty set is no exclusion: the same as without one.
  const ops::ExcludeEdges empty;
  oc.exclude = &empty;
  ops::SampleOptions op = o;
  op.exclude = nullptr;
  EXPECT_EQ(ops::sample_neighbors(g, seeds, oc).eid, ops::sample_neighbors(g, seeds, op).eid);
}

INSTANTIATE_TEST_SUITE_P(
    Exclude, ExcludeTwin,
    ::testing::Combine(::testing::Values(int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{5},
                                         int64_t{25}, int64_t{100}),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(cuda::Placement::kGpu, cuda::Placement::kPinnedHost)),
    [](const auto& info) {
      const int64_t f = std::get<0>(info.param);
      return fmt::format("{}_{}_fanout_{}_{}_{}_{}", backend_name(kBackend),
                         std::get<3>(info.param) ? "weighted" : "uniform",
                         f < 0 ? std::string("all") : std::to_string(f),
                         std::get<1>(info.param) ? "replace" : "noreplace",
                         std::get<2>(info.param) ? "in" : "out",
                         cuda::placement_name(std::get<4>(info.param)));
    });

// The multi-layer GPU sampler (DeviceNeighborSampler through NeighborSampler with
// device = kCuda) gives the CPU NeighborSampler's blocks bit for bit: uniform and weighted, with
// and without replacement, graph in GPU memory and in pinned host memory (UVA), without and with
// an edge-exclusion set that reaches every hop (the edge loader's use).
class BlocksTwin : public ::testing::TestWithParam<std::tuple<bool, bool, bool, cuda::Placement>> {
};

TEST_P(BlocksTwin, NeighborSamplerMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [weighted, replace, dir_in, placement] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<float> w = sample_test_weights(g);
  ops::NeighborSamplerOptions o;
  o.fanouts = {15, 10, 5};
  o.replace = replace;
  o.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  if (weighted) o.weights = w;
  const ops::NeighborSampler cpu(g, o);
  o.device = ops::Device::kCuda;
  o.placement = placement;
  const ops::NeighborSampler gpu(g, o);
  std::vector<int64_t> perm(static_cast<size_t>(g.num_nodes));
  for (int64_t i = 0; i < g.num_nodes; ++i)
    perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(4));
  for (int64_t batch = 0; batch < 3; ++batch) {
    std::vector<int64_t> seeds(perm.begin() + batch * 512, perm.begin() + (batch + 1) * 512);
    for (int64_t r = 20; r < 28; ++r)  // unique still: r replaces a seed only when absent
      if (std::find(seeds.begin(), seeds.end(), r) == seeds.end()) seeds[r - 20] = r;
    const RngKey key = ops::make_rng_key(99, 3, batch, 0);
    const std::vector<ops::Block> a = cpu.sample_blocks(seeds, key);
    ops::SampleStats st;
    const std::vector<ops::Block> b = gpu.sample_blocks(seeds, key, nullptr, nullptr, &st);
    expect_same_blocks(b, a, fmt::format("batch {}", batch));
    int64_t edges = 0;
    for (const auto& blk : a)
      edges += blk.num_edges();
    EXPECT_EQ(st.sampled_edges, edges);

    // With exclusion: the special rows of sample_test_exclusion (among the seeds), and 5% of
    // all other edges excluded, so every hop meets excluded rows.
    const ops::ExcludeEdges ex = sample_test_exclusion(g, w, seeds, 0.05);
    const std::vector<ops::Block> ae = cpu.sample_blocks(seeds, key, &ex);
    const std::vector<ops::Block> be = gpu.sample_blocks(seeds, key, &ex);
    expect_same_blocks(be, ae, fmt::format("with exclusion: batch {}", batch));
    bool differs = false;
    for (size_t l = 0; l < ae.size(); ++l)
      differs |= ae[l].eids != a[l].eids;
    EXPECT_TRUE(differs) << "the exclusion set changed nothing";
  }
  // Seeds are checked on the host path.
  const std::vector<int64_t> bad = {1, 3000};
  TESSERA_EXPECT_THROW_MSG(gpu.sample_blocks(bad, ops::make_rng_key(1, 0, 0, 0)), IndexError,
                           "seed 3000 at position 1 is out of range");
  const std::vector<int64_t> twice = {4, 4};
  TESSERA_EXPECT_THROW_MSG(gpu.sample_blocks(twice, ops::make_rng_key(1, 0, 0, 0)), ValueError,
                           "seed 4 is listed twice");
}

INSTANTIATE_TEST_SUITE_P(Layers, BlocksTwin,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(cuda::Placement::kGpu,
                                                              cuda::Placement::kPinnedHost)),
                         [](const auto& info) {
                           return fmt::format("{}_{}_{}_{}_{}", backend_name(kBackend),
                                              std::get<0>(info.param) ? "weighted" : "uniform",
                                              std::get<1>(info.param) ? "replace" : "noreplace",
                                              std::get<2>(info.param) ? "in" : "out",
                                              cuda::placement_name(std::get<3>(info.param)));
                         });

// Several host threads sampling through one NeighborSampler(device = cuda) at once, as a
// loader's sampler threads do: each call without a stream runs on its thread's own stream, and
// every batch still equals the CPU sampler's.
TEST(BlocksTwinThreads, ConcurrentCallsMatchCpu) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const Graph& g = sample_test_csc();
  ops::NeighborSamplerOptions o;
  o.fanouts = {15, 10, 5};
  const ops::NeighborSampler cpu(g, o);
  o.device = ops::Device::kCuda;
  const ops::NeighborSampler gpu(g, o);
  std::vector<int64_t> perm(static_cast<size_t>(g.num_nodes));
  for (int64_t i = 0; i < g.num_nodes; ++i)
    perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(6));
  constexpr int kThreads = 4, kBatches = 16;
  constexpr int64_t kBatch = 150;
  std::vector<std::vector<ops::Block>> got(kBatches);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int b = t; b < kBatches; b += kThreads) {
          const std::vector<int64_t> seeds(perm.begin() + b * kBatch,
                                           perm.begin() + (b + 1) * kBatch);
          got[b] = gpu.sample_blocks(seeds, ops::make_rng_key(7, 0, b, 0));
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(errors[t], "") << "thread " << t;
  for (int b = 0; b < kBatches; ++b) {
    const std::vector<int64_t> seeds(perm.begin() + b * kBatch, perm.begin() + (b + 1) * kBatch);
    const std::vector<ops::Block> want = cpu.sample_blocks(seeds, ops::make_rng_key(7, 0, b, 0));
    expect_same_blocks(got[b], want, fmt::format("batch {}", b));
  }
}

#if !TESSERA_WITH_CUDA
// Without CUDA the GPU sampler says so at construction, whatever the placement.
TEST(DeviceSamplerCpuBuild, ConstructionNamesTheMissingCuda) {
  const Graph& g = sample_test_csc();
  ops::NeighborSamplerOptions o;
  o.fanouts = {5};
  o.device = ops::Device::kCuda;
  EXPECT_THROW(ops::NeighborSampler(g, o), NotCompiledError);
  EXPECT_THROW(ops::DeviceGraph(g, cuda::Placement::kGpu), NotCompiledError);
  ops::SampleOptions so;
  so.fanout = 3;
  so.device = ops::Device::kCuda;
  const std::vector<int64_t> seeds = {1};
  EXPECT_THROW(ops::sample_neighbors(g, seeds, so), NotCompiledError);
}
#endif

// Block compaction: the CUDA twin's src_nodes / src / dst equal the CPU twin's on sampled
// edges (several hops' worth of repeated sources), including no edges and no destinations.
class BlockTwin : public ::testing::TestWithParam<int64_t> {};

TEST_P(BlockTwin, ToBlockMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const int64_t num_seeds = GetParam();
  const Graph& g = sample_test_csc();
  std::vector<int64_t> perm(static_cast<size_t>(g.num_nodes));
  for (int64_t i = 0; i < g.num_nodes; ++i)
    perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(8));
  std::vector<int64_t> seeds(perm.begin(), perm.begin() + num_seeds);  // unique
  ops::SampleOptions o;
  o.fanout = 10;
  o.key = ops::make_rng_key(1, 0, 3, 0);
  const ops::SampledEdges e = ops::sample_neighbors(g, seeds, o);
  const ops::Block cpu = ops::to_block(e, seeds);

  cuda::Stream stream;
  DeviceCopy es(e.src.data(), e.src.size() * 8, 0, false);
  DeviceCopy ed(e.dst.data(), e.dst.size() * 8, 0, false);
  DeviceCopy ds(seeds.data(), seeds.size() * 8, 0, false);
  auto p = [](const DeviceCopy& c) { return static_cast<const int64_t*>(c.data()); };
  const cuda::DeviceBlock b =
      cuda::to_block_impl(p(es), p(ed), e.size(), p(ds), num_seeds, stream.get());
  ASSERT_EQ(b.num_dst, cpu.num_dst);
  ASSERT_EQ(b.num_src, cpu.num_src());
  ASSERT_EQ(b.num_edges, cpu.num_edges());
  EXPECT_EQ(download_i64(b.src_nodes_ptr(), b.num_src, stream.get()), cpu.src_nodes);
  EXPECT_EQ(download_i64(b.src_ptr(), b.num_edges, stream.get()), cpu.src);
  EXPECT_EQ(download_i64(b.dst_ptr(), b.num_edges, stream.get()), cpu.dst);
}

INSTANTIATE_TEST_SUITE_P(Seeds, BlockTwin, ::testing::Values(0, 1, 17, 1024, 3000),
                         [](const auto& info) {
                           return fmt::format("{}_seeds{}", backend_name(kBackend), info.param);
                         });

TEST(BlockTwinErrors, SameMessagesAsCpu) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  std::vector<int64_t> src = {5, 6, 7}, dst = {1, 2, 9}, dn = {1, 2, 1};
  DeviceCopy s(src.data(), 24, 0, false), d(dst.data(), 24, 0, false), n(dn.data(), 24, 0, false);
  auto p = [](const DeviceCopy& c) { return static_cast<const int64_t*>(c.data()); };
  TESSERA_EXPECT_THROW_MSG(cuda::to_block_impl(p(s), p(d), 3, p(n), 3, nullptr), ValueError,
                           "destination node 1 is listed twice");
  TESSERA_EXPECT_THROW_MSG(cuda::to_block_impl(p(s), p(d), 3, p(n), 2, nullptr), ValueError,
                           "edge 2 (7 -> 9) ends at a node that is not a destination node");
}

}  // namespace
}  // namespace tessera::test
