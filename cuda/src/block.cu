// SPDX-License-Identifier: Apache-2.0
// CUDA twin of block compaction (ops::to_block): destination nodes first, then new source
// nodes in order of first appearance, identical to the CPU twin. Order comes from positions,
// not from the order in which threads win races: every node's table value is the smallest
// position (dst i -> i, edge j -> nd + j) at which it appears.
#include <cub/device/device_scan.cuh>

#include <cstdint>

#include "tessera/core/error.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"

namespace tessera::cuda {
namespace {

constexpr unsigned long long kEmpty = ~0ull;

__device__ __forceinline__ unsigned long long hash_key(unsigned long long k) {
  k ^= k >> 33;  // murmur3 finalizer
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

__device__ __forceinline__ unsigned long long insert(unsigned long long* keys,
                                                     unsigned long long mask,
                                                     unsigned long long key) {
  unsigned long long slot = hash_key(key) & mask;
  while (true) {
    const unsigned long long prev = atomicCAS(&keys[slot], kEmpty, key);
    if (prev == kEmpty || prev == key) return slot;
    slot = (slot + 1) & mask;
  }
}

__device__ __forceinline__ long long find(const unsigned long long* keys, unsigned long long mask,
                                          unsigned long long key) {
  unsigned long long slot = hash_key(key) & mask;
  while (true) {
    const unsigned long long k = keys[slot];
    if (k == key) return static_cast<long long>(slot);
    if (k == kEmpty) return -1;
    slot = (slot + 1) & mask;
  }
}

#define TESSERA_GRID_STRIDE(i, n)                                                        \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void insert_kernel(const int64_t* __restrict__ ids, int64_t n, int64_t base,
                              unsigned long long* keys, unsigned long long* vals,
                              unsigned long long mask) {
  TESSERA_GRID_STRIDE(i, n) {
    if (ids[i] < 0) continue;  // never a key (its bits would be the empty marker); flagged later
    const unsigned long long slot = insert(keys, mask, static_cast<unsigned long long>(ids[i]));
    atomicMin(&vals[slot], static_cast<unsigned long long>(base + i));
  }
}

// flags[0]: smallest dst position that repeats an earlier one. is_new[j] = 1 when edge j is
// its source node's first appearance (and that node is not a destination node).
__global__ void mark_kernel(const int64_t* __restrict__ dst_nodes, int64_t nd,
                            const int64_t* __restrict__ edge_src, int64_t m,
                            const unsigned long long* keys, const unsigned long long* vals,
                            unsigned long long mask, int64_t* __restrict__ is_new,
                            unsigned long long* flags) {
  TESSERA_GRID_STRIDE(i, nd + m + 1) {
    if (i < nd) {
      if (dst_nodes[i] < 0) continue;  // the ops validator rejects these; never read vals[-1]
      const long long s = find(keys, mask, static_cast<unsigned long long>(dst_nodes[i]));
      if (vals[s] != static_cast<unsigned long long>(i))
        atomicMin(&flags[0], static_cast<unsigned long long>(i));
    } else if (i < nd + m) {
      const int64_t j = i - nd;
      if (edge_src[j] < 0) {
        is_new[j] = 0;
        continue;
      }
      const long long s = find(keys, mask, static_cast<unsigned long long>(edge_src[j]));
      is_new[j] = vals[s] == static_cast<unsigned long long>(i) ? 1 : 0;
    } else {
      is_new[m] = 0;
    }
  }
}

// New nodes take local IDs nd + rank; the table is rewritten to local IDs (dst nodes already
// hold theirs).
__global__ void number_kernel(const int64_t* __restrict__ edge_src, int64_t m, int64_t nd,
                              const int64_t* __restrict__ is_new, const int64_t* __restrict__ rank,
                              const unsigned long long* keys, unsigned long long* vals,
                              unsigned long long mask, int64_t* __restrict__ src_nodes) {
  TESSERA_GRID_STRIDE(j, m) {
    if (!is_new[j]) continue;
    const long long s = find(keys, mask, static_cast<unsigned long long>(edge_src[j]));
    vals[s] = static_cast<unsigned long long>(nd + rank[j]);
    src_nodes[nd + rank[j]] = edge_src[j];
  }
}

// flags[1]: the first edge whose destination is not a destination node.
__global__ void relabel_kernel(const int64_t* __restrict__ edge_src,
                               const int64_t* __restrict__ edge_dst, int64_t m, int64_t nd,
                               const unsigned long long* keys, const unsigned long long* vals,
                               unsigned long long mask, int64_t* __restrict__ src,
                               int64_t* __restrict__ dst, unsigned long long* flags) {
  TESSERA_GRID_STRIDE(j, m) {
    if (edge_src[j] < 0 || edge_dst[j] < 0) {  // not a node ID: reported as a bad edge
      atomicMin(&flags[1], static_cast<unsigned long long>(j));
      src[j] = dst[j] = -1;
      continue;
    }
    src[j] =
        static_cast<int64_t>(vals[find(keys, mask, static_cast<unsigned long long>(edge_src[j]))]);
    const long long s = find(keys, mask, static_cast<unsigned long long>(edge_dst[j]));
    const int64_t d = s < 0 ? -1 : static_cast<int64_t>(vals[s]);
    if (d < 0 || d >= nd) {
      atomicMin(&flags[1], static_cast<unsigned long long>(j));
      dst[j] = -1;
    } else {
      dst[j] = d;
    }
  }
}

unsigned grid_for(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 ? b : 65535);
}

int64_t read_one(const int64_t* d, cudaStream_t s) {
  int64_t v = 0;
  TESSERA_CUDA_TRY(cudaMemcpyAsync(&v, d, sizeof v, cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_TRY(cudaStreamSynchronize(s));
  return v;
}

}  // namespace

DeviceBlock to_block_impl(const int64_t* edge_src, const int64_t* edge_dst, int64_t m,
                          const int64_t* dst_nodes, int64_t nd, StreamHandle stream) {
  DeviceBlock out;
  out.num_dst = nd;
  out.num_edges = m;
  auto s = static_cast<cudaStream_t>(stream);
  CachingAllocator& alloc = scratch_allocator();
  unsigned long long cap = 1024;
  while (cap < 2ull * static_cast<unsigned long long>(nd + m))
    cap <<= 1;
  const unsigned long long mask = cap - 1;
  ScratchBuffer keys_buf(alloc, cap * sizeof(unsigned long long), stream);
  ScratchBuffer vals_buf(alloc, cap * sizeof(unsigned long long), stream);
  ScratchBuffer flags_buf(alloc, 2 * sizeof(unsigned long long), stream);
  ScratchBuffer new_buf(alloc, static_cast<size_t>(m + 1) * sizeof(int64_t), stream);
  ScratchBuffer rank_buf(alloc, static_cast<size_t>(m + 1) * sizeof(int64_t), stream);
  auto* keys = static_cast<unsigned long long*>(keys_buf.data());
  auto* vals = static_cast<unsigned long long*>(vals_buf.data());
  auto* flags = static_cast<unsigned long long*>(flags_buf.data());
  auto* is_new = static_cast<int64_t*>(new_buf.data());
  auto* rank = static_cast<int64_t*>(rank_buf.data());
  memset_async(keys, 0xff, keys_buf.size(), s);
  memset_async(vals, 0xff, vals_buf.size(), s);
  memset_async(flags, 0xff, flags_buf.size(), s);
  // Upper bound of the source nodes; the exact count is known after the scan.
  out.src_nodes =
      std::make_unique<ScratchBuffer>(alloc, static_cast<size_t>(nd + m) * sizeof(int64_t), stream);
  out.src =
      std::make_unique<ScratchBuffer>(alloc, static_cast<size_t>(m) * sizeof(int64_t), stream);
  out.dst =
      std::make_unique<ScratchBuffer>(alloc, static_cast<size_t>(m) * sizeof(int64_t), stream);
  auto* src_nodes = static_cast<int64_t*>(out.src_nodes->data());
  copy_async(src_nodes, dst_nodes, static_cast<size_t>(nd) * sizeof(int64_t), s);

  TESSERA_KERNEL_CALL(insert_kernel, grid_for(nd), 256, 0, s, dst_nodes, nd, int64_t{0}, keys, vals,
                      mask);
  TESSERA_KERNEL_CALL(insert_kernel, grid_for(m), 256, 0, s, edge_src, m, nd, keys, vals, mask);
  TESSERA_KERNEL_CALL(mark_kernel, grid_for(nd + m + 1), 256, 0, s, dst_nodes, nd, edge_src, m,
                      keys, vals, mask, is_new, flags);
  size_t temp = 0;
  TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, is_new, rank, m + 1, s));
  {
    ScratchBuffer tmp(alloc, temp, stream);
    TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(tmp.data(), temp, is_new, rank, m + 1, s));
  }
  TESSERA_KERNEL_CALL(number_kernel, grid_for(m), 256, 0, s, edge_src, m, nd, is_new, rank, keys,
                      vals, mask, src_nodes);
  TESSERA_KERNEL_CALL(relabel_kernel, grid_for(m), 256, 0, s, edge_src, edge_dst, m, nd, keys, vals,
                      mask, static_cast<int64_t*>(out.src->data()),
                      static_cast<int64_t*>(out.dst->data()), flags);

  unsigned long long h_flags[2] = {kEmpty, kEmpty};
  int64_t num_new = 0;
  TESSERA_CUDA_TRY(cudaMemcpyAsync(h_flags, flags, sizeof h_flags, cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_TRY(cudaMemcpyAsync(&num_new, rank + m, sizeof num_new, cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_TRY(cudaStreamSynchronize(s));  // the one synchronization
  if (h_flags[0] != kEmpty)
    TESSERA_FAIL(ValueError, "to_block: destination node {} is listed twice",
                 read_one(dst_nodes + h_flags[0], s));
  if (h_flags[1] != kEmpty) {
    const int64_t j = static_cast<int64_t>(h_flags[1]);
    TESSERA_FAIL(ValueError,
                 "to_block: edge {} ({} -> {}) ends at a node that is not a destination node", j,
                 read_one(edge_src + j, s), read_one(edge_dst + j, s));
  }
  out.num_src = nd + num_new;
  return out;
}

}  // namespace tessera::cuda
