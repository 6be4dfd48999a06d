// Distributed neighbor sampling over a DistGraph: nodes this rank owns are sampled here, the
// others by their owners (one batched request per owner per layer); the result is the same as
// sampling the unpartitioned graph with the same keys.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/philox.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::dist {

class DistGraph;

/// Options of one distributed sample_neighbors call (in-edges, uniform).
struct DistSampleOptions {
  int64_t fanout = -1;  ///< -1: all neighbors; >= 0 as in ops::SampleOptions
  bool replace = false;
  RngKey key;  ///< (seed, epoch, batch, layer); the stream is kNeighbor
};

/// Samples the in-neighbors of `seeds` (global new IDs in [0, num_nodes), repeats allowed).
/// Returns edges in global new IDs (src, dst, eid), grouped by seed in the order given.
///
/// The contract: the Philox key of a node is its ORIGINAL node ID (orig_nid) and the owner
/// samples its row in the original graph's storage order (neighbors by original ID, then
/// original edge ID), so mapping the result through orig_nid / orig_eid gives exactly what
/// ops::sample_neighbors returns on the unpartitioned graph (read with the config's build
/// options) for the original seed IDs and the same key, for any number of partitions.
/// Throws IndexError for a seed out of range, ValueError for a bad fanout or layer; transport
/// errors (PeerLostError, TimeoutError naming the rank) pass through.
ops::SampledEdges sample_neighbors(const DistGraph& g, ops::Span<const int64_t> seeds,
                                   const DistSampleOptions& opts);

/// Multi-layer neighbor sampling over a DistGraph (DGL's NeighborSampler on a DistGraph).
/// Holds a reference to the graph.
class DistNeighborSampler {
 public:
  /// `fanouts` input layer first (DGL order), each >= -1; ValueError otherwise.
  DistNeighborSampler(const DistGraph& g, std::vector<int64_t> fanouts, bool replace = false);
  /// Blocks in global new IDs, input layer first (blocks.back().dst_nodes() == seeds). Hop h
  /// uses the key (seed, epoch, batch, layer = h), like ops::NeighborSampler, so after ID
  /// mapping the blocks equal ops::NeighborSampler's on the unpartitioned graph. `seeds` must
  /// be unique (ValueError).
  ///
  /// `exclude_eids` (global new edge IDs, any order, repeats allowed): edges left out of every
  /// hop. This is a POST-filter, as DGL's distributed sampler applies `exclude` (its
  /// EidExcluder on the sampled frontier): each hop samples `fanout` in-edges from all of a
  /// node's in-edges, then drops the excluded ones before compaction, so a node may keep fewer
  /// than `fanout` edges although it has enough others (ops::NeighborSampler's exclusion is a
  /// pre-filter: excluded edges are never drawn). Sources reached only through excluded edges
  /// do not enter the next hop's frontier.
  std::vector<ops::Block> sample_blocks(ops::Span<const int64_t> seeds, const RngKey& key,
                                        ops::Span<const int64_t> exclude_eids = {}) const;
  const std::vector<int64_t>& fanouts() const { return fanouts_; }
  bool replace() const { return replace_; }
  const DistGraph& graph() const { return g_; }

 private:
  const DistGraph& g_;
  std::vector<int64_t> fanouts_;
  bool replace_;
};

}  // namespace tessera::dist
