// SPDX-License-Identifier: Apache-2.0
// DistNodeDataLoader: mini-batches of seed nodes sampled over a DistGraph (DGL's
// DistNodeDataLoader), with the same number of batches on every rank so that no rank leaves the
// gradient all-reduce early.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/dist/sampling.hpp"
#include "tessera/ops/loader.hpp"

namespace tessera::dist {

namespace detail {
class BatchPlan;
}

/// How the seed set is cut into batches across the ranks.
enum class BatchOrder : uint8_t {
  /// DGL's: every rank passes its own share (node_split) and cuts it into batches. Rank r's
  /// batch b is sampled with the key's batch index b * world + r (distinct across ranks).
  kLocal,
  /// Reproducible across world sizes: every rank passes the SAME seed set (checked). The seeds
  /// are ordered by original node ID, permuted by (seed, epoch) and cut into global batches
  /// j = 0..B-1; rank r takes j = r, r + world, r + 2 world, ... Global batch j is keyed by
  /// (seed, epoch, j), so it has the same seeds and (after mapping through orig_nid) the same
  /// blocks for 1, 2 or 4 ranks and any partitioning: only the rank that samples it changes.
  kGlobal,
};

/// Node loader over a DistGraph. Creation is collective (the ranks agree on the number of
/// batches per epoch: the maximum over ranks; a rank with fewer batches wraps around to its
/// first ones, as torch's DistributedSampler pads, so every rank runs the same number of
/// steps). Holds a reference to the sampler (and its graph), which must outlive the loader.
/// Sampling runs on `num_workers` threads, `prefetch` batches ahead.
class DistNodeDataLoader {
 public:
  /// `seeds`: global (new) node IDs. Every rank needs at least one batch: when one has none
  /// (empty share, or drop_last with fewer seeds than batch_size), every rank throws ValueError
  /// naming it. ValueError for bad options and, in kGlobal mode, when the ranks passed different
  /// seed sets or options; IndexError for an ID out of range. A bad argument on one rank fails
  /// every rank (the others' message names it).
  DistNodeDataLoader(const DistNeighborSampler& sampler, std::vector<int64_t> seeds,
                     ops::LoaderOptions opts, BatchOrder order = BatchOrder::kLocal);
  ~DistNodeDataLoader();

  /// Batches per epoch on this rank (the same on every rank).
  int64_t num_batches() const;
  /// Batches of one epoch over all ranks (kGlobal: the global batch count B; kLocal: the sum
  /// of the ranks' own counts).
  int64_t num_global_batches() const;
  /// The key index (global batch index) of this rank's batch `b`.
  int64_t global_batch_index(int64_t b) const;
  /// Seeds of this rank's batch `b` of `epoch`.
  std::vector<int64_t> batch_seeds(int64_t epoch, int64_t b) const;
  /// Samples this rank's batch `b` synchronously (what the workers run). `index` of the result
  /// is the global batch index.
  ops::NodeMiniBatch sample_batch(int64_t epoch, int64_t b) const;
  void start_epoch(int64_t epoch);
  /// Next batch in order; false at the end of the epoch.
  bool next(
      ops::NodeMiniBatch& out,
      const ops::detail::OrderedPrefetcher<ops::NodeMiniBatch>::Interrupted& interrupted = {});
  /// Ends the epoch early without waiting: no batch is started any more, the prefetched ones
  /// are freed and next() returns false; a batch being sampled now finishes in the background
  /// (its thread is joined by the next start_epoch() or the destructor). Idempotent.
  void stop();

 private:
  const DistNeighborSampler& sampler_;
  ops::LoaderOptions opts_;
  std::unique_ptr<detail::BatchPlan> plan_;
  int64_t epoch_ = -1;
  std::vector<int64_t> epoch_order_;  // the plan's order for epoch_
  std::unique_ptr<ops::detail::OrderedPrefetcher<ops::NodeMiniBatch>> pipe_;
};

}  // namespace tessera::dist
