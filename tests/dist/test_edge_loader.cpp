// SPDX-License-Identifier: Apache-2.0
// dist::DistEdgeDataLoader on Cora (symmetrized, deduplicated) partitioned into 1, 2, 4 parts:
// every seed edge appears exactly once per epoch across ranks; positives are the dataset's edges
// after mapping through orig_nid / orig_eid; no excluded edge (self, reverse) is in any block;
// negatives in range and reproducible; with the global batch order batch j equals, after ID
// mapping, the standalone ops::EdgeDataLoader's batch j (without exclusion) or a hop-by-hop
// post-filter oracle (with it), hence is the same for any world size and partitioning; bad
// inputs fail every rank. Real forked processes (local transport at 1 rank, ucx over tcp else).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "dist_fixtures.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/dist/edge_loader.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/sampling.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/ops/sampler.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera_test.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using dist::BatchOrder;
using dist::DistEdgeDataLoader;
using dist::DistGraph;
using dist::DistNeighborSampler;
using dist::Runtime;

const std::vector<int64_t> kFanouts = {10, 5};
constexpr int64_t kNegatives = 2;

ScratchCleanup cleanup{"edge-loader-test"};

/// The unpartitioned dataset (loaded in the parent before any fork) and its edges by ID.
struct Reference {
  Dataset ds;
  std::vector<int64_t> src, dst;  // by original edge ID (-1: dropped)
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    r.ds = read_dataset(dataset("cora"), Format::kNpy, symmetric_read_options());
    const Graph& g = r.ds.graph;
    int64_t space = 0;
    for (int64_t k = 0; k < g.num_edges(); ++k)
      space = std::max(space, g.eid(k) + 1);
    r.src.assign(static_cast<size_t>(space), -1);
    r.dst.assign(static_cast<size_t>(space), -1);
    for (int64_t v = 0; v < g.num_nodes; ++v)
      for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
        r.src[g.eid(k)] = g.indices[k];
        r.dst[g.eid(k)] = v;
      }
    return r;
  }();
  return ref;
}

fs::path partitions(int parts, const std::string& method) {
  return cached_partitions("edge-loader-test", "cora", parts, method);
}

JobSpec job(int world, double deadline = 90) {
  return tessera::test::job(world, world == 1 ? "" : "tcp",
                            deadline);  // one rank: local; else ucx over tcp
}

uint64_t mix64(uint64_t x) {  // order-independent multiset fingerprint: sum of mixed IDs
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Every node's and edge's original ID, read once per rank.
struct OrigIds {
  std::vector<int64_t> nid, eid;
};

OrigIds orig_ids(const DistGraph& g) {
  OrigIds o;
  std::vector<int64_t> all(static_cast<size_t>(std::max(g.num_nodes(), g.num_edges())));
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<int64_t>(i);
  const Array n = g.orig_nid().read(ops::Span<const int64_t>(all.data(), g.num_nodes()));
  const Array e = g.orig_eid().read(ops::Span<const int64_t>(all.data(), g.num_edges()));
  o.nid.assign(n.data<int64_t>(), n.data<int64_t>() + g.num_nodes());
  o.eid.assign(e.data<int64_t>(), e.data<int64_t>() + g.num_edges());
  return o;
}

std::vector<int64_t> map_ids(const std::vector<int64_t>& v, const std::vector<int64_t>& m) {
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = m.empty() ? v[i] : m[v[i]];
  return out;
}

/// A batch as text with every node and edge in original IDs (`nid` / `eid` empty: the batch is
/// in original IDs already), then hashed: "j:<edges> <block edges> <hash>".
std::string batch_line(const ops::EdgeMiniBatch& mb, const std::vector<int64_t>& nid,
                       const std::vector<int64_t>& eid) {
  std::ostringstream s;
  auto put = [&](const char* tag, const std::vector<int64_t>& v) {
    s << tag;
    for (int64_t x : v)
      s << ' ' << x;
  };
  put("eids", map_ids(mb.eids, eid));
  put("|pos", map_ids(mb.pos_src, nid));
  put(">", map_ids(mb.pos_dst, nid));
  put("|neg", map_ids(mb.neg_src, nid));
  put(">", map_ids(mb.neg_dst, nid));
  put("|seeds", map_ids(mb.seeds, nid));
  put("|local", mb.pos_src_local);
  put(",", mb.pos_dst_local);
  put(",", mb.neg_src_local);
  put(",", mb.neg_dst_local);
  int64_t edges = 0;
  for (const auto& b : mb.blocks) {
    put("|block src", map_ids(b.src_nodes, nid));
    put(" edges", b.src);
    put(">", b.dst);
    put(" eids", map_ids(b.eids, eid));
    edges += b.num_edges();
  }
  put("|input", map_ids(mb.input_nodes, nid));
  return fmt::format("{}:{} {} {:016x}", mb.index, mb.eids.size(), edges, fnv1a(s.str()));
}

ops::LoaderOptions loader_options() {
  ops::LoaderOptions o;
  o.batch_size = 128;
  o.seed = 11;
  o.num_workers = 2;
  return o;
}

/// Seed edges of the global-order tests: original edge ID a multiple of 3.
bool global_seed(int64_t orig_eid) {
  return orig_eid % 3 == 0;
}

/// The oracle of the global order: ops::EdgeDataLoader on the unpartitioned graph, seeds in
/// increasing original edge ID. With `exclude`, the blocks are replaced by the post-filter the
/// distributed sampler applies: each hop samples as ops::sample_neighbors, then drops the
/// batch's edges and their reverses before compaction.
std::map<int64_t, std::string> oracle_epoch(int64_t epoch, ops::ExcludeMode exclude) {
  const Reference& ref = reference();
  const Graph& g = ref.ds.graph;
  ops::NeighborSamplerOptions so;
  so.fanouts = kFanouts;
  ops::NeighborSampler sampler(g, so);
  std::vector<int64_t> seeds;
  for (int64_t e = 0; e < static_cast<int64_t>(ref.src.size()); ++e)
    if (ref.src[e] >= 0 && global_seed(e)) seeds.push_back(e);
  ops::EdgeLoaderOptions eo;
  eo.negatives = kNegatives;
  ops::EdgeDataLoader loader(sampler, seeds, loader_options(), eo);
  const auto rev = ops::symmetrized_reverse_eids(ref.ds.num_input_edges);
  std::map<int64_t, std::string> out;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    ops::EdgeMiniBatch mb = loader.sample_batch(epoch, b);
    if (exclude != ops::ExcludeMode::kNone) {
      std::set<int64_t> ex(mb.eids.begin(), mb.eids.end());
      if (exclude == ops::ExcludeMode::kReverseId)
        for (int64_t e : mb.eids)
          ex.insert(rev[e]);
      const RngKey key = ops::make_rng_key(loader_options().seed, epoch, b, 0);
      std::vector<int64_t> frontier = mb.seeds;
      for (size_t h = 0; h < kFanouts.size(); ++h) {
        const size_t l = kFanouts.size() - 1 - h;
        ops::SampleOptions o;
        o.fanout = kFanouts[l];
        o.key = key;
        o.key.layer = static_cast<uint32_t>(h);
        o.num_threads = 1;
        ops::SampledEdges all = ops::sample_neighbors(g, frontier, o), kept;
        for (int64_t k = 0; k < all.size(); ++k)
          if (!ex.count(all.eid[k])) {
            kept.src.push_back(all.src[k]);
            kept.dst.push_back(all.dst[k]);
            kept.eid.push_back(all.eid[k]);
          }
        mb.blocks[l] = ops::to_block(kept, frontier);
        frontier = mb.blocks[l].src_nodes;
      }
      mb.input_nodes = mb.blocks.front().src_nodes;
    }
    out[b] = batch_line(mb, {}, {});
  }
  return out;
}

ops::EdgeLoaderOptions edge_options(const DistGraph& g, ops::ExcludeMode exclude) {
  ops::EdgeLoaderOptions eo;
  eo.negatives = kNegatives;
  eo.exclude = exclude;
  if (exclude == ops::ExcludeMode::kReverseId) eo.reverse_eids = dist::symmetrized_reverse_eids(g);
  return eo;
}

/// One epoch of the global order on this rank: one line per batch.
std::string dump_global(const fs::path& cfg, int64_t epoch, ops::ExcludeMode exclude) {
  auto rt = Runtime::create();
  DistGraph g(rt, "cora", cfg);
  DistNeighborSampler sampler(g, kFanouts);
  const OrigIds o = orig_ids(g);
  std::vector<int64_t> seeds;
  for (int64_t e = 0; e < g.num_edges(); ++e)
    if (global_seed(o.eid[e])) seeds.push_back(e);
  DistEdgeDataLoader loader(sampler, seeds, loader_options(), edge_options(g, exclude),
                            BatchOrder::kGlobal);
  const int world = rt->world_size();
  RANK_CHECK(loader.num_batches() == (loader.num_global_batches() + world - 1) / world,
             "{} steps for {} global batches", loader.num_batches(), loader.num_global_batches());
  loader.start_epoch(epoch);
  std::ostringstream out;
  ops::EdgeMiniBatch mb;
  while (loader.next(mb))
    out << batch_line(mb, o.nid, o.eid) << '\n';
  rt->barrier();
  return out.str();
}

/// Global batch index -> its line, over every rank's output (wrapped batches must repeat).
std::map<int64_t, std::string> collect(const std::vector<RankResult>& res) {
  std::map<int64_t, std::string> m;
  for (const auto& r : res) {
    std::istringstream in(r.message);
    std::string line;
    while (std::getline(in, line)) {
      const int64_t j = std::stoll(line.substr(0, line.find(':')));
      auto [it, fresh] = m.emplace(j, line);
      if (!fresh) {
        EXPECT_EQ(it->second, line) << "a wrapped batch differs from the original";
      }
    }
  }
  return m;
}

void expect_global_equals_oracle(int world, const std::string& method, ops::ExcludeMode exclude) {
  const int64_t epoch = 2;
  const auto want = oracle_epoch(epoch, exclude);
  ASSERT_GT(want.size(), 20u);
  const fs::path cfg = partitions(world, method);
  auto res = run_ranks(job(world), [&](int) { return dump_global(cfg, epoch, exclude); });
  for (const auto& r : res)
    ASSERT_EQ(r.exit_code, 0) << describe(res);
  const auto got = collect(res);
  ASSERT_EQ(got.size(), want.size()) << world << " " << method;
  for (const auto& [j, line] : want)
    EXPECT_EQ(got.at(j), line) << "global batch " << j << " at " << world << " ranks (" << method
                               << ")";
}

/// The local order over this rank's share (force_even chunks of the edges whose original ID is
/// even): checks every batch and returns "<steps> <edges> <fingerprint> <hits>" over the
/// batches seen for the first time (before wrapping). `hits`: block edges that are a batch
/// edge or its reverse (must be 0 unless exclude is kNone).
std::string check_local(const fs::path& cfg, ops::ExcludeMode exclude) {
  const Reference& ref = reference();
  auto rt = Runtime::create();
  const int world = rt->world_size(), rank = rt->rank();
  DistGraph g(rt, "cora", cfg);
  DistNeighborSampler sampler(g, kFanouts);
  const OrigIds o = orig_ids(g);
  std::vector<int64_t> selected;
  for (int64_t e = 0; e < g.num_edges(); ++e)
    if (o.eid[e] % 2 == 0) selected.push_back(e);
  const int64_t n = static_cast<int64_t>(selected.size());
  std::vector<int64_t> share(selected.begin() + n * rank / world,
                             selected.begin() + n * (rank + 1) / world);
  ops::LoaderOptions lo = loader_options();
  lo.batch_size = 100;
  const ops::EdgeLoaderOptions eo = edge_options(g, exclude);
  const auto rev = dist::symmetrized_reverse_eids(g);
  DistEdgeDataLoader loader(sampler, share, lo, eo, BatchOrder::kLocal);
  const int64_t epoch = 1;
  loader.start_epoch(epoch);
  std::set<int64_t> seen;
  int64_t steps = 0, edges = 0, hits = 0;
  uint64_t fp = 0;
  ops::EdgeMiniBatch mb;
  while (loader.next(mb)) {
    const int64_t b = steps++;
    RANK_CHECK(mb.index == loader.global_batch_index(b), "index {} of batch {}", mb.index, b);
    if (!seen.insert(mb.index).second) continue;  // wrapped around
    const int64_t m = static_cast<int64_t>(mb.eids.size());
    for (int64_t i = 0; i < m; ++i) {
      const int64_t e = mb.eids[i], oe = o.eid[e];
      ++edges;
      fp += mix64(static_cast<uint64_t>(oe));
      RANK_CHECK(o.nid[mb.pos_src[i]] == ref.src[oe] && o.nid[mb.pos_dst[i]] == ref.dst[oe],
                 "edge {} (original {}): ({}, {}) is ({}, {}) in the dataset", e, oe,
                 o.nid[mb.pos_src[i]], o.nid[mb.pos_dst[i]], ref.src[oe], ref.dst[oe]);
      RANK_CHECK(mb.seeds[mb.pos_src_local[i]] == mb.pos_src[i] &&
                     mb.seeds[mb.pos_dst_local[i]] == mb.pos_dst[i],
                 "local pair {} does not point at its endpoints", i);
      if (rev[e] >= 0) {
        const int64_t r = rev[e];
        RANK_CHECK(ref.src[o.eid[r]] == ref.dst[oe] && ref.dst[o.eid[r]] == ref.src[oe],
                   "reverse of edge {} is {}, not its reverse", e, r);
      }
    }
    RANK_CHECK(static_cast<int64_t>(mb.neg_src.size()) == kNegatives * m &&
                   mb.neg_dst.size() == mb.neg_src.size(),
               "{} negatives for {} edges", mb.neg_src.size(), m);
    for (size_t i = 0; i < mb.neg_src.size(); ++i) {
      RANK_CHECK(mb.neg_src[i] == mb.pos_src[i / kNegatives], "negative {} has another source", i);
      RANK_CHECK(mb.neg_dst[i] >= 0 && mb.neg_dst[i] < g.num_nodes(), "negative {} -> {}", i,
                 mb.neg_dst[i]);
      RANK_CHECK(mb.seeds[mb.neg_src_local[i]] == mb.neg_src[i] &&
                     mb.seeds[mb.neg_dst_local[i]] == mb.neg_dst[i],
                 "local negative pair {} does not point at its endpoints", i);
    }
    const std::set<int64_t> uniq(mb.seeds.begin(), mb.seeds.end());
    RANK_CHECK(uniq.size() == mb.seeds.size(), "seeds repeat");
    const auto dst = mb.blocks.back().dst_nodes();
    RANK_CHECK(std::vector<int64_t>(dst.begin(), dst.end()) == mb.seeds,
               "the last block's outputs are not the seeds");
    RANK_CHECK(mb.input_nodes == mb.blocks.front().src_nodes, "input nodes");
    std::set<int64_t> own(mb.eids.begin(), mb.eids.end());
    for (int64_t e : mb.eids)
      if (rev[e] >= 0) own.insert(rev[e]);
    std::set<int64_t> self(mb.eids.begin(), mb.eids.end());
    for (const auto& bl : mb.blocks)
      for (int64_t e : bl.eids) {
        if (!own.count(e)) continue;
        ++hits;
        RANK_CHECK(exclude == ops::ExcludeMode::kNone ||
                       (exclude == ops::ExcludeMode::kSelf && !self.count(e)),
                   "excluded edge {} is in a block of batch {}", e, mb.index);
      }
    if (b == 0) {  // reproducible: sampled again, and by a second loader with the same seed
      const ops::EdgeMiniBatch again = loader.sample_batch(epoch, 0);
      RANK_CHECK(batch_line(again, o.nid, o.eid) == batch_line(mb, o.nid, o.eid),
                 "batch 0 sampled again differs");
    }
  }
  RANK_CHECK(steps == loader.num_batches(), "{} steps, num_batches {}", steps,
             loader.num_batches());
  // Same seed: the same negatives; another seed: other negatives (same positives, no shuffle).
  lo.shuffle = false;
  DistEdgeDataLoader a(sampler, share, lo, eo), b(sampler, share, lo, eo);
  lo.seed += 1;
  DistEdgeDataLoader c(sampler, share, lo, eo);
  const auto ma = a.sample_batch(3, 0), mb2 = b.sample_batch(3, 0), mc = c.sample_batch(3, 0);
  RANK_CHECK(ma.eids == mc.eids && ma.neg_dst == mb2.neg_dst && ma.neg_dst != mc.neg_dst,
             "negatives are not a function of the seed");
  rt->barrier();
  return fmt::format("{} {} {} {}", steps, edges, fp, hits);
}

void expect_local_covers_once(int world, ops::ExcludeMode exclude) {
  const Reference& ref = reference();
  int64_t want_edges = 0;
  uint64_t want_fp = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(ref.src.size()); ++e)
    if (ref.src[e] >= 0 && e % 2 == 0) {
      ++want_edges;
      want_fp += mix64(static_cast<uint64_t>(e));
    }
  const fs::path cfg = partitions(world, "metis");
  auto res = run_ranks(job(world), [&](int) { return check_local(cfg, exclude); });
  for (const auto& r : res)
    ASSERT_EQ(r.exit_code, 0) << describe(res);
  int64_t edges = 0, hits = 0;
  uint64_t fp = 0;
  std::set<int64_t> steps;
  for (const auto& r : res) {
    std::istringstream in(r.message);
    int64_t s, e, h;
    uint64_t f;
    in >> s >> e >> f >> h;
    steps.insert(s);
    edges += e;
    fp += f;
    hits += h;
  }
  EXPECT_EQ(steps.size(), 1u) << "ranks ran different step counts" << describe(res);
  EXPECT_EQ(edges, want_edges) << describe(res);
  EXPECT_EQ(fp, want_fp) << "some seed edge is missing or repeated" << describe(res);
  // The exclusion check can fail: without it the blocks do hold batch edges.
  if (exclude == ops::ExcludeMode::kReverseId) {
    EXPECT_EQ(hits, 0);
  } else {
    EXPECT_GT(hits, 0);
  }
}

TEST(DistEdgeLoader, LocalOrderOneRank) {
  expect_local_covers_once(1, ops::ExcludeMode::kReverseId);
  expect_local_covers_once(1, ops::ExcludeMode::kNone);
}

TEST(DistEdgeLoader, GlobalOrderOneRankEqualsStandalone) {
  expect_global_equals_oracle(1, "metis", ops::ExcludeMode::kNone);
  expect_global_equals_oracle(1, "metis", ops::ExcludeMode::kReverseId);
}

TEST(DistEdgeLoader, ReverseEidsOfASymmetrizedPartitioning) {
  const fs::path cfg = partitions(1, "metis");
  auto res = run_ranks(job(1), [&](int) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", cfg);
    const auto rev = dist::symmetrized_reverse_eids(g);
    std::vector<int64_t> all(static_cast<size_t>(g.num_edges()));
    for (int64_t e = 0; e < g.num_edges(); ++e)
      all[e] = e;
    const Array ends = g.edge_endpoints().read(all);
    const int64_t* p = ends.data<int64_t>();
    int64_t paired = 0;
    for (int64_t e = 0; e < g.num_edges(); ++e) {
      if (rev[e] < 0) continue;
      ++paired;
      RANK_CHECK(rev[rev[e]] == e, "reverse of reverse of {}", e);
      RANK_CHECK(p[2 * rev[e]] == p[2 * e + 1] && p[2 * rev[e] + 1] == p[2 * e],
                 "edge {} and its reverse {} do not swap endpoints", e, rev[e]);
    }
    return fmt::format("{} {}", paired, g.num_edges());
  });
  ASSERT_EQ(res[0].exit_code, 0) << describe(res);
  int64_t paired, edges;
  std::istringstream(res[0].message) >> paired >> edges;
  EXPECT_EQ(paired, edges) << "Cora symmetrized: every edge has its reverse";
}

TEST(DistEdgeLoader, LocalOrderCoversEverySeedEdgeOnce) {
  TESSERA_SKIP_WITHOUT_UCX();
  expect_local_covers_once(2, ops::ExcludeMode::kReverseId);
  expect_local_covers_once(2, ops::ExcludeMode::kSelf);
  expect_local_covers_once(4, ops::ExcludeMode::kReverseId);
}

TEST(DistEdgeLoader, GlobalOrderBatchesAreTheSameForAnyWorldSizeAndPartitioning) {
  TESSERA_SKIP_WITHOUT_UCX();
  expect_global_equals_oracle(2, "metis", ops::ExcludeMode::kNone);
  expect_global_equals_oracle(2, "metis", ops::ExcludeMode::kReverseId);
  expect_global_equals_oracle(4, "metis", ops::ExcludeMode::kReverseId);
  expect_global_equals_oracle(2, "random", ops::ExcludeMode::kReverseId);
}

TEST(DistEdgeLoader, ShortSharesWrapSoEveryRankRunsTheSameSteps) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path cfg = partitions(2, "metis");
  auto res = run_ranks(job(2), [&](int r) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", cfg);
    DistNeighborSampler sampler(g, {5});
    ops::LoaderOptions o;
    o.batch_size = 8;
    std::vector<int64_t> eids;
    for (int64_t e = 0; e < (r == 0 ? 10 : 100); ++e)
      eids.push_back(e * 37 + r);
    ops::EdgeLoaderOptions eo;
    eo.negatives = 1;
    eo.exclude = ops::ExcludeMode::kSelf;
    DistEdgeDataLoader loader(sampler, eids, o, eo, BatchOrder::kLocal);
    loader.start_epoch(0);
    const std::string got = drain_wrapped_epoch<ops::EdgeMiniBatch>(
        loader, [](const ops::EdgeMiniBatch& mb) { return mb.neg_dst; });
    rt->barrier();
    return got;
  });
  for (const auto& r : res)
    ASSERT_EQ(r.exit_code, 0) << describe(res);
  EXPECT_EQ(res[0].message, "13 13 2") << describe(res);  // 2 own batches, wrapped to 13 steps
  EXPECT_EQ(res[1].message, "13 13 13") << describe(res);
}

TEST(DistEdgeLoader, BadInputsFailEveryRank) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path cfg = partitions(2, "metis");
  for (const std::string which : {"global-mismatch", "global-batch-size", "empty-share",
                                  "out-of-range", "reverse-size", "reverse-wrong", "negatives"}) {
    auto res = run_ranks(job(2, 40), [&](int r) {
      auto rt = Runtime::create();
      DistGraph g(rt, "cora", cfg);
      DistNeighborSampler sampler(g, {5});
      ops::LoaderOptions o;
      o.batch_size = 8;
      ops::EdgeLoaderOptions eo;
      eo.negatives = 1;
      std::vector<int64_t> eids = {1, 2, 3, 4};
      BatchOrder order = BatchOrder::kLocal;
      if (r == 1) {
        if (which == "global-mismatch") eids.push_back(5);
        if (which == "global-batch-size") o.batch_size = 4;
        if (which == "empty-share") eids.clear();
        if (which == "out-of-range") eids.push_back(g.num_edges());
        if (which == "reverse-size") {
          eo.exclude = ops::ExcludeMode::kReverseId;
          eo.reverse_eids.assign(3, 0);
        }
        if (which == "reverse-wrong") {  // every edge its own reverse: checked on endpoints
          eo.exclude = ops::ExcludeMode::kReverseId;
          eo.reverse_eids.resize(static_cast<size_t>(g.num_edges()));
          std::iota(eo.reverse_eids.begin(), eo.reverse_eids.end(), int64_t{0});
        }
        if (which == "negatives") eo.negatives = -1;
      }
      if (which.rfind("global", 0) == 0) order = BatchOrder::kGlobal;
      DistEdgeDataLoader loader(sampler, eids, o, eo, order);
      return std::string("created");
    });
    for (const auto& r : res) {
      EXPECT_EQ(r.exit_code, 1) << which << describe(res);
      EXPECT_NE(r.message.find("rank 1"), std::string::npos) << which << describe(res);
      EXPECT_LT(r.seconds, 30) << describe(res);
    }
  }
}

}  // namespace
}  // namespace tessera::test
