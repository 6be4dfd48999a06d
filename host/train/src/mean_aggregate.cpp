// SPDX-License-Identifier: Apache-2.0
#include "mean_aggregate.hpp"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>

namespace tessera::train {

namespace {

// C = op(A) h: A the CSR pattern (indptr, src) with values 1 / the row's degree, op(A) = A
// (num_dst x F) or A^T (num_src x F, the gradient w.r.t. h).
at::Tensor csr_mean(const at::Tensor& indptr, const at::Tensor& src, int64_t num_src,
                    const at::Tensor& h, bool transpose, ops::SpmmEngine engine) {
  const at::Tensor b = h.contiguous();
  const int64_t num_dst = indptr.size(0) - 1;
  at::Tensor c = at::empty({transpose ? num_src : num_dst, b.size(1)}, b.options());
  const ops::Memory mem = b.is_cuda() ? ops::Memory::kDevice : ops::Memory::kHost;
  ops::CsrRef a{ops::IndexRef{indptr.data_ptr<int64_t>(), DType::kInt64, num_dst + 1, mem},
                ops::IndexRef{src.data_ptr<int64_t>(), DType::kInt64, src.size(0), mem}, num_dst,
                num_src};
  ops::ExecOptions eo;
  // On the CPU torch's threads, as every other operator of the model (torch.set_num_threads,
  // OMP_NUM_THREADS; tessera train's --threads), not the library's own default of every core.
  eo.num_threads = b.is_cuda() ? 0 : at::get_num_threads();
  // On a GPU: torch's current stream of b's device, with that device current (the kernels
  // launch on the current device). Device-generic c10 calls: no CUDA header is needed here, so
  // the operator library builds wherever torch's headers are.
  std::optional<c10::DeviceGuard> on_device;
  if (b.is_cuda()) {
    on_device.emplace(b.device());
    eo.stream = static_cast<cuda::StreamHandle>(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                                                    ->getStream(b.device())
                                                    .native_handle());
  }
  ops::spmm(a, ops::MatrixRef{b.data_ptr(), DType::kFloat32, b.size(0), b.size(1), mem},
            ops::MatrixRef{c.data_ptr(), DType::kFloat32, c.size(0), c.size(1), mem},
            ops::Reduce::kMean, transpose, eo, engine);
  return c;
}

// op(A) h as an autograd function, for either op: A's backward is A^T's forward and A^T's
// backward A's, so the backward records its own graph (double backward, e.g. a gradient
// penalty, differentiates through it instead of taking the gradient as a constant).
struct CsrMean : torch::autograd::Function<CsrMean> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& h,
                            const at::Tensor& src, const at::Tensor& indptr, int64_t engine,
                            bool transpose, int64_t num_src) {
    ctx->save_for_backward({src, indptr});
    ctx->saved_data["num_src"] = num_src;
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["transpose"] = transpose;
    return csr_mean(indptr, src, num_src, h, transpose, static_cast<ops::SpmmEngine>(engine));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t num_src = ctx->saved_data["num_src"].toInt();
    const int64_t engine = ctx->saved_data["engine"].toInt();
    const bool transpose = ctx->saved_data["transpose"].toBool();
    return {CsrMean::apply(grads[0], saved[0], saved[1], engine, !transpose, num_src),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor mean_aggregate(const at::Tensor& h, const at::Tensor& src, const at::Tensor& indptr,
                          ops::SpmmEngine engine) {
  return CsrMean::apply(h, src, indptr, static_cast<int64_t>(engine), false, h.size(0));
}

}  // namespace tessera::train
