// SPDX-License-Identifier: Apache-2.0
// The bodies of the GPU sampler's kernels, one work item each (a frontier node sampled by a group
// of lanes, or one edge), as TESSERA_HD functions. The kernels (cuda/src/sample_neighbors.cu,
// cuda/src/sampler.cu) loop over items and call these; tests/cuda/test_sample_rows.cpp runs the
// same functions item by item on the CPU (group::HostExec, the node table without atomics) and
// checks the blocks they build against NeighborSampler bit for bit.
//
// One hop of multi-layer sampling with compaction, per batch (the frontier is the batch's list of
// unique nodes so far, whose first `w` entries are the hop's destination nodes; local ID = index
// in that list, so one node table serves every hop of a batch):
//   sample  each frontier node i writes its cnt_i edges (neighbor, edge ID) into its padded slots
//           slot0_i + q (slot0_i = i * fanout, or exact offsets for fanout -1 and exclusion) and
//           raises its neighbors' table entries to pending(slot): the smallest slot wins;
//   mark    an edge whose neighbor's entry is still pending(its own slot) is that neighbor's first
//           appearance: flagged (kNewBit); per node (cnt_i, new_i);
//   scan    exclusive sums of (cnt, new) give each node its dense edge offset and new-node base;
//   number  dense edges (dst = i, eid; src = the global neighbor for now), new neighbors get local
//           IDs w + base + rank in order and are appended to the list, their entries final;
//   relabel every dense edge's source becomes its neighbor's local ID.
// This is ops::to_block's order: destinations first, then new sources by first appearance.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/graph_view.hpp"
#include "tessera/cuda/sample_group.hpp"
#include "tessera/cuda/sample_rows.hpp"

namespace tessera::cuda::items {

// ---- The node table ---------------------------------------------------------------------------

TESSERA_HD inline uint64_t atomic_max_u64(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  return atomicMax(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  const uint64_t old = *p;
  if (v > old) *p = v;
  return old;
#endif
}

TESSERA_HD inline uint64_t atomic_cas_u64(uint64_t* p, uint64_t expect, uint64_t v) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(reinterpret_cast<unsigned long long*>(p),
                   static_cast<unsigned long long>(expect), static_cast<unsigned long long>(v));
#else
  const uint64_t old = *p;
  if (old == expect) *p = v;
  return old;
#endif
}

/// A load that bypasses L1 (entries other blocks raise in the same kernel).
TESSERA_HD inline uint64_t load_cg(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(reinterpret_cast<const unsigned long long*>(p));
#else
  return *p;
#endif
}

/// One batch's node table (group:: codes): `keys` null: one entry per node (vals[node]); else an
/// open-addressing table of mask + 1 slots keyed by group::hash_key(gen, node).
struct TableView {
  uint64_t* vals = nullptr;
  uint64_t* keys = nullptr;
  uint64_t mask = 0;
  uint32_t gen = 0;

  /// The entry of `node`, claiming a slot for it in a hashed table.
  TESSERA_HD uint64_t* entry(int64_t node) const {
    if (!keys) return vals + node;
    const uint64_t want = group::hash_key(gen, node);
    uint64_t s = group::hash_slot(node, mask);
    uint64_t cur = load_cg(keys + s);
    while (true) {
      if (cur == want) return vals + s;
      if (!group::key_current(cur, gen)) {  // empty for this generation: claim it
        const uint64_t prev = atomic_cas_u64(keys + s, cur, want);
        if (prev == cur) return vals + s;
        cur = prev;  // taken meanwhile (perhaps by `node`): look again at the same slot
        continue;
      }
      s = (s + 1) & mask;
      cur = load_cg(keys + s);
    }
  }
  /// The entry of `node` when it has one this generation, else null.
  TESSERA_HD uint64_t* find(int64_t node) const {
    if (!keys) return vals + node;
    const uint64_t want = group::hash_key(gen, node);
    for (uint64_t s = group::hash_slot(node, mask);; s = (s + 1) & mask) {
      const uint64_t cur = load_cg(keys + s);
      if (cur == want) return vals + s;
      if (!group::key_current(cur, gen)) return nullptr;
    }
  }
  /// Raises node's entry to `code` (atomic max).
  TESSERA_HD void raise(int64_t node, uint64_t code) const { atomic_max_u64(entry(node), code); }
  /// Node's entry this generation (0 when absent).
  TESSERA_HD uint64_t value(int64_t node) const {
    const uint64_t* e = find(node);
    return e ? load_cg(e) : 0;
  }
};

// ---- sample -----------------------------------------------------------------------------------

/// Writes a frontier node's edges into its padded slots and raises the neighbors' entries.
struct PadEmit {
  const GraphView* g = nullptr;
  int64_t rb = 0;     ///< the row's first storage position
  int64_t slot0 = 0;  ///< the node's first slot (batch-relative)
  int64_t* nbr = nullptr;
  int64_t* eid = nullptr;
  TableView table;  ///< vals null: no compaction (one-hop sampling)
  /// Device only: the row read whole into shared memory (bytes from `stage_from` on), or null.
  const unsigned char* stage = nullptr;
  int64_t stage_from = 0;

  TESSERA_HD void operator()(int64_t q, int64_t p) const {
    int64_t u = 0, e = 0;
    const int64_t k = rb + p;
    if (stage) {
      const unsigned char* at = stage + (k * g->edge_bytes() - stage_from);
      if (g->layout == Adjacency::kPacked) {
        const uint64_t x = *reinterpret_cast<const uint64_t*>(at);
        u = static_cast<int64_t>(x & 0xFFFFFFFFull);
        e = static_cast<int64_t>(x >> 32);
      } else {
        u = reinterpret_cast<const int64_t*>(at)[0];
        e = reinterpret_cast<const int64_t*>(at)[1];
      }
    } else {
      edge_at(*g, k, &u, &e);
    }
    nbr[slot0 + q] = u;
    eid[slot0 + q] = e;
    if (table.vals) table.raise(u, group::pending_code(table.gen, slot0 + q));
  }
};

/// Edges row `row` yields and, weighted, its positive count and last positive position (from
/// the row table, or counted by the group into s.st when there is none).
struct RowCount {
  int64_t cnt = 0, p = 0, last = 0;
};

TESSERA_HD_TEMPLATE
template <bool kWeighted, typename Exec>
TESSERA_HD RowCount row_count(const Exec& ex, const GraphView& g, int64_t rb, int64_t d,
                              int64_t row, int64_t fanout, bool replace, group::Scratch s) {
  RowCount c;
  if (d == 0 || fanout == 0) return c;
  if (!kWeighted) {
    c.cnt = rows::uniform_count(d, fanout, replace);
    return c;
  }
  if (g.row_info) {
    c.p = g.row_info[2 * row];
    c.last = g.row_info[2 * row + 1];
  } else {
    group::positive_scan(ex, g.weights + rb, d, s);
    c.p = s.st->n;
    c.last = s.st->last;
    // Every lane has read the state before lane 0 resets it in the row's next step (an empty
    // step is the group's __syncwarp on a GPU).
    ex.step([](int) {});
  }
  c.cnt = rows::weighted_count_of(c.p, fanout, replace);
  return c;
}

TESSERA_HD_TEMPLATE
/// One frontier node on a group: its count, then its edges through `emit` (a PadEmit whose slot0
/// the caller set; rb is set here). Row `row` starts at storage position rb and has d edges.
/// Returns the count. Needs fanout <= group::kMaxGroupFanout when it draws without replacement.
template <bool kWeighted, typename Exec>
TESSERA_HD int64_t sample_item(const Exec& ex, const GraphView& g, const RngKey& key, int64_t row,
                               int64_t rb, int64_t d, int64_t fanout, bool replace,
                               group::Scratch s, PadEmit emit) {
  emit.rb = rb;
  const RowCount c = row_count<kWeighted>(ex, g, rb, d, row, fanout, replace, s);
  if (c.cnt == 0) return 0;
  const uint64_t node = node_key(g, row);
  if (kWeighted)
    group::weighted_row(ex, key, node, g.weights + rb, g.prefix + rb, d, c.p, c.last, c.cnt, fanout,
                        replace, s, emit);
  else
    group::uniform_row(ex, key, node, d, c.cnt, fanout, replace, s, emit);
  return c.cnt;
}

/// Edge IDs of a GraphView, for the exclusion functions of rows::.
struct EidOfView {
  const GraphView* g;
  TESSERA_HD int64_t operator()(int64_t k) const { return eid_at(*g, k); }
};

/// One frontier node on one thread (edge exclusion, or fanouts above kMaxGroupFanout): the
/// rows:: functions, with the node's slots of `emit.eid` as their position scratch. `cnt`,
/// `scratch` and the candidate slices as rows::seed_positions_by.
TESSERA_HD inline void sample_item_thread(const GraphView& g, const RngKey& key, int64_t row,
                                          int64_t fanout, bool replace, const rows::ExcludeView& ex,
                                          int64_t cnt, int64_t scratch, int64_t* cand,
                                          float* cand_w, double* cand_cdf, const PadEmit& emit) {
  if (cnt == 0) return;
  int64_t* pos = emit.eid + emit.slot0;
  rows::seed_positions_by(key, g.indptr, EidOfView{&g}, g.weights, g.prefix, ex, row,
                          node_key(g, row), fanout, replace, cnt, scratch, cand, cand_w, cand_cdf,
                          pos);
  PadEmit e = emit;
  e.rb = 0;  // pos holds storage positions
  for (int64_t t = 0; t < cnt; ++t)
    e(t, pos[t]);
}

// ---- mark, number, relabel --------------------------------------------------------------------

TESSERA_HD_TEMPLATE
/// Flags the first appearances among a node's `cnt` edges (pad[0, cnt) from its first slot
/// slot0) and returns their number.
template <typename Exec>
TESSERA_HD int64_t mark_item(const Exec& ex, const TableView& table, int64_t* pad, int64_t cnt,
                             int64_t slot0, group::Scratch s) {
  const int G = ex.G;
  ex.step([&](int l) {
    int64_t c = 0;
    for (int64_t q = l; q < cnt; q += G) {
      const int64_t u = pad[q];
      if (table.value(u) == group::pending_code(table.gen, slot0 + q)) {
        pad[q] = u | group::kNewBit;
        ++c;
      }
    }
    s.b[l] = c;
  });
  ex.step([&](int l) {
    if (l != 0) return;
    int64_t n = 0;
    for (int m = 0; m < G; ++m)
      n += s.b[m];
    s.st->n = n;
  });
  return s.st->n;
}

/// Where the number pass writes one frontier node's edges.
struct NumberOut {
  int64_t* src = nullptr;  ///< dense, from the node's edge offset: the neighbor's global ID
  int64_t* dst = nullptr;  ///< the node's local ID
  int64_t* eid = nullptr;
  int64_t* nodes = nullptr;  ///< the batch's node list
};

TESSERA_HD_TEMPLATE
/// The number pass of frontier node i (local ID i) with `cnt` edges in pad / pad_eid: dense
/// edges from offset e0, and its new neighbors appended to the node list from index
/// first_new, in edge order, their table entries made final.
template <typename Exec>
TESSERA_HD void number_item(const Exec& ex, const TableView& table, const int64_t* pad,
                            const int64_t* pad_eid, int64_t cnt, int64_t i, int64_t e0,
                            int64_t first_new, const NumberOut& out, group::Scratch s) {
  const int G = ex.G;
  ex.step([&](int l) {
    if (l == 0) s.st->n = 0;
  });
  for (int64_t c0 = 0; c0 < cnt; c0 += G) {
    ex.step([&](int l) {
      const int64_t q = c0 + l;
      s.b[l] = q < cnt && (pad[q] & group::kNewBit) ? 1 : 0;
    });
    ex.step([&](int l) {
      const int64_t q = c0 + l;
      if (q >= cnt) return;
      const int64_t u = pad[q] & ~group::kNewBit;
      out.src[e0 + q] = u;
      out.dst[e0 + q] = i;
      out.eid[e0 + q] = pad_eid[q];
      if (!s.b[l]) return;
      int64_t r = s.st->n;
      for (int m = 0; m < l; ++m)
        r += s.b[m];
      const int64_t id = first_new + r;
      out.nodes[id] = u;
      *table.find(u) = group::final_code(table.gen, id);
    });
    ex.step([&](int l) {
      if (l != 0) return;
      for (int m = 0; m < G; ++m)
        s.st->n += s.b[m];
    });
  }
}

/// The relabel pass of one dense edge: its source's global ID becomes its local ID.
TESSERA_HD inline void relabel_item(const TableView& table, int64_t* src) {
  *src = group::local_id(table.value(*src));
}

/// Pair of per-node sums the scan carries: new nodes << 32 | edges (per launch, both < 2^32).
TESSERA_HD inline uint64_t count_pair(int64_t edges, int64_t fresh) {
  return (static_cast<uint64_t>(fresh) << 32) | static_cast<uint64_t>(edges);
}
TESSERA_HD inline int64_t pair_edges(uint64_t p) {
  return static_cast<int64_t>(p & 0xFFFFFFFFull);
}
TESSERA_HD inline int64_t pair_new(uint64_t p) {
  return static_cast<int64_t>(p >> 32);
}

}  // namespace tessera::cuda::items
