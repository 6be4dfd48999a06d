// SPDX-License-Identifier: Apache-2.0
// Sparse x dense products for message passing: sum or mean aggregation over a CSR pattern, and
// the transpose for the backward pass. Validated once, then the CPU twin or the CUDA twin
// (tessera::cuda::spmm_impl: cuSPARSE or Tessera's row kernels) by where the data lives.
#pragma once

#include <cstdint>

#include "tessera/cuda/kernels.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/gather.hpp"

namespace tessera::ops {

/// Aggregation of an SpMM: kSum (edge value 1) or kMean (edge value 1 / degree of its row).
using Reduce = cuda::Reduce;
/// Who runs the CUDA twin: cuSPARSE, or Tessera's row kernels (cuda::SpmmEngine).
using SpmmEngine = cuda::SpmmEngine;

/// A num_rows x num_cols sparse pattern in CSR form: row r holds columns
/// indices[indptr[r] .. indptr[r+1]). Tessera's CSC graph (row v lists the sources of v's
/// in-edges) is exactly the CSR of the aggregation matrix A[v, u] = 1 for an edge u -> v.
/// indptr and indices share one index type (int32 or int64) and one memory.
struct CsrRef {
  IndexRef indptr;
  IndexRef indices;
  int64_t num_rows = 0;
  int64_t num_cols = 0;

  /// Views a host Graph (int64) as a square num_nodes x num_nodes pattern.
  static CsrRef of(const Graph& g);
  int64_t nnz() const { return indices.size; }
};

/// The one validator of spmm. Checks float32 operands; index types; sizes (indptr has
/// num_rows + 1 entries; B is num_cols x F, or num_rows x F when transposed; C is num_rows x F,
/// or num_cols x F when transposed); memory kinds; and, when the pattern is host-readable, that
/// indptr rises from 0 to nnz and every column index is in [0, num_cols). Throws TypeError /
/// ValueError / IndexError naming the argument.
void validate_spmm(const CsrRef& a, const MatrixRef& b, const MatrixRef& c, bool transpose);

/// C = op(A) * B with op(A) = A (forward aggregation: C[r] = sum or mean of B over row r's
/// columns; a row with no entries gives zeros) or A^T when `transpose` (backward: the gradient
/// w.r.t. B of the forward aggregation, so mean scales each row r's contribution by 1/deg(r)).
/// The CUDA twin runs when any operand is in device memory, by `engine`, and matches the CPU
/// twin up to float32 summation order (cuSPARSE's order is not the CPU's; the row engine's
/// forward is the CPU twin's bits; either transpose uses atomics and may differ run to run).
/// The CPU twin is deterministic for any thread count.
void spmm(const CsrRef& a, const MatrixRef& b, const MatrixRef& c, Reduce reduce,
          bool transpose = false, const ExecOptions& opts = {},
          SpmmEngine engine = SpmmEngine::kCusparse);

}  // namespace tessera::ops
