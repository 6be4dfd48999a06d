// SPDX-License-Identifier: Apache-2.0
// SpMM: the validator, the CPU twin (float32 accumulation in storage order) and dispatch to
// the CUDA twin (cuSPARSE or Tessera's row kernels).
#include "tessera/ops/spmm.hpp"

#include <algorithm>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/parallel.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::ops {
namespace {

int64_t at(const IndexRef& r, int64_t i) {
  return r.dtype == DType::kInt32 ? static_cast<const int32_t*>(r.data)[i]
                                  : static_cast<const int64_t*>(r.data)[i];
}

bool on_gpu(const CsrRef& a, const MatrixRef& b, const MatrixRef& c) {
  return a.indptr.memory == Memory::kDevice || a.indices.memory == Memory::kDevice ||
         b.memory == Memory::kDevice || c.memory == Memory::kDevice;
}

// The same float the CUDA twin's edge-value kernel computes.
float row_weight(Reduce reduce, int64_t deg) {
  return reduce == Reduce::kMean ? 1.0f / static_cast<float>(deg) : 1.0f;
}

// Items of `items` per parallel_for chunk so that each chunk holds at least kMinChunkWork of the
// `work` (multiply-adds) they share: a pool thread takes about 30 us to wake for a chunk, about
// as long as that much work, so a training step's small blocks run on the calling thread (a
// 2-layer Cora batch's forward + backward took 2-3x index_add_'s time on 2 threads when every
// chunk started a thread of its own).
constexpr int64_t kMinChunkWork = int64_t{1} << 17;
int64_t grain_for(int64_t items, int64_t work) {
  return std::max<int64_t>(1, items * kMinChunkWork / std::max<int64_t>(work, 1));
}

void spmm_forward_cpu(const CsrRef& a, const MatrixRef& b, const MatrixRef& c, Reduce reduce,
                      int threads) {
  const int64_t F = b.cols;
  const auto* B = static_cast<const float*>(b.data);
  auto* C = static_cast<float*>(c.data);
  const int64_t work = (a.indices.size + a.num_rows) * F;
  parallel_for_threads(
      threads, 0, a.num_rows,
      std::max(std::max<int64_t>(1, 4096 / std::max<int64_t>(F, 1)), grain_for(a.num_rows, work)),
      [&](int64_t lo, int64_t hi, int64_t) {
        std::vector<float> acc(static_cast<size_t>(F));
        for (int64_t r = lo; r < hi; ++r) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          const int64_t e0 = at(a.indptr, r), e1 = at(a.indptr, r + 1);
          for (int64_t e = e0; e < e1; ++e) {
            const float* row = B + at(a.indices, e) * F;
            for (int64_t f = 0; f < F; ++f) {
              acc[f] += row[f];
            }
          }
          const float w = e1 > e0 ? row_weight(reduce, e1 - e0) : 0.0f;
          float* out = C + r * F;
          for (int64_t f = 0; f < F; ++f) {
            out[f] = acc[f] * w;
          }
        }
      });
}

// C[col] += w(row) * B[row] over every entry; parallel over feature columns so that each
// output element is summed by one thread in storage order (deterministic, no atomics).
void spmm_transpose_cpu(const CsrRef& a, const MatrixRef& b, const MatrixRef& c, Reduce reduce,
                        int threads) {
  const int64_t F = b.cols;
  const auto* B = static_cast<const float*>(b.data);
  auto* C = static_cast<float*>(c.data);
  std::fill(C, C + c.rows * F, 0.0f);
  parallel_for_threads(threads, 0, F, grain_for(F, (a.indices.size + a.num_rows) * F),
                       [&](int64_t f0, int64_t f1, int64_t) {
                         for (int64_t r = 0; r < a.num_rows; ++r) {
                           const int64_t e0 = at(a.indptr, r), e1 = at(a.indptr, r + 1);
                           if (e0 == e1) {
                             continue;
                           }
                           const float w = row_weight(reduce, e1 - e0);
                           const float* g = B + r * F;
                           for (int64_t e = e0; e < e1; ++e) {
                             float* out = C + at(a.indices, e) * F;
                             for (int64_t f = f0; f < f1; ++f) {
                               out[f] += w * g[f];
                             }
                           }
                         }
                       });
}

}  // namespace

CsrRef CsrRef::of(const Graph& g) {
  CsrRef a;
  a.indptr = IndexRef::of(g.indptr.data(), static_cast<int64_t>(g.indptr.size()));
  a.indices = IndexRef::of(g.indices.data(), g.num_edges());
  a.num_rows = a.num_cols = g.num_nodes;
  return a;
}

void validate_spmm(const CsrRef& a, const MatrixRef& b, const MatrixRef& c, bool transpose) {
  const char* op = "spmm";
  TESSERA_EXPECTS(a.num_rows >= 0 && a.num_cols >= 0, ValueError,
                  "{}: negative pattern shape [{}, {}]", op, a.num_rows, a.num_cols);
  for (const IndexRef* r : {&a.indptr, &a.indices})
    TESSERA_EXPECTS(r->dtype == DType::kInt32 || r->dtype == DType::kInt64, TypeError,
                    "{}: {} must be int32 or int64, got {}", op,
                    r == &a.indptr ? "indptr" : "indices", dtype_name(r->dtype));
  TESSERA_EXPECTS(a.indptr.dtype == a.indices.dtype, TypeError,
                  "{}: indptr ({}) and indices ({}) must share one index type", op,
                  dtype_name(a.indptr.dtype), dtype_name(a.indices.dtype));
  TESSERA_EXPECTS(a.indptr.memory == a.indices.memory, ValueError,
                  "{}: indptr ({}) and indices ({}) must live in the same memory", op,
                  memory_name(a.indptr.memory), memory_name(a.indices.memory));
  TESSERA_EXPECTS(a.indptr.size == a.num_rows + 1, ValueError,
                  "{}: indptr has {} entries, expected num_rows + 1 = {}", op, a.indptr.size,
                  a.num_rows + 1);
  TESSERA_EXPECTS(a.indptr.data != nullptr, ValueError, "{}: indptr is null", op);
  TESSERA_EXPECTS(a.indices.data != nullptr || a.indices.size == 0, ValueError,
                  "{}: indices is null but has {} entries", op, a.indices.size);
  for (const MatrixRef* m : {&b, &c}) {
    const char* name = m == &b ? "B" : "C";
    TESSERA_EXPECTS(m->dtype == DType::kFloat32, TypeError, "{}: {} must be float32, got {}", op,
                    name, dtype_name(m->dtype));
    TESSERA_EXPECTS(m->rows >= 0 && m->cols >= 0, ValueError, "{}: {} has negative shape", op,
                    name);
    TESSERA_EXPECTS(m->data != nullptr || m->nbytes() == 0, ValueError,
                    "{}: {} is null but has shape [{}, {}]", op, name, m->rows, m->cols);
  }
  const int64_t in_rows = transpose ? a.num_rows : a.num_cols;
  const int64_t out_rows = transpose ? a.num_cols : a.num_rows;
  TESSERA_EXPECTS(b.rows == in_rows, ValueError, "{}: B has {} rows, expected {} ({})", op, b.rows,
                  in_rows, transpose ? "num_rows, transposed" : "num_cols");
  TESSERA_EXPECTS(c.rows == out_rows, ValueError, "{}: C has {} rows, expected {} ({})", op, c.rows,
                  out_rows, transpose ? "num_cols, transposed" : "num_rows");
  TESSERA_EXPECTS(c.cols == b.cols, ValueError, "{}: C has {} columns but B has {}", op, c.cols,
                  b.cols);
  if (on_gpu(a, b, c)) {
    TESSERA_EXPECTS(
        a.indptr.memory != Memory::kHost && b.memory != Memory::kHost && c.memory != Memory::kHost,
        ValueError,
        "{}: operands mix device memory with pageable host memory (pattern: {}, B: "
        "{}, C: {})",
        op, memory_name(a.indptr.memory), memory_name(b.memory), memory_name(c.memory));
  }
  if (a.indptr.memory != Memory::kDevice) {
    TESSERA_EXPECTS(at(a.indptr, 0) == 0, ValueError, "{}: indptr[0] = {}, expected 0", op,
                    at(a.indptr, 0));
    for (int64_t r = 0; r < a.num_rows; ++r)
      TESSERA_EXPECTS(at(a.indptr, r + 1) >= at(a.indptr, r), ValueError,
                      "{}: indptr decreases at row {} ({} -> {})", op, r, at(a.indptr, r),
                      at(a.indptr, r + 1));
    TESSERA_EXPECTS(at(a.indptr, a.num_rows) == a.indices.size, ValueError,
                    "{}: indptr[num_rows] = {} but indices has {} entries", op,
                    at(a.indptr, a.num_rows), a.indices.size);
    for (int64_t e = 0; e < a.indices.size; ++e) {
      const int64_t u = at(a.indices, e);
      TESSERA_EXPECTS(u >= 0 && u < a.num_cols, IndexError,
                      "{}: indices[{}] = {} is outside [0, {})", op, e, u, a.num_cols);
    }
  }
}

void spmm(const CsrRef& a, const MatrixRef& b, const MatrixRef& c, Reduce reduce, bool transpose,
          const ExecOptions& opts, SpmmEngine engine) {
  validate_spmm(a, b, c, transpose);
  if (on_gpu(a, b, c)) {
    cuda::require_cuda("spmm");
    cuda::spmm_impl(
        a.indptr.data, a.indices.data,
        a.indptr.dtype == DType::kInt32 ? cuda::IndexType::kInt32 : cuda::IndexType::kInt64,
        a.num_rows, a.num_cols, a.nnz(), static_cast<const float*>(b.data), b.cols,
        static_cast<float*>(c.data), reduce, transpose, opts.stream, engine);
    return;
  }
  if (c.rows == 0 || c.cols == 0) {
    return;
  }
  const int threads = opts.num_threads > 0 ? opts.num_threads : num_threads();
  if (transpose) {
    spmm_transpose_cpu(a, b, c, reduce, threads);
  } else {
    spmm_forward_cpu(a, b, c, reduce, threads);
  }
}

}  // namespace tessera::ops
