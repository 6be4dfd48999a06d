// SPDX-License-Identifier: Apache-2.0
// Placement by memory budget and the static hot-row cache policy (pure logic).
#include "tessera/cuda/placement.hpp"

#include <algorithm>
#include <numeric>

#include "tessera/core/error.hpp"

namespace tessera::cuda {

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::kGpu:
      return "gpu";
    case Placement::kPinnedHost:
      return "uva";
    case Placement::kHost:
      return "host";
  }
  return "?";
}

Placement parse_placement(const std::string& s, const std::string& what) {
  if (s == "gpu") return Placement::kGpu;
  if (s == "uva" || s == "pinned") return Placement::kPinnedHost;
  if (s == "host") return Placement::kHost;
  TESSERA_FAIL(ValueError, "{}: unknown placement '{}' (expected gpu, uva or host)", what, s);
}

std::string PlacementPlan::describe(const std::vector<ArraySpec>& specs) const {
  std::string s;
  for (size_t i = 0; i < specs.size() && i < where.size(); ++i) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{}: {}", specs[i].name, placement_name(where[i]));
  }
  return s;
}

PlacementPlan plan_placement(const std::vector<ArraySpec>& arrays, const MemoryBudget& budget) {
  std::vector<size_t> order(arrays.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return arrays[a].priority < arrays[b].priority; });
  PlacementPlan plan;
  plan.where.assign(arrays.size(), Placement::kHost);
  const bool gpu_unlimited = budget.gpu_bytes < 0, pinned_unlimited = budget.pinned_bytes < 0;
  int64_t gpu_left = gpu_unlimited ? 0 : budget.gpu_bytes;
  int64_t pinned_left = pinned_unlimited ? 0 : budget.pinned_bytes;
  for (size_t i : order) {
    const ArraySpec& a = arrays[i];
    TESSERA_EXPECTS(a.bytes >= 0, ValueError, "plan_placement: array '{}' has negative size {}",
                    a.name, a.bytes);
    if (a.allow_gpu && (gpu_unlimited || a.bytes <= gpu_left)) {
      plan.where[i] = Placement::kGpu;
      plan.gpu_bytes_used += a.bytes;
      if (!gpu_unlimited) gpu_left -= a.bytes;
    } else if (a.allow_pinned && (pinned_unlimited || a.bytes <= pinned_left)) {
      plan.where[i] = Placement::kPinnedHost;
      plan.pinned_bytes_used += a.bytes;
      if (!pinned_unlimited) pinned_left -= a.bytes;
    }
  }
  plan.gpu_bytes_left = gpu_left;
  return plan;
}

std::vector<int64_t> in_degrees_from_csc(const int64_t* indptr, int64_t num_nodes) {
  TESSERA_EXPECTS(num_nodes >= 0, ValueError, "in_degrees_from_csc: negative node count {}",
                  num_nodes);
  std::vector<int64_t> d(static_cast<size_t>(num_nodes));
  for (int64_t v = 0; v < num_nodes; ++v)
    d[v] = indptr[v + 1] - indptr[v];
  return d;
}

FeatureCachePlan plan_feature_cache(const std::vector<int64_t>& in_degree, int64_t row_bytes,
                                    int64_t budget_bytes) {
  TESSERA_EXPECTS(row_bytes > 0, ValueError, "plan_feature_cache: row_bytes must be > 0, got {}",
                  row_bytes);
  TESSERA_EXPECTS(budget_bytes >= 0, ValueError,
                  "plan_feature_cache: budget_bytes must be >= 0, got {}", budget_bytes);
  const int64_t n = static_cast<int64_t>(in_degree.size());
  const int64_t cap = std::min(n, budget_bytes / row_bytes);
  FeatureCachePlan plan;
  plan.slot_of.assign(static_cast<size_t>(n), -1);
  if (cap == 0) return plan;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  // A strict total order (degree desc, ID asc) makes the selection independent of the
  // algorithm: nth_element + sort of the head gives the same rows as a full sort.
  auto hotter = [&](int64_t a, int64_t b) {
    return in_degree[a] != in_degree[b] ? in_degree[a] > in_degree[b] : a < b;
  };
  if (cap < n) std::nth_element(ids.begin(), ids.begin() + cap, ids.end(), hotter);
  ids.resize(static_cast<size_t>(cap));
  std::sort(ids.begin(), ids.end(), hotter);
  for (int64_t s = 0; s < cap; ++s)
    plan.slot_of[ids[s]] = s;
  plan.hot_rows = std::move(ids);
  return plan;
}

CacheStats count_cache_hits(const FeatureCachePlan& plan, const int64_t* ids, int64_t n) {
  CacheStats st;
  const int64_t rows = static_cast<int64_t>(plan.slot_of.size());
  for (int64_t i = 0; i < n; ++i) {
    TESSERA_EXPECTS(ids[i] >= 0 && ids[i] < rows, IndexError,
                    "count_cache_hits: ids[{}] = {} is outside [0, {})", i, ids[i], rows);
    st.hits += plan.slot_of[ids[i]] >= 0;
  }
  st.lookups = n;
  return st;
}

}  // namespace tessera::cuda
