// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

#include "helpers.hpp"
#include "tessera/core/error.hpp"
#include "tessera/ops/loader.hpp"

namespace tessera::ops {
namespace {

std::vector<int64_t> first_nodes(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// A compact fingerprint of a node batch: seeds and every block's arrays.
std::vector<int64_t> fingerprint(const NodeMiniBatch& b) {
  std::vector<int64_t> f = b.seeds;
  for (const auto& blk : b.blocks) {
    f.push_back(-1);
    f.insert(f.end(), blk.src_nodes.begin(), blk.src_nodes.end());
    f.insert(f.end(), blk.src.begin(), blk.src.end());
    f.insert(f.end(), blk.dst.begin(), blk.dst.end());
    f.insert(f.end(), blk.eids.begin(), blk.eids.end());
  }
  return f;
}

std::vector<std::vector<int64_t>> run_epoch(NodeDataLoader& loader, int64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  loader.start_epoch(epoch);
  NodeMiniBatch b;
  int64_t expect = 0;
  while (loader.next(b)) {
    EXPECT_EQ(b.index, expect++);
    EXPECT_EQ(b.epoch, epoch);
    out.push_back(fingerprint(b));
  }
  EXPECT_EQ(expect, loader.num_batches());
  return out;
}

TEST(NodeDataLoader, DeterministicForAnyWorkerCount) {
  const Graph& g = test::real_dataset("tolokers").graph;
  NeighborSamplerOptions so;
  so.fanouts = {10, 5};
  NeighborSampler sampler(g, so);
  const auto seeds = first_nodes(3000);
  std::vector<std::vector<int64_t>> ref;
  for (int workers : {0, 1, 2, 5}) {
    LoaderOptions lo;
    lo.batch_size = 256;
    lo.num_workers = workers;
    lo.prefetch = 2;
    lo.seed = 17;
    NodeDataLoader loader(sampler, seeds, lo);
    EXPECT_EQ(loader.num_batches(), 12);
    auto got = run_epoch(loader, 3);
    if (ref.empty()) {
      ref = got;
    } else {
      EXPECT_EQ(got, ref) << workers << " workers";
    }
  }
  // Batch b sampled alone (any order) equals the loader's batch b.
  LoaderOptions lo;
  lo.batch_size = 256;
  lo.seed = 17;
  NodeDataLoader loader(sampler, seeds, lo);
  for (int64_t b : {11, 4, 0})
    EXPECT_EQ(fingerprint(loader.sample_batch(3, b)), ref[static_cast<size_t>(b)]);
}

TEST(NodeDataLoader, ShuffleBatchSizeDropLast) {
  const Graph& g = test::real_dataset("cora").graph;
  NeighborSamplerOptions so;
  so.fanouts = {3};
  NeighborSampler sampler(g, so);
  const auto seeds = first_nodes(1000);
  LoaderOptions lo;
  lo.batch_size = 300;
  lo.seed = 5;
  NodeDataLoader keep(sampler, seeds, lo);
  EXPECT_EQ(keep.num_batches(), 4);
  std::vector<int64_t> all;
  for (int64_t b = 0; b < 4; ++b) {
    auto s = keep.batch_seeds(0, b);
    EXPECT_EQ(s.size(), b < 3 ? 300u : 100u);
    all.insert(all.end(), s.begin(), s.end());
  }
  EXPECT_NE(all, seeds);  // shuffled
  std::vector<int64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, seeds);                                   // a permutation
  EXPECT_NE(keep.batch_seeds(1, 0), keep.batch_seeds(0, 0));  // epoch-seeded
  lo.drop_last = true;
  EXPECT_EQ(NodeDataLoader(sampler, seeds, lo).num_batches(), 3);
  lo.shuffle = false;
  lo.drop_last = false;
  NodeDataLoader plain(sampler, seeds, lo);
  EXPECT_EQ(plain.batch_seeds(2, 1),
            std::vector<int64_t>(seeds.begin() + 300, seeds.begin() + 600));
}

TEST(NodeDataLoader, EarlyExitJoinsEveryThread) {
  const Graph& g = test::real_dataset("tolokers").graph;
  NeighborSamplerOptions so;
  so.fanouts = {10, 10};
  NeighborSampler sampler(g, so);
  const auto seeds = first_nodes(g.num_nodes);
  for (int rep = 0; rep < 5; ++rep) {
    LoaderOptions lo;
    lo.batch_size = 64;
    lo.num_workers = 4;
    lo.prefetch = 3;
    auto loader = std::make_unique<NodeDataLoader>(sampler, seeds, lo);
    loader->start_epoch(0);
    NodeMiniBatch b;
    for (int i = 0; i < rep; ++i)
      ASSERT_TRUE(loader->next(b));
    if (rep == 3) loader->start_epoch(1);  // restart mid-epoch
    loader.reset();                        // destroys mid-epoch: must not hang or leak
  }
  SUCCEED();
}

TEST(NodeDataLoader, SamplerErrorSurfacesInCaller) {
  const Graph g = test::random_graph(2000, 8, 4);
  std::vector<float> w(static_cast<size_t>(g.num_edges()), 1.0f);
  NeighborSamplerOptions so;
  so.fanouts = {4, 4};
  SamplingGraphOptions prep;
  prep.weights = w;
  prep.weight_prefix = false;  // the rows' weights are read (and checked) at every visit
  NeighborSampler sampler(g, so, prep);
  // Corrupt one weight after validation: the worker that reads it throws.
  const int64_t bad_node = 1234;
  w[static_cast<size_t>(g.indptr[bad_node])] = -5.0f;
  LoaderOptions lo;
  lo.batch_size = 100;
  lo.shuffle = false;
  lo.num_workers = 3;
  NodeDataLoader loader(sampler, first_nodes(2000), lo);
  loader.start_epoch(0);
  NodeMiniBatch b;
  int64_t delivered = 0;
  bool threw = false;
  try {
    while (loader.next(b))
      ++delivered;
  } catch (const ValueError& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("weight -5"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw);
  EXPECT_LE(delivered, bad_node / 100);  // delivered in order up to the failing batch at most
}

TEST(OrderedPrefetcher, OrderErrorsAndStop) {
  for (int workers : {0, 1, 3, 8}) {
    detail::OrderedPrefetcher<int64_t> p(50, workers, 4, [](int64_t i, int) {
      std::this_thread::sleep_for(std::chrono::microseconds((i * 37) % 200));
      if (i == 20) throw IndexError("boom at 20");
      return i * i;
    });
    int64_t v, i = 0;
    for (; i < 20; ++i) {
      ASSERT_TRUE(p.next(v));
      EXPECT_EQ(v, i * i);
    }
    TESSERA_EXPECT_THROW_MSG(p.next(v), IndexError, "boom at 20");
    ASSERT_TRUE(p.next(v));
    EXPECT_EQ(v, 21 * 21);
  }
  // Bounded: with capacity 2 and no consumer, at most 2 items are produced.
  std::atomic<int> made{0};
  {
    detail::OrderedPrefetcher<int> p(100, 4, 2, [&](int64_t, int) { return ++made; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LE(made.load(), 4);
  }
}

// A star graph of n leaves and a 1-hop sampler over it (fanout 2): the loaders' argument tests.
struct Star {
  Graph g;
  NeighborSampler sampler;
  explicit Star(int64_t n) : g(test::star(n)), sampler(g, options()) {}
  static NeighborSamplerOptions options() {
    NeighborSamplerOptions so;
    so.fanouts = {2};
    return so;
  }
};

TEST(Loaders, BadArgumentsGiveClearErrors) {
  const Star star(5);
  const NeighborSampler& sampler = star.sampler;
  LoaderOptions lo;
  TESSERA_EXPECT_THROW_MSG(NodeDataLoader(sampler, {}, lo), ValueError, "seed node set is empty");
  TESSERA_EXPECT_THROW_MSG(NodeDataLoader(sampler, {1, 9}, lo), IndexError,
                           "seed node 9 at position 1 outside [0, 6)");
  lo.seed = uint64_t{1} << 33;
  TESSERA_EXPECT_THROW_MSG(NodeDataLoader(sampler, {1}, lo), ValueError, "out of range");
  lo.seed = 0;
  lo.batch_size = 0;
  TESSERA_EXPECT_THROW_MSG(NodeDataLoader(sampler, {1}, lo), ValueError, "batch_size 0");
  lo.batch_size = 2;
  NodeDataLoader ok(sampler, {1}, lo);
  NodeMiniBatch b;
  TESSERA_EXPECT_THROW_MSG(ok.next(b), ValueError, "start_epoch");
  EdgeLoaderOptions eo;
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {}, lo, eo), ValueError,
                           "seed edge set is empty");
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {100}, lo, eo), IndexError, "seed edge 100");
  eo.negatives = -1;
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {0}, lo, eo), ValueError, "negatives -1");
  eo.negatives = 1;
  eo.exclude = ExcludeMode::kReverseId;
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {0}, lo, eo), ValueError, "reverse_eids has 0");
  // A map in other IDs (here: every edge its own reverse) would exclude the wrong edges.
  eo.reverse_eids.resize(static_cast<size_t>(star.g.num_edges()));
  std::iota(eo.reverse_eids.begin(), eo.reverse_eids.end(), int64_t{0});
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {0}, lo, eo), ValueError,
                           "not the other way (reverse_eids must be in the graph's edge IDs)");
}

TEST(Loaders, DuplicateSeedsAndHugeBatchSizes) {
  const Star star(5);
  const NeighborSampler& sampler = star.sampler;
  LoaderOptions lo;
  lo.batch_size = 2;
  // Refused up front: before, only the epochs that shuffled both copies into one batch failed.
  TESSERA_EXPECT_THROW_MSG(NodeDataLoader(sampler, {1, 3, 1}, lo), ValueError,
                           "seed node 1 at position 2 is listed twice");
  EdgeLoaderOptions eo;
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {0, 2, 2}, lo, eo), ValueError,
                           "seed edge 2 at position 2 is listed twice");
  eo.negatives = std::numeric_limits<int64_t>::max() / 2 + 1;  // times 2 edges per batch
  TESSERA_EXPECT_THROW_MSG(EdgeDataLoader(sampler, {0, 2, 3}, lo, eo), ValueError,
                           "count of negative pairs overflows");
  // A batch size near INT64_MAX ("one batch of everything") gives one batch, not an overflow.
  lo.batch_size = std::numeric_limits<int64_t>::max();
  for (bool drop_last : {false, true}) {
    lo.drop_last = drop_last;
    NodeDataLoader loader(sampler, {4, 1, 3}, lo);
    ASSERT_EQ(loader.num_batches(), drop_last ? 0 : 1);
    if (drop_last) continue;
    EXPECT_EQ(loader.batch_seeds(0, 0).size(), 3u);
    loader.start_epoch(0);
    NodeMiniBatch b;
    ASSERT_TRUE(loader.next(b));
    EXPECT_EQ(b.seeds.size(), 3u);
    EXPECT_FALSE(loader.next(b));
  }
}

TEST(Loaders, BadEpochKeepsTheRunningOne) {
  const Star star(40);
  const NeighborSampler& sampler = star.sampler;
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.num_workers = 2;
  NodeDataLoader loader(sampler, first_nodes(40), lo);
  // -1 is also the "no epoch started" mark: it must read as a bad epoch, not an empty order.
  TESSERA_EXPECT_THROW_MSG(loader.batch_seeds(-1, 0), ValueError, "epoch -1 out of range");
  TESSERA_EXPECT_THROW_MSG(loader.sample_batch(-1, 0), ValueError, "epoch -1 out of range");
  loader.start_epoch(2);
  NodeMiniBatch b;
  ASSERT_TRUE(loader.next(b));
  TESSERA_EXPECT_THROW_MSG(loader.start_epoch(-1), ValueError, "epoch -1 out of range");
  int64_t rest = 0;
  while (loader.next(b)) {  // the running epoch goes on where it was
    EXPECT_EQ(b.epoch, 2);
    EXPECT_EQ(b.index, rest + 1);
    ++rest;
  }
  EXPECT_EQ(rest, loader.num_batches() - 1);
  loader.start_epoch(3);
  ASSERT_TRUE(loader.next(b));
  loader.stop();  // left early: nothing more is handed out, the prefetched batches are freed
  EXPECT_FALSE(loader.next(b));
  loader.stop();          // idempotent
  loader.start_epoch(4);  // joins the stopped epoch's threads
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.epoch, 4);
  EXPECT_EQ(b.index, 0);
}

TEST(OrderedPrefetcher, SeveralConsumersAndStopWakeWaiters) {
  // Two consumers share the items: each index is delivered exactly once, and neither waits
  // forever for an item the other took (before, the loser of the last item hung).
  for (int workers : {0, 1, 3}) {
    detail::OrderedPrefetcher<int64_t> p(200, workers, 3, [](int64_t i, int) { return i; });
    std::vector<int64_t> got[2];
    std::thread other([&] {
      int64_t v;
      while (p.next(v))
        got[1].push_back(v);
    });
    int64_t v;
    while (p.next(v))
      got[0].push_back(v);
    other.join();
    std::vector<int64_t> all = got[0];
    all.insert(all.end(), got[1].begin(), got[1].end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, first_nodes(200)) << workers << " workers";
    for (const auto& g : got)
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));  // each consumer sees increasing indices
  }
  // stop() wakes a consumer waiting for an item that is still being produced; next() after
  // stop() returns false instead of waiting.
  std::atomic<bool> release{false};
  detail::OrderedPrefetcher<int> p(10, 1, 2, [&](int64_t, int) {
    while (!release.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 7;
  });
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    int v;
    result = p.next(v) ? 1 : 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread stopper([&] { p.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release = true;  // lets the worker finish, so stop() can join it
  stopper.join();
  waiter.join();
  EXPECT_EQ(result.load(), 0);
  int v;
  EXPECT_FALSE(p.next(v));
}

TEST(OrderedPrefetcher, AWaitCanBeInterrupted) {
  // The Python bindings poll for Ctrl-C through `interrupted` while next() waits for a slow
  // item: the wait ends at the first poll that says so, without the item.
  std::atomic<bool> release{false};
  detail::OrderedPrefetcher<int> p(3, 1, 2, [&](int64_t i, int) {
    while (!release.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return static_cast<int>(i);
  });
  int polls = 0, v = -1;
  EXPECT_FALSE(p.next(v, [&] { return ++polls == 2; }));
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(v, -1);
  release = true;
  ASSERT_TRUE(p.next(v, [] { return false; }));  // a poll that says "go on" changes nothing
  EXPECT_EQ(v, 1);                               // item 0 went to the interrupted call
}

TEST(OrderedPrefetcher, OutOfThreadsIsAnErrorNotATerminate) {
  // With 1 GiB of address space and 8 MiB thread stacks, 2000 workers cannot all start: the
  // ones started are joined and the caller gets an IOError (before, std::terminate).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        rlimit lim{};
        lim.rlim_cur = lim.rlim_max = rlim_t{1} << 30;
        if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(3);
        try {
          detail::OrderedPrefetcher<int> p(10, 2000, 4, [](int64_t i, int) { return int(i); });
        } catch (const IOError& e) {
          std::_Exit(std::string(e.what()).find("cannot start sampler thread") != std::string::npos
                         ? 0
                         : 4);
        }
        std::_Exit(5);  // all 2000 started: the limit did not bite (not what this tests)
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(EdgeDataLoader, NegativesExclusionAndDeterminism) {
  const Dataset& ds = test::real_dataset("cora");
  const Graph& g = ds.graph;
  NeighborSamplerOptions so;
  so.fanouts = {-1, -1};  // take everything, so exclusion is the only reason an edge is missing
  NeighborSampler sampler(g, so);
  std::vector<int64_t> seeds = first_nodes(ds.num_input_edges);  // one direction of each pair
  LoaderOptions lo;
  lo.batch_size = 200;
  lo.seed = 3;
  EdgeLoaderOptions eo;
  eo.negatives = 3;
  eo.exclude = ExcludeMode::kReverseId;
  eo.reverse_eids = symmetrized_reverse_eids(ds.num_input_edges);
  std::vector<std::vector<int64_t>> ref;
  for (int workers : {0, 2, 3}) {
    lo.num_workers = workers;
    EdgeDataLoader loader(sampler, seeds, lo, eo);
    loader.start_epoch(1);
    EdgeMiniBatch b;
    std::vector<std::vector<int64_t>> got;
    int64_t checked = 0;
    while (loader.next(b)) {
      ASSERT_EQ(b.neg_src.size(), b.eids.size() * 3);
      ASSERT_EQ(b.blocks.back().dst_nodes().to_vector(), b.seeds);
      for (size_t i = 0; i < b.eids.size(); ++i) {
        EXPECT_EQ(b.seeds[b.pos_src_local[i]], b.pos_src[i]);
        EXPECT_EQ(b.seeds[b.pos_dst_local[i]], b.pos_dst[i]);
        EXPECT_EQ(b.neg_src[3 * i], b.pos_src[i]);
      }
      std::set<int64_t> excluded;
      for (int64_t e : b.eids) {
        excluded.insert(e);
        excluded.insert(eo.reverse_eids[e]);
      }
      int64_t edges = 0;
      for (const auto& blk : b.blocks) {
        for (int64_t e : blk.eids)
          EXPECT_FALSE(excluded.count(e)) << "excluded edge " << e << " in a block";
        edges += blk.num_edges();
      }
      // With fanout -1, the output block holds all in-edges of the seeds except excluded ones.
      const Block& out = b.blocks.back();
      int64_t want = 0;
      for (int64_t v : b.seeds)
        for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
          want += !excluded.count(g.eid(k));
      EXPECT_EQ(out.num_edges(), want);
      if (checked++ == 0) {
        EXPECT_GT(edges, 0);
      }
      std::vector<int64_t> f = b.eids;
      f.insert(f.end(), b.neg_dst.begin(), b.neg_dst.end());
      for (const auto& blk : b.blocks)
        f.insert(f.end(), blk.eids.begin(), blk.eids.end());
      got.push_back(f);
    }
    EXPECT_EQ(static_cast<int64_t>(got.size()), loader.num_batches());
    if (ref.empty()) {
      ref = got;
    } else {
      EXPECT_EQ(got, ref);
    }
  }
}

}  // namespace
}  // namespace tessera::ops
