// SPDX-License-Identifier: Apache-2.0
// Graph structures: COO edge lists and compressed (CSC / CSR) adjacency on the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Edges as two parallel arrays in input order. Edge i is (src[i] -> dst[i]); its input edge
/// ID is i.
struct EdgeList {
  int64_t num_nodes = 0;
  std::vector<int64_t> src;
  std::vector<int64_t> dst;
  int64_t num_edges() const { return static_cast<int64_t>(src.size()); }
};

/// Compressed adjacency. As CSC (Tessera's default, DGL's edge_dir='in') row v lists the
/// *sources* of v's in-edges: indices[indptr[v] .. indptr[v+1]). As CSR it lists out-edge
/// destinations. `eids[k]` is the edge ID of stored edge k; empty means the identity 0..E-1.
/// Within a row, neighbors are sorted by (neighbor ID, edge ID).
struct Graph {
  int64_t num_nodes = 0;
  std::vector<int64_t> indptr;   ///< size num_nodes + 1, indptr[0] = 0
  std::vector<int64_t> indices;  ///< size num_edges
  std::vector<int64_t> eids;     ///< size num_edges, or empty (identity)

  int64_t num_edges() const { return static_cast<int64_t>(indices.size()); }
  int64_t degree(int64_t v) const { return indptr[v + 1] - indptr[v]; }
  int64_t eid(int64_t k) const { return eids.empty() ? k : eids[k]; }
  /// Bytes held by indptr, indices and eids.
  int64_t nbytes() const;
};

/// Options applied while building the compressed graph.
struct BuildOptions {
  /// Make every stored pair appear in both directions. Input edge i = (u -> v) keeps edge ID i;
  /// its reverse (v -> u) is added with edge ID E + i (E = input edges) unless the input already
  /// holds an edge v -> u. So a self loop gains no copy, an input that lists both (u, v) and
  /// (v, u) keeps exactly those two edges (each with its own ID and feature row: nothing is
  /// merged), and symmetrizing a graph that is already symmetric changes nothing. Input edges
  /// are never dropped by it (multi-edges stay: see deduplicate). `eid % E` names the input row
  /// that edge features come from; edges i and E + i, where E + i exists, reverse each other.
  bool symmetrize = false;
  bool drop_self_loops = false;
  /// Keep one copy of each (src, dst) pair: the one with the smallest edge ID (an input edge
  /// before an added reverse).
  bool deduplicate = false;
};

/// Builds the CSC (in-edges) of `edges`, consuming it to bound peak memory (about 2x the final
/// CSC). Validates every ID in [0, num_nodes) and throws IndexError naming the edge otherwise.
/// `what` names the source in error messages. Parallel; the result does not depend on threads.
Graph build_csc(EdgeList&& edges, const BuildOptions& opts, const std::string& what = "edges");

/// Transposes CSC <-> CSR (keeps edge IDs; rows sorted by (neighbor, edge ID)).
Graph transpose(const Graph& g);

/// Sorts the node IDs in [first, last) by in-degree, highest first; equal degrees keep their
/// order (stable). The one definition of "degree order" (degree_order, the partitioner's).
void sort_by_degree(const Graph& g, int64_t* first, int64_t* last);

/// Node IDs ordered by in-degree, highest first (ties by ID): returns new_nid, where old node v
/// becomes new node new_nid[v]. On a power-law graph the hubs, which neighbor sampling visits in
/// almost every batch, then share a few cache lines of every per-node array (indptr, the
/// compaction tags, features).
std::vector<int64_t> degree_order(const Graph& g);

/// The graph with node v renamed new_nid[v] (a permutation of [0, num_nodes); throws ValueError
/// otherwise). Edge IDs are kept, so edge data stays where it is; rows come out sorted by
/// (neighbor, edge ID). Parallel; the result does not depend on the thread count.
Graph permute_nodes(const Graph& g, const std::vector<int64_t>& new_nid);

/// Checks the structural invariants (indptr monotone from 0 to E, indices in range, eids size);
/// throws ValueError naming `what` and the first violation.
void validate_graph(const Graph& g, const std::string& what);

}  // namespace tessera
