// CUDA twin of uniform neighbor sampling against the CPU twin (ops::sample_neighbors), bit for
// bit: {fanout -1, 0, 1, 5, 25, 100} x {with, without replacement} x {in, out} on a random
// graph with degree-0 nodes, a hub (Floyd with k > 64 on the CPU's bitmap path) and repeated
// seeds; also an empty seed list. CUDA cases only; the CPU twin's own contract is tested in
// tests/host/ops.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>

#include "tessera/core/error.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera_test.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

Graph test_graph() {
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
  Graph g = build_csc(std::move(e), o);
  return g;
}

class SampleTwin : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool>> {};

TEST_P(SampleTwin, UniformMatchesCpuBitForBit) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "the CPU twin is tested in tests/host/ops";
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto [fanout, replace, dir_in] = GetParam();
  static const Graph csc = test_graph();
  static const Graph csr = transpose(csc);
  const Graph& g = dir_in ? csc : csr;
  std::mt19937_64 rng(3);
  std::vector<int64_t> seeds(1500);
  for (auto& s : seeds)
    s = static_cast<int64_t>(rng() % 3000);
  seeds[0] = 7;
  seeds[1] = 7;
  seeds[2] = 2999;
  ops::SampleOptions o;
  o.fanout = fanout;
  o.replace = replace;
  o.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  o.key = ops::make_rng_key(12345, 2, 17, 1);
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
  ASSERT_EQ(gpu.size, cpu.size());
  auto download = [&](const int64_t* d) {
    std::vector<int64_t> h(static_cast<size_t>(gpu.size));
    cuda::copy_async(h.data(), d, h.size() * 8, stream.get());
    stream.synchronize();
    return h;
  };
  if (gpu.size == 0) return;
  EXPECT_EQ(download(gpu.src_ptr()), cpu.src);
  EXPECT_EQ(download(gpu.dst_ptr()), cpu.dst);
  EXPECT_EQ(download(gpu.eid_ptr()), cpu.eid);
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

// Block compaction: the CUDA twin's src_nodes / src / dst equal the CPU twin's on sampled
// edges (several hops' worth of repeated sources), including no edges and no destinations.
class BlockTwin : public ::testing::TestWithParam<int64_t> {};

TEST_P(BlockTwin, ToBlockMatchesCpuBitForBit) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "the CPU twin is tested in tests/host/ops";
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const int64_t num_seeds = GetParam();
  static const Graph g = test_graph();
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
  auto download = [&](const int64_t* d, int64_t n) {
    std::vector<int64_t> h(static_cast<size_t>(n));
    if (n) cuda::copy_async(h.data(), d, h.size() * 8, stream.get());
    stream.synchronize();
    return h;
  };
  EXPECT_EQ(download(b.src_nodes_ptr(), b.num_src), cpu.src_nodes);
  EXPECT_EQ(download(b.src_ptr(), b.num_edges), cpu.src);
  EXPECT_EQ(download(b.dst_ptr(), b.num_edges), cpu.dst);
}

INSTANTIATE_TEST_SUITE_P(Seeds, BlockTwin, ::testing::Values(0, 1, 17, 1024, 3000),
                         [](const auto& info) {
                           return fmt::format("{}_seeds{}", backend_name(kBackend), info.param);
                         });

TEST(BlockTwinErrors, SameMessagesAsCpu) {
  if (kBackend != Backend::kCuda) GTEST_SKIP() << "CUDA twin errors";
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
