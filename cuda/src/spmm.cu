// SPDX-License-Identifier: Apache-2.0
// SpMM (CSR x dense, row-major, float32), sum or mean aggregation, and the transpose for the
// backward pass: through cuSPARSE, whose edge values (1 or 1/deg(row)) a small kernel builds
// into scratch from the caching allocator, or through Tessera's row kernels (SpmmEngine).
#include <cstdint>
#include <map>

#include "cusparse_lib.hpp"
#include "tessera/cuda/check.cuh"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"

namespace tessera::cuda {
namespace {

// One thread per row writes the row's edge values; degree skew only costs balance here, and
// this pass is tiny next to the SpMM (nnz floats written once).
template <typename I>
__global__ void edge_values_kernel(const I* __restrict__ indptr, int64_t num_rows, bool mean,
                                   float* __restrict__ values) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < num_rows;
       r += stride) {
    const int64_t lo = static_cast<int64_t>(indptr[r]), hi = static_cast<int64_t>(indptr[r + 1]);
    const float w = mean ? 1.0f / static_cast<float>(hi - lo) : 1.0f;
    for (int64_t e = lo; e < hi; ++e)
      values[e] = w;
  }
}

// Fallback for C = A^T B: one warp per row r of A scatters values[e] * B[r] into C[col(e)].
template <typename I>
__global__ void spmm_transpose_kernel(const I* __restrict__ indptr, const I* __restrict__ indices,
                                      const float* __restrict__ values, int64_t num_rows,
                                      const float* __restrict__ B, int64_t feat,
                                      float* __restrict__ C) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
       r < num_rows; r += warps) {
    const float* g = B + r * feat;
    for (int64_t e = static_cast<int64_t>(indptr[r]); e < static_cast<int64_t>(indptr[r + 1]);
         ++e) {
      float* out = C + static_cast<int64_t>(indices[e]) * feat;
      const float w = values[e];
      for (int64_t f = lane; f < feat; f += 32)
        atomicAdd(out + f, w * g[f]);
    }
  }
}

// --- the row engine (SpmmEngine::kRows) -----------------------------------------------------
// A warp per row of A, blockDim (32, kRowWarps); lane l holds columns f0 + l + 32 k (k < K) of
// B in registers, so a row's entries are walked once per 32 K columns.
constexpr int kRowWarps = 8;

// 1 / deg(row) for mean, 1 for sum, 0 for a row without entries: the CPU twin's row weight.
__device__ inline float row_scale(int64_t deg, bool mean) {
  if (deg == 0) return 0.0f;
  return mean ? 1.0f / static_cast<float>(deg) : 1.0f;
}

// C[r] = scale(r) * sum of B[indices[e]] over row r's entries in storage order, rounded as the
// CPU twin rounds (no fused multiply-add): the same bits.
template <typename I, int K>
__global__ void rows_forward_kernel(const I* __restrict__ indptr, const I* __restrict__ indices,
                                    int64_t num_rows, const float* __restrict__ B, int64_t feat,
                                    bool mean, float* __restrict__ C) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < num_rows;
       r += warps) {
    const int64_t e0 = static_cast<int64_t>(indptr[r]), e1 = static_cast<int64_t>(indptr[r + 1]);
    const float w = row_scale(e1 - e0, mean);
    for (int64_t f0 = 0; f0 < feat; f0 += 32 * K) {
      float acc[K];
#pragma unroll
      for (int k = 0; k < K; ++k)
        acc[k] = 0.0f;
      for (int64_t e = e0; e < e1; ++e) {
        const float* row = B + static_cast<int64_t>(indices[e]) * feat;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int64_t f = f0 + lane + 32 * k;
          if (f < feat) acc[k] = __fadd_rn(acc[k], __ldg(row + f));
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t f = f0 + lane + 32 * k;
        if (f < feat) C[r * feat + f] = __fmul_rn(acc[k], w);
      }
    }
  }
}

// C[indices[e]] += scale(r) * B[r] for every entry e of row r (C zeroed first): atomics, so the
// order of the sums may differ run to run (as cuSPARSE's transpose).
template <typename I, int K>
__global__ void rows_transpose_kernel(const I* __restrict__ indptr, const I* __restrict__ indices,
                                      int64_t num_rows, const float* __restrict__ B, int64_t feat,
                                      bool mean, float* __restrict__ C) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < num_rows;
       r += warps) {
    const int64_t e0 = static_cast<int64_t>(indptr[r]), e1 = static_cast<int64_t>(indptr[r + 1]);
    if (e0 == e1) continue;
    const float w = row_scale(e1 - e0, mean);
    for (int64_t f0 = 0; f0 < feat; f0 += 32 * K) {
      float g[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t f = f0 + lane + 32 * k;
        g[k] = f < feat ? __fmul_rn(w, B[r * feat + f]) : 0.0f;
      }
      for (int64_t e = e0; e < e1; ++e) {
        float* out = C + static_cast<int64_t>(indices[e]) * feat;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int64_t f = f0 + lane + 32 * k;
          if (f < feat) atomicAdd(out + f, g[k]);
        }
      }
    }
  }
}

template <typename I, int K>
void launch_rows_k(const I* indptr, const I* indices, int64_t num_rows, const float* B,
                   int64_t feat, bool mean, bool transpose, float* C, cudaStream_t s) {
  const int64_t blocks = (num_rows + kRowWarps - 1) / kRowWarps;
  const auto grid = static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : int64_t{1} << 20);
  const dim3 block(32, kRowWarps);
  if (transpose)
    TESSERA_KERNEL_CALL((rows_transpose_kernel<I, K>), grid, block, 0, s, indptr, indices, num_rows,
                        B, feat, mean, C);
  else
    TESSERA_KERNEL_CALL((rows_forward_kernel<I, K>), grid, block, 0, s, indptr, indices, num_rows,
                        B, feat, mean, C);
}

// Registers per lane: the fewest of 1, 2, 4, 8 columns covering the row (wider rows in chunks
// of 256 columns).
template <typename I>
void launch_rows(const I* indptr, const I* indices, int64_t num_rows, const float* B, int64_t feat,
                 bool mean, bool transpose, float* C, cudaStream_t s) {
  if (feat <= 32)
    launch_rows_k<I, 1>(indptr, indices, num_rows, B, feat, mean, transpose, C, s);
  else if (feat <= 64)
    launch_rows_k<I, 2>(indptr, indices, num_rows, B, feat, mean, transpose, C, s);
  else if (feat <= 128)
    launch_rows_k<I, 4>(indptr, indices, num_rows, B, feat, mean, transpose, C, s);
  else
    launch_rows_k<I, 8>(indptr, indices, num_rows, B, feat, mean, transpose, C, s);
}

// One cuSPARSE handle per thread and device (handles are not thread-safe, and a handle works
// on the device that was current when it was created); destroyed at thread exit.
struct Handle {
  cusparseHandle_t h = nullptr;
  Handle() { TESSERA_CUSPARSE_TRY(detail::cusparse_lib().create(&h)); }
  ~Handle() {
    if (h) detail::cusparse_lib().destroy(h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

cusparseHandle_t handle_for(cudaStream_t s) {
  thread_local std::map<int, Handle> handles;
  int device = 0;
  TESSERA_CUDA_TRY(cudaGetDevice(&device));
  Handle& handle = handles.try_emplace(device).first->second;
  TESSERA_CUSPARSE_TRY(detail::cusparse_lib().set_stream(handle.h, s));
  return handle.h;
}

// RAII for the cuSPARSE descriptors.
struct SpDescr {
  cusparseSpMatDescr_t d = nullptr;
  ~SpDescr() {
    if (d) detail::cusparse_lib().destroy_sp_mat(d);
  }
};
struct DnDescr {
  cusparseDnMatDescr_t d = nullptr;
  ~DnDescr() {
    if (d) detail::cusparse_lib().destroy_dn_mat(d);
  }
};

}  // namespace

void spmm_impl(const void* indptr, const void* indices, IndexType idx_type, int64_t num_rows,
               int64_t num_cols, int64_t nnz, const float* B, int64_t feat, float* C, Reduce reduce,
               bool transpose, StreamHandle stream, SpmmEngine engine) {
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t out_rows = transpose ? num_cols : num_rows;
  const int64_t in_rows = transpose ? num_rows : num_cols;
  if (out_rows == 0 || feat == 0) return;
  if (nnz == 0 || in_rows == 0) {
    // cuSPARSE rejects empty operands on some versions; the product is zero.
    memset_async(C, 0, static_cast<size_t>(out_rows * feat) * sizeof(float), s);
    return;
  }
  const bool mean = reduce == Reduce::kMean;
  if (engine == SpmmEngine::kRows) {
    if (transpose) memset_async(C, 0, static_cast<size_t>(out_rows * feat) * sizeof(float), s);
    if (idx_type == IndexType::kInt32)
      launch_rows(static_cast<const int32_t*>(indptr), static_cast<const int32_t*>(indices),
                  num_rows, B, feat, mean, transpose, C, s);
    else
      launch_rows(static_cast<const int64_t*>(indptr), static_cast<const int64_t*>(indices),
                  num_rows, B, feat, mean, transpose, C, s);
    return;
  }
  CachingAllocator& alloc = scratch_allocator();
  ScratchBuffer values(alloc, static_cast<size_t>(nnz) * sizeof(float), stream);
  const int threads = 256;
  const int64_t blocks = (num_rows + threads - 1) / threads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
  auto* vals = static_cast<float*>(values.data());
  cusparseIndexType_t it;
  if (idx_type == IndexType::kInt32) {
    TESSERA_KERNEL_CALL(edge_values_kernel<int32_t>, grid, threads, 0, s,
                        static_cast<const int32_t*>(indptr), num_rows, mean, vals);
    it = CUSPARSE_INDEX_32I;
  } else {
    TESSERA_KERNEL_CALL(edge_values_kernel<int64_t>, grid, threads, 0, s,
                        static_cast<const int64_t*>(indptr), num_rows, mean, vals);
    it = CUSPARSE_INDEX_64I;
  }

  const detail::CusparseLib& lib = detail::cusparse_lib();  // loaded on first use
  cusparseHandle_t h = handle_for(s);
  SpDescr a;
  DnDescr b, c;
  TESSERA_CUSPARSE_TRY(lib.create_csr(&a.d, num_rows, num_cols, nnz, const_cast<void*>(indptr),
                                      const_cast<void*>(indices), vals, it, it,
                                      CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  TESSERA_CUSPARSE_TRY(lib.create_dn_mat(&b.d, in_rows, feat, feat, const_cast<float*>(B),
                                         CUDA_R_32F, CUSPARSE_ORDER_ROW));
  TESSERA_CUSPARSE_TRY(
      lib.create_dn_mat(&c.d, out_rows, feat, feat, C, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  const float alpha = 1.0f, beta = 0.0f;
  const cusparseOperation_t op =
      transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  const cusparseSpMMAlg_t alg = CUSPARSE_SPMM_ALG_DEFAULT;
  size_t ws = 0;
  const cusparseStatus_t st = lib.spmm_buffer_size(h, op, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                                   a.d, b.d, &beta, c.d, CUDA_R_32F, alg, &ws);
  if (transpose && st == CUSPARSE_STATUS_NOT_SUPPORTED) {
    // Some cuSPARSE versions refuse op(A) = A^T with row-major dense operands; the transposed
    // product is then our own kernel (atomics, as cuSPARSE's transpose).
    memset_async(C, 0, static_cast<size_t>(out_rows * feat) * sizeof(float), s);
    const int64_t wblocks = (num_rows + 7) / 8;  // 8 warps per block, one row per warp
    const unsigned wgrid = static_cast<unsigned>(wblocks < 65535 ? wblocks : 65535);
    if (idx_type == IndexType::kInt32)
      TESSERA_KERNEL_CALL(spmm_transpose_kernel<int32_t>, wgrid, 256, 0, s,
                          static_cast<const int32_t*>(indptr), static_cast<const int32_t*>(indices),
                          vals, num_rows, B, feat, C);
    else
      TESSERA_KERNEL_CALL(spmm_transpose_kernel<int64_t>, wgrid, 256, 0, s,
                          static_cast<const int64_t*>(indptr), static_cast<const int64_t*>(indices),
                          vals, num_rows, B, feat, C);
    return;
  }
  TESSERA_CUSPARSE_TRY(st);
  ScratchBuffer work(alloc, ws, stream);
  TESSERA_CUSPARSE_TRY(lib.spmm(h, op, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a.d, b.d, &beta,
                                c.d, CUDA_R_32F, alg, work.data()));
  // The scratch goes back to this stream's free list; later work on `stream` that reuses it is
  // ordered after this SpMM, so no synchronization is needed.
}

}  // namespace tessera::cuda
