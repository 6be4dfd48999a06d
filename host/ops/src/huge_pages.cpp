// SPDX-License-Identifier: Apache-2.0
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/ops/sample.hpp"

namespace tessera::ops {

namespace {

// Advises the whole 2 MiB pages inside [p, p + bytes); false if refused.
bool advise(const void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  return hi > lo && ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0;
}

// Reallocates `v` so its pages are advised before they are first touched.
int64_t rehome(std::vector<int64_t>& v) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const size_t bytes = v.size() * sizeof(int64_t);
  if (bytes < 4 * kHuge) return 0;  // not worth it
  std::vector<int64_t> fresh;
  fresh.reserve(v.size());  // large: fresh mmap'd pages, untouched
  const auto lo = (reinterpret_cast<uintptr_t>(fresh.data()) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<uintptr_t>(fresh.data()) + bytes) & ~(kHuge - 1);
  if (hi <= lo || ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0) return 0;
  fresh.assign(v.begin(), v.end());
  v.swap(fresh);
  return static_cast<int64_t>(hi - lo);
}

}  // namespace

std::vector<int64_t> interleave_adjacency(const Graph& graph) {
  const int64_t m = graph.num_edges();
  std::vector<int64_t> pairs;
  pairs.reserve(static_cast<size_t>(2 * m));
  advise(pairs.data(), static_cast<size_t>(2 * m) * sizeof(int64_t));  // before first touch
  pairs.resize(static_cast<size_t>(2 * m));
  for (int64_t k = 0; k < m; ++k) {
    pairs[2 * k] = graph.indices[k];
    pairs[2 * k + 1] = graph.eid(k);
  }
  return pairs;
}

bool can_pack_adjacency(const Graph& graph) {
  constexpr uint64_t kLimit = uint64_t{1} << 32;
  if (static_cast<uint64_t>(graph.num_nodes) > kLimit) return false;
  if (graph.eids.empty()) return static_cast<uint64_t>(graph.num_edges()) <= kLimit;
  for (int64_t e : graph.eids)
    if (static_cast<uint64_t>(e) >= kLimit) return false;  // also rejects e < 0
  return true;
}

std::vector<uint64_t> try_pack_adjacency(const Graph& graph) {
  constexpr uint64_t kLimit = uint64_t{1} << 32;
  if (static_cast<uint64_t>(graph.num_nodes) > kLimit) return {};
  const int64_t m = graph.num_edges();
  std::vector<uint64_t> packed;
  packed.reserve(static_cast<size_t>(m));
  advise(packed.data(), static_cast<size_t>(m) * sizeof(uint64_t));  // before first touch
  packed.resize(static_cast<size_t>(m));
  std::atomic<bool> fits{true};
  parallel_for(0, m, 1 << 16, [&](int64_t lo, int64_t hi, int64_t) {
    bool ok = true;
    for (int64_t k = lo; k < hi; ++k) {
      const auto e = static_cast<uint64_t>(graph.eid(k));  // e < 0 wraps above the limit
      ok &= e < kLimit;
      packed[k] = e << 32 | static_cast<uint64_t>(graph.indices[k]);
    }
    if (!ok) fits.store(false, std::memory_order_relaxed);
  });
  if (!fits.load()) return {};
  return packed;
}

std::vector<uint64_t> pack_adjacency(const Graph& graph) {
  std::vector<uint64_t> packed = try_pack_adjacency(graph);
  TESSERA_EXPECTS(static_cast<int64_t>(packed.size()) == graph.num_edges(), ValueError,
                  "pack_adjacency: the graph has {} nodes and {} edges; a node or edge ID does not "
                  "fit in 32 bits (use interleave_adjacency)",
                  graph.num_nodes, graph.num_edges());
  return packed;
}

int64_t advise_huge_pages(Graph& graph) {
  return rehome(graph.indices) + rehome(graph.eids) + rehome(graph.indptr);
}

}  // namespace tessera::ops
