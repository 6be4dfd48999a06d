// SPDX-License-Identifier: Apache-2.0
// update_all's weighted and max aggregations on the GPU: a warp per row, its lanes over the
// feature columns (coalesced reads of B's rows), each element computed by aggregate_element,
// the per-element form of the CPU twin aggregate_rows_cpu (the same bits). And the CSR offsets
// of a sorted row list (csr_offsets.hpp), which blocks carry for such per-row work.
#include <cstdint>

#include "tessera/cuda/aggregate_rows.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/csr_offsets.hpp"
#include "tessera/cuda/kernels.hpp"

namespace tessera::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void csr_offsets_kernel(const int64_t* __restrict__ rows, int64_t m, int64_t num_rows,
                                   int64_t* __restrict__ indptr) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v <= num_rows;
       v += stride)
    indptr[v] = csr_offset(rows, m, v);
}

__global__ void aggregate_rows_kernel(const int64_t* __restrict__ indptr,
                                      const int64_t* __restrict__ cols, const float* __restrict__ w,
                                      int64_t num_rows, const float* __restrict__ B, int64_t feat,
                                      RowReduce reduce, float* __restrict__ C) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < num_rows;
       r += warps) {
    for (int64_t f = lane; f < feat; f += 32) {
      C[r * feat + f] = aggregate_element(indptr, cols, w, B, feat, r, f, reduce);
    }
  }
}

}  // namespace

void csr_offsets_impl(const int64_t* rows, int64_t m, int64_t num_rows, int64_t* indptr,
                      StreamHandle stream) {
  const int64_t blocks = (num_rows + 1 + 255) / 256;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
  TESSERA_KERNEL_CALL(csr_offsets_kernel, grid, 256, 0, static_cast<cudaStream_t>(stream), rows, m,
                      num_rows, indptr);
}

void aggregate_rows_impl(const int64_t* indptr, const int64_t* cols, const float* w,
                         int64_t num_rows, const float* B, int64_t feat, float* C, RowReduce reduce,
                         StreamHandle stream) {
  if (num_rows == 0 || feat == 0) return;
  const int64_t blocks = (num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
  TESSERA_KERNEL_CALL(aggregate_rows_kernel, grid, dim3(32, kWarpsPerBlock), 0,
                      static_cast<cudaStream_t>(stream), indptr, cols, w, num_rows, B, feat, reduce,
                      C);
}

}  // namespace tessera::cuda
