// SPDX-License-Identifier: Apache-2.0
#include "tessera/graph/graph.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera {

int64_t Graph::nbytes() const {
  return static_cast<int64_t>((indptr.size() + indices.size() + eids.size()) * sizeof(int64_t));
}

namespace {

// Splits [0, n) into contiguous chunks for the worker threads: chunk c is
// [n * c / chunks, n * (c + 1) / chunks).
int64_t num_chunks(int64_t n, int64_t grain) {
  return std::max<int64_t>(1, std::min<int64_t>(num_threads(), n / std::max<int64_t>(grain, 1)));
}

// Sorts each row of (indices, eids) by (neighbor, eid). With `dedup`, keeps only the entry with
// the smallest eid of each neighbor. With `first_reverse` >= 0 (a symmetrized build: edge IDs
// from first_reverse on are added reverses), drops an added reverse whose neighbor the row
// also holds through an input edge (eid < first_reverse): the input already has that pair.
// Sorting puts such an input edge first in its neighbor's run, so one pass decides. Compacts in
// place and rewrites indptr. Edge IDs must lie in [0, eid_bound) (eid_bound < 0: unknown).
void sort_rows(Graph& g, bool dedup, int64_t eid_bound, int64_t first_reverse = -1) {
  const bool compact = dedup || first_reverse >= 0;
  const int64_t n = g.num_nodes;
  // Entries pack into one 64-bit key when neighbor and edge ID bits fit together.
  int nbits = 1, ebits = 1;
  while ((int64_t{1} << nbits) < n)
    ++nbits;
  while (eid_bound >= 0 && ebits < 63 && (int64_t{1} << ebits) < eid_bound)
    ++ebits;
  const bool pack = eid_bound >= 0 && nbits + ebits <= 64;
  const int64_t chunks = num_chunks(n, 1024);
  std::vector<int64_t> keep(compact ? n : 0);
  std::vector<int64_t> chunk_end(static_cast<size_t>(chunks), 0);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1, int64_t) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      std::vector<std::pair<int64_t, int64_t>> buf;
      std::vector<uint64_t> keys;
      // When compacting, each chunk moves its rows to the start of its own range of entries (the
      // write position never passes the read position); the blocks are moved together below.
      int64_t w = g.indptr[lo];
      for (int64_t v = lo; v < hi; ++v) {
        const int64_t b = g.indptr[v], e = g.indptr[v + 1];
        if (e - b > 1) {
          bool sorted = true;
          for (int64_t k = b + 1; k < e && sorted; ++k)
            sorted = g.indices[k - 1] < g.indices[k] ||
                     (g.indices[k - 1] == g.indices[k] && g.eids[k - 1] < g.eids[k]);
          if (!sorted && pack) {
            // One 64-bit key per entry (neighbor above the edge ID's bits) sorts exactly like
            // the (neighbor, edge ID) pair at half the memory traffic.
            keys.resize(static_cast<size_t>(e - b));
            for (int64_t k = b; k < e; ++k)
              keys[k - b] =
                  (static_cast<uint64_t>(g.indices[k]) << ebits) | static_cast<uint64_t>(g.eids[k]);
            std::sort(keys.begin(), keys.end());
            const uint64_t mask = (uint64_t{1} << ebits) - 1;
            for (int64_t k = b; k < e; ++k) {
              g.indices[k] = static_cast<int64_t>(keys[k - b] >> ebits);
              g.eids[k] = static_cast<int64_t>(keys[k - b] & mask);
            }
          } else if (!sorted) {
            buf.resize(static_cast<size_t>(e - b));
            for (int64_t k = b; k < e; ++k)
              buf[k - b] = {g.indices[k], g.eids[k]};
            std::sort(buf.begin(), buf.end());
            for (int64_t k = b; k < e; ++k) {
              g.indices[k] = buf[k - b].first;
              g.eids[k] = buf[k - b].second;
            }
          }
        }
        if (compact) {
          const int64_t w0 = w;
          bool run_has_input = false;  // the current neighbor's run starts with an input edge
          for (int64_t k = b; k < e; ++k) {
            const bool first = k == b || g.indices[k] != g.indices[k - 1];
            if (first) {
              run_has_input = g.eids[k] < first_reverse;
            }
            const bool kept = dedup ? first : !(run_has_input && g.eids[k] >= first_reverse);
            if (kept) {
              g.indices[w] = g.indices[k];
              g.eids[w] = g.eids[k];
              ++w;
            }
          }
          keep[v] = w - w0;
        }
      }
      chunk_end[c] = w;
    }
  });
  if (!compact) return;
  int64_t w = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = g.indptr[n * c / chunks], len = chunk_end[c] - b;
    if (w != b && len > 0) {
      std::memmove(g.indices.data() + w, g.indices.data() + b, sizeof(int64_t) * len);
      std::memmove(g.eids.data() + w, g.eids.data() + b, sizeof(int64_t) * len);
    }
    w += len;
  }
  g.indptr[0] = 0;
  for (int64_t v = 0; v < n; ++v)
    g.indptr[v + 1] = g.indptr[v] + keep[v];
  g.indices.resize(static_cast<size_t>(w));
  g.indices.shrink_to_fit();
  g.eids.resize(static_cast<size_t>(w));
  g.eids.shrink_to_fit();
}

}  // namespace

Graph build_csc(EdgeList&& edges, const BuildOptions& opts, const std::string& what) {
  const int64_t n = edges.num_nodes;
  const int64_t e_in = edges.num_edges();
  TESSERA_EXPECTS(n >= 0, ValueError, "{}: negative node count {}", what, n);
  TESSERA_EXPECTS(edges.src.size() == edges.dst.size(), ValueError,
                  "{}: src has {} entries but dst has {}", what, edges.src.size(),
                  edges.dst.size());
  const int sides = opts.symmetrize ? 2 : 1;
  auto keep_edge = [&](int64_t i) {
    return !(opts.drop_self_loops && edges.src[i] == edges.dst[i]);
  };
  // Counting sort of the edges into rows, in parallel over contiguous chunks of edges: chunk c
  // counts its edges per row, then fills row v after the entries of chunks 0..c-1, so every
  // row lists its entries in edge order whatever the number of chunks (as a sequential pass
  // would). Per-chunk counts cost chunks x N; keep that below the edge list itself.
  int64_t chunks = num_chunks(e_in, 1 << 16);
  if (n > 0) chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, e_in / n));
  std::vector<std::vector<int64_t>> cnt(static_cast<size_t>(chunks));
  // Validates IDs (first bad edge of the first failing chunk reported) and counts.
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1, int64_t) {
    for (int64_t c = c0; c < c1; ++c) {
      std::vector<int64_t>& h = cnt[c];
      h.assign(static_cast<size_t>(n), 0);
      const int64_t lo = e_in * c / chunks, hi = e_in * (c + 1) / chunks;
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t s = edges.src[i], d = edges.dst[i];
        if (s < 0 || s >= n || d < 0 || d >= n)
          TESSERA_FAIL(IndexError, "{}: edge {} ({} -> {}) has a node ID outside [0, {})", what, i,
                       s, d, n);
        if (!keep_edge(i)) continue;
        ++h[d];
        if (sides == 2) ++h[s];
      }
    }
  });

  Graph g;
  g.num_nodes = n;
  g.indptr.assign(static_cast<size_t>(n) + 1, 0);
  parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      int64_t d = 0;
      for (int64_t c = 0; c < chunks; ++c)
        d += cnt[c][v];
      g.indptr[v + 1] = d;
    }
  });
  for (int64_t v = 0; v < n; ++v)
    g.indptr[v + 1] += g.indptr[v];
  // Counts become each chunk's first write position in every row.
  parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t v = lo; v < hi; ++v) {
      int64_t p = g.indptr[v];
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t k = cnt[c][v];
        cnt[c][v] = p;
        p += k;
      }
    }
  });
  const int64_t m = g.indptr[n];
  g.indices.resize(static_cast<size_t>(m));
  g.eids.resize(static_cast<size_t>(m));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1, int64_t) {
    for (int64_t c = c0; c < c1; ++c) {
      std::vector<int64_t>& pos = cnt[c];
      const int64_t lo = e_in * c / chunks, hi = e_in * (c + 1) / chunks;
      for (int64_t i = lo; i < hi; ++i) {
        if (!keep_edge(i)) continue;
        const int64_t s = edges.src[i], d = edges.dst[i];
        int64_t k = pos[d]++;
        g.indices[k] = s;
        g.eids[k] = i;
        if (sides == 2) {
          k = pos[s]++;
          g.indices[k] = d;
          g.eids[k] = e_in + i;
        }
      }
    }
  });
  std::vector<std::vector<int64_t>>().swap(cnt);
  std::vector<int64_t>().swap(edges.src);
  std::vector<int64_t>().swap(edges.dst);
  sort_rows(g, opts.deduplicate, e_in * sides, opts.symmetrize ? e_in : -1);
  return g;
}

Graph transpose(const Graph& g) {
  const int64_t n = g.num_nodes, m = g.num_edges();
  Graph t;
  t.num_nodes = n;
  t.indptr.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t k = 0; k < m; ++k)
    ++t.indptr[g.indices[k] + 1];
  for (int64_t v = 0; v < n; ++v)
    t.indptr[v + 1] += t.indptr[v];
  t.indices.resize(static_cast<size_t>(m));
  t.eids.resize(static_cast<size_t>(m));
  std::vector<int64_t> pos(t.indptr.begin(), t.indptr.end() - 1);
  // Rows of g are visited in increasing order, so each output row comes out sorted by
  // neighbor; ties (multi-edges) are then ordered by eid in sort_rows.
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
      const int64_t p = pos[g.indices[k]]++;
      t.indices[p] = v;
      t.eids[p] = g.eid(k);
    }
  }
  sort_rows(t, false, -1);
  return t;
}

void sort_by_degree(const Graph& g, int64_t* first, int64_t* last) {
  std::stable_sort(first, last, [&](int64_t u, int64_t v) { return g.degree(u) > g.degree(v); });
}

std::vector<int64_t> degree_order(const Graph& g) {
  const int64_t n = g.num_nodes;
  std::vector<int64_t> by_rank(static_cast<size_t>(n));
  std::iota(by_rank.begin(), by_rank.end(), int64_t{0});
  sort_by_degree(g, by_rank.data(), by_rank.data() + n);
  std::vector<int64_t> new_nid(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    new_nid[by_rank[r]] = r;
  return new_nid;
}

Graph permute_nodes(const Graph& g, const std::vector<int64_t>& new_nid) {
  const int64_t n = g.num_nodes, m = g.num_edges();
  TESSERA_EXPECTS(static_cast<int64_t>(new_nid.size()) == n, ValueError,
                  "permute_nodes: {} new IDs for {} nodes", new_nid.size(), n);
  std::vector<int64_t> orig(static_cast<size_t>(n), -1);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t nv = new_nid[v];
    TESSERA_EXPECTS(nv >= 0 && nv < n && orig[nv] < 0, ValueError,
                    "permute_nodes: new ID {} of node {} is {} (not a permutation of [0, {}))", nv,
                    v, nv < 0 || nv >= n ? "out of range" : "taken twice", n);
    orig[nv] = v;
  }
  Graph t;
  t.num_nodes = n;
  t.indptr.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t nv = 0; nv < n; ++nv)
    t.indptr[nv + 1] = t.indptr[nv] + g.degree(orig[nv]);
  t.indices.resize(static_cast<size_t>(m));
  t.eids.resize(static_cast<size_t>(m));
  parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t nv = lo; nv < hi; ++nv) {
      const int64_t ov = orig[nv];
      int64_t w = t.indptr[nv];
      for (int64_t k = g.indptr[ov]; k < g.indptr[ov + 1]; ++k, ++w) {
        t.indices[w] = new_nid[g.indices[k]];
        t.eids[w] = g.eid(k);
      }
    }
  });
  int64_t eid_bound = 0;
  for (int64_t k = 0; k < m; ++k)
    eid_bound = std::max(eid_bound, t.eids[k] + 1);
  sort_rows(t, false, eid_bound);
  return t;
}

void validate_graph(const Graph& g, const std::string& what) {
  const int64_t n = g.num_nodes;
  TESSERA_EXPECTS(static_cast<int64_t>(g.indptr.size()) == n + 1, ValueError,
                  "{}: indptr has {} entries, expected num_nodes + 1 = {}", what, g.indptr.size(),
                  n + 1);
  TESSERA_EXPECTS(g.indptr[0] == 0, ValueError, "{}: indptr[0] is {}, expected 0", what,
                  g.indptr[0]);
  for (int64_t v = 0; v < n; ++v)
    TESSERA_EXPECTS(g.indptr[v] <= g.indptr[v + 1], ValueError,
                    "{}: indptr decreases at row {} ({} > {})", what, v, g.indptr[v],
                    g.indptr[v + 1]);
  TESSERA_EXPECTS(g.indptr[n] == g.num_edges(), ValueError,
                  "{}: indptr ends at {} but there are {} indices", what, g.indptr[n],
                  g.num_edges());
  TESSERA_EXPECTS(g.eids.empty() || g.eids.size() == g.indices.size(), ValueError,
                  "{}: {} edge IDs for {} edges", what, g.eids.size(), g.indices.size());
  for (int64_t k = 0; k < g.num_edges(); ++k)
    TESSERA_EXPECTS(g.indices[k] >= 0 && g.indices[k] < n, IndexError,
                    "{}: neighbor {} at position {} outside [0, {})", what, g.indices[k], k, n);
}

}  // namespace tessera
