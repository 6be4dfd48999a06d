// The limit of the GPU sampling benchmark: what the sampler must read of the placed adjacency
// for one visit of a frontier node, as plain functions. The limit kernel (`row_read_rate`,
// cuda/src/bench_kernels.cu) reads exactly this for a list of real visits, and
// tests/cuda/test_gather_plan.cpp checks the rules on the CPU against the sampler's own (the
// staging test of cuda/src/sample_neighbors.cu, rows::uniform_count, group::group_size).
//
// A visit of node v with fanout k (degree d, row at storage position rb):
// - d = 0 or k = 0: nothing;
// - a row of at most `stage_bytes` (d * edge bytes + 16, UVA, interleaved layouts: the sampler
//   stages such rows whole): its bytes, in 16-byte pieces from rb * eb rounded down to 16;
// - otherwise, when the sampler takes every edge (k = -1, or d <= k without replacement): the
//   d entries of the row;
// - otherwise k entries at positions drawn in the row (the sampler's draws, read where they
//   fall);
// - weighted, and drawing (not taking the whole row): each draw first searches the row's prefix
//   sums (about log2 d dependent reads), as the sampler's inverse-CDF draws do; a row with at
//   most k positive weights is taken whole without replacement.
// Every visit also reads indptr[v] and indptr[v + 1] (and the positive count of a weighted
// row), as the sampler does. What the sampler does besides (Philox, compaction, writing the
// block) is not in the limit, so the sampler's rate is at most the limit's.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"  // TESSERA_HD, bounded_u64, uniform01

namespace tessera::cuda::limits {

/// How a visit reads its row.
enum class RowRead : uint8_t { kNone, kStaged, kWhole, kDraws };

/// The reads of a visit of a row of degree d with fanout k (-1: all), `positives` its positive
/// weights (weighted; ignored otherwise), adjacency entries of `edge_bytes`, `stage_bytes` of
/// staging (0: none; only the interleaved layouts stage, `stageable`).
struct RowPlan {
  RowRead read = RowRead::kNone;
  int64_t draws = 0;    ///< entries drawn (kDraws, or kStaged drawing from the stage)
  bool search = false;  ///< each draw searches the prefix sums first (weighted)
};

TESSERA_HD inline RowPlan row_plan(int64_t d, int64_t k, bool replace, bool weighted,
                                   int64_t positives, int edge_bytes, int stage_bytes,
                                   bool stageable) {
  RowPlan p;
  if (d <= 0 || k == 0) {
    return p;
  }
  const bool all = k < 0 || (!replace && (weighted ? positives <= k : d <= k));
  p.draws = all ? 0 : k;
  p.search = weighted && !all;
  if (stage_bytes > 0 && stageable && d * edge_bytes + 16 <= stage_bytes) {
    p.read = RowRead::kStaged;
  } else {
    p.read = all ? RowRead::kWhole : RowRead::kDraws;
  }
  return p;
}

/// Byte range [lo, hi) of a staged row at storage position rb (16-byte aligned, within the
/// adjacency's 16 bytes of padding), as the sampler's stage_row reads it.
TESSERA_HD inline void staged_bytes(int64_t rb, int64_t d, int edge_bytes, int64_t* lo,
                                    int64_t* hi) {
  *lo = (rb * edge_bytes) & ~int64_t{15};
  *hi = ((rb + d) * edge_bytes + 15) & ~int64_t{15};
}

/// A 64-bit mix (splitmix64's finalizer) of x.
TESSERA_HD inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Draw t of visit `visit`: a position in [0, d) and a uniform double in [0, 1) (the search's
/// target fraction of the row's total weight). Any spread will do: the limit reads where draws
/// fall, it does not reproduce the sampler's draws.
TESSERA_HD inline int64_t draw_position(uint64_t visit, uint32_t t, int64_t d) {
  return static_cast<int64_t>(
      bounded_u64(mix64(visit * 0x100000001B3ull + t), static_cast<uint64_t>(d)));
}
TESSERA_HD inline double draw_fraction(uint64_t visit, uint32_t t) {
  return uniform01(mix64(visit * 0x100000001B3ull + t + 0x5bd1e995u));
}

/// First position p in [0, d) with cdf[p] > target (d - 1 if none): the inverse-CDF search the
/// weighted draws make over a row's prefix sums.
TESSERA_HD inline int64_t search_prefix(const double* cdf, int64_t d, double target) {
  int64_t lo = 0, hi = d - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] > target) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace tessera::cuda::limits
