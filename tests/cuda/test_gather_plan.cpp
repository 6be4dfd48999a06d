// SPDX-License-Identifier: Apache-2.0
// The gather kernels' plan and per-group copy (tessera/cuda/gather_plan.hpp), and the sampling
// benchmark's limit rules (tessera/cuda/row_reads.hpp), on the CPU. The group copy runs as the
// kernels run it, every lane of every group of a small grid in turn, over both paths: indices as
// given, and (row, position) pairs sorted by key as the radix sort leaves them. Runs without a
// GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "tessera/cuda/gather_plan.hpp"
#include "tessera/cuda/row_reads.hpp"
#include "tessera/cuda/sample_group.hpp"
#include "tessera/cuda/sample_rows.hpp"

namespace tessera::cuda {
namespace {

TEST(GatherPlan, VectorWidthFollowsRowAndAddresses) {
  EXPECT_EQ(gather::vector_bytes(128, 0), 16);
  EXPECT_EQ(gather::vector_bytes(128, 0x1008), 8);
  EXPECT_EQ(gather::vector_bytes(12, 0), 4);
  EXPECT_EQ(gather::vector_bytes(130, 0), 2);
  EXPECT_EQ(gather::vector_bytes(4095, 0), 1);
  EXPECT_EQ(gather::vector_bytes(4096, 0x3), 1);
}

TEST(GatherPlan, ChoosesRowsPerGroupAndOrder) {
  using gather::plan;
  const int64_t big = 1 << 20;
  // 128-byte rows: 8 lanes of 16 bytes, four rows per group over one resident grid.
  gather::Plan p = plan(128, big, 0, false, GatherOrder::kAuto);
  EXPECT_EQ(p.vec_bytes, 16);
  EXPECT_EQ(p.vpr, 8);
  EXPECT_EQ(p.log2_tpr, 3);
  EXPECT_EQ(p.rows_per_group, 4);
  EXPECT_EQ(p.grid_mult, 1);
  EXPECT_FALSE(p.sorted);  // device source
  EXPECT_TRUE(plan(128, big, 0, true, GatherOrder::kAuto).sorted);
  EXPECT_TRUE(plan(512, big, 0, true, GatherOrder::kAuto).sorted);
  EXPECT_EQ(plan(512, big, 0, true, GatherOrder::kAuto).rows_per_group, 4);
  // Wider rows: one row per group over four resident grids, read as given.
  p = plan(1024, big, 0, true, GatherOrder::kAuto);
  EXPECT_EQ(p.rows_per_group, 1);
  EXPECT_EQ(p.grid_mult, 4);
  EXPECT_FALSE(p.sorted);
  p = plan(4096, big, 0, false, GatherOrder::kAuto);
  EXPECT_EQ(p.log2_tpr, 8);
  EXPECT_EQ(p.vpr, 256);
  // Rows wider than a block's lanes loop within the group.
  p = plan(8192, big, 0, false, GatherOrder::kAuto);
  EXPECT_EQ(p.log2_tpr, 8);
  EXPECT_EQ(p.vpr, 512);
  // Small batches are not worth a sort.
  EXPECT_FALSE(plan(128, gather::sort_min_rows(128) - 1, 0, true, GatherOrder::kAuto).sorted);
  EXPECT_TRUE(plan(128, gather::sort_min_rows(128), 0, true, GatherOrder::kAuto).sorted);
  EXPECT_FALSE(plan(512, gather::sort_min_rows(512) - 1, 0, true, GatherOrder::kAuto).sorted);
  EXPECT_GT(gather::sort_min_rows(512), gather::sort_min_rows(256));
  // Forced orders and rows per group.
  EXPECT_TRUE(plan(4096, 1, 0, false, GatherOrder::kSorted).sorted);
  EXPECT_FALSE(plan(128, big, 0, true, GatherOrder::kAsGiven).sorted);
  EXPECT_EQ(plan(128, big, 0, false, GatherOrder::kAuto, 1).rows_per_group, 1);
  EXPECT_EQ(plan(128, big, 0, false, GatherOrder::kAuto, 1).grid_mult, 4);
  EXPECT_EQ(plan(4096, big, 0, false, GatherOrder::kAuto, 4).rows_per_group, 4);
}

TEST(GatherPlan, GridCoversTheBatchUpToTheCap) {
  const gather::Plan p = gather::plan(128, 1000, 0, false, GatherOrder::kAuto);
  // 32 groups of 8 lanes per block, 4 rows each: 1000 rows need 8 blocks.
  EXPECT_EQ(gather::grid_blocks(p, 1000, 100), 8);
  EXPECT_EQ(gather::grid_blocks(p, 1, 100), 1);
  EXPECT_EQ(gather::grid_blocks(p, 1 << 30, 100), 100);
  const gather::Plan w = gather::plan(4096, 1000, 0, false, GatherOrder::kAuto);
  EXPECT_EQ(gather::grid_blocks(w, 1000, 100), 400);
}

TEST(GatherPlan, SortKeys) {
  EXPECT_EQ(gather::key_bits(1), 1);
  EXPECT_EQ(gather::key_bits(2), 2);
  EXPECT_EQ(gather::key_bits(3), 2);
  EXPECT_EQ(gather::key_bits((1 << 23) - 1), 23);
  EXPECT_EQ(gather::key_bits(1 << 23), 24);  // the key src_rows itself must fit
  EXPECT_EQ(gather::key_bits(int64_t{1} << 40), 41);
  EXPECT_TRUE(gather::narrow_keys(0xFFFFFFFFll, 0xFFFFFFFFll));
  EXPECT_FALSE(gather::narrow_keys(int64_t{1} << 32, 10));
  EXPECT_FALSE(gather::narrow_keys(10, int64_t{1} << 32));
  EXPECT_EQ(gather::sort_key(5, 10), 5u);
  EXPECT_EQ(gather::sort_key(0, 10), 0u);
  EXPECT_EQ(gather::sort_key(10, 10), 10u);
  EXPECT_EQ(gather::sort_key(-1, 10), 10u);
  EXPECT_EQ(gather::sort_key(INT64_MIN, 10), 10u);
  // Every key of a valid row is below 2^key_bits, and so is the bad-index key.
  for (int64_t rows : {1, 2, 3, 1000, 1 << 20, (1 << 20) + 1}) {
    EXPECT_LT(gather::sort_key(-7, rows), uint64_t{1} << gather::key_bits(rows)) << rows;
  }
}

template <int W>
struct Vec {
  unsigned char b[W];
};

struct CopyCase {
  int64_t row_bytes;
  int vec;  // forced vector width (divides row_bytes)
  int rows_per_group;
  int64_t src_rows, n;
  bool sorted, cached, bad;
};

// The kernel's loop over a grid of `blocks` x kBlockThreads threads, each lane in turn.
template <int R, typename V, typename I>
void emulate(const CopyCase& c, const gather::Plan& p, int64_t blocks, const V* src, const V* cache,
             const std::vector<int64_t>& slot_of, const std::vector<I>& idx,
             const std::vector<I>* pos, V* out, unsigned long long* first_bad, int64_t* hits) {
  const int tpr = 1 << p.log2_tpr;
  const int64_t groups_per_block = gather::kBlockThreads >> p.log2_tpr;
  const int64_t stride = blocks * groups_per_block * R;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int t = 0; t < gather::kBlockThreads; ++t) {
      const int lane = t & (tpr - 1);
      auto entry = [&](int64_t i, int64_t& r, int64_t& q) {
        r = static_cast<int64_t>(idx[static_cast<size_t>(i)]);
        q = pos ? static_cast<int64_t>((*pos)[static_cast<size_t>(i)]) : i;
      };
      auto source = [&](int64_t r) -> const V* {
        if (c.cached && slot_of[static_cast<size_t>(r)] >= 0) {
          *hits += lane == 0;
          return cache + slot_of[static_cast<size_t>(r)] * p.vpr;
        }
        return src + r * p.vpr;
      };
      auto bad = [&](int64_t q) {
        *first_bad = std::min(*first_bad, static_cast<unsigned long long>(q));
      };
      for (int64_t i0 = (b * groups_per_block + (t >> p.log2_tpr)) * R; i0 < c.n; i0 += stride) {
        gather::copy_group<R>(i0, c.n, c.src_rows, p.vpr, lane, tpr, out, entry, source, bad);
      }
    }
  }
}

template <int W>
void run_copy_case(const CopyCase& c, uint64_t seed) {
  using V = Vec<W>;
  const int64_t rb = c.row_bytes;
  ASSERT_EQ(rb % W, 0);
  std::mt19937_64 rng(seed);
  const int64_t vpr = rb / W;
  std::vector<V> src(static_cast<size_t>(c.src_rows * vpr) + 1);
  for (V& v : src) {
    for (auto& x : v.b) {
      x = static_cast<unsigned char>(rng());
    }
  }
  // Indices: repeats, and (c.bad) negative and too large ones.
  std::vector<int64_t> idx(static_cast<size_t>(c.n));
  for (auto& x : idx) {
    x = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.src_rows));
  }
  if (c.n > 3) {
    idx[1] = idx[2];
  }
  int64_t want_bad = -1;
  if (c.bad && c.n > 0) {
    idx[static_cast<size_t>(c.n / 2)] = c.src_rows;
    idx[static_cast<size_t>(c.n - 1)] = -3;
    want_bad = c.n / 2;
  }
  // The cache: every third row, in a copy of its own.
  std::vector<int64_t> slot_of(static_cast<size_t>(c.src_rows), -1);
  std::vector<V> cache;
  int64_t want_hits = 0;
  if (c.cached) {
    for (int64_t r = 0; r < c.src_rows; r += 3) {
      slot_of[static_cast<size_t>(r)] = static_cast<int64_t>(cache.size()) / vpr;
      cache.insert(cache.end(), src.begin() + r * vpr, src.begin() + (r + 1) * vpr);
    }
    for (int64_t r : idx) {
      want_hits += r >= 0 && r < c.src_rows && slot_of[static_cast<size_t>(r)] >= 0;
    }
  }
  cache.emplace_back();
  // The oracle: a plain gather, zero rows for bad indices.
  std::vector<unsigned char> want(static_cast<size_t>(c.n * rb), 0);
  for (int64_t i = 0; i < c.n; ++i) {
    if (idx[i] >= 0 && idx[i] < c.src_rows) {
      std::memcpy(want.data() + i * rb,
                  reinterpret_cast<const unsigned char*>(src.data()) + idx[i] * rb,
                  static_cast<size_t>(rb));
    }
  }
  const gather::Plan p =
      gather::plan(rb, c.n, static_cast<uint64_t>(W), true,
                   c.sorted ? GatherOrder::kSorted : GatherOrder::kAsGiven, c.rows_per_group);
  ASSERT_EQ(p.vec_bytes, W);
  ASSERT_EQ(p.sorted, c.sorted);
  const int64_t blocks = gather::grid_blocks(p, c.n, 3);  // a small grid: several iterations
  std::vector<V> out(static_cast<size_t>(c.n * vpr) + 1);
  for (V& v : out) {
    std::memset(v.b, 0xcd, W);
  }
  unsigned long long first_bad = ~0ull;
  int64_t hits = 0;
  if (c.sorted) {
    // What the radix sort leaves: keys and positions, stably sorted by key.
    std::vector<uint64_t> keys(static_cast<size_t>(c.n)), pos(static_cast<size_t>(c.n));
    for (int64_t i = 0; i < c.n; ++i) {
      keys[i] = gather::sort_key(idx[i], c.src_rows);
      pos[i] = static_cast<uint64_t>(i);
    }
    std::stable_sort(pos.begin(), pos.end(),
                     [&](uint64_t a, uint64_t b) { return keys[a] < keys[b]; });
    std::vector<uint64_t> sorted_keys(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) {
      sorted_keys[i] = keys[pos[i]];
    }
    ASSERT_TRUE(std::is_sorted(sorted_keys.begin(), sorted_keys.end()));
    for (uint64_t k : sorted_keys) {
      ASSERT_LT(k, uint64_t{1} << gather::key_bits(c.src_rows));
    }
    if (p.rows_per_group == 4) {
      emulate<4>(c, p, blocks, src.data(), cache.data(), slot_of, sorted_keys, &pos, out.data(),
                 &first_bad, &hits);
    } else {
      emulate<1>(c, p, blocks, src.data(), cache.data(), slot_of, sorted_keys, &pos, out.data(),
                 &first_bad, &hits);
    }
  } else {
    if (p.rows_per_group == 4) {
      emulate<4, V, int64_t>(c, p, blocks, src.data(), cache.data(), slot_of, idx, nullptr,
                             out.data(), &first_bad, &hits);
    } else {
      emulate<1, V, int64_t>(c, p, blocks, src.data(), cache.data(), slot_of, idx, nullptr,
                             out.data(), &first_bad, &hits);
    }
  }
  if (!want.empty()) {  // memcmp of null pointers is undefined even for 0 bytes
    EXPECT_EQ(std::memcmp(out.data(), want.data(), want.size()), 0);
  }
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(out.data())[want.size()], 0xcd)
      << "wrote past the batch";
  EXPECT_EQ(first_bad, want_bad < 0 ? ~0ull : static_cast<unsigned long long>(want_bad));
  EXPECT_EQ(hits, want_hits);
}

class GroupCopy : public ::testing::TestWithParam<CopyCase> {};

TEST_P(GroupCopy, MatchesAPlainGather) {
  const CopyCase& c = GetParam();
  switch (c.vec) {
    case 16:
      return run_copy_case<16>(c, 7);
    case 8:
      return run_copy_case<8>(c, 8);
    case 4:
      return run_copy_case<4>(c, 9);
    default:
      return run_copy_case<1>(c, 10);
  }
}

std::vector<CopyCase> copy_cases() {
  std::vector<CopyCase> v;
  const std::vector<std::pair<int64_t, int>> widths = {{8, 8},    {12, 4},    {128, 16}, {128, 8},
                                                       {256, 16}, {512, 16},  {1000, 8}, {4096, 16},
                                                       {4096, 1}, {8192, 16}, {24, 8}};
  for (auto [rb, vec] : widths) {
    for (int per : {1, 4}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{2053}}) {
        for (bool sorted : {false, true}) {
          for (bool cached : {false, true}) {
            if (rb >= 4096 && n > 300) {
              continue;  // keep the emulation quick
            }
            v.push_back({rb, vec, per, 97, n, sorted, cached, n > 1});
          }
        }
      }
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Plans, GroupCopy, ::testing::ValuesIn(copy_cases()),
                         [](const ::testing::TestParamInfo<CopyCase>& info) {
                           const CopyCase& c = info.param;
                           return std::to_string(c.row_bytes) + "B_v" + std::to_string(c.vec) +
                                  "_r" + std::to_string(c.rows_per_group) + "_n" +
                                  std::to_string(c.n) + (c.sorted ? "_sorted" : "_given") +
                                  (c.cached ? "_cached" : "");
                         });

// ---- The sampling benchmark's limit ----------------------------------------------------------

TEST(RowReads, YieldWhatTheSamplerYields) {
  // Without weights, a visit reads the whole row exactly when the sampler takes every edge, and
  // otherwise draws as many entries as the sampler yields.
  for (int64_t d = 0; d <= 40; ++d) {
    for (int64_t k : {-1, 0, 1, 5, 15, 40}) {
      for (bool replace : {false, true}) {
        const limits::RowPlan p = limits::row_plan(d, k, replace, false, d, 8, 0, true);
        const int64_t yield = p.read == limits::RowRead::kWhole ? d : p.draws;
        EXPECT_EQ(yield, rows::uniform_count(d, k, replace)) << d << " " << k << " " << replace;
        EXPECT_FALSE(p.search);
        EXPECT_EQ(p.read == limits::RowRead::kNone, d == 0 || k == 0);
      }
    }
  }
}

TEST(RowReads, StageAsTheSamplerStages) {
  // The sampler stages a row when d * eb + 16 <= stage_bytes (interleaved layouts, d > 0,
  // fanout != 0); the stage then serves every read of the row but the weighted searches.
  for (int eb : {8, 16}) {
    for (int64_t d = 0; d <= 200; ++d) {
      for (int64_t k : {-1, 0, 5, 15}) {
        const bool staged = d > 0 && k != 0 && d * eb + 16 <= 1024;
        const limits::RowPlan p = limits::row_plan(d, k, false, false, d, eb, 1024, true);
        EXPECT_EQ(p.read == limits::RowRead::kStaged, staged) << eb << " " << d << " " << k;
        EXPECT_NE(limits::row_plan(d, k, false, false, d, eb, 1024, false).read,
                  limits::RowRead::kStaged);
        EXPECT_NE(limits::row_plan(d, k, false, false, d, eb, 0, true).read,
                  limits::RowRead::kStaged);
      }
    }
  }
  for (int eb : {8, 16}) {
    for (int64_t rb : {0, 1, 2, 3, 17, 1000001}) {
      for (int64_t d : {1, 2, 7, 100}) {
        int64_t lo = 0, hi = 0;
        limits::staged_bytes(rb, d, eb, &lo, &hi);
        EXPECT_EQ(lo % 16, 0);
        EXPECT_EQ(hi % 16, 0);
        EXPECT_LE(lo, rb * eb);
        EXPECT_GE(hi, (rb + d) * eb);
        EXPECT_LT(hi - (rb + d) * eb, 16);  // within the adjacency's 16 bytes of padding
      }
    }
  }
}

TEST(RowReads, WeightedRowsSearchWhenDrawing) {
  // A row with at most k positive weights is taken whole without replacement.
  limits::RowPlan p = limits::row_plan(50, 10, false, true, 8, 8, 0, true);
  EXPECT_EQ(p.read, limits::RowRead::kWhole);
  EXPECT_FALSE(p.search);
  p = limits::row_plan(50, 10, false, true, 30, 8, 0, true);
  EXPECT_EQ(p.read, limits::RowRead::kDraws);
  EXPECT_EQ(p.draws, 10);
  EXPECT_TRUE(p.search);
  p = limits::row_plan(5, 10, true, true, 5, 8, 0, true);
  EXPECT_EQ(p.draws, 10);
  EXPECT_TRUE(p.search);
  p = limits::row_plan(50, 10, false, true, 30, 8, 1024, true);
  EXPECT_EQ(p.read, limits::RowRead::kStaged);
  EXPECT_TRUE(p.search);
  EXPECT_EQ(p.draws, 10);
}

TEST(RowReads, DrawsSpreadOverTheRowAndSearchesMatchALinearScan) {
  for (int64_t d : {1, 2, 3, 10, 1000}) {
    std::vector<int64_t> seen(static_cast<size_t>(d), 0);
    for (uint64_t visit = 0; visit < 200; ++visit) {
      for (uint32_t t = 0; t < 50; ++t) {
        const int64_t p = limits::draw_position(visit, t, d);
        ASSERT_GE(p, 0);
        ASSERT_LT(p, d);
        ++seen[static_cast<size_t>(p)];
        const double f = limits::draw_fraction(visit, t);
        ASSERT_GE(f, 0.0);
        ASSERT_LT(f, 1.0);
      }
    }
    // 10000 draws: every position of a row of up to 1000 is hit.
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), 0) << d;
  }
  std::mt19937_64 rng(3);
  for (int64_t d : {1, 2, 5, 64, 1000}) {
    std::vector<double> cdf(static_cast<size_t>(d));
    double acc = 0;
    for (auto& x : cdf) {
      acc += static_cast<double>(rng() % 4);  // zero weights too
      x = acc;
    }
    for (int q = 0; q < 100; ++q) {
      const double target = static_cast<double>(rng() % 1000) / 1000.0 * acc;
      int64_t want = d - 1;
      for (int64_t i = 0; i < d; ++i) {
        if (cdf[static_cast<size_t>(i)] > target) {
          want = i;
          break;
        }
      }
      EXPECT_EQ(limits::search_prefix(cdf.data(), d, target), want);
    }
  }
}

TEST(RowReads, GroupsAsWideAsTheSamplers) {
  // The limit kernel takes group::group_size lanes per visit, as the sample pass does.
  EXPECT_EQ(group::group_size(5), 8);
  EXPECT_EQ(group::group_size(10), 16);
  EXPECT_EQ(group::group_size(15), 16);
  EXPECT_EQ(group::group_size(-1), 32);
}

}  // namespace
}  // namespace tessera::cuda
