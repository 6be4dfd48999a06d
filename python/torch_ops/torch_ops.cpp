// SPDX-License-Identifier: Apache-2.0
// The torch operator library of the Python package (libtessera_torch_ops.so, loaded by
// tessera.nn with torch.ops.load_library): Tessera's ops as operators of torch's dispatcher, so a
// training step calls them with one dispatcher call and their backward runs in C++ autograd,
// without Python. tessera._C reaches the same kernels over DLPack, at a cost in host time per
// call (capsules, stream lookups, a Python autograd.Function each way) that a training step's
// small blocks do not repay.
//
//   torch.ops.tessera.mean_aggregate(h_src, src, indptr, engine="rows") -> Tensor
//     out[v] = mean of h_src[src[e]] over v's edges e in [indptr[v], indptr[v+1]) (zeros for a
//     node without edges), differentiable in h_src; engine "rows" or "cusparse" on a GPU.
//   torch.ops.tessera.sage_layer(x, src, indptr, w_self, w_neigh, bias, engine="rows") -> Tensor
//     nn.SAGEConv's forward on such a block (x: the source features, the destinations first):
//     linear(x[:num_dst], w_self) + the projected mean of the neighbors + bias, as nn.py computes
//     it operator for operator.
//   torch.ops.tessera.torch_version() -> str
//     the version of the libtorch this library was built against ("2.11.0").
//
// The library links its own copy of Tessera's static libraries (as tessera._C does): settings
// made through tessera._C, such as tessera.set_num_threads, do not reach it; its CPU twin reads
// TESSERA_NUM_THREADS or uses every hardware thread.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>
#include <string>

#include "mean_aggregate.hpp"
#include "tessera/core/error.hpp"

namespace {

using tessera::ops::SpmmEngine;

SpmmEngine engine_of(const std::string& engine) {
  if (engine == "rows") {
    return SpmmEngine::kRows;
  }
  TORCH_CHECK_VALUE(engine == "cusparse",
                    "tessera::mean_aggregate: engine must be 'rows' or 'cusparse', got '", engine,
                    "'");
  return SpmmEngine::kCusparse;
}

// Tessera's errors as torch's of the same kind (ValueError, IndexError, TypeError in Python).
[[noreturn]] void rethrow_as_torch_error(const tessera::Error& err) {
  const std::string msg = std::string("tessera::mean_aggregate: ") + err.what();
  if (dynamic_cast<const tessera::IndexError*>(&err) != nullptr) {
    throw c10::IndexError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg);
  }
  if (dynamic_cast<const tessera::TypeError*>(&err) != nullptr) {
    throw c10::TypeError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg);
  }
  if (dynamic_cast<const tessera::ValueError*>(&err) != nullptr) {
    throw c10::ValueError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg);
  }
  throw c10::Error(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg);
}

at::Tensor mean_aggregate(const at::Tensor& h_src, const at::Tensor& src, const at::Tensor& indptr,
                          const std::string& engine) {
  const SpmmEngine e = engine_of(engine);
  TORCH_CHECK_TYPE(h_src.scalar_type() == at::kFloat,
                   "tessera::mean_aggregate: h_src must be float32, got ", h_src.scalar_type());
  TORCH_CHECK_VALUE(h_src.dim() == 2, "tessera::mean_aggregate: h_src must be 2-D, got shape ",
                    h_src.sizes());
  TORCH_CHECK_TYPE(src.scalar_type() == at::kLong && indptr.scalar_type() == at::kLong,
                   "tessera::mean_aggregate: src and indptr must be int64, got ", src.scalar_type(),
                   " and ", indptr.scalar_type());
  TORCH_CHECK_VALUE(src.dim() == 1 && indptr.dim() == 1 && indptr.size(0) >= 1,
                    "tessera::mean_aggregate: src must be 1-D and indptr 1-D with at least one "
                    "entry, got shapes ",
                    src.sizes(), " and ", indptr.sizes());
  TORCH_CHECK_VALUE(src.device() == h_src.device() && indptr.device() == h_src.device(),
                    "tessera::mean_aggregate: h_src, src and indptr must be on one device, got ",
                    h_src.device(), ", ", src.device(), " and ", indptr.device());
  try {
    return tessera::train::mean_aggregate(h_src, src.contiguous(), indptr.contiguous(), e);
  } catch (const tessera::Error& err) {
    rethrow_as_torch_error(err);
  }
}

// nn.SAGEConv's forward (mean aggregator) on a block whose edges are grouped by destination: the
// ATen operators nn.py issues, in its order, so the same bits and the same autograd graph, from
// one Python call instead of a dozen.
at::Tensor sage_layer(const at::Tensor& x, const at::Tensor& src, const at::Tensor& indptr,
                      const at::Tensor& w_self, const at::Tensor& w_neigh,
                      const std::optional<at::Tensor>& bias, const std::string& engine) {
  TORCH_CHECK_VALUE(x.dim() == 2 && indptr.dim() == 1 && indptr.size(0) >= 1,
                    "tessera::sage_layer: x must be 2-D and indptr 1-D with at least one entry, "
                    "got shapes ",
                    x.sizes(), " and ", indptr.sizes());
  const int64_t num_dst = indptr.size(0) - 1;
  TORCH_CHECK_VALUE(num_dst <= x.size(0), "tessera::sage_layer: ", num_dst,
                    " destinations but x has ", x.size(0),
                    " rows (the destinations are the first source nodes)");
  TORCH_CHECK_VALUE(
      w_self.dim() == 2 && w_self.sizes() == w_neigh.sizes() && w_self.size(1) == x.size(1),
      "tessera::sage_layer: w_self and w_neigh must both be [out, ", x.size(1), "], got ",
      w_self.sizes(), " and ", w_neigh.sizes());
  const int64_t out = w_neigh.size(0);
  TORCH_CHECK_VALUE(!bias.has_value() || !bias->defined() || bias->sizes() == at::IntArrayRef{out},
                    "tessera::sage_layer: bias must be [", out, "], got ",
                    bias.has_value() ? bias->sizes() : at::IntArrayRef{});
  return tessera::train::sage_forward(
      x, num_dst, w_self, w_neigh, bias.has_value() ? *bias : at::Tensor(),
      [&](const at::Tensor& h) { return mean_aggregate(h, src, indptr, engine); });
}

std::string torch_version() {
  return TESSERA_TORCH_VERSION;
}

}  // namespace

// One kernel for every device and for autograd (CompositeImplicitAutograd): the C++
// autograd::Function inside mean_aggregate records its backward node when h_src requires grad,
// and sage_layer's ATen operators record theirs.
TORCH_LIBRARY(tessera, m) {
  m.def("mean_aggregate(Tensor h_src, Tensor src, Tensor indptr, str engine='rows') -> Tensor",
        &mean_aggregate);
  m.def(
      "sage_layer(Tensor x, Tensor src, Tensor indptr, Tensor w_self, Tensor w_neigh, "
      "Tensor? bias, str engine='rows') -> Tensor",
      &sage_layer);
  m.def("torch_version() -> str", &torch_version);
}
