// SPDX-License-Identifier: Apache-2.0
// Where each array of a partition lives (GPU memory, pinned host memory read through UVA, or
// plain host memory), chosen by a memory budget, and which feature rows a GPU cache holds
// (Quiver's static policy: highest in-degree first). Pure logic: no CUDA needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::cuda {

/// Placement of one array.
enum class Placement : uint8_t {
  kGpu,         ///< device memory (HBM)
  kPinnedHost,  ///< page-locked host memory that kernels read in place (UVA)
  kHost         ///< pageable host memory (CPU twins only)
};
/// "gpu", "uva", "host".
const char* placement_name(Placement p);
/// Parses "gpu", "uva" (or "pinned"), "host"; throws ValueError naming `what` otherwise.
Placement parse_placement(const std::string& s, const std::string& what = "placement");

/// One array to place.
struct ArraySpec {
  std::string name;
  int64_t bytes = 0;
  /// Lower goes first. Sampling reads the graph structure at random, so structure arrays
  /// should come before features; ties keep input order.
  int priority = 0;
  bool allow_gpu = true;
  bool allow_pinned = true;
};

/// Bytes available for placement. Negative means unlimited.
struct MemoryBudget {
  int64_t gpu_bytes = 0;
  int64_t pinned_bytes = -1;
};

/// The placement of every ArraySpec, in input order.
struct PlacementPlan {
  std::vector<Placement> where;
  int64_t gpu_bytes_used = 0;
  int64_t pinned_bytes_used = 0;
  /// GPU bytes left after placement (0 when the budget is unlimited); a feature cache may use it.
  int64_t gpu_bytes_left = 0;
  /// "indptr: gpu, indices: gpu, feat: uva" for logs.
  std::string describe(const std::vector<ArraySpec>& specs) const;
};

/// Greedy placement, deterministic: arrays in (priority, input order) each go to the GPU if
/// they fit what is left of the GPU budget, else to pinned host memory if they fit that
/// budget, else to host memory. Throws ValueError for a negative array size.
PlacementPlan plan_placement(const std::vector<ArraySpec>& arrays, const MemoryBudget& budget);

/// The rows a GPU feature cache holds.
struct FeatureCachePlan {
  /// Cached rows in slot order: hot_rows[s] is held in cache slot s. Sorted by in-degree
  /// descending, ties by row ID ascending.
  std::vector<int64_t> hot_rows;
  /// slot_of[row] = its cache slot, or -1 when the row is not cached (size: number of rows).
  std::vector<int64_t> slot_of;
  int64_t capacity_rows() const { return static_cast<int64_t>(hot_rows.size()); }
};

/// In-degree of every node of a CSC graph (indptr of size num_nodes + 1).
std::vector<int64_t> in_degrees_from_csc(const int64_t* indptr, int64_t num_nodes);

/// Chooses the hottest rows that fit in `budget_bytes` of cache (floor(budget / row_bytes),
/// at most the number of rows). Throws ValueError if row_bytes <= 0 or the budget is negative.
FeatureCachePlan plan_feature_cache(const std::vector<int64_t>& in_degree, int64_t row_bytes,
                                    int64_t budget_bytes);

/// Lookups and hits of a feature cache.
struct CacheStats {
  int64_t lookups = 0;
  int64_t hits = 0;
  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0.0; }
  CacheStats& operator+=(const CacheStats& o) {
    lookups += o.lookups;
    hits += o.hits;
    return *this;
  }
};

/// Counts how many of `ids` the plan caches (IDs outside [0, rows) throw IndexError).
CacheStats count_cache_hits(const FeatureCachePlan& plan, const int64_t* ids, int64_t n);

}  // namespace tessera::cuda
