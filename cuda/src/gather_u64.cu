// The sorted gather over uint64 keys and positions, and their radix sort (CUB).
#include <cub/device/device_radix_sort.cuh>

#include "gather_kernels.cuh"

namespace tessera::cuda::detail {

template <>
size_t sort_pairs_temp_bytes<uint64_t>(int64_t n, int bits) {
  size_t bytes = 0;
  cub::DoubleBuffer<uint64_t> keys(nullptr, nullptr), pos(nullptr, nullptr);
  TESSERA_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, pos, n, 0, bits));
  return bytes;
}

template <>
int sort_pairs<uint64_t>(void* temp, size_t temp_bytes, uint64_t* keys0, uint64_t* keys1,
                         uint64_t* pos0, uint64_t* pos1, int64_t n, int bits, StreamHandle stream) {
  cub::DoubleBuffer<uint64_t> keys(keys0, keys1), pos(pos0, pos1);
  TESSERA_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, pos, n, 0, bits,
                                                   static_cast<cudaStream_t>(stream)));
  return keys.selector;
}

template void launch_gather<uint64_t>(const GatherLaunch&, const uint64_t*, const uint64_t*,
                                      const gather::Plan&, StreamHandle);
}  // namespace tessera::cuda::detail
