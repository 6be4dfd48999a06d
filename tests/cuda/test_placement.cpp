// SPDX-License-Identifier: Apache-2.0
// Pure logic of cuda/: placement by budget, the hot-row cache policy, and the caching
// allocator (with a host upstream standing in for cudaMalloc). Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera_test.hpp"

namespace tessera::cuda {
namespace {

TEST(Placement, NamesRoundTrip) {
  for (Placement p : {Placement::kGpu, Placement::kPinnedHost, Placement::kHost})
    EXPECT_EQ(parse_placement(placement_name(p)), p);
  EXPECT_EQ(parse_placement("pinned"), Placement::kPinnedHost);
  TESSERA_EXPECT_THROW_MSG(parse_placement("hbm", "--placement"), ValueError, "--placement");
}

TEST(Placement, GreedyByPriorityWithinBudget) {
  std::vector<ArraySpec> a = {
      {"feat", 600, 1}, {"indptr", 100, 0}, {"indices", 400, 0}, {"labels", 50, 2}};
  MemoryBudget b{550, 700};
  PlacementPlan p = plan_placement(a, b);
  // Structure first: indptr (100) + indices (400) on the GPU; feat (600) does not fit the 50
  // left, goes pinned; labels (50) fits the GPU remainder exactly.
  EXPECT_EQ(p.where[1], Placement::kGpu);
  EXPECT_EQ(p.where[2], Placement::kGpu);
  EXPECT_EQ(p.where[0], Placement::kPinnedHost);
  EXPECT_EQ(p.where[3], Placement::kGpu);
  EXPECT_EQ(p.gpu_bytes_used, 550);
  EXPECT_EQ(p.pinned_bytes_used, 600);
  EXPECT_EQ(p.gpu_bytes_left, 0);
  EXPECT_EQ(p.describe(a), "feat: uva, indptr: gpu, indices: gpu, labels: gpu");
}

TEST(Placement, FallsBackToHostAndHonoursPermissions) {
  std::vector<ArraySpec> a = {
      {"x", 10, 0, false, true}, {"y", 10, 0, false, false}, {"z", 1000, 0}};
  PlacementPlan p = plan_placement(a, {100, 15});
  EXPECT_EQ(p.where[0], Placement::kPinnedHost);
  EXPECT_EQ(p.where[1], Placement::kHost);
  EXPECT_EQ(p.where[2], Placement::kHost);  // fits neither the GPU nor the 5 pinned bytes left
  EXPECT_EQ(p.gpu_bytes_left, 100);
  PlacementPlan unlimited = plan_placement(a, {-1, -1});
  EXPECT_EQ(unlimited.where[2], Placement::kGpu);
  EXPECT_TRUE(plan_placement({}, {0, 0}).where.empty());
  TESSERA_EXPECT_THROW_MSG(plan_placement({{"neg", -1, 0}}, {1, 1}), ValueError, "neg");
}

TEST(FeatureCache, HottestRowsFirstTiesByID) {
  std::vector<int64_t> deg = {3, 7, 7, 0, 5, 7, 1};
  FeatureCachePlan p = plan_feature_cache(deg, 16, 16 * 4 + 15);  // room for 4 rows
  EXPECT_EQ(p.hot_rows, (std::vector<int64_t>{1, 2, 5, 4}));
  EXPECT_EQ(p.slot_of, (std::vector<int64_t>{-1, 0, 1, -1, 3, 2, -1}));
  EXPECT_EQ(p.capacity_rows(), 4);
  EXPECT_EQ(plan_feature_cache(deg, 16, 0).capacity_rows(), 0);
  EXPECT_EQ(plan_feature_cache(deg, 16, 1 << 20).capacity_rows(), 7);
  EXPECT_EQ(plan_feature_cache({}, 16, 1 << 20).capacity_rows(), 0);
  TESSERA_EXPECT_THROW_MSG(plan_feature_cache(deg, 0, 10), ValueError, "row_bytes");
  TESSERA_EXPECT_THROW_MSG(plan_feature_cache(deg, 4, -1), ValueError, "budget");
}

TEST(FeatureCache, MatchesFullSortOracleAndCountsHits) {
  std::mt19937_64 rng(7);
  const int64_t n = 5000;
  std::vector<int64_t> deg(n);
  for (auto& d : deg)
    d = static_cast<int64_t>(rng() % 40);  // many ties
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return deg[a] > deg[b]; });
  for (int64_t cap : {int64_t{1}, int64_t{17}, int64_t{999}, n}) {
    FeatureCachePlan p = plan_feature_cache(deg, 8, cap * 8);
    ASSERT_EQ(p.capacity_rows(), cap);
    EXPECT_EQ(p.hot_rows, std::vector<int64_t>(order.begin(), order.begin() + cap));
  }
  // In-degree from a CSC indptr, then hit counting.
  std::vector<int64_t> indptr = {0, 2, 2, 5, 6};
  EXPECT_EQ(in_degrees_from_csc(indptr.data(), 4), (std::vector<int64_t>{2, 0, 3, 1}));
  FeatureCachePlan p = plan_feature_cache(in_degrees_from_csc(indptr.data(), 4), 4, 8);
  EXPECT_EQ(p.hot_rows, (std::vector<int64_t>{2, 0}));
  std::vector<int64_t> ids = {0, 1, 2, 2, 3, 0};
  CacheStats st = count_cache_hits(p, ids.data(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(st.lookups, 6);
  EXPECT_EQ(st.hits, 4);
  EXPECT_DOUBLE_EQ(st.hit_rate(), 4.0 / 6.0);
  EXPECT_EQ(CacheStats{}.hit_rate(), 0.0);
  std::vector<int64_t> bad = {4};
  TESSERA_EXPECT_THROW_MSG(count_cache_hits(p, bad.data(), 1), IndexError, "ids[0] = 4");
}

// A host upstream that counts calls, standing in for cudaMalloc.
class HostUpstream : public Upstream {
 public:
  void* allocate(size_t bytes) override {
    ++allocs;
    live.insert(bytes);
    return std::malloc(bytes);
  }
  void deallocate(void* p, size_t) override {
    ++frees;
    std::free(p);
  }
  void quiesce(int d) override { quiesced.push_back(d); }
  int device() const override { return dev; }
  int allocs = 0, frees = 0, dev = 0;
  std::vector<int> quiesced;
  std::multiset<size_t> live;
};

TEST(CachingAllocator, RoundsToPowersOfTwo) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size((size_t{1} << 30) + 1), size_t{1} << 31);
}

TEST(CachingAllocator, SteadyStateDoesNoUpstreamAllocation) {
  HostUpstream up;
  {
    CachingAllocator a(up);
    auto* s1 = reinterpret_cast<StreamHandle>(0x1);
    // A "batch" needs scratch of varying sizes; after the first batch, no upstream calls.
    std::mt19937 rng(3);
    for (int batch = 0; batch < 50; ++batch) {
      std::vector<void*> ps;
      for (size_t sz : {size_t{1000} + rng() % 24, size_t{70000} + rng() % 50000, size_t{8}})
        ps.push_back(a.allocate(sz, s1));
      for (void* p : ps)
        a.deallocate(p);
      if (batch == 0) {
        EXPECT_EQ(up.allocs, 3);
      }
    }
    AllocatorStats st = a.stats();
    EXPECT_EQ(st.upstream_allocs, 3);
    EXPECT_EQ(st.requests, 150);
    EXPECT_EQ(st.cache_hits, 147);
    EXPECT_EQ(st.bytes_in_use, 0);
    EXPECT_EQ(st.bytes_cached, 1024 + 131072 + 512);
    EXPECT_EQ(st.peak_bytes_in_use, 1024 + 131072 + 512);
    EXPECT_EQ(a.allocate(0, s1), nullptr);
    a.deallocate(nullptr);
  }
  EXPECT_EQ(up.frees, 3);  // the destructor returns cached blocks
}

TEST(CachingAllocator, BlocksStayWithTheirStream) {
  HostUpstream up;
  CachingAllocator a(up);
  auto* s1 = reinterpret_cast<StreamHandle>(0x1);
  auto* s2 = reinterpret_cast<StreamHandle>(0x2);
  void* p = a.allocate(4096, s1);
  a.deallocate(p);
  // Another stream must not get s1's block: its work is not ordered after s1's.
  void* q = a.allocate(4096, s2);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().upstream_allocs, 2);
  void* r = a.allocate(4000, s1);
  EXPECT_EQ(r, p);
  // Two live blocks are distinct.
  void* t = a.allocate(4000, s1);
  EXPECT_NE(t, r);
  a.deallocate(q);
  a.deallocate(r);
  a.deallocate(t);
  TESSERA_EXPECT_THROW_MSG(a.deallocate(t), ValueError, "not allocated here");
  a.release_cached();
  EXPECT_EQ(up.quiesced, std::vector<int>{0});
  EXPECT_EQ(a.stats().bytes_cached, 0);
  EXPECT_EQ(a.stats().upstream_frees, 3);
}

TEST(CachingAllocator, BlocksStayWithTheirDevice) {
  // The default stream's handle names a stream of every device: a block cached on device 0 must
  // not serve a request made on device 1.
  HostUpstream up;
  CachingAllocator a(up);
  StreamHandle s0 = nullptr;
  void* p = a.allocate(4096, s0);
  a.deallocate(p);
  up.dev = 1;
  void* q = a.allocate(4096, s0);
  EXPECT_NE(q, p);
  a.deallocate(q);
  up.dev = 0;
  EXPECT_EQ(a.allocate(4096, s0), p);
  a.deallocate(p);
  a.release_cached();
  EXPECT_EQ(up.quiesced, (std::vector<int>{0, 1}));  // each device waited for, once
  EXPECT_EQ(a.stats().upstream_frees, 2);
}

TEST(CachingAllocator, ARetiredStreamsBlocksServeEveryStreamOfItsDevice) {
  // A stream made for one call and destroyed after it: its blocks would otherwise wait for a
  // handle that never comes back, and repeated calls would grow the cache without bound.
  HostUpstream up;
  CachingAllocator a(up);
  char handles[24];  // their addresses stand in for stream handles
  for (int call = 0; call < 20; ++call) {
    StreamHandle s = &handles[call];  // a new stream for every call
    void* p = a.allocate(3000, s);
    void* q = a.allocate(100, s);
    a.deallocate(p);
    a.deallocate(q);
    a.retire_stream(s);
  }
  EXPECT_EQ(a.stats().upstream_allocs, 2);
  EXPECT_EQ(a.stats().bytes_cached, 4096 + 512);
  // Retiring does not hand them to another device, nor blocks still live.
  StreamHandle s = &handles[20];
  void* live = a.allocate(3000, s);
  a.retire_stream(s);
  a.deallocate(live);
  up.dev = 1;
  void* other = a.allocate(100, &handles[21]);
  EXPECT_EQ(a.stats().upstream_allocs, 3);
  a.deallocate(other);
  up.dev = 0;
  // The block freed after its stream was retired goes to no stream, also not to a new stream
  // that reuses the handle (its last work may be on any stream), until release_cached().
  void* t = a.allocate(3000, &handles[22]);
  EXPECT_NE(t, live);
  a.deallocate(t);
  void* again = a.allocate(3000, s);
  EXPECT_NE(again, live);
  EXPECT_NE(again, t);
  EXPECT_EQ(a.stats().upstream_allocs, 5);
  a.deallocate(again);
  EXPECT_EQ(a.allocate(3000, s), again);  // the new stream's own block serves it again
  a.deallocate(again);
  const int64_t frees = a.stats().upstream_frees;
  a.release_cached();
  EXPECT_EQ(a.stats().bytes_cached, 0);
  EXPECT_EQ(a.stats().upstream_frees - frees, 5);  // 512 on each device, t, again and live
}

TEST(CudaRuntime, StubOrDeviceSaysSo) {
  if (compiled_with_cuda()) {
    if (device_count() == 0)
      TESSERA_EXPECT_THROW_MSG(require_cuda("op"), ValueError, "no CUDA device");
  } else {
    EXPECT_EQ(device_count(), 0);
    TESSERA_EXPECT_THROW_MSG(require_cuda("gather_rows"), NotCompiledError,
                             "not_compiled_with_cuda");
    TESSERA_EXPECT_THROW_MSG(DeviceBuffer(16), NotCompiledError, "not_compiled_with_cuda");
    TESSERA_EXPECT_THROW_MSG(PinnedBuffer(16), NotCompiledError, "not_compiled_with_cuda");
    TESSERA_EXPECT_THROW_MSG(Stream(), NotCompiledError, "not_compiled_with_cuda");
    TESSERA_EXPECT_THROW_MSG(scratch_allocator().allocate(16, nullptr), NotCompiledError,
                             "not_compiled_with_cuda");
  }
}

}  // namespace
}  // namespace tessera::cuda
