// CUDA twins of neighbor sampling (ops::sample_neighbors), uniform and weighted, with optional
// edge exclusion. Bit-identity with the CPU twin comes from drawing exactly the same Philox
// blocks per (key, node, draw index) and applying the same arithmetic
// (tessera/cuda/sample_rows.hpp); only the schedule differs.
#include <cub/device/device_scan.cuh>

#include <cstdint>

#include "tessera/core/philox.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/sample_rows.hpp"

namespace tessera::cuda {
namespace {

// counts[i] = edges seed i yields; counts[n] = 0 so an exclusive scan of n + 1 entries leaves
// the total in offsets[n]. With exclusion (`scratch` non-null) scratch[i] = the candidate
// entries seed i needs, laid out the same way. `w` null: uniform.
__global__ void count_kernel(const int64_t* __restrict__ indptr, const int64_t* __restrict__ eids,
                             const float* __restrict__ w, rows::ExcludeView ex,
                             const int64_t* __restrict__ seeds,
                             const int64_t* __restrict__ seed_rows, int64_t n, int64_t fanout,
                             bool replace, int64_t* __restrict__ counts,
                             int64_t* __restrict__ scratch) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i <= n;
       i += stride) {
    if (i == n) {
      counts[n] = 0;
      if (scratch) scratch[n] = 0;
      continue;
    }
    const int64_t row = seed_rows ? seed_rows[i] : seeds[i];
    const rows::SeedCounts c = rows::seed_counts(indptr, eids, w, ex, row, fanout, replace);
    counts[i] = c.edges;
    if (scratch) scratch[i] = c.scratch;
  }
}

// One thread per seed, running the row functions of tessera/cuda/sample_rows.hpp (checked on
// the CPU against the CPU twin by tests/cuda/test_sample_rows.cpp). The chosen storage
// positions are kept in the seed's slice of `eid`, which is overwritten with edge IDs at the
// end. `soffsets` (null without exclusion) places each seed's slice of the candidate scratch
// arrays `cand`, `cand_w` and `cand_cdf`.
__global__ void sample_kernel(const int64_t* __restrict__ indptr,
                              const int64_t* __restrict__ indices, const int64_t* __restrict__ eids,
                              const float* __restrict__ w, const double* __restrict__ cdf,
                              rows::ExcludeView ex, const int64_t* __restrict__ seeds,
                              const int64_t* __restrict__ seed_rows, int64_t n, int64_t fanout, bool replace, bool dir_in, RngKey key,
                              const int64_t* __restrict__ offsets,
                              const int64_t* __restrict__ soffsets, int64_t* __restrict__ cand,
                              float* __restrict__ cand_w, double* __restrict__ cand_cdf,
                              int64_t* __restrict__ src, int64_t* __restrict__ dst,
                              int64_t* __restrict__ eid) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const int64_t o = offsets[i], cnt = offsets[i + 1] - o;
    if (cnt == 0) continue;
    const int64_t v = seeds[i];
    const int64_t row = seed_rows ? seed_rows[i] : v;  // row and Philox node; v is written
    const int64_t so = soffsets ? soffsets[i] : 0;
    const int64_t scnt = soffsets ? soffsets[i + 1] - so : 0;
    int64_t* pos = eid + o;
    rows::seed_positions(key, indptr, eids, w, cdf, ex, row, fanout, replace, cnt, scnt, cand + so,
                         cand_w ? cand_w + so : nullptr, cand_cdf ? cand_cdf + so : nullptr, pos);
    for (int64_t t = 0; t < cnt; ++t) {
      const int64_t kpos = pos[t];
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

// An exclusive scan of n + 1 int64 counts into offsets on stream s.
void exclusive_scan(CachingAllocator& alloc, const int64_t* counts, int64_t* offsets, int64_t n,
                    StreamHandle stream) {
  auto s = static_cast<cudaStream_t>(stream);
  size_t temp = 0;
  TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, counts, offsets, n + 1, s));
  ScratchBuffer tmp(alloc, temp, stream);
  TESSERA_CUDA_TRY(cub::DeviceScan::ExclusiveSum(tmp.data(), temp, counts, offsets, n + 1, s));
}

DeviceSample sample_impl(const int64_t* indptr, const int64_t* indices, const int64_t* eids,
                         const float* w, const double* cdf, const int64_t* seeds,
                         const int64_t* seed_rows, int64_t n, int64_t fanout, bool replace,
                         bool dir_in, const RngKey& key_in, const rows::ExcludeView* exclude,
                         StreamHandle stream) {
  DeviceSample out;
  if (n == 0 || fanout == 0) return out;
  RngKey key = key_in;
  key.stream = RngStream::kNeighbor;
  const rows::ExcludeView ex =
      exclude != nullptr && exclude->num_rows > 0 ? *exclude : rows::ExcludeView{};
  const bool excluding = ex.num_rows > 0;
  auto s = static_cast<cudaStream_t>(stream);
  CachingAllocator& alloc = scratch_allocator();
  const int threads = 256;
  // Edge counts and offsets; with exclusion also the candidate scratch counts and offsets
  // (second halves), so both totals come back with one copy and one synchronization.
  const int64_t halves = excluding ? 2 : 1;
  ScratchBuffer counts(alloc, static_cast<size_t>(halves * (n + 1)) * sizeof(int64_t), stream);
  ScratchBuffer offsets(alloc, static_cast<size_t>(halves * (n + 1)) * sizeof(int64_t), stream);
  auto* c = static_cast<int64_t*>(counts.data());
  auto* off = static_cast<int64_t*>(offsets.data());
  int64_t* sc = excluding ? c + n + 1 : nullptr;
  int64_t* soff = excluding ? off + n + 1 : nullptr;
  TESSERA_KERNEL_CALL(count_kernel, grid_for(n + 1, threads), threads, 0, s, indptr, eids, w, ex,
                      seeds, seed_rows, n, fanout, replace, c, sc);
  exclusive_scan(alloc, c, off, n, stream);
  int64_t totals[2] = {0, 0};  // sampled edges, candidate scratch entries
  if (excluding) {
    exclusive_scan(alloc, sc, soff, n, stream);
    // Both totals side by side in the counts buffer (no longer needed after the scans), so
    // one copy brings them back: a device-to-pageable copy waits for the stream.
    TESSERA_CUDA_TRY(cudaMemcpyAsync(c, off + n, sizeof(int64_t), cudaMemcpyDeviceToDevice, s));
    TESSERA_CUDA_TRY(
        cudaMemcpyAsync(c + 1, soff + n, sizeof(int64_t), cudaMemcpyDeviceToDevice, s));
    TESSERA_CUDA_TRY(cudaMemcpyAsync(totals, c, sizeof totals, cudaMemcpyDeviceToHost, s));
  } else {
    TESSERA_CUDA_TRY(cudaMemcpyAsync(totals, off + n, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
  }
  TESSERA_CUDA_TRY(cudaStreamSynchronize(s));  // the one synchronization: the output sizes
  const int64_t total = totals[0], scratch_total = totals[1];
  out.size = total;
  if (total == 0) return out;
  const size_t bytes = static_cast<size_t>(total) * sizeof(int64_t);
  out.src = std::make_unique<ScratchBuffer>(alloc, bytes, stream);
  out.dst = std::make_unique<ScratchBuffer>(alloc, bytes, stream);
  out.eid = std::make_unique<ScratchBuffer>(alloc, bytes, stream);
  // Candidate scratch (returned to the allocator on `stream` after the kernel is enqueued, so
  // stream order keeps it alive for the kernel).
  const size_t sn = static_cast<size_t>(scratch_total);
  ScratchBuffer cand(alloc, sn * sizeof(int64_t), stream);
  ScratchBuffer cand_w(alloc, w ? sn * sizeof(float) : 0, stream);
  ScratchBuffer cand_cdf(alloc, w ? sn * sizeof(double) : 0, stream);
  TESSERA_KERNEL_CALL(sample_kernel, grid_for(n, threads), threads, 0, s, indptr, indices, eids, w,
                      cdf, ex, seeds, seed_rows, n, fanout, replace, dir_in, key, off, soff,
                      static_cast<int64_t*>(cand.data()), static_cast<float*>(cand_w.data()),
                      static_cast<double*>(cand_cdf.data()), static_cast<int64_t*>(out.src->data()),
                      static_cast<int64_t*>(out.dst->data()),
                      static_cast<int64_t*>(out.eid->data()));
  return out;
}

}  // namespace

DeviceSample sample_neighbors_uniform_impl(const int64_t* indptr, const int64_t* indices,
                                           const int64_t* eids, const int64_t* seeds, int64_t n,
                                           int64_t fanout, bool replace, bool dir_in,
                                           const RngKey& key, StreamHandle stream,
                                           const rows::ExcludeView* exclude,
                                           const int64_t* seed_rows) {
  return sample_impl(indptr, indices, eids, nullptr, nullptr, seeds, seed_rows, n, fanout, replace,
                     dir_in, key, exclude, stream);
}

DeviceSample sample_neighbors_weighted_impl(const int64_t* indptr, const int64_t* indices,
                                            const int64_t* eids, const float* weights,
                                            const double* prefix, const int64_t* seeds, int64_t n,
                                            int64_t fanout, bool replace, bool dir_in,
                                            const RngKey& key, StreamHandle stream,
                                            const rows::ExcludeView* exclude,
                                            const int64_t* seed_rows) {
  return sample_impl(indptr, indices, eids, weights, prefix, seeds, seed_rows, n, fanout, replace,
                     dir_in, key, exclude, stream);
}

void weight_prefix_sums_impl(const int64_t* indptr, int64_t num_nodes, const float* weights,
                             double* out, StreamHandle stream) {
  if (num_nodes == 0) return;
  const int threads = 256;
  TESSERA_KERNEL_CALL(prefix_kernel, grid_for(num_nodes, threads), threads, 0,
                      static_cast<cudaStream_t>(stream), indptr, num_nodes, weights, out);
}

}  // namespace tessera::cuda
