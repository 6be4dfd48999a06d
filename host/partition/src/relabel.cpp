// SPDX-License-Identifier: Apache-2.0
// Relabelling (contiguous ID ranges per partition) and per-partition local graphs with halo.
#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera {

namespace {

// r.csc from r.new_nid / r.orig_nid: row nv is the input's row orig_nid[nv] with its sources
// renamed, entries in the input's order, (original source, original edge ID); new edge IDs are
// positions, so they follow that order too. Nothing is sorted.
void relabel_rows(const Graph& csc, Relabelled& r) {
  const int64_t n = csc.num_nodes;
  Graph& g = r.csc;
  g.num_nodes = n;
  g.indptr.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t nv = 0; nv < n; ++nv) {
    g.indptr[nv + 1] = g.indptr[nv] + csc.degree(r.orig_nid[nv]);
  }
  const int64_t m = g.indptr[n];
  g.indices.resize(static_cast<size_t>(m));
  g.eids.resize(static_cast<size_t>(m));
  parallel_for(0, n, 1024, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t nv = lo; nv < hi; ++nv) {
      const int64_t ov = r.orig_nid[nv];
      int64_t w = g.indptr[nv];
      for (int64_t k = csc.indptr[ov]; k < csc.indptr[ov + 1]; ++k, ++w) {
        g.indices[w] = r.new_nid[csc.indices[k]];
        g.eids[w] = csc.eid(k);
      }
    }
  });
}

}  // namespace

Relabelled relabel(const Graph& csc, const Assignment& a, NodeOrder order) {
  const int64_t n = csc.num_nodes, P = a.num_parts;
  TESSERA_ASSERT(static_cast<int64_t>(a.part.size()) == n, "assignment has {} nodes, graph {}",
                 a.part.size(), n);
  Relabelled r;
  r.num_parts = P;
  r.node_offsets.assign(static_cast<size_t>(P) + 1, 0);
  for (int32_t p : a.part) {
    TESSERA_ASSERT(p >= 0 && p < P, "partition {} outside [0, {})", p, P);
    ++r.node_offsets[p + 1];
  }
  for (int64_t p = 0; p < P; ++p) {
    r.node_offsets[p + 1] += r.node_offsets[p];
  }
  // Counting sort by partition; visiting old IDs in order keeps the relative order (stable).
  r.new_nid.resize(static_cast<size_t>(n));
  r.orig_nid.resize(static_cast<size_t>(n));
  {
    std::vector<int64_t> pos(r.node_offsets.begin(), r.node_offsets.end() - 1);
    for (int64_t v = 0; v < n; ++v) {
      const int64_t nv = pos[a.part[v]]++;
      r.new_nid[v] = nv;
      r.orig_nid[nv] = v;
    }
  }
  if (order == NodeOrder::kDegree) {
    // Within each partition, highest in-degree first; the stable sort keeps ties in ID order.
    parallel_for(0, P, 1, [&](int64_t p0, int64_t p1, int64_t) {
      for (int64_t p = p0; p < p1; ++p) {
        sort_by_degree(csc, r.orig_nid.data() + r.node_offsets[p],
                       r.orig_nid.data() + r.node_offsets[p + 1]);
      }
    });
    for (int64_t nv = 0; nv < n; ++nv) {
      r.new_nid[r.orig_nid[nv]] = nv;
    }
  }
  relabel_rows(csc, r);
  r.edge_offsets.resize(static_cast<size_t>(P) + 1);
  for (int64_t p = 0; p <= P; ++p) {
    r.edge_offsets[p] = r.csc.indptr[r.node_offsets[p]];
  }
  return r;
}

LocalGraph build_local(const Relabelled& r, int64_t p, int halo_hops) {
  TESSERA_EXPECTS(p >= 0 && p < r.num_parts, IndexError, "partition {} outside [0, {})", p,
                  r.num_parts);
  TESSERA_EXPECTS(halo_hops >= 0, ValueError, "halo_hops must be >= 0, got {}", halo_hops);
  const Graph& g = r.csc;
  const int64_t s = r.node_offsets[p], e = r.node_offsets[p + 1];
  LocalGraph L;
  L.part_id = p;
  L.num_inner_nodes = e - s;
  L.num_inner_edges = r.edge_offsets[p + 1] - r.edge_offsets[p];

  // Halo: breadth-first over in-edges from the owned nodes, up to halo_hops hops.
  std::vector<int64_t> halo;
  std::vector<int32_t> dist;  // hop distance of halo nodes, parallel to `halo` after sorting
  if (halo_hops > 0) {
    std::vector<int32_t> d(static_cast<size_t>(g.num_nodes), -1);
    for (int64_t v = s; v < e; ++v) {
      d[v] = 0;
    }
    std::vector<int64_t> frontier, next;
    for (int hop = 1; hop <= halo_hops; ++hop) {
      next.clear();
      auto expand = [&](int64_t v) {
        for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k) {
          const int64_t u = g.indices[k];
          if (d[u] < 0) {
            d[u] = hop;
            next.push_back(u);
          }
        }
      };
      if (hop == 1) {
        for (int64_t v = s; v < e; ++v) {
          expand(v);
        }
      } else {
        for (int64_t v : frontier) {
          expand(v);
        }
      }
      halo.insert(halo.end(), next.begin(), next.end());
      frontier.swap(next);
      if (frontier.empty()) {
        break;
      }
    }
    std::sort(halo.begin(), halo.end());
    dist.resize(halo.size());
    for (size_t i = 0; i < halo.size(); ++i) {
      dist[i] = d[halo[i]];
    }
  }
  const int64_t nh = static_cast<int64_t>(halo.size());
  const int64_t nl = L.num_inner_nodes + nh;
  L.nid.resize(static_cast<size_t>(nl));
  L.inner_node.assign(static_cast<size_t>(nl), 0);
  for (int64_t i = 0; i < L.num_inner_nodes; ++i) {
    L.nid[i] = s + i;
    L.inner_node[i] = 1;
  }
  for (int64_t i = 0; i < nh; ++i) {
    L.nid[L.num_inner_nodes + i] = halo[i];
  }
  L.orig_nid.resize(static_cast<size_t>(nl));
  for (int64_t i = 0; i < nl; ++i) {
    L.orig_nid[i] = r.orig_nid[L.nid[i]];
  }

  const bool local_ids = halo_hops > 0;
  // Local ID of each halo node (inner nodes are gid - s): a dense table instead of a binary
  // search per edge.
  std::vector<int64_t> halo_local;
  if (local_ids) {
    halo_local.assign(static_cast<size_t>(g.num_nodes), -1);
    for (int64_t i = 0; i < nh; ++i) {
      halo_local[halo[i]] = L.num_inner_nodes + i;
    }
  }
  // Rows: every in-edge of inner nodes; in-edges of halo nodes within halo_hops - 1 hops.
  L.indptr.assign(static_cast<size_t>(nl) + 1, 0);
  for (int64_t i = 0; i < nl; ++i) {
    int64_t deg = 0;
    if (i < L.num_inner_nodes) {
      deg = g.degree(s + i);
    } else if (dist[i - L.num_inner_nodes] <= halo_hops - 1) {
      deg = g.degree(halo[i - L.num_inner_nodes]);
    }
    L.indptr[i + 1] = L.indptr[i] + deg;
  }
  const int64_t ml = L.indptr[nl];
  L.indices.resize(static_cast<size_t>(ml));
  L.eid.resize(static_cast<size_t>(ml));
  L.orig_eid.resize(static_cast<size_t>(ml));
  L.inner_edge.resize(static_cast<size_t>(ml));
  parallel_for(0, nl, 1024, [&](int64_t lo, int64_t hi, int64_t) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t b = L.indptr[i], deg = L.indptr[i + 1] - b;
      if (deg == 0) {
        continue;
      }
      const int64_t v = L.nid[i];
      const int64_t gb = g.indptr[v], ge = g.indptr[v + 1];
      const uint8_t inner = i < L.num_inner_nodes;
      int64_t j = b;
      auto put = [&](int64_t k, int64_t lid) {
        L.indices[j] = lid;
        L.eid[j] = k;
        L.orig_eid[j] = g.eids[k];
        L.inner_edge[j] = inner;
        ++j;
      };
      // In the global row's order, (original source, original edge ID): the sampling order.
      for (int64_t k = gb; k < ge; ++k) {
        const int64_t u = g.indices[k];
        if (!local_ids) {
          put(k, u);
        } else if (u >= s && u < e) {
          put(k, u - s);
        } else {
          const int64_t lid = halo_local[u];
          TESSERA_ASSERT(lid >= 0, "source {} of partition {} is not local", u, p);
          put(k, lid);
        }
      }
      TESSERA_ASSERT(j == b + deg, "row {}: {} entries, expected {}", i, j - b, deg);
    }
  });
  return L;
}

}  // namespace tessera
