// Gather/scatter kernels for int32 indices (one index type per file keeps nvcc fast).
#include "gather_kernels.cuh"

namespace tessera::cuda::detail {
template void launch_gather<int32_t>(const GatherLaunch&, const int32_t*, const gather::Plan&,
                                     StreamHandle);
template void launch_scatter<int32_t>(const void*, int64_t, int64_t, const int32_t*, void*, int64_t,
                                      unsigned long long*, StreamHandle);
}  // namespace tessera::cuda::detail
