// The plain gather, the sort keys of a sorted gather and the scatter for int64 indices (one
// index type per file keeps nvcc fast).
#include "gather_kernels.cuh"

namespace tessera::cuda::detail {
template void launch_gather<int64_t>(const GatherLaunch&, const int64_t*, const int64_t*,
                                     const gather::Plan&, StreamHandle);
template void launch_sort_keys<int64_t, uint32_t>(const int64_t*, int64_t, int64_t, uint32_t*,
                                                  uint32_t*, StreamHandle);
template void launch_sort_keys<int64_t, uint64_t>(const int64_t*, int64_t, int64_t, uint64_t*,
                                                  uint64_t*, StreamHandle);
template void launch_scatter<int64_t>(const void*, int64_t, int64_t, const int64_t*, void*, int64_t,
                                      unsigned long long*, StreamHandle);
}  // namespace tessera::cuda::detail
