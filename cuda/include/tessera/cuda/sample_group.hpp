// SPDX-License-Identifier: Apache-2.0
// The per-row work of the GPU sampler split over a GROUP of lanes (a power of two, 1 to 32, inside
// one warp), as TESSERA_HD steps. One group samples one row; its lanes draw, search and write in
// parallel and meet between steps.
//
// A step is a function of the lane index that reads only what earlier steps wrote and writes only
// what it owns (its lane's draws, or, on lane 0 alone, the group's state). The kernels run a step
// on every lane and then __syncwarp() the group (WarpExec in cuda/src/sample_kernels.cuh); the
// tests run the lanes of a step one after another on the CPU (HostExec below), which computes
// exactly what the group computes. So tests/cuda/test_sample_rows.cpp checks the kernels' row
// algorithms bit for bit against ops::sample_neighbors in CI, without a GPU.
//
// The samples are those of tessera/cuda/sample_rows.hpp (one thread per row) and of the CPU twin:
// the same Philox draws per (key, node, draw index) and the same arithmetic; only who computes
// which draw, and when, differs:
// - uniform without replacement (Floyd): every draw r_t = bounded(draw t, j_t + 1), j_t = d-k+t,
//   is computed at once; draw t is a repeat iff an earlier draw has the same r, or r_t = j_s for
//   an earlier draw s that was a repeat (then s took j_s); picks are r_t or j_t, placed by rank;
// - weighted: the inverse-CDF search of every draw is independent of what was taken, so a group
//   searches G draws at once (speculatively, for successive sampling), and lane 0 then walks them
//   in order with the twin's accept / redraw / exact-walk rules.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/sample_rows.hpp"

// Templates of TESSERA_HD functions that the kernels instantiate with device-only callables.
#if defined(__CUDACC__)
#define TESSERA_HD_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define TESSERA_HD_TEMPLATE
#endif

namespace tessera::cuda::group {

/// Runs each step on lanes 0 .. G-1 one after another (the CPU form of a group).
struct HostExec {
  int G = 32;
  template <typename F>
  void step(F&& f) const {
    for (int l = 0; l < G; ++l)
      f(l);
  }
};

/// What a group keeps in shared memory for one row. `a` and `b` hold `cap` int64 each, with
/// cap >= max(k, G) for a row that yields k edges by drawing (Floyd, weighted successive).
struct Scratch {
  int64_t* a = nullptr;
  int64_t* b = nullptr;
  /// Lane 0's state for the steps that loop: counters and the taken weight.
  struct State {
    int64_t n = 0;       // picks made (successive sampling), or entries emitted (scans)
    int64_t last = 0;    // last position with a positive weight (weighted with replacement)
    uint32_t draw = 0;   // next draw index (successive sampling)
    uint32_t fails = 0;  // redraws in the current step
    double taken = 0;    // weight taken so far
  }* st = nullptr;
};

/// Largest k a group samples by drawing with its shared scratch (Floyd's picks, successive
/// sampling's picks); larger fanouts go to the one-thread-per-row kernel.
inline constexpr int64_t kMaxGroupFanout = 256;

/// Lanes of a group for a fanout: the power of two >= fanout in [4, 32] (32 for fanout -1).
TESSERA_HD inline int group_size(int64_t fanout) {
  if (fanout < 0 || fanout > 16) return 32;
  int g = 4;
  while (g < fanout)
    g <<= 1;
  return g;
}

/// Entries of `a` and `b` a group needs for `fanout` (see Scratch).
TESSERA_HD inline int64_t scratch_entries(int64_t fanout, int G) {
  return fanout > G ? fanout : G;
}

// ---- Uniform ---------------------------------------------------------------------------------

/// Floyd, step 2 for draw t (draws in a[0, k)): b[t] = j_t if an earlier draw equals r_t, else
/// r_t. Final for draws with r_t < d - k (a repeat through a chain needs r_t = j_s >= d - k).
TESSERA_HD inline void floyd_dup(const int64_t* a, int64_t* b, int64_t d, int64_t k, int64_t t) {
  const int64_t r = a[t];
  bool dup = false;
  for (int64_t s = 0; s < t && !dup; ++s)
    dup = a[s] == r;
  b[t] = dup ? d - k + t : r;
}

/// Floyd, step 3 (one lane, draws in order): a draw r_t >= d - k that is not yet a repeat is
/// one when draw s = r_t - (d - k) < t was a repeat, i.e. took j_s (b[s] != a[s]).
TESSERA_HD inline void floyd_chain(const int64_t* a, int64_t* b, int64_t d, int64_t k) {
  const int64_t lo = d - k;
  for (int64_t t = 1; t < k; ++t) {
    const int64_t s = a[t] - lo;
    if (s >= 0 && s < t && b[t] == a[t] && b[s] != a[s]) b[t] = lo + t;
  }
}

/// The rank of b[t] among b[0, k) (distinct values): its place in increasing order.
TESSERA_HD inline int64_t rank_of(const int64_t* b, int64_t k, int64_t t) {
  const int64_t x = b[t];
  int64_t r = 0;
  for (int64_t s = 0; s < k; ++s)
    r += b[s] < x;
  return r;
}

TESSERA_HD_TEMPLATE
/// One row, uniform: calls emit(q, p) for each output slot q in [0, cnt) with the row offset p
/// it holds (the CPU twin's output order). cnt = rows::uniform_count(d, fanout, replace); the
/// drawing case (without replacement, cnt < d) needs cnt <= s's capacity.
template <typename Exec, typename Emit>
TESSERA_HD void uniform_row(const Exec& ex, const RngKey& key, uint64_t node, int64_t d,
                            int64_t cnt, int64_t fanout, bool replace, Scratch s, Emit&& emit) {
  if (cnt == 0) return;
  const int G = ex.G;
  if (cnt == d && (fanout < 0 || !replace)) {
    ex.step([&](int l) {
      for (int64_t q = l; q < cnt; q += G)
        emit(q, q);
    });
  } else if (replace) {
    ex.step([&](int l) {
      for (int64_t q = l; q < cnt; q += G)
        emit(q, rows::draw_bounded(key, node, static_cast<uint32_t>(q), static_cast<uint64_t>(d)));
    });
  } else {
    const int64_t k = cnt;
    ex.step([&](int l) {
      for (int64_t t = l; t < k; t += G)
        s.a[t] = rows::draw_bounded(key, node, static_cast<uint32_t>(t),
                                    static_cast<uint64_t>(d - k + t + 1));
    });
    ex.step([&](int l) {
      for (int64_t t = l; t < k; t += G)
        floyd_dup(s.a, s.b, d, k, t);
    });
    ex.step([&](int l) {
      if (l == 0) floyd_chain(s.a, s.b, d, k);
    });
    ex.step([&](int l) {
      for (int64_t t = l; t < k; t += G)
        emit(rank_of(s.b, k, t), s.b[t]);
    });
  }
}

// ---- Weighted --------------------------------------------------------------------------------
// `w` and `cdf` point at the row's first weight and prefix sum (rows:: conventions), `p` is the
// row's number of positive weights and `last` the position of its last positive weight (both
// from the placed graph's per-row table, or from positive_scan below).

/// Inverse-CDF search of draw `j` as successive sampling does it: the first position whose sum
/// exceeds u * total, clamped to the row, walked back over zero weights.
TESSERA_HD inline int64_t successive_search(const RngKey& key, uint64_t node, const double* cdf,
                                            int64_t d, double total, uint32_t j) {
  int64_t i = rows::upper_bound_position(cdf, d, rows::draw_uniform01(key, node, j) * total);
  if (i >= d) i = d - 1;
  while (i > 0 && rows::weight_at(cdf, i) <= 0)
    --i;
  return i;
}

/// The exact draw from the remaining weight (draw index j), then the twin's rule for weights that
/// vanish in the double sums; `pos[0, n)` are the positions taken.
TESSERA_HD inline int64_t exact_pick(const RngKey& key, uint64_t node, const float* w,
                                     const double* cdf, int64_t d, double total, double taken,
                                     const int64_t* pos, int64_t n, uint32_t j) {
  int64_t pick = -1;
  double target = rows::draw_uniform01(key, node, j) * (total - taken);
  for (int64_t i = 0; i < d; ++i) {
    if (rows::taken_in(pos, n, i)) continue;
    const double wi = rows::weight_at(cdf, i);
    if (wi <= 0) continue;
    pick = i;
    if (target < wi) break;
    target -= wi;
  }
  for (int64_t i = 0; i < d && pick < 0; ++i)
    if (!rows::taken_in(pos, n, i) && w[i] > 0) pick = i;
  return pick;
}

/// Successive sampling, lane 0's walk over the searched draws spec[0, G) of draw indices
/// st.draw .. st.draw + G - 1 (b holds them): accept a draw not yet taken, redraw otherwise, and
/// after kWeightedRetries redraws in one step take the exact pick with the next draw index.
/// Picks go to a[0, cnt). Returns with st.draw past the draws it used.
TESSERA_HD inline void successive_consume(const RngKey& key, uint64_t node, const float* w,
                                          const double* cdf, int64_t d, double total, int64_t cnt,
                                          int G, Scratch s) {
  Scratch::State& st = *s.st;
  const uint32_t base = st.draw;
  while (st.draw < base + static_cast<uint32_t>(G) && st.n < cnt) {
    const int64_t i = s.b[st.draw - base];
    ++st.draw;
    if (!rows::taken_in(s.a, st.n, i)) {
      s.a[st.n++] = i;
      st.taken += rows::weight_at(cdf, i);
      st.fails = 0;
      continue;
    }
    if (++st.fails < static_cast<uint32_t>(rows::kWeightedRetries)) continue;
    const int64_t pick = exact_pick(key, node, w, cdf, d, total, st.taken, s.a, st.n, st.draw++);
    s.a[st.n++] = pick;
    st.taken += rows::weight_at(cdf, pick);
    st.fails = 0;
  }
}

TESSERA_HD_TEMPLATE
/// Every positive weight's position in row order, emitted as (q, p): all of them when p == d,
/// else by chunks of G (a flag per lane in b, each lane counts the flags before it).
template <typename Exec, typename Emit>
TESSERA_HD void positive_positions(const Exec& ex, const float* w, int64_t d, int64_t p, Scratch s,
                                   Emit&& emit) {
  const int G = ex.G;
  if (p == d) {
    ex.step([&](int l) {
      for (int64_t q = l; q < d; q += G)
        emit(q, q);
    });
    return;
  }
  ex.step([&](int l) {
    if (l == 0) s.st->n = 0;
  });
  for (int64_t c = 0; c < d; c += G) {
    ex.step([&](int l) { s.b[l] = c + l < d && w[c + l] > 0 ? 1 : 0; });
    ex.step([&](int l) {
      if (!s.b[l]) return;
      int64_t q = s.st->n;
      for (int m = 0; m < l; ++m)
        q += s.b[m];
      emit(q, c + l);
    });
    ex.step([&](int l) {
      if (l != 0) return;
      for (int m = 0; m < G; ++m)
        s.st->n += s.b[m];
    });
  }
}

TESSERA_HD_TEMPLATE
/// One row, weighted: emit(q, p) for q in [0, cnt), cnt = rows::weighted_count_of(p, ...), in the
/// CPU twin's order. Successive sampling needs cnt <= s's capacity.
template <typename Exec, typename Emit>
TESSERA_HD void weighted_row(const Exec& ex, const RngKey& key, uint64_t node, const float* w,
                             const double* cdf, int64_t d, int64_t p, int64_t last, int64_t cnt,
                             int64_t fanout, bool replace, Scratch s, Emit&& emit) {
  if (cnt == 0) return;
  const int G = ex.G;
  if (fanout < 0 || (!replace && p <= fanout)) {
    positive_positions(ex, w, d, p, s, emit);
    return;
  }
  const double total = cdf[d - 1];
  if (replace) {
    ex.step([&](int l) {
      for (int64_t q = l; q < cnt; q += G) {
        int64_t i = rows::upper_bound_position(
            cdf, d, rows::draw_uniform01(key, node, static_cast<uint32_t>(q)) * total);
        if (i > last) i = last;  // target rounded up to the total
        emit(q, i);
      }
    });
    return;
  }
  ex.step([&](int l) {
    if (l != 0) return;
    s.st->n = 0;
    s.st->draw = 0;
    s.st->fails = 0;
    s.st->taken = 0;
  });
  // Uniform control flow: every lane reads the state after the step that wrote it.
  while (s.st->n < cnt) {
    const uint32_t base = s.st->draw;
    ex.step([&](int l) { s.b[l] = successive_search(key, node, cdf, d, total, base + l); });
    ex.step([&](int l) {
      if (l == 0) successive_consume(key, node, w, cdf, d, total, cnt, G, s);
    });
  }
  ex.step([&](int l) {
    for (int64_t t = l; t < cnt; t += G)
      emit(rank_of(s.a, cnt, t), s.a[t]);
  });
}

/// A row's positive-weight count and last positive position when no per-row table is at hand:
/// lanes count by stride (b), lane 0 sums and walks back from the end into st.n and st.last.
TESSERA_HD_TEMPLATE
template <typename Exec>
TESSERA_HD void positive_scan(const Exec& ex, const float* w, int64_t d, Scratch s) {
  const int G = ex.G;
  ex.step([&](int l) {
    int64_t c = 0;
    for (int64_t i = l; i < d; i += G)
      c += w[i] > 0;
    s.b[l] = c;
  });
  ex.step([&](int l) {
    if (l != 0) return;
    int64_t c = 0;
    for (int m = 0; m < G; ++m)
      c += s.b[m];
    int64_t last = d - 1;
    while (last > 0 && !(w[last] > 0))
      --last;
    s.st->n = c;
    s.st->last = last;
  });
}

// ---- The node table of compaction ------------------------------------------------------------
// One 64-bit value per node of a batch: (generation << 32) | code. A generation is one sampler
// call, so a table is never cleared between calls (only when the 32-bit generation wraps): an
// entry of an older generation is simply smaller. Within a generation the largest code wins
// (atomicMax): a node with a local ID holds kFinal | id, a node first met in this hop holds
// kPending - (smallest output position at which it appears), so the edge at that position is its
// first appearance (ops::to_block's order) whatever order the threads ran in.

inline constexpr uint32_t kFinalBit = 0x80000000u;
inline constexpr uint32_t kPendingTop = 0x7FFFFFFFu;
/// Positions and local IDs must be below 2^31.
inline constexpr int64_t kMaxTableValue = int64_t{1} << 31;

TESSERA_HD inline uint64_t pending_code(uint32_t gen, int64_t pos) {
  return (static_cast<uint64_t>(gen) << 32) | (kPendingTop - static_cast<uint32_t>(pos));
}
TESSERA_HD inline uint64_t final_code(uint32_t gen, int64_t id) {
  return (static_cast<uint64_t>(gen) << 32) | kFinalBit | static_cast<uint32_t>(id);
}
TESSERA_HD inline bool is_final(uint64_t v, uint32_t gen) {
  return static_cast<uint32_t>(v >> 32) == gen && (static_cast<uint32_t>(v) & kFinalBit) != 0;
}
TESSERA_HD inline int64_t local_id(uint64_t v) {
  return static_cast<int64_t>(static_cast<uint32_t>(v) & ~kFinalBit);
}

/// Bit set in a padded neighbor slot by the mark pass when the edge is its source's first
/// appearance (node IDs are < 2^48).
inline constexpr int64_t kNewBit = int64_t{1} << 62;

/// Hashed node table (graphs too large for one entry per node): keys (gen & 0xFFFF) << 48 | node
/// in open addressing with linear probing; an entry of another generation counts as empty.
TESSERA_HD inline uint64_t hash_key(uint32_t gen, int64_t node) {
  return (static_cast<uint64_t>(gen & 0xFFFFu) << 48) | static_cast<uint64_t>(node);
}
TESSERA_HD inline uint64_t hash_slot(int64_t node, uint64_t mask) {
  uint64_t k = static_cast<uint64_t>(node);
  k ^= k >> 33;  // murmur3 finalizer
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k & mask;
}
TESSERA_HD inline bool key_current(uint64_t key, uint32_t gen) {
  return (key >> 48) == (gen & 0xFFFFu);
}

/// Index of batch item `gi` in a flat range split by the inclusive ends start[1..K] (start[0] =
/// 0): the k with start[k] <= gi < start[k + 1].
TESSERA_HD inline int batch_of(const int64_t* start, int K, int64_t gi) {
  int lo = 0, hi = K - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (start[mid] <= gi)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace tessera::cuda::group
