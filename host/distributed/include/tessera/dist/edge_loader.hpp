// SPDX-License-Identifier: Apache-2.0
// DistEdgeDataLoader: link-prediction mini-batches of seed edges sampled over a DistGraph (DGL's
// DistEdgeDataLoader), with the same number of batches on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/dist/loader.hpp"
#include "tessera/dist/sampling.hpp"
#include "tessera/ops/loader.hpp"

namespace tessera::dist {

class DistGraph;

/// Edge loader over a DistGraph: batches of seed edges (global new edge IDs) turned into
/// ops::EdgeMiniBatch exactly as ops::EdgeDataLoader does. Creation is collective; the batch
/// order, the step count (the maximum over ranks; short shares wrap around) and the checks are
/// DistNodeDataLoader's (kLocal: `seed_eids` is this rank's share, e.g. edge_split; kGlobal:
/// every rank passes the same set, ordered by ORIGINAL edge ID, global batches dealt
/// round-robin). Holds a reference to the sampler (and its graph), which must outlive it.
///
/// A batch with global index j of epoch `epoch` (j = b * world + rank for kLocal):
/// * eids: its seed edges; pos_src / pos_dst: their endpoints (new node IDs), read from the
///   graph's edge_endpoints() (one batched read per owner).
/// * negatives: k = EdgeLoaderOptions::negatives per positive, (pos_src, t) with t uniform over
///   the ORIGINAL node IDs [0, num_nodes) mapped to new IDs through new_nid(). Draw d of
///   positive edge e uses the Philox key (opts.seed, epoch, batch = j, layer 0, stream
///   kNegative, node = orig_eid(e), draw d): exactly ops::uniform_negatives on the
///   unpartitioned graph for the original edge IDs, so the negatives (in original IDs) depend
///   neither on the partitioning nor on which rank samples the batch.
/// * seeds: the unique endpoints of positives then negatives in order of first appearance;
///   pos/neg *_local: the pairs as indices into seeds.
/// * blocks: DistNeighborSampler::sample_blocks(seeds, key (opts.seed, epoch, j, layer h)),
///   with ExcludeMode kSelf / kReverseId leaving out the batch's edges (and their reverses) as
///   a post-filter of each hop (see DistNeighborSampler::sample_blocks; DGL's distributed
///   sampler does the same).
///
/// With ExcludeMode::kNone and kGlobal order, global batch j mapped through orig_nid /
/// orig_eid equals batch j of ops::EdgeDataLoader on the unpartitioned graph given the seed
/// edges' original IDs in increasing order (same options), for any world size.
class DistEdgeDataLoader {
 public:
  /// `seed_eids`: global new edge IDs. eopts.reverse_eids (kReverseId) is indexed by new edge
  /// ID, num_edges entries, each a new edge ID or -1 (no reverse): see
  /// symmetrized_reverse_eids(). Throws (on every rank, naming the failing one) ValueError for
  /// bad options, a rank without any batch, or (kGlobal) different seed sets or settings;
  /// IndexError for an ID out of range.
  DistEdgeDataLoader(const DistNeighborSampler& sampler, std::vector<int64_t> seed_eids,
                     ops::LoaderOptions opts, ops::EdgeLoaderOptions eopts,
                     BatchOrder order = BatchOrder::kLocal);
  ~DistEdgeDataLoader();
  DistEdgeDataLoader(const DistEdgeDataLoader&) = delete;
  DistEdgeDataLoader& operator=(const DistEdgeDataLoader&) = delete;

  /// Batches per epoch on this rank (the same on every rank).
  int64_t num_batches() const;
  /// Batches of one epoch over all ranks (kGlobal: B; kLocal: the sum of the ranks' counts).
  int64_t num_global_batches() const;
  /// The key index (global batch index) of this rank's batch `b`.
  int64_t global_batch_index(int64_t b) const;
  /// Seed edges of this rank's batch `b` of `epoch`.
  std::vector<int64_t> batch_eids(int64_t epoch, int64_t b) const;
  /// Samples this rank's batch `b` synchronously (what the workers run); `index` of the result
  /// is the global batch index. `stats`: wall time of the whole batch in sample_seconds.
  ops::EdgeMiniBatch sample_batch(int64_t epoch, int64_t b) const;
  void start_epoch(int64_t epoch);
  /// Next batch in order; false at the end of the epoch.
  bool next(
      ops::EdgeMiniBatch& out,
      const ops::detail::OrderedPrefetcher<ops::EdgeMiniBatch>::Interrupted& interrupted = {});
  /// Ends the epoch early without waiting: no batch is started any more, the prefetched ones
  /// are freed and next() returns false; a batch being sampled now finishes in the background
  /// (its thread is joined by the next start_epoch() or the destructor). Idempotent.
  void stop();

 private:
  const DistNeighborSampler& sampler_;
  ops::LoaderOptions opts_;
  ops::EdgeLoaderOptions eopts_;
  std::unique_ptr<detail::BatchPlan> plan_;
  int64_t epoch_ = -1;
  std::vector<int64_t> epoch_order_;
  std::unique_ptr<ops::detail::OrderedPrefetcher<ops::EdgeMiniBatch>> pipe_;
};

/// reverse_eids (new edge IDs) of a partitioning built with build.symmetrize: the input edge i
/// and its reverse (original edge IDs i and num_input_edges + i) are each other's reverse.
/// Entry e is -1 where e's partner is not stored: not added because the input held the reversed
/// pair itself (both directions listed: that reverse is an input edge of its own ID, which the
/// map does not name; a self loop), or dropped by build.deduplicate or build.drop_self_loops.
/// Not collective: reads orig_eid() of every edge (8 bytes per
/// edge). ValueError when the partitioning was not symmetrized.
std::vector<int64_t> symmetrized_reverse_eids(const DistGraph& g);

}  // namespace tessera::dist
