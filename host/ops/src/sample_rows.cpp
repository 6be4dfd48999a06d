// SPDX-License-Identifier: Apache-2.0
#include "sample_rows.hpp"

#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera::ops::detail {

namespace {

[[noreturn]] void bad_weight(float w, int64_t k) {
  TESSERA_FAIL(ValueError,
               "sample_neighbors: weight {} at storage position {} is negative or not finite", w,
               k);
}

inline float checked_weight(const float* w, int64_t k) {
  const float x = w[k];
  if (!(x >= 0) || !std::isfinite(x)) {
    bad_weight(x, k);
  }
  return x;
}

// ThreadSanitizer instruments the ifunc resolver that target_clones generates, and the dynamic
// loader runs it before TSan is set up (the binary crashes at load): one version under TSan.
#if defined(__SANITIZE_THREAD__)
#define TESSERA_TARGET_CLONES(...)
#else
#define TESSERA_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#endif

// Floyd's algorithm for k <= 64 without data-dependent branches (the picks of a row are few
// and random, so branchy duplicate checks and insertion sorts mispredict): a pick equal to an
// earlier one becomes j (any earlier pick is < j), then each pick goes to its rank among the
// k distinct picks. Vectorized for the CPU at hand (target_clones).
TESSERA_TARGET_CLONES("avx512f", "avx2", "default")
void floyd_small(const uint64_t* rnd, int64_t d, int64_t k, int64_t* out) {
  int64_t v[64];
  for (int64_t t = 0; t < k; ++t) {
    const int64_t j = d - k + t;
    const int64_t r = static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(j + 1)));
    int64_t dup = 0;
    for (int64_t i = 0; i < t; ++i) {
      dup |= v[i] == r;
    }
    v[t] = dup ? j : r;
  }
  for (int64_t i = 0; i < k; ++i) {
    int64_t rank = 0;
    for (int64_t m = 0; m < k; ++m) {
      rank += v[m] < v[i];
    }
    out[rank] = v[i];
  }
}

// The second repeat test of floyd_avx512: draw t in `high` (r_t in [d - k, d), repeating no
// earlier draw) is a repeat iff draw i = r_t - low < t was one. Walked in increasing t, so that
// draw i is settled already. Returns `dup` with those draws added.
template <class T>
uint64_t settle_high_draws(const T* r, int64_t low, uint64_t high, uint64_t dup) {
  while (high != 0) {
    const int t = __builtin_ctzll(high);
    high &= high - 1;
    const int64_t i = static_cast<int64_t>(r[t]) - low;
    if (i < t && ((dup >> i) & 1)) {
      dup |= uint64_t{1} << t;
    }
  }
  return dup;
}

// floyd_small with the draws held in NV AVX-512 registers (k <= 8 * NV) and no dependency from
// one draw to the next (floyd_small's duplicate test waits for the previous pick; here every
// test runs at once). Draw t takes r_t in [0, j_t], j_t = d - k + t, and becomes j_t iff r_t is
// among the earlier picks. Since every earlier pick is r_i or j_i:
//  - r_t equal to an earlier draw r_i is always a duplicate (either r_i was picked, or r_i was
//    itself a duplicate of a still earlier pick);
//  - r_t equal to no earlier draw is a duplicate iff r_t == j_i for an earlier draw i that
//    was a duplicate, i.e. iff r_t >= d - k and draw i = r_t - (d - k) < t was one.
// The first test is NV compares per draw, all independent; the second is a short scalar walk
// over the draws that landed in [d - k, d) (about k^2 / 2d of them per row). Then each pick
// goes to its rank (NV compares and popcounts; unused lanes hold INT64_MAX, above every pick).
// Same output as floyd_small.
template <int NV>
__attribute__((target("avx512f"))) void floyd_avx512(const uint64_t* rnd, int64_t d, int64_t k,
                                                     int64_t* out) {
  static_assert(NV >= 1 && NV <= 8, "at most 64 picks in registers");
  const int64_t low = d - k;  // j_t = low + t
  alignas(64) int64_t r[8 * NV];
  for (int64_t t = 0; t < k; ++t) {
    r[t] = static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(low + t + 1)));
  }
  for (int64_t t = k; t < int64_t{8} * NV; ++t) {
    r[t] = std::numeric_limits<int64_t>::max();
  }
  __m512i v[NV];
  for (int i = 0; i < NV; ++i) {
    v[i] = _mm512_load_si512(r + ptrdiff_t{8} * i);
  }
  const uint64_t used = k == 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1;
  uint64_t dup = 0;  // bit t: draw t repeats an earlier draw
  for (int64_t t = 1; t < k; ++t) {
    const __m512i b = _mm512_set1_epi64(r[t]);
    uint64_t eq = 0;
    for (int i = 0; i < NV; ++i) {
      eq |= static_cast<uint64_t>(_mm512_cmpeq_epi64_mask(v[i], b)) << (8 * i);
    }
    dup |= static_cast<uint64_t>((eq & ((uint64_t{1} << t) - 1)) != 0) << t;
  }
  const __m512i vlow = _mm512_set1_epi64(low);
  uint64_t high = 0;  // draws in [d - k, d) that repeat no earlier draw
  for (int i = 0; i < NV; ++i) {
    high |= static_cast<uint64_t>(_mm512_cmpge_epi64_mask(v[i], vlow)) << (8 * i);
  }
  high &= used & ~dup;
  dup = settle_high_draws(r, low, high, dup);
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  alignas(64) int64_t picks[8 * NV];
  for (int i = 0; i < NV; ++i) {
    const __m512i j = _mm512_add_epi64(_mm512_set1_epi64(low + int64_t{8} * i), lane);
    v[i] = _mm512_mask_blend_epi64(static_cast<__mmask8>(dup >> (8 * i)), v[i], j);
    _mm512_store_si512(picks + ptrdiff_t{8} * i, v[i]);
  }
  for (int64_t i = 0; i < k; ++i) {
    const __m512i b = _mm512_set1_epi64(picks[i]);
    int rank = 0;
    for (int m = 0; m < NV; ++m) {
      rank += __builtin_popcount(_mm512_cmplt_epi64_mask(v[m], b));
    }
    out[rank] = picks[i];
  }
}

// floyd_avx512 for k <= 16 and d < 2^31 - 1: all draws in one register of 32-bit lanes, and the
// repeats of earlier draws found by one conflict detection (AVX-512CD) instead of k compares.
// Same output as floyd_small.
__attribute__((target("avx512f,avx512cd"))) void floyd_avx512_16(const uint64_t* rnd, int64_t d,
                                                                 int64_t k, int64_t* out) {
  const int32_t low = static_cast<int32_t>(d - k);  // j_t = low + t
  alignas(64) int32_t r[16];
  for (int64_t t = 0; t < k; ++t) {
    r[t] = static_cast<int32_t>(bounded_u64(rnd[t], static_cast<uint64_t>(low + t + 1)));
  }
  for (int64_t t = k; t < 16; ++t) {
    r[t] = std::numeric_limits<int32_t>::max();
  }
  __m512i v = _mm512_load_si512(r);
  const auto used = static_cast<__mmask16>((1u << k) - 1);
  const __m512i earlier = _mm512_conflict_epi32(v);  // lane t: earlier lanes equal to it
  const __mmask16 dup = _mm512_mask_test_epi32_mask(used, earlier, earlier);
  const uint64_t high = _mm512_mask_cmpge_epi32_mask(used & ~dup, v, _mm512_set1_epi32(low));
  const uint64_t dups = settle_high_draws(r, low, high, dup);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  v = _mm512_mask_blend_epi32(static_cast<__mmask16>(dups), v,
                              _mm512_add_epi32(_mm512_set1_epi32(low), lane));
  alignas(64) int32_t picks[16];
  _mm512_store_si512(picks, v);
  for (int64_t i = 0; i < k; ++i) {
    const int rank = __builtin_popcount(_mm512_cmplt_epi32_mask(v, _mm512_set1_epi32(picks[i])));
    out[rank] = picks[i];
  }
}

// Draws first..first+k-1 of `node` into s.rnd (SIMD Philox; identical to philox_draw one at a
// time).
const uint64_t* draws_of(const RngKey& key, uint64_t node, int64_t k, RowScratch& s,
                         uint32_t first = 0) {
  const size_t n = static_cast<size_t>(k);
  if (s.rnd.size() < n) {
    s.rnd.resize(n);
    s.dr.resize(n);
    s.c1.resize(n);
    s.c2.resize(n);
  }
  uint32_t c1, c2;
  philox_ctr_words(key, node, c1, c2);
  for (int64_t t = 0; t < k; ++t) {
    s.dr[t] = first + static_cast<uint32_t>(t);
    s.c1[t] = c1;
    s.c2[t] = c2;
  }
  philox_many(PhiloxRound(key), s.dr.data(), s.c1.data(), s.c2.data(), k, s.rnd.data());
  return s.rnd.data();
}

void floyd(const RngKey& key, uint64_t node, int64_t d, int64_t k, RowScratch& s, int64_t* out) {
  floyd_from(draws_of(key, node, k, s), d, k, s, out);
}

// std::upper_bound(cdf, cdf + d, target) - cdf (the first position whose prefix sum exceeds
// target, d if none), found with fewer dependent cache misses on long rows: a few
// interpolation probes, each followed by a probe one expected error away on the other side,
// narrow [lo, hi) before a binary search. Every probe keeps "cdf[i] <= target for i < lo and
// cdf[i] > target for i >= hi" (cdf is non-decreasing), so the result is exactly upper_bound's.
int64_t upper_position(const double* cdf, int64_t d, double target) {
  int64_t lo = 0, hi = d;
  double vlo = 0, vhi = d > 0 ? cdf[d - 1] : 0;
  for (int step = 0; step < 4 && hi - lo > 32; ++step) {
    const double frac = (target - vlo) / (vhi - vlo);
    const int64_t span = hi - lo;
    int64_t p = lo + span / 2;
    if (frac >= 0 && frac < 1) {
      p = lo + static_cast<int64_t>(frac * static_cast<double>(span));
    }
    p = std::min(std::max(p, lo), hi - 1);
    const int64_t gap = 8 + static_cast<int64_t>(2 * std::sqrt(static_cast<double>(span)));
    if (cdf[p] > target) {
      hi = p;
      vhi = cdf[p];
      const int64_t q = p - gap;
      if (q >= lo) {
        if (cdf[q] <= target) {
          lo = q + 1;
          vlo = cdf[q];
        } else {
          hi = q;
          vhi = cdf[q];
        }
      }
    } else {
      lo = p + 1;
      vlo = cdf[p];
      const int64_t q = p + gap;
      if (q < hi) {
        if (cdf[q] > target) {
          hi = q;
          vhi = cdf[q];
        } else {
          lo = q + 1;
          vlo = cdf[q];
        }
      }
    }
  }
  return std::upper_bound(cdf + lo, cdf + hi, target) - cdf;
}

}  // namespace

void floyd_from(const uint64_t* rnd, int64_t d, int64_t k, RowScratch& s, int64_t* out) {
  if (k <= 64) {
    if (philox_simd_level() == 2) {  // the CPU has AVX-512F (tests may lower the level)
      if (k <= 16 && floyd_conflict_detection() && d < std::numeric_limits<int32_t>::max()) {
        floyd_avx512_16(rnd, d, k, out);
      } else if (k <= 8) {
        floyd_avx512<1>(rnd, d, k, out);
      } else if (k <= 16) {
        floyd_avx512<2>(rnd, d, k, out);
      } else if (k <= 32) {
        floyd_avx512<4>(rnd, d, k, out);
      } else {
        floyd_avx512<8>(rnd, d, k, out);
      }
      return;
    }
    floyd_small(rnd, d, k, out);
    return;
  }
  s.taken.assign(static_cast<size_t>(d), 0);
  for (int64_t t = 0; t < k; ++t) {
    const int64_t j = d - k + t;
    int64_t r = static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(j + 1)));
    if (s.taken[r]) {
      r = j;
    }
    s.taken[r] = 1;
  }
  int64_t n = 0;
  for (int64_t i = 0; i < d; ++i) {
    if (s.taken[i]) {
      out[n++] = i;
    }
  }
}

void RowSampler::row(int64_t v, SampledEdges& out, RowScratch& s) const {
  const int64_t b = indptr[v];
  int64_t d = indptr[v + 1] - b;
  const int64_t* cand = nullptr;
  if (o.exclude && !o.exclude->empty()) {
    auto [first, last] = o.exclude->row_eids(v);
    if (first != last) {
      s.allowed.clear();
      for (int64_t k = b; k < b + d; ++k) {
        if (!std::binary_search(first, last, eid(k))) {
          s.allowed.push_back(k);
        }
      }
      cand = s.allowed.data();
      d = static_cast<int64_t>(s.allowed.size());
    }
  }
  auto at = [&](int64_t i) { return cand ? cand[i] : b + i; };
  const int64_t fan = o.fanout;
  const uint64_t node = node_of(v);
  if (d == 0 || fan == 0) {
    return;
  }
  if (w == nullptr) {
    if (fan < 0 || (!o.replace && d <= fan)) {
      for (int64_t i = 0; i < d; ++i) {
        emit(out, v, at(i));
      }
    } else if (o.replace) {
      for (int64_t t = 0; t < fan; ++t) {
        const int64_t i = static_cast<int64_t>(
            bounded_u64(philox_u64(philox_draw(o.key, node, static_cast<uint32_t>(t))),
                        static_cast<uint64_t>(d)));
        emit(out, v, at(i));
      }
    } else {
      s.pos.resize(static_cast<size_t>(fan));
      floyd(o.key, node, d, fan, s, s.pos.data());
      for (int64_t t = 0; t < fan; ++t) {
        emit(out, v, at(s.pos[t]));
      }
    }
    return;
  }
  // Weighted.
  if (fan < 0) {
    for (int64_t i = 0; i < d; ++i) {
      if (checked_weight(w, at(i)) > 0) {
        emit(out, v, at(i));
      }
    }
    return;
  }
  // The row's prefix sums (storage order, double): cached ones when the row is whole.
  const bool cached = prefix != nullptr && cand == nullptr;
  if (o.replace) {
    // Inverse CDF over the row's weights, summed in storage order in double precision.
    const double* cdf;
    double total = 0;
    int64_t last_pos = -1;
    if (cached) {
      cdf = prefix + b;
      total = cdf[d - 1];
      for (int64_t i = d - 1; i >= 0 && last_pos < 0; --i) {
        if (w[b + i] > 0) {
          last_pos = i;
        }
      }
    } else {
      s.cdf.resize(static_cast<size_t>(d));
      for (int64_t i = 0; i < d; ++i) {
        const float x = checked_weight(w, at(i));
        total += x;
        s.cdf[i] = total;
        if (x > 0) {
          last_pos = i;
        }
      }
      cdf = s.cdf.data();
    }
    if (last_pos < 0) {
      return;
    }
    const uint64_t* rnd = draws_of(o.key, node, fan, s);
    for (int64_t t = 0; t < fan; ++t) {
      const double target = uniform01(rnd[t]) * total;
      int64_t i = upper_position(cdf, d, target);
      if (i > last_pos) {
        i = last_pos;  // target rounded up to total
      }
      emit(out, v, at(i));
    }
    return;
  }
  // Without replacement: successive sampling, one neighbor at a time with probability
  // proportional to its weight among those not yet taken. Each step draws from the row's
  // prefix sums (as with replacement) and redraws when it hits a taken neighbor, which is
  // exactly proportional among the rest; after kRetries redraws a step draws from the
  // remaining weight directly (walking the row), so heavy-tailed rows cannot loop. Draw j is
  // the j-th attempt for this node, so the output depends only on the key and the row.
  const double* cdf;
  double total = 0;
  int64_t positive = 0;
  if (cached) {
    cdf = prefix + b;
    total = cdf[d - 1];
    for (int64_t i = 0; i < d && positive <= fan; ++i) {  // only whether positive <= fan matters
      positive += w[b + i] > 0;
    }
  } else {
    s.cdf.resize(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) {
      const float x = checked_weight(w, at(i));
      total += x;
      s.cdf[i] = total;
      positive += x > 0;
    }
    cdf = s.cdf.data();
  }
  if (positive <= fan) {
    for (int64_t i = 0; i < d; ++i) {
      if (w[at(i)] > 0) {
        emit(out, v, at(i));
      }
    }
    return;
  }
  constexpr int kRetries = 16;
  s.pos.clear();
  const bool small = fan <= 64;
  if (!small) {
    s.taken.assign(static_cast<size_t>(d), 0);
  }
  auto taken = [&](int64_t i) {
    if (!small) {
      return s.taken[i] != 0;
    }
    for (int64_t p : s.pos) {
      if (p == i) {
        return true;
      }
    }
    return false;
  };
  auto weight_at = [&](int64_t i) { return cdf[i] - (i > 0 ? cdf[i - 1] : 0.0); };
  double taken_weight = 0;
  // Draw j of the node (its j-th attempt), computed in SIMD batches of `chunk` ahead.
  uint32_t draw = 0, have = 0, base = 0;
  const uint64_t* batch = nullptr;
  const int64_t chunk = std::max<int64_t>(16, std::min<int64_t>(2 * fan, 1024));
  auto next_draw = [&]() {
    if (draw == have) {
      batch = draws_of(o.key, node, chunk, s, draw);
      base = draw;
      have = draw + static_cast<uint32_t>(chunk);
    }
    return batch[draw++ - base];
  };
  while (static_cast<int64_t>(s.pos.size()) < fan) {
    int64_t pick = -1;
    for (int r = 0; r < kRetries && pick < 0; ++r) {
      const double target = uniform01(next_draw()) * total;
      int64_t i = upper_position(cdf, d, target);
      if (i >= d) {
        i = d - 1;
      }
      while (i > 0 && weight_at(i) <= 0) {  // target rounded onto a zero-weight tail
        --i;
      }
      if (!taken(i)) {
        pick = i;
      }
    }
    if (pick < 0) {
      // Exact draw from the remaining weight: walk the row skipping taken neighbors.
      double target = uniform01(next_draw()) * (total - taken_weight);
      for (int64_t i = 0; i < d; ++i) {
        if (taken(i)) {
          continue;
        }
        const double wi = weight_at(i);
        if (wi <= 0) {
          continue;
        }
        pick = i;
        if (target < wi) {
          break;
        }
        target -= wi;
      }
    }
    // Only neighbors whose weights vanish in the double sums are left (they sit next to one
    // 2^53 times heavier): the first of them with a positive weight, in row order. More than
    // `fan` weights are positive, so one is left.
    for (int64_t i = 0; i < d && pick < 0; ++i) {
      if (!taken(i) && w[at(i)] > 0) {
        pick = i;
      }
    }
    s.pos.push_back(pick);
    if (!small) {
      s.taken[pick] = 1;
    }
    taken_weight += weight_at(pick);
  }
  std::sort(s.pos.begin(), s.pos.end());
  for (int64_t i : s.pos) {
    emit(out, v, at(i));
  }
}

void RowSampler::run(const int64_t* seeds, int64_t n, SampledEdges& out) const {
  RowScratch s;
  const bool has_exclusions = o.exclude && !o.exclude->empty();
  if (w == nullptr && !has_exclusions && o.fanout >= 0) {
    CooSink sink{out};
    run_uniform(seeds, n, sink, s);
    return;
  }
  if (o.fanout >= 0) {  // a hint only: capped, since a huge fanout keeps just the degree
    const size_t cap = out.src.size() + static_cast<size_t>(n * std::min<int64_t>(o.fanout, 64));
    out.src.reserve(cap);
    out.dst.reserve(cap);
    out.eid.reserve(cap);
  }
  constexpr int64_t kAhead = 8;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      prefetch_l1(&indptr[seeds[i + kAhead]]);
    }
    if (i + kAhead / 2 < n) {
      const int64_t u = seeds[i + kAhead / 2];
      prefetch_edge(indptr[u]);
    }
    row(seeds[i], out, s);
  }
}

int64_t sample_chunks(int64_t n, int num_threads_arg) {
  const int threads = num_threads_arg == 0 ? num_threads() : num_threads_arg;
  constexpr int64_t kGrain = 256;
  return std::max<int64_t>(1, std::min<int64_t>(threads, n / kGrain));
}

}  // namespace tessera::ops::detail
