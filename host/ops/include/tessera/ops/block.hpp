// SPDX-License-Identifier: Apache-2.0
// Blocks (message-flow graphs): sampled edges compacted onto local node IDs, and induced
// subgraphs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/graph/graph.hpp"
#include "tessera/ops/sample.hpp"
#include "tessera/ops/span.hpp"

namespace tessera::ops {

/// A bipartite message-flow graph over local IDs (DGL's block). Local source IDs index
/// `src_nodes`: the first `num_dst` of them are the destination nodes in the order given to
/// to_block, followed by the new source nodes in order of first appearance in the edge list.
/// Edge i runs from local source src[i] to local destination dst[i] and has global edge ID
/// eids[i]; edges keep the order of the sampled COO.
struct Block {
  int64_t num_dst = 0;
  std::vector<int64_t> src_nodes;  ///< global IDs of the local source nodes
  std::vector<int64_t> src;        ///< local source of each edge, in [0, num_src())
  std::vector<int64_t> dst;        ///< local destination of each edge, in [0, num_dst)
  std::vector<int64_t> eids;       ///< global edge IDs

  int64_t num_src() const { return static_cast<int64_t>(src_nodes.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(src.size()); }
  /// Global IDs of the destination nodes (the first num_dst source nodes).
  Span<const int64_t> dst_nodes() const { return {src_nodes.data(), num_dst}; }
};

namespace detail {
class IdMap;
}

/// Reusable scratch memory for compaction (a hash map from global to local IDs). One per thread;
/// keeping it across batches avoids reallocating. Not thread-safe.
class CompactWorkspace {
 public:
  CompactWorkspace();
  ~CompactWorkspace();
  CompactWorkspace(CompactWorkspace&&) noexcept;
  CompactWorkspace& operator=(CompactWorkspace&&) noexcept;
  detail::IdMap& map() { return *map_; }
  /// Reusable buffer for the sampled edges of one hop.
  SampledEdges& edges() { return edges_; }

 private:
  std::unique_ptr<detail::IdMap> map_;
  SampledEdges edges_;
};

/// Compacts sampled edges into a block whose destination side is `dst_nodes` (unique global IDs;
/// every edge's dst must be among them). Throws ValueError for repeated destination nodes or an
/// edge whose destination is not listed. `ws` is optional scratch memory.
Block to_block(const SampledEdges& edges, Span<const int64_t> dst_nodes,
               CompactWorkspace* ws = nullptr, Device device = Device::kCpu);

/// An induced subgraph: `graph` is the CSC over local IDs 0..nodes.size()-1 (local i is global
/// nodes[i]) holding every edge of the parent with both ends in `nodes`; its eids are the
/// parent's global edge IDs; rows are sorted by (local neighbor, edge ID).
struct Subgraph {
  Graph graph;
  std::vector<int64_t> nodes;
};

/// The subgraph of `graph` (CSC) induced by `nodes` (unique IDs in range; IndexError /
/// ValueError otherwise). Parallel over nodes (num_threads as in SampleOptions).
Subgraph induced_subgraph(const Graph& graph, Span<const int64_t> nodes, int num_threads = 0,
                          Device device = Device::kCpu);

namespace detail {
/// The validators of to_block and induced_subgraph (the checks that need the ID map, repeated
/// nodes and edges outside the destination set, are made while compacting).
void validate_to_block_args(const SampledEdges& edges, Span<const int64_t> dst_nodes);
void validate_induced_subgraph_args(const Graph& graph, Span<const int64_t> nodes);
void to_block_cpu(const SampledEdges& edges, Span<const int64_t> dst_nodes, IdMap& map, Block& out);
}  // namespace detail

}  // namespace tessera::ops
