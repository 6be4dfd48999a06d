#include "tessera/graph/graph.hpp"

#include <algorithm>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"

namespace tessera {

int64_t Graph::nbytes() const {
  return static_cast<int64_t>((indptr.size() + indices.size() + eids.size()) * sizeof(int64_t));
}

namespace {

// Sorts each row of (indices, eids) by (neighbor, eid); optionally removes duplicate neighbors
// keeping the smallest eid. Compacts in place and rewrites indptr.
void sort_rows(Graph& g, bool dedup) {
  const int64_t n = g.num_nodes;
  std::vector<int64_t> keep(dedup ? n : 0);
  parallel_for(0, n, 1024, [&](int64_t lo, int64_t hi, int64_t) {
    std::vector<std::pair<int64_t, int64_t>> buf;
    for (int64_t v = lo; v < hi; ++v) {
      const int64_t b = g.indptr[v], e = g.indptr[v + 1];
      if (e - b > 1) {
        bool sorted = true;
        for (int64_t k = b + 1; k < e && sorted; ++k)
          sorted = g.indices[k - 1] < g.indices[k] ||
                   (g.indices[k - 1] == g.indices[k] && g.eids[k - 1] < g.eids[k]);
        if (!sorted) {
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
      if (dedup) {
        int64_t c = 0;
        for (int64_t k = b; k < e; ++k) {
          if (k == b || g.indices[k] != g.indices[k - 1]) ++c;
        }
        keep[v] = c;
      }
    }
  });
  if (!dedup) return;
  // Sequential in-place compaction: the write position never passes the read position.
  int64_t w = 0;
  for (int64_t v = 0; v < n; ++v) {
    const int64_t b = g.indptr[v], e = g.indptr[v + 1];
    g.indptr[v] = w;
    for (int64_t k = b; k < e; ++k) {
      if (k == b || g.indices[k] != g.indices[k - 1]) {
        g.indices[w] = g.indices[k];
        g.eids[w] = g.eids[k];
        ++w;
      }
    }
  }
  g.indptr[n] = w;
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
  // Validate IDs (parallel, first bad edge reported).
  parallel_for(0, e_in, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t s = edges.src[i], d = edges.dst[i];
      if (s < 0 || s >= n || d < 0 || d >= n)
        TESSERA_FAIL(IndexError, "{}: edge {} ({} -> {}) has a node ID outside [0, {})", what, i, s,
                     d, n);
    }
  });

  const int sides = opts.symmetrize ? 2 : 1;
  Graph g;
  g.num_nodes = n;
  g.indptr.assign(static_cast<size_t>(n) + 1, 0);
  // Degree count (sequential over edges: memory-bound, and avoids atomics).
  auto keep_edge = [&](int64_t i) {
    return !(opts.drop_self_loops && edges.src[i] == edges.dst[i]);
  };
  for (int64_t i = 0; i < e_in; ++i) {
    if (!keep_edge(i)) continue;
    ++g.indptr[edges.dst[i] + 1];
    if (sides == 2) ++g.indptr[edges.src[i] + 1];
  }
  for (int64_t v = 0; v < n; ++v)
    g.indptr[v + 1] += g.indptr[v];
  const int64_t m = g.indptr[n];
  g.indices.resize(static_cast<size_t>(m));
  g.eids.resize(static_cast<size_t>(m));
  std::vector<int64_t> pos(g.indptr.begin(), g.indptr.end() - 1);
  for (int64_t i = 0; i < e_in; ++i) {
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
  std::vector<int64_t>().swap(pos);
  std::vector<int64_t>().swap(edges.src);
  std::vector<int64_t>().swap(edges.dst);
  sort_rows(g, opts.deduplicate);
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
  sort_rows(t, false);
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
