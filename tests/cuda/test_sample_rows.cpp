// The per-row functions of the CUDA sampling kernels (tessera/cuda/sample_rows.hpp), run on the
// CPU by a driver shaped like the kernels (count per seed, exclusive scan, positions into the
// seed's output slice, then edges), must give exactly ops::sample_neighbors: uniform and
// weighted, with and without replacement, in and out, fanouts -1..100, zero weights, rows whose
// weights are all zero, a hub with heavy-tailed weights (retries exhausted: the exact walk) and
// repeated seeds. This runs in CI; the GPU run of the same kernels is in test_sample.cpp (gpu).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sample_fixture.hpp"
#include "tessera/cuda/sample_rows.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::test {
namespace {

struct RowsFixture {
  std::vector<float> w_csc, w_csr;       // storage order
  std::vector<double> cdf_csc, cdf_csr;  // ops::weight_prefix_sums
};

const RowsFixture& fixture() {
  static const RowsFixture f = [] {
    RowsFixture r;
    r.w_csc = sample_test_weights(sample_test_csc());
    r.w_csr = sample_test_weights(sample_test_csr());
    r.cdf_csc = ops::weight_prefix_sums(sample_test_csc(), r.w_csc);
    r.cdf_csr = ops::weight_prefix_sums(sample_test_csr(), r.w_csr);
    return r;
  }();
  return f;
}

// The kernels' schedule on the CPU: pass 1 counts, a scan places each seed's slice, pass 2
// writes positions into the slice and turns them into edges.
ops::SampledEdges sample_by_rows(const Graph& g, const float* w, const double* cdf,
                                 const std::vector<int64_t>& seeds, int64_t fanout, bool replace,
                                 bool dir_in, const RngKey& key_in) {
  RngKey key = key_in;
  key.stream = RngStream::kNeighbor;
  const int64_t n = static_cast<int64_t>(seeds.size());
  std::vector<int64_t> off(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = seeds[i], b = g.indptr[v], d = g.indptr[v + 1] - b;
    off[i + 1] = off[i] + (w ? cuda::rows::weighted_count(w + b, d, fanout, replace)
                             : cuda::rows::uniform_count(d, fanout, replace));
  }
  ops::SampledEdges out;
  out.src.resize(static_cast<size_t>(off[n]));
  out.dst.resize(out.src.size());
  out.eid.resize(out.src.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = seeds[i], b = g.indptr[v], d = g.indptr[v + 1] - b;
    const int64_t o = off[i], cnt = off[i + 1] - o;
    int64_t* pos = out.eid.data() + o;
    if (w)
      cuda::rows::weighted_positions(key, static_cast<uint64_t>(v), w + b, cdf + b, d, cnt, fanout,
                                     replace, pos);
    else
      cuda::rows::uniform_positions(key, static_cast<uint64_t>(v), d, cnt, fanout, replace, pos);
    for (int64_t t = 0; t < cnt; ++t) {
      const int64_t k = b + pos[t];
      out.src[o + t] = dir_in ? g.indices[k] : v;
      out.dst[o + t] = dir_in ? v : g.indices[k];
      pos[t] = g.eids.empty() ? k : g.eids[k];
    }
  }
  return out;
}

class SampleRows : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool>> {};

TEST_P(SampleRows, KernelRowLogicMatchesCpuTwin) {
  const auto [fanout, replace, dir_in, weighted] = GetParam();
  const RowsFixture& f = fixture();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const std::vector<float>& w = dir_in ? f.w_csc : f.w_csr;
  const std::vector<double>& cdf = dir_in ? f.cdf_csc : f.cdf_csr;
  const std::vector<int64_t> seeds = sample_test_seeds();
  ops::SampleOptions o = sample_test_options(fanout, replace, dir_in);
  if (weighted) o.weights = w;  // the CPU twin re-adds the weights: prefix sums are not given
  const ops::SampledEdges cpu = ops::sample_neighbors(g, seeds, o);
  const ops::SampledEdges rows =
      sample_by_rows(g, weighted ? w.data() : nullptr, weighted ? cdf.data() : nullptr, seeds,
                     fanout, replace, dir_in, o.key);
  ASSERT_EQ(rows.size(), cpu.size());
  EXPECT_EQ(rows.src, cpu.src);
  EXPECT_EQ(rows.dst, cpu.dst);
  EXPECT_EQ(rows.eid, cpu.eid);
  if (weighted && fanout > 0) {  // the zero-weight rows and edges were never drawn
    for (int64_t i = 0; i < rows.size(); ++i)
      EXPECT_NE(dir_in ? rows.dst[i] : rows.src[i], 11);
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, SampleRows,
    ::testing::Combine(::testing::Values(int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{5},
                                         int64_t{25}, int64_t{100}),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool()),
    [](const auto& info) {
      const int64_t f = std::get<0>(info.param);
      return fmt::format("{}_fanout_{}_{}_{}", std::get<3>(info.param) ? "weighted" : "uniform",
                         f < 0 ? std::string("all") : std::to_string(f),
                         std::get<1>(info.param) ? "replace" : "noreplace",
                         std::get<2>(info.param) ? "in" : "out");
    });

// The hub's heavy-tailed row exhausts the redraws: the exact walk over the remaining weight
// must run (and still match). A row with 8 weights of 1e6 among 700 of 1e-3, fanout 25: after
// the 8 heavy ones nearly every redraw hits a taken one.
TEST(SampleRows, HeavyTailedRowTakesTheExactWalk) {
  const RowsFixture& f = fixture();
  const int64_t b = sample_test_csc().indptr[7], d = sample_test_csc().indptr[8] - b;
  ASSERT_GT(d, 600);
  RngKey key = ops::make_rng_key(5, 0, 0, 0);
  key.stream = RngStream::kNeighbor;
  const int64_t cnt = cuda::rows::weighted_count(f.w_csc.data() + b, d, 25, false);
  ASSERT_EQ(cnt, 25);
  std::vector<int64_t> pos(static_cast<size_t>(cnt));
  cuda::rows::weighted_positions(key, 7, f.w_csc.data() + b, f.cdf_csc.data() + b, d, cnt, 25,
                                 false, pos.data());
  int heavy = 0;
  for (int64_t i = 0; i < cnt; ++i) {
    if (i > 0) {
      EXPECT_LT(pos[i - 1], pos[i]);  // sorted, no repeats
    }
    heavy += f.w_csc[b + pos[i]] > 1.0f;
  }
  // Every heavy neighbor (weight share ~ 1 - 1e-7 of the row) is taken first; the rest of the
  // picks came from light ones, which only the exact walk reaches within 16 redraws.
  int heavy_total = 0;
  for (int64_t k = b; k < b + d; ++k)
    heavy_total += f.w_csc[k] > 1.0f;
  EXPECT_EQ(heavy, heavy_total);
  EXPECT_GT(cnt - heavy, 0);
}

}  // namespace
}  // namespace tessera::test
