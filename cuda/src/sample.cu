// CUDA twin of uniform neighbor sampling (ops::sample_neighbors without weights or exclusion).
// Bit-identity with the CPU twin comes from drawing exactly the same Philox blocks per
// (key, node, draw index) and applying the same integer arithmetic; only the schedule differs.
#include <cub/device/device_scan.cuh>

#include <cstdint>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"

namespace tessera::cuda {
namespace {

__device__ __forceinline__ int64_t sample_count(int64_t d, int64_t fanout, bool replace) {
  if (d == 0 || fanout == 0) return 0;
  if (fanout < 0 || (!replace && d <= fanout)) return d;
  return fanout;
}

// counts[i] = edges seed i yields; counts[n] = 0 so an exclusive scan of n + 1 entries leaves
// the total in offsets[n].
__global__ void count_kernel(const int64_t* __restrict__ indptr, const int64_t* __restrict__ seeds,
                             int64_t n, int64_t fanout, bool replace,
                             int64_t* __restrict__ counts) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i <= n;
       i += stride) {
    if (i == n) {
      counts[n] = 0;
      continue;
    }
    const int64_t v = seeds[i];
    counts[i] = sample_count(indptr[v + 1] - indptr[v], fanout, replace);
  }
}

// One thread per seed. Without replacement, Floyd's algorithm exactly as the CPU twin: draw t
// picks r in [0, j], j = d - k + t, and takes j instead when r was taken; the chosen storage
// positions are then sorted. The positions are kept in the seed's slice of `eid` (it is
// overwritten with edge IDs at the end), membership is a linear scan: O(k^2) per seed, which is
// what the typical fanouts (5..25) want; the schedule does not change the result.
__global__ void sample_kernel(const int64_t* __restrict__ indptr,
                              const int64_t* __restrict__ indices, const int64_t* __restrict__ eids,
                              const int64_t* __restrict__ seeds, int64_t n, int64_t fanout,
                              bool replace, bool dir_in, RngKey key,
                              const int64_t* __restrict__ offsets, int64_t* __restrict__ src,
                              int64_t* __restrict__ dst, int64_t* __restrict__ eid) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const int64_t v = seeds[i];
    const int64_t b = indptr[v], d = indptr[v + 1] - b;
    const int64_t o = offsets[i], cnt = offsets[i + 1] - o;
    if (cnt == 0) continue;
    const uint64_t node = static_cast<uint64_t>(v);
    int64_t* pos = eid + o;  // storage offsets within the row, then edge IDs
    if (cnt == d && (fanout < 0 || !replace)) {
      for (int64_t t = 0; t < d; ++t)
        pos[t] = t;
    } else if (replace) {
      for (int64_t t = 0; t < cnt; ++t)
        pos[t] = static_cast<int64_t>(
            bounded_u64(philox_u64(philox_draw(key, node, static_cast<uint32_t>(t))),
                        static_cast<uint64_t>(d)));
    } else {
      const int64_t k = cnt;
      for (int64_t t = 0; t < k; ++t) {
        const int64_t j = d - k + t;
        int64_t r = static_cast<int64_t>(
            bounded_u64(philox_u64(philox_draw(key, node, static_cast<uint32_t>(t))),
                        static_cast<uint64_t>(j + 1)));
        for (int64_t q = 0; q < t; ++q)
          if (pos[q] == r) {
            r = j;
            break;
          }
        pos[t] = r;
      }
      for (int64_t t = 1; t < k; ++t) {  // insertion sort: k is a fanout
        const int64_t x = pos[t];
        int64_t q = t - 1;
        while (q >= 0 && pos[q] > x) {
          pos[q + 1] = pos[q];
          --q;
        }
        pos[q + 1] = x;
      }
    }
    for (int64_t t = 0; t < cnt; ++t) {
      const int64_t kpos = b + pos[t];
      const int64_t u = indices[kpos];
      src[o + t] = dir_in ? u : v;
      dst[o + t] = dir_in ? v : u;
      pos[t] = eids ? eids[kpos] : kpos;
    }
  }
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 ? b : 65535);
}

}  // namespace

DeviceSample sample_neighbors_uniform_impl(const int64_t* indptr, const int64_t* indices,
                                           const int64_t* eids, const int64_t* seeds, int64_t n,
                                           int64_t fanout, bool replace, bool dir_in,
                                           const RngKey& key_in, StreamHandle stream) {
  DeviceSample out;
  if (n == 0 || fanout == 0) return out;
  RngKey key = key_in;
  key.stream = RngStream::kNeighbor;
  auto s = static_cast<cudaStream_t>(stream);
  CachingAllocator& alloc = scratch_allocator();
  const int threads = 256;
  ScratchBuffer counts(alloc, static_cast<size_t>(n + 1) * sizeof(int64_t), stream);
  ScratchBuffer offsets(alloc, static_cast<size_t>(n + 1) * sizeof(int64_t), stream);
  auto* c = static_cast<int64_t*>(counts.data());
  auto* off = static_cast<int64_t*>(offsets.data());
  TESSERA_KERNEL_CALL(count_kernel, grid_for(n + 1, threads), threads, 0, s, indptr, seeds, n,
                      fanout, replace, c);
  size_t temp = 0;
  TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, c, off, n + 1, s));
  {
    ScratchBuffer tmp(alloc, temp, stream);
    TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(tmp.data(), temp, c, off, n + 1, s));
  }
  int64_t total = 0;
  TESSERA_CUDA_TRY(cudaMemcpyAsync(&total, off + n, sizeof total, cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_TRY(cudaStreamSynchronize(s));  // the one synchronization: the output size
  out.size = total;
  if (total == 0) return out;
  const size_t bytes = static_cast<size_t>(total) * sizeof(int64_t);
  out.src = std::make_unique<ScratchBuffer>(alloc, bytes, stream);
  out.dst = std::make_unique<ScratchBuffer>(alloc, bytes, stream);
  out.eid = std::make_unique<ScratchBuffer>(alloc, bytes, stream);
  TESSERA_KERNEL_CALL(
      sample_kernel, grid_for(n, threads), threads, 0, s, indptr, indices, eids, seeds, n, fanout,
      replace, dir_in, key, off, static_cast<int64_t*>(out.src->data()),
      static_cast<int64_t*>(out.dst->data()), static_cast<int64_t*>(out.eid->data()));
  return out;
}

}  // namespace tessera::cuda
