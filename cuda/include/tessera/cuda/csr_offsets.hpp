// SPDX-License-Identifier: Apache-2.0
// CSR offsets of a sorted row list: indptr[v] = the first position e with rows[e] >= v, for v in
// [0, num_rows], so row v's entries are [indptr[v], indptr[v + 1]). What a block whose edges are
// grouped by destination (ascending) needs for per-row work without a search per step: the GPU
// loader computes it for every block on its own stream (csr_offsets_impl, one thread per
// offset running csr_offset), the CPU twin is csr_offsets_cpu; both call csr_offset.
#pragma once

#include <cstdint>

#include "tessera/core/philox.hpp"       // TESSERA_HD
#include "tessera/cuda/sample_rows.hpp"  // lower_bound_position

namespace tessera::cuda {

/// The first position in sorted[0, m) (non-decreasing) whose value is >= v.
TESSERA_HD inline int64_t csr_offset(const int64_t* sorted, int64_t m, int64_t v) {
  return rows::lower_bound_position(sorted, m, v);
}

/// The CPU twin: indptr[0 .. num_rows] of rows[0, m).
inline void csr_offsets_cpu(const int64_t* rows, int64_t m, int64_t num_rows, int64_t* indptr) {
  for (int64_t v = 0; v <= num_rows; ++v) {
    indptr[v] = csr_offset(rows, m, v);
  }
}

}  // namespace tessera::cuda
