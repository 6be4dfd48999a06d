// SPDX-License-Identifier: Apache-2.0
// CUDA twin of ops::sample_neighbors (host/ops/src/sample_neighbors.cpp): the sample pass of the
// GPU sampler (a group of lanes per frontier node, or one thread per node for edge exclusion and
// fanouts above group::kMaxGroupFanout), the count pass of exact offsets, the one-hop entry
// points, and the per-row weight tables formed at placement. Bit-identity with the CPU twin comes
// from the row functions of tessera/cuda/sample_group.hpp and sample_rows.hpp (checked on the
// CPU by tests/cuda/test_sample_rows.cpp); this file only schedules them.
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "gather_launch.hpp"
#include "sample_device.cuh"
#include "tessera/core/error.hpp"
#include "tessera/cuda/kernels.hpp"

namespace tessera::cuda {
namespace detail {
namespace {

// UVA: the group reads the row's bytes [from, to) (16-byte aligned, within the padded
// allocation) into its stage, 16 bytes per lane per step.
__device__ inline void stage_row(const WarpExec& ex, const GraphView& g, int64_t rb, int64_t d,
                                 unsigned char* stage, int64_t* from) {
  const int64_t eb = g.edge_bytes();
  const int64_t lo = (rb * eb) & ~int64_t{15};
  const int64_t hi = ((rb + d) * eb + 15) & ~int64_t{15};
  const auto* src = reinterpret_cast<const uint4*>(
      (g.layout == Adjacency::kPacked ? reinterpret_cast<const unsigned char*>(g.packed)
                                      : reinterpret_cast<const unsigned char*>(g.pairs)) +
      lo);
  auto* dst = reinterpret_cast<uint4*>(stage);
  const int64_t n = (hi - lo) / 16;
  for (int64_t c = ex.lane; c < n; c += ex.G)
    dst[c] = src[c];
  __syncwarp(ex.mask);
  *from = lo;
}

template <bool kWeighted>
__global__ void __launch_bounds__(kBlockThreads)
    sample_group_kernel(const __grid_constant__ HopArgs a, size_t group_bytes) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Batches b;
  batch_prologue(a, b);
  relabel_loop(a, b);
  const int G = a.G;
  const int gpb = kBlockThreads / G;
  const int gib = static_cast<int>(threadIdx.x) / G;
  const WarpExec ex{G, static_cast<int>(threadIdx.x) & (G - 1), group_mask(G)};
  const GroupSmem sm = carve(smem, group_bytes, gib, a.cap);
  const int64_t total = b.start[b.K];
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * gpb + gib; gi < total;
       gi += static_cast<int64_t>(gridDim.x) * gpb) {
    const int k = group::batch_of(b.start, b.K, gi);
    const int64_t i = gi - b.start[k];
    const int64_t v = frontier_node(a, k, i);
    const int64_t row = row_of(a, v, gi);
    const items::TableView t = table_of(a, k);
    if (a.P && a.hop == 0 && ex.lane == 0) {
      a.P->nodes[k * a.node_stride + i] = v;
      if (t.vals && row >= 0) t.raise(v, group::final_code(t.gen, i));
    }
    if (row < 0) {
      if (ex.lane == 0) {
        a.cnt[gi] = 0;
        if (a.errors) atomicOr(a.errors, kErrSeedRange);
      }
      continue;
    }
    const int64_t rb = a.g.indptr[row], d = a.g.indptr[row + 1] - rb;
    items::PadEmit e;
    e.g = &a.g;
    e.slot0 = slot_of(a, b, k, i, gi);
    e.nbr = a.pad_nbr + k * a.pad_stride;
    e.eid = a.pad_eid + k * a.pad_stride;
    e.table = t;
    if (a.stage_bytes > 0 && a.g.layout != Adjacency::kSplit && d > 0 && a.fanout != 0 &&
        d * a.g.edge_bytes() + 16 <= a.stage_bytes) {
      stage_row(ex, a.g, rb, d, sm.stage, &e.stage_from);
      e.stage = sm.stage;
    }
    const int64_t c = items::sample_item<kWeighted>(ex, a.g, key_of(a, k), row, rb, d, a.fanout,
                                                    a.replace, sm.s, e);
    if (ex.lane == 0) a.cnt[gi] = c;
    __syncwarp(ex.mask);  // the stage and scratch are reused by the group's next node
  }
  for (int64_t j = total + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       j < a.items_bound; j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    a.cnt[j] = 0;
}

// One thread per frontier node: edge exclusion (candidate scratch from the count pass), or a
// fanout above what a group's shared scratch holds.
__global__ void __launch_bounds__(kBlockThreads)
    sample_thread_kernel(const __grid_constant__ HopArgs a) {
  __shared__ Batches b;
  batch_prologue(a, b);
  relabel_loop(a, b);
  const int64_t total = b.start[b.K];
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; gi < total;
       gi += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = group::batch_of(b.start, b.K, gi);
    const int64_t i = gi - b.start[k];
    const int64_t v = frontier_node(a, k, i);
    const int64_t row = row_of(a, v, gi);
    const items::TableView t = table_of(a, k);
    if (a.P && a.hop == 0) {
      a.P->nodes[k * a.node_stride + i] = v;
      if (t.vals && row >= 0) t.raise(v, group::final_code(t.gen, i));
    }
    if (row < 0) {
      a.cnt[gi] = 0;
      if (a.errors) atomicOr(a.errors, kErrSeedRange);
      continue;
    }
    const int64_t rb = a.g.indptr[row], d = a.g.indptr[row + 1] - rb;
    int64_t c = 0, scratch = 0, so = 0;
    if (a.base) {  // exact: the count pass sized this node's slots and scratch
      c = a.base[gi + 1] - a.base[gi];
      if (a.soff) {
        so = a.soff[gi];
        scratch = a.soff[gi + 1] - so;
      }
    } else if (a.weighted) {
      c = a.g.row_info ? rows::weighted_count_of(a.g.row_info[2 * row], a.fanout, a.replace)
                       : rows::weighted_count(a.g.weights + rb, d, a.fanout, a.replace);
      if (d == 0) c = 0;
    } else {
      c = rows::uniform_count(d, a.fanout, a.replace);
    }
    items::PadEmit e;
    e.g = &a.g;
    e.slot0 = slot_of(a, b, k, i, gi);
    e.nbr = a.pad_nbr + k * a.pad_stride;
    e.eid = a.pad_eid + k * a.pad_stride;
    e.table = t;
    items::sample_item_thread(a.g, key_of(a, k), row, a.fanout, a.replace, a.ex, c, scratch,
                              a.cand + so, a.cand_w ? a.cand_w + so : nullptr,
                              a.cand_cdf ? a.cand_cdf + so : nullptr, e);
    a.cnt[gi] = c;
  }
  for (int64_t j = total + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       j < a.items_bound; j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    a.cnt[j] = 0;
}

// The count pass of exact offsets (fanout -1, edge exclusion): per node its edges and, with
// exclusion, its candidate scratch entries; zeros up to items_bound.
__global__ void __launch_bounds__(kBlockThreads) count_kernel(const __grid_constant__ HopArgs a) {
  __shared__ Batches b;
  batch_prologue(a, b);
  const int64_t total = b.start[b.K];
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; gi < a.items_bound;
       gi += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    rows::SeedCounts c;
    if (gi < total) {
      const int k = group::batch_of(b.start, b.K, gi);
      const int64_t row = row_of(a, frontier_node(a, k, gi - b.start[k]), gi);
      if (row >= 0)
        c = rows::seed_counts_by(a.g.indptr, items::EidOfView{&a.g}, a.g.weights, a.ex, row,
                                 a.fanout, a.replace);
    }
    a.cnt[gi] = c.edges;
    if (a.scnt) a.scnt[gi] = c.scratch;
  }
}

// One-hop output: node i's edges from its padded slots to dense positions off[i] onwards, as
// (neighbor -> seed) for in-edges or (seed -> neighbor) for out-edges.
__global__ void __launch_bounds__(kBlockThreads)
    densify_kernel(const __grid_constant__ HopArgs a, const int64_t* off, int64_t* src,
                   int64_t* dst, int64_t* eid, bool dir_in) {
  const int G = a.G;
  const int gpb = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) & (G - 1);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * gpb + static_cast<int>(threadIdx.x) / G;
       i < a.n; i += static_cast<int64_t>(gridDim.x) * gpb) {
    const int64_t c = a.cnt[i], o = off[i];
    const int64_t slot0 = a.base ? a.base[i] : i * a.fanout;
    const int64_t v = a.seeds[i];
    for (int64_t q = lane; q < c; q += G) {
      const int64_t u = a.pad_nbr[slot0 + q];
      src[o + q] = dir_in ? u : v;
      dst[o + q] = dir_in ? v : u;
      eid[o + q] = a.pad_eid[slot0 + q];
    }
  }
}

// One thread per row: the sequential double sums of ops::weight_prefix_sums and the row's
// {positive weights, last positive position}.
__global__ void row_tables_kernel(const int64_t* __restrict__ indptr, int64_t num_nodes,
                                  const float* __restrict__ w, double* __restrict__ out,
                                  int64_t* __restrict__ info) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < num_nodes;
       v += stride) {
    double total = 0;
    int64_t p = 0, last = 0;
    const int64_t b = indptr[v], e = indptr[v + 1];
    for (int64_t k = b; k < e; ++k) {
      const float x = w[k];
      total += static_cast<double>(x);
      out[k] = total;
      if (x > 0) {
        ++p;
        last = k - b;
      }
    }
    if (info) {
      info[2 * v] = p;
      info[2 * v + 1] = last;
    }
  }
}

}  // namespace

GroupShape group_shape(const HopArgs& a) {
  GroupShape s;
  s.groups_per_block = kBlockThreads / a.G;
  s.group_bytes = 48 + 16 * static_cast<size_t>(a.cap) +
                  ((static_cast<size_t>(a.stage_bytes) + 15) & ~static_cast<size_t>(15));
  s.smem_bytes = s.group_bytes * static_cast<size_t>(s.groups_per_block);
  return s;
}

// A block may take more than the default 48 KiB of dynamic shared memory only once the kernel
// opts in (UVA rows are staged whole in shared memory: 72 KiB per block with 1 KiB stages).
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, size_t bytes) {
  constexpr size_t kDefault = 48 * 1024;
  if (bytes <= kDefault) return;
  int device = 0, optin = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&device));
  TESSERA_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  TESSERA_ASSERT(bytes <= static_cast<size_t>(optin),
                 "sample pass: {} bytes of shared memory per block, the device allows {}", bytes,
                 optin);
  TESSERA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
}

unsigned grid_for_items(int64_t items, int64_t per_block) {
  const int64_t want = (std::max<int64_t>(items, 1) + per_block - 1) / per_block;
  const int64_t cap = max_resident_threads() / kBlockThreads * 2;
  return static_cast<unsigned>(std::min(want, cap));
}

void launch_sample(const HopArgs& a, int64_t grid_items, StreamHandle stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t items = std::max(grid_items, a.items_bound);
  if (a.thread_mode) {
    TESSERA_KERNEL_CALL(sample_thread_kernel, grid_for_items(items, kBlockThreads), kBlockThreads,
                        0, s, a);
    return;
  }
  const GroupShape sh = group_shape(a);
  const unsigned grid = grid_for_items(items, sh.groups_per_block);
  if (a.weighted) {
    allow_dynamic_smem(sample_group_kernel<true>, sh.smem_bytes);
    TESSERA_KERNEL_CALL(sample_group_kernel<true>, grid, kBlockThreads, sh.smem_bytes, s, a,
                        sh.group_bytes);
  } else {
    allow_dynamic_smem(sample_group_kernel<false>, sh.smem_bytes);
    TESSERA_KERNEL_CALL(sample_group_kernel<false>, grid, kBlockThreads, sh.smem_bytes, s, a,
                        sh.group_bytes);
  }
}

void launch_count(const HopArgs& a, int64_t grid_items, StreamHandle stream) {
  TESSERA_KERNEL_CALL(count_kernel,
                      grid_for_items(std::max(grid_items, a.items_bound), kBlockThreads),
                      kBlockThreads, 0, static_cast<cudaStream_t>(stream), a);
}

void launch_densify(const HopArgs& a, const int64_t* off, int64_t* src, int64_t* dst, int64_t* eid,
                    bool dir_in, StreamHandle stream) {
  TESSERA_KERNEL_CALL(densify_kernel, grid_for_items(a.n, kBlockThreads / a.G), kBlockThreads, 0,
                      static_cast<cudaStream_t>(stream), a, off, src, dst, eid, dir_in);
}

size_t exclusive_sum_i64(void* temp, size_t temp_bytes, const int64_t* in, int64_t* out, int64_t n,
                         StreamHandle stream) {
  TESSERA_EXPECTS(n + 1 < (int64_t{1} << 31), ValueError,
                  "sampling: {} frontier nodes in one launch exceed a scan's 2^31 items", n);
  TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, static_cast<int>(n + 1),
                                                 static_cast<cudaStream_t>(stream)));
  return temp_bytes;
}

size_t exclusive_sum_u64(void* temp, size_t temp_bytes, const uint64_t* in, uint64_t* out,
                         int64_t n, StreamHandle stream) {
  TESSERA_EXPECTS(n + 1 < (int64_t{1} << 31), ValueError,
                  "sampling: {} frontier nodes in one launch exceed a scan's 2^31 items", n);
  TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, static_cast<int>(n + 1),
                                                 static_cast<cudaStream_t>(stream)));
  return temp_bytes;
}

}  // namespace detail

namespace {

// Scratch from the caching allocator on `stream`, as int64.
struct I64Scratch {
  ScratchBuffer buf;
  I64Scratch(int64_t n, StreamHandle stream)
      : buf(scratch_allocator(), static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(int64_t),
            stream) {}
  int64_t* get() const { return static_cast<int64_t*>(buf.data()); }
};

void scan_i64(const int64_t* in, int64_t* out, int64_t n, StreamHandle stream) {
  const size_t bytes = detail::exclusive_sum_i64(nullptr, 0, in, out, n, stream);
  ScratchBuffer temp(scratch_allocator(), bytes, stream);
  detail::exclusive_sum_i64(temp.data(), bytes, in, out, n, stream);
}

}  // namespace

DeviceSample sample_neighbors_impl(const GraphView& g, const int64_t* seeds, int64_t n,
                                   int64_t fanout, bool replace, bool dir_in, const RngKey& key,
                                   StreamHandle stream, const rows::ExcludeView* exclude,
                                   const int64_t* seed_rows) {
  DeviceSample out;
  if (n == 0 || fanout == 0) return out;
  auto s = static_cast<cudaStream_t>(stream);
  detail::HopArgs a;
  a.g = g;
  a.seeds = seeds;
  a.n = n;
  a.key = key;
  a.key.stream = RngStream::kNeighbor;
  a.seed_rows = seed_rows;
  a.fanout = fanout;
  a.replace = replace;
  a.weighted = g.weights != nullptr;
  const bool excluding = exclude != nullptr && exclude->num_rows > 0;
  if (excluding) a.ex = *exclude;
  const bool exact = fanout < 0 || excluding;
  a.thread_mode = excluding || fanout > group::kMaxGroupFanout;
  a.G = group::group_size(fanout);
  a.cap = group::scratch_entries(fanout, a.G);
  a.stage_bytes = g.uva ? 1024 : 0;
  a.items_bound = n + 1;
  I64Scratch cnt(n + 1, stream), off(n + 1, stream);
  a.cnt = cnt.get();
  std::unique_ptr<I64Scratch> scnt, soff, pad_nbr, pad_eid, cand;
  std::unique_ptr<ScratchBuffer> cand_w, cand_cdf;
  int64_t total = 0;
  if (exact) {
    scnt = std::make_unique<I64Scratch>(n + 1, stream);
    soff = std::make_unique<I64Scratch>(n + 1, stream);
    a.scnt = excluding ? scnt->get() : nullptr;
    detail::launch_count(a, n, stream);
    scan_i64(cnt.get(), off.get(), n, stream);
    int64_t totals[2] = {0, 0};
    if (excluding) {
      scan_i64(scnt->get(), soff->get(), n, stream);
      // Both totals side by side in the count buffer (read already), one copy back.
      TESSERA_CUDA_TRY(cudaMemcpyAsync(cnt.get(), off.get() + n, 8, cudaMemcpyDeviceToDevice, s));
      TESSERA_CUDA_TRY(
          cudaMemcpyAsync(cnt.get() + 1, soff->get() + n, 8, cudaMemcpyDeviceToDevice, s));
      TESSERA_CUDA_TRY(cudaMemcpyAsync(totals, cnt.get(), 16, cudaMemcpyDeviceToHost, s));
    } else {
      TESSERA_CUDA_TRY(cudaMemcpyAsync(totals, off.get() + n, 8, cudaMemcpyDeviceToHost, s));
    }
    TESSERA_CUDA_TRY(cudaStreamSynchronize(s));  // the sizes of the exact slots and scratch
    total = totals[0];
    a.base = off.get();
    a.scnt = nullptr;
    if (excluding) {
      a.soff = soff->get();
      cand = std::make_unique<I64Scratch>(totals[1], stream);
      a.cand = cand->get();
      if (a.weighted) {
        const size_t m = static_cast<size_t>(std::max<int64_t>(totals[1], 1));
        cand_w = std::make_unique<ScratchBuffer>(scratch_allocator(), m * sizeof(float), stream);
        cand_cdf = std::make_unique<ScratchBuffer>(scratch_allocator(), m * sizeof(double), stream);
        a.cand_w = static_cast<float*>(cand_w->data());
        a.cand_cdf = static_cast<double*>(cand_cdf->data());
      }
    }
    if (total == 0) return out;
  } else {
    total = n * fanout;  // the bound; the exact size comes back after the densify pass
  }
  pad_nbr = std::make_unique<I64Scratch>(total, stream);
  pad_eid = std::make_unique<I64Scratch>(total, stream);
  a.pad_nbr = pad_nbr->get();
  a.pad_eid = pad_eid->get();
  detail::launch_sample(a, n, stream);
  if (!exact) scan_i64(cnt.get(), off.get(), n, stream);
  const size_t bytes = static_cast<size_t>(total) * sizeof(int64_t);
  out.src = std::make_unique<ScratchBuffer>(scratch_allocator(), bytes, stream);
  out.dst = std::make_unique<ScratchBuffer>(scratch_allocator(), bytes, stream);
  out.eid = std::make_unique<ScratchBuffer>(scratch_allocator(), bytes, stream);
  detail::launch_densify(a, off.get(), static_cast<int64_t*>(out.src->data()),
                         static_cast<int64_t*>(out.dst->data()),
                         static_cast<int64_t*>(out.eid->data()), dir_in, stream);
  if (!exact) {
    TESSERA_CUDA_TRY(cudaMemcpyAsync(&total, off.get() + n, 8, cudaMemcpyDeviceToHost, s));
    TESSERA_CUDA_TRY(cudaStreamSynchronize(s));  // the one synchronization: the output size
  }
  out.size = total;
  if (total == 0) out = DeviceSample{};
  return out;
}

DeviceSample sample_neighbors_uniform_impl(const int64_t* indptr, const int64_t* indices,
                                           const int64_t* eids, const int64_t* seeds, int64_t n,
                                           int64_t fanout, bool replace, bool dir_in,
                                           const RngKey& key, StreamHandle stream,
                                           const rows::ExcludeView* exclude,
                                           const int64_t* seed_rows) {
  GraphView g;
  g.num_nodes = INT64_MAX;  // the raw-array entry points trust their seeds
  g.indptr = indptr;
  g.indices = indices;
  g.eids = eids;
  return sample_neighbors_impl(g, seeds, n, fanout, replace, dir_in, key, stream, exclude,
                               seed_rows);
}

DeviceSample sample_neighbors_weighted_impl(const int64_t* indptr, const int64_t* indices,
                                            const int64_t* eids, const float* weights,
                                            const double* prefix, const int64_t* seeds, int64_t n,
                                            int64_t fanout, bool replace, bool dir_in,
                                            const RngKey& key, StreamHandle stream,
                                            const rows::ExcludeView* exclude,
                                            const int64_t* seed_rows) {
  GraphView g;
  g.num_nodes = INT64_MAX;
  g.indptr = indptr;
  g.indices = indices;
  g.eids = eids;
  g.weights = weights;
  g.prefix = prefix;
  return sample_neighbors_impl(g, seeds, n, fanout, replace, dir_in, key, stream, exclude,
                               seed_rows);
}

void weight_prefix_sums_impl(const int64_t* indptr, int64_t num_nodes, const float* weights,
                             double* out, StreamHandle stream) {
  weight_row_tables_impl(indptr, num_nodes, weights, out, nullptr, stream);
}

void weight_row_tables_impl(const int64_t* indptr, int64_t num_nodes, const float* weights,
                            double* prefix, int64_t* row_info, StreamHandle stream) {
  if (num_nodes == 0) return;
  TESSERA_KERNEL_CALL(detail::row_tables_kernel,
                      detail::grid_for_items(num_nodes, detail::kBlockThreads),
                      detail::kBlockThreads, 0, static_cast<cudaStream_t>(stream), indptr,
                      num_nodes, weights, prefix, row_info);
}

}  // namespace tessera::cuda
