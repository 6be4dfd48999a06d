// SPDX-License-Identifier: Apache-2.0
// The mean aggregation of a block on ATen tensors by Tessera's spmm: used by `tessera train`
// (model.cpp) and by the torch operator library of the Python package
// (torch.ops.tessera.mean_aggregate, python/torch_ops), so both run one implementation.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "tessera/ops/spmm.hpp"

namespace tessera::train {

/// The mean of h[src] over each destination's edges with autograd: `indptr` (the num_dst + 1 CSR
/// offsets of the destinations) and `src` (the columns, in [0, h.size(0))) int64, contiguous, on
/// h's device; `h` float32 [*, F]. Forward the product by ops::spmm with the mean reduction (on
/// a CUDA tensor on torch's current stream of its device, by `engine`: the row engine has no
/// message per edge and no atomics; on the CPU the CPU twin), backward the transposed product by
/// the same engine. The autograd node is C++'s, so a backward pass through it runs no Python.
/// Without autograd only the forward runs. Tessera's errors propagate as thrown.
at::Tensor mean_aggregate(const at::Tensor& h, const at::Tensor& src, const at::Tensor& indptr,
                          ops::SpmmEngine engine = ops::SpmmEngine::kRows);

}  // namespace tessera::train
