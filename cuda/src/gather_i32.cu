// The plain gather, the sort keys of a sorted gather and the scatter for int32 indices (one
// index type per file keeps nvcc fast).
#include "gather_kernels.cuh"

namespace tessera::cuda::detail {
template void launch_gather<int32_t>(const GatherLaunch&, const int32_t*, const int32_t*,
                                     const gather::Plan&, StreamHandle);
template void launch_sort_keys<int32_t, uint32_t>(const int32_t*, int64_t, int64_t, uint32_t*,
                                                  uint32_t*, StreamHandle);
template void launch_sort_keys<int32_t, uint64_t>(const int32_t*, int64_t, int64_t, uint64_t*,
                                                  uint64_t*, StreamHandle);
template void launch_scatter<int32_t>(const void*, int64_t, int64_t, const int32_t*, void*, int64_t,
                                      unsigned long long*, StreamHandle);
}  // namespace tessera::cuda::detail
