// SPDX-License-Identifier: Apache-2.0
// Internal: the vectorized row gather/scatter kernels. Rows are copied as raw bytes (the dtype
// only matters to validation), so the output is bit-identical to the CPU twin by construction.
// The launch plan and the per-group copy are tessera/cuda/gather_plan.hpp (checked on the CPU).
#pragma once

#include <cstdint>
#include <type_traits>

#include "gather_launch.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/gather_plan.hpp"

namespace tessera::cuda::detail {

// A group of `1 << log2_tpr` consecutive threads copies R rows of `vpr` vectors of type V per
// iteration, grid-stride over the batch. Entry i reads row idx[i] and writes output row pos[i]
// (kPos: the sorted path, whose keys are unsigned and src_rows for a bad index) or i.
template <typename I, typename V, int R, bool kCached, bool kPos>
__global__ void gather_kernel(const V* __restrict__ src, int64_t src_rows, int64_t vpr,
                              const V* __restrict__ cache, const int64_t* __restrict__ slot_of,
                              const I* __restrict__ idx, const I* __restrict__ pos, int64_t n,
                              V* __restrict__ out, int log2_tpr, unsigned long long* first_bad,
                              unsigned long long* counters) {
  const int tpr = 1 << log2_tpr;
  const int lane = static_cast<int>(threadIdx.x) & (tpr - 1);
  const int64_t groups_per_block = static_cast<int64_t>(blockDim.x) >> log2_tpr;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * groups_per_block * R;
  unsigned my_hits = 0;
  auto entry = [&](int64_t i, int64_t& r, int64_t& p) {
    r = static_cast<int64_t>(idx[i]);
    p = kPos ? static_cast<int64_t>(pos[i]) : i;
  };
  auto source = [&](int64_t r) -> const V* {
    if constexpr (kCached) {
      const int64_t slot = slot_of[r];
      if (slot >= 0) {
        my_hits += lane == 0;
        return cache + slot * vpr;
      }
    }
    return src + r * vpr;
  };
  auto bad = [&](int64_t p) {
    if (first_bad) atomicMin(first_bad, static_cast<unsigned long long>(p));
  };
  for (int64_t i0 = (blockIdx.x * groups_per_block + (threadIdx.x >> log2_tpr)) * R; i0 < n;
       i0 += stride)
    gather::copy_group<R>(i0, n, src_rows, vpr, lane, tpr, out, entry, source, bad);
  if constexpr (kCached) {
    if (counters) {
      const unsigned warp_hits = __reduce_add_sync(0xffffffffu, my_hits);
      if ((threadIdx.x & 31) == 0 && warp_hits) atomicAdd(&counters[1], warp_hits);
      if (blockIdx.x == 0 && threadIdx.x == 0)
        atomicAdd(&counters[0], static_cast<unsigned long long>(n));
    }
  }
}

// The keys of a sorted gather: keys[i] = gather::sort_key(idx[i]) (src_rows for a bad index),
// pos[i] = i.
template <typename I, typename U>
__global__ void sort_keys_kernel(const I* __restrict__ idx, int64_t n, int64_t src_rows,
                                 U* __restrict__ keys, U* __restrict__ pos) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    keys[i] = static_cast<U>(gather::sort_key(static_cast<int64_t>(idx[i]), src_rows));
    pos[i] = static_cast<U>(i);
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

// Blocks of `kernel` resident on the device at once (its occupancy at kBlockThreads threads
// per block): a launch plan's "resident grid", so that a grid of whole resident grids runs in
// full waves (the four-rows kernels hold more registers and fewer blocks per SM).
template <typename Kernel>
int64_t resident_blocks_of(Kernel kernel) {
  int per_sm = 0;
  TESSERA_CUDA_TRY(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, gather::kBlockThreads, 0));
  return static_cast<int64_t>(per_sm > 0 ? per_sm : 1) * multiprocessor_count();
}

template <typename I, typename V, int R>
void launch_gather_r(const GatherLaunch& g, const I* idx, const I* pos, const gather::Plan& p,
                     StreamHandle stream) {
  // Signed indices: the plain gather; unsigned: the sorted path's keys and positions.
  constexpr bool kPos = std::is_unsigned_v<I>;
  auto s = static_cast<cudaStream_t>(stream);
  const auto* src = static_cast<const V*>(g.src);
  auto* out = static_cast<V*>(g.out);
  if (g.cache) {
    static const int64_t resident = resident_blocks_of(gather_kernel<I, V, R, true, kPos>);
    const auto grid = static_cast<unsigned>(gather::grid_blocks(p, g.n, resident));
    TESSERA_KERNEL_CALL((gather_kernel<I, V, R, true, kPos>), grid, gather::kBlockThreads, 0, s,
                        src, g.src_rows, p.vpr, static_cast<const V*>(g.cache), g.slot_of, idx, pos,
                        g.n, out, p.log2_tpr, g.first_bad, g.counters);
  } else {
    static const int64_t resident = resident_blocks_of(gather_kernel<I, V, R, false, kPos>);
    const auto grid = static_cast<unsigned>(gather::grid_blocks(p, g.n, resident));
    TESSERA_KERNEL_CALL((gather_kernel<I, V, R, false, kPos>), grid, gather::kBlockThreads, 0, s,
                        src, g.src_rows, p.vpr, nullptr, nullptr, idx, pos, g.n, out, p.log2_tpr,
                        g.first_bad, nullptr);
  }
}

template <typename I, typename V>
void launch_gather_v(const GatherLaunch& g, const I* idx, const I* pos, const gather::Plan& p,
                     StreamHandle stream) {
  // 2 and 8 rows per group (diagnostic probes) only for 16-byte vectors; other widths take 4.
  if constexpr (std::is_same_v<V, uint4>) {
    if (p.rows_per_group == 8) return launch_gather_r<I, V, 8>(g, idx, pos, p, stream);
    if (p.rows_per_group == 2) return launch_gather_r<I, V, 2>(g, idx, pos, p, stream);
  }
  if (p.rows_per_group >= 2)
    launch_gather_r<I, V, 4>(g, idx, pos, p, stream);
  else
    launch_gather_r<I, V, 1>(g, idx, pos, p, stream);
}

template <typename I>
void launch_gather(const GatherLaunch& g, const I* idx, const I* pos, const gather::Plan& p,
                   StreamHandle stream) {
  if (g.n == 0 || p.vpr == 0) return;
  switch (p.vec_bytes) {
    case 16:
      return launch_gather_v<I, uint4>(g, idx, pos, p, stream);
    case 8:
      return launch_gather_v<I, uint2>(g, idx, pos, p, stream);
    case 4:
      return launch_gather_v<I, unsigned>(g, idx, pos, p, stream);
    case 2:
      return launch_gather_v<I, unsigned short>(g, idx, pos, p, stream);
    default:
      return launch_gather_v<I, unsigned char>(g, idx, pos, p, stream);
  }
}

template <typename I, typename U>
void launch_sort_keys(const I* idx, int64_t n, int64_t src_rows, U* keys, U* pos,
                      StreamHandle stream) {
  const int64_t want = (n + gather::kBlockThreads - 1) / gather::kBlockThreads;
  const int64_t cap = max_resident_threads() / gather::kBlockThreads * 4;
  TESSERA_KERNEL_CALL((sort_keys_kernel<I, U>), static_cast<unsigned>(want < cap ? want : cap),
                      gather::kBlockThreads, 0, static_cast<cudaStream_t>(stream), idx, n, src_rows,
                      keys, pos);
}

template <typename I, typename V>
void launch_scatter_v(const void* src, int64_t n, const I* idx, void* dst, int64_t dst_rows,
                      unsigned long long* first_bad, const gather::Plan& p, StreamHandle stream) {
  static const int64_t resident = resident_blocks_of(scatter_kernel<I, V>);
  const auto grid = static_cast<unsigned>(gather::grid_blocks(p, n, resident));
  TESSERA_KERNEL_CALL((scatter_kernel<I, V>), grid, gather::kBlockThreads, 0,
                      static_cast<cudaStream_t>(stream), static_cast<const V*>(src), n, p.vpr, idx,
                      static_cast<V*>(dst), dst_rows, p.log2_tpr, first_bad);
}

template <typename I>
void launch_scatter(const void* src, int64_t n, int64_t row_bytes, const I* idx, void* dst,
                    int64_t dst_rows, unsigned long long* first_bad, StreamHandle stream) {
  if (n == 0 || row_bytes == 0) return;
  // One row per group over four resident grids (the gather's plan for wide rows).
  const gather::Plan p =
      gather::plan(row_bytes, n, address_bits(src, dst), false, GatherOrder::kAsGiven, 1);
  switch (p.vec_bytes) {
    case 16:
      return launch_scatter_v<I, uint4>(src, n, idx, dst, dst_rows, first_bad, p, stream);
    case 8:
      return launch_scatter_v<I, uint2>(src, n, idx, dst, dst_rows, first_bad, p, stream);
    case 4:
      return launch_scatter_v<I, unsigned>(src, n, idx, dst, dst_rows, first_bad, p, stream);
    case 2:
      return launch_scatter_v<I, unsigned short>(src, n, idx, dst, dst_rows, first_bad, p, stream);
    default:
      return launch_scatter_v<I, unsigned char>(src, n, idx, dst, dst_rows, first_bad, p, stream);
  }
}

}  // namespace tessera::cuda::detail
