// SPDX-License-Identifier: Apache-2.0
// dist::DistNodeDataLoader: with the global batch order, batch j of an epoch has the same seeds
// and blocks (in original IDs) for 1, 2 and 4 ranks and for METIS and random partitionings; every
// rank runs the same number of batches (short shares wrap around); bad seed sets fail every rank.
// Real forked processes (local transport at 1 rank, ucx over tcp otherwise).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "dist_fixtures.hpp"
#include "tessera/dist/graph.hpp"
#include "tessera/dist/loader.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/dist/sampling.hpp"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;
using dist::BatchOrder;
using dist::DistGraph;
using dist::DistNeighborSampler;
using dist::DistNodeDataLoader;
using dist::Runtime;

ScratchCleanup cleanup{"loader-test"};

fs::path partitions(int parts, const std::string& method) {
  return cached_partitions("loader-test", "cora", parts, method);
}

JobSpec job(int world, double deadline = 60) {
  return tessera::test::job(world, world == 1 ? "" : "tcp",
                            deadline);  // one rank: local; else ucx over tcp
}

/// Nodes whose original ID is a multiple of 3, as new IDs of this partitioning.
std::vector<int64_t> seed_set(const DistGraph& g) {
  std::vector<int64_t> all(static_cast<size_t>(g.num_nodes()));
  for (int64_t v = 0; v < g.num_nodes(); ++v)
    all[v] = v;
  const Array orig = g.orig_nid().read(all);
  std::vector<int64_t> seeds;
  for (int64_t v = 0; v < g.num_nodes(); ++v)
    if (orig.data<int64_t>()[v] % 3 == 0) seeds.push_back(v);
  return seeds;
}

/// One line per batch: "j:<count> <hash>" of "seeds... | src>dst ..." with every node in
/// original IDs (hashed: a rank's answer travels through an 8 KB pipe).
std::string dump_epoch(int world, const fs::path& cfg, int64_t epoch) {
  auto rt = Runtime::create();
  DistGraph g(rt, "cora", cfg);
  DistNeighborSampler sampler(g, {10, 5});
  ops::LoaderOptions o;
  o.batch_size = 64;
  o.seed = 7;
  o.num_workers = 2;
  DistNodeDataLoader loader(sampler, seed_set(g), o, BatchOrder::kGlobal);
  const int64_t want_steps = (loader.num_global_batches() + world - 1) / world;
  if (loader.num_batches() != want_steps) return "wrong step count";
  loader.start_epoch(epoch);
  std::ostringstream out;
  ops::NodeMiniBatch mb;
  auto orig = [&](const std::vector<int64_t>& ids) { return g.orig_nid().read(ids); };
  while (loader.next(mb)) {
    std::ostringstream line;
    const Array s = orig(mb.seeds);
    for (size_t i = 0; i < mb.seeds.size(); ++i)
      line << ' ' << s.data<int64_t>()[i];
    int64_t edges = 0;
    for (const auto& b : mb.blocks) {
      const Array src = orig(b.src_nodes);
      line << " |";
      for (int64_t e = 0; e < b.num_edges(); ++e)
        line << ' ' << src.data<int64_t>()[b.src[e]] << '>' << src.data<int64_t>()[b.dst[e]];
      edges += b.num_edges();
    }
    out << mb.index << ":" << mb.seeds.size() << " " << edges << " " << fnv1a(line.str()) << '\n';
  }
  rt->barrier();
  return out.str();
}

/// Global batch index -> its line, over every rank's output.
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

TEST(DistLoader, GlobalOrderBatchesAreTheSameForAnyWorldSizeAndPartitioning) {
  TESSERA_SKIP_WITHOUT_UCX();
  const int64_t epoch = 1;
  auto one = run_ranks(job(1), [&](int) { return dump_epoch(1, partitions(1, "metis"), epoch); });
  ASSERT_EQ(one[0].exit_code, 0) << describe(one);
  const auto ref = collect(one);
  ASSERT_GT(ref.size(), 10u);
  for (const auto& [world, method] :
       std::vector<std::pair<int, std::string>>{{2, "metis"}, {4, "metis"}, {2, "random"}}) {
    const fs::path cfg = partitions(world, method);
    auto res =
        run_ranks(job(world), [&, world = world](int) { return dump_epoch(world, cfg, epoch); });
    for (const auto& r : res)
      ASSERT_EQ(r.exit_code, 0) << describe(res);
    const auto got = collect(res);
    ASSERT_EQ(got.size(), ref.size()) << world << " " << method;
    for (const auto& [j, line] : ref)
      EXPECT_EQ(got.at(j), line) << "global batch " << j << " at " << world << " ranks (" << method
                                 << ")";
  }
}

TEST(DistLoader, ShortSharesWrapSoEveryRankRunsTheSameSteps) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path cfg = partitions(2, "metis");
  auto res = run_ranks(job(2), [&](int r) {
    auto rt = Runtime::create();
    DistGraph g(rt, "cora", cfg);
    DistNeighborSampler sampler(g, {5});
    ops::LoaderOptions o;
    o.batch_size = 8;
    std::vector<int64_t> seeds;
    for (int64_t v = 0; v < (r == 0 ? 10 : 100); ++v)
      seeds.push_back(v * 13 + r);
    DistNodeDataLoader loader(sampler, seeds, o, BatchOrder::kLocal);
    loader.start_epoch(0);
    const std::string got = drain_wrapped_epoch<ops::NodeMiniBatch>(
        loader, [](const ops::NodeMiniBatch& mb) { return mb.seeds; });
    rt->barrier();
    return got;
  });
  for (const auto& r : res)
    ASSERT_EQ(r.exit_code, 0) << describe(res);
  EXPECT_EQ(res[0].message, "13 13 2") << describe(res);  // 2 own batches, wrapped to 13 steps
  EXPECT_EQ(res[1].message, "13 13 13") << describe(res);
}

TEST(DistLoader, BadSeedSetsFailEveryRank) {
  TESSERA_SKIP_WITHOUT_UCX();
  const fs::path cfg = partitions(2, "metis");
  for (const std::string which : {"global-mismatch", "empty-share"}) {
    auto res = run_ranks(job(2, 40), [&](int r) {
      auto rt = Runtime::create();
      DistGraph g(rt, "cora", cfg);
      DistNeighborSampler sampler(g, {5});
      ops::LoaderOptions o;
      o.batch_size = 8;
      std::vector<int64_t> seeds = {1, 2, 3, 4};
      if (which == "global-mismatch" && r == 1) seeds.push_back(5);
      if (which == "empty-share" && r == 1) seeds.clear();
      DistNodeDataLoader loader(
          sampler, seeds, o, which == "global-mismatch" ? BatchOrder::kGlobal : BatchOrder::kLocal);
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
