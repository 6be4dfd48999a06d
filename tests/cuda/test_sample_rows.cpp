// The per-row functions of the CUDA sampling kernels (tessera/cuda/sample_rows.hpp), run on the
// CPU by a driver shaped like the kernels (count per seed, exclusive scans, positions into the
// seed's output slice, then edges), must give exactly ops::sample_neighbors: uniform and
// weighted, with and without replacement, in and out, fanouts -1..100, zero weights, rows whose
// weights are all zero, a hub with heavy-tailed weights (retries exhausted: the exact walk) and
// repeated seeds; and the same with an edge-exclusion set (rows that lose every edge, the hub
// losing many, excluded IDs that are not in their row, duplicate pairs, rows left with only
// zero weights). This runs in CI; the GPU run of the same kernels is in test_sample.cpp (gpu).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
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

// The view the kernels get of an exclusion set (here over its host arrays); none when null.
cuda::rows::ExcludeView view_of(const ops::ExcludeEdges* ex) {
  cuda::rows::ExcludeView v;
  if (ex == nullptr || ex->empty()) return v;
  v.rows = ex->rows().data();
  v.offsets = ex->offsets().data();
  v.eids = ex->eids().data();
  v.num_rows = ex->rows().size();
  return v;
}

// Exclusive scan of counts[0, n) into off[0, n] (off[n] = the total), as the CUB scan does.
std::vector<int64_t> exclusive_scan(const std::vector<int64_t>& counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i)
    off[i + 1] = off[i] + counts[i];
  return off;
}

// What the driver saw: candidate scratch entries (total) and the seeds that used some.
struct DriverStats {
  int64_t scratch = 0;
  int64_t scratch_seeds = 0;
};

// The kernels' schedule on the CPU (cuda/src/sample.cu: count_kernel, the scans, one
// allocation of the outputs and of the candidate scratch, sample_kernel): pass 1 counts each
// seed's edges and scratch entries (rows::seed_counts), the scans place each seed's output and
// scratch slices, pass 2 writes the seed's storage positions into its output slice
// (rows::seed_positions, which fills the scratch slice for a seed with exclusions) and turns
// them into edges.
ops::SampledEdges sample_by_rows(const Graph& g, const float* w, const double* cdf,
                                 const std::vector<int64_t>& seeds, int64_t fanout, bool replace,
                                 bool dir_in, const RngKey& key_in,
                                 const ops::ExcludeEdges* exclude = nullptr,
                                 DriverStats* stats = nullptr) {
  RngKey key = key_in;
  key.stream = RngStream::kNeighbor;
  const cuda::rows::ExcludeView ex = view_of(exclude);
  const int64_t* eids = g.eids.empty() ? nullptr : g.eids.data();
  const int64_t n = static_cast<int64_t>(seeds.size());
  std::vector<int64_t> counts(static_cast<size_t>(n)), scounts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {  // count_kernel
    const cuda::rows::SeedCounts c =
        cuda::rows::seed_counts(g.indptr.data(), eids, w, ex, seeds[i], fanout, replace);
    counts[i] = c.edges;
    scounts[i] = c.scratch;
  }
  const std::vector<int64_t> off = exclusive_scan(counts), soff = exclusive_scan(scounts);
  ops::SampledEdges out;
  out.src.resize(static_cast<size_t>(off[n]));
  out.dst.resize(out.src.size());
  out.eid.resize(out.src.size());
  std::vector<int64_t> cand(static_cast<size_t>(soff[n]));
  std::vector<float> cand_w(w ? cand.size() : 0);
  std::vector<double> cand_cdf(w ? cand.size() : 0);
  if (stats) {
    stats->scratch = soff[n];
    for (int64_t c : scounts)
      stats->scratch_seeds += c > 0;
  }
  for (int64_t i = 0; i < n; ++i) {  // sample_kernel
    const int64_t v = seeds[i];
    const int64_t o = off[i], cnt = off[i + 1] - o;
    if (cnt == 0) continue;
    const int64_t so = soff[i], scnt = soff[i + 1] - so;
    int64_t* pos = out.eid.data() + o;
    cuda::rows::seed_positions(key, g.indptr.data(), eids, w, cdf, ex, v, fanout, replace, cnt,
                               scnt, cand.data() + so, w ? cand_w.data() + so : nullptr,
                               w ? cand_cdf.data() + so : nullptr, pos);
    for (int64_t t = 0; t < cnt; ++t) {
      const int64_t k = pos[t];
      out.src[o + t] = dir_in ? g.indices[k] : v;
      out.dst[o + t] = dir_in ? v : g.indices[k];
      pos[t] = eids ? eids[k] : k;
    }
  }
  return out;
}

// The graph (CSC for in, CSR for out), its weights and prefix sums, and the options of one
// (fanout, replace, dir_in) case; both suites below start from it.
struct RowCase {
  const Graph& g;
  const std::vector<float>& w;
  const std::vector<double>& cdf;
  ops::SampleOptions o;
};

RowCase row_case(int64_t fanout, bool replace, bool dir_in) {
  const RowsFixture& f = fixture();
  return {dir_in ? sample_test_csc() : sample_test_csr(), dir_in ? f.w_csc : f.w_csr,
          dir_in ? f.cdf_csc : f.cdf_csr, sample_test_options(fanout, replace, dir_in)};
}

void expect_same_sample(const ops::SampledEdges& rows, const ops::SampledEdges& cpu) {
  ASSERT_EQ(rows.size(), cpu.size());
  EXPECT_EQ(rows.src, cpu.src);
  EXPECT_EQ(rows.dst, cpu.dst);
  EXPECT_EQ(rows.eid, cpu.eid);
}

class SampleRows : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool>> {};

TEST_P(SampleRows, KernelRowLogicMatchesCpuTwin) {
  const auto [fanout, replace, dir_in, weighted] = GetParam();
  auto [g, w, cdf, o] = row_case(fanout, replace, dir_in);
  const std::vector<int64_t> seeds = sample_test_seeds();
  if (weighted) o.weights = w;  // the CPU twin re-adds the weights: prefix sums are not given
  const ops::SampledEdges cpu = ops::sample_neighbors(g, seeds, o);
  const ops::SampledEdges rows =
      sample_by_rows(g, weighted ? w.data() : nullptr, weighted ? cdf.data() : nullptr, seeds,
                     fanout, replace, dir_in, o.key);
  expect_same_sample(rows, cpu);
  if (weighted && fanout > 0) {  // the zero-weight rows and edges were never drawn
    for (int64_t i = 0; i < rows.size(); ++i)
      EXPECT_NE(dir_in ? rows.dst[i] : rows.src[i], 11);
  }
}

// Both suites run over (fanout, replace, dir_in, weighted) with these values and names.
const auto kRowCases = ::testing::Combine(
    ::testing::Values(int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{5}, int64_t{25}, int64_t{100}),
    ::testing::Bool(), ::testing::Bool(), ::testing::Bool());
std::string row_case_name(
    const ::testing::TestParamInfo<std::tuple<int64_t, bool, bool, bool>>& info) {
  const int64_t f = std::get<0>(info.param);
  return fmt::format("{}_fanout_{}_{}_{}", std::get<3>(info.param) ? "weighted" : "uniform",
                     f < 0 ? std::string("all") : std::to_string(f),
                     std::get<1>(info.param) ? "replace" : "noreplace",
                     std::get<2>(info.param) ? "in" : "out");
}

INSTANTIATE_TEST_SUITE_P(All, SampleRows, kRowCases, row_case_name);

// The hub's heavy-tailed row exhausts the redraws: the exact walk over the remaining weight
// must run (and still match). A row with 8 weights of 1e6 among 700 of 1e-3, fanout 25: after
// the 8 heavy ones nearly every redraw hits a taken one.
// The fixture has what the cases rely on: degree-0 rows (nodes >= 2500, among the seeds) in both
// directions, and the hub.
TEST(SampleRows, FixtureHasDegreeZeroRowsAndTheHub) {
  for (const Graph* g : {&sample_test_csc(), &sample_test_csr()}) {
    for (int64_t v = 2500; v < 3000; ++v)
      EXPECT_EQ(g->indptr[v + 1], g->indptr[v]) << "node " << v;
    EXPECT_GT(g->indptr[8] - g->indptr[7], 600);
  }
  const std::vector<int64_t> seeds = sample_test_seeds();
  EXPECT_GT(std::count_if(seeds.begin(), seeds.end(), [](int64_t v) { return v >= 2500; }), 100);
}

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

// ---- Edge exclusion ---------------------------------------------------------------------------

class SampleRowsExclude : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool>> {};

TEST_P(SampleRowsExclude, KernelRowLogicMatchesCpuTwin) {
  const auto [fanout, replace, dir_in, weighted] = GetParam();
  auto [g, w, cdf, o] = row_case(fanout, replace, dir_in);
  const std::vector<int64_t> seeds = sample_test_exclusion_seeds();
  const ops::ExcludeEdges ex = sample_test_exclusion(g, w, seeds);
  if (weighted) {
    o.weights = w;
    o.weight_prefix = cdf;  // used for rows without exclusions; ignored for the others
  }
  o.exclude = &ex;
  const ops::SampledEdges cpu = ops::sample_neighbors(g, seeds, o);
  DriverStats st;
  const ops::SampledEdges rows =
      sample_by_rows(g, weighted ? w.data() : nullptr, weighted ? cdf.data() : nullptr, seeds,
                     fanout, replace, dir_in, o.key, &ex, &st);
  expect_same_sample(rows, cpu);

  // The cases are not vacuous: rows with exclusions took the scratch path, no excluded edge of
  // a sampled row came out, and the exclusions changed the sample.
  if (fanout != 0) {
    EXPECT_GT(st.scratch_seeds, 20);
  } else {
    EXPECT_EQ(st.scratch, 0);
    EXPECT_EQ(rows.size(), 0);
  }
  for (int64_t i = 0; i < rows.size(); ++i) {
    const int64_t r = dir_in ? rows.dst[i] : rows.src[i];
    auto [first, last] = ex.row_eids(r);
    EXPECT_FALSE(std::binary_search(first, last, rows.eid[i]))
        << "excluded edge " << rows.eid[i] << " of row " << r << " was sampled";
    EXPECT_NE(r, 20);
    EXPECT_NE(r, 21);
    if (weighted) {
      EXPECT_NE(r, 24);
    }
  }
  if (fanout != 0) {
    ops::SampleOptions plain = o;
    plain.exclude = nullptr;
    const ops::SampledEdges without = ops::sample_neighbors(g, seeds, plain);
    EXPECT_NE(without.eid, cpu.eid);
  }
}

INSTANTIATE_TEST_SUITE_P(All, SampleRowsExclude, kRowCases, row_case_name);

// The per-seed counts of rows::seed_counts on the special rows of the exclusion set (CSC,
// uniform, fanout -1): a row that loses every edge yields nothing and needs no scratch; a row
// whose listed IDs are all other rows' keeps its whole row without scratch; the hub keeps
// two thirds of its edges and needs one scratch entry per kept edge.
TEST(SampleRowsExclude, SeedCountsOfSpecialRows) {
  const Graph& g = sample_test_csc();
  const RowsFixture& f = fixture();
  const std::vector<int64_t> seeds = sample_test_exclusion_seeds();
  const ops::ExcludeEdges ex = sample_test_exclusion(g, f.w_csc, seeds);
  const cuda::rows::ExcludeView v = view_of(&ex);
  const int64_t* eids = g.eids.data();
  auto deg = [&](int64_t r) { return g.indptr[r + 1] - g.indptr[r]; };
  auto counts = [&](int64_t r) {
    return cuda::rows::seed_counts(g.indptr.data(), eids, nullptr, v, r, -1, false);
  };
  ASSERT_GT(deg(20), 0);
  EXPECT_EQ(counts(20).edges, 0);
  EXPECT_EQ(counts(20).scratch, 0);
  ASSERT_GT(deg(23), 0);
  EXPECT_EQ(counts(23).edges, deg(23));
  EXPECT_EQ(counts(23).scratch, 0);
  const int64_t hub_kept = deg(7) - (deg(7) + 2) / 3;
  EXPECT_EQ(counts(7).edges, hub_kept);
  EXPECT_EQ(counts(7).scratch, hub_kept);
  EXPECT_EQ(counts(26).edges, deg(26) - 1);  // one edge, listed three times
  // Without the exclusion view nothing changes.
  const cuda::rows::SeedCounts none = cuda::rows::seed_counts(
      g.indptr.data(), eids, nullptr, cuda::rows::ExcludeView{}, 7, -1, false);
  EXPECT_EQ(none.edges, deg(7));
  EXPECT_EQ(none.scratch, 0);
}

}  // namespace
}  // namespace tessera::test
