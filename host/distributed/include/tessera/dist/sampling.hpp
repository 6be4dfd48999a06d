// SPDX-License-Identifier: Apache-2.0
// Distributed neighbor sampling over a DistGraph: nodes this rank owns are sampled here, the
// others by their owners (one batched request per owner per layer); the result is the same as
// sampling the unpartitioned graph with the same keys, uniform or weighted by an edge feature.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/philox.hpp"
#include "tessera/ops/block.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::dist {

class DistGraph;

/// Options of one distributed sample_neighbors call (in-edges).
struct DistSampleOptions {
  int64_t fanout = -1;  ///< -1: all neighbors; >= 0 as in ops::SampleOptions
  bool replace = false;
  /// Empty: uniform. Otherwise the name of an edge feature of the DistGraph (its edata(): one
  /// float32 or float64 value per edge, shape [E] or [E, 1], non-negative and finite) used as
  /// the weights of ops::SampleOptions::weights. The name travels with each request: every
  /// owner samples its rows weighted by its own partition's rows of that feature, arranged in
  /// the row's storage order (see below) and validated and summed (prefix sums) once, on the
  /// owner's first use of the name.
  std::string weights_name;
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
/// Weighted (opts.weights_name), the result equals ops::sample_neighbors with the feature's
/// values by original edge ID as weights (ops::weights_in_storage_order of the dataset's edge
/// array, which `tessera partition` wrote by original edge ID mod the input edge count).
/// Throws IndexError for a seed out of range, ValueError for a bad fanout or layer, an unknown
/// weights_name (naming it and the features there are) or bad weights of this rank's rows; a
/// bad weight another owner holds comes back as a RemoteError with that owner's message;
/// transport errors (PeerLostError, TimeoutError naming the rank) pass through.
ops::SampledEdges sample_neighbors(const DistGraph& g, ops::Span<const int64_t> seeds,
                                   const DistSampleOptions& opts);

/// Multi-layer neighbor sampling over a DistGraph (DGL's NeighborSampler on a DistGraph).
/// Holds a reference to the graph.
class DistNeighborSampler {
 public:
  /// `fanouts` input layer first (DGL order), each >= -1; ValueError otherwise.
  /// `weights_name`: empty for uniform sampling, or an edge feature of `g` to sample weighted
  /// by (DistSampleOptions::weights_name); its rows on this rank are checked here (ValueError
  /// for an unknown name or bad weights), the other owners' on their first request. Not
  /// collective.
  DistNeighborSampler(const DistGraph& g, std::vector<int64_t> fanouts, bool replace = false,
                      std::string weights_name = {});
  /// Blocks in global new IDs, input layer first (blocks.back().dst_nodes() == seeds). Hop h
  /// uses the key (seed, epoch, batch, layer = h), like ops::NeighborSampler, so after ID
  /// mapping the blocks equal ops::NeighborSampler's on the unpartitioned graph (with the
  /// feature's weights in storage order when weighted). `seeds` must
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
  const std::string& weights_name() const { return weights_name_; }
  const DistGraph& graph() const { return g_; }

 private:
  const DistGraph& g_;
  std::vector<int64_t> fanouts_;
  bool replace_;
  std::string weights_name_;
};

}  // namespace tessera::dist
