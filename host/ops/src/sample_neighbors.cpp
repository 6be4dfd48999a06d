// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <limits>
#include <system_error>
#include <thread>

#include "id_map.hpp"
#include "philox_batch.hpp"
#include "sample_block.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/core/prefetch.hpp"
#include "tessera/cuda/runtime.hpp"
#include "tessera/ops/device_sampler.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::ops {

const char* device_name(Device d) {
  return d == Device::kCuda ? "cuda" : "cpu";
}
const char* edge_dir_name(EdgeDir d) {
  return d == EdgeDir::kOut ? "out" : "in";
}

RngKey make_rng_key(uint64_t seed, int64_t epoch, int64_t batch, int64_t layer) {
  constexpr int64_t kMax32 = int64_t{1} << 32;
  TESSERA_EXPECTS(seed < static_cast<uint64_t>(kMax32), ValueError,
                  "seed {} out of range: the Philox key holds a 32-bit seed (< 2^32)", seed);
  TESSERA_EXPECTS(epoch >= 0 && epoch < kMax32, ValueError, "epoch {} out of range [0, 2^32)",
                  epoch);
  TESSERA_EXPECTS(batch >= 0 && batch < kMax32, ValueError, "batch {} out of range [0, 2^32)",
                  batch);
  TESSERA_EXPECTS(layer >= 0 && layer < 256, ValueError, "layer {} out of range [0, 256)", layer);
  RngKey k;
  k.seed = static_cast<uint32_t>(seed);
  k.epoch = static_cast<uint32_t>(epoch);
  k.batch = static_cast<uint32_t>(batch);
  k.layer = static_cast<uint32_t>(layer);
  return k;
}

ExcludeEdges::ExcludeEdges(Span<const int64_t> rows, Span<const int64_t> eids) {
  TESSERA_EXPECTS(rows.size() == eids.size(), ValueError, "ExcludeEdges: {} rows but {} edge IDs",
                  rows.size(), eids.size());
  std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<size_t>(rows.size()));
  for (int64_t i = 0; i < rows.size(); ++i)
    pairs[i] = {rows[i], eids[i]};
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i == 0 || pairs[i].first != pairs[i - 1].first) {
      rows_.push_back(pairs[i].first);
      offsets_.push_back(static_cast<int64_t>(i));
    }
    eids_.push_back(pairs[i].second);
  }
  offsets_.push_back(static_cast<int64_t>(eids_.size()));
}

std::pair<const int64_t*, const int64_t*> ExcludeEdges::row_eids(int64_t row) const {
  auto it = std::lower_bound(rows_.begin(), rows_.end(), row);
  if (it == rows_.end() || *it != row) return {nullptr, nullptr};
  const size_t r = static_cast<size_t>(it - rows_.begin());
  return {eids_.data() + offsets_[r], eids_.data() + offsets_[r + 1]};
}

std::vector<float> weights_in_storage_order(const Graph& graph, Span<const float> by_eid) {
  const int64_t m = graph.num_edges();
  TESSERA_EXPECTS(m == 0 || by_eid.size() > 0, ValueError,
                  "weights_in_storage_order: no weights for a graph with {} edges", m);
  std::vector<float> out(static_cast<size_t>(m));
  const uint64_t n = static_cast<uint64_t>(by_eid.size());
  parallel_for(0, m, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t k = lo; k < hi; ++k)
      out[k] = by_eid[static_cast<int64_t>(static_cast<uint64_t>(graph.eid(k)) % n)];
  });
  return out;
}

std::vector<double> weight_prefix_sums(const Graph& graph, Span<const float> weights) {
  validate_weights(graph, weights, "weight_prefix_sums");
  std::vector<double> out(static_cast<size_t>(graph.num_edges()));
  const int64_t* indptr = graph.indptr.data();
  parallel_for(0, graph.num_nodes, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      double total = 0;  // the same sequential sum as the per-row path
      for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
        total += weights[k];
        out[k] = total;
      }
    }
  });
  return out;
}

void validate_weights(const Graph& graph, Span<const float> weights, const char* what) {
  TESSERA_EXPECTS(weights.size() == graph.num_edges(), ValueError,
                  "{}: {} weights for a graph with {} edges (one per edge, in storage order)", what,
                  weights.size(), graph.num_edges());
  for (int64_t k = 0; k < weights.size(); ++k) {
    const float w = weights[k];
    TESSERA_EXPECTS(std::isfinite(w) && w >= 0, ValueError,
                    "{}: weight {} at storage position {} is negative or not finite", what, w, k);
  }
}

namespace detail {

void validate_sample_args(const Graph& graph, Span<const int64_t> seeds,
                          const SampleOptions& opts) {
  const int64_t n = graph.num_nodes;
  TESSERA_EXPECTS(static_cast<int64_t>(graph.indptr.size()) == n + 1, ValueError,
                  "sample_neighbors: graph indptr has {} entries for {} nodes", graph.indptr.size(),
                  n);
  TESSERA_EXPECTS(n < (int64_t{1} << 48), ValueError,
                  "sample_neighbors: {} nodes exceed the 2^48 node IDs of the Philox key layout",
                  n);
  TESSERA_EXPECTS(opts.fanout >= -1, ValueError,
                  "sample_neighbors: fanout {} is negative (use -1 for all neighbors)",
                  opts.fanout);
  TESSERA_EXPECTS(opts.key.layer < 256, ValueError, "sample_neighbors: layer {} not < 256",
                  opts.key.layer);
  TESSERA_EXPECTS(opts.num_threads >= 0, ValueError, "sample_neighbors: num_threads {} < 0",
                  opts.num_threads);
  TESSERA_EXPECTS(opts.weights.empty() || opts.weights.size() == graph.num_edges(), ValueError,
                  "sample_neighbors: {} weights for a graph with {} edges (one per edge, in "
                  "storage order)",
                  opts.weights.size(), graph.num_edges());
  TESSERA_EXPECTS(opts.weight_prefix.empty() || opts.weight_prefix.size() == graph.num_edges(),
                  ValueError,
                  "sample_neighbors: weight_prefix has {} entries for a graph with {} edges",
                  opts.weight_prefix.size(), graph.num_edges());
  TESSERA_EXPECTS(
      opts.adjacency_pairs.empty() || opts.adjacency_pairs.size() == 2 * graph.num_edges(),
      ValueError, "sample_neighbors: adjacency_pairs has {} entries, expected 2 * num_edges = {}",
      opts.adjacency_pairs.size(), 2 * graph.num_edges());
  TESSERA_EXPECTS(
      opts.adjacency_packed.empty() || opts.adjacency_packed.size() == graph.num_edges(),
      ValueError, "sample_neighbors: adjacency_packed has {} entries, expected num_edges = {}",
      opts.adjacency_packed.size(), graph.num_edges());
  for (int64_t i = 0; i < seeds.size(); ++i) {
    const int64_t v = seeds[i];
    if (v < 0 || v >= n)
      TESSERA_FAIL(IndexError, "sample_neighbors: seed node {} at position {} outside [0, {})", v,
                   i, n);
  }
}

namespace {

// Per-thread scratch and the per-row algorithms. Every algorithm writes *positions within the
// row's candidate list*; the output depends only on (key, node) and the row.
struct RowScratch {
  std::vector<int64_t> pos;
  std::vector<int64_t> allowed;  // candidate storage positions when a row has exclusions
  std::vector<double> cdf;
  std::vector<std::pair<double, int64_t>> keyed;
  std::vector<uint8_t> taken;
  std::vector<uint64_t> rnd;         // Philox draws (philox_many output)
  std::vector<uint32_t> dr, c1, c2;  // philox_many input: draw index, counter words 1 and 2
};

[[noreturn]] void bad_weight(float w, int64_t k) {
  TESSERA_FAIL(ValueError,
               "sample_neighbors: weight {} at storage position {} is negative or not finite", w,
               k);
}

inline float checked_weight(const float* w, int64_t k) {
  const float x = w[k];
  if (!(x >= 0) || !std::isfinite(x)) bad_weight(x, k);
  return x;
}

// Floyd's algorithm for k <= 64 without data-dependent branches (the picks of a row are few
// and random, so branchy duplicate checks and insertion sorts mispredict): a pick equal to an
// earlier one becomes j (any earlier pick is < j), then each pick goes to its rank among the
// k distinct picks. Vectorized for the CPU at hand (target_clones).
__attribute__((target_clones("avx512f", "avx2", "default"))) void floyd_small(const uint64_t* rnd,
                                                                              int64_t d, int64_t k,
                                                                              int64_t* out) {
  int64_t v[64];
  for (int64_t t = 0; t < k; ++t) {
    const int64_t j = d - k + t;
    const int64_t r = static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(j + 1)));
    int64_t dup = 0;
    for (int64_t i = 0; i < t; ++i)
      dup |= v[i] == r;
    v[t] = dup ? j : r;
  }
  for (int64_t i = 0; i < k; ++i) {
    int64_t rank = 0;
    for (int64_t m = 0; m < k; ++m)
      rank += v[m] < v[i];
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
    if (i < t && ((dup >> i) & 1)) dup |= uint64_t{1} << t;
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
  for (int64_t t = 0; t < k; ++t)
    r[t] = static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(low + t + 1)));
  for (int64_t t = k; t < 8 * NV; ++t)
    r[t] = std::numeric_limits<int64_t>::max();
  __m512i v[NV];
  for (int i = 0; i < NV; ++i)
    v[i] = _mm512_load_si512(r + 8 * i);
  const uint64_t used = k == 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1;
  uint64_t dup = 0;  // bit t: draw t repeats an earlier draw
  for (int64_t t = 1; t < k; ++t) {
    const __m512i b = _mm512_set1_epi64(r[t]);
    uint64_t eq = 0;
    for (int i = 0; i < NV; ++i)
      eq |= static_cast<uint64_t>(_mm512_cmpeq_epi64_mask(v[i], b)) << (8 * i);
    dup |= static_cast<uint64_t>((eq & ((uint64_t{1} << t) - 1)) != 0) << t;
  }
  const __m512i vlow = _mm512_set1_epi64(low);
  uint64_t high = 0;  // draws in [d - k, d) that repeat no earlier draw
  for (int i = 0; i < NV; ++i)
    high |= static_cast<uint64_t>(_mm512_cmpge_epi64_mask(v[i], vlow)) << (8 * i);
  high &= used & ~dup;
  dup = settle_high_draws(r, low, high, dup);
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  alignas(64) int64_t picks[8 * NV];
  for (int i = 0; i < NV; ++i) {
    const __m512i j = _mm512_add_epi64(_mm512_set1_epi64(low + 8 * i), lane);
    v[i] = _mm512_mask_blend_epi64(static_cast<__mmask8>(dup >> (8 * i)), v[i], j);
    _mm512_store_si512(picks + 8 * i, v[i]);
  }
  for (int64_t i = 0; i < k; ++i) {
    const __m512i b = _mm512_set1_epi64(picks[i]);
    int rank = 0;
    for (int m = 0; m < NV; ++m)
      rank += __builtin_popcount(_mm512_cmplt_epi64_mask(v[m], b));
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
  for (int64_t t = 0; t < k; ++t)
    r[t] = static_cast<int32_t>(bounded_u64(rnd[t], static_cast<uint64_t>(low + t + 1)));
  for (int64_t t = k; t < 16; ++t)
    r[t] = std::numeric_limits<int32_t>::max();
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

// Uniform without replacement, k < d: Robert Floyd's algorithm; draw t picks from [0, d-k+t].
// `rnd[t]` is the 64-bit value of draw t. Writes k distinct positions, sorted.
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
    if (s.taken[r]) r = j;
    s.taken[r] = 1;
  }
  int64_t n = 0;
  for (int64_t i = 0; i < d; ++i)
    if (s.taken[i]) out[n++] = i;
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
    if (frac >= 0 && frac < 1) p = lo + static_cast<int64_t>(frac * static_cast<double>(span));
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

// One window of run_uniform: seeds [first, first + size) of the call, count[i] edges of seed
// first + i, their storage positions in pos (total in all).
struct UniformWindow {
  static constexpr int64_t kSize = 32;
  int64_t first = 0, size = 0, total = 0;
  int64_t count[kSize];
  std::vector<int64_t> pos;
};

// The adjacency words of the window after the one being written, prefetched into L2 one per
// written edge (the rest after the last), so that the requests reach memory at about the rate it
// serves them and arrive while the window in between is drawn. Issued in a burst at draw time
// they stalled the core until the memory caught up, and into L1 they evicted the tags that
// compaction reads next: on rmat:21,25 this form samples 1.2-1.3x as fast as either. Rows shorter
// than the fanout prefetch one line several times; skipping a line already requested costs more
// than it saves (a compare per edge: 0.93x, twice).
struct Ahead {
  const int64_t* pos = nullptr;  // null: nothing to prefetch
  int64_t n = 0;
  template <class S>
  void step(const S& g, int64_t q) const {
    if (q < n) g.prefetch_edge(pos[q]);
  }
  template <class S>
  void rest(const S& g, int64_t q) const {
    for (; q < n; ++q)
      g.prefetch_edge(pos[q]);
  }
};

// run_uniform's sink for sample_neighbors: the window's edges appended to a COO.
struct CooSink {
  SampledEdges& out;
  template <class S>
  void write(const S& g, const UniformWindow& wd, const int64_t* seeds, const Ahead& ahead) {
    const size_t o0 = out.src.size();
    out.src.resize(o0 + static_cast<size_t>(wd.total));
    out.dst.resize(o0 + static_cast<size_t>(wd.total));
    out.eid.resize(o0 + static_cast<size_t>(wd.total));
    int64_t* self = g.o.dir == EdgeDir::kIn ? out.dst.data() + o0 : out.src.data() + o0;
    int64_t* other = g.o.dir == EdgeDir::kIn ? out.src.data() + o0 : out.dst.data() + o0;
    int64_t* eo = out.eid.data() + o0;
    const int64_t* pos = wd.pos.data();
    int64_t q = 0;
    for (int64_t i = 0; i < wd.size; ++i) {
      const int64_t v = seeds[wd.first + i];
      for (int64_t j = 0; j < wd.count[i]; ++j, ++q) {
        const int64_t p = pos[q];
        self[q] = v;
        other[q] = g.neighbor(p);
        eo[q] = g.eid(p);
        ahead.step(g, q);
      }
    }
    ahead.rest(g, q);
  }
  void finish() {}
};

// run_uniform's sink for sample_block_cpu: the window's edges go straight into the block
// (source = the sampled neighbor, destination = the seed's position, which is its local ID),
// and the window before it is compacted over the direct-mapped tags, whose cache lines were
// prefetched (into L2: 1.06-1.07x the rate of L1 prefetches, which crowd out the window's other
// data) when its neighbors were written. Windows are compacted in order, so new source nodes get
// local IDs in order of first appearance, exactly as to_block gives them.
struct BlockSink {
  Block& out;
  uint32_t* tag;
  uint64_t num_nodes;     // every neighbor must be below (tags cover [0, num_nodes))
  uint32_t base;          // tag t is a local of this block iff t > base
  int64_t num_src;        // local IDs given so far (out.src_nodes grows ahead of it)
  int64_t compacted = 0;  // edges [0, compacted) carry local source IDs
  int64_t size = 0;       // edges written; the arrays grow ahead of it in steps (zero-filled once)
  uint64_t compact_ticks = 0;

  // Without branches on whether a source is new (half of them are, at random): a new source
  // takes `num_src`, every source rewrites its tag and the next slot of src_nodes, and only
  // a new one advances num_src. Same IDs as the branching form. Written with masks: GCC
  // compiled `fresh ? next : old` into a branch, mispredicted for about half of the sources
  // (the masks measured 1.04-1.08x the sampling rate on rmat:21,25).
  void compact_to(int64_t end) {
    const uint64_t t0 = __rdtsc();
    if (num_src + (end - compacted) > out.num_src())
      out.src_nodes.resize(static_cast<size_t>(num_src + std::max<int64_t>(end - compacted, 4096)));
    int64_t* src = out.src.data();
    int64_t* nodes = out.src_nodes.data();
    int64_t next = num_src;
    for (int64_t q = compacted; q < end; ++q) {
      const int64_t s = src[q];
      if (static_cast<uint64_t>(s) >= num_nodes)
        TESSERA_FAIL(IndexError,
                     "sample_blocks: sampled neighbor {} is outside [0, {}) (edge ID {})", s,
                     num_nodes, out.eids[q]);
      const int64_t old = static_cast<int64_t>(tag[s]) - static_cast<int64_t>(base) - 1;
      const int64_t fresh = -static_cast<int64_t>(old < 0);  // all ones iff a new source
      const int64_t local = (next & fresh) | (old & ~fresh);
      tag[s] = base + 1 + static_cast<uint32_t>(local);
      nodes[next] = s;
      next -= fresh;
      src[q] = local;
    }
    num_src = next;
    compacted = end;
    compact_ticks += __rdtsc() - t0;
  }
  template <class S>
  void write(const S& g, const UniformWindow& wd, const int64_t* /*seeds*/, const Ahead& ahead) {
    const int64_t o0 = size;
    size += wd.total;
    if (size > out.num_edges()) {  // a step of many windows: resize's zero-fill stays in cache
      const size_t grown = static_cast<size_t>(size + std::max<int64_t>(wd.total, 4096));
      out.src.resize(grown);
      out.dst.resize(grown);
      out.eids.resize(grown);
    }
    int64_t* src = out.src.data() + o0;
    int64_t* dst = out.dst.data() + o0;
    int64_t* eo = out.eids.data() + o0;
    const int64_t* pos = wd.pos.data();
    int64_t q = 0;
    for (int64_t i = 0; i < wd.size; ++i) {
      const int64_t local = wd.first + i;
      for (int64_t j = 0; j < wd.count[i]; ++j, ++q) {
        const int64_t p = pos[q];
        const int64_t u = g.neighbor(p);
        src[q] = u;
        dst[q] = local;
        eo[q] = g.eid(p);
        if (static_cast<uint64_t>(u) < num_nodes) prefetch_l2(&tag[u]);
        ahead.step(g, q);
      }
    }
    ahead.rest(g, q);
    compact_to(o0);  // the previous window
  }
  void finish() {
    compact_to(size);
    out.src_nodes.resize(static_cast<size_t>(num_src));
    out.src.resize(static_cast<size_t>(size));
    out.dst.resize(static_cast<size_t>(size));
    out.eids.resize(static_cast<size_t>(size));
  }
};

struct Sampler {
  const Graph& g;
  const SampleOptions& o;
  const int64_t* indptr;
  const int64_t* indices;
  const int64_t* eids;     // null: identity
  const float* w;          // null: uniform
  const int64_t* pairs;    // null, or (neighbor, edge ID) interleaved in storage order
  const uint64_t* packed;  // null, or edge ID << 32 | neighbor in storage order (before pairs)
  const double* prefix;    // null, or per-row prefix sums of w (weight_prefix_sums)

  Sampler(const Graph& graph, const SampleOptions& opts)
      : g(graph),
        o(opts),
        indptr(graph.indptr.data()),
        indices(graph.indices.data()),
        eids(graph.eids.empty() ? nullptr : graph.eids.data()),
        w(opts.weights.empty() ? nullptr : opts.weights.data()),
        pairs(opts.adjacency_pairs.empty() ? nullptr : opts.adjacency_pairs.data()),
        packed(opts.adjacency_packed.empty() ? nullptr : opts.adjacency_packed.data()),
        prefix(opts.weight_prefix.empty() || opts.weights.empty() ? nullptr
                                                                  : opts.weight_prefix.data()) {}

  int64_t eid(int64_t k) const {
    return packed  ? static_cast<int64_t>(packed[k] >> 32)
           : pairs ? pairs[2 * k + 1]
           : eids  ? eids[k]
                   : k;
  }
  int64_t neighbor(int64_t k) const {
    return packed  ? static_cast<int64_t>(packed[k] & 0xFFFFFFFFu)
           : pairs ? pairs[2 * k]
                   : indices[k];
  }
  // Into L2: the word is read a window or a row later (prefetch.hpp says why not
  // __builtin_prefetch).
  void prefetch_edge(int64_t k) const {
    if (packed) {
      prefetch_l2(&packed[k]);
    } else if (pairs) {
      prefetch_l2(&pairs[2 * k]);
    } else {
      prefetch_l2(&indices[k]);
      if (eids) prefetch_l2(&eids[k]);
    }
  }

  void emit(SampledEdges& out, int64_t v, int64_t k) const {
    const int64_t u = neighbor(k);
    if (o.dir == EdgeDir::kIn) {
      out.src.push_back(u);
      out.dst.push_back(v);
    } else {
      out.src.push_back(v);
      out.dst.push_back(u);
    }
    out.eid.push_back(eid(k));
  }

  // Samples row v. `cand` (size d) maps candidate i to a storage position; null means the row's
  // own positions b + i.
  void row(int64_t v, SampledEdges& out, RowScratch& s) const {
    const int64_t b = indptr[v];
    int64_t d = indptr[v + 1] - b;
    const int64_t* cand = nullptr;
    if (o.exclude && !o.exclude->empty()) {
      auto [first, last] = o.exclude->row_eids(v);
      if (first != last) {
        s.allowed.clear();
        for (int64_t k = b; k < b + d; ++k)
          if (!std::binary_search(first, last, eid(k))) s.allowed.push_back(k);
        cand = s.allowed.data();
        d = static_cast<int64_t>(s.allowed.size());
      }
    }
    auto at = [&](int64_t i) { return cand ? cand[i] : b + i; };
    const int64_t fan = o.fanout;
    const uint64_t node = static_cast<uint64_t>(v);
    if (d == 0 || fan == 0) return;
    if (w == nullptr) {
      if (fan < 0 || (!o.replace && d <= fan)) {
        for (int64_t i = 0; i < d; ++i)
          emit(out, v, at(i));
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
        for (int64_t t = 0; t < fan; ++t)
          emit(out, v, at(s.pos[t]));
      }
      return;
    }
    // Weighted.
    if (fan < 0) {
      for (int64_t i = 0; i < d; ++i)
        if (checked_weight(w, at(i)) > 0) emit(out, v, at(i));
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
        for (int64_t i = d - 1; i >= 0 && last_pos < 0; --i)
          if (w[b + i] > 0) last_pos = i;
      } else {
        s.cdf.resize(static_cast<size_t>(d));
        for (int64_t i = 0; i < d; ++i) {
          const float x = checked_weight(w, at(i));
          total += x;
          s.cdf[i] = total;
          if (x > 0) last_pos = i;
        }
        cdf = s.cdf.data();
      }
      if (last_pos < 0) return;
      const uint64_t* rnd = draws_of(o.key, node, fan, s);
      for (int64_t t = 0; t < fan; ++t) {
        const double target = uniform01(rnd[t]) * total;
        int64_t i = upper_position(cdf, d, target);
        if (i > last_pos) i = last_pos;  // target rounded up to total
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
      for (int64_t i = 0; i < d && positive <= fan; ++i)  // only whether positive <= fan matters
        positive += w[b + i] > 0;
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
      for (int64_t i = 0; i < d; ++i)
        if (w[at(i)] > 0) emit(out, v, at(i));
      return;
    }
    constexpr int kRetries = 16;
    s.pos.clear();
    const bool small = fan <= 64;
    if (!small) s.taken.assign(static_cast<size_t>(d), 0);
    auto taken = [&](int64_t i) {
      if (!small) return s.taken[i] != 0;
      for (int64_t p : s.pos)
        if (p == i) return true;
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
        if (i >= d) i = d - 1;
        while (i > 0 && weight_at(i) <= 0)  // target rounded onto a zero-weight tail
          --i;
        if (!taken(i)) pick = i;
      }
      if (pick < 0) {
        // Exact draw from the remaining weight: walk the row skipping taken neighbors.
        double target = uniform01(next_draw()) * (total - taken_weight);
        for (int64_t i = 0; i < d; ++i) {
          if (taken(i)) continue;
          const double wi = weight_at(i);
          if (wi <= 0) continue;
          pick = i;
          if (target < wi) break;
          target -= wi;
        }
      }
      // Only neighbors whose weights vanish in the double sums are left (they sit next to one
      // 2^53 times heavier): the first of them with a positive weight, in row order. More than
      // `fan` weights are positive, so one is left.
      for (int64_t i = 0; i < d && pick < 0; ++i)
        if (!taken(i) && w[at(i)] > 0) pick = i;
      s.pos.push_back(pick);
      if (!small) s.taken[pick] = 1;
      taken_weight += weight_at(pick);
    }
    std::sort(s.pos.begin(), s.pos.end());
    for (int64_t i : s.pos)
      emit(out, v, at(i));
  }

  // Uniform sampling without exclusions, software-pipelined over windows of kWindow seeds:
  // (1) read degrees (indptr was prefetched one window earlier), (2) draw every position of the
  // window, (3) hand the *previous* window to `sink` (CooSink writes its edges; BlockSink writes
  // them into a block and compacts), which prefetches this window's neighbors and edge IDs as it
  // writes (Ahead), so they have the next window's drawing to land. Many independent cache
  // misses are in flight at once instead of one row at a time. Same edges as row(), in the same
  // order.
  template <class Sink>
  void run_uniform(const int64_t* seeds, int64_t n, Sink& sink, RowScratch& s) const {
    constexpr int64_t kWindow = UniformWindow::kSize;
    constexpr int64_t kLag = 1;  // windows between drawing and writing (2 or 3: no faster)
    const int64_t fan = o.fanout;
    UniformWindow win[kLag + 1];
    int64_t begin[kWindow];
    int64_t floyd_buf[64];
    const PhiloxRound rounds(o.key);
    for (int64_t i = 0; i < std::min(n, kWindow); ++i)
      prefetch_l1(&indptr[seeds[i]]);
    int64_t k = 0;  // windows done
    for (int64_t w0 = 0; w0 < n; w0 += kWindow, ++k) {
      UniformWindow& cur = win[k % (kLag + 1)];
      const int64_t w = std::min(kWindow, n - w0);
      cur.first = w0;
      cur.size = w;
      int64_t* count = cur.count;
      for (int64_t i = w0 + kWindow; i < std::min(n, w0 + 2 * kWindow); ++i)
        prefetch_l1(&indptr[seeds[i]]);
      int64_t total = 0;
      for (int64_t i = 0; i < w; ++i) {
        const int64_t v = seeds[w0 + i];
        begin[i] = indptr[v];
        const int64_t d = indptr[v + 1] - begin[i];
        count[i] = d == 0 ? 0 : (o.replace ? fan : std::min(d, fan));
        total += count[i];
      }
      cur.total = total;
      // (2) positions (the window's total bounds the buffer; fanout itself may be huge).
      // First every Philox draw of the window in one SIMD batch, then the positions.
      if (cur.pos.size() < static_cast<size_t>(total)) cur.pos.resize(static_cast<size_t>(total));
      if (s.rnd.size() < static_cast<size_t>(total)) {
        s.rnd.resize(static_cast<size_t>(total));
        s.dr.resize(static_cast<size_t>(total));
        s.c1.resize(static_cast<size_t>(total));
        s.c2.resize(static_cast<size_t>(total));
      }
      int64_t* pos = cur.pos.data();
      int64_t nr = 0;
      for (int64_t i = 0; i < w; ++i) {
        const int64_t v = seeds[w0 + i];
        if (count[i] == 0 || (!o.replace && indptr[v + 1] - begin[i] <= fan)) continue;
        uint32_t c1, c2;
        philox_ctr_words(o.key, static_cast<uint64_t>(v), c1, c2);
        for (int64_t t = 0; t < fan; ++t, ++nr) {
          s.dr[nr] = static_cast<uint32_t>(t);
          s.c1[nr] = c1;
          s.c2[nr] = c2;
        }
      }
      philox_many(rounds, s.dr.data(), s.c1.data(), s.c2.data(), nr, s.rnd.data());
      const uint64_t* rnd = s.rnd.data();
      int64_t q = 0;
      for (int64_t i = 0; i < w; ++i) {
        const int64_t v = seeds[w0 + i], b = begin[i], d = indptr[v + 1] - b;
        if (count[i] == 0) continue;
        if (!o.replace && d <= fan) {
          for (int64_t j = 0; j < d; ++j)
            pos[q++] = b + j;
          continue;
        }
        if (o.replace) {
          for (int64_t t = 0; t < fan; ++t)
            pos[q++] = b + static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(d)));
        } else {
          int64_t* r = fan <= 64 ? floyd_buf : nullptr;
          if (!r) {
            s.allowed.resize(static_cast<size_t>(fan));
            r = s.allowed.data();
          }
          floyd_from(rnd, d, fan, s, r);
          for (int64_t t = 0; t < fan; ++t)
            pos[q++] = b + r[t];
        }
        rnd += fan;
      }
      // (3) the previous window, prefetching this one's adjacency as it goes (the first window
      // has none before it: its prefetches go out at once).
      const Ahead ahead{pos, total};
      if (k >= kLag)
        sink.write(*this, win[(k - kLag) % (kLag + 1)], seeds, ahead);
      else
        ahead.rest(*this, 0);
    }
    for (int64_t j = std::max<int64_t>(0, k - kLag); j < k; ++j)
      sink.write(*this, win[j % (kLag + 1)], seeds, Ahead{});
    sink.finish();
  }

  void run(const int64_t* seeds, int64_t n, SampledEdges& out) const {
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
      if (i + kAhead < n) prefetch_l1(&indptr[seeds[i + kAhead]]);
      if (i + kAhead / 2 < n) {
        const int64_t u = seeds[i + kAhead / 2];
        prefetch_edge(indptr[u]);
      }
      row(seeds[i], out, s);
    }
  }
};

// Threads (chunks of seeds) a CPU sampling call uses.
int64_t sample_chunks(int64_t n, int num_threads_arg) {
  const int threads = num_threads_arg == 0 ? num_threads() : num_threads_arg;
  constexpr int64_t kGrain = 256;
  return std::max<int64_t>(1, std::min<int64_t>(threads, n / kGrain));
}

}  // namespace

bool sample_block_cpu(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts,
                      IdMap& map, Block& out, double& compact_share) {
  const int64_t n = seeds.size(), nn = graph.num_nodes, fan = opts.fanout;
  if (opts.device != Device::kCpu || !opts.weights.empty() || fan < 0 ||
      (opts.exclude && !opts.exclude->empty()) || map.dense_size() < nn ||
      sample_chunks(n, opts.num_threads) != 1)
    return false;
  validate_sample_args(graph, seeds, opts);
  // Edges: at most fanout per seed (and, without replacement, at most the graph's); locals: the
  // seeds and at most one new source per edge, and never more than the graph's nodes.
  const int64_t max_edges = fan == 0 || n == 0 ? 0
                            : fan > (std::numeric_limits<int64_t>::max() / 2) / n
                                ? std::numeric_limits<int64_t>::max() / 2
                                : n * fan;
  const int64_t edge_cap = opts.replace ? max_edges : std::min(max_edges, graph.num_edges());
  const int64_t cap = std::min(nn, n + edge_cap);
  uint32_t base = 0;
  if (!map.dense_begin(cap, base)) return false;
  uint32_t* tag = map.dense_tags();
  out.num_dst = n;
  // A first guess for the arrays (they grow in steps beyond it): a fanout far above the typical
  // degree must not reserve n * fanout.
  const int64_t guess = std::min(edge_cap, n * std::min<int64_t>(fan, 32) + 4096);
  out.src_nodes.clear();
  out.src_nodes.reserve(static_cast<size_t>(std::min(cap, n + guess)));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = seeds[i];
    TESSERA_EXPECTS(tag[v] <= base, ValueError,
                    "sample_blocks: seed {} is listed twice (seeds become destination nodes)", v);
    tag[v] = base + 1 + static_cast<uint32_t>(i);
    out.src_nodes.push_back(v);
  }
  for (auto* a : {&out.src, &out.dst, &out.eids}) {
    a->clear();
    a->reserve(static_cast<size_t>(guess));
  }
  SampleOptions o = opts;
  o.key.stream = RngStream::kNeighbor;
  const Sampler sampler(graph, o);
  BlockSink sink{out, tag, static_cast<uint64_t>(nn), base, n};
  RowScratch s;
  const uint64_t t0 = __rdtsc();
  sampler.run_uniform(seeds.data(), n, sink, s);
  const uint64_t ticks = __rdtsc() - t0;
  compact_share =
      ticks > 0 ? static_cast<double>(sink.compact_ticks) / static_cast<double>(ticks) : 0;
  map.dense_end(base, out.num_src());
  return true;
}

SampledEdges sample_neighbors_cpu(const Graph& graph, Span<const int64_t> seeds,
                                  const SampleOptions& opts) {
  SampledEdges out;
  sample_neighbors_cpu_into(graph, seeds, opts, out);
  return out;
}

void sample_neighbors_cpu_into(const Graph& graph, Span<const int64_t> seeds,
                               const SampleOptions& opts, SampledEdges& out) {
  out.clear();
  SampleOptions o = opts;
  o.key.stream = RngStream::kNeighbor;
  Sampler sampler(graph, o);
  const int64_t n = seeds.size();
  const int64_t chunks = sample_chunks(n, o.num_threads);
  if (chunks == 1) {
    sampler.run(seeds.data(), n, out);
    return;
  }
  // Chunks are sampled independently and concatenated in seed order, so the output does not
  // depend on the chunking.
  std::vector<SampledEdges> parts(static_cast<size_t>(chunks));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(chunks));
  auto work = [&](int64_t c) {
    try {
      const int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      sampler.run(seeds.data() + lo, hi - lo, parts[c]);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  try {
    for (int64_t c = 1; c < chunks; ++c)
      pool.emplace_back(work, c);
  } catch (const std::system_error&) {  // out of threads: the chunks not started run here
    for (int64_t c = static_cast<int64_t>(pool.size()) + 1; c < chunks; ++c)
      work(c);
  }
  work(0);
  for (auto& t : pool)
    t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<int64_t> offset(static_cast<size_t>(chunks) + 1, 0);
  for (int64_t c = 0; c < chunks; ++c)
    offset[c + 1] = offset[c] + parts[c].size();
  out.src.resize(static_cast<size_t>(offset[chunks]));
  out.dst.resize(out.src.size());
  out.eid.resize(out.src.size());
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t c = lo; c < hi; ++c) {
      std::copy(parts[c].src.begin(), parts[c].src.end(), out.src.begin() + offset[c]);
      std::copy(parts[c].dst.begin(), parts[c].dst.end(), out.dst.begin() + offset[c]);
      std::copy(parts[c].eid.begin(), parts[c].eid.end(), out.eid.begin() + offset[c]);
    }
  });
}

}  // namespace detail

SampledEdges sample_neighbors(const Graph& graph, Span<const int64_t> seeds,
                              const SampleOptions& opts) {
  detail::validate_sample_args(graph, seeds, opts);
  if (opts.device == Device::kCuda) {
    cuda::require_cuda("sample_neighbors");
    SampledEdges out;
    detail::sample_neighbors_cuda(graph, seeds, opts, out);
    return out;
  }
  return detail::sample_neighbors_cpu(graph, seeds, opts);
}

void sample_neighbors_into(const Graph& graph, Span<const int64_t> seeds, const SampleOptions& opts,
                           SampledEdges& out) {
  detail::validate_sample_args(graph, seeds, opts);
  if (opts.device == Device::kCuda) {
    cuda::require_cuda("sample_neighbors");
    detail::sample_neighbors_cuda(graph, seeds, opts, out);
    return;
  }
  detail::sample_neighbors_cpu_into(graph, seeds, opts, out);
}

}  // namespace tessera::ops
