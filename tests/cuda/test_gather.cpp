// SPDX-License-Identifier: Apache-2.0
// Row gather / scatter twins, parameterized over {cpu, cuda} (one per executable) x {int32,
// int64} x dtypes x row widths (1 byte .. 4 KiB, odd and unaligned) x sizes (0, 1, large), and
// the gather's read orders (sorted first or as given) over pinned and device sources.
// cpu: the CPU twin against a plain oracle. cuda: the CUDA twin against the CPU twin, bit for
// bit (a gather copies bytes, so there is no rounding to excuse).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <tuple>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/placement.hpp"
#include "tessera/ops/gather.hpp"
#include "tessera_test.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

using ops::IndexRef;
using ops::MatrixRef;
using ops::Memory;

struct RowCase {
  DType dtype;
  int64_t cols;
  int64_t src_rows;
  int64_t n;
  size_t offset;  // bytes the data pointers are shifted by (0 = aligned)
  bool uva;       // cuda: the source lives in pinned host memory read through UVA
};

std::string case_name(const ::testing::TestParamInfo<std::tuple<DType, RowCase>>& info) {
  const auto& [it, c] = info.param;
  std::string s = fmt::format("{}_{}_{}x{}_n{}_off{}{}", backend_name(kBackend), dtype_name(it),
                              dtype_name(c.dtype), c.cols, c.n, c.offset, c.uva ? "_uva" : "");
  return s;
}

std::vector<RowCase> row_cases() {
  std::vector<RowCase> v;
  // Row widths in bytes across dtypes: 1, 2, 3, 4, 6, 7, 8, 12, 24, 128, 130, 256, 1000, 4095,
  // 4096 (with uint8 giving odd byte widths).
  const std::vector<std::pair<DType, int64_t>> widths = {
      {DType::kUInt8, 1},      {DType::kUInt8, 3},      {DType::kUInt8, 7},
      {DType::kUInt8, 4095},   {DType::kFloat16, 1},    {DType::kFloat16, 3},
      {DType::kBFloat16, 65},  {DType::kBFloat16, 128}, {DType::kFloat32, 1},
      {DType::kFloat32, 3},    {DType::kFloat32, 32},   {DType::kFloat32, 250},
      {DType::kFloat32, 1024}, {DType::kInt64, 1},      {DType::kInt64, 3},
      {DType::kInt64, 16},     {DType::kInt64, 512}};
  for (auto [dt, cols] : widths) {
    const int64_t rb = cols * static_cast<int64_t>(dtype_size(dt));
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}}) {
      v.push_back({dt, cols, 517, n, 0, false});
    }
    // Large: about 32 MiB of output, capped at 300k rows.
    const int64_t large = std::min<int64_t>(300000, (int64_t{32} << 20) / rb);
    v.push_back({dt, cols, 4099, large, 0, false});
    // Misaligned base pointers force the narrower vector paths.
    v.push_back({dt, cols, 333, 777, dtype_size(dt), false});
    v.push_back({dt, cols, 333, 777, 0, true});
  }
  v.push_back({DType::kFloat32, 8, 0, 0, 0, false});   // empty source, empty batch
  v.push_back({DType::kFloat32, 0, 10, 5, 0, false});  // zero-width rows
  return v;
}

class GatherTwin : public ::testing::TestWithParam<std::tuple<DType, RowCase>> {};

// memcpy of `bytes`, none for zero (the empty cases' buffers have null data(), which memcpy
// may not be given even for zero bytes).
void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) {
    std::memcpy(dst, src, bytes);
  }
}

template <typename I>
void run_gather(const RowCase& c, uint64_t seed) {
  const size_t rb = static_cast<size_t>(c.cols) * dtype_size(c.dtype);
  const auto src = random_bytes(static_cast<size_t>(c.src_rows) * rb, seed);
  const auto idx = c.src_rows ? random_indices<I>(c.n, c.src_rows, seed + 1) : std::vector<I>();
  ASSERT_EQ(static_cast<int64_t>(idx.size()), c.src_rows ? c.n : 0);
  const int64_t n = static_cast<int64_t>(idx.size());
  // Oracle.
  std::vector<unsigned char> want(static_cast<size_t>(n) * rb);
  for (int64_t i = 0; i < n; ++i)
    copy_bytes(want.data() + i * rb, src.data() + static_cast<size_t>(idx[i]) * rb, rb);
  // CPU twin, into a poisoned buffer at the requested misalignment.
  std::vector<unsigned char> src_h(src.size() + c.offset + 1),
      out_h(want.size() + c.offset + 1, 0xcd);
  copy_bytes(src_h.data() + c.offset, src.data(), src.size());
  MatrixRef s{src_h.data() + c.offset, c.dtype, c.src_rows, c.cols, Memory::kHost};
  MatrixRef o{out_h.data() + c.offset, c.dtype, n, c.cols, Memory::kHost};
  ops::gather_rows(s, IndexRef::of(idx.data(), n), o);
  std::vector<unsigned char> cpu(out_h.begin() + c.offset, out_h.begin() + c.offset + want.size());
  ASSERT_TRUE(cpu == want) << "CPU twin differs from the oracle";
  if (kBackend == Backend::kCpu) return;

  DeviceCopy d_src(src.data(), src.size(), c.offset, c.uva);
  DeviceCopy d_idx(idx.data(), idx.size() * sizeof(I), 0, false);
  const auto poison = std::vector<unsigned char>(want.size(), 0xcd);
  DeviceCopy d_out(poison.data(), poison.size(), c.offset, false);
  cuda::Stream stream;
  ops::ExecOptions opts;
  opts.stream = stream.get();
  ops::gather_rows(MatrixRef{d_src.data(), c.dtype, c.src_rows, c.cols, d_src.memory()},
                   IndexRef{d_idx.data(), dtype_of<I>(), n, Memory::kDevice},
                   MatrixRef{d_out.data(), c.dtype, n, c.cols, Memory::kDevice}, opts);
  stream.synchronize();
  EXPECT_TRUE(d_out.download() == cpu) << "CUDA twin differs from the CPU twin";
}

TEST_P(GatherTwin, MatchesReference) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto& [it, c] = GetParam();
  if (it == DType::kInt32)
    run_gather<int32_t>(c, 11);
  else
    run_gather<int64_t>(c, 12);
}

template <typename I>
void run_scatter(const RowCase& c, uint64_t seed) {
  const size_t rb = static_cast<size_t>(c.cols) * dtype_size(c.dtype);
  const int64_t dst_rows = c.src_rows;
  const int64_t n = std::min(c.n, dst_rows);  // unique destinations
  std::vector<I> perm(static_cast<size_t>(dst_rows));
  std::iota(perm.begin(), perm.end(), I{0});
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  std::vector<I> idx(perm.begin(), perm.begin() + n);
  const auto src = random_bytes(static_cast<size_t>(n) * rb, seed + 1);
  const auto dst0 = random_bytes(static_cast<size_t>(dst_rows) * rb, seed + 2);
  std::vector<unsigned char> want = dst0;
  for (int64_t i = 0; i < n; ++i)
    copy_bytes(want.data() + static_cast<size_t>(idx[i]) * rb, src.data() + i * rb, rb);
  std::vector<unsigned char> cpu = dst0;
  ops::scatter_rows(MatrixRef{const_cast<unsigned char*>(src.data()), c.dtype, n, c.cols},
                    IndexRef::of(idx.data(), n), MatrixRef{cpu.data(), c.dtype, dst_rows, c.cols});
  ASSERT_TRUE(cpu == want) << "CPU twin differs from the oracle";
  if (kBackend == Backend::kCpu) return;
  DeviceCopy d_src(src.data(), src.size(), c.offset, c.uva);
  DeviceCopy d_idx(idx.data(), idx.size() * sizeof(I), 0, false);
  DeviceCopy d_dst(dst0.data(), dst0.size(), c.offset, false);
  ops::scatter_rows(MatrixRef{d_src.data(), c.dtype, n, c.cols, d_src.memory()},
                    IndexRef{d_idx.data(), dtype_of<I>(), n, Memory::kDevice},
                    MatrixRef{d_dst.data(), c.dtype, dst_rows, c.cols, Memory::kDevice});
  EXPECT_TRUE(d_dst.download() == cpu) << "CUDA twin differs from the CPU twin";
}

TEST_P(GatherTwin, ScatterMatchesReference) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto& [it, c] = GetParam();
  if (it == DType::kInt32)
    run_scatter<int32_t>(c, 21);
  else
    run_scatter<int64_t>(c, 22);
}

INSTANTIATE_TEST_SUITE_P(Rows, GatherTwin,
                         ::testing::Combine(::testing::Values(DType::kInt32, DType::kInt64),
                                            ::testing::ValuesIn(row_cases())),
                         case_name);

// The cached gather: same bytes as the plain gather, and the hit counters agree with the
// CPU accounting under the same plan.
class CachedGatherTwin : public ::testing::TestWithParam<int64_t> {};

TEST_P(CachedGatherTwin, SameRowsAndHitRate) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const int64_t budget_rows = GetParam();
  const int64_t rows = 2000, cols = 48, n = 5000;
  const size_t rb = cols * sizeof(float);
  std::mt19937_64 rng(5);
  std::vector<int64_t> deg(rows);
  for (auto& d : deg)
    d = static_cast<int64_t>(rng() % 100);
  const cuda::FeatureCachePlan plan =
      cuda::plan_feature_cache(deg, static_cast<int64_t>(rb), budget_rows * rb);
  const auto src = random_bytes(rows * rb, 6);
  const auto idx = random_indices<int64_t>(n, rows, 7);
  std::vector<unsigned char> cpu(n * rb, 0xcd), plain(n * rb, 0xab);
  const MatrixRef s{const_cast<unsigned char*>(src.data()), DType::kFloat32, rows, cols};
  cuda::CacheStats st;
  ops::gather_rows_cached_cpu(plan, s, IndexRef::of(idx.data(), n),
                              MatrixRef{cpu.data(), DType::kFloat32, n, cols}, st);
  ops::gather_rows(s, IndexRef::of(idx.data(), n),
                   MatrixRef{plain.data(), DType::kFloat32, n, cols});
  ASSERT_TRUE(cpu == plain);
  const cuda::CacheStats want = cuda::count_cache_hits(plan, idx.data(), n);
  EXPECT_EQ(st.lookups, want.lookups);
  EXPECT_EQ(st.hits, want.hits);
  if (budget_rows >= rows) {
    EXPECT_EQ(st.hits, n);
  }
  if (budget_rows == 0) {
    EXPECT_EQ(st.hits, 0);
  }
  if (kBackend == Backend::kCpu) return;

  DeviceCopy h_src(src.data(), src.size(), 0, /*pinned=*/true);
  DeviceCopy d_idx(idx.data(), idx.size() * sizeof(int64_t), 0, false);
  DeviceCopy d_out(plain.data(), plain.size(), 0, false);  // poison with something else
  cuda::Stream stream;
  cuda::FeatureCache cache(h_src.data(), rows, static_cast<int64_t>(rb), plan.hot_rows.data(),
                           plan.capacity_rows(), plan.slot_of.data(), stream.get());
  ops::ExecOptions opts;
  opts.stream = stream.get();
  const MatrixRef hs{h_src.data(), DType::kFloat32, rows, cols, Memory::kPinned};
  const MatrixRef out{d_out.data(), DType::kFloat32, n, cols, Memory::kDevice};
  cuda::memset_async(d_out.data(), 0xee, n * rb, stream.get());
  ops::gather_rows_cached(cache, hs, IndexRef{d_idx.data(), DType::kInt64, n, Memory::kDevice}, out,
                          opts);
  stream.synchronize();
  EXPECT_TRUE(d_out.download() == cpu);
  int64_t lookups = 0, hits = 0;
  cache.read_counters(stream.get(), &lookups, &hits);
  EXPECT_EQ(lookups, n);
  EXPECT_EQ(hits, want.hits);
}

INSTANTIATE_TEST_SUITE_P(Budgets, CachedGatherTwin, ::testing::Values(0, 1, 300, 2000, 5000),
                         [](const auto& info) {
                           return fmt::format("{}_rows{}", backend_name(kBackend), info.param);
                         });

// The gather's read orders (cuda::GatherOrder): indices sorted first (forced, and chosen by kAuto
// for a pinned source and a large batch) or read as given, from pinned and device sources, with
// repeated, unsorted and out-of-range indices. Each against the CPU twin byte for byte; a bad
// index zero-fills its row and the first bad position is reported as by the unsorted kernel.
struct OrderCase {
  int64_t row_bytes;
  bool pinned;  // the source in pinned host memory (UVA), else device memory
  int64_t n;
  cuda::GatherOrder order;
  bool bad;  // with out-of-range indices (negative and past the end)
};

const char* order_name(cuda::GatherOrder o) {
  return o == cuda::GatherOrder::kSorted ? "sorted"
         : o == cuda::GatherOrder::kAuto ? "auto"
                                         : "given";
}

std::vector<OrderCase> order_cases() {
  std::vector<OrderCase> v;
  for (int64_t rb :
       {int64_t{8}, int64_t{12}, int64_t{128}, int64_t{256}, int64_t{512}, int64_t{4096}}) {
    for (bool pinned : {true, false}) {
      // Large: past gather::sort_min_rows and several grid-stride iterations, <= 32 MiB out.
      const int64_t large = std::min<int64_t>(300000, (int64_t{32} << 20) / rb);
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, large}) {
        for (auto order : {cuda::GatherOrder::kSorted, cuda::GatherOrder::kAuto}) {
          v.push_back({rb, pinned, n, order, n >= 1000});
        }
      }
      v.push_back({rb, pinned, large, cuda::GatherOrder::kAsGiven, true});
    }
  }
  return v;
}

// The CPU twin's rows for `idx` (bad indices read row 0 there), with the rows of bad indices
// zeroed; `first_bad` gets the first bad position (-1: none).
template <typename I>
std::vector<unsigned char> twin_rows(const std::vector<unsigned char>& src, int64_t src_rows,
                                     int64_t rb, const std::vector<I>& idx, int64_t* first_bad) {
  const int64_t n = static_cast<int64_t>(idx.size());
  std::vector<I> ok(idx);
  *first_bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= src_rows) {
      ok[i] = 0;
      if (*first_bad < 0) {
        *first_bad = i;
      }
    }
  }
  std::vector<unsigned char> out(static_cast<size_t>(n * rb));
  ops::gather_rows(MatrixRef{const_cast<unsigned char*>(src.data()), DType::kUInt8, src_rows, rb},
                   IndexRef::of(ok.data(), n), MatrixRef{out.data(), DType::kUInt8, n, rb});
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= src_rows) {
      std::memset(out.data() + i * rb, 0, static_cast<size_t>(rb));
    }
  }
  return out;
}

// Random indices with repeats, and for `bad` a negative one and one past the end.
template <typename I>
std::vector<I> order_indices(int64_t n, int64_t src_rows, bool bad, uint64_t seed) {
  std::vector<I> idx = random_indices<I>(n, src_rows, seed);
  if (n > 3) {
    idx[3] = idx[0];
  }
  if (bad) {
    idx[static_cast<size_t>(n - 1)] = static_cast<I>(-2);
    idx[static_cast<size_t>(n / 3)] = static_cast<I>(src_rows);
  }
  return idx;
}

class GatherOrderTwin : public ::testing::TestWithParam<std::tuple<DType, OrderCase>> {};

template <typename I>
void run_order(const OrderCase& c, uint64_t seed) {
  const int64_t rb = c.row_bytes;
  const int64_t src_rows = 5003;
  const auto src = random_bytes(static_cast<size_t>(src_rows * rb), seed);
  const std::vector<I> idx = order_indices<I>(c.n, src_rows, c.bad, seed + 1);
  int64_t first_bad = -1;
  const std::vector<unsigned char> want = twin_rows(src, src_rows, rb, idx, &first_bad);
  EXPECT_EQ(first_bad >= 0, c.bad);
  if (kBackend == Backend::kCpu) {
    return;
  }

  DeviceCopy d_src(src.data(), src.size(), 0, c.pinned);
  DeviceCopy d_idx(idx.data(), idx.size() * sizeof(I), 0, false);
  const std::vector<unsigned char> poison(want.size(), 0xcd);
  DeviceCopy d_out(poison.data(), poison.size(), 0, false);
  const unsigned long long none = cuda::kNoBadIndex;
  DeviceCopy d_bad(&none, sizeof none, 0, false);
  cuda::Stream stream;
  const bool sorts = cuda::gather_sorts_indices(d_src.data(), rb, c.n, c.order);
  if (c.order == cuda::GatherOrder::kAuto) {
    EXPECT_EQ(sorts, c.pinned && rb <= 512 && c.n >= cuda::gather::sort_min_rows(rb));
  }
  const auto it = std::is_same_v<I, int32_t> ? cuda::IndexType::kInt32 : cuda::IndexType::kInt64;
  cuda::gather_rows_impl(d_src.data(), src_rows, rb, d_idx.data(), it, c.n, d_out.data(),
                         static_cast<unsigned long long*>(d_bad.data()), stream.get(), c.order);
  stream.synchronize();
  EXPECT_TRUE(d_out.download() == want)
      << "CUDA twin (" << order_name(c.order) << ") differs from the CPU twin";
  unsigned long long got_bad = 0;
  std::memcpy(&got_bad, d_bad.download().data(), sizeof got_bad);
  EXPECT_EQ(got_bad,
            first_bad < 0 ? cuda::kNoBadIndex : static_cast<unsigned long long>(first_bad));
}

TEST_P(GatherOrderTwin, MatchesTheCpuTwin) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto& [it, c] = GetParam();
  if (it == DType::kInt32) {
    run_order<int32_t>(c, 31);
  } else {
    run_order<int64_t>(c, 32);
  }
}

std::string order_case_name(const ::testing::TestParamInfo<std::tuple<DType, OrderCase>>& info) {
  const DType it = std::get<0>(info.param);
  const OrderCase& c = std::get<1>(info.param);
  return fmt::format("{}_{}_{}B_{}_n{}_{}{}", backend_name(kBackend), dtype_name(it), c.row_bytes,
                     c.pinned ? "pinned" : "device", c.n, order_name(c.order), c.bad ? "_bad" : "");
}

INSTANTIATE_TEST_SUITE_P(Orders, GatherOrderTwin,
                         ::testing::Combine(::testing::Values(DType::kInt32, DType::kInt64),
                                            ::testing::ValuesIn(order_cases())),
                         order_case_name);

// The cached gather in each order: the same rows, and the same lookups and hits, as the CPU
// accounting under the same plan.
class CachedGatherOrderTwin
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, cuda::GatherOrder>> {};

TEST_P(CachedGatherOrderTwin, SameRowsAndCounters) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto& [rb, n, order] = GetParam();
  const int64_t rows = 3001;
  std::mt19937_64 rng(41);
  std::vector<int64_t> deg(rows);
  for (auto& d : deg) {
    d = static_cast<int64_t>(rng() % 100);
  }
  const cuda::FeatureCachePlan plan = cuda::plan_feature_cache(deg, rb, 700 * rb);
  const auto src = random_bytes(static_cast<size_t>(rows * rb), 42);
  const std::vector<int64_t> idx = order_indices<int64_t>(n, rows, n >= 1000, 43);
  int64_t first_bad = -1;
  const std::vector<unsigned char> want = twin_rows(src, rows, rb, idx, &first_bad);
  int64_t want_hits = 0;
  for (int64_t r : idx) {
    want_hits += r >= 0 && r < rows && plan.slot_of[static_cast<size_t>(r)] >= 0;
  }
  if (kBackend == Backend::kCpu) {
    return;
  }

  DeviceCopy h_src(src.data(), src.size(), 0, /*pinned=*/true);
  DeviceCopy d_idx(idx.data(), idx.size() * sizeof(int64_t), 0, false);
  const std::vector<unsigned char> poison(want.size(), 0xcd);
  DeviceCopy d_out(poison.data(), poison.size(), 0, false);
  const unsigned long long none = cuda::kNoBadIndex;
  DeviceCopy d_bad(&none, sizeof none, 0, false);
  cuda::Stream stream;
  cuda::FeatureCache cache(h_src.data(), rows, rb, plan.hot_rows.data(), plan.capacity_rows(),
                           plan.slot_of.data(), stream.get());
  cuda::gather_rows_cached_impl(h_src.data(), rows, rb, cache.cache(), cache.slot_of(),
                                d_idx.data(), cuda::IndexType::kInt64, n, d_out.data(),
                                cache.d_counters(), static_cast<unsigned long long*>(d_bad.data()),
                                stream.get(), order);
  stream.synchronize();
  EXPECT_TRUE(d_out.download() == want);
  int64_t lookups = 0, hits = 0;
  cache.read_counters(stream.get(), &lookups, &hits);
  EXPECT_EQ(lookups, n);
  EXPECT_EQ(hits, want_hits);
  unsigned long long got_bad = 0;
  std::memcpy(&got_bad, d_bad.download().data(), sizeof got_bad);
  EXPECT_EQ(got_bad,
            first_bad < 0 ? cuda::kNoBadIndex : static_cast<unsigned long long>(first_bad));
}

std::string cached_order_name(
    const ::testing::TestParamInfo<std::tuple<int64_t, int64_t, cuda::GatherOrder>>& info) {
  return fmt::format("{}_{}B_n{}_{}", backend_name(kBackend), std::get<0>(info.param),
                     std::get<1>(info.param), order_name(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    Orders, CachedGatherOrderTwin,
    ::testing::Combine(::testing::Values(int64_t{8}, int64_t{128}, int64_t{512}, int64_t{4096}),
                       ::testing::Values(int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{40000}),
                       ::testing::Values(cuda::GatherOrder::kSorted, cuda::GatherOrder::kAuto,
                                         cuda::GatherOrder::kAsGiven)),
    cached_order_name);

// Errors: one validator per op gives the same message whatever the backend.
class GatherErrors : public ::testing::TestWithParam<DType> {};

TEST_P(GatherErrors, NameTheArgument) {
  std::vector<float> src(4 * 3, 1.0f), out(2 * 3);
  std::vector<int64_t> idx = {1, 4};
  const MatrixRef s{src.data(), DType::kFloat32, 4, 3};
  const MatrixRef o{out.data(), DType::kFloat32, 2, 3};
  TESSERA_EXPECT_THROW_MSG(ops::gather_rows(s, IndexRef::of(idx.data(), 2), o), IndexError,
                           "idx[1] = 4 is outside [0, 4)");
  idx[1] = -1;
  TESSERA_EXPECT_THROW_MSG(ops::gather_rows(s, IndexRef::of(idx.data(), 2), o), IndexError,
                           "idx[1] = -1");
  idx[1] = 0;
  TESSERA_EXPECT_THROW_MSG(
      ops::gather_rows(s, IndexRef::of(idx.data(), 2), MatrixRef{out.data(), DType::kInt32, 2, 3}),
      TypeError, "src is float32 but out is int32");
  TESSERA_EXPECT_THROW_MSG(ops::gather_rows(s, IndexRef::of(idx.data(), 1), o), ValueError,
                           "out has 2 rows but idx has 1");
  TESSERA_EXPECT_THROW_MSG(ops::gather_rows(s, IndexRef{idx.data(), DType::kFloat32, 2}, o),
                           TypeError, "idx must be int32 or int64");
  TESSERA_EXPECT_THROW_MSG(ops::gather_rows(s, IndexRef::of(idx.data(), 2),
                                            MatrixRef{out.data(), DType::kFloat32, 2, 2}),
                           ValueError, "out has 2 columns but src has 3");
  TESSERA_EXPECT_THROW_MSG(ops::scatter_rows(o, IndexRef::of(idx.data(), 2),
                                             MatrixRef{src.data(), DType::kFloat32, 1, 3}),
                           IndexError, "scatter_rows: idx[0] = 1 is outside [0, 1)");
  // Pageable host memory cannot feed a kernel.
  TESSERA_EXPECT_THROW_MSG(
      ops::gather_rows(s, IndexRef::of(idx.data(), 2),
                       MatrixRef{out.data(), DType::kFloat32, 2, 3, Memory::kDevice}),
      ValueError, "pageable host memory");
  // Array convenience.
  Array a = Array::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2});
  Array ia = Array::from_vector(std::vector<int32_t>{2, 0});
  Array g = ops::gather_rows(a, ia);
  ASSERT_EQ(g.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(g.data<float>()[0], 4.0f);
  EXPECT_EQ(g.data<float>()[3], 1.0f);
}

#if !TESSERA_TEST_CUDA && !TESSERA_WITH_CUDA
// The CPU-only build's dispatcher.
TEST_P(GatherErrors, DeviceRequestsWithoutCuda) {
  std::vector<float> src(4), out(2);
  std::vector<int64_t> idx = {0, 1};
  TESSERA_EXPECT_THROW_MSG(
      ops::gather_rows(MatrixRef{src.data(), DType::kFloat32, 4, 1, Memory::kDevice},
                       IndexRef{idx.data(), DType::kInt64, 2, Memory::kDevice},
                       MatrixRef{out.data(), DType::kFloat32, 2, 1, Memory::kDevice}),
      NotCompiledError, "not_compiled_with_cuda");
}
#endif

#if TESSERA_TEST_CUDA
TEST_P(GatherErrors, DeviceIndexOutOfRangeIsReported) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const DType it = GetParam();
  std::vector<float> src(10 * 4, 2.0f);
  std::vector<int64_t> idx64 = {3, 9, 10, 0, 12};
  std::vector<int32_t> idx32(idx64.begin(), idx64.end());
  const void* ih = it == DType::kInt32 ? static_cast<const void*>(idx32.data()) : idx64.data();
  DeviceCopy d_src(src.data(), src.size() * 4, 0, false);
  DeviceCopy d_idx(ih, 5 * dtype_size(it), 0, false);
  std::vector<float> poison(5 * 4, -1.0f);
  DeviceCopy d_out(poison.data(), poison.size() * 4, 0, false);
  const MatrixRef s{d_src.data(), DType::kFloat32, 10, 4, Memory::kDevice};
  const MatrixRef o{d_out.data(), DType::kFloat32, 5, 4, Memory::kDevice};
  const IndexRef ix{d_idx.data(), it, 5, Memory::kDevice};
  TESSERA_EXPECT_THROW_MSG(ops::gather_rows(s, ix, o), IndexError,
                           "gather_rows: idx[2] = 10 is outside [0, 10)");
  // Unchecked: bad rows are zero-filled, the rest gathered.
  ops::ExecOptions fast;
  fast.check_indices = false;
  ops::gather_rows(s, ix, o, fast);
  std::vector<unsigned char> got = d_out.download();
  std::vector<float> f(20);
  std::memcpy(f.data(), got.data(), 80);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(f[i], (i / 4 == 2 || i / 4 == 4) ? 0.0f : 2.0f) << i;
}
#endif

INSTANTIATE_TEST_SUITE_P(Index, GatherErrors, ::testing::Values(DType::kInt32, DType::kInt64),
                         [](const auto& info) {
                           return fmt::format("{}_{}", backend_name(kBackend),
                                              dtype_name(info.param));
                         });

}  // namespace
}  // namespace tessera::test
