// SPDX-License-Identifier: Apache-2.0
// How a distributed loader's seed set (nodes or edges) is cut into batches across the ranks:
// shared by DistNodeDataLoader and DistEdgeDataLoader.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/dist/loader.hpp"
#include "tessera/dist/tensor.hpp"
#include "tessera/ops/loader.hpp"
#include "tessera/transport/transport.hpp"

namespace tessera::dist::detail {

/// The batches of one loader on this rank. Creation is collective and all-or-nothing: every
/// rank validates its options and IDs (and runs the loader's own `check`), then the ranks
/// all-gather the outcome, so one rank's bad input fails every rank (same exception type,
/// naming the rank) instead of leaving the others in the next collective.
///
/// * kLocal: `ids` is this rank's share, permuted per epoch by (seed, epoch); rank r's batch b
///   has the global index (b mod own) * world + r.
/// * kGlobal: every rank passes the same set (checked: count and an order-independent
///   fingerprint of the original IDs, plus `agree`: settings that change the batches). The IDs
///   are sorted by original ID (read from `orig`), permuted per epoch and cut into global
///   batches j = 0..B-1; rank r takes j = r, r + world, ... (mod B).
///
/// Every rank runs max over ranks of its batch count per epoch (short shares wrap around). A
/// rank without any batch fails every rank with a ValueError naming it.
class BatchPlan {
 public:
  /// `limit`: IDs must be in [0, limit) (IndexError naming the ID, its position and the rank).
  /// `loader` names the loader and `what` the ID kind ("seed node", "seed edge") in messages.
  BatchPlan(transport::Transport& t, std::vector<int64_t> ids, int64_t limit,
            const DistTensor& orig, const ops::LoaderOptions& opts, BatchOrder order,
            const std::string& loader, const char* what, const std::function<void()>& check,
            const std::string& agree);

  /// Batches per epoch on every rank.
  int64_t steps() const { return steps_; }
  /// kGlobal: B; kLocal: the sum of the ranks' own batch counts.
  int64_t global_batches() const { return global_batches_; }
  /// The key index of this rank's batch `b` (IndexError outside [0, steps)).
  int64_t global_batch_index(int64_t b) const;
  /// The IDs permuted for `epoch` (the IDs themselves without shuffle).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  /// The IDs of this rank's batch `b`, cut from `order` (= epoch_order(epoch)).
  std::vector<int64_t> batch(const std::vector<int64_t>& order, int64_t b) const;

 private:
  std::string loader_;
  std::vector<int64_t> ids_;  // kGlobal: sorted by original ID
  ops::LoaderOptions opts_;
  BatchOrder order_;
  int rank_ = 0, world_ = 1;
  int64_t own_batches_ = 0, steps_ = 0, global_batches_ = 0;
};

}  // namespace tessera::dist::detail
