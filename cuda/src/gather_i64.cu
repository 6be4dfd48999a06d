// SPDX-License-Identifier: Apache-2.0
// Gather/scatter kernels for int64 indices (one index type per file keeps nvcc fast).
#include "gather_kernels.cuh"

namespace tessera::cuda::detail {
template void launch_gather<int64_t>(const void*, int64_t, int64_t, const void*, const int64_t*,
                                     const int64_t*, int64_t, void*, unsigned long long*,
                                     unsigned long long*, StreamHandle);
template void launch_scatter<int64_t>(const void*, int64_t, int64_t, const int64_t*, void*, int64_t,
                                      unsigned long long*, StreamHandle);
}  // namespace tessera::cuda::detail
