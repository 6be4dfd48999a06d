// SPDX-License-Identifier: Apache-2.0
// Internal: the vectorized row gather/scatter kernels. Rows are copied as raw bytes (the dtype
// only matters to validation), so the output is bit-identical to the CPU twin by construction.
#pragma once

#include <cstdint>

#include "gather_launch.hpp"
#include "tessera/cuda/check.cuh"

namespace tessera::cuda::detail {

// A row of `vpr` vectors of type V is copied by a group of `1 << log2_tpr` consecutive threads
// (tpr = threads per row, a power of two <= the block): rows of 128 bytes use 8 threads with
// 16-byte loads, rows of 4 KiB use 256. Each thread issues up to four independent loads before
// its stores so that several requests are in flight (latency of HBM, and more so of PCIe).
template <typename I, typename V, bool kCached>
__global__ void gather_kernel(const V* __restrict__ src, int64_t src_rows, int64_t vpr,
                              const V* __restrict__ cache, const int64_t* __restrict__ slot_of,
                              const I* __restrict__ idx, int64_t n, V* __restrict__ out,
                              int log2_tpr, unsigned long long* first_bad,
                              unsigned long long* counters) {
  const int tpr = 1 << log2_tpr;
  const int lane = static_cast<int>(threadIdx.x) & (tpr - 1);
  const int64_t rows_per_block = static_cast<int64_t>(blockDim.x) >> log2_tpr;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * rows_per_block;
  unsigned my_hits = 0;
  for (int64_t i = blockIdx.x * rows_per_block + (threadIdx.x >> log2_tpr); i < n; i += stride) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    V* __restrict__ o = out + i * vpr;
    if (r < 0 || r >= src_rows) {
      for (int64_t j = lane; j < vpr; j += tpr)
        o[j] = V{};
      if (lane == 0 && first_bad) atomicMin(first_bad, static_cast<unsigned long long>(i));
      continue;
    }
    const V* __restrict__ s = src + r * vpr;
    if constexpr (kCached) {
      const int64_t slot = slot_of[r];
      if (slot >= 0) {
        s = cache + slot * vpr;
        my_hits += lane == 0;
      }
    }
    int64_t j = lane;
    for (; j + 3 * tpr < vpr; j += 4 * tpr) {
      const V a = s[j], b = s[j + tpr], c = s[j + 2 * tpr], d = s[j + 3 * tpr];
      o[j] = a;
      o[j + tpr] = b;
      o[j + 2 * tpr] = c;
      o[j + 3 * tpr] = d;
    }
    for (; j < vpr; j += tpr)
      o[j] = s[j];
  }
  if constexpr (kCached) {
    if (counters) {
      const unsigned warp_hits = __reduce_add_sync(0xffffffffu, my_hits);
      if ((threadIdx.x & 31) == 0 && warp_hits) atomicAdd(&counters[1], warp_hits);
      if (blockIdx.x == 0 && threadIdx.x == 0)
        atomicAdd(&counters[0], static_cast<unsigned long long>(n));
    }
  }
}

template <typename I, typename V>
__global__ void scatter_kernel(const V* __restrict__ src, int64_t n, int64_t vpr,
                               const I* __restrict__ idx, V* __restrict__ dst, int64_t dst_rows,
                               int log2_tpr, unsigned long long* first_bad) {
  const int tpr = 1 << log2_tpr;
  const int lane = static_cast<int>(threadIdx.x) & (tpr - 1);
  const int64_t rows_per_block = static_cast<int64_t>(blockDim.x) >> log2_tpr;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * rows_per_block;
  for (int64_t i = blockIdx.x * rows_per_block + (threadIdx.x >> log2_tpr); i < n; i += stride) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r < 0 || r >= dst_rows) {
      if (lane == 0 && first_bad) atomicMin(first_bad, static_cast<unsigned long long>(i));
      continue;
    }
    const V* __restrict__ s = src + i * vpr;
    V* __restrict__ o = dst + r * vpr;
    int64_t j = lane;
    for (; j + 3 * tpr < vpr; j += 4 * tpr) {
      const V a = s[j], b = s[j + tpr], c = s[j + 2 * tpr], d = s[j + 3 * tpr];
      o[j] = a;
      o[j + tpr] = b;
      o[j + 2 * tpr] = c;
      o[j + 3 * tpr] = d;
    }
    for (; j < vpr; j += tpr)
      o[j] = s[j];
  }
}

constexpr int kBlock = 256;

struct LaunchShape {
  int log2_tpr;
  unsigned grid;
};

inline LaunchShape shape_for(int64_t n, int64_t vpr) {
  int log2_tpr = 0;
  while ((int64_t{1} << log2_tpr) < vpr && (1 << log2_tpr) < kBlock)
    ++log2_tpr;
  const int64_t rows_per_block = kBlock >> log2_tpr;
  const int64_t want = (n + rows_per_block - 1) / rows_per_block;
  const int64_t cap = max_resident_threads() / kBlock * 4;
  return {log2_tpr, static_cast<unsigned>(want < cap ? want : cap)};
}

template <typename I, typename V>
void launch_gather_v(const void* src, int64_t src_rows, int64_t row_bytes, const void* cache,
                     const int64_t* slot_of, const I* idx, int64_t n, void* out,
                     unsigned long long* first_bad, unsigned long long* counters,
                     StreamHandle stream) {
  const int64_t vpr = row_bytes / static_cast<int64_t>(sizeof(V));
  const LaunchShape sh = shape_for(n, vpr);
  auto s = static_cast<cudaStream_t>(stream);
  if (cache) {
    TESSERA_KERNEL_CALL((gather_kernel<I, V, true>), sh.grid, kBlock, 0, s,
                        static_cast<const V*>(src), src_rows, vpr, static_cast<const V*>(cache),
                        slot_of, idx, n, static_cast<V*>(out), sh.log2_tpr, first_bad, counters);
  } else {
    TESSERA_KERNEL_CALL((gather_kernel<I, V, false>), sh.grid, kBlock, 0, s,
                        static_cast<const V*>(src), src_rows, vpr, nullptr, nullptr, idx, n,
                        static_cast<V*>(out), sh.log2_tpr, first_bad, nullptr);
  }
}

template <typename I>
void launch_gather(const void* src, int64_t src_rows, int64_t row_bytes, const void* cache,
                   const int64_t* slot_of, const I* idx, int64_t n, void* out,
                   unsigned long long* first_bad, unsigned long long* counters,
                   StreamHandle stream) {
  if (n == 0 || row_bytes == 0) return;
  switch (vector_bytes(row_bytes, src, out, cache)) {
    case 16:
      return launch_gather_v<I, uint4>(src, src_rows, row_bytes, cache, slot_of, idx, n, out,
                                       first_bad, counters, stream);
    case 8:
      return launch_gather_v<I, uint2>(src, src_rows, row_bytes, cache, slot_of, idx, n, out,
                                       first_bad, counters, stream);
    case 4:
      return launch_gather_v<I, unsigned>(src, src_rows, row_bytes, cache, slot_of, idx, n, out,
                                          first_bad, counters, stream);
    case 2:
      return launch_gather_v<I, unsigned short>(src, src_rows, row_bytes, cache, slot_of, idx, n,
                                                out, first_bad, counters, stream);
    default:
      return launch_gather_v<I, unsigned char>(src, src_rows, row_bytes, cache, slot_of, idx, n,
                                               out, first_bad, counters, stream);
  }
}

template <typename I, typename V>
void launch_scatter_v(const void* src, int64_t n, int64_t row_bytes, const I* idx, void* dst,
                      int64_t dst_rows, unsigned long long* first_bad, StreamHandle stream) {
  const int64_t vpr = row_bytes / static_cast<int64_t>(sizeof(V));
  const LaunchShape sh = shape_for(n, vpr);
  TESSERA_KERNEL_CALL((scatter_kernel<I, V>), sh.grid, kBlock, 0, static_cast<cudaStream_t>(stream),
                      static_cast<const V*>(src), n, vpr, idx, static_cast<V*>(dst), dst_rows,
                      sh.log2_tpr, first_bad);
}

template <typename I>
void launch_scatter(const void* src, int64_t n, int64_t row_bytes, const I* idx, void* dst,
                    int64_t dst_rows, unsigned long long* first_bad, StreamHandle stream) {
  if (n == 0 || row_bytes == 0) return;
  switch (vector_bytes(row_bytes, src, dst)) {
    case 16:
      return launch_scatter_v<I, uint4>(src, n, row_bytes, idx, dst, dst_rows, first_bad, stream);
    case 8:
      return launch_scatter_v<I, uint2>(src, n, row_bytes, idx, dst, dst_rows, first_bad, stream);
    case 4:
      return launch_scatter_v<I, unsigned>(src, n, row_bytes, idx, dst, dst_rows, first_bad,
                                           stream);
    case 2:
      return launch_scatter_v<I, unsigned short>(src, n, row_bytes, idx, dst, dst_rows, first_bad,
                                                 stream);
    default:
      return launch_scatter_v<I, unsigned char>(src, n, row_bytes, idx, dst, dst_rows, first_bad,
                                                stream);
  }
}

}  // namespace tessera::cuda::detail
