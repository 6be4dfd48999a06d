// SPDX-License-Identifier: Apache-2.0
// Row aggregation twins (update_all's weighted and max path) over {sum, mean, max} x {weights
// or none} x sizes (0 rows, degree-0 rows, hubs, wide rows). test_twins_cpu: the CPU twin
// aggregate_rows_cpu against a float64 reference within the float32 summation bound (max:
// exactly) and bit for bit against aggregate_element, the per-element form the kernel runs.
// test_twins_cuda: the kernel against the CPU twin, bit for bit. And the CSR offsets of a sorted
// row list (csr_offsets.hpp) the GPU loader gives every block: the CPU twin against counting,
// the kernel against the CPU twin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "tessera/cuda/aggregate_rows.hpp"
#include "tessera/cuda/csr_offsets.hpp"
#include "tessera/cuda/kernels.hpp"
#include "twin_support.hpp"

namespace tessera::test {
namespace {

using cuda::RowReduce;

struct AggCase {
  int64_t rows, cols, max_deg, feat;
};

struct Problem {
  std::vector<int64_t> indptr, cols;
  std::vector<float> w, B;
};

// Random pattern (every third row of degree 0, row 2 a hub of 4 * max_deg entries), random
// weights in [-1, 2) and features in [-1, 1).
Problem make_problem(const AggCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> fw(-1.0f, 2.0f), fb(-1.0f, 1.0f);
  Problem p;
  p.indptr.push_back(0);
  for (int64_t r = 0; r < c.rows; ++r) {
    int64_t d = (r % 3 == 1) ? 0 : static_cast<int64_t>(rng() % (c.max_deg + 1));
    if (r == 2) {
      d = 4 * c.max_deg;
    }
    for (int64_t k = 0; k < d; ++k) {
      p.cols.push_back(static_cast<int64_t>(rng() % c.cols));
      p.w.push_back(fw(rng));
    }
    p.indptr.push_back(static_cast<int64_t>(p.cols.size()));
  }
  p.B.resize(static_cast<size_t>(c.cols * c.feat));
  for (float& x : p.B) {
    x = fb(rng);
  }
  return p;
}

std::vector<float> cpu_twin(const Problem& p, int64_t rows, int64_t feat, bool weighted,
                            RowReduce reduce) {
  std::vector<float> C(static_cast<size_t>(rows * feat), -7.0f);
  cuda::aggregate_rows_cpu(p.indptr.data(), p.cols.data(), weighted ? p.w.data() : nullptr,
                           p.B.data(), feat, reduce, 0, rows, C.data());
  return C;
}

// The bits of a float (the twins promise the same bits, NaN and signed zeros included).
uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

class AggregateTwin : public ::testing::TestWithParam<std::tuple<RowReduce, bool, AggCase>> {};

TEST_P(AggregateTwin, MatchesReference) {
  const auto [reduce, weighted, c] = GetParam();
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  const Problem p = make_problem(c, 17 + c.rows);
  const std::vector<float> want = cpu_twin(p, c.rows, c.feat, weighted, reduce);
  const float* w = weighted ? p.w.data() : nullptr;
  if (kBackend == Backend::kCpu) {
    for (int64_t r = 0; r < c.rows; ++r) {
      const int64_t e0 = p.indptr[r], e1 = p.indptr[r + 1];
      for (int64_t f = 0; f < c.feat; ++f) {
        const float got = want[r * c.feat + f];
        const float elem = cuda::aggregate_element(p.indptr.data(), p.cols.data(), w, p.B.data(),
                                                   c.feat, r, f, reduce);
        ASSERT_EQ(bits(got), bits(elem)) << "row " << r << " feature " << f;
        double ref = reduce == RowReduce::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
        double mag = 0;
        for (int64_t e = e0; e < e1; ++e) {
          const float m = (w ? w[e] : 1.0f) * p.B[p.cols[e] * c.feat + f];
          ref = reduce == RowReduce::kMax ? std::max(ref, static_cast<double>(m)) : ref + m;
          mag += std::abs(static_cast<double>(m));
        }
        if (e1 == e0) {
          ref = 0;
        }
        if (reduce == RowReduce::kMean && e1 > e0) {
          ref /= static_cast<double>(e1 - e0);
          mag /= static_cast<double>(e1 - e0);
        }
        const double bound = reduce == RowReduce::kMax
                                 ? 0.0
                                 : static_cast<double>(e1 - e0 + 2) * std::ldexp(1.0, -23) * mag;
        ASSERT_LE(std::abs(got - ref), bound) << "row " << r << " feature " << f;
      }
    }
    return;
  }
  const DeviceCopy d_indptr(p.indptr.data(), p.indptr.size() * 8, 0, false);
  const DeviceCopy d_cols(p.cols.data(), p.cols.size() * 8, 0, false);
  const DeviceCopy d_w(p.w.data(), p.w.size() * 4, 0, false);
  const DeviceCopy d_B(p.B.data(), p.B.size() * 4, 0, false);
  std::vector<float> init(want.size(), -7.0f);
  const DeviceCopy d_C(init.data(), init.size() * 4, 0, false);
  cuda::aggregate_rows_impl(static_cast<const int64_t*>(d_indptr.data()),
                            static_cast<const int64_t*>(d_cols.data()),
                            weighted ? static_cast<const float*>(d_w.data()) : nullptr, c.rows,
                            static_cast<const float*>(d_B.data()), c.feat,
                            static_cast<float*>(d_C.data()), reduce, nullptr);
  const auto got = d_C.download();
  ASSERT_EQ(got.size(), want.size() * 4);
  for (size_t i = 0; i < want.size(); ++i) {
    float g;
    std::memcpy(&g, got.data() + 4 * i, 4);
    ASSERT_EQ(bits(g), bits(want[i]))
        << "element " << i << ": " << g << " vs the CPU twin's " << want[i];
  }
}

std::string agg_name(const ::testing::TestParamInfo<AggregateTwin::ParamType>& i) {
  const auto& [reduce, weighted, c] = i.param;
  const char* r = reduce == RowReduce::kSum ? "sum" : reduce == RowReduce::kMean ? "mean" : "max";
  return std::string(backend_name(kBackend)) + "_" + r + (weighted ? "_weighted" : "") + "_" +
         std::to_string(c.rows) + "x" + std::to_string(c.feat);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, AggregateTwin,
    ::testing::Combine(::testing::Values(RowReduce::kSum, RowReduce::kMean, RowReduce::kMax),
                       ::testing::Bool(),
                       ::testing::Values(AggCase{0, 5, 3, 4}, AggCase{1, 1, 1, 1},
                                         AggCase{37, 50, 9, 7}, AggCase{500, 300, 40, 100},
                                         AggCase{64, 1000, 20, 257})),
    agg_name);

class CsrOffsetsTwin : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CsrOffsetsTwin, MatchesCounting) {
  const auto [num_rows, m] = GetParam();
  TESSERA_SKIP_WITHOUT_DEVICE(kBackend);
  // Sorted rows with gaps (rows without entries), runs and the last row used or not.
  std::mt19937_64 rng(static_cast<uint64_t>(num_rows * 131 + m));
  std::vector<int64_t> rows(static_cast<size_t>(m));
  for (int64_t& r : rows) {
    r = num_rows > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(num_rows)) : 0;
  }
  std::sort(rows.begin(), rows.end());
  std::vector<int64_t> want(static_cast<size_t>(num_rows + 1), 0);
  for (int64_t r : rows) {
    ++want[static_cast<size_t>(r + 1)];
  }
  for (int64_t v = 0; v < num_rows; ++v) {
    want[static_cast<size_t>(v + 1)] += want[static_cast<size_t>(v)];
  }
  std::vector<int64_t> got(want.size(), -1);
  if (kBackend == Backend::kCpu) {
    cuda::csr_offsets_cpu(rows.data(), m, num_rows, got.data());
    EXPECT_EQ(got, want);
    return;
  }
  const DeviceCopy d_rows(rows.data(), rows.size() * 8, 0, false);
  const DeviceCopy d_out(got.data(), got.size() * 8, 0, false);
  cuda::csr_offsets_impl(static_cast<const int64_t*>(d_rows.data()), m, num_rows,
                         static_cast<int64_t*>(d_out.data()), nullptr);
  const auto bytes = d_out.download();
  std::memcpy(got.data(), bytes.data(), bytes.size());
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Sizes, CsrOffsetsTwin,
                         ::testing::Values(std::make_tuple(int64_t{0}, int64_t{0}),
                                           std::make_tuple(int64_t{1}, int64_t{0}),
                                           std::make_tuple(int64_t{5}, int64_t{1}),
                                           std::make_tuple(int64_t{100}, int64_t{1500}),
                                           std::make_tuple(int64_t{70000}, int64_t{900000})));

}  // namespace
}  // namespace tessera::test
