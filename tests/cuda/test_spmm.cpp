// SPDX-License-Identifier: Apache-2.0
// SpMM twins over {cpu, cuda} (one per executable) x {int32, int64} x {sum, mean} x
// {forward, transpose} x sizes (0 rows, 1, with degree-0 rows, large, rows wider than 256
// columns). Both twins, the CUDA twin by both engines, are checked against a float64 dense
// reference with the standard float32 summation bound |err| <= k * 2^-23 * sum|terms| (k =
// terms summed into the element): cuSPARSE sums in its own order and either transpose uses
// atomics, so bit-identity is promised only for the row engine's forward (checked).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "tessera/core/error.hpp"
#include "tessera/ops/spmm.hpp"
#include "tessera_test.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

using ops::CsrRef;
using ops::IndexRef;
using ops::MatrixRef;
using ops::Memory;
using ops::Reduce;

struct SpmmCase {
  int64_t rows, cols, max_deg, feat;
};

struct Csr {
  std::vector<int64_t> indptr, indices;
};

// Random pattern; every third row has degree 0, columns may repeat within a row.
Csr random_csr(int64_t rows, int64_t cols, int64_t max_deg, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Csr a;
  a.indptr.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t d = (r % 3 == 1 || cols == 0) ? 0 : static_cast<int64_t>(rng() % (max_deg + 1));
    for (int64_t k = 0; k < d; ++k)
      a.indices.push_back(static_cast<int64_t>(rng() % cols));
    a.indptr.push_back(static_cast<int64_t>(a.indices.size()));
  }
  return a;
}

// Dense float64 reference and the per-element error bound.
void reference(const Csr& a, int64_t rows, int64_t cols, const std::vector<float>& b, int64_t F,
               Reduce reduce, bool transpose, std::vector<double>& ref,
               std::vector<double>& bound) {
  const int64_t out_rows = transpose ? cols : rows;
  ref.assign(out_rows * F, 0.0);
  std::vector<double> mag(out_rows * F, 0.0), terms(out_rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t e0 = a.indptr[r], e1 = a.indptr[r + 1];
    if (e0 == e1) continue;
    const double w = reduce == Reduce::kMean ? 1.0 / double(e1 - e0) : 1.0;
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t c = a.indices[e];
      const int64_t in = transpose ? r : c, out = transpose ? c : r;
      terms[out] += 1;
      for (int64_t f = 0; f < F; ++f) {
        ref[out * F + f] += w * b[in * F + f];
        mag[out * F + f] += std::abs(w * b[in * F + f]);
      }
    }
  }
  bound.resize(ref.size());
  for (int64_t o = 0; o < out_rows; ++o)
    for (int64_t f = 0; f < F; ++f)
      bound[o * F + f] = (terms[o] + 2) * std::ldexp(1.0, -23) * mag[o * F + f] + 1e-30;
}

class SpmmTwin : public ::testing::TestWithParam<std::tuple<DType, Reduce, bool, SpmmCase>> {};

template <typename I>
void run_spmm(const SpmmCase& c, Reduce reduce, bool transpose, uint64_t seed) {
  const Csr a = random_csr(c.rows, c.cols, c.max_deg, seed);
  const std::vector<I> indptr(a.indptr.begin(), a.indptr.end()),
      indices(a.indices.begin(), a.indices.end());
  const int64_t in_rows = transpose ? c.rows : c.cols, out_rows = transpose ? c.cols : c.rows;
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> b(in_rows * c.feat);
  for (auto& x : b)
    x = u(rng);
  std::vector<double> ref, bound;
  reference(a, c.rows, c.cols, b, c.feat, reduce, transpose, ref, bound);

  CsrRef A{IndexRef::of(indptr.data(), c.rows + 1),
           IndexRef::of(indices.data(), static_cast<int64_t>(indices.size())), c.rows, c.cols};
  std::vector<float> cpu(out_rows * c.feat, std::nanf(""));
  ops::spmm(A, MatrixRef{b.data(), DType::kFloat32, in_rows, c.feat},
            MatrixRef{cpu.data(), DType::kFloat32, out_rows, c.feat}, reduce, transpose);
  for (size_t i = 0; i < cpu.size(); ++i)
    ASSERT_LE(std::abs(cpu[i] - ref[i]), bound[i]) << "CPU twin, element " << i;
  if (kBackend == Backend::kCpu) return;

  DeviceCopy d_indptr(indptr.data(), indptr.size() * sizeof(I), 0, false);
  DeviceCopy d_indices(indices.data(), indices.size() * sizeof(I), 0, false);
  DeviceCopy d_b(b.data(), b.size() * 4, 0, false);
  CsrRef dA{IndexRef{d_indptr.data(), dtype_of<I>(), c.rows + 1, Memory::kDevice},
            IndexRef{d_indices.data(), dtype_of<I>(), static_cast<int64_t>(indices.size()),
                     Memory::kDevice},
            c.rows, c.cols};
  for (const ops::SpmmEngine engine : {ops::SpmmEngine::kCusparse, ops::SpmmEngine::kRows}) {
    const char* name = engine == ops::SpmmEngine::kRows ? "rows" : "cuSPARSE";
    DeviceCopy d_c(cpu.data(), cpu.size() * 4, 0, false);           // overwritten
    cuda::memset_async(d_c.data(), 0xff, cpu.size() * 4, nullptr);  // NaN poison
    ops::spmm(dA, MatrixRef{d_b.data(), DType::kFloat32, in_rows, c.feat, Memory::kDevice},
              MatrixRef{d_c.data(), DType::kFloat32, out_rows, c.feat, Memory::kDevice}, reduce,
              transpose, {}, engine);
    const auto bytes = d_c.download();
    std::vector<float> gpu(cpu.size());
    std::memcpy(gpu.data(), bytes.data(), bytes.size());
    for (size_t i = 0; i < gpu.size(); ++i) {
      ASSERT_LE(std::abs(gpu[i] - ref[i]), bound[i]) << "CUDA twin (" << name << "), element " << i;
    }
    // The row engine's forward sums in storage order and scales as the CPU twin: its bits.
    if (engine == ops::SpmmEngine::kRows && !transpose) {
      ASSERT_EQ(std::memcmp(gpu.data(), cpu.data(), gpu.size() * 4), 0) << "rows engine forward";
    }
  }
}

TEST_P(SpmmTwin, MatchesDenseReference) {
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const auto& [it, reduce, transpose, c] = GetParam();
  if (it == DType::kInt32)
    run_spmm<int32_t>(c, reduce, transpose, 31);
  else
    run_spmm<int64_t>(c, reduce, transpose, 32);
}

std::string spmm_name(
    const ::testing::TestParamInfo<std::tuple<DType, Reduce, bool, SpmmCase>>& info) {
  const DType it = std::get<0>(info.param);
  const Reduce reduce = std::get<1>(info.param);
  const bool transpose = std::get<2>(info.param);
  const SpmmCase c = std::get<3>(info.param);
  return fmt::format("{}_{}_{}_{}_{}x{}_d{}_f{}", backend_name(kBackend), dtype_name(it),
                     reduce == Reduce::kSum ? "sum" : "mean", transpose ? "T" : "N", c.rows, c.cols,
                     c.max_deg, c.feat);
}

INSTANTIATE_TEST_SUITE_P(
    Csr, SpmmTwin,
    ::testing::Combine(::testing::Values(DType::kInt32, DType::kInt64),
                       ::testing::Values(Reduce::kSum, Reduce::kMean), ::testing::Bool(),
                       ::testing::Values(SpmmCase{0, 0, 0, 4}, SpmmCase{0, 5, 0, 3},
                                         SpmmCase{1, 1, 1, 1}, SpmmCase{7, 4, 3, 5},
                                         SpmmCase{40, 90, 12, 33}, SpmmCase{5000, 3000, 40, 64},
                                         SpmmCase{20000, 20000, 25, 7},
                                         SpmmCase{300, 200, 9, 300})),
    spmm_name);

#if !TESSERA_TEST_CUDA  // the validator is the same for both twins: checked once
TEST(SpmmErrors, NameTheArgument) {
  std::vector<int64_t> indptr = {0, 1, 3}, indices = {0, 1, 2};
  std::vector<float> b(3 * 2), c(2 * 2);
  CsrRef A{IndexRef::of(indptr.data(), 3), IndexRef::of(indices.data(), 3), 2, 3};
  MatrixRef B{b.data(), DType::kFloat32, 3, 2}, C{c.data(), DType::kFloat32, 2, 2};
  ops::spmm(A, B, C, Reduce::kSum);
  TESSERA_EXPECT_THROW_MSG(ops::spmm(A, B, C, Reduce::kSum, true), ValueError,
                           "B has 3 rows, expected 2");
  A.num_cols = 2;
  TESSERA_EXPECT_THROW_MSG(
      ops::spmm(A, MatrixRef{b.data(), DType::kFloat32, 2, 2}, C, Reduce::kSum), IndexError,
      "indices[2] = 2 is outside [0, 2)");
  A.num_cols = 3;
  indptr[2] = 2;
  TESSERA_EXPECT_THROW_MSG(ops::spmm(A, B, C, Reduce::kMean), ValueError,
                           "indptr[num_rows] = 2 but indices has 3 entries");
  indptr[2] = 3;
  TESSERA_EXPECT_THROW_MSG(
      ops::spmm(A, MatrixRef{b.data(), DType::kFloat16, 3, 2}, C, Reduce::kSum), TypeError,
      "B must be float32");
  std::vector<int32_t> i32 = {0, 1, 2};
  TESSERA_EXPECT_THROW_MSG(
      ops::spmm(CsrRef{A.indptr, IndexRef::of(i32.data(), 3), 2, 3}, B, C, Reduce::kSum), TypeError,
      "share one index type");
  // The forward on a graph: CsrRef::of views a CSC Graph.
  Graph g;
  g.num_nodes = 3;
  g.indptr = {0, 2, 2, 3};
  g.indices = {1, 2, 0};
  std::vector<float> x = {1, 10, 100}, y(3);
  ops::spmm(CsrRef::of(g), MatrixRef{x.data(), DType::kFloat32, 3, 1},
            MatrixRef{y.data(), DType::kFloat32, 3, 1}, Reduce::kMean);
  EXPECT_EQ(y, (std::vector<float>{55, 0, 1}));
}
#endif

}  // namespace
}  // namespace tessera::test
