// SPDX-License-Identifier: Apache-2.0
// What the GPU sampling kernels read of a graph: plain pointers (device memory, or pinned host
// memory read through UVA) and the layout of the adjacency. ops::DeviceGraph fills one when it
// places a graph; the one-hop entry points over raw arrays fill one with the split layout.
// Usable on the host and the device (TESSERA_HD); owns nothing.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"

namespace tessera::cuda {

/// How a row's (neighbor, edge ID) pairs are stored, in storage order.
enum class Adjacency : uint8_t {
  kSplit,   ///< `indices` and `eids` (null: edge ID = storage position): two reads per edge
  kPacked,  ///< `packed[k] = eid << 32 | neighbor` (every ID < 2^32): one 8-byte read per edge
  kPairs,   ///< `pairs[2k] = neighbor, pairs[2k + 1] = eid` (16-byte aligned): one 16-byte read
};

/// A placed graph as the kernels see it (CSC for in-edge sampling, CSR for out).
struct GraphView {
  int64_t num_nodes = 0;
  const int64_t* indptr = nullptr;  ///< num_nodes + 1 entries
  Adjacency layout = Adjacency::kSplit;
  const int64_t* indices = nullptr;  ///< kSplit
  const int64_t* eids = nullptr;     ///< kSplit; null: the storage position is the edge ID
  const uint64_t* packed = nullptr;  ///< kPacked
  const int64_t* pairs = nullptr;    ///< kPairs
  /// Weighted sampling: storage-order float weights and their per-row double prefix sums
  /// (ops::weight_prefix_sums); null: uniform.
  const float* weights = nullptr;
  const double* prefix = nullptr;
  /// Per row, {number of positive weights, position of the last positive weight in the row}
  /// (2 int64 per row); null: the kernels count them from the weights.
  const int64_t* row_info = nullptr;
  /// The node whose Philox draws each row takes (num_nodes entries, in the memory of indptr), or
  /// null: row r is node r. Rows stored under numbers of their own (a distributed owner's rows,
  /// numbered locally and keyed by original node ID) thus sample exactly as the whole graph
  /// samples their nodes (ops::GraphArrays::row_keys is the CPU twin's). Exclusion sets
  /// (rows::ExcludeView) name rows by row number.
  const int64_t* row_keys = nullptr;
  /// The adjacency lives in pinned host memory (read through UVA): small rows are then read
  /// whole, in 16-byte pieces, instead of one scattered load per sampled edge.
  bool uva = false;

  /// Bytes of one edge in the adjacency layout (kSplit: the neighbor's 8).
  TESSERA_HD int edge_bytes() const {
    return layout == Adjacency::kPacked ? 8 : layout == Adjacency::kPairs ? 16 : 8;
  }
};

/// The Philox node of row `row` (GraphView::row_keys).
TESSERA_HD inline uint64_t node_key(const GraphView& g, int64_t row) {
  return static_cast<uint64_t>(g.row_keys ? g.row_keys[row] : row);
}

/// Neighbor and edge ID of storage position k.
TESSERA_HD inline void edge_at(const GraphView& g, int64_t k, int64_t* nbr, int64_t* eid) {
  switch (g.layout) {
    case Adjacency::kPacked: {
      const uint64_t x = g.packed[k];
      *nbr = static_cast<int64_t>(x & 0xFFFFFFFFull);
      *eid = static_cast<int64_t>(x >> 32);
      return;
    }
    case Adjacency::kPairs:
      *nbr = g.pairs[2 * k];
      *eid = g.pairs[2 * k + 1];
      return;
    default:
      *nbr = g.indices[k];
      *eid = g.eids ? g.eids[k] : k;
      return;
  }
}

/// Edge ID of storage position k.
TESSERA_HD inline int64_t eid_at(const GraphView& g, int64_t k) {
  switch (g.layout) {
    case Adjacency::kPacked:
      return static_cast<int64_t>(g.packed[k] >> 32);
    case Adjacency::kPairs:
      return g.pairs[2 * k + 1];
    default:
      return g.eids ? g.eids[k] : k;
  }
}

/// The row of a node ID: rows[v - base] when `rows` is set, else v itself. The row's Philox node
/// is node_key(g, row).
struct RowMap {
  const int64_t* rows = nullptr;  ///< device memory
  int64_t base = 0;
  int64_t count = 0;  ///< entries of `rows`; IDs outside [base, base + count) are errors
};

}  // namespace tessera::cuda
