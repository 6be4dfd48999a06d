// CUDA twins of neighbor sampling (ops::sample_neighbors without exclusion), uniform and
// weighted. Bit-identity with the CPU twin comes from drawing exactly the same Philox blocks per
// (key, node, draw index) and applying the same arithmetic (tessera/cuda/sample_rows.hpp); only
// the schedule differs.
#include <cub/device/device_scan.cuh>

#include <cstdint>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/sample_rows.hpp"

namespace tessera::cuda {
namespace {

// counts[i] = edges seed i yields; counts[n] = 0 so an exclusive scan of n + 1 entries leaves
// the total in offsets[n]. `w` null: uniform.
__global__ void count_kernel(const int64_t* __restrict__ indptr, const float* __restrict__ w,
                             const int64_t* __restrict__ seeds, int64_t n, int64_t fanout,
                             bool replace, int64_t* __restrict__ counts) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i <= n;
       i += stride) {
    if (i == n) {
      counts[n] = 0;
      continue;
    }
    const int64_t v = seeds[i];
    const int64_t b = indptr[v], d = indptr[v + 1] - b;
    counts[i] = w ? rows::weighted_count(w + b, d, fanout, replace)
                  : rows::uniform_count(d, fanout, replace);
  }
}

// One thread per seed, running the row functions of tessera/cuda/sample_rows.hpp (checked on
// the CPU against the CPU twin by tests/cuda/test_sample_rows.cpp). The chosen row offsets are
// kept in the seed's slice of `eid`, which is overwritten with edge IDs at the end.
__global__ void sample_kernel(const int64_t* __restrict__ indptr,
                              const int64_t* __restrict__ indices, const int64_t* __restrict__ eids,
                              const float* __restrict__ w, const double* __restrict__ cdf,
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
    int64_t* pos = eid + o;
    if (w)
      rows::weighted_positions(key, node, w + b, cdf + b, d, cnt, fanout, replace, pos);
    else
      rows::uniform_positions(key, node, d, cnt, fanout, replace, pos);
    for (int64_t t = 0; t < cnt; ++t) {
      const int64_t kpos = b + pos[t];
      const int64_t u = indices[kpos];
      src[o + t] = dir_in ? u : v;
      dst[o + t] = dir_in ? v : u;
      pos[t] = eids ? eids[kpos] : kpos;
    }
  }
}

// One thread per row: the sequential double sums of ops::weight_prefix_sums.
__global__ void prefix_kernel(const int64_t* __restrict__ indptr, int64_t num_nodes,
                              const float* __restrict__ w, double* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < num_nodes;
       v += stride) {
    double total = 0;
    for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
      total += static_cast<double>(w[k]);
      out[k] = total;
    }
  }
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 ? b : 65535);
}

DeviceSample sample_impl(const int64_t* indptr, const int64_t* indices, const int64_t* eids,
                         const float* w, const double* cdf, const int64_t* seeds, int64_t n,
                         int64_t fanout, bool replace, bool dir_in, const RngKey& key_in,
                         StreamHandle stream) {
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
  TESSERA_KERNEL_CALL(count_kernel, grid_for(n + 1, threads), threads, 0, s, indptr, w, seeds, n,
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
      sample_kernel, grid_for(n, threads), threads, 0, s, indptr, indices, eids, w, cdf, seeds, n,
      fanout, replace, dir_in, key, off, static_cast<int64_t*>(out.src->data()),
      static_cast<int64_t*>(out.dst->data()), static_cast<int64_t*>(out.eid->data()));
  return out;
}

}  // namespace

DeviceSample sample_neighbors_uniform_impl(const int64_t* indptr, const int64_t* indices,
                                           const int64_t* eids, const int64_t* seeds, int64_t n,
                                           int64_t fanout, bool replace, bool dir_in,
                                           const RngKey& key, StreamHandle stream) {
  return sample_impl(indptr, indices, eids, nullptr, nullptr, seeds, n, fanout, replace, dir_in,
                     key, stream);
}

DeviceSample sample_neighbors_weighted_impl(const int64_t* indptr, const int64_t* indices,
                                            const int64_t* eids, const float* weights,
                                            const double* prefix, const int64_t* seeds, int64_t n,
                                            int64_t fanout, bool replace, bool dir_in,
                                            const RngKey& key, StreamHandle stream) {
  return sample_impl(indptr, indices, eids, weights, prefix, seeds, n, fanout, replace, dir_in, key,
                     stream);
}

void weight_prefix_sums_impl(const int64_t* indptr, int64_t num_nodes, const float* weights,
                             double* out, StreamHandle stream) {
  if (num_nodes == 0) return;
  const int threads = 256;
  TESSERA_KERNEL_CALL(prefix_kernel, grid_for(num_nodes, threads), threads, 0,
                      static_cast<cudaStream_t>(stream), indptr, num_nodes, weights, out);
}

}  // namespace tessera::cuda
