// The sorted gather over uint32 keys and positions, and their radix sort (CUB).
#include <cub/device/device_radix_sort.cuh>

#include "gather_kernels.cuh"

namespace tessera::cuda::detail {

template <>
size_t sort_pairs_temp_bytes<uint32_t>(int64_t n, int bits) {
  size_t bytes = 0;
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr), pos(nullptr, nullptr);
  TESSERA_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, pos, n, 0, bits));
  return bytes;
}

template <>
int sort_pairs<uint32_t>(void* temp, size_t temp_bytes, uint32_t* keys0, uint32_t* keys1,
                         uint32_t* pos0, uint32_t* pos1, int64_t n, int bits, StreamHandle stream) {
  cub::DoubleBuffer<uint32_t> keys(keys0, keys1), pos(pos0, pos1);
  TESSERA_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, pos, n, 0, bits,
                                                   static_cast<cudaStream_t>(stream)));
  return keys.selector;
}

template void launch_gather<uint32_t>(const GatherLaunch&, const uint32_t*, const uint32_t*,
                                      const gather::Plan&, StreamHandle);
}  // namespace tessera::cuda::detail
