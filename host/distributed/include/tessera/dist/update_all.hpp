// SPDX-License-Identifier: Apache-2.0
// Full-graph message passing over a partitioned graph (DGL's update_all): every rank aggregates
// the in-edges of the nodes it owns with the local SpMM after one exchange of the rows of the
// remote sources its inner edges read (docs/dist.md, "update_all").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/dist/graph.hpp"
#include "tessera/dist/tensor.hpp"

namespace tessera::dist {

/// The message an edge u -> v carries: x[u] (copy_src) or x[u] * w[e] (u_mul_e).
enum class Message : uint8_t { kCopySrc, kUMulE };
/// How a node combines its messages. A node without in-edges gets zeros for every reduce.
enum class Aggregate : uint8_t { kSum, kMean, kMax };

/// "copy_src" / "u_mul_e" (ValueError naming the accepted values otherwise).
Message parse_message(const std::string& s);
/// "sum" / "mean" / "max" (ValueError naming the accepted values otherwise).
Aggregate parse_aggregate(const std::string& s);

struct UpdateAllOptions {
  Message message = Message::kCopySrc;
  Aggregate reduce = Aggregate::kSum;
  /// u_mul_e: the weight of every edge, float32 [num_edges] or [num_edges, 1] over the graph's
  /// edge policy (e.g. an edata tensor). Must be null for copy_src.
  const DistTensor* edge_weight = nullptr;
  /// Name of the result tensor; "" gives "<x.name()>:update_all:<n>" with n counting the calls
  /// on this process (every rank makes the same calls, so the ranks agree on it).
  std::string out_name;
};

/// What one rank of update_all does, built once from the rank's partition (not collective).
/// Columns of the local aggregation matrix are the rank's owned nodes (positions [0, owned))
/// followed by the distinct remote sources of its inner edges in increasing global ID
/// (positions [owned, owned + remote)).
class UpdateAllPlan {
 public:
  explicit UpdateAllPlan(const DistGraph& g);

  /// Collective: every rank calls it in the same order with the same arguments. `x` is a
  /// float32 [num_nodes, F] (or [num_nodes]) tensor over the graph's node policy. Returns a new
  /// non-persistent tensor of x's shape, policy and placement holding the aggregation:
  /// out[v] = reduce over the in-edges u -> v of the message. Local rows of x are read in
  /// place; the rows of remote sources are exchanged once per call (read_collective over the
  /// host transport; for Placement::kDevice, read_collective_into_device over the attached
  /// device transport, e.g. nccl, or read_into_device through the owners' servers without
  /// one). sum and mean run ops::spmm (CPU twin, or cuSPARSE for device rows); u_mul_e and max
  /// run the row aggregation (aggregate_rows_cpu, or its CUDA twin for device rows). Ends with a
  /// barrier: when it returns on any rank, every rank's rows of the result are in place and any
  /// rank may read them.
  DistTensor run(const DistTensor& x, const UpdateAllOptions& opts = {}) const;

  int64_t num_owned() const { return owned_; }
  int64_t num_edges() const { return static_cast<int64_t>(cols_.size()); }
  /// Global IDs of the remote sources, increasing.
  const std::vector<int64_t>& remote_ids() const { return remote_; }
  /// The local aggregation matrix (CSR, num_owned() rows, num_owned() + remote_ids().size()
  /// columns) that run() hands to ops::spmm.
  const std::vector<int64_t>& indptr() const { return indptr_; }
  const std::vector<int64_t>& cols() const { return cols_; }

 private:
  /// The matrix pattern in device memory and the staging of [owned; remote] rows, made by the
  /// first run on device rows and kept for the next (a run re-uploading the pattern spent 5x
  /// the SpMM on rmat:21,25); shared by copies of the plan, one run on it at a time.
  struct DeviceState;
  std::shared_ptr<DeviceState> device_;
  const DistGraph* g_;
  int64_t owned_ = 0;
  std::vector<int64_t> indptr_;      ///< [owned + 1]
  std::vector<int64_t> cols_;        ///< column position of every inner edge
  std::vector<int64_t> edge_local_;  ///< every inner edge's ID minus the rank's edge range start
  bool edges_in_order_ = true;       ///< edge_local_[e] == e: weights index by entry directly
  std::vector<int64_t> remote_;
};

/// UpdateAllPlan(g).run(x, opts). Collective.
DistTensor update_all(const DistGraph& g, const DistTensor& x, const UpdateAllOptions& opts = {});

}  // namespace tessera::dist
