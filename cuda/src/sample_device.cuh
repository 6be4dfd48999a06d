// SPDX-License-Identifier: Apache-2.0
// Internal: device-side pieces shared by the sampling kernels (sample_neighbors.cu) and the
// compaction passes (sampler.cu): the group executor, the batch prologue, a frontier node's row
// and key, a batch's node table, and the relabel loop.
#pragma once

#include <cstdint>

#include "sample_launch.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/sample_group.hpp"
#include "tessera/cuda/sample_items.hpp"

namespace tessera::cuda::detail {

/// A group of G lanes of one warp running the steps of tessera/cuda/sample_group.hpp: each step
/// on every lane, then __syncwarp over the group's lanes (groups of a warp take their own paths).
struct WarpExec {
  int G;
  int lane;
  unsigned mask;
  template <typename F>
  __device__ void step(F&& f) const {
    f(lane);
    __syncwarp(mask);
  }
};

/// The lanes of a G-lane group in its warp.
__device__ inline unsigned group_mask(int G) {
  if (G == 32) return 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  return ((1u << G) - 1u) << (lane & ~static_cast<unsigned>(G - 1));
}

/// Per-block view of the batches of a launch: start[k] is the first flat item of batch k,
/// start[K] the number of items; mstart the same over the previous hop's edges (relabel).
struct Batches {
  int K;
  int64_t start[kMaxBatches + 1];
  int64_t mstart[kMaxBatches + 1];
};

/// Fills `b` (shared) from the sizes of this hop (thread 0), then synchronizes the block.
__device__ inline void batch_prologue(const HopArgs& a, Batches& b) {
  if (threadIdx.x == 0) {
    const int K = a.P ? a.P->K : 1;
    int64_t acc = 0, macc = 0;
    for (int k = 0; k < K; ++k) {
      b.start[k] = acc;
      acc += a.P ? a.width[k] : a.n;
      b.mstart[k] = macc;
      if (a.rel_edges) macc += a.rel_edges[k];
    }
    b.start[K] = acc;
    b.mstart[K] = macc;
    b.K = K;
  }
  __syncthreads();
}

/// Frontier node i of batch k (the ID written into edges).
__device__ inline int64_t frontier_node(const HopArgs& a, int k, int64_t i) {
  if (!a.P) return a.seeds[i];
  if (a.hop == 0) return a.P->seeds[a.P->seed_off[k] + i];
  return a.P->nodes[k * a.node_stride + i];
}

/// The row of frontier node v at flat item gi (its Philox node is node_key(a.g, row)); -1 when
/// out of range.
__device__ inline int64_t row_of(const HopArgs& a, int64_t v, int64_t gi) {
  if (v < 0 || (a.id_space > 0 && v >= a.id_space)) return -1;
  int64_t row = v;
  if (a.seed_rows) {
    row = a.seed_rows[gi];
  } else if (a.map.rows) {
    const int64_t r = v - a.map.base;
    row = r >= 0 && r < a.map.count ? a.map.rows[r] : -1;
  }
  return row >= 0 && row < a.g.num_nodes ? row : -1;
}

__device__ inline RngKey key_of(const HopArgs& a, int k) {
  RngKey key = a.P ? a.P->keys[k] : a.key;
  if (a.P) key.layer = static_cast<uint32_t>(a.hop);
  key.stream = RngStream::kNeighbor;
  return key;
}

__device__ inline items::TableView table_of(const HopArgs& a, int k) {
  items::TableView t;
  if (!a.table_vals) return t;
  t.vals = a.table_vals + k * a.table_stride;
  t.keys = a.table_keys ? a.table_keys + k * a.table_stride : nullptr;
  t.mask = a.table_mask;
  t.gen = a.P ? a.P->gen : 0;
  return t;
}

/// First padded slot of frontier node i of batch k at flat item gi.
__device__ inline int64_t slot_of(const HopArgs& a, const Batches& b, int k, int64_t i,
                                  int64_t gi) {
  return a.base ? a.base[gi] - a.base[b.start[k]] : i * a.fanout;
}

/// The relabel pass over the previous hop's dense edges, one thread per edge.
__device__ inline void relabel_loop(const HopArgs& a, const Batches& b) {
  if (a.rel_hop < 0) return;
  const int64_t total = b.mstart[b.K];
  int64_t* const src = a.outs[3 * a.rel_hop];
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < total;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = group::batch_of(b.mstart, b.K, j);
    items::relabel_item(table_of(a, k), src + k * a.rel_stride + (j - b.mstart[k]));
  }
}

/// Carves a group's scratch out of dynamic shared memory: state, a, b (cap entries each), then
/// the stage (bytes rounded to 16).
struct GroupSmem {
  group::Scratch s;
  unsigned char* stage;
};
__device__ inline GroupSmem carve(unsigned char* smem, size_t group_bytes, int group_in_block,
                                  int64_t cap) {
  unsigned char* p = smem + group_bytes * group_in_block;
  GroupSmem g;
  g.s.st = reinterpret_cast<group::Scratch::State*>(p);
  p += 48;
  g.s.a = reinterpret_cast<int64_t*>(p);
  g.s.b = g.s.a + cap;
  g.stage = reinterpret_cast<unsigned char*>(g.s.b + cap);
  return g;
}

}  // namespace tessera::cuda::detail
