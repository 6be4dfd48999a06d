// SPDX-License-Identifier: Apache-2.0
// Internal: typed launchers of the gather/scatter kernels, one explicit instantiation per index
// type in its own .cu file (gather_i32.cu, gather_i64.cu) to keep nvcc builds small.
#pragma once

#include <cstdint>

#include "tessera/cuda/memory.hpp"

namespace tessera::cuda::detail {

/// Launches the gather kernel; `cache`/`slot_of` null for a plain gather. `counters`, when
/// non-null, receives [0] += n lookups and [1] += cached reads.
template <typename I>
void launch_gather(const void* src, int64_t src_rows, int64_t row_bytes, const void* cache,
                   const int64_t* slot_of, const I* idx, int64_t n, void* out,
                   unsigned long long* first_bad, unsigned long long* counters,
                   StreamHandle stream);

template <typename I>
void launch_scatter(const void* src, int64_t n, int64_t row_bytes, const I* idx, void* dst,
                    int64_t dst_rows, unsigned long long* first_bad, StreamHandle stream);

/// Largest of 16, 8, 4, 2, 1 dividing row_bytes and every address (the vector width).
int vector_bytes(int64_t row_bytes, const void* a, const void* b, const void* c = nullptr);

/// Resident-thread budget for grid-stride launches (SMs x 2048 threads), cached per process.
int64_t max_resident_threads();

}  // namespace tessera::cuda::detail
