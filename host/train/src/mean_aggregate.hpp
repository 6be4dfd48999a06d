// SPDX-License-Identifier: Apache-2.0
// The mean aggregation of a block on ATen tensors by Tessera's spmm, and the SAGE layer over an
// aggregation: used by `tessera train` (model.cpp) and by the torch operator library of the
// Python package (torch.ops.tessera.mean_aggregate / sage_layer, python/torch_ops), so both run
// one implementation.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/linear.h>

#include <cstdint>
#include <optional>

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

/// nn.py's SAGEConv forward, operator for operator (so the same bits and autograd graph):
/// linear(x[:num_dst], w_self, bias) (DGL's fc_self, which holds the bias; `bias` may be
/// undefined) + the projected aggregate of the neighbors, projecting before `aggregate` (x -> the
/// mean over each destination's in-neighbors) when that shrinks the rows, as DGL does.
template <class Aggregate>
at::Tensor sage_forward(const at::Tensor& x, int64_t num_dst, const at::Tensor& w_self,
                        const at::Tensor& w_neigh, const at::Tensor& bias, Aggregate&& aggregate) {
  const at::Tensor h_dst = x.slice(0, 0, num_dst);
  const at::Tensor h_neigh = w_neigh.size(1) > w_neigh.size(0) ? aggregate(at::linear(x, w_neigh))
                                                               : at::linear(aggregate(x), w_neigh);
  return at::linear(
             h_dst, w_self,
             bias.defined() ? std::optional<at::Tensor>(bias) : std::optional<at::Tensor>()) +
         h_neigh;
}

}  // namespace tessera::train
