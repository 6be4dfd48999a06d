// SPDX-License-Identifier: Apache-2.0
// The per-row arithmetic of the CUDA sampling kernels, as TESSERA_HD functions over raw pointers:
// one thread runs one seed's row. The kernels in cuda/src/sample.cu call exactly these; a host
// test (tests/cuda/test_sample_rows.cpp) runs them on the CPU against ops::sample_neighbors, so
// the algorithm of every kernel is checked bit for bit in CI even where no GPU can run it.
//
// A row is (d storage positions, b + 0 .. b + d - 1). The functions write *row offsets* (0..d-1)
// of the chosen neighbors, grouped in the CPU twin's output order, into `pos`, which has room for
// row_count(...) entries; membership tests scan `pos` itself (O(k^2) for a fanout k), which the
// typical fanouts want and which does not change the result.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"

namespace tessera::cuda::rows {

TESSERA_HD inline int64_t draw_bounded(const RngKey& key, uint64_t node, uint32_t t, uint64_t n) {
  return static_cast<int64_t>(bounded_u64(philox_u64(philox_draw(key, node, t)), n));
}

TESSERA_HD inline double draw_uniform01(const RngKey& key, uint64_t node, uint32_t t) {
  return uniform01(philox_u64(philox_draw(key, node, t)));
}

TESSERA_HD inline void insertion_sort(int64_t* a, int64_t k) {
  for (int64_t t = 1; t < k; ++t) {
    const int64_t x = a[t];
    int64_t q = t - 1;
    while (q >= 0 && a[q] > x) {
      a[q + 1] = a[q];
      --q;
    }
    a[q + 1] = x;
  }
}

// ---- Uniform ---------------------------------------------------------------------------------

/// Edges a row of degree d yields (the CPU twin's rule).
TESSERA_HD inline int64_t uniform_count(int64_t d, int64_t fanout, bool replace) {
  if (d == 0 || fanout == 0) return 0;
  if (fanout < 0 || (!replace && d <= fanout)) return d;
  return fanout;
}

/// Uniform positions: all (in order) when cnt == d and not drawing with replacement; `cnt`
/// bounded draws with replacement; Floyd's sampling, sorted, without replacement.
TESSERA_HD inline void uniform_positions(const RngKey& key, uint64_t node, int64_t d, int64_t cnt,
                                         int64_t fanout, bool replace, int64_t* pos) {
  if (cnt == d && (fanout < 0 || !replace)) {
    for (int64_t t = 0; t < d; ++t)
      pos[t] = t;
  } else if (replace) {
    for (int64_t t = 0; t < cnt; ++t)
      pos[t] = draw_bounded(key, node, static_cast<uint32_t>(t), static_cast<uint64_t>(d));
  } else {
    // Floyd: draw t picks r in [0, j], j = d - k + t, and takes j when r was taken.
    const int64_t k = cnt;
    for (int64_t t = 0; t < k; ++t) {
      const int64_t j = d - k + t;
      int64_t r = draw_bounded(key, node, static_cast<uint32_t>(t), static_cast<uint64_t>(j + 1));
      for (int64_t q = 0; q < t; ++q)
        if (pos[q] == r) {
          r = j;
          break;
        }
      pos[t] = r;
    }
    insertion_sort(pos, k);
  }
}

// ---- Weighted --------------------------------------------------------------------------------
// `w` and `cdf` point at the row's first weight and first prefix sum (ops::weight_prefix_sums:
// double, summed in storage order from the row's start), so cdf[i] - cdf[i - 1] is exactly the
// CPU twin's weight_at(i).

TESSERA_HD inline int64_t positive_count(const float* w, int64_t d) {
  int64_t p = 0;
  for (int64_t i = 0; i < d; ++i)
    p += w[i] > 0;
  return p;
}

/// Edges a weighted row with `p` positive weights yields: all p for fanout -1 or (without
/// replacement) when p <= fanout; `fanout` draws with replacement when p > 0; else
/// min(p, fanout).
TESSERA_HD inline int64_t weighted_count_of(int64_t p, int64_t fanout, bool replace) {
  if (p == 0 || fanout == 0) return 0;
  if (fanout < 0) return p;
  if (replace) return fanout;
  return p < fanout ? p : fanout;
}

/// weighted_count_of a row's weights w[0, d).
TESSERA_HD inline int64_t weighted_count(const float* w, int64_t d, int64_t fanout, bool replace) {
  return d == 0 || fanout == 0 ? 0 : weighted_count_of(positive_count(w, d), fanout, replace);
}

/// std::upper_bound(cdf, cdf + d, target) - cdf: the first position whose sum exceeds target.
TESSERA_HD inline int64_t upper_bound_position(const double* cdf, int64_t d, double target) {
  int64_t lo = 0, hi = d;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] > target)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

TESSERA_HD inline double weight_at(const double* cdf, int64_t i) {
  return cdf[i] - (i > 0 ? cdf[i - 1] : 0.0);
}

TESSERA_HD inline bool taken_in(const int64_t* pos, int64_t n, int64_t i) {
  for (int64_t q = 0; q < n; ++q)
    if (pos[q] == i) return true;
  return false;
}

/// Redraws from the prefix sums before the exact walk (the CPU twin's kRetries).
inline constexpr int kWeightedRetries = 16;

/// Weighted positions, `cnt` = weighted_count(...) of them:
/// - fanout -1, or without replacement and at most `fanout` positive weights: every positive
///   weight's position in order;
/// - with replacement: inverse CDF of draw t over the row's sums (a target rounded up to the
///   total takes the last positive weight);
/// - without replacement: successive sampling. Each step redraws from the sums (draw j is the
///   node's j-th attempt) until it hits a neighbor not yet taken, up to kWeightedRetries times,
///   then draws once from the remaining weight walking the row; the positions are then sorted.
TESSERA_HD inline void weighted_positions(const RngKey& key, uint64_t node, const float* w,
                                          const double* cdf, int64_t d, int64_t cnt, int64_t fanout,
                                          bool replace, int64_t* pos) {
  if (cnt == 0) return;
  if (fanout < 0 || (!replace && positive_count(w, d) <= fanout)) {
    int64_t n = 0;
    for (int64_t i = 0; i < d; ++i)
      if (w[i] > 0) pos[n++] = i;
    return;
  }
  const double total = cdf[d - 1];
  if (replace) {
    int64_t last = d - 1;
    while (last > 0 && !(w[last] > 0))
      --last;
    for (int64_t t = 0; t < cnt; ++t) {
      int64_t i =
          upper_bound_position(cdf, d, draw_uniform01(key, node, static_cast<uint32_t>(t)) * total);
      if (i > last) i = last;  // target rounded up to the total
      pos[t] = i;
    }
    return;
  }
  uint32_t draw = 0;
  double taken_weight = 0;
  for (int64_t n = 0; n < cnt; ++n) {
    int64_t pick = -1;
    for (int r = 0; r < kWeightedRetries && pick < 0; ++r) {
      int64_t i = upper_bound_position(cdf, d, draw_uniform01(key, node, draw++) * total);
      if (i >= d) i = d - 1;
      while (i > 0 && weight_at(cdf, i) <= 0)  // target rounded onto a zero-weight tail
        --i;
      if (!taken_in(pos, n, i)) pick = i;
    }
    if (pick < 0) {  // exact draw from the remaining weight
      double target = draw_uniform01(key, node, draw++) * (total - taken_weight);
      for (int64_t i = 0; i < d; ++i) {
        if (taken_in(pos, n, i)) continue;
        const double wi = weight_at(cdf, i);
        if (wi <= 0) continue;
        pick = i;
        if (target < wi) break;
        target -= wi;
      }
    }
    // Only weights that vanish in the double sums are left: the first positive one in row order
    // (the CPU twin's rule).
    for (int64_t i = 0; i < d && pick < 0; ++i)
      if (!taken_in(pos, n, i) && w[i] > 0) pick = i;
    pos[n] = pick;
    taken_weight += weight_at(cdf, pick);
  }
  insertion_sort(pos, cnt);
}

// ---- Edge exclusion ---------------------------------------------------------------------------
// A seed whose row holds excluded edges samples from its candidates: the row's storage positions
// whose edge ID is not excluded, in storage order (the CPU twin's `allowed` list). Pass 1
// (seed_counts) counts them, which sizes both the seed's output and its scratch slice; pass 2
// (seed_positions) writes the candidates' positions, weights and double prefix sums into that
// slice and runs uniform_positions / weighted_positions over them.

/// ops::ExcludeEdges where the kernels can read it (its rows(), offsets() and eids() arrays):
/// sorted unique rows, num_rows + 1 offsets into eids, edge IDs sorted within each row.
/// num_rows == 0: nothing is excluded (the pointers are not read).
struct ExcludeView {
  const int64_t* rows = nullptr;
  const int64_t* offsets = nullptr;
  const int64_t* eids = nullptr;
  int64_t num_rows = 0;
};

/// The edge ID of storage position k (`eids` null: the position itself).
TESSERA_HD inline int64_t edge_id(const int64_t* eids, int64_t k) {
  return eids ? eids[k] : k;
}

/// std::lower_bound(a, a + n, x) - a: the first position whose value is not below x.
TESSERA_HD inline int64_t lower_bound_position(const int64_t* a, int64_t n, int64_t x) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Whether the sorted array a[0, n) holds x (binary search).
TESSERA_HD inline bool sorted_contains(const int64_t* a, int64_t n, int64_t x) {
  const int64_t lo = lower_bound_position(a, n, x);
  return lo < n && a[lo] == x;
}

/// Row v's excluded edge IDs, ex.eids[*first, *last) (an empty range when v has none).
TESSERA_HD inline void excluded_range(const ExcludeView& ex, int64_t v, int64_t* first,
                                      int64_t* last) {
  *first = *last = 0;
  const int64_t lo = lower_bound_position(ex.rows, ex.num_rows, v);
  if (lo < ex.num_rows && ex.rows[lo] == v) {
    *first = ex.offsets[lo];
    *last = ex.offsets[lo + 1];
  }
}

/// Pass 1 for one seed: the edges it yields and the scratch entries (candidates) pass 2 needs.
struct SeedCounts {
  int64_t edges = 0;
  int64_t scratch = 0;
};

/// The edge IDs of a graph's storage positions as an array (`eids` null: the position itself).
struct EidArray {
  const int64_t* eids = nullptr;
  TESSERA_HD int64_t operator()(int64_t k) const { return edge_id(eids, k); }
};

/// Seed v's counts. A row without exclusions (or whose excluded IDs are none of its edges, so
/// every position is a candidate and the candidates' sums equal the row's own) needs no
/// scratch; a row that loses edges needs one entry per candidate when it yields any edge.
/// `w` null: uniform; `eid_of(k)`: the edge ID of storage position k; ex.num_rows == 0: no
/// exclusion.
template <typename EidOf>
TESSERA_HD SeedCounts seed_counts_by(const int64_t* indptr, const EidOf& eid_of, const float* w,
                                     const ExcludeView& ex, int64_t v, int64_t fanout,
                                     bool replace) {
  SeedCounts c;
  const int64_t b = indptr[v], d = indptr[v + 1] - b;
  if (d == 0 || fanout == 0) return c;
  int64_t first = 0, last = 0;
  if (ex.num_rows > 0) excluded_range(ex, v, &first, &last);
  if (first == last) {
    c.edges = w ? weighted_count(w + b, d, fanout, replace) : uniform_count(d, fanout, replace);
    return c;
  }
  int64_t n = 0, p = 0;
  for (int64_t k = b; k < b + d; ++k) {
    if (sorted_contains(ex.eids + first, last - first, eid_of(k))) continue;
    ++n;
    if (w) p += w[k] > 0;
  }
  c.edges = w ? weighted_count_of(p, fanout, replace) : uniform_count(n, fanout, replace);
  c.scratch = n < d && c.edges > 0 ? n : 0;
  return c;
}

/// seed_counts_by over an edge-ID array (`eids` null: identity).
TESSERA_HD inline SeedCounts seed_counts(const int64_t* indptr, const int64_t* eids, const float* w,
                                         const ExcludeView& ex, int64_t v, int64_t fanout,
                                         bool replace) {
  return seed_counts_by(indptr, EidArray{eids}, w, ex, v, fanout, replace);
}

/// Pass 2 for one seed: the storage positions (not row offsets) of its `cnt` edges, in the CPU
/// twin's order, into `pos`. `cnt` and `scratch` are seed_counts' edges and scratch; with
/// scratch > 0, `cand`, `cand_w` and `cand_cdf` are the seed's slices of `scratch` entries
/// (cand_w and cand_cdf only read or written when weighted), which receive the candidates'
/// positions, weights and double prefix sums (summed in candidate order, as the CPU twin does
/// for a row with exclusions). `w`/`cdf` are the whole graph's weights and prefix sums. Row `v`
/// draws as Philox node `node` (v itself unless the rows are keyed: GraphView::row_keys).
template <typename EidOf>
TESSERA_HD void seed_positions_by(const RngKey& key, const int64_t* indptr, const EidOf& eid_of,
                                  const float* w, const double* cdf, const ExcludeView& ex,
                                  int64_t v, uint64_t node, int64_t fanout, bool replace,
                                  int64_t cnt, int64_t scratch, int64_t* cand, float* cand_w,
                                  double* cand_cdf, int64_t* pos) {
  if (cnt == 0) return;
  const int64_t b = indptr[v], d = indptr[v + 1] - b;
  if (scratch == 0) {
    if (w)
      weighted_positions(key, node, w + b, cdf + b, d, cnt, fanout, replace, pos);
    else
      uniform_positions(key, node, d, cnt, fanout, replace, pos);
    for (int64_t t = 0; t < cnt; ++t)
      pos[t] += b;
    return;
  }
  int64_t first = 0, last = 0;
  excluded_range(ex, v, &first, &last);
  int64_t n = 0;
  double total = 0;
  for (int64_t k = b; k < b + d; ++k) {
    if (sorted_contains(ex.eids + first, last - first, eid_of(k))) continue;
    cand[n] = k;
    if (w) {
      cand_w[n] = w[k];
      total += static_cast<double>(w[k]);
      cand_cdf[n] = total;
    }
    ++n;
  }
  if (w)
    weighted_positions(key, node, cand_w, cand_cdf, n, cnt, fanout, replace, pos);
  else
    uniform_positions(key, node, n, cnt, fanout, replace, pos);
  for (int64_t t = 0; t < cnt; ++t)
    pos[t] = cand[pos[t]];
}

/// seed_positions_by over an edge-ID array (`eids` null: identity).
TESSERA_HD inline void seed_positions(const RngKey& key, const int64_t* indptr, const int64_t* eids,
                                      const float* w, const double* cdf, const ExcludeView& ex,
                                      int64_t v, int64_t fanout, bool replace, int64_t cnt,
                                      int64_t scratch, int64_t* cand, float* cand_w,
                                      double* cand_cdf, int64_t* pos) {
  seed_positions_by(key, indptr, EidArray{eids}, w, cdf, ex, v, static_cast<uint64_t>(v), fanout,
                    replace, cnt, scratch, cand, cand_w, cand_cdf, pos);
}

}  // namespace tessera::cuda::rows
