// SPDX-License-Identifier: Apache-2.0
// Row aggregation over a CSR pattern with optional per-entry weights: sum, mean or max of
// (w[e] ? w[e] : 1) * B[col(e)] over a row's entries, in storage order, float32. What
// update_all runs for the messages and reductions cuSPARSE does not cover (u_mul_e, max). The
// arithmetic of one output element lives in TESSERA_HD steps, so the CPU loop
// (aggregate_rows_cpu), the per-element form the CUDA kernel runs (aggregate_element) and the
// kernel itself give the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "tessera/core/philox.hpp"  // TESSERA_HD

namespace tessera::cuda {

/// The reduction of aggregate_rows.
enum class RowReduce : uint8_t { kSum, kMean, kMax };

/// The accumulator before a row's first entry: 0, or -inf for max.
TESSERA_HD inline float aggregate_init(RowReduce reduce) {
  return reduce == RowReduce::kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
}

/// Adds one entry's message w * x (x alone without weights) to the accumulator. The product is
/// rounded on its own on the GPU too (no fused multiply-add), as on the CPU.
TESSERA_HD inline float aggregate_step(float acc, float x, const float* w, int64_t e,
                                       RowReduce reduce) {
#ifdef __CUDA_ARCH__
  const float m = w != nullptr ? __fmul_rn(w[e], x) : x;
  if (reduce == RowReduce::kMax) {
    return acc < m ? m : acc;
  }
  return __fadd_rn(acc, m);
#else
  const float m = w != nullptr ? w[e] * x : x;
  if (reduce == RowReduce::kMax) {
    return acc < m ? m : acc;
  }
  return acc + m;
#endif
}

/// The output of a row of `degree` entries from its accumulator: zeros for a row without
/// entries, the sum times 1/degree for mean.
TESSERA_HD inline float aggregate_finish(float acc, int64_t degree, RowReduce reduce) {
  if (degree == 0) {
    return 0.0f;
  }
  if (reduce != RowReduce::kMean) {
    return acc;
  }
  const float scale = 1.0f / static_cast<float>(degree);
#ifdef __CUDA_ARCH__
  return __fmul_rn(acc, scale);
#else
  return acc * scale;
#endif
}

/// Element (r, f) of the aggregation (the CUDA kernel's unit of work): `indptr` has rows + 1
/// entries, `cols` and `w` (or null) one per entry, B is row-major with `feat` columns.
TESSERA_HD inline float aggregate_element(const int64_t* indptr, const int64_t* cols,
                                          const float* w, const float* B, int64_t feat, int64_t r,
                                          int64_t f, RowReduce reduce) {
  const int64_t e0 = indptr[r], e1 = indptr[r + 1];
  float acc = aggregate_init(reduce);
  for (int64_t e = e0; e < e1; ++e) {
    acc = aggregate_step(acc, B[cols[e] * feat + f], w, e, reduce);
  }
  return aggregate_finish(acc, e1 - e0, reduce);
}

/// The CPU twin: C (rows x feat) = the aggregation of every row, the same bits as
/// aggregate_element for every (r, f). `begin`/`end` select rows (a thread's share).
inline void aggregate_rows_cpu(const int64_t* indptr, const int64_t* cols, const float* w,
                               const float* B, int64_t feat, RowReduce reduce, int64_t begin,
                               int64_t end, float* C) {
  std::vector<float> acc(static_cast<size_t>(feat));
  for (int64_t r = begin; r < end; ++r) {
    const int64_t e0 = indptr[r], e1 = indptr[r + 1];
    std::fill(acc.begin(), acc.end(), aggregate_init(reduce));
    for (int64_t e = e0; e < e1; ++e) {
      const float* row = B + (cols[e] * feat);
      for (int64_t f = 0; f < feat; ++f) {
        acc[f] = aggregate_step(acc[f], row[f], w, e, reduce);
      }
    }
    float* out = C + (r * feat);
    for (int64_t f = 0; f < feat; ++f) {
      out[f] = aggregate_finish(acc[f], e1 - e0, reduce);
    }
  }
}

}  // namespace tessera::cuda
