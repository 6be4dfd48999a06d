// SPDX-License-Identifier: Apache-2.0
// The CPU twin's row algorithms (docs/sampling.md, "sample_neighbors"): Floyd's algorithm in
// its SIMD forms, weighted successive sampling over prefix sums, and the windowed uniform
// pipeline that feeds the output sinks of sample_sinks.hpp. The CUDA twin's per-row logic is
// cuda/include/tessera/cuda/sample_rows.hpp; both draw the same Philox blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "philox_batch.hpp"
#include "sample_sinks.hpp"
#include "tessera/core/prefetch.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::ops::detail {

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

// Uniform without replacement, k < d: Robert Floyd's algorithm; draw t picks from [0, d-k+t].
// `rnd[t]` is the 64-bit value of draw t. Writes k distinct positions, sorted. The fastest form
// the CPU has (AVX-512 with or without conflict detection, AVX2, scalar), all with the same
// output.
void floyd_from(const uint64_t* rnd, int64_t d, int64_t k, RowScratch& s, int64_t* out);

// Samples rows of a SamplingGraph on the CPU under one call's options: row() one row at a time
// (every mode), run_uniform() whole windows of seeds (uniform without exclusions), run() a
// call's seeds into a COO. Reads the graph's interleaved adjacency and prefix sums when it has
// them; the samples are the same either way.
struct RowSampler {
  const SampleOptions& o;
  const int64_t* indptr;
  const int64_t* indices;
  const int64_t* eids;     // null: identity
  const int64_t* keys;     // null: row v draws as node v (GraphArrays::row_keys)
  const float* w;          // null: uniform
  const int64_t* pairs;    // null, or (neighbor, edge ID) interleaved in storage order
  const uint64_t* packed;  // null, or edge ID << 32 | neighbor in storage order (before pairs)
  const double* prefix;    // null, or per-row prefix sums of w (weight_prefix_sums)

  RowSampler(const SamplingGraph& graph, const SampleOptions& opts)
      : o(opts),
        indptr(graph.arrays().indptr),
        indices(graph.arrays().indices),
        eids(graph.arrays().eids),
        keys(graph.arrays().row_keys),
        w(graph.weights().empty() ? nullptr : graph.weights().data()),
        pairs(graph.adjacency_pairs().empty() ? nullptr : graph.adjacency_pairs().data()),
        packed(graph.adjacency_packed().empty() ? nullptr : graph.adjacency_packed().data()),
        prefix(graph.weight_prefix().empty() || graph.weights().empty()
                   ? nullptr
                   : graph.weight_prefix().data()) {}

  // The Philox node of row v.
  uint64_t node_of(int64_t v) const { return static_cast<uint64_t>(keys ? keys[v] : v); }
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
      if (eids) {
        prefetch_l2(&eids[k]);
      }
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

  // Samples row v (any mode, exclusions included) into `out` (sample_rows.cpp).
  void row(int64_t v, SampledEdges& out, RowScratch& s) const;
  // Samples seeds[0, n) into `out` (appended): run_uniform with a CooSink when it applies, else
  // row by row (sample_rows.cpp).
  void run(const int64_t* seeds, int64_t n, SampledEdges& out) const;

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
    for (int64_t i = 0; i < std::min(n, kWindow); ++i) {
      prefetch_l1(&indptr[seeds[i]]);
    }
    int64_t k = 0;  // windows done
    for (int64_t w0 = 0; w0 < n; w0 += kWindow, ++k) {
      UniformWindow& cur = win[k % (kLag + 1)];
      const int64_t w = std::min(kWindow, n - w0);
      cur.first = w0;
      cur.size = w;
      int64_t* count = cur.count;
      for (int64_t i = w0 + kWindow; i < std::min(n, w0 + 2 * kWindow); ++i) {
        prefetch_l1(&indptr[seeds[i]]);
      }
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
      if (cur.pos.size() < static_cast<size_t>(total)) {
        cur.pos.resize(static_cast<size_t>(total));
      }
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
        if (count[i] == 0 || (!o.replace && indptr[v + 1] - begin[i] <= fan)) {
          continue;
        }
        uint32_t c1, c2;
        philox_ctr_words(o.key, node_of(v), c1, c2);
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
        if (count[i] == 0) {
          continue;
        }
        if (!o.replace && d <= fan) {
          for (int64_t j = 0; j < d; ++j) {
            pos[q++] = b + j;
          }
          continue;
        }
        if (o.replace) {
          for (int64_t t = 0; t < fan; ++t) {
            pos[q++] = b + static_cast<int64_t>(bounded_u64(rnd[t], static_cast<uint64_t>(d)));
          }
        } else {
          int64_t* r = fan <= 64 ? floyd_buf : nullptr;
          if (!r) {
            s.allowed.resize(static_cast<size_t>(fan));
            r = s.allowed.data();
          }
          floyd_from(rnd, d, fan, s, r);
          for (int64_t t = 0; t < fan; ++t) {
            pos[q++] = b + r[t];
          }
        }
        rnd += fan;
      }
      // (3) the previous window, prefetching this one's adjacency as it goes (the first window
      // has none before it: its prefetches go out at once).
      const Ahead ahead{pos, total};
      if (k >= kLag) {
        sink.write(*this, win[(k - kLag) % (kLag + 1)], seeds, ahead);
      } else {
        ahead.rest(*this, 0);
      }
    }
    for (int64_t j = std::max<int64_t>(0, k - kLag); j < k; ++j) {
      sink.write(*this, win[j % (kLag + 1)], seeds, Ahead{});
    }
    sink.finish();
  }
};

// Threads (chunks of seeds) a CPU sampling call of n seeds uses: at most `num_threads` (0: all),
// and at least 256 seeds each.
int64_t sample_chunks(int64_t n, int num_threads);

}  // namespace tessera::ops::detail
