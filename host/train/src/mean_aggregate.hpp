// SPDX-License-Identifier: Apache-2.0
// The mean aggregation of a block on ATen tensors by Tessera's spmm: used by `tessera train`
// (model.cpp) and by the torch operator library of the Python package
// (torch.ops.tessera.mean_aggregate, python/torch_ops), so both run one implementation.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "tessera/ops/spmm.hpp"

namespace tessera::train {

/// C = op(A) h by ops::spmm with the mean reduction: A is the block's CSR pattern (`indptr` over
/// the num_dst destinations, `src` the columns in [0, num_src); both int64, contiguous, on h's
/// device), op(A) is A (C is num_dst x F) or A^T with `transpose` (the gradient w.r.t. h; C is
/// num_src x F). `h` is float32 [*, F]. On a CUDA tensor it runs on torch's current stream of
/// h's device by `engine`; on the CPU the CPU twin. Tessera's errors propagate as thrown.
at::Tensor csr_mean(const at::Tensor& indptr, const at::Tensor& src, int64_t num_src,
                    const at::Tensor& h, bool transpose, ops::SpmmEngine engine);

/// The mean of h[src] over each destination's edges with autograd: forward csr_mean by `engine`
/// (the row engine: no message per edge, no atomics), backward the transposed product by the
/// same engine. The autograd node is C++'s, so a backward pass through it runs no Python.
at::Tensor mean_aggregate(const at::Tensor& h, const at::Tensor& src, const at::Tensor& indptr,
                          ops::SpmmEngine engine = ops::SpmmEngine::kRows);

}  // namespace tessera::train
