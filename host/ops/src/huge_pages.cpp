// SPDX-License-Identifier: Apache-2.0
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "huge_pages.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/ops/sampling_graph.hpp"

namespace tessera::ops {

bool detail::advise_huge_range(const void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  return hi > lo && ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0;
}

namespace {

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

int64_t advise_huge_pages(Graph& graph) {
  return rehome(graph.indices) + rehome(graph.eids) + rehome(graph.indptr);
}

}  // namespace tessera::ops
