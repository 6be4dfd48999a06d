// SPDX-License-Identifier: Apache-2.0
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
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sample_fixture.hpp"
#include "tessera/cuda/sample_group.hpp"
#include "tessera/cuda/sample_items.hpp"
#include "tessera/cuda/sample_rows.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/sampler.hpp"

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
  // The CPU twin re-adds the weights: the graph as stored, no prefix sums.
  const ops::SampledEdges cpu =
      ops::sample_neighbors(ops::SamplingGraph::as_stored(
                                g, weighted ? ops::Span<const float>(w) : ops::Span<const float>()),
                            seeds, o);
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

// Rows stored under numbers of their own and keyed by their nodes (GraphView::row_keys, what a
// distributed owner places): row r of the keyed graph is node keys[r] of the whole graph, and the
// kernels' items (group and one-thread) must draw for it exactly what they draw for that node.
struct KeyedRows {
  std::vector<int64_t> keys, indptr, indices, eids, info;
  std::vector<float> w;
  std::vector<double> cdf;
};

KeyedRows keyed_rows(const Graph& g, const std::vector<float>& w, const std::vector<double>& cdf,
                     const std::vector<int64_t>& info) {
  KeyedRows k;
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    if (v % 3 != 1) {
      k.keys.push_back(v);  // a third of the nodes belong to someone else
    }
  }
  std::shuffle(k.keys.begin(), k.keys.end(), std::mt19937_64(11));
  k.indptr.push_back(0);
  for (const int64_t v : k.keys) {
    for (int64_t e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
      k.indices.push_back(g.indices[e]);
      k.eids.push_back(g.eids.empty() ? e : g.eids[e]);
      k.w.push_back(w[e]);
      k.cdf.push_back(cdf[e]);  // per-row sums from each row's start: they move with the row
    }
    k.info.push_back(info[2 * v]);
    k.info.push_back(info[2 * v + 1]);
    k.indptr.push_back(static_cast<int64_t>(k.indices.size()));
  }
  return k;
}

class SampleRowKeys : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool>> {};

TEST_P(SampleRowKeys, KeyedRowsDrawAsTheirNodes) {
  namespace it = cuda::items;
  namespace gr = cuda::group;
  // Named copies: the lambda below may not capture structured bindings (C++17).
  const int64_t fanout = std::get<0>(GetParam());
  const bool replace = std::get<1>(GetParam());
  const bool weighted = std::get<3>(GetParam());
  auto [g, w, cdf, o] = row_case(fanout, replace, std::get<2>(GetParam()));
  std::vector<int64_t> info(2 * static_cast<size_t>(g.num_nodes));
  for (int64_t v = 0; v < g.num_nodes; ++v) {  // {positive weights, last positive position}
    for (int64_t e = g.indptr[v]; e < g.indptr[v + 1]; ++e) {
      if (w[e] > 0) {
        ++info[2 * v];
        info[2 * v + 1] = e - g.indptr[v];
      }
    }
  }
  const KeyedRows k = keyed_rows(g, w, cdf, info);
  cuda::GraphView whole, keyed;
  whole.num_nodes = g.num_nodes;
  whole.indptr = g.indptr.data();
  whole.indices = g.indices.data();
  whole.eids = g.eids.empty() ? nullptr : g.eids.data();
  keyed.num_nodes = static_cast<int64_t>(k.keys.size());
  keyed.indptr = k.indptr.data();
  keyed.indices = k.indices.data();
  keyed.eids = k.eids.data();
  keyed.row_keys = k.keys.data();
  if (weighted) {
    whole.weights = w.data();
    whole.prefix = cdf.data();
    whole.row_info = info.data();
    keyed.weights = k.w.data();
    keyed.prefix = k.cdf.data();
    keyed.row_info = k.info.data();
  }
  RngKey key = o.key;
  key.stream = RngStream::kNeighbor;
  const int64_t F = fanout < 0 ? 0 : fanout;  // -1 (all) draws nothing: its counts suffice
  const int G = gr::group_size(F);
  const gr::HostExec ex{G};
  const int64_t cap = std::max<int64_t>(gr::scratch_entries(F, G), 1);
  std::vector<int64_t> sa(static_cast<size_t>(cap)), sb(static_cast<size_t>(cap));
  gr::Scratch::State st;
  const gr::Scratch scr{sa.data(), sb.data(), &st};
  const cuda::rows::ExcludeView none;
  int64_t drawn = 0;
  // What an item emits for row `row` of `gv`: the group's draws, then one thread's.
  auto emit = [&](const cuda::GraphView& gv, int64_t row, bool thread) {
    const int64_t rb = gv.indptr[row], d = gv.indptr[row + 1] - rb;
    std::vector<int64_t> nbr(static_cast<size_t>(std::max<int64_t>(d, F)) + 1, -1);
    std::vector<int64_t> eid(nbr.size(), -1);
    it::PadEmit e;
    e.g = &gv;
    e.nbr = nbr.data();
    e.eid = eid.data();
    int64_t c = 0;
    if (thread) {
      c = weighted ? cuda::rows::weighted_count(gv.weights + rb, d, F, replace)
                   : cuda::rows::uniform_count(d, F, replace);
      it::sample_item_thread(gv, key, row, F, replace, none, c, 0, nullptr, nullptr, nullptr, e);
    } else if (weighted) {
      c = it::sample_item<true>(ex, gv, key, row, rb, d, F, replace, scr, e);
    } else {
      c = it::sample_item<false>(ex, gv, key, row, rb, d, F, replace, scr, e);
    }
    nbr.resize(static_cast<size_t>(c));
    eid.resize(static_cast<size_t>(c));
    return std::make_pair(nbr, eid);
  };
  for (int64_t r = 0; r < keyed.num_nodes; ++r) {
    const int64_t v = k.keys[r];
    for (const bool thread : {false, true}) {
      if (!thread && F > gr::kMaxGroupFanout) {
        continue;
      }
      const auto want = emit(whole, v, thread);
      EXPECT_EQ(emit(keyed, r, thread), want)
          << "row " << r << " (node " << v << ")" << (thread ? ", one thread" : ", a group");
      drawn += static_cast<int64_t>(want.first.size());
    }
  }
  if (F > 0) {
    EXPECT_GT(drawn, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(All, SampleRowKeys, kRowCases, row_case_name);

// Without its keys a reordered row draws as its row number: the keys are what decide.
TEST(SampleRowKeys, WithoutKeysTheDrawsDiffer) {
  namespace it = cuda::items;
  namespace gr = cuda::group;
  auto [g, w, cdf, o] = row_case(5, false, true);
  const std::vector<int64_t> info(2 * static_cast<size_t>(g.num_nodes));
  const KeyedRows k = keyed_rows(g, w, cdf, info);
  cuda::GraphView keyed;
  keyed.num_nodes = static_cast<int64_t>(k.keys.size());
  keyed.indptr = k.indptr.data();
  keyed.indices = k.indices.data();
  keyed.eids = k.eids.data();
  RngKey key = o.key;
  key.stream = RngStream::kNeighbor;
  const gr::HostExec ex{gr::group_size(5)};
  std::vector<int64_t> sa(64), sb(64);
  gr::Scratch::State st;
  const gr::Scratch scr{sa.data(), sb.data(), &st};
  int differ = 0;
  for (int64_t r = 0; r < keyed.num_nodes; ++r) {
    const int64_t rb = k.indptr[r], d = k.indptr[r + 1] - rb;
    if (d <= 5) {
      continue;  // a row that keeps every edge draws nothing
    }
    std::vector<int64_t> a(5), ae(5), b(5), be(5);
    it::PadEmit e;
    e.g = &keyed;
    e.nbr = a.data();
    e.eid = ae.data();
    it::sample_item<false>(ex, keyed, key, r, rb, d, 5, false, scr, e);
    keyed.row_keys = k.keys.data();
    e.nbr = b.data();
    e.eid = be.data();
    it::sample_item<false>(ex, keyed, key, r, rb, d, 5, false, scr, e);
    keyed.row_keys = nullptr;
    differ += a != b;
  }
  EXPECT_GT(differ, 0);
}

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

// ---- Groups of lanes per row ------------------------------------------------------------------
// The group kernels (cuda/src/sample_neighbors.cu) sample a row with G lanes that draw and search
// in parallel and meet between steps (tessera/cuda/sample_group.hpp). HostExec runs each step's
// lanes one after another, which is what the group computes; the result must be the CPU twin's.

// Per row {positive weights, last positive position}: the table ops::DeviceGraph places.
std::vector<int64_t> row_info_of(const Graph& g, const std::vector<float>& w) {
  std::vector<int64_t> info(2 * static_cast<size_t>(g.num_nodes), 0);
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    const int64_t b = g.indptr[v], d = g.indptr[v + 1] - b;
    int64_t p = 0, last = d > 0 ? d - 1 : 0;
    for (int64_t k = b; k < b + d; ++k)
      p += w[k] > 0;
    while (last > 0 && !(w[b + last] > 0))
      --last;
    info[2 * v] = p;
    info[2 * v + 1] = last;
  }
  return info;
}

// What the group kernel does per seed on the CPU: the row's count, then uniform_row or
// weighted_row emitting (slot, row offset) into the seed's output slice. `info` null: the group
// counts the positive weights itself (positive_scan), as the kernels do without a row table.
ops::SampledEdges sample_by_groups(const Graph& g, const float* w, const double* cdf,
                                   const int64_t* info, const std::vector<int64_t>& seeds,
                                   int64_t fanout, bool replace, bool dir_in, const RngKey& key_in,
                                   int G) {
  RngKey key = key_in;
  key.stream = RngStream::kNeighbor;
  const cuda::group::HostExec ex{G};
  const int64_t cap = cuda::group::scratch_entries(fanout, G);
  std::vector<int64_t> a(static_cast<size_t>(cap)), b(static_cast<size_t>(cap));
  cuda::group::Scratch::State st;
  cuda::group::Scratch s{a.data(), b.data(), &st};
  ops::SampledEdges out;
  for (const int64_t v : seeds) {
    const int64_t rb = g.indptr[v], d = g.indptr[v + 1] - rb;
    int64_t p = 0, last = 0, cnt = 0;
    if (w && d > 0 && fanout != 0) {
      if (info) {
        p = info[2 * v];
        last = info[2 * v + 1];
      } else {
        cuda::group::positive_scan(ex, w + rb, d, s);
        p = st.n;
        last = st.last;
      }
      cnt = cuda::rows::weighted_count_of(p, fanout, replace);
    } else if (!w) {
      cnt = cuda::rows::uniform_count(d, fanout, replace);
    }
    std::vector<int64_t> pos(static_cast<size_t>(cnt), -1);
    auto emit = [&](int64_t q, int64_t off) {
      ASSERT_GE(q, 0);
      ASSERT_LT(q, cnt);
      EXPECT_EQ(pos[q], -1) << "slot " << q << " of seed " << v << " written twice";
      pos[q] = off;
    };
    if (w)
      cuda::group::weighted_row(ex, key, static_cast<uint64_t>(v), w + rb, cdf + rb, d, p, last,
                                cnt, fanout, replace, s, emit);
    else
      cuda::group::uniform_row(ex, key, static_cast<uint64_t>(v), d, cnt, fanout, replace, s, emit);
    for (int64_t q = 0; q < cnt; ++q) {
      const int64_t k = rb + pos[q];
      out.src.push_back(dir_in ? g.indices[k] : v);
      out.dst.push_back(dir_in ? v : g.indices[k]);
      out.eid.push_back(g.eid(k));
    }
  }
  return out;
}

class SampleGroups
    : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool, int, bool>> {};

TEST_P(SampleGroups, GroupRowLogicMatchesCpuTwin) {
  const auto [fanout, replace, dir_in, weighted, G, with_info] = GetParam();
  auto [g, w, cdf, o] = row_case(fanout, replace, dir_in);
  const std::vector<int64_t> seeds = sample_test_seeds();
  const ops::SampledEdges cpu =
      ops::sample_neighbors(ops::SamplingGraph::as_stored(
                                g, weighted ? ops::Span<const float>(w) : ops::Span<const float>()),
                            seeds, o);
  const std::vector<int64_t> info = row_info_of(g, w);
  const ops::SampledEdges groups = sample_by_groups(
      g, weighted ? w.data() : nullptr, weighted ? cdf.data() : nullptr,
      weighted && with_info ? info.data() : nullptr, seeds, fanout, replace, dir_in, o.key, G);
  expect_same_sample(groups, cpu);
}

INSTANTIATE_TEST_SUITE_P(All, SampleGroups,
                         ::testing::Combine(::testing::Values(int64_t{-1}, int64_t{0}, int64_t{1},
                                                              int64_t{5}, int64_t{15}, int64_t{25},
                                                              int64_t{100}),
                                            ::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(1, 4, 16, 32), ::testing::Bool()),
                         [](const auto& info) {
                           const int64_t f = std::get<0>(info.param);
                           return fmt::format("{}_fanout_{}_{}_{}_G{}{}",
                                              std::get<3>(info.param) ? "weighted" : "uniform",
                                              f < 0 ? std::string("all") : std::to_string(f),
                                              std::get<1>(info.param) ? "replace" : "noreplace",
                                              std::get<2>(info.param) ? "in" : "out",
                                              std::get<4>(info.param),
                                              std::get<5>(info.param) ? "_rowinfo" : "");
                         });

// Floyd's repeats through a chain: a row just above the fanout (d = k + 1 .. 2k), where draws at
// the top of the range hit positions taken by earlier repeats. Every (d, k) up to 40 and many
// nodes: the group's picks equal rows::uniform_positions (the one-thread form the CPU twin
// matches) for G = 4 and 32.
TEST(SampleGroups, FloydChainsMatchTheSequentialPicks) {
  RngKey key = ops::make_rng_key(3, 1, 4, 1);
  key.stream = RngStream::kNeighbor;
  int chains = 0;
  for (const int G : {4, 32}) {
    const cuda::group::HostExec ex{G};
    std::vector<int64_t> a(64), b(64), want(64);
    cuda::group::Scratch::State st;
    cuda::group::Scratch s{a.data(), b.data(), &st};
    for (int64_t k = 1; k <= 40; ++k)
      for (int64_t d = k + 1; d <= 2 * k + 2; ++d)
        for (uint64_t node = 0; node < 40; ++node) {
          cuda::rows::uniform_positions(key, node, d, k, k, false, want.data());
          std::vector<int64_t> got(static_cast<size_t>(k), -1);
          cuda::group::uniform_row(ex, key, node, d, k, k, false, s,
                                   [&](int64_t q, int64_t p) { got[q] = p; });
          ASSERT_EQ(got, std::vector<int64_t>(want.begin(), want.begin() + k))
              << "d " << d << " k " << k << " node " << node << " G " << G;
          for (int64_t t = 1; t < k; ++t)  // a repeat decided through the chain rule
            chains += a[t] >= d - k && a[t] - (d - k) < t && b[t] != a[t] &&
                      std::find(a.begin(), a.begin() + t, a[t]) == a.begin() + t;
        }
  }
  EXPECT_GT(chains, 100);
}

// The node table's codes order as compaction needs: a later generation beats any earlier entry,
// a local ID beats every pending position, and a smaller position beats a larger one.
TEST(SampleGroups, NodeTableCodesOrder) {
  using namespace cuda::group;  // NOLINT(build/namespaces)
  EXPECT_GT(pending_code(5, 1000), final_code(4, 0));
  EXPECT_GT(final_code(5, 0), pending_code(5, 0));
  EXPECT_GT(final_code(5, kMaxTableValue - 1), pending_code(5, 0));
  EXPECT_GT(pending_code(5, 3), pending_code(5, 4));
  EXPECT_GT(pending_code(5, 0), pending_code(5, kMaxTableValue - 1));
  EXPECT_TRUE(is_final(final_code(7, 123), 7));
  EXPECT_FALSE(is_final(final_code(6, 123), 7));
  EXPECT_FALSE(is_final(pending_code(7, 123), 7));
  EXPECT_EQ(local_id(final_code(7, 123)), 123);
  EXPECT_EQ(local_id(final_code(7, kMaxTableValue - 1)), kMaxTableValue - 1);
  const int64_t start[] = {0, 3, 3, 10};
  EXPECT_EQ(batch_of(start, 3, 0), 0);
  EXPECT_EQ(batch_of(start, 3, 2), 0);
  EXPECT_EQ(batch_of(start, 3, 3), 2);  // batch 1 is empty
  EXPECT_EQ(batch_of(start, 3, 9), 2);
  EXPECT_EQ(group_size(5), 8);
  EXPECT_EQ(group_size(15), 16);
  EXPECT_EQ(group_size(1), 4);
  EXPECT_EQ(group_size(-1), 32);
  EXPECT_EQ(group_size(100), 32);
}

// ---- The multi-layer pipeline -----------------------------------------------------------------
// The GPU sampler's passes per hop (sample, mark, scan, number, relabel; tessera/cuda/
// sample_items.hpp) over K batches at once, run item by item on the CPU as the kernels run them
// (flat item ranges split by batch, padded slots i * fanout or exact offsets, one node table per
// batch reused across calls by generation). The blocks must be NeighborSampler's.

struct PipelineTables {
  bool hashed = false;
  uint64_t mask = 0;
  std::vector<std::vector<uint64_t>> vals, keys;  // per batch slot, kept across calls
};

struct PipelineCase {
  std::vector<int64_t> fanouts;  // input layer first
  bool replace = false;
  bool weighted = false;
  bool dir_in = true;
  bool row_info = true;
  const ops::ExcludeEdges* exclude = nullptr;
};

std::vector<std::vector<ops::Block>> sample_blocks_by_items(
    const Graph& g, const std::vector<float>& w, const std::vector<double>& cdf,
    const std::vector<int64_t>& info, const std::vector<std::vector<int64_t>>& batches,
    const std::vector<RngKey>& keys, const PipelineCase& pc, PipelineTables& tables, uint32_t gen) {
  namespace it = cuda::items;
  namespace gr = cuda::group;
  cuda::GraphView gv;
  gv.num_nodes = g.num_nodes;
  gv.indptr = g.indptr.data();
  gv.indices = g.indices.data();
  gv.eids = g.eids.empty() ? nullptr : g.eids.data();
  if (pc.weighted) {
    gv.weights = w.data();
    gv.prefix = cdf.data();
    gv.row_info = pc.row_info ? info.data() : nullptr;
  }
  const cuda::rows::ExcludeView exv = view_of(pc.exclude);
  const int K = static_cast<int>(batches.size());
  const int H = static_cast<int>(pc.fanouts.size());
  // Per batch: node list, table, sizes w[h], m[h], and the dense outputs of every hop.
  std::vector<std::vector<int64_t>> nodes(
      K, std::vector<int64_t>(static_cast<size_t>(g.num_nodes) + 1, -1));
  std::vector<std::vector<int64_t>> wsz(H + 1, std::vector<int64_t>(K, 0)),
      msz(H, std::vector<int64_t>(K, 0));
  std::vector<std::vector<std::vector<int64_t>>> osrc(H), odst(H), oeid(H);
  auto table_of = [&](int k) {
    it::TableView t;
    t.gen = gen;
    t.vals = tables.vals[k].data();
    if (tables.hashed) {
      t.keys = tables.keys[k].data();
      t.mask = tables.mask;
    }
    return t;
  };
  for (int k = 0; k < K; ++k)
    wsz[0][k] = static_cast<int64_t>(batches[k].size());
  for (int h = 0; h < H; ++h) {
    const int64_t F = pc.fanouts[H - 1 - h];
    const bool exact = F < 0 || pc.exclude != nullptr;
    const bool thread_mode = pc.exclude != nullptr || F > gr::kMaxGroupFanout;
    if (exact) {
      EXPECT_EQ(K, 1) << "exact hops run one batch per launch";
    }
    const int G = gr::group_size(F);
    const gr::HostExec ex{G};
    const int64_t cap = gr::scratch_entries(F, G);
    std::vector<int64_t> sa(static_cast<size_t>(cap)), sb(static_cast<size_t>(cap));
    gr::Scratch::State st;
    const gr::Scratch s{sa.data(), sb.data(), &st};
    std::vector<int64_t> start(K + 1, 0);
    for (int k = 0; k < K; ++k)
      start[k + 1] = start[k] + wsz[h][k];
    const int64_t total = start[K];
    auto frontier = [&](int k, int64_t i) { return h == 0 ? batches[k][i] : nodes[k][i]; };
    // Exact mode: the count pass and the scans place every node's slots (and scratch).
    std::vector<int64_t> xcnt(total, 0), xscr(total, 0), xoff(total + 1, 0), xsoff(total + 1, 0);
    if (exact) {
      for (int64_t gi = 0; gi < total; ++gi) {
        const cuda::rows::SeedCounts c = cuda::rows::seed_counts_by(
            g.indptr.data(), it::EidOfView{&gv}, gv.weights, exv, frontier(0, gi), F, pc.replace);
        xcnt[gi] = c.edges;
        xscr[gi] = c.scratch;
      }
      for (int64_t gi = 0; gi < total; ++gi) {
        xoff[gi + 1] = xoff[gi] + xcnt[gi];
        xsoff[gi + 1] = xsoff[gi] + xscr[gi];
      }
    }
    // Padded slots are batch-relative (they are the positions of the table's codes); each batch
    // has its own stretch of the padded arrays, `stride` slots from the previous one.
    int64_t wmax = 0;
    for (int k = 0; k < K; ++k)
      wmax = std::max(wmax, wsz[h][k]);
    const int64_t stride = exact ? xoff[total] : wmax * std::max<int64_t>(F, 0);
    std::vector<int64_t> pad(static_cast<size_t>(K * stride) + 1, -5), pad_eid(pad.size(), -5);
    std::vector<int64_t> cand(static_cast<size_t>(xsoff[total]) + 1);
    std::vector<float> cand_w(cand.size());
    std::vector<double> cand_cdf(cand.size());
    std::vector<int64_t> cnt(total, 0);
    RngKey key;
    for (int64_t gi = 0; gi < total; ++gi) {  // sample
      const int k = gr::batch_of(start.data(), K, gi);
      const int64_t i = gi - start[k];
      key = keys[k];
      key.layer = static_cast<uint32_t>(h);
      key.stream = RngStream::kNeighbor;
      const int64_t v = frontier(k, i);
      it::TableView t = table_of(k);
      if (h == 0) {
        nodes[k][i] = v;
        t.raise(v, gr::final_code(gen, i));
      }
      it::PadEmit e;
      e.g = &gv;
      e.slot0 = exact ? xoff[gi] : i * F;
      e.nbr = pad.data() + k * stride;
      e.eid = pad_eid.data() + k * stride;
      e.table = t;
      if (thread_mode) {
        const int64_t c =
            exact ? xcnt[gi]
                  : (pc.weighted
                         ? cuda::rows::weighted_count(w.data() + g.indptr[v],
                                                      g.indptr[v + 1] - g.indptr[v], F, pc.replace)
                         : cuda::rows::uniform_count(g.indptr[v + 1] - g.indptr[v], F, pc.replace));
        it::sample_item_thread(gv, key, v, F, pc.replace, exv, c, exact ? xscr[gi] : 0,
                               cand.data() + xsoff[gi], cand_w.data() + xsoff[gi],
                               cand_cdf.data() + xsoff[gi], e);
        cnt[gi] = c;
      } else {
        const int64_t rb = g.indptr[v], d = g.indptr[v + 1] - rb;
        cnt[gi] = pc.weighted ? it::sample_item<true>(ex, gv, key, v, rb, d, F, pc.replace, s, e)
                              : it::sample_item<false>(ex, gv, key, v, rb, d, F, pc.replace, s, e);
        if (exact) {
          EXPECT_EQ(cnt[gi], xcnt[gi]) << "count pass and sample pass disagree";
        }
      }
    }
    std::vector<uint64_t> pairs(total + 1, 0), scan(total + 1, 0);
    for (int64_t gi = 0; gi < total; ++gi) {  // mark
      const int k = gr::batch_of(start.data(), K, gi);
      const int64_t i = gi - start[k];
      const int64_t slot0 = exact ? xoff[gi] : i * F;
      if (h == 0) {
        EXPECT_EQ(table_of(k).value(nodes[k][i]), gr::final_code(gen, i));
      }
      const int64_t fresh =
          it::mark_item(ex, table_of(k), pad.data() + k * stride + slot0, cnt[gi], slot0, s);
      pairs[gi] = it::count_pair(cnt[gi], fresh);
    }
    for (int64_t gi = 0; gi < total; ++gi)
      scan[gi + 1] = scan[gi] + pairs[gi];
    for (int k = 0; k < K; ++k) {  // outputs sized by the bound, as the sampler allocates them
      const int64_t bound = exact ? xoff[total] : wsz[h][k] * std::max<int64_t>(F, 0);
      osrc[h].emplace_back(bound, -7);
      odst[h].emplace_back(bound, -7);
      oeid[h].emplace_back(bound, -7);
      wsz[h + 1][k] = wsz[h][k];
    }
    for (int64_t gi = 0; gi < total; ++gi) {  // number
      const int k = gr::batch_of(start.data(), K, gi);
      const int64_t i = gi - start[k];
      const int64_t slot0 = exact ? xoff[gi] : i * F;
      const uint64_t off = scan[gi] - scan[start[k]];
      const int64_t e0 = it::pair_edges(off), nb = it::pair_new(off);
      it::NumberOut o{osrc[h][k].data(), odst[h][k].data(), oeid[h][k].data(), nodes[k].data()};
      it::number_item(ex, table_of(k), pad.data() + k * stride + slot0,
                      pad_eid.data() + k * stride + slot0, cnt[gi], i, e0, wsz[h][k] + nb, o, s);
      if (i == wsz[h][k] - 1) {
        msz[h][k] = e0 + cnt[gi];
        wsz[h + 1][k] = wsz[h][k] + nb + it::pair_new(pairs[gi]);
      }
    }
    for (int k = 0; k < K; ++k)  // relabel
      for (int64_t j = 0; j < msz[h][k]; ++j)
        it::relabel_item(table_of(k), &osrc[h][k][j]);
  }
  std::vector<std::vector<ops::Block>> out(K);
  for (int k = 0; k < K; ++k) {
    out[k].resize(H);
    for (int h = 0; h < H; ++h) {
      ops::Block& b = out[k][H - 1 - h];
      b.num_dst = wsz[h][k];
      b.src_nodes.assign(nodes[k].begin(), nodes[k].begin() + wsz[h + 1][k]);
      b.src.assign(osrc[h][k].begin(), osrc[h][k].begin() + msz[h][k]);
      b.dst.assign(odst[h][k].begin(), odst[h][k].begin() + msz[h][k]);
      b.eids.assign(oeid[h][k].begin(), oeid[h][k].begin() + msz[h][k]);
    }
  }
  return out;
}

PipelineTables make_tables(const Graph& g, int K, bool hashed) {
  PipelineTables t;
  t.hashed = hashed;
  for (int k = 0; k < K; ++k) {
    if (hashed) {
      t.mask = (uint64_t{1} << 13) - 1;  // 8192 slots per batch: more than any batch's nodes
      t.vals.emplace_back(t.mask + 1, 0);
      t.keys.emplace_back(t.mask + 1, 0);
    } else {
      t.vals.emplace_back(static_cast<size_t>(g.num_nodes), 0);
    }
  }
  return t;
}

const char* const kPipelineConfigs[] = {"15_10_5", "25_10", "all_5", "5_300"};

class SamplePipeline : public ::testing::TestWithParam<std::tuple<int, bool, bool, bool, bool>> {};

// K batches of different sizes (0, 1 and hundreds of seeds, hubs and degree-0 nodes among them),
// twice through the same tables (generations 7 then 8: entries of the first call must not leak
// into the second).
TEST_P(SamplePipeline, BlocksMatchNeighborSampler) {
  const auto [config, weighted, replace, dir_in, hashed] = GetParam();
  const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
  const RowsFixture& f = fixture();
  const std::vector<float>& w = dir_in ? f.w_csc : f.w_csr;
  const std::vector<double>& cdf = dir_in ? f.cdf_csc : f.cdf_csr;
  const std::vector<int64_t> info = row_info_of(g, w);
  PipelineCase pc;
  const std::vector<std::vector<int64_t>> configs = {{15, 10, 5}, {25, 10}, {-1, 5}, {5, 300}};
  pc.fanouts = configs[config];
  pc.weighted = weighted;
  pc.replace = replace;
  pc.dir_in = dir_in;
  pc.row_info = !hashed;  // both ways of counting a weighted row
  const bool exact = config == 2;
  std::vector<int64_t> perm(static_cast<size_t>(g.num_nodes));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(11));
  std::vector<std::vector<int64_t>> batches;
  if (exact) {
    batches.emplace_back(perm.begin(), perm.begin() + 300);
  } else {
    batches.emplace_back(perm.begin(), perm.begin() + 400);
    batches.emplace_back();               // an empty batch
    batches.emplace_back(1, int64_t{7});  // the hub alone
    batches.emplace_back(perm.begin() + 400, perm.begin() + 413);
    batches.back().push_back(2999);  // a degree-0 node
  }
  ops::NeighborSamplerOptions so;
  so.fanouts = pc.fanouts;
  so.replace = replace;
  so.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
  ops::SamplingGraphOptions prep;
  if (weighted) {
    prep.weights = w;
  }
  const ops::NeighborSampler cpu(g, so, prep);
  PipelineTables tables = make_tables(g, static_cast<int>(batches.size()), hashed);
  for (uint32_t gen : {7u, 8u}) {
    std::vector<RngKey> keys;
    for (size_t k = 0; k < batches.size(); ++k)
      keys.push_back(ops::make_rng_key(99, 3, static_cast<int64_t>(k + gen), 0));
    const auto got = sample_blocks_by_items(g, w, cdf, info, batches, keys, pc, tables, gen);
    for (size_t k = 0; k < batches.size(); ++k)
      expect_same_blocks(got[k], cpu.sample_blocks(batches[k], keys[k]),
                         fmt::format("generation {} batch {}", gen, k));
  }
}

INSTANTIATE_TEST_SUITE_P(All, SamplePipeline,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Bool(),
                                            ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return fmt::format("{}_{}_{}_{}_{}",
                                              kPipelineConfigs[std::get<0>(info.param)],
                                              std::get<1>(info.param) ? "weighted" : "uniform",
                                              std::get<2>(info.param) ? "replace" : "noreplace",
                                              std::get<3>(info.param) ? "in" : "out",
                                              std::get<4>(info.param) ? "hashed" : "dense");
                         });

// With an exclusion set reaching every hop (the edge loader's case): one thread per node, exact
// offsets and candidate scratch.
TEST(SamplePipeline, ExclusionMatchesNeighborSampler) {
  for (const bool weighted : {false, true})
    for (const bool dir_in : {true, false}) {
      const Graph& g = dir_in ? sample_test_csc() : sample_test_csr();
      const RowsFixture& f = fixture();
      const std::vector<float>& w = dir_in ? f.w_csc : f.w_csr;
      const std::vector<double>& cdf = dir_in ? f.cdf_csc : f.cdf_csr;
      const std::vector<int64_t> info = row_info_of(g, w);
      std::vector<int64_t> seeds(sample_test_exclusion_seeds());
      std::sort(seeds.begin(), seeds.end());
      seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
      const ops::ExcludeEdges exc = sample_test_exclusion(g, w, seeds, 0.05);
      PipelineCase pc;
      pc.fanouts = {15, 10, 5};
      pc.weighted = weighted;
      pc.dir_in = dir_in;
      pc.exclude = &exc;
      ops::NeighborSamplerOptions so;
      so.fanouts = pc.fanouts;
      so.dir = dir_in ? ops::EdgeDir::kIn : ops::EdgeDir::kOut;
      ops::SamplingGraphOptions prep;
      if (weighted) {
        prep.weights = w;
      }
      const ops::NeighborSampler cpu(g, so, prep);
      PipelineTables tables = make_tables(g, 1, false);
      const RngKey key = ops::make_rng_key(5, 0, 2, 0);
      const auto got = sample_blocks_by_items(g, w, cdf, info, {seeds}, {key}, pc, tables, 1);
      const auto want = cpu.sample_blocks(seeds, key, &exc);
      expect_same_blocks(got[0], want, fmt::format("weighted {} in {}", weighted, dir_in));
      EXPECT_NE(want[0].eids, cpu.sample_blocks(seeds, key)[0].eids);  // the set changed something
    }
}

// ---- Edge exclusion ---------------------------------------------------------------------------

class SampleRowsExclude : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, bool>> {};

TEST_P(SampleRowsExclude, KernelRowLogicMatchesCpuTwin) {
  const auto [fanout, replace, dir_in, weighted] = GetParam();
  auto [g, w, cdf, o] = row_case(fanout, replace, dir_in);
  const std::vector<int64_t> seeds = sample_test_exclusion_seeds();
  const ops::ExcludeEdges ex = sample_test_exclusion(g, w, seeds);
  // The prefix sums (cdf) are used for rows without exclusions and ignored for the others.
  ops::SamplingGraphOptions prep;
  if (weighted) {
    prep.weights = w;
  }
  prep.interleave = false;
  const ops::SamplingGraph twin(g, prep);
  if (weighted) {
    EXPECT_EQ(twin.weight_prefix().to_vector(), cdf);
  }
  o.exclude = &ex;
  const ops::SampledEdges cpu = ops::sample_neighbors(twin, seeds, o);
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
    const ops::SampledEdges without = ops::sample_neighbors(twin, seeds, plain);
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
