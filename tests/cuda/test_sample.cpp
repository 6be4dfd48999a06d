// SPDX-License-Identifier: Apache-2.0
// CUDA twin of neighbor sampling against the CPU twin (ops::sample_neighbors), bit for bit:
// uniform {fanout -1, 0, 1, 5, 25, 100} x {with, without replacement} x {in, out} on a random
// graph with degree-0 nodes, a hub (Floyd with k > 64 on the CPU's bitmap path) and repeated
// seeds, and an empty seed list; weighted; with edge exclusion; the multi-layer sampler (with
// and without exclusion) and block compaction. CUDA cases only, built into test_twins_cuda alone;
// the CPU twin's own contract is tested in tests/host/ops.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
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
  o.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  o.key = ops::make_rng_key(777, 1, 5, 2);
  const ops::SampledEdges cpu =
      ops::sample_neighbors(ops::SamplingGraph::as_stored(g, w), seeds, o);

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

  ops::SamplingGraphOptions on_gpu;  // the dispatching entry point, on a graph placed there
  on_gpu.weights = w;
  on_gpu.device = ops::Device::kCuda;
  on_gpu.placement = placement;
  const ops::SampledEdges via_ops = ops::sample_neighbors(ops::SamplingGraph(g, on_gpu), seeds, o);
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
  const ops::Span<const float> ws = weighted ? ops::Span<const float>(w) : ops::Span<const float>();
  o.exclude = &ex;
  const ops::SampledEdges cpu =
      ops::sample_neighbors(ops::SamplingGraph::as_stored(g, ws), seeds, o);

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

  // The dispatching entry point, on a graph placed there (the set copied for the call).
  ops::SamplingGraphOptions on_gpu;
  on_gpu.weights = ws;
  on_gpu.device = ops::Device::kCuda;
  on_gpu.placement = placement;
  const ops::SamplingGraph placed(g, on_gpu);
  const ops::SampledEdges via_ops = ops::sample_neighbors(placed, seeds, o);
  EXPECT_EQ(via_ops.src, cpu.src);
  EXPECT_EQ(via_ops.dst, cpu.dst);
  EXPECT_EQ(via_ops.eid, cpu.eid);
  // An empty set is no exclusion: the same as without one.
  const ops::ExcludeEdges empty;
  ops::SampleOptions oc = o;
  oc.exclude = &empty;
  ops::SampleOptions op = o;
  op.exclude = nullptr;
  EXPECT_EQ(ops::sample_neighbors(placed, seeds, oc).eid,
            ops::sample_neighbors(ops::SamplingGraph::as_stored(g, ws), seeds, op).eid);
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
  ops::SamplingGraphOptions prep;
  if (weighted) {
    prep.weights = w;
  }
  const ops::NeighborSampler cpu(g, o, prep);
  prep.device = ops::Device::kCuda;
  prep.placement = placement;
  const ops::NeighborSampler gpu(g, o, prep);
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
  ops::SamplingGraphOptions on_gpu;
  on_gpu.device = ops::Device::kCuda;
  const ops::NeighborSampler gpu(g, o, on_gpu);
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

// The engine directly (DeviceNeighborSampler over cuda::BlockSampler): several batches per call
// (500 seeds, none, the hub alone, 13 seeds and a degree-0 node), two calls queued before the
// first wait, then a call with fewer batches than the engine takes; CUDA graph on and off, dense
// and hashed node tables, graph in HBM and through UVA (rows read whole); uniform and weighted,
// with and without replacement, in and out. Every batch equals the CPU sampler's blocks bit for
// bit, and the fast path synchronizes once per call.
const char* const kEngineVariants[] = {"graph_dense", "direct_hashed", "graph_hashed_25_3"};

class EngineTwin
    : public ::testing::TestWithParam<std::tuple<bool, bool, bool, cuda::Placement, int>> {};

TEST_P(EngineTwin, BatchesMatchCpuBitForBit) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "the CPU side runs in test_sample_rows";
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [weighted, replace, dir_in, placement, variant] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<float> w = sample_test_weights(g);
  const std::vector<int64_t> fanouts =
      variant == 2 ? std::vector<int64_t>{25, 3} : std::vector<int64_t>{15, 10, 5};
  ops::NeighborSamplerOptions co;
  co.fanouts = fanouts;
  co.replace = replace;
  co.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  ops::SamplingGraphOptions prep;
  if (weighted) {
    prep.weights = w;
  }
  const ops::NeighborSampler cpu(g, co, prep);
  cuda::Stream stream;
  ops::DeviceGraphOptions go;
  go.split_arrays = false;
  const ops::DeviceGraph dg(g, placement,
                            weighted ? ops::Span<const float>(w) : ops::Span<const float>(),
                            stream.get(), go);
  ops::DeviceSamplerOptions so;
  so.max_batches = 4;
  so.cuda_graph = variant != 1;
  so.table = variant == 0 ? cuda::NodeTable::kDense : cuda::NodeTable::kHashed;
  const ops::DeviceNeighborSampler gpu(dg, fanouts, replace, co.dir, so);

  std::vector<int64_t> perm(static_cast<size_t>(g.num_nodes));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(21));
  std::vector<std::vector<int64_t>> batches = {
      {perm.begin(), perm.begin() + 500}, {}, {7}, {perm.begin() + 500, perm.begin() + 513}};
  batches[3].push_back(2999);
  std::vector<int64_t> flat, offsets = {0};
  for (const auto& b : batches) {
    flat.insert(flat.end(), b.begin(), b.end());
    offsets.push_back(static_cast<int64_t>(flat.size()));
  }
  DeviceCopy d_seeds(flat.data(), flat.size() * 8, 0, false);
  const auto* sp = static_cast<const int64_t*>(d_seeds.data());
  auto keys_for = [](int call, int k) { return ops::make_rng_key(99, call, k, 0); };
  std::vector<RngKey> k1, k2;
  for (int k = 0; k < 4; ++k) {
    k1.push_back(keys_for(1, k));
    k2.push_back(keys_for(2, k));
  }
  auto p1 = gpu.sample_blocks_async(sp, offsets, k1, stream.get());
  auto p2 = gpu.sample_blocks_async(sp, offsets, k2, stream.get());
  const std::vector<ops::DeviceBlocks> r1 = p1.wait(), r2 = p2.wait();
  ASSERT_EQ(r1.size(), 4u);
  ASSERT_EQ(r2.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    expect_same_blocks(ops::download_blocks(r1[k], stream.get()),
                       cpu.sample_blocks(batches[k], k1[k]), fmt::format("call 1 batch {}", k));
    expect_same_blocks(ops::download_blocks(r2[k], stream.get()),
                       cpu.sample_blocks(batches[k], k2[k]), fmt::format("call 2 batch {}", k));
    int64_t edges = 0;
    for (const auto& b : r1[k].blocks)
      edges += b.num_edges;
    EXPECT_EQ(r1[k].stats.sampled_edges, edges);
  }
  // Fewer batches than the engine takes (the same shape), and one batch alone.
  const std::vector<int64_t> two = {0, offsets[1], offsets[2]};
  const std::vector<ops::DeviceBlocks> r3 =
      gpu.sample_blocks_async(sp, two, {k1[0], k1[1]}, stream.get()).wait();
  ASSERT_EQ(r3.size(), 2u);
  expect_same_blocks(ops::download_blocks(r3[0], stream.get()),
                     cpu.sample_blocks(batches[0], k1[0]), "call 3 batch 0");
  const ops::DeviceBlocks one = gpu.sample_blocks(sp + offsets[2], 1, k2[2], stream.get());
  expect_same_blocks(ops::download_blocks(one, stream.get()), cpu.sample_blocks(batches[2], k2[2]),
                     "one seed");
  const cuda::BlockSamplerStats st = gpu.engine().stats();
  EXPECT_EQ(st.calls, 4);
  EXPECT_EQ(st.host_syncs, 4) << "the fast path synchronizes once per call";
  if (variant != 1) {
    EXPECT_EQ(st.graph_launches, 4);
    EXPECT_EQ(st.captures, 2);  // one shape with 4 batch slots of 512 seeds, one of 1 seed
  } else {
    EXPECT_EQ(st.graph_launches, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, EngineTwin,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(cuda::Placement::kGpu,
                                                              cuda::Placement::kPinnedHost),
                                            ::testing::Values(0, 1, 2)),
                         [](const auto& info) {
                           return fmt::format("{}_{}_{}_{}_{}_{}", backend_name(kBackend),
                                              std::get<0>(info.param) ? "weighted" : "uniform",
                                              std::get<1>(info.param) ? "replace" : "noreplace",
                                              std::get<2>(info.param) ? "in" : "out",
                                              cuda::placement_name(std::get<3>(info.param)),
                                              kEngineVariants[std::get<4>(info.param)]);
                         });

// The device path checks its seeds in the kernels: a seed out of range or listed twice in its
// batch makes wait() throw, and the engine keeps working afterwards.
TEST(EngineErrors, BadSeedsThrowOnWait) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "CUDA engine errors";
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const Graph& g = sample_test_csc();
  cuda::Stream stream;
  const ops::DeviceGraph dg(g, cuda::Placement::kGpu, {}, stream.get());
  const ops::DeviceNeighborSampler gpu(dg, {10, 5}, false);
  const std::vector<int64_t> bad = {1, 3000}, twice = {4, 9, 4}, good = {4, 9};
  DeviceCopy b(bad.data(), 16, 0, false), t(twice.data(), 24, 0, false),
      o(good.data(), 16, 0, false);
  auto p = [](const DeviceCopy& c) { return static_cast<const int64_t*>(c.data()); };
  const RngKey key = ops::make_rng_key(1, 0, 0, 0);
  TESSERA_EXPECT_THROW_MSG(gpu.sample_blocks(p(b), 2, key, stream.get()), IndexError,
                           "outside [0, 3000)");
  TESSERA_EXPECT_THROW_MSG(gpu.sample_blocks(p(t), 3, key, stream.get()), ValueError,
                           "listed twice");
  const ops::DeviceBlocks ok = gpu.sample_blocks(p(o), 2, key, stream.get());
  ops::NeighborSamplerOptions co;
  co.fanouts = {10, 5};
  expect_same_blocks(ops::download_blocks(ok, stream.get()),
                     ops::NeighborSampler(g, co).sample_blocks(good, key), "after the errors");
}

// A distributed owner's layout (docs/dist.md): rows by original ID, neighbors and seeds by new ID,
// draws keyed by the original ID. With a row map the engine's blocks are the CPU sampler's on the
// original graph, node IDs renamed.
TEST(EngineTwinRows, RowMapRenamesNodesKeepsDraws) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "the CPU side runs in test_sample_rows";
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const Graph& g = sample_test_csc();
  const int64_t n = g.num_nodes;
  std::vector<int64_t> orig_of(static_cast<size_t>(n)), new_of(static_cast<size_t>(n));
  std::iota(orig_of.begin(), orig_of.end(), 0);
  std::shuffle(orig_of.begin(), orig_of.end(), std::mt19937_64(5));
  for (int64_t v = 0; v < n; ++v)
    new_of[orig_of[v]] = v;
  Graph renamed = g;  // rows stay by original ID; neighbors become new IDs
  for (auto& u : renamed.indices)
    u = new_of[u];
  cuda::Stream stream;
  const ops::DeviceGraph dg(renamed, cuda::Placement::kGpu, {}, stream.get());
  DeviceCopy rows(orig_of.data(), orig_of.size() * 8, 0, false);
  ops::DeviceSamplerOptions so;
  so.rows.rows = static_cast<const int64_t*>(rows.data());
  so.rows.count = n;
  const ops::DeviceNeighborSampler gpu(dg, {15, 10, 5}, false, ops::EdgeDir::kIn, so);
  ops::NeighborSamplerOptions co;
  co.fanouts = {15, 10, 5};
  const ops::NeighborSampler cpu(g, co);
  std::vector<int64_t> orig_seeds(orig_of.begin(), orig_of.begin() + 300), new_seeds;
  for (int64_t v : orig_seeds)
    new_seeds.push_back(new_of[v]);
  DeviceCopy d(new_seeds.data(), new_seeds.size() * 8, 0, false);
  const RngKey key = ops::make_rng_key(3, 1, 4, 0);
  std::vector<ops::Block> got = ops::download_blocks(
      gpu.sample_blocks(static_cast<const int64_t*>(d.data()), 300, key, stream.get()),
      stream.get());
  std::vector<ops::Block> want = cpu.sample_blocks(orig_seeds, key);
  for (auto& b : want)
    for (auto& v : b.src_nodes)
      v = new_of[v];
  expect_same_blocks(got, want, "row map");
  // An exclusion set names rows of the graph, which a row map renames: refused, not misapplied.
  const std::vector<int64_t> ex_rows = {new_seeds[0]}, ex_eids = {0};
  const ops::ExcludeEdges ex(ex_rows, ex_eids);
  TESSERA_EXPECT_THROW_MSG(
      gpu.sample_blocks(static_cast<const int64_t*>(d.data()), 300, key, stream.get(), &ex),
      ValueError, "maps nodes to rows");
}

// One hop over a placed graph's view (the packed adjacency; through UVA the rows are read whole),
// with fanouts up to 300 (one thread per seed above 256), batches of 1 seed, and seed_rows: the
// rows sampled and keyed apart from the IDs written.
class OneHopViewTwin
    : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool, cuda::Placement>> {};

TEST_P(OneHopViewTwin, MatchesCpuBitForBit) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "the CPU side runs in test_sample_rows";
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [fanout, replace, dir_in, weighted, placement] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<float> w = sample_test_weights(g);
  const std::vector<int64_t> seeds = sample_test_seeds();
  ops::SampleOptions o = sample_test_options(fanout, replace, dir_in);
  const ops::SamplingGraph sg = ops::SamplingGraph::as_stored(
      g, weighted ? ops::Span<const float>(w) : ops::Span<const float>());
  const ops::SampledEdges cpu = ops::sample_neighbors(sg, seeds, o);
  cuda::Stream stream;
  ops::DeviceGraphOptions go;
  go.split_arrays = false;
  const ops::DeviceGraph dg(g, placement,
                            weighted ? ops::Span<const float>(w) : ops::Span<const float>(),
                            stream.get(), go);
  DeviceCopy d_seeds(seeds.data(), seeds.size() * 8, 0, false);
  const auto* sp = static_cast<const int64_t*>(d_seeds.data());
  const int64_t n = static_cast<int64_t>(seeds.size());
  expect_same_edges(
      cuda::sample_neighbors_impl(dg.view(), sp, n, fanout, replace, dir_in, o.key, stream.get()),
      cpu, stream.get());
  // One seed (the hub), weighted when the graph is.
  const ops::SampledEdges cpu1 = ops::sample_neighbors(sg, std::vector<int64_t>{7}, o);
  expect_same_edges(
      cuda::sample_neighbors_impl(dg.view(), sp, 1, fanout, replace, dir_in, o.key, stream.get()),
      cpu1, stream.get());
  // seed_rows: the IDs written are the rows + 10^6.
  std::vector<int64_t> written(seeds);
  for (auto& v : written)
    v += 1000000;
  DeviceCopy d_written(written.data(), written.size() * 8, 0, false);
  ops::SampledEdges want = cpu;
  for (int64_t i = 0; i < want.size(); ++i)
    (dir_in ? want.dst[i] : want.src[i]) += 1000000;
  expect_same_edges(
      cuda::sample_neighbors_impl(dg.view(), static_cast<const int64_t*>(d_written.data()), n,
                                  fanout, replace, dir_in, o.key, stream.get(), nullptr, sp),
      want, stream.get());
}

INSTANTIATE_TEST_SUITE_P(View, OneHopViewTwin,
                         ::testing::Combine(::testing::Values(int64_t{-1}, int64_t{1}, int64_t{5},
                                                              int64_t{25}, int64_t{300}),
                                            ::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(cuda::Placement::kGpu,
                                                              cuda::Placement::kPinnedHost)),
                         [](const auto& info) {
                           const int64_t f = std::get<0>(info.param);
                           return fmt::format("{}_{}_fanout_{}_{}_{}_{}", backend_name(kBackend),
                                              std::get<3>(info.param) ? "weighted" : "uniform",
                                              f < 0 ? std::string("all") : std::to_string(f),
                                              std::get<1>(info.param) ? "replace" : "noreplace",
                                              std::get<2>(info.param) ? "in" : "out",
                                              cuda::placement_name(std::get<4>(info.param)));
                         });

#if !TESSERA_WITH_CUDA
// Without CUDA the GPU sampler says so at construction, whatever the placement.
TEST(DeviceSamplerCpuBuild, ConstructionNamesTheMissingCuda) {
  const Graph& g = sample_test_csc();
  ops::NeighborSamplerOptions o;
  o.fanouts = {5};
  ops::SamplingGraphOptions on_gpu;
  on_gpu.device = ops::Device::kCuda;
  EXPECT_THROW(ops::NeighborSampler(g, o, on_gpu), NotCompiledError);
  EXPECT_THROW(ops::DeviceGraph(g, cuda::Placement::kGpu), NotCompiledError);
  EXPECT_THROW(ops::SamplingGraph(g, on_gpu), NotCompiledError);
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
