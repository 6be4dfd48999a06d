// SPDX-License-Identifier: Apache-2.0
#include "mean_aggregate.hpp"

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

struct CsrMean : torch::autograd::Function<CsrMean> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& h,
                            const at::Tensor& src, const at::Tensor& indptr, int64_t engine) {
    ctx->save_for_backward({src, indptr});
    ctx->saved_data["num_src"] = h.size(0);
    ctx->saved_data["engine"] = engine;
    return csr_mean(indptr, src, h.size(0), h, false, static_cast<ops::SpmmEngine>(engine));
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t num_src = ctx->saved_data["num_src"].toInt();
    const auto engine = static_cast<ops::SpmmEngine>(ctx->saved_data["engine"].toInt());
    return {csr_mean(saved[1], saved[0], num_src, grads[0], true, engine), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor mean_aggregate(const at::Tensor& h, const at::Tensor& src, const at::Tensor& indptr,
                          ops::SpmmEngine engine) {
  return CsrMean::apply(h, src, indptr, static_cast<int64_t>(engine));
}

}  // namespace tessera::train
